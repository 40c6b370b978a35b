//! Verification records through the running local stack: a verifier's authority apart from
//! readers' and operators', shown on the claim it names only, expiring, withdrawn as a record of
//! its own, its evidence document stored once under its sha256 (docs/architecture.md section 3).

use acceptance::*;
use base64::Engine;
use feedsafe::domain::hashing::sha256_hex;
use feedsafe::domain::timestamp::Timestamp;
use local_stack::{sample_connectors, Stack};
use serde_json::{json, Value};

const VERIFIER: &str = "local-verifier-demo-token";

async fn send_claim(env: &TestEnv, stack: &Stack, export: &str, quantity: i64, observed_at: &str) {
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();
    let body = export_page(
        export,
        1,
        1,
        vec![offer("AX-440-R2", quantity, "820.00", observed_at)],
    );
    env.send(
        "IngestQueue",
        &plain_envelope(&acme, &format!("{export}/1"), &body),
    )
    .await;
}

/// The acme-eu offer of AX-440-R2 once it claims `quantity`.
async fn offer_claiming(stack: &Stack, quantity: i64) -> Value {
    let url = format!("{}/v1/items/AX-440-R2/offers", stack.base_url());
    for _ in 0..150 {
        let found = offer_of(&url, LOCAL_READER, "acme-eu")
            .await
            .unwrap_or_default();
        if found["quantity"] == quantity {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the acme-eu offer never claimed {quantity}");
}

async fn as_verifier(stack: &Stack, method: &'static str, path: &str, body: Value) -> (u16, Value) {
    call(
        method,
        format!("{}{path}", stack.base_url()),
        Some(VERIFIER),
        body,
    )
    .await
}

async fn observation(stack: &Stack, id: &str) -> Value {
    let url = format!("{}/v1/observations/{id}", stack.base_url());
    let (status, body) = call("GET", url, Some(LOCAL_READER), Value::Null).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn in_seconds(seconds: i64) -> String {
    Timestamp::now().plus_seconds(seconds).to_rfc3339()
}

/// "Stock >= 1,000 of AX-440-R2 from acme-eu, by reservation R-17, evidence PDF, expires in
/// one hour."
fn reservation(observation_id: &str, pdf: &[u8]) -> Value {
    json!({
        "observation_id": observation_id,
        "item": "AX-440-R2",
        "connector": "acme-eu",
        "scope": {"kind": "stock_at_least", "quantity": "1000"},
        "method": "reservation",
        "reference": "R-17",
        "evidence": {"document": {
            "content_type": "application/pdf",
            "file_name": "R-17.pdf",
            "content_base64": base64::engine::general_purpose::STANDARD.encode(pdf),
            "sha256": sha256_hex(pdf),
        }},
        "expires_at": in_seconds(3600),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_verification_shows_on_its_claim_until_it_expires_or_is_withdrawn() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    send_claim(&env, &stack, "EXP-V1", 1500, "2026-11-29T08:00:00Z").await;
    let first = offer_claiming(&stack, 1500).await;
    assert_eq!(first["verification"], json!({"state": "unverified"}));
    assert!(first["recorded_at"].is_string(), "{first}");
    let first_id = first["observation_id"].as_str().unwrap().to_owned();
    let id = verify_by_reservation(&env, &stack, &first_id).await;

    // A newer claim of the same source starts unverified; the older keeps its verification.
    send_claim(&env, &stack, "EXP-V2", 900, "2026-11-29T09:00:00Z").await;
    let newer = offer_claiming(&stack, 900).await;
    assert_eq!(newer["verification"], json!({"state": "unverified"}));
    assert_eq!(
        observation(&stack, &first_id).await["verification"]["state"],
        "verified"
    );
    verify_until_it_expires(&stack, newer["observation_id"].as_str().unwrap()).await;
    withdraw(&stack, &id, &first_id).await;
    let history = history_states(&stack).await;
    assert_eq!(
        history,
        vec![("expired".into(), 900), ("withdrawn".into(), 1500)]
    );
}

/// The reservation's verification of `claim`, its document stored as sent, shown on the offer
/// without changing the claim; its id.
async fn verify_by_reservation(env: &TestEnv, stack: &Stack, claim: &str) -> String {
    let pdf = b"%PDF-1.4\n% reservation R-17: 1,000 x AX-440-R2 held until tonight\n".to_vec();
    let request = reservation(claim, &pdf);
    let (status, record) = as_verifier(stack, "POST", "/v1/verifications", request).await;
    assert_eq!(status, 201, "{record}");
    let id = record["verification_id"].as_str().unwrap().to_owned();
    assert_eq!(record["verified_by"], "local-verifier");
    assert_eq!(record["evidence"]["sha256"], sha256_hex(&pdf));
    let key = record["evidence"]["artifact_key"].as_str().unwrap();
    assert_eq!(
        env.read_object(key).await,
        pdf,
        "the document is stored as sent"
    );

    let verified = offer_claiming(stack, 1500).await;
    assert_eq!(verified["verification"]["state"], "verified", "{verified}");
    assert_eq!(verified["verification"]["record"], id.as_str());
    assert_eq!(
        verified["verification"]["scope"],
        json!({"kind": "stock_at_least", "quantity": "1000"})
    );
    assert_eq!(
        verified["claim"], "source_reported",
        "a verification never upgrades the claim"
    );
    assert_eq!(verified["quantity"], 1500, "nor changes it");
    id
}

/// A two-second verification of the current claim: verified, then expired.
async fn verify_until_it_expires(stack: &Stack, claim: &str) {
    let short = json!({
        "observation_id": claim, "scope": {"kind": "price"}, "method": "call",
        "evidence": {"reference": "call with the supplier's desk"}, "expires_at": in_seconds(2),
    });
    let (status, record) = as_verifier(stack, "POST", "/v1/verifications", short).await;
    assert_eq!(status, 201, "{record}");
    assert_eq!(
        offer_claiming(stack, 900).await["verification"]["state"],
        "verified"
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let expired = offer_claiming(stack, 900).await;
    assert_eq!(expired["verification"]["state"], "expired", "{expired}");
}

/// Withdrawing `id` (of `claim`): a record of its own, once; the first record stays as it was.
async fn withdraw(stack: &Stack, id: &str, claim: &str) {
    let path = format!("/v1/verifications/{id}/withdraw");
    let reason = json!({"reason": "reservation cancelled"});
    let (status, withdrawn) = as_verifier(stack, "POST", &path, reason).await;
    assert_eq!(status, 201, "{withdrawn}");
    assert_eq!(withdrawn["withdrawal"]["reason"], "reservation cancelled");
    let shown = observation(stack, claim).await;
    assert_eq!(shown["verification"]["state"], "withdrawn", "{shown}");
    let (status, again) = as_verifier(stack, "POST", &path, json!({"reason": "twice"})).await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("already_withdrawn"))
    );
    let (status, stored) = as_verifier(
        stack,
        "GET",
        &format!("/v1/verifications/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(
        (
            stored["verification_id"].as_str(),
            stored["evidence"]["kind"].as_str()
        ),
        (Some(id), Some("document")),
        "{stored}"
    );
    assert_eq!(
        stored["withdrawal"]["withdrawal_id"],
        withdrawn["withdrawal"]["withdrawal_id"]
    );
}

/// (verification state, quantity) of each claim in the item's history, newest first.
async fn history_states(stack: &Stack) -> Vec<(String, i64)> {
    let url = format!("{}/v1/items/AX-440-R2/observations", stack.base_url());
    let (status, body) = call("GET", url, Some(LOCAL_READER), Value::Null).await;
    assert_eq!(status, 200, "{body}");
    body["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["verification"]["state"].as_str().unwrap().to_owned(),
                o["quantity"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_verifier_records_and_a_verifier_does_nothing_else() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    send_claim(&env, &stack, "EXP-V3", 1500, "2026-11-29T08:00:00Z").await;
    let claim = offer_claiming(&stack, 1500).await;
    let id = claim["observation_id"].as_str().unwrap();
    let request = reservation(id, b"%PDF-1.4 R-17");
    let url = format!("{}/v1/verifications", stack.base_url());
    for token in [LOCAL_READER, LOCAL_OPERATOR] {
        let (status, body) = call("POST", url.clone(), Some(token), request.clone()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "{token}"
        );
    }
    let (status, _) = call("POST", url.clone(), None, request.clone()).await;
    assert_eq!(status, 401);
    // A verifier's token cannot start a run or resolve a quarantine.
    let (status, _) = as_verifier(&stack, "POST", "/v1/connectors/acme-eu/runs", json!({})).await;
    assert_eq!(status, 403);
    let resolve = json!({"action": "reject", "reason": "not mine to decide"});
    let (status, _) = as_verifier(&stack, "POST", "/v1/quarantine/q_x/resolve", resolve).await;
    assert_eq!(status, 403);

    // The same request twice is one record.
    let (first, a) = as_verifier(&stack, "POST", "/v1/verifications", request.clone()).await;
    let (second, b) = as_verifier(&stack, "POST", "/v1/verifications", request).await;
    assert_eq!((first, second), (201, 200), "{a} {b}");
    assert_eq!(a["verification_id"], b["verification_id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_verification_lists_every_problem_and_stores_nothing() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    send_claim(&env, &stack, "EXP-V4", 1500, "2026-11-29T08:00:00Z").await;
    let claim = offer_claiming(&stack, 1500).await;
    let id = claim["observation_id"].as_str().unwrap();
    let mut bad = reservation(id, b"%PDF-1.4 R-17");
    bad["scope"] = json!({"kind": "stock_at_least", "quantity": "-5"});
    bad["method"] = json!("guess");
    bad["evidence"]["document"]["sha256"] = json!("00".repeat(32));
    bad["expires_at"] = json!("2020-01-01T00:00:00Z");
    let (status, body) = as_verifier(&stack, "POST", "/v1/verifications", bad).await;
    assert_eq!(status, 422, "{body}");
    let pointers = problem_pointers(&body);
    assert_eq!(
        pointers,
        ["/scope", "/method", "/evidence", "/expires_at"],
        "{body}"
    );

    let mut elsewhere = reservation(id, b"%PDF-1.4 R-17");
    elsewhere["connector"] = json!("acme-events");
    let (status, body) = as_verifier(&stack, "POST", "/v1/verifications", elsewhere).await;
    assert_eq!(
        (status, body["problems"][0]["pointer"].as_str()),
        (422, Some("/connector")),
        "{body}"
    );

    let unknown = reservation(&format!("obs_{}", "a".repeat(26)), b"%PDF-1.4 R-17");
    let (status, body) = as_verifier(&stack, "POST", "/v1/verifications", unknown).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    assert!(
        env.object_versions("raw/verifications/").await.is_empty(),
        "no document stored"
    );
    let shown = offer_claiming(&stack, 1500).await;
    assert_eq!(shown["verification"], json!({"state": "unverified"}));
}
