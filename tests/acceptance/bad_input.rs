//! Poison input: each kind gets its own stable code, nothing is committed, nothing loops.

use acceptance::*;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::envelope::{BodyRef, DeliveryEnvelope};
use feedsafe::domain::model::QuarantineKind;
use feedsafe::protocols::ingest::IngestOutcome;
use serde_json::json;
use std::collections::BTreeMap;

fn row_page(row: serde_json::Value) -> Vec<u8> {
    export_page("EXP-BAD", 1, 1, vec![row])
}

#[tokio::test(flavor = "multi_thread")]
async fn each_kind_of_bad_input_is_rejected_with_its_own_code_and_nothing_is_committed() {
    let env = spawn_env(true).await;
    let acme = ConnectorConfig {
        max_body_bytes: 4096,
        ..acme_eu()
    };
    env.seed(&acme).await;
    let good = offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z");
    let with = |field: &str, value: serde_json::Value| {
        let mut row = good.clone();
        row[field] = value;
        row_page(row)
    };
    let unknown = ConnectorConfig {
        connector: feedsafe::domain::ids::ConnectorId::parse("nobody").unwrap(),
        ..acme.clone()
    };
    let oversized_inline = export_page(
        "EXP-BIG",
        1,
        1,
        (0..100)
            .map(|i| offer(&format!("P-{i}"), 1, "1.00", "2026-11-29T08:00:00Z"))
            .collect(),
    );
    assert!(oversized_inline.len() > 4096);
    let mut claim_checked: DeliveryEnvelope =
        serde_json::from_slice(&plain_envelope(&acme, "CLAIM/1", b"{}")).unwrap();
    claim_checked.body = BodyRef::S3 {
        bucket: env.bucket.clone(),
        key: "claims/huge".into(),
        version_id: None,
        size: 10_000_000,
    };

    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "invalid_envelope",
            b"{\"this is\": \"not an envelope\"".to_vec(),
        ),
        (
            "unknown_connector",
            plain_envelope(&unknown, "EXP-1/1", &row_page(good.clone())),
        ),
        (
            "invalid_quantity",
            plain_envelope(&acme, "EXP-2/1", &with("quantity", json!(-3))),
        ),
        (
            "invalid_price",
            plain_envelope(&acme, "EXP-3/1", &with("price", json!("8,20 EUR"))),
        ),
        (
            "unknown_currency",
            plain_envelope(&acme, "EXP-4/1", &with("currency", json!("EUX"))),
        ),
        (
            "payload_too_large",
            plain_envelope(&acme, "EXP-5/1", &oversized_inline),
        ),
        ("payload_too_large", claim_checked.to_json().into_bytes()),
        (
            "invalid_payload",
            plain_envelope(&acme, "EXP-6/1", b"<xml>not json</xml>"),
        ),
    ];
    let service = env.service();
    for (code, message) in &cases {
        env.send("IngestQueue", message).await;
        // Directly as well, to read the outcome.
        match service
            .ingest_message(message)
            .await
            .expect("a refusal is final, not transient")
        {
            IngestOutcome::Rejected(report) => assert_eq!(report.code.as_str(), *code),
            other => panic!("{code}: expected a rejection, got {other:?}"),
        }
    }
    // Through the queue: every poison message is acknowledged on its first receive.
    let mut seen = 0;
    while seen < cases.len() {
        let (received, failed) = env.pump_once("IngestQueue", &service, 1).await;
        assert_eq!(failed, 0, "a poison message is never handed back for retry");
        assert!(received > 0, "messages missing from the queue");
        seen += received;
    }
    assert_eq!(env.queue_depth("IngestQueue").await, (0, 0));
    assert_eq!(env.queue_depth("IngestDLQ").await, (0, 0));

    assert!(env.replay_records().await.is_empty(), "no replay record");
    assert!(env.observations().await.is_empty(), "no observation");
    let entries = env.quarantine().await;
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &entries {
        assert_eq!(entry.kind, QuarantineKind::Rejected);
        assert!(!entry.message.is_empty());
        // The literal message is kept as evidence.
        let evidence = env.read_object(&entry.evidence_key).await;
        assert_eq!(
            feedsafe::domain::hashing::sha256_hex(&evidence),
            entry.evidence_sha256
        );
        *by_code.entry(entry.reason_code.clone()).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = BTreeMap::from([
        ("invalid_envelope".into(), 1),
        ("unknown_connector".into(), 1),
        ("invalid_quantity".into(), 1),
        ("invalid_price".into(), 1),
        ("unknown_currency".into(), 1),
        ("payload_too_large".into(), 2),
        ("invalid_payload".into(), 1),
    ]);
    assert_eq!(
        by_code, expected,
        "one entry per message, however often it was delivered"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transient_failure_is_redelivered_and_lands_in_the_dlq_after_max_receives() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (dynamodb, _) = engine_endpoints();
    let broken = feedsafe::aws::AwsClients::local(&dynamodb, "http://127.0.0.1:9");
    let failing = feedsafe::protocols::ingest::IngestService::new(
        env.store.clone(),
        std::sync::Arc::new(feedsafe::aws::s3::S3ArtifactStore::new(
            broken.s3,
            &env.bucket,
        )),
        env.store.clone(),
        std::sync::Arc::new(feedsafe::protocols::ports::SystemClock),
        std::sync::Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    let body = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
    );
    env.send(
        "IngestQueue",
        &page_envelope(&acme, "EXP-8821", 2, 3, &body),
    )
    .await;
    let max_receives = 5; // template.yaml: IngestMaxReceiveCount default
    let mut failures = 0;
    for _ in 0..40 {
        let (received, failed) = env.pump_once("IngestQueue", &failing, 1).await;
        assert_eq!(
            received, failed,
            "every attempt fails while the archive is down"
        );
        failures += failed;
        if env.queue_depth("IngestDLQ").await.0 == 1 {
            break;
        }
        if received == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }
    assert_eq!(
        failures, max_receives,
        "retried until maxReceiveCount, then dead-lettered"
    );
    assert_eq!(env.queue_depth("IngestDLQ").await.0, 1);
    assert!(env.observations().await.is_empty());
}
