//! `POST /v1/connector-previews` through the running local stack: a supplier's sample under a
//! draft definition gives its rows, every bad row with its line, the identity and the
//! fingerprint; a draft with mistakes is answered with every mistake's pointer; and nothing in
//! DynamoDB, S3 or SQS changes, whatever is previewed.

use acceptance::*;
use base64::Engine;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;

async fn preview(stack: &local_stack::Stack, definition: &Value, sample: &[u8]) -> (u16, Value) {
    let body = json!({
        "definition": definition,
        "sample_base64": base64::engine::general_purpose::STANDARD.encode(sample),
    });
    call(
        "POST",
        format!("{}/v1/connector-previews", stack.base_url()),
        Some(OPERATOR),
        body,
    )
    .await
}

/// Every item of both tables, every object of the bucket, and the queues' message counts.
async fn everything(env: &TestEnv) -> Value {
    let mut tables = Vec::new();
    for table in env.resources.tables.values() {
        let mut items: Vec<String> = env
            .table_items(table)
            .await
            .into_iter()
            .map(|item| {
                let value: Value = serde_dynamo::from_item(item).expect("an item reads as JSON");
                value.to_string()
            })
            .collect();
        items.sort();
        tables.push(json!({ "table": table, "items": items }));
    }
    let objects = env
        .clients
        .s3
        .list_objects_v2()
        .bucket(&env.bucket)
        .send()
        .await
        .unwrap()
        .contents
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.key.unwrap_or_default())
        .collect::<Vec<_>>();
    let mut queues = Vec::new();
    for queue in env.resources.queues.values() {
        let attributes = env
            .clients
            .sqs
            .get_queue_attributes()
            .queue_url(&queue.url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        let count = |name: aws_sdk_sqs::types::QueueAttributeName| {
            attributes.get(&name).cloned().unwrap_or_default()
        };
        queues.push(json!([
            queue.url,
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages),
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        ]));
    }
    json!({ "tables": tables, "objects": objects, "queues": queues })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preview_lists_every_bad_row_by_line_and_stores_nothing() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let before = everything(&env).await;

    let german = supplier_definition("lieferant-de");
    let (status, answer) = preview(&stack, &german, &german_file_with_three_bad_rows()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["outcome"], "stored_with_quarantined_rows",
        "{answer}"
    );
    let places: Vec<&str> = answer["refused_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["place"].as_str().unwrap())
        .collect();
    assert_eq!(places, ["line 3", "line 5", "line 6"], "{answer}");
    let codes: Vec<&str> = answer["refused_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["invalid_row", "invalid_price", "unknown_currency"],
        "{answer}"
    );
    let skus: Vec<&str> = answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sku"].as_str().unwrap())
        .collect();
    assert_eq!(skus, ["LM358DR", "NE555P"]);
    assert_eq!(answer["rows"][0]["quantity"], 1500);
    assert_eq!(answer["rows"][0]["price"], "0.42");
    assert_eq!(answer["rows"][0]["observed_at"], "2026-11-29T07:00:00Z");
    let fingerprint = format!(
        "bytes-v1:{}",
        feedsafe::domain::hashing::sha256_hex(&german_file_with_three_bad_rows())
    );
    assert_eq!(answer["fingerprint"], fingerprint.as_str());
    assert_eq!(answer["identity"]["kind"], "file_name_and_content");

    // Under refuse_page the same sample refuses the delivery, naming all three rows.
    let mut strict = german.clone();
    strict["row_policy"] = json!("refuse_page");
    let (status, answer) = preview(&stack, &strict, &german_file_with_three_bad_rows()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "refused");
    let refusal = answer["refusal"].as_str().unwrap();
    assert!(refusal.starts_with("3 rows refused: line 3: "), "{refusal}");
    assert!(
        refusal.contains("line 5: ") && refusal.contains("line 6: "),
        "{refusal}"
    );

    // A body that cannot be read at all is a refusal, not a row list.
    let (status, answer) = preview(&stack, &german, b"Nummer;Menge\r\nA;1\r\n").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "refused");
    assert!(answer["refusal"]
        .as_str()
        .unwrap()
        .starts_with("invalid_payload: the header lacks"));

    assert_eq!(
        everything(&env).await,
        before,
        "a preview changed stored state"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_with_five_mistakes_is_answered_with_five_pointers_and_readers_are_refused() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let before = everything(&env).await;
    let mut draft = supplier_definition("lieferant-de");
    draft["connector"] = json!("Lieferant DE");
    draft["horizon_days"] = json!(0);
    draft["fields"]["unit"] = json!({ "map": { "Stk": "each" } });
    draft["fields"]["quantity"]["pattern"] = json!("(\\d+) (\\w+)");
    draft["identity"] = json!({ "kind": "webhook_id" });
    let (status, answer) = preview(&stack, &draft, b"x").await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_definition");
    let pointers = problem_pointers(&answer);
    assert_eq!(
        pointers,
        [
            "/connector",
            "/fields/quantity/pattern",
            "/fields/unit",
            "/horizon_days",
            "/identity/kind"
        ],
        "{answer}"
    );

    // The reader scope never sees a definition, not even a preview.
    let body = json!({ "definition": supplier_definition("lieferant-de"), "sample": "x" });
    let url = format!("{}/v1/connector-previews", stack.base_url());
    let (status, answer) = call("POST", url.clone(), Some(READER), body.clone()).await;
    assert_eq!(status, 403, "{answer}");
    // Both sample forms at once, or neither, is a bad request.
    let mut both = body.clone();
    both["sample_base64"] = json!("eA==");
    assert_eq!(call("POST", url.clone(), Some(OPERATOR), both).await.0, 400);
    // No GET route: API Gateway's own 404.
    let (status, _) = call("GET", url, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 404);
    assert_eq!(
        everything(&env).await,
        before,
        "a refused preview changed stored state"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_four_suppliers_samples_preview_with_their_exact_values() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    for (supplier, sample, first_sku, identity) in [
        ("lieferant-de", "bestand-2026-11-29.csv", "LM358DR", None),
        ("distributor-api", "page-1.json", "LM358DR", None),
        ("xml-catalog", "catalog-2026-11-29.xml", "LM358DR", None),
        (
            "snapshot-webhooks",
            "snapshot-8812.json",
            "LM358DR",
            Some("SNAP-8812"),
        ),
    ] {
        let (status, answer) = preview(
            &stack,
            &supplier_definition(supplier),
            &supplier_file(supplier, sample),
        )
        .await;
        assert_eq!(status, 200, "{supplier}: {answer}");
        assert_eq!(answer["outcome"], "stored", "{supplier}: {answer}");
        assert_eq!(answer["rows"][0]["sku"], first_sku, "{supplier}");
        assert_eq!(answer["identity"]["value"].as_str(), identity, "{supplier}");
    }
}
