//! Pulls made from a definition, end to end through the local stack: a definition pointing at
//! one of the fake supplier's APIs is stored with `PUT /v1/connectors/{id}`, a run is started
//! with `POST /v1/connectors/{id}/runs`, and every row the API serves is read back as an offer
//! with its exact values. The credential comes from the local sample secrets by reference
//! (`infra/local/pull-secrets.json`); a refused one gives no offers and a failed run whose
//! report, answers and records never show it.

use acceptance::*;
use base64::Engine;
use feedsafe::domain::ids::ConnectorId;
use local_stack::fake_supplier::apis;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;
/// The revoked token's local sample value (`infra/local/pull-secrets.json`).
const REVOKED_TOKEN: &str = "local-sample-revoked-token-4711-not-for-production";

fn distributor_definition(stack: &local_stack::Stack, secret_ref: &str) -> Value {
    let mut document = supplier_definition("distributor-api");
    document["transport"]["url"] = json!(api_url(stack, "/apis/distributor/v2/inventory"));
    document["transport"]["auth"]["secret_ref"] = json!(secret_ref);
    document
}

fn api_url(stack: &local_stack::Stack, path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", stack.supplier.port())
}

async fn onboard(stack: &local_stack::Stack, document: &Value) {
    let id = document["connector"].as_str().unwrap();
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document.clone()).await;
    assert_eq!(status, 201, "{answer}");
}

/// `POST /v1/connectors/{id}/runs`: the answer (202).
async fn start_run(stack: &local_stack::Stack, id: &str) -> Value {
    let url = format!("{}/v1/connectors/{id}/runs", stack.base_url());
    let (status, answer) = call("POST", url, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 202, "{answer}");
    answer
}

/// Waits for the run to complete; its body.
async fn completed(stack: &local_stack::Stack, run: &str) -> Value {
    let url = format!("{}{run}", stack.base_url());
    let mut last = Value::Null;
    for _ in 0..300 {
        let (_, body) = call("GET", url.clone(), Some(OPERATOR), Value::Null).await;
        if body["status"] == "COMPLETE" {
            return body;
        }
        last = body;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let url = format!("{}/v1/quarantine", stack.base_url());
    let (_, quarantine) = call("GET", url, Some(OPERATOR), Value::Null).await;
    panic!("run {run} did not complete: {last}; quarantine: {quarantine}");
}

/// The connector's current offer of the item `sku` (`{sku}` as the item id), once there is one.
async fn offer(stack: &local_stack::Stack, connector: &str, sku: &str) -> Value {
    let url = format!("{}/v1/items/{sku}/offers", stack.base_url());
    if let Some(offer) = offer_of(&url, READER, connector).await {
        return offer;
    }
    let url = format!("{}/v1/quarantine", stack.base_url());
    let (_, quarantine) = call("GET", url, Some(OPERATOR), Value::Null).await;
    panic!("no offer of {connector} for {sku}; quarantine: {quarantine}");
}

fn assert_offer(offer: &Value, quantity: u64, price: &str, currency: &str) {
    assert_eq!(offer["quantity"], json!(quantity), "{offer}");
    assert_eq!(offer["price"], json!(price), "{offer}");
    assert_eq!(offer["currency"], json!(currency), "{offer}");
    assert_eq!(offer["quantity_basis"], json!("each"), "{offer}");
}

async fn replay_ids(env: &TestEnv, connector: &str) -> Vec<String> {
    let mut ids: Vec<String> = env
        .table_items(&env.table)
        .await
        .into_iter()
        .map(|item| serde_dynamo::from_item::<_, Value>(item).unwrap())
        .filter(|v| v["entity"] == "replay" && v["connector"] == connector)
        .map(|v| {
            v["source_delivery_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_paginated_bearer_api_is_pulled_from_its_definition() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    onboard(
        &stack,
        &distributor_definition(&stack, "local/distributor/token"),
    )
    .await;
    let started = start_run(&stack, "distri-api").await;
    let run = started["run"].as_str().unwrap().to_owned();
    assert!(
        run.starts_with("/v1/runs/run-distri-api.slot_"),
        "{started}"
    );
    // `publication: on_run_complete`: the offers are visible once all three pages committed.
    let body = completed(&stack, &run).await;
    assert_eq!(body["page_count"], 3, "{body}");
    assert_eq!(body["pages_committed"], json!([1, 2, 3]), "{body}");
    for rows in apis::DISTRIBUTOR_PAGES {
        for (mpn, stock, _, amount) in rows.iter() {
            let quantity: u64 = stock.trim_end_matches(" In Stock").parse().unwrap();
            let offer = offer(&stack, "distri-api", mpn).await;
            assert_offer(&offer, quantity, amount, "USD");
            assert_eq!(offer["observed_at"], "2026-12-07T05:55:00Z", "{offer}");
        }
    }
    // The same slot pulled again (a retry of the scheduled invocation): the same run, the
    // same three deliveries (ingest counts the pages again as replays).
    let connector = ConnectorId::parse("distri-api").unwrap();
    let again = stack.services.pull.run_connector(&connector).await.unwrap();
    assert_eq!(format!("/v1/runs/{}", again.run_id), run);
    assert_eq!(again.enqueued, vec![1, 2, 3]);
    let ids = replay_ids(&env, "distri-api").await;
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("cursor:")), "{ids:?}");
    assert!(ids.iter().any(|id| id.ends_with("/c2")) && ids.iter().any(|id| id.ends_with("/c3")));
}

fn catalog_definition(stack: &local_stack::Stack) -> Value {
    json!({
        "definition_format": 1,
        "connector": "catalog-pull",
        "source_account": "CAT-ACC-1",
        "transport": {
            "kind": "pull",
            "url": api_url(stack, "/apis/catalog/items"),
            "auth": {"kind": "api_key_header", "header": "X-Api-Key", "secret_ref": "local/catalog/api-key"},
            "pagination": {"kind": "link_header"}
        },
        "format": {"kind": "json", "rows": "$.items[*]"},
        "fields": {
            "sku": {"path": "$.sku"},
            "quantity": {"path": "$.available"},
            "unit": {"constant": "each"},
            "price": {"path": "$.unit_price"},
            "currency": {"path": "$.currency"},
            "observed_at": {"path": "$.as_of"}
        },
        "identity": {"kind": "export_page", "header": "X-Export-Id"}
    })
}

fn csv_definition(stack: &local_stack::Stack) -> Value {
    json!({
        "definition_format": 1,
        "connector": "stock-csv",
        "source_account": "CSV-ACC-1",
        "transport": {
            "kind": "pull",
            "url": api_url(stack, "/apis/stock.csv"),
            "auth": {"kind": "basic", "secret_ref": "local/stock-csv/basic"},
            "pagination": {"kind": "page_number", "param": "page", "first": 1}
        },
        "format": {"kind": "csv", "delimiter": ";"},
        "values": {"decimal_separator": ","},
        "fields": {
            "sku": {"column": "sku"},
            "quantity": {"column": "qty"},
            "unit": {"constant": "each"},
            "price": {"column": "price"},
            "currency": {"constant": "EUR"},
            "observed_at": {"constant": "2026-12-07T06:00:00Z"}
        },
        "identity": {"kind": "fallback"}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_header_api_and_a_csv_by_page_number_are_pulled_from_their_definitions() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    onboard(&stack, &catalog_definition(&stack)).await;
    let started = start_run(&stack, "catalog-pull").await;
    // An export_page identity names the run by the export page 1 announces (in a header).
    assert_eq!(started["export_id"], apis::CATALOG_EXPORT, "{started}");
    let run = format!("/v1/runs/run-catalog-pull.{}", apis::CATALOG_EXPORT);
    assert_eq!(started["run"], json!(run), "{started}");
    for (sku, quantity, price) in apis::CATALOG_PAGES {
        let offer = offer(&stack, "catalog-pull", sku).await;
        assert_offer(&offer, u64::from(quantity), price, "EUR");
    }
    let body = completed(&stack, &run).await;
    assert_eq!(body["pages_committed"], json!([1, 2, 3]), "{body}");
    let expected: Vec<String> = (1..=3)
        .map(|page| format!("{}/{page}", apis::CATALOG_EXPORT))
        .collect();
    assert_eq!(replay_ids(&env, "catalog-pull").await, expected);

    onboard(&stack, &csv_definition(&stack)).await;
    let started = start_run(&stack, "stock-csv").await;
    let run = started["run"].as_str().unwrap().to_owned();
    for (sku, quantity, price) in [
        ("CSV-1", 10, "1.50"),
        ("CSV-2", 20, "2.50"),
        ("CSV-3", 30, "3.50"),
        ("CSV-4", 40, "4.50"),
    ] {
        let offer = offer(&stack, "stock-csv", sku).await;
        assert_offer(&offer, quantity, price, "EUR");
    }
    // Two pages with rows; the empty third ended the pull and is no delivery.
    let body = completed(&stack, &run).await;
    assert_eq!(body["page_count"], 2, "{body}");
    let ids = replay_ids(&env, "stock-csv").await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("fb-")), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_credential_gives_no_offers_and_never_shows_the_credential() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let document = distributor_definition(&stack, "local/distributor/revoked-token");
    onboard(&stack, &document).await;
    let connector = ConnectorId::parse("distri-api").unwrap();
    let error = stack
        .services
        .pull
        .run_connector(&connector)
        .await
        .expect_err("a refused credential fails the pull");
    let shown = format!("{error} {error:?}");
    assert!(shown.contains("HTTP 401"), "{shown}");
    // The run's slot names it; it is recorded with its page 1 missing, and nothing else.
    let started = start_run(&stack, "distri-api").await;
    let run = started["run"].as_str().unwrap().to_owned();
    let url = format!("{}{run}", stack.base_url());
    let (status, body) = call("GET", url, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["page_count"], 1, "{body}");
    assert_eq!(body["pages_missing"], json!([1]), "{body}");
    assert_eq!(
        body["credential_ref"], "local/distributor/revoked-token",
        "{body}"
    );
    // Let the launched pull fail too, then look everywhere a credential could have leaked to.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let items = env.table_items(&env.table).await;
    let stored = format!("{items:?}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(REVOKED_TOKEN);
    for text in [&shown, &started.to_string(), &body.to_string(), &stored] {
        assert!(
            !text.contains(REVOKED_TOKEN) && !text.contains(&encoded),
            "{text}"
        );
    }
    assert!(replay_ids(&env, "distri-api").await.is_empty());
    let url = format!("{}/v1/items/LM358DR/offers", stack.base_url());
    let (_, offers) = call("GET", url, Some(READER), Value::Null).await;
    let none = offers["offers"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|o| o["connector"] != "distri-api");
    assert!(none, "{offers}");
}

/// No run is started by hand: the dispatcher's tick finds the connector's own schedule due
/// (its definition's `every_minutes`), launches its pull once for the slot, and the offers
/// appear; the next ticks of the same slot launch nothing more.
#[tokio::test(flavor = "multi_thread")]
async fn a_definitions_own_schedule_runs_its_pull_once_a_slot() {
    let env = spawn_env(true).await;
    let stack = spawn_stack_with(&env, |o| {
        o.pull_every = Some(std::time::Duration::from_millis(500))
    })
    .await;
    let mut document = distributor_definition(&stack, "local/distributor/token");
    document["transport"]["every_minutes"] = json!(60);
    onboard(&stack, &document).await;
    let first = apis::DISTRIBUTOR_PAGES[0][0];
    let found = offer(&stack, "distri-api", first.0).await;
    assert_eq!(found["connector"], "distri-api");
    // Several more ticks within the hour's slot: still one run, its pages stored once.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let runs: Vec<Value> = env
        .table_items(&env.table)
        .await
        .into_iter()
        .map(|item| serde_dynamo::from_item::<_, Value>(item).unwrap())
        .filter(|v| v["entity"] == "run" && v["connector"] == "distri-api")
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let ids = replay_ids(&env, "distri-api").await;
    assert_eq!(ids.len(), apis::DISTRIBUTOR_PAGES.len(), "{ids:?}");
}
