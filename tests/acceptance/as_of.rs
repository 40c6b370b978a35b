//! As-of reads and decision receipts through the running local stack: a scenario of a
//! delivery, a later delivery, an identity correction, a quarantine resolution, a source
//! quarantine and its lift, and a verification. The offers answer recorded live after each step
//! is what `as_of` that instant answers later, byte for byte, and each live receipt verifies; a
//! tampered digest does not (docs/architecture.md section 7).

use acceptance::*;
use feedsafe::domain::timestamp::Timestamp;
use local_stack::Stack;
use serde_json::{json, Value};

const VERIFIER: &str = "local-verifier-demo-token";

fn acme(stack: &Stack) -> feedsafe::domain::connector::ConnectorConfig {
    sample_connector(stack, "acme-eu")
}

fn page(export: &str, sku: &str, quantity: i64, observed_at: &str) -> Vec<u8> {
    export_page(
        export,
        1,
        1,
        vec![offer(sku, quantity, "820.00", observed_at)],
    )
}

async fn deliver(env: &TestEnv, stack: &Stack, id: &str, body: &[u8]) {
    env.send("IngestQueue", &plain_envelope(&acme(stack), id, body))
        .await;
}

async fn request(
    stack: &Stack,
    method: &'static str,
    path: &str,
    token: &str,
    body: Value,
) -> Value {
    let (status, answer) = call(
        method,
        format!("{}{path}", stack.base_url()),
        Some(token),
        body,
    )
    .await;
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {answer}"
    );
    answer
}

/// The offers read of AX-440-R2 the scenario records, asked with a quantity and a maximum age
/// so that quotes and freshness gaps are part of the answer.
const OFFERS: &str = "/v1/offers?item=AX-440-R2&quantity=2&max_age_seconds=60";
/// The offers read of AX-440, the part an identity correction re-attributes.
const PART_OFFERS: &str = "/v1/offers?item=AX-440";

/// The live answer of AX-440-R2 once acme-eu's offer is `expected` (its quantity; `None`: no
/// acme-eu offer).
async fn live_once(stack: &Stack, expected: Option<i64>) -> Value {
    live_at(stack, OFFERS, expected).await
}

/// The live answer of `path` once acme-eu's offer is `expected`, settled.
async fn live_at(stack: &Stack, path: &str, expected: Option<i64>) -> Value {
    for _ in 0..150 {
        let answer = request(stack, "GET", path, LOCAL_READER, Value::Null).await;
        let acme = answer["offers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["connector"] == "acme-eu")
            .map(|o| o["quantity"].as_i64().unwrap());
        if acme == expected {
            // Settled: nothing moves between this answer and the next one.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let again = request(stack, "GET", path, LOCAL_READER, Value::Null).await;
            if again["offers"] == answer["offers"] {
                return again;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("acme-eu's offer never became {expected:?}");
}

/// The steps, each followed by the live answer it leads to.
async fn scenario(env: &TestEnv, stack: &Stack) -> Vec<(&'static str, Value)> {
    let mut live = Vec::new();
    deliver(
        env,
        stack,
        "EXP-T1/1",
        &page("EXP-T1", "AX-440-R2", 6, "2026-11-29T08:00:00Z"),
    )
    .await;
    live.push(("a delivery", live_once(stack, Some(6)).await));
    deliver(
        env,
        stack,
        "EXP-T2/1",
        &page("EXP-T2", "AX-440-R2", 4, "2026-11-29T09:00:00Z"),
    )
    .await;
    live.push(("a later delivery", live_once(stack, Some(4)).await));

    deliver(
        env,
        stack,
        "EXP-T3/1",
        &page("EXP-T3", "AX-440", 7, "2026-11-29T09:30:00Z"),
    )
    .await;
    let before = live_at(stack, PART_OFFERS, Some(7)).await;
    live.push(("AX-440 before the correction", before));
    let correction = json!({"connector": "acme-eu", "from_item": "AX-440", "to_item": "AX-440-R2",
        "reason": "the revision was resolved after ingestion"});
    request(
        stack,
        "POST",
        "/v1/identity-corrections",
        LOCAL_OPERATOR,
        correction,
    )
    .await;
    live.push(("a correction", live_once(stack, Some(7)).await));
    let after = live_at(stack, PART_OFFERS, None).await;
    live.push(("AX-440 after the correction", after));

    resolve_a_mismatch(env, stack).await;
    live.push(("a quarantine resolution", live_once(stack, Some(5)).await));

    let quarantine = json!({"connector": "acme-eu", "reason": "a corrupted export is suspected"});
    request(
        stack,
        "POST",
        "/v1/source-quarantines",
        LOCAL_OPERATOR,
        quarantine,
    )
    .await;
    live.push(("a source quarantine", live_once(stack, None).await));
    let lift = json!({"reason": "the export was re-checked"});
    request(
        stack,
        "POST",
        "/v1/source-quarantines/acme-eu/lift",
        LOCAL_OPERATOR,
        lift,
    )
    .await;
    live.push(("its lift", live_once(stack, Some(5)).await));

    verify_current_claim(stack, &live.last().unwrap().1).await;
    live.push(("a verification", verified_once(stack).await));
    live
}

/// EXP-T2 sent again with other rows is quarantined as a mismatch; an operator accepts it as a
/// new delivery, whose claim (observed 10:00) becomes current.
async fn resolve_a_mismatch(env: &TestEnv, stack: &Stack) {
    deliver(
        env,
        stack,
        "EXP-T2/1",
        &page("EXP-T2", "AX-440-R2", 5, "2026-11-29T10:00:00Z"),
    )
    .await;
    let mut entry = Value::Null;
    for _ in 0..100 {
        let list = request(stack, "GET", "/v1/quarantine", LOCAL_OPERATOR, Value::Null).await;
        if let Some(found) = list["entries"].as_array().and_then(|e| e.first()) {
            entry = found.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let id = entry["quarantine_id"]
        .as_str()
        .expect("the mismatch is quarantined");
    let accept = json!({"action": "accept_as_new_delivery", "delivery_id": "EXP-T2/1-corrected",
        "reason": "the supplier confirmed the corrected count"});
    request(
        stack,
        "POST",
        &format!("/v1/quarantine/{id}/resolve"),
        LOCAL_OPERATOR,
        accept,
    )
    .await;
}

async fn verify_current_claim(stack: &Stack, answer: &Value) {
    let claim = answer["offers"][0]["observation_id"].as_str().unwrap();
    let verification = json!({"observation_id": claim, "scope": {"kind": "stock_at_least", "quantity": "5"},
        "method": "supplier_api_confirmation", "evidence": {"reference": "confirmation 8812"},
        "expires_at": Timestamp::now().plus_seconds(3600).to_rfc3339()});
    request(stack, "POST", "/v1/verifications", VERIFIER, verification).await;
}

async fn verified_once(stack: &Stack) -> Value {
    for _ in 0..50 {
        let answer = live_once(stack, Some(5)).await;
        if answer["offers"][0]["verification"]["state"] == "verified" {
            return answer;
        }
    }
    panic!("the verification never showed");
}

fn as_of_query(answer: &Value) -> String {
    percent_encoded(answer["as_of"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn as_of_each_instant_answers_what_was_answered_live_then() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let live = scenario(&env, &stack).await;
    for (step, answer) in &live {
        let at = as_of_query(answer);
        let read = if step.starts_with("AX-440 ") {
            PART_OFFERS
        } else {
            OFFERS
        };
        let path = format!("{read}&as_of={at}");
        let again = request(&stack, "GET", &path, LOCAL_READER, Value::Null).await;
        assert_eq!(&again, answer, "as of {step}");

        let digest = answer["receipt"]["digest"].as_str().unwrap();
        let check = format!(
            "{}&as_of={at}&digest={}",
            read.replace("/v1/offers", "/v1/receipts/verify"),
            percent_encoded(digest)
        );
        let verified = request(&stack, "GET", &check, LOCAL_READER, Value::Null).await;
        assert_eq!(
            verified["matches"], true,
            "the receipt of {step}: {verified}"
        );
        let tampered = check.replace("sha256%3A", "sha256%3A0");
        let refused = request(&stack, "GET", &tampered, LOCAL_READER, Value::Null).await;
        assert_eq!(refused["matches"], false, "a tampered receipt of {step}");
    }
    let states: Vec<usize> = live
        .iter()
        .map(|(_, a)| a["offers"].as_array().unwrap().len())
        .collect();
    assert_eq!(
        states,
        [1, 1, 1, 1, 0, 1, 0, 1, 1],
        "every step changed the answer"
    );
    let quarantined = &live[6].1;
    assert_eq!(
        (
            quarantined["excluded_sources"][0]["connector"].as_str(),
            quarantined["excluded_sources"][0]["reason"].as_str()
        ),
        (Some("acme-eu"), Some("source_quarantined")),
        "a quarantined source is named, not silently absent: {quarantined}"
    );
    before_the_first_step(&stack, &live).await;
}

/// A minute before the first delivery nothing was recorded: no offer then.
async fn before_the_first_step(stack: &Stack, live: &[(&str, Value)]) {
    let first = Timestamp::parse(live[0].1["as_of"].as_str().unwrap()).unwrap();
    let before = percent_encoded(&first.plus_seconds(-60).to_rfc3339());
    let path = format!("/v1/offers?item=AX-440-R2&as_of={before}");
    let answer = request(stack, "GET", &path, LOCAL_READER, Value::Null).await;
    assert_eq!(answer["offers"], json!([]), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_other_reads_answer_as_of_an_instant_too() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    deliver(
        &env,
        &stack,
        "EXP-T8/1",
        &page("EXP-T8", "AX-440-R2", 6, "2026-11-29T08:00:00Z"),
    )
    .await;
    let first = live_once(&stack, Some(6)).await;
    let first_id = first["offers"][0]["observation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    deliver(
        &env,
        &stack,
        "EXP-T9/1",
        &page("EXP-T9", "AX-440-R2", 4, "2026-11-29T09:00:00Z"),
    )
    .await;
    let second = live_once(&stack, Some(4)).await;
    let second_id = second["offers"][0]["observation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    history_observation_and_items_then(&stack, &first, &first_id, &second_id).await;

    let future = percent_encoded(&Timestamp::now().plus_seconds(3600).to_rfc3339());
    let (status, refused) = call(
        "GET",
        format!(
            "{}/v1/offers?item=AX-440-R2&as_of={future}",
            stack.base_url()
        ),
        Some(LOCAL_READER),
        Value::Null,
    )
    .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{refused}"
    );
    let offers = mcp_tool(
        &stack.base_url(),
        LOCAL_READER,
        "get_current_offers",
        json!({"item": "AX-440-R2", "quantity": 2, "max_age_seconds": 60, "as_of": first["as_of"]}),
    )
    .await;
    assert_eq!(
        offers["structuredContent"], first,
        "MCP answers as of an instant too"
    );
}

/// As of `first` (the answer after the first delivery), the history, the observation and the
/// item search answer as they did then: the second claim (`second_id`) was not recorded yet.
async fn history_observation_and_items_then(
    stack: &Stack,
    first: &Value,
    first_id: &str,
    second_id: &str,
) {
    let at = as_of_query(first);
    let history = request(
        stack,
        "GET",
        &format!("/v1/observations?item=AX-440-R2&as_of={at}"),
        LOCAL_READER,
        Value::Null,
    )
    .await;
    let ids: Vec<&str> = history["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["observation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [first_id], "only what was recorded by then");
    let (status, _) = call(
        "GET",
        format!(
            "{}/v1/observations/{second_id}?as_of={at}",
            stack.base_url()
        ),
        Some(LOCAL_READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404, "recorded later");
    let shown = request(
        stack,
        "GET",
        &format!("/v1/observations/{first_id}?as_of={at}"),
        LOCAL_READER,
        Value::Null,
    )
    .await;
    assert_eq!(shown["observation_id"], first_id);
    let items = request(
        stack,
        "GET",
        &format!("/v1/items?mpn=AX-440-R2&as_of={at}"),
        LOCAL_READER,
        Value::Null,
    )
    .await;
    assert_eq!(items["items"][0]["current_offers"], 1, "{items}");
    assert_eq!(items["as_of"], first["as_of"]);
}
