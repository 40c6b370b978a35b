//! Suppliers onboarded with a definition document and no code change, end to end through the
//! local stack: the definition is stored with `PUT /v1/connectors/{id}`, the supplier's own
//! files and webhooks flow through intake and ingest, and the offers read back carry exactly
//! the values the preview of the same sample showed.

use acceptance::load::post_signed_webhook;
use acceptance::*;
use base64::Engine;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;
/// The local sample signing secret of the `snapshot-hooks` connector (`infra/local/secrets.json`;
/// not a production secret).
const SNAPSHOT_HOOKS_SECRET: &str =
    "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1zbmFwc2hvdC1ob29rcy1ub3QtZm9yLXByb2R1Y3Rpb24=";

/// Stores `document` as a new connector (version 1).
async fn onboard(stack: &local_stack::Stack, document: &Value) {
    let id = document["connector"].as_str().unwrap();
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document.clone()).await;
    assert_eq!(status, 201, "{answer}");
}

/// The rows the stored definition's preview gives for `sample`.
async fn previewed_rows(stack: &local_stack::Stack, id: &str, sample: &[u8]) -> Vec<Value> {
    let url = format!("{}/v1/connectors/{id}/preview", stack.base_url());
    let body = json!({ "sample_base64": base64::engine::general_purpose::STANDARD.encode(sample) });
    let (status, answer) = call("POST", url, Some(OPERATOR), body).await;
    assert_eq!(status, 200, "{answer}");
    answer["rows"].as_array().unwrap().clone()
}

/// Waits until every previewed row is the current offer of its item, then checks each offer
/// holds the row's values exactly.
async fn offers_match(stack: &local_stack::Stack, connector: &str, rows: &[Value]) {
    for row in rows {
        let item = row["item"].as_str().unwrap().to_owned();
        let url = format!("{}/v1/items/{}/offers", stack.base_url(), encode(&item));
        let offer = offer_of(&url, READER, connector)
            .await
            .unwrap_or_else(|| panic!("no offer of {connector} at {url}"));
        for (offer_field, row_field) in [
            ("source_record", "sku"),
            ("quantity", "quantity"),
            ("quantity_basis", "unit"),
            ("price", "price"),
            ("currency", "currency"),
            ("observed_at", "observed_at"),
        ] {
            assert_eq!(
                offer[offer_field], row[row_field],
                "{item} {offer_field}: {offer}"
            );
        }
    }
}

/// Percent-encodes what a path segment cannot hold as it is.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b':' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// The replay records of a connector's deliveries, as stored.
async fn replay_records(env: &TestEnv, connector: &str) -> Vec<Value> {
    env.table_items(&env.table)
        .await
        .into_iter()
        .map(|item| serde_dynamo::from_item::<_, Value>(item).unwrap())
        .filter(|v| v["entity"] == "replay" && v["connector"] == connector)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_german_csv_and_an_xml_catalog_dropped_as_files_become_offers() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    for (supplier, file) in [
        ("lieferant-de", "bestand-2026-11-29.csv"),
        ("xml-catalog", "catalog-2026-11-29.xml"),
    ] {
        let document = supplier_definition(supplier);
        let id = document["connector"].as_str().unwrap().to_owned();
        onboard(&stack, &document).await;
        let sample = supplier_file(supplier, file);
        let rows = previewed_rows(&stack, &id, &sample).await;
        assert!(rows.len() >= 2, "{supplier}: {rows:?}");
        env.drop_file(&id, file, sample).await;
        offers_match(&stack, &id, &rows).await;
        let records = replay_records(&env, &id).await;
        assert_eq!(records.len(), 1, "{supplier}: one file, one delivery");
        assert_eq!(records[0]["payload_format"], "defined");
        assert_eq!(records[0]["connector_version"], 1, "{}", records[0]);
        derived_under_version_one(&env, &id).await;
    }
}

/// Every stored observation of `connector` names its derivation: definition version 1 and
/// today's normalizer.
async fn derived_under_version_one(env: &TestEnv, connector: &str) {
    let stored: Vec<feedsafe::domain::model::Observation> = env
        .table_items(&env.table)
        .await
        .into_iter()
        .map(|item| serde_dynamo::from_item::<_, Value>(item).unwrap())
        .filter(|v| v["entity"] == "observation" && v["connector"] == connector)
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    assert!(!stored.is_empty(), "{connector}");
    for o in stored {
        assert_eq!(
            o.derivation,
            Some(feedsafe::domain::model::Derivation {
                connector_version: Some(1),
                normalizer: feedsafe::domain::normalize::NORMALIZER_VERSION.to_owned(),
            }),
            "{}",
            o.observation_id
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_resent_under_a_new_webhook_id_is_one_delivery() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let document = supplier_definition("snapshot-webhooks");
    let id = document["connector"].as_str().unwrap().to_owned();
    onboard(&stack, &document).await;
    let body = supplier_file("snapshot-webhooks", "snapshot-8812.json");
    let rows = previewed_rows(&stack, &id, &body).await;
    let url = format!("{}/v1/webhooks/{id}", stack.base_url());
    for message_id in ["msg_2Lq1", "msg_9Zr7"] {
        let status =
            post_signed_webhook(&url, SNAPSHOT_HOOKS_SECRET, message_id, body.clone()).await;
        assert_eq!(status, 202, "{message_id}");
    }
    offers_match(&stack, &id, &rows).await;
    wait_until("both messages counted on one record", || async {
        let records = replay_records(&env, &id).await;
        records.len() == 1 && records[0]["attempts"] == 2
    })
    .await;
    let records = replay_records(&env, &id).await;
    assert_eq!(records[0]["source_delivery_id"], "snapshot:SNAP-8812");
    assert_eq!(records[0]["identity_basis"], "snapshot_id");
    assert_eq!(records[0]["identity_strength"], "source");
}

#[tokio::test(flavor = "multi_thread")]
async fn under_quarantine_rows_the_good_rows_are_stored_and_the_bad_in_one_entry() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let document = supplier_definition("lieferant-de");
    assert_eq!(document["row_policy"], "quarantine_rows");
    onboard(&stack, &document).await;
    let file = german_file_with_three_bad_rows();
    let rows = previewed_rows(&stack, "lieferant-de", &file).await;
    assert_eq!(rows.len(), 2);
    env.drop_file("lieferant-de", "bestand-kaputt.csv", file)
        .await;
    offers_match(&stack, "lieferant-de", &rows).await;
    let url = format!("{}/v1/quarantine", stack.base_url());
    let (status, list) = call("GET", url, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 200, "{list}");
    let entries: Vec<&Value> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["connector"] == "lieferant-de")
        .collect();
    assert_eq!(entries.len(), 1, "{list}");
    let places: Vec<&str> = entries[0]["refused_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["place"].as_str().unwrap())
        .collect();
    assert_eq!(places, ["line 3", "line 5", "line 6"], "{}", entries[0]);
    let records = replay_records(&env, "lieferant-de").await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["observation_count"], 2, "{}", records[0]);
    assert_eq!(records[0]["artifact_key"], entries[0]["evidence_key"]);
}

/// A retry is compared under the definition version its delivery was first read under: the
/// snapshot stored under version 1 (rows in any order are the same payload) and sent again with
/// its rows reversed after version 2 made row order significant is a replay, not a mismatch.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_is_judged_under_the_version_its_delivery_was_read_under() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let first = supplier_definition("snapshot-webhooks");
    assert_eq!(first["canonicalization"], "json-unordered-rows-v1");
    let id = first["connector"].as_str().unwrap().to_owned();
    onboard(&stack, &first).await;
    let url = format!("{}/v1/webhooks/{id}", stack.base_url());
    let mut body: Value =
        serde_json::from_slice(&supplier_file("snapshot-webhooks", "snapshot-8812.json")).unwrap();
    let status = post_signed_webhook(
        &url,
        SNAPSHOT_HOOKS_SECRET,
        "msg_v1",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 202);
    wait_until("the snapshot stored", || async {
        replay_records(&env, &id)
            .await
            .first()
            .is_some_and(|r| r["state"] == "COMMITTED")
    })
    .await;

    let mut second = first.clone();
    second["canonicalization"] = json!("json-v1");
    let put = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) = call_with("PUT", put, Some(OPERATOR), Some("1".into()), second).await;
    assert_eq!((status, &answer["version"]), (200, &json!(2)), "{answer}");
    body["stock"].as_array_mut().unwrap().reverse();
    let status = post_signed_webhook(
        &url,
        SNAPSHOT_HOOKS_SECRET,
        "msg_v2",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 202);
    wait_until("the resent snapshot counted as a replay", || async {
        replay_records(&env, &id)
            .await
            .first()
            .is_some_and(|r| r["attempts"] == 2)
    })
    .await;
    let records = replay_records(&env, &id).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["connector_version"], 1, "{}", records[0]);
    let (_, list) = call(
        "GET",
        format!("{}/v1/quarantine", stack.base_url()),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(list["count"], 0, "no mismatch: {list}");
}

/// A connector that names files by their name alone: the same name with changed content is a
/// changed payload under an old identity, quarantined as a mismatch; the stored offers stay.
#[tokio::test(flavor = "multi_thread")]
async fn changed_content_under_an_immutable_file_name_is_a_mismatch() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let document = supplier_definition("xml-catalog");
    assert_eq!(document["identity"]["kind"], "file_name");
    let id = document["connector"].as_str().unwrap().to_owned();
    onboard(&stack, &document).await;
    let original = supplier_file("xml-catalog", "catalog-2026-11-29.xml");
    let rows = previewed_rows(&stack, &id, &original).await;
    env.drop_file(&id, "catalog.xml", original.clone()).await;
    offers_match(&stack, &id, &rows).await;
    let changed = String::from_utf8(original)
        .unwrap()
        .replacen(">1500<", ">1499<", 1);
    env.drop_file(&id, "catalog.xml", changed.into_bytes())
        .await;
    let url = format!("{}/v1/quarantine", stack.base_url());
    let mut entries = Vec::new();
    for _ in 0..300 {
        let (_, list) = call("GET", url.clone(), Some(OPERATOR), Value::Null).await;
        entries = list["entries"].as_array().cloned().unwrap_or_default();
        if !entries.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["reason_code"], "replay_payload_mismatch");
    assert_eq!(
        entries[0]["delivery_key"],
        format!("demo/{id}/CAT-2026/catalog.xml@name")
    );
    offers_match(&stack, &id, &rows).await;
}
