//! The ingest role against what ingest really calls: `check_transformed.py` attributes calls to
//! functions from a table kept by hand (every binary links the whole shared crate), so here the
//! ingest service runs its paths through a request counter on the local engines, and every
//! operation it sent must be allowed by `IngestRole` in template.yaml. A call added to the code
//! without its action in the role fails here instead of with AccessDenied after `sam deploy`.
//! Actions only: which resources each statement names (the table, the `raw/` and `rejected/`
//! prefixes) is `check_transformed.py`'s and `privilege.rs`'s to check.

use super::*;
use acceptance::*;
use feedsafe::domain::envelope::{BodyRef, DeliveryEnvelope};
use std::collections::BTreeSet;

/// The IAM actions that authorise one SDK operation (`Service.Operation`, as counted).
fn iam_actions(operation: &str) -> Vec<String> {
    let (service, name) = operation.split_once('.').expect("Service.Operation");
    match (service, name) {
        // Authorised per contained action; ingest's transactions put, update and check.
        ("DynamoDB", "TransactWriteItems") => vec![
            "dynamodb:PutItem".into(),
            "dynamodb:UpdateItem".into(),
            "dynamodb:ConditionCheckItem".into(),
        ],
        ("DynamoDB", name) => vec![format!("dynamodb:{name}")],
        ("S3", "HeadObject") => vec!["s3:GetObject".into()],
        ("S3", name) => vec![format!("s3:{name}")],
        (other, _) => panic!("ingest called {other}, which this check does not map"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_call_ingest_makes_is_allowed_by_its_role() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let counter = RequestCounter::default();
    let service = env.counted_service(&counter);
    let page = |export: &str, rows: usize, quantity: i64| {
        export_page(
            export,
            1,
            1,
            (0..rows)
                .map(|i| {
                    offer(
                        &format!("{export}-{i}"),
                        quantity,
                        "9.50",
                        "2026-11-29T08:00:00Z",
                    )
                })
                .collect(),
        )
    };
    let staged = page("EXP-IAM", 150, 1);
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<serde_json::Value>(&staged).unwrap())
            .unwrap();
    // A claim-checked body (as the webhook function enqueues a large one).
    let claimed = page("EXP-IAM-CLAIM", 3, 1);
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key("claims/iam")
        .body(claimed.clone().into())
        .send()
        .await
        .expect("claim stored");
    let mut claim: DeliveryEnvelope =
        serde_json::from_slice(&plain_envelope(&acme, "EXP-IAM-CLAIM/1", b"{}")).unwrap();
    claim.body = BodyRef::S3 {
        bucket: env.bucket.clone(),
        key: "claims/iam".into(),
        version_id: None,
        size: claimed.len() as u64,
    };
    let deliveries: Vec<(&str, Vec<u8>)> = vec![
        (
            "fresh, one transaction",
            page_envelope(&acme, "EXP-IAM-1", 1, 1, &page("EXP-IAM-1", 2, 1)),
        ),
        (
            "fresh, staged in chunks",
            page_envelope(&acme, "EXP-IAM", 1, 1, &staged),
        ),
        (
            "byte-identical replay",
            page_envelope(&acme, "EXP-IAM", 1, 1, &staged),
        ),
        (
            "re-serialized replay",
            page_envelope(&acme, "EXP-IAM", 1, 1, &pretty),
        ),
        (
            "mutated replay",
            page_envelope(&acme, "EXP-IAM", 1, 1, &page("EXP-IAM", 150, 2)),
        ),
        ("claim-checked body", claim.to_json().into_bytes()),
        (
            "refused payload",
            plain_envelope(&acme, "EXP-IAM-BAD/1", b"not json"),
        ),
        ("invalid envelope", b"{\"not\": \"an envelope\"".to_vec()),
    ];
    let mut called = BTreeSet::new();
    for (what, envelope) in &deliveries {
        service
            .ingest_message(envelope)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        called.extend(counter.take().into_keys());
    }

    assert_role_allows("IngestFunction", &called, iam_actions);
}
