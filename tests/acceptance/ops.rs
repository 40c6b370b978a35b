//! The operators' API through the running local stack: a pull run, a mismatching re-delivery
//! reviewed with a field-level diff and accepted as a new delivery under an operator-stated
//! identity (the original evidence untouched), a rejection, delivery and run status, presigned
//! raw-artifact links, scope and tenant isolation.

use acceptance::*;
use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::aws::dynamo::Item;
use feedsafe::domain::model::ReplayState;
use local_stack::{sample_connectors, Stack};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const READER: &str = LOCAL_READER;
const OPERATOR: &str = LOCAL_OPERATOR;
/// An operator of another tenant (written to this test's own tokens file).
const OTHER_OPERATOR: &str = "ops-test-other-tenant-operator";
const KEY: &str = "demo/acme-eu/ACC-1/EXP-8821/2";
const CORRECTED: &str = "demo/acme-eu/ACC-1/EXP-8821/2-corrected";

async fn stack(env: &TestEnv) -> Stack {
    spawn_stack_with_other_tenant(env, OTHER_OPERATOR).await
}

/// The open quarantine list once it holds exactly one entry.
async fn open_entries(url: String) -> Value {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let (status, body) = call("GET", url.clone(), Some(OPERATOR), Value::Null).await;
        assert_eq!(status, 200, "{body}");
        if body["entries"].as_array().is_some_and(|e| e.len() == 1) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out waiting for one open quarantine entry");
}

fn row(quantity: u64) -> Value {
    offer(
        "AX-440-R2",
        quantity as i64,
        "820.00",
        "2026-11-29T08:00:00Z",
    )
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

/// The stored item of an observation, attribute for attribute.
async fn observation_item(env: &TestEnv, id: &str) -> Item {
    env.clients
        .dynamodb
        .get_item()
        .table_name(&env.table)
        .key("pk", AttributeValue::S(format!("OBS#{id}")))
        .key("sk", AttributeValue::S("OBS".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("observation stored")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_reviews_a_mismatch_and_accepts_it_as_a_new_delivery_without_touching_the_original(
) {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let base = stack.base_url();
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();

    // The essay's export, pulled through the ops route: page 2 says quantity 6.
    stack.supplier.set_export(
        "acme-eu",
        "EXP-8821",
        vec![
            vec![offer("AX-100", 1, "1.00", "2026-11-29T08:00:00Z")],
            vec![row(6)],
            vec![offer("AX-300", 3, "3.00", "2026-11-29T08:00:00Z")],
        ],
    );
    let runs = format!("{base}/v1/connectors/acme-eu/runs");
    let (status, _) = call("POST", runs.clone(), Some(READER), Value::Null).await;
    assert_eq!(status, 403, "a reader never starts ingestion");
    let (status, _) = call("POST", runs.clone(), Some(OTHER_OPERATOR), Value::Null).await;
    assert_eq!(
        status, 404,
        "another tenant's connector does not exist for it"
    );
    let (status, report) = call("POST", runs, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 202, "{report}");
    let run_id = report["run_id"].as_str().unwrap().to_owned();
    wait_until("the run's three pages to commit", || async {
        env.store.run_pages(&run_id).await.unwrap().pages.len() == 3
    })
    .await;
    let original = env.replay(KEY).await.expect("page 2 committed");
    assert_eq!(original.state, ReplayState::Committed);
    let original_observation = original.observation_ids[0].clone();
    let original_item = observation_item(&env, original_observation.as_str()).await;

    // Run status for operators.
    let (status, run) = call(
        "GET",
        format!("{base}/v1/runs/{run_id}"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["credential_ref"], "local/acme-eu/export-token");
    assert_eq!(run["pages_requested"], json!([1, 2, 3]));
    assert_eq!(run["pages_committed"], json!([1, 2, 3]));
    assert_eq!(run["pages_missing"], json!([]));
    assert!(
        run["delivery_keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == KEY),
        "{run}"
    );
    let (status, _) = call(
        "GET",
        format!("{base}/v1/runs/{run_id}"),
        Some(OTHER_OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);

    // The same key comes back with quantity 5: quarantined, nothing stored changes.
    env.send(
        "IngestQueue",
        &plain_envelope(
            &acme,
            "EXP-8821/2",
            &export_page("EXP-8821", 2, 3, vec![row(5)]),
        ),
    )
    .await;
    let list_url = format!("{base}/v1/quarantine");
    let listed = open_entries(list_url.clone()).await;
    let entry = &listed["entries"][0];
    assert_eq!(entry["kind"], "mismatch");
    assert_eq!(entry["reason_code"], "replay_payload_mismatch");
    assert_eq!(entry["status"], "open");
    assert_eq!(entry["delivery_key"], KEY);
    let id = entry["quarantine_id"].as_str().unwrap().to_owned();

    // Scope and tenant isolation.
    let (status, body) = call("GET", list_url.clone(), Some(READER), Value::Null).await;
    assert_eq!((status, code(&body)), (403, "forbidden"));
    let (status, body) = call("GET", list_url.clone(), None, Value::Null).await;
    assert_eq!((status, code(&body)), (401, "unauthorized"));
    let (status, body) = call("GET", list_url.clone(), Some(OTHER_OPERATOR), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(body["entries"], json!([]), "another tenant sees nothing");
    let (status, _) = call(
        "GET",
        format!("{list_url}/{id}"),
        Some(OTHER_OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);

    // The review: a field-level diff of the stored payload against the quarantined one.
    let (status, shown) = call(
        "GET",
        format!("{list_url}/{id}"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["diff"]["format"], "json", "{shown}");
    assert_eq!(
        shown["diff"]["differences"],
        json!([{"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5}]),
        "{shown}"
    );
    assert_eq!(
        shown["diff"]["stored_artifact_key"],
        original.artifact_key.as_str()
    );

    // Delivery status shows the record and its quarantine entry.
    let (status, delivery) = call(
        "GET",
        format!("{base}/v1/deliveries/{KEY}"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{delivery}");
    assert_eq!(delivery["state"], "COMMITTED");
    assert_eq!(delivery["attempts"], 1, "a mismatch counts no attempt");
    assert_eq!(
        delivery["fingerprint"],
        json!(original.fingerprint.to_string())
    );
    assert_eq!(
        delivery["artifact"]["sha256"],
        original.payload_sha256.as_str()
    );
    assert_eq!(delivery["run"]["run_id"], run_id.as_str());
    assert_eq!(delivery["dedup_confidence"], "within_horizon");
    assert_eq!(delivery["quarantine"][0]["quarantine_id"], id.as_str());
    let (status, _) = call(
        "GET",
        format!("{base}/v1/deliveries/{KEY}"),
        Some(OTHER_OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(
        "GET",
        format!("{base}/v1/deliveries/{KEY}"),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 403);

    // Refusals: the original identity, no reason, an unknown action.
    let resolve = format!("{list_url}/{id}/resolve");
    for (body, expected) in [
        (
            json!({"action": "accept_as_new_delivery", "delivery_id": "EXP-8821/2", "reason": "x"}),
            400,
        ),
        (
            json!({"action": "accept_as_new_delivery", "delivery_id": "EXP-8821/2-corrected", "reason": " "}),
            400,
        ),
        (json!({"action": "merge", "reason": "x"}), 400),
    ] {
        let (status, answer) = call("POST", resolve.clone(), Some(OPERATOR), body).await;
        assert_eq!(
            (status, code(&answer)),
            (expected, "invalid_request"),
            "{answer}"
        );
    }
    let (status, _) = call(
        "POST",
        resolve.clone(),
        Some(READER),
        json!({"action": "reject", "reason": "x"}),
    )
    .await;
    assert_eq!(status, 403);

    // Accept under an operator-stated identity.
    let (status, accepted) = call(
        "POST",
        resolve.clone(),
        Some(OPERATOR),
        json!({"action": "accept_as_new_delivery", "delivery_id": "EXP-8821/2-corrected", "reason": "supplier confirmed 5 is the corrected count"}),
    )
    .await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["status"], "accepted");
    assert_eq!(accepted["new_delivery_key"], CORRECTED);
    wait_until("the new delivery to commit", || async {
        env.replay(CORRECTED)
            .await
            .is_some_and(|r| r.state == ReplayState::Committed)
    })
    .await;
    let corrected = env.replay(CORRECTED).await.unwrap();
    assert_eq!(corrected.identity_basis, "operator");
    assert!(corrected.run.is_none());
    let new_observations = env.observations_of(CORRECTED).await;
    assert_eq!(new_observations.len(), 1);
    assert_eq!(new_observations[0].quantity, 5);
    assert_eq!(new_observations[0].item, "AX-440-R2~each~new");

    // The original delivery and its evidence are exactly as they were.
    assert_eq!(
        observation_item(&env, original_observation.as_str()).await,
        original_item,
        "the original observation is byte-identical"
    );
    assert_eq!(env.replay(KEY).await.unwrap(), original);
    assert_eq!(env.observations_of(KEY).await.len(), 1);

    // Resolved once: a second resolve of any kind is refused.
    for body in [
        json!({"action": "accept_as_new_delivery", "delivery_id": "EXP-8821/2-corrected", "reason": "again"}),
        json!({"action": "reject", "reason": "changed my mind"}),
    ] {
        let (status, answer) = call("POST", resolve.clone(), Some(OPERATOR), body).await;
        assert_eq!(
            (status, code(&answer)),
            (409, "already_resolved"),
            "{answer}"
        );
    }
    let (_, open) = call("GET", list_url.clone(), Some(OPERATOR), Value::Null).await;
    assert_eq!(open["entries"], json!([]), "no open entries remain");
    let (_, all) = call(
        "GET",
        format!("{list_url}?status=all"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(all["entries"][0]["status"], "accepted");
    assert_eq!(
        all["entries"][0]["resolution"]["new_delivery_key"],
        CORRECTED
    );
    // The resolution history is append-only: the claim, then its completion; the refused
    // second resolves added nothing and rewrote nothing.
    let accepted_id = all["entries"][0]["quarantine_id"].as_str().unwrap();
    let (_, shown) = call(
        "GET",
        format!("{list_url}/{accepted_id}"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    let history: Vec<(&str, &str)> = shown["resolutions"]
        .as_array()
        .expect("the entry lists its resolutions")
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        history,
        vec![
            (
                "accept_requested",
                "supplier confirmed 5 is the corrected count"
            ),
            ("accepted", "supplier confirmed 5 is the corrected count"),
        ]
    );
    assert!(shown["resolution"]["resolved_at"].is_string(), "{shown}");

    // A second mismatch (quantity 4) is rejected: only its status changes.
    env.send(
        "IngestQueue",
        &plain_envelope(
            &acme,
            "EXP-8821/2",
            &export_page("EXP-8821", 2, 3, vec![row(4)]),
        ),
    )
    .await;
    let rejected_id = open_entries(list_url.clone()).await["entries"][0]["quarantine_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reject = format!("{list_url}/{rejected_id}/resolve");
    let (status, answer) = call(
        "POST",
        reject.clone(),
        Some(OPERATOR),
        json!({"action": "reject", "reason": "stale re-send"}),
    )
    .await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("rejected")),
        "{answer}"
    );
    let (status, answer) = call(
        "POST",
        reject,
        Some(OPERATOR),
        json!({"action": "reject", "reason": "again"}),
    )
    .await;
    assert_eq!((status, code(&answer)), (409, "already_resolved"));
    assert_eq!(env.replay(KEY).await.unwrap(), original);

    // Auditors: presigned links to the literal payloads, never on reader routes.
    let (status, link) = call(
        "GET",
        format!("{base}/v1/deliveries/{KEY}/artifact"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{link}");
    assert_eq!(link["artifact_key"], original.artifact_key.as_str());
    assert_eq!(link["sha256"], original.payload_sha256.as_str());
    assert_eq!(link["expires_in_seconds"], 300);
    let (status, bytes) = get_bytes(link["url"].as_str().unwrap().to_owned()).await;
    assert_eq!(status, 200);
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&bytes),
        original.payload_sha256,
        "the link serves the stored artifact"
    );
    let (status, link) = call(
        "GET",
        format!("{base}/v1/observations/{original_observation}/artifact"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{link}");
    assert_eq!(link["sha256"], original.payload_sha256.as_str());
    let (status, _) = call(
        "GET",
        format!("{base}/v1/observations/{original_observation}/artifact"),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 403, "readers never get the raw archive");
    let (status, _) = call(
        "GET",
        format!("{base}/v1/deliveries/{KEY}/artifact"),
        Some(OTHER_OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
    let (status, observation) = call(
        "GET",
        format!("{base}/v1/observations/{original_observation}"),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        !observation.to_string().contains("X-Amz-Signature"),
        "{observation}"
    );

    // Identity corrections and source quarantines through the API.
    let (status, correction) = call(
        "POST",
        format!("{base}/v1/identity-corrections"),
        Some(OPERATOR),
        json!({"connector": "acme-eu", "source_account": "ACC-1", "from_item": "AX-100", "to_item": "AX-100~rB~each~new", "reason": "suffix resolved"}),
    )
    .await;
    assert_eq!(status, 201, "{correction}");
    assert_eq!(
        correction["superseded_observations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (status, body) = call(
        "POST",
        format!("{base}/v1/identity-corrections"),
        Some(OTHER_OPERATOR),
        json!({"connector": "acme-eu", "from_item": "AX-100", "to_item": "AX-100~rC~each~new", "reason": "x"}),
    )
    .await;
    assert_eq!((status, code(&body)), (404, "unknown_connector"));
    let (status, quarantine) = call(
        "POST",
        format!("{base}/v1/source-quarantines"),
        Some(OPERATOR),
        json!({"connector": "acme-eu", "source_account": "ACC-1", "reason": "supplier feed under investigation"}),
    )
    .await;
    assert_eq!(status, 201, "{quarantine}");
    assert_eq!(quarantine["active"], true);
    let (status, body) = call(
        "POST",
        format!("{base}/v1/source-quarantines"),
        Some(OPERATOR),
        json!({"connector": "acme-eu", "source_account": "ACC-2", "reason": "x"}),
    )
    .await;
    assert_eq!((status, code(&body)), (400, "invalid_request"));
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quarantine_diff_compares_with_the_payload_judged_against_not_a_later_epoch() {
    use feedsafe::protocols::ingest::IngestOutcome;
    use feedsafe::protocols::ports::{NoFaults, OffsetClock};
    use std::sync::Arc;

    // No TTL: the expired record must still be present when the key comes back.
    let env = spawn_env(false).await;
    let stack = stack(&env).await;
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();
    let key = "demo/acme-eu/ACC-1/EXP-8821/2";
    let page = |quantity: u64| export_page("EXP-8821", 2, 3, vec![row(quantity)]);
    let envelope = |quantity: u64| plain_envelope(&acme, "EXP-8821/2", &page(quantity));
    let past = env.service_with(
        Arc::new(OffsetClock(-(acme.horizon_seconds() + 86_400))),
        Arc::new(NoFaults),
    );

    // A month and a horizon ago: K stored with payload A (quantity 6), then B (quantity 5)
    // under the same key is quarantined.
    let a = match past.ingest_message(&envelope(6)).await.unwrap() {
        IngestOutcome::Committed(result) => result,
        other => panic!("A was not committed: {other:?}"),
    };
    let quarantine_id = match past.ingest_message(&envelope(5)).await.unwrap() {
        IngestOutcome::Mismatch(report) => report.quarantine_id,
        other => panic!("B was not quarantined: {other:?}"),
    };

    // Today K's record has expired, and payload C (quantity 4) is stored as a new epoch.
    let c = match env.service().ingest_message(&envelope(4)).await.unwrap() {
        IngestOutcome::Committed(result) => result,
        other => panic!("C was not stored beyond the horizon: {other:?}"),
    };
    assert_eq!(c.epoch, 1);
    assert_ne!(c.artifact_key, a.artifact_key);
    assert_eq!(env.replay(key).await.unwrap().artifact_key, c.artifact_key);

    // The diff of B's entry is A against B: the payload the mismatch was judged against.
    let (status, shown) = call(
        "GET",
        format!("{}/v1/quarantine/{quarantine_id}", stack.base_url()),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["diff"]["stored_artifact_key"],
        a.artifact_key.as_str(),
        "{shown}"
    );
    assert_eq!(
        shown["diff"]["differences"],
        json!([{"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5}]),
        "{shown}"
    );
}
