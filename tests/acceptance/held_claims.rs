//! Held claims through the running local stack: a source whose only claims about an item are
//! from the future is named in the offers answer (`excluded_sources`, `future_dated`), not left
//! out in silence; the answer as of that instant is the same and its receipt verifies (and so
//! does a receipt made before held claims were named); an ordinary claim makes the source an
//! offer again; an identity correction that moves the held claim moves its naming with it; a
//! rebuild holds what the projector held (docs/architecture.md section 7).

use acceptance::*;
use feedsafe::domain::ids::{ConnectorId, SourceAccount, TenantId};
use feedsafe::domain::model::SourceRef;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::projection::{ProjectionKey, ProjectionStore};
use local_stack::Stack;
use serde_json::{json, Value};

fn acme(stack: &Stack) -> feedsafe::domain::connector::ConnectorConfig {
    sample_connector(stack, "acme-eu")
}

async fn deliver(env: &TestEnv, stack: &Stack, export: &str, sku: &str, observed: Timestamp) {
    let body = export_page(
        export,
        1,
        1,
        vec![offer(sku, 5, "820.00", &observed.to_rfc3339())],
    );
    let envelope = plain_envelope(&acme(stack), &format!("{export}/1"), &body);
    env.send("IngestQueue", &envelope).await;
}

async fn get(stack: &Stack, path: &str, token: &str) -> Value {
    let url = format!("{}{path}", stack.base_url());
    let (status, answer) = call("GET", url, Some(token), Value::Null).await;
    assert_eq!(status, 200, "GET {path}: {answer}");
    answer
}

/// The live offers answer of `sku` once `settled` holds of it.
async fn offers_once(stack: &Stack, sku: &str, settled: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/v1/offers?item={sku}");
    for _ in 0..150 {
        let answer = get(stack, &path, LOCAL_READER).await;
        if settled(&answer) {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the offers answer of {sku} never settled");
}

fn named_as(answer: &Value, reason: &str) -> bool {
    answer["excluded_sources"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["reason"] == reason))
}

/// The item's history (observation id, future_dated), newest first.
async fn history(stack: &Stack, sku: &str) -> Vec<(String, bool)> {
    let answer = get(
        stack,
        &format!("/v1/items/{sku}/observations"),
        LOCAL_READER,
    )
    .await;
    answer["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["observation_id"].as_str().unwrap().to_owned(),
                o["future_dated"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// Asked again as of its own instant, the answer is the same; its receipt verifies, a receipt
/// of the same answer without held sources (as one made before they were named) verifies, and
/// a tampered one does not.
async fn answers_the_same_later(stack: &Stack, sku: &str, live: &Value) {
    let at = percent_encoded(live["as_of"].as_str().unwrap());
    let again = get(
        stack,
        &format!("/v1/offers?item={sku}&as_of={at}"),
        LOCAL_READER,
    )
    .await;
    assert_eq!(&again, live, "as of the live answer's instant");
    let check = |digest: &str| {
        format!(
            "/v1/receipts/verify?item={sku}&as_of={at}&digest={}",
            percent_encoded(digest)
        )
    };
    let digest = live["receipt"]["digest"].as_str().unwrap();
    assert_eq!(
        get(stack, &check(digest), LOCAL_READER).await["matches"],
        true
    );
    let mut earlier = live.clone();
    for left_out in ["receipt", "overdue_sources", "excluded_sources"] {
        earlier.as_object_mut().unwrap().remove(left_out);
    }
    let bytes = serde_json::to_vec(&earlier).unwrap();
    let canonical = feedsafe::domain::canonical_json::canonicalize(&bytes).unwrap();
    let before = format!(
        "sha256:{}",
        feedsafe::domain::hashing::sha256_hex(&canonical)
    );
    if live.get("excluded_sources").is_some() {
        assert_ne!(before, digest, "naming a held source changes the digest");
    }
    let old = get(stack, &check(&before), LOCAL_READER).await;
    assert_eq!(old["matches"], true, "a receipt made before: {old}");
    let tampered = get(stack, &check(&format!("{before}0")), LOCAL_READER).await;
    assert_eq!(tampered["matches"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_with_only_claims_from_the_future_is_named_not_absent() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let now = Timestamp::now();
    // A supplier clock a day ahead: the claim is kept, flagged, and never current.
    deliver(&env, &stack, "EXP-F1", "HELD-1", now.plus_seconds(86_400)).await;
    let held = offers_once(&stack, "HELD-1", |a| named_as(a, "future_dated")).await;
    let claims = history(&stack, "HELD-1").await;
    assert_eq!(claims.len(), 1);
    assert!(claims[0].1, "the history flags it");
    assert_eq!(held["offers"], json!([]));
    assert_eq!(
        held["excluded_sources"],
        json!([{"connector": "acme-eu", "source_account": acme(&stack).source_account.as_str(),
            "reason": "future_dated", "observation_id": claims[0].0}]),
        "{held}"
    );
    let summary = mcp_offers_summary(&stack, "HELD-1").await;
    assert!(
        summary.contains("Left out: acme-eu/") && summary.contains("(future_dated)"),
        "{summary}"
    );

    // An ordinary claim makes the source an offer again; the held one stays in history.
    deliver(&env, &stack, "EXP-F2", "HELD-1", now.plus_seconds(-3_600)).await;
    let offered = offers_once(&stack, "HELD-1", |a| {
        a["offers"].as_array().is_some_and(|o| o.len() == 1)
    })
    .await;
    assert!(offered.get("excluded_sources").is_none(), "{offered}");
    answers_the_same_later(&stack, "HELD-1", &held).await;
    answers_the_same_later(&stack, "HELD-1", &offered).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_correction_moves_the_naming_with_the_held_claim_and_a_rebuild_agrees() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let now = Timestamp::now();
    deliver(&env, &stack, "EXP-M1", "HELD-2", now.plus_seconds(86_400)).await;
    let before = offers_once(&stack, "HELD-2", |a| named_as(a, "future_dated")).await;
    let correction = json!({"connector": "acme-eu", "from_item": "HELD-2", "to_item": "HELD-3",
        "reason": "the part number was mistyped"});
    let url = format!("{}/v1/identity-corrections", stack.base_url());
    let (status, answer) = call("POST", url, Some(LOCAL_OPERATOR), correction).await;
    assert_eq!(status, 201, "{answer}");

    let moved = offers_once(&stack, "HELD-3", |a| named_as(a, "future_dated")).await;
    let copy = &moved["excluded_sources"][0]["observation_id"];
    assert_ne!(copy, &before["excluded_sources"][0]["observation_id"]);
    assert_eq!(
        history(&stack, "HELD-3").await,
        vec![(copy.as_str().unwrap().to_owned(), true)],
        "the copy is the held claim now"
    );
    // The old item's held claim was superseded: nothing is left to name there.
    offers_once(&stack, "HELD-2", |a| a.get("excluded_sources").is_none()).await;

    let rebuilt = env.extra_projection_table().await;
    let tenant = acme(&stack).tenant;
    let projector = env.projector_into(rebuilt.clone());
    for sku in ["HELD-2", "HELD-3"] {
        let item = format!("{sku}~each~new");
        projector.rebuild_item(&tenant, &item).await.unwrap();
        let key = held_key(&tenant, &item, &acme(&stack));
        assert_eq!(
            rebuilt.held_claims().held(&key).await.unwrap(),
            env.projection_store()
                .held_claims()
                .held(&key)
                .await
                .unwrap(),
            "a rebuild of {sku} holds what the projector held"
        );
    }
}

fn held_key(
    tenant: &TenantId,
    item: &str,
    config: &feedsafe::domain::connector::ConnectorConfig,
) -> ProjectionKey {
    ProjectionKey {
        item: item.to_owned(),
        source: SourceRef {
            tenant: tenant.clone(),
            connector: ConnectorId::parse(config.connector.as_str()).unwrap(),
            source_account: SourceAccount::parse(config.source_account.as_str()).unwrap(),
        },
    }
}

/// The MCP `get_current_offers` summary of `sku`.
async fn mcp_offers_summary(stack: &Stack, sku: &str) -> String {
    let arguments = json!({"item": sku});
    let result = mcp_tool(
        &stack.base_url(),
        LOCAL_READER,
        "get_current_offers",
        arguments,
    )
    .await;
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
