//! The request budget (docs/benchmarks.md): a fresh delivery of N rows costs one S3 write plus
//! ceil(N/98) transactions; a replay costs no more. Each may add one source-health note, which
//! a repeat of the same outcome within 10 s on one instance does not. Counted per SDK operation on the real engines.

use crate::ingest::big_page;
use acceptance::*;
use feedsafe::protocols::ingest::IngestOutcome;
use std::collections::BTreeMap;

fn count(ops: &BTreeMap<String, usize>, name: &str) -> usize {
    ops.get(name).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn fresh_deliveries_and_replays_stay_within_the_request_budget() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let counter = RequestCounter::default();
    let service = env.counted_service(&counter);
    let mut report = Vec::new();
    for rows in [1usize, 98, 99, 400] {
        let export = format!("EXP-B{rows}");
        let envelope = page_envelope(&acme, &export, 1, 1, &big_page(&export, rows));
        counter.take();

        let outcome = service.ingest_message(&envelope).await.unwrap();
        assert!(matches!(outcome, IngestOutcome::Committed(_)));
        let fresh = counter.take();
        let transactions = rows.div_ceil(98);
        assert_eq!(
            count(&fresh, "DynamoDB.TransactWriteItems"),
            transactions,
            "{rows} rows fresh: {fresh:?}"
        );
        assert_eq!(
            count(&fresh, "S3.PutObject"),
            1,
            "{rows} rows fresh: {fresh:?}"
        );
        // The source-health note: this instance last noted another outcome for the connector
        // (a repeat within 10 s is coalesced: the re-serialized replay below writes none).
        assert_eq!(
            count(&fresh, "DynamoDB.UpdateItem") + count(&fresh, "DynamoDB.PutItem"),
            1,
            "{fresh:?}"
        );
        // The connector lookup (cached for 30 s in Lambda, not here), then the replay record
        // (is this byte-identical to what is stored? before any parsing) and the source's
        // identity rules in one `BatchGetItem`: one round trip, not two.
        assert_eq!(count(&fresh, "DynamoDB.GetItem"), 1, "{fresh:?}");
        assert_eq!(count(&fresh, "DynamoDB.BatchGetItem"), 1, "{fresh:?}");
        // moto echoes no checksum, so the new object is read back to verify it; on S3 the
        // PutObject response carries the verified checksum and these two are zero.
        assert!(
            count(&fresh, "S3.HeadObject") <= 1 && count(&fresh, "S3.GetObject") <= 1,
            "{fresh:?}"
        );

        // A byte-identical replay is recognized from the raw bytes' sha256 before any parsing:
        // the record read and the conditional count, nothing sent to S3.
        let outcome = service.ingest_message(&envelope).await.unwrap();
        assert!(matches!(outcome, IngestOutcome::Replayed(_)));
        let replay = counter.take();
        assert_eq!(
            count(&replay, "S3.PutObject"),
            0,
            "{rows} rows replay: {replay:?}"
        );
        // The conditional count, and the source-health note of a replay.
        assert_eq!(
            count(&replay, "DynamoDB.UpdateItem"),
            2,
            "{rows} rows replay: {replay:?}"
        );
        assert_eq!(
            count(&replay, "DynamoDB.TransactWriteItems"),
            0,
            "{replay:?}"
        );
        assert_eq!(
            count(&replay, "S3.HeadObject") + count(&replay, "S3.GetObject"),
            0,
            "{replay:?}"
        );
        // The connector (cached in Lambda), and the replay record read with the rules.
        assert_eq!(count(&replay, "DynamoDB.GetItem"), 1, "{replay:?}");
        assert_eq!(count(&replay, "DynamoDB.BatchGetItem"), 1, "{replay:?}");
        let requests: usize = replay.values().sum();
        assert_eq!(
            requests - 1,
            3,
            "three requests besides the connector: {replay:?}"
        );
        // The same rows in other bytes: parsed, found to be the stored payload by the probe,
        // never a transaction (which the existing record would cancel, billed in full).
        let value: serde_json::Value = serde_json::from_slice(&big_page(&export, rows)).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        let outcome = service
            .ingest_message(&page_envelope(&acme, &export, 1, 1, &pretty))
            .await
            .unwrap();
        assert!(matches!(outcome, IngestOutcome::Replayed(_)), "{outcome:?}");
        let reserialized = counter.take();
        assert_eq!(
            count(&reserialized, "DynamoDB.TransactWriteItems"),
            0,
            "{rows} rows re-serialized replay: {reserialized:?}"
        );
        // A replay again within 10 s on this instance: its note is coalesced, only counted.
        assert_eq!(
            count(&reserialized, "DynamoDB.UpdateItem"),
            1,
            "{rows} rows re-serialized replay: {reserialized:?}"
        );
        report.push(format!(
            "{rows} rows: fresh {fresh:?}; replay {replay:?}; re-serialized {reserialized:?}"
        ));
    }
    println!("{}", report.join("\n"));
}

/// An item's history costs two round trips: one index query (beside it, at the same time, the
/// query of the item's verification records), then one batch read of the
/// observations together with everything their visibility depends on (their sources'
/// quarantine state and identity rules, the connector's publication policy, a staged
/// delivery's commit marker): never a read per observation, per source or per delivery.
#[tokio::test(flavor = "multi_thread")]
async fn an_items_history_reads_its_observations_and_their_context_in_one_batch() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();
    let exports = 12;
    for i in 0..exports {
        let export = format!("EXP-H{i}");
        let observed_at = format!("2026-11-29T{:02}:00:00Z", 8 + i);
        let body = export_page(
            &export,
            1,
            1,
            vec![offer("AX-440-R2", i, "820.00", &observed_at)],
        );
        let outcome = service
            .ingest_message(&page_envelope(&acme, &export, 1, 1, &body))
            .await
            .unwrap();
        assert!(matches!(outcome, IngestOutcome::Committed(_)));
    }
    // A staged delivery (99 rows) with one claim on the item: visible through its commit marker.
    let mut offers = vec![offer("AX-440-R2", 99, "820.00", "2026-11-29T07:00:00Z")];
    offers.extend((0..98).map(|i| offer(&format!("FILL-{i}"), 1, "1.00", "2026-11-29T07:00:00Z")));
    let outcome = service
        .ingest_message(&page_envelope(
            &acme,
            "EXP-HS",
            1,
            1,
            &export_page("EXP-HS", 1, 1, offers),
        ))
        .await
        .unwrap();
    assert!(matches!(outcome, IngestOutcome::Committed(_)));
    let counter = RequestCounter::default();
    let clients = intercepted(&env.clients, counter.clone());
    let store = std::sync::Arc::new(feedsafe::aws::dynamo::DynamoEvidenceStore::new(
        clients.dynamodb,
        &env.table,
    ));
    let query = feedsafe::protocols::query::QueryService::new(store, env.projection_store());

    let history = query
        .history(&env.reader(), "AX-440-R2", None, 100)
        .await
        .unwrap();
    let history = serde_json::to_value(history).unwrap();
    let reads = counter.take();

    let shown = history["observations"].as_array().unwrap();
    let quantities: Vec<i64> = shown
        .iter()
        .map(|o| o["quantity"].as_i64().unwrap())
        .collect();
    let mut newest_first: Vec<i64> = (0..exports).rev().collect();
    newest_first.push(99);
    assert_eq!(quantities, newest_first, "newest first: {history}");
    // The history index and the item's verification records, queried side by side.
    assert_eq!(count(&reads, "DynamoDB.Query"), 2, "{reads:?}");
    assert_eq!(
        (
            count(&reads, "DynamoDB.BatchGetItem"),
            reads.values().sum::<usize>()
        ),
        (1, 3),
        "the observations and their context in one batch: {reads:?}"
    );
    println!("history of {} observations: {reads:?}", shown.len());
}
