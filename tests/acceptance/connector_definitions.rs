//! Connector definitions stored through the local stack (`PUT` / `GET /v1/connectors/{id}`,
//! `POST /v1/connectors/{id}/preview`): versions are append-only and guarded by `If-Match`, a
//! definition with mistakes is refused with every pointer and stores nothing, and an id
//! another tenant holds is refused without naming that tenant.

use acceptance::*;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;
const OTHER: &str = "other-operator-token";

async fn put(
    stack: &local_stack::Stack,
    token: &str,
    id: &str,
    if_match: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    call_with(
        "PUT",
        format!("{}/v1/connectors/{id}", stack.base_url()),
        Some(token),
        if_match.map(str::to_owned),
        body.clone(),
    )
    .await
}

async fn get(stack: &local_stack::Stack, token: &str, id: &str) -> (u16, Value) {
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    call("GET", url, Some(token), Value::Null).await
}

#[tokio::test(flavor = "multi_thread")]
async fn every_change_is_a_new_version_guarded_by_if_match() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let first = supplier_definition("snapshot-webhooks");
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", None, &first).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (201, &json!("created")),
        "{answer}"
    );
    assert_eq!(answer["version"], 1);
    // The same document again changes nothing.
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", None, &first).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("unchanged")),
        "{answer}"
    );

    let mut second = first.clone();
    second["horizon_days"] = json!(45);
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", None, &second).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (428, &json!("precondition_required"))
    );
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", Some("0"), &second).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (412, &json!("version_conflict"))
    );
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", Some("\"1\""), &second).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("updated")),
        "{answer}"
    );
    assert_eq!(answer["version"], 2);

    let (status, shown) = get(&stack, OPERATOR, "snapshot-hooks").await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["version"], 2);
    assert_eq!(shown["definition"], second, "the current document as sent");
    assert_eq!(shown["transport"], "webhook");
    assert_eq!(shown["payload_format"], "defined");
    let versions: Vec<&Value> = shown["versions"].as_array().unwrap().iter().collect();
    assert_eq!(versions.len(), 2, "{shown}");
    assert_eq!(
        (
            versions[0]["version"].clone(),
            versions[1]["version"].clone()
        ),
        (json!(1), json!(2))
    );

    // The first version is kept as it was: it is what deliveries read under it name.
    let stored = env
        .table_items(&env.table)
        .await
        .into_iter()
        .filter(|item| {
            item.get("sk")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|sk| sk.starts_with("VERSION#"))
        })
        .count();
    assert_eq!(stored, 2);
    // A reader never sees a definition.
    assert_eq!(get(&stack, READER, "snapshot-hooks").await.0, 403);
    assert_eq!(
        put(&stack, READER, "snapshot-hooks", Some("2"), &first)
            .await
            .0,
        403
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn five_mistakes_come_back_as_five_pointers_and_nothing_is_stored() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let before = env.table_items(&env.table).await.len();
    let mut draft = supplier_definition("lieferant-de");
    draft["source_account"] = json!("");
    draft["horizon_days"] = json!(0);
    draft["fields"]["unit"] = json!({ "map": { "Stk": "each" } });
    draft["fields"]["quantity"]["pattern"] = json!("(\\d+) (\\w+)");
    draft["identity"] = json!({ "kind": "webhook_id" });
    let id = draft["connector"].as_str().unwrap().to_owned();
    let (status, answer) = put(&stack, OPERATOR, &id, None, &draft).await;
    assert_eq!(status, 422, "{answer}");
    let pointers: Vec<&str> = answer["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers.len(), 5, "{answer}");
    for pointer in [
        "/source_account",
        "/horizon_days",
        "/fields/unit",
        "/fields/quantity/pattern",
        "/identity/kind",
    ] {
        assert!(pointers.contains(&pointer), "{pointer} missing: {answer}");
    }
    // The URL's id must be the document's.
    let (status, answer) = put(
        &stack,
        OPERATOR,
        "someone-else",
        None,
        &supplier_definition("lieferant-de"),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["problems"][0]["pointer"], "/connector");
    assert_eq!(get(&stack, OPERATOR, &id).await.0, 404);
    assert_eq!(
        env.table_items(&env.table).await.len(),
        before,
        "a refused definition stored something"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenants_connector_id_is_refused_without_naming_the_tenant() {
    let env = spawn_env(true).await;
    let stack = spawn_stack_with_other_tenant(&env, OTHER).await;
    let document = supplier_definition("xml-catalog");
    let id = document["connector"].as_str().unwrap().to_owned();
    assert_eq!(put(&stack, OPERATOR, &id, None, &document).await.0, 201);
    for if_match in [None, Some("1")] {
        let (status, answer) = put(&stack, OTHER, &id, if_match, &document).await;
        assert_eq!(status, 409, "{answer}");
        assert_eq!(answer["error"]["code"], "connector_id_taken");
        let text = answer.to_string();
        assert!(!text.contains("demo"), "the owner is named: {text}");
    }
    // Nor can the other tenant read it or preview under it: it is not theirs.
    assert_eq!(get(&stack, OTHER, &id).await.0, 404);
    let url = format!("{}/v1/connectors/{id}/preview", stack.base_url());
    assert_eq!(
        call("POST", url, Some(OTHER), json!({"sample": "x"}))
            .await
            .0,
        404
    );
    // A first-release connector of the same id space (seeded for `demo`) is taken too.
    let mut legacy = supplier_definition("snapshot-webhooks");
    legacy["connector"] = json!("acme-events");
    let (status, answer) = put(&stack, OTHER, "acme-events", None, &legacy).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (409, &json!("connector_id_taken"))
    );
    let (_, shown) = get(&stack, OPERATOR, &id).await;
    assert_eq!(shown["versions"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stored_definition_previews_a_sample_and_stores_nothing() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let document = supplier_definition("distributor-api");
    let id = document["connector"].as_str().unwrap().to_owned();
    assert_eq!(put(&stack, OPERATOR, &id, None, &document).await.0, 201);
    let before = env.table_items(&env.table).await.len();
    let sample = String::from_utf8(supplier_file("distributor-api", "page-1.json")).unwrap();
    let url = format!("{}/v1/connectors/{id}/preview", stack.base_url());
    let (status, answer) = call("POST", url, Some(OPERATOR), json!({ "sample": sample })).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "stored");
    assert!(!answer["rows"].as_array().unwrap().is_empty(), "{answer}");
    assert_eq!(env.table_items(&env.table).await.len(), before);
    // A first-release connector has no definition to preview under.
    let url = format!("{}/v1/connectors/acme-events/preview", stack.base_url());
    let (status, answer) = call("POST", url, Some(OPERATOR), json!({ "sample": "{}" })).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (409, &json!("no_definition"))
    );
}

/// The local stack seeds its sample definitions through the checks of the `PUT` route: a
/// valid one becomes version 1 of its connector, a refused one stops the seed with every
/// problem and its pointer, and nothing of it is stored.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_seed_goes_through_the_same_checks() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let store = feedsafe::aws::dynamo::DynamoEvidenceStore::new(
        env.clients.dynamodb.clone(),
        env.table.clone(),
    );
    let dir = std::env::temp_dir().join(format!(
        "feedsafe-seed-{}-{}",
        std::process::id(),
        env.table
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.json"),
        supplier_file("snapshot-webhooks", "definition.json"),
    )
    .unwrap();
    local_stack::definitions::seed_definitions(&store, &dir)
        .await
        .unwrap();
    let (status, shown) = get(&stack, OPERATOR, "snapshot-hooks").await;
    assert_eq!(
        (status, shown["version"].clone()),
        (200, json!(1)),
        "{shown}"
    );
    assert_eq!(shown["versions"][0]["recorded_by"], "local-stack seed");

    let mut bad = supplier_definition("xml-catalog");
    bad["horizon_days"] = json!(0);
    bad["format"]["rows"] = json!("catalog//article");
    std::fs::write(dir.join("b.json"), bad.to_string()).unwrap();
    let refused = local_stack::definitions::seed_definitions(&store, &dir)
        .await
        .expect_err("a refused definition stops the seed")
        .to_string();
    assert!(refused.contains("/horizon_days"), "{refused}");
    assert!(refused.contains("/format/rows"), "{refused}");
    assert_eq!(
        get(&stack, OPERATOR, bad["connector"].as_str().unwrap())
            .await
            .0,
        404
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A definition over 256 KiB and a connector id the contract refuses are answered 400/422,
/// listing why, and nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_definition_or_a_bad_id_stores_nothing() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let before = env.table_items(&env.table).await.len();
    let mut huge = supplier_definition("snapshot-webhooks");
    huge["padding"] = json!("x".repeat(256 * 1024));
    let (status, answer) = put(&stack, OPERATOR, "snapshot-hooks", None, &huge).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!("invalid_request")),
        "{answer}"
    );
    let mut bad = supplier_definition("snapshot-webhooks");
    for id in ["Snapshot-Hooks", "snap%20hooks", &"s".repeat(65)] {
        bad["connector"] = json!(id);
        let (status, answer) = put(&stack, OPERATOR, id, None, &bad).await;
        assert!(status == 400 || status == 422, "{id}: {status} {answer}");
        assert!(answer["error"]["code"].is_string(), "{id}: {answer}");
    }
    assert_eq!(env.table_items(&env.table).await.len(), before);
}
