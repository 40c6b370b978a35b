//! DESIGN.md's cost target: a fresh delivery of N rows costs one S3 write plus ceil(N/98)
//! transactions; a replay costs no more. Counted per SDK operation on the real engines.

use crate::ingest::big_page;
use acceptance::*;
use feedsafe::ingest::IngestOutcome;
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
        assert_eq!(
            count(&fresh, "DynamoDB.UpdateItem") + count(&fresh, "DynamoDB.PutItem"),
            0,
            "{fresh:?}"
        );
        // The connector lookup (cached for 30 s in Lambda, not here) and the source's identity
        // rules (read once per attempt, only on the paths that write observations).
        assert_eq!(count(&fresh, "DynamoDB.GetItem"), 2, "{fresh:?}");
        // moto echoes no checksum, so the new object is read back to verify it; on S3 the
        // PutObject response carries the verified checksum and these two are zero.
        assert!(
            count(&fresh, "S3.HeadObject") <= 1 && count(&fresh, "S3.GetObject") <= 1,
            "{fresh:?}"
        );

        let outcome = service.ingest_message(&envelope).await.unwrap();
        assert!(matches!(outcome, IngestOutcome::Replayed(_)));
        let replay = counter.take();
        assert_eq!(
            count(&replay, "S3.PutObject"),
            1,
            "{rows} rows replay: {replay:?}"
        );
        assert_eq!(
            count(&replay, "DynamoDB.UpdateItem"),
            1,
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
        // A replay writes no observation, so it never reads the identity rules.
        assert_eq!(count(&replay, "DynamoDB.GetItem"), 1, "{replay:?}");
        report.push(format!("{rows} rows: fresh {fresh:?}; replay {replay:?}"));
    }
    println!("{}", report.join("\n"));
}
