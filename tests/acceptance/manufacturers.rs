//! The canonical item as a buyer compares it, end to end through the local stack: the
//! manufacturer and its part number kept apart from the supplier's SKU and found by
//! `GET /v1/items?mpn=&manufacturer=`; NFC and NFD spellings of a part number as one item; a
//! decimal quantity (2.5 m of cable) in the places its connector declares, read back exactly
//! through REST and MCP and quoted for a decimal order.

use acceptance::*;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;

/// The distributor's definition under `connector`, with `changes` (top-level members, and
/// fields under `fields`) merged in.
fn definition(connector: &str, changes: Value) -> Value {
    let mut document = supplier_definition("distributor-terms");
    document["connector"] = json!(connector);
    for (name, value) in changes.as_object().unwrap() {
        match name.as_str() {
            "fields" => {
                for (field, source) in value.as_object().unwrap() {
                    document["fields"][field] = source.clone();
                }
            }
            _ => document[name] = value.clone(),
        }
    }
    document
}

/// A one-row snapshot of `row`'s members over a reel of `LM358DR/NOPB`, 6,000 in stock.
fn snapshot(id: &str, row: Value) -> Vec<u8> {
    let mut item = json!({
        "mpn": "LM358DR/NOPB", "stock": 6000, "uom": "EA", "currency": "USD",
        "prices": [{"break_qty": 1, "unit_price": "0.45"}],
        "packaging": {"type": "Tape & Reel (TR)", "quantity": 3000}
    });
    for (name, value) in row.as_object().unwrap() {
        item[name] = value.clone();
    }
    let page = json!({
        "meta": {"snapshot_id": id, "generated_at": "2026-11-29T08:00:00Z"},
        "data": {"items": [item]}
    });
    serde_json::to_vec(&page).unwrap()
}

async fn onboard(stack: &local_stack::Stack, document: Value) {
    let connector = document["connector"].as_str().unwrap().to_owned();
    let url = format!("{}/v1/connectors/{connector}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document).await;
    assert_eq!(status, 201, "{answer}");
}

/// Onboards `document`'s connector, drops `body` and waits for its offer of `item`.
async fn offered(
    env: &TestEnv,
    stack: &local_stack::Stack,
    document: Value,
    body: Vec<u8>,
    item: &str,
) -> Value {
    let connector = document["connector"].as_str().unwrap().to_owned();
    onboard(stack, document).await;
    env.drop_file(&connector, "snapshot.json", body).await;
    let url = format!(
        "{}/v1/offers?item={}",
        stack.base_url(),
        percent_encoded(item)
    );
    offer_of(&url, READER, &connector)
        .await
        .unwrap_or_else(|| panic!("no offer of {item} by {connector}"))
}

/// The listed items' (key, manufacturer, current offers) of `GET /v1/items?{query}`.
async fn items(base: &str, query: &str) -> (Value, Vec<(String, Value, u64)>) {
    let url = format!("{base}/v1/items?{query}");
    let (status, found) = call("GET", url, Some(READER), Value::Null).await;
    assert_eq!(status, 200, "{found}");
    let listed = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let key = i["item"].as_str().unwrap().to_owned();
            (
                key,
                i["manufacturer"].clone(),
                i["current_offers"].as_u64().unwrap(),
            )
        })
        .collect();
    (found, listed)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_manufacturers_part_number_is_the_item_and_the_sku_its_source_record() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let mapped = json!({ "fields": {
        "sku": { "path": "$.sku" },
        "mpn": { "path": "$.mpn" },
        "manufacturer": { "path": "$.maker" }
    }});
    let row =
        json!({ "sku": "296-1395-1-ND", "mpn": "lm358dr/nopb", "maker": "Texas Instruments" });
    let ti = "LM358DR/NOPB~mTEXAS INSTRUMENTS~reel~new";
    let offer = offered(
        &env,
        &stack,
        definition("mfr-ti", mapped),
        snapshot("S-TI", row),
        ti,
    )
    .await;
    assert_eq!(offer["source_record"], "296-1395-1-ND", "{offer}");
    let plain = "LM358DR/NOPB~reel~new";
    let row = json!({ "mpn": "LM358DR/NOPB" });
    offered(
        &env,
        &stack,
        definition("mfr-plain", json!({})),
        snapshot("S-P", row),
        plain,
    )
    .await;

    let every = format!("mpn={}", percent_encoded("LM358DR/NOPB"));
    let (_, listed) = items(&base, &every).await;
    let manufacturer = json!("TEXAS INSTRUMENTS");
    assert_eq!(
        listed,
        [
            (ti.to_owned(), manufacturer.clone(), 1),
            (plain.to_owned(), Value::Null, 1)
        ]
    );
    let of_ti = format!("{every}&manufacturer=texas%20instruments");
    let (found, listed) = items(&base, &of_ti).await;
    assert_eq!(found["manufacturer"], manufacturer, "{found}");
    assert_eq!(listed, [(ti.to_owned(), manufacturer.clone(), 1)]);
    let (_, none) = items(&base, &format!("{every}&manufacturer=Onsemi")).await;
    assert!(none.is_empty(), "{none:?}");

    let arguments = json!({ "mpn": "LM358DR/NOPB", "manufacturer": "Texas Instruments" });
    let result = mcp_tool(&base, READER, "find_items", arguments).await;
    assert_eq!(
        result["structuredContent"]["items"], found["items"],
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("1 item(s) of part number LM358DR/NOPB by TEXAS INSTRUMENTS."),
        "{text}"
    );
    assert!(
        text.contains("manufacturer TEXAS INSTRUMENTS, packaging reel"),
        "{text}"
    );
    assert_invalid_request(format!("{base}/v1/items?{every}&manufacturer="), READER).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nfc_and_nfd_spellings_of_a_part_number_are_one_item() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let composed = "\u{C4}BC-\u{C9}1";
    let decomposed = "A\u{308}BC-E\u{301}1";
    let item = format!("{composed}~reel~new");
    for (connector, spelling) in [("spell-nfc", composed), ("spell-nfd", decomposed)] {
        let body = snapshot(&format!("S-{connector}"), json!({ "mpn": spelling }));
        let offer = offered(&env, &stack, definition(connector, json!({})), body, &item).await;
        assert_eq!(offer["item"], item.as_str(), "{offer}");
        assert_eq!(
            offer["source_record"], spelling,
            "the supplier's own spelling is kept"
        );
    }
    let asked = format!("mpn={}", percent_encoded(decomposed));
    let (found, listed) = items(&stack.base_url(), &asked).await;
    assert_eq!(found["mpn"], composed);
    assert_eq!(listed, [(item.clone(), Value::Null, 2)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decimal_quantity_reads_back_exactly_and_is_quoted() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let metres = json!({
        "unit_decimal_places": { "m": 2 },
        "fields": { "unit": { "path": "$.uom", "map": { "EA": "each", "MTR": "m" } } }
    });
    let row = json!({
        "mpn": "NYM-J 3X1.5", "stock": 2.5, "uom": "MTR", "multiple": 0.25, "moq": 0.5,
        "prices": [{"break_qty": 0.5, "unit_price": "1.89"}, {"break_qty": 2, "unit_price": "1.75"}],
        "packaging": {"type": "Drum"}
    });
    let item = "NYM-J 3X1.5~drum~new";
    let document = definition("cable-m", metres);
    let offer = offered(&env, &stack, document, snapshot("S-C", row), item).await;
    assert_eq!(offer["quantity"], json!(2.5), "{offer}");
    assert_eq!(offer["quantity_basis"], "m");
    assert_eq!(offer["minimum_order_quantity"], "0.5");

    quotes_of_cable(&base, item).await;
    let result = mcp_tool(&base, READER, "get_current_offers", json!({ "item": item })).await;
    let offers = &result["structuredContent"]["offers"];
    assert_eq!(offers[0]["quantity"], json!(2.5), "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("quantity 2.5 m"), "{text}");

    the_preview_refuses_finer_quantities(&base).await;
}

/// `?quantity=` on the 2.5 m offer: 2.25 m at the 2+ break; 3 m more than the stock; 1.255 m
/// finer than metres' two places.
async fn quotes_of_cable(base: &str, item: &str) {
    let url = format!("{base}/v1/offers?item={}", percent_encoded(item));
    let quote = |answer: &Value| answer["offers"][0]["quote"].clone();
    let (status, answer) = call(
        "GET",
        format!("{url}&quantity=2.25"),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let q = quote(&answer);
    assert_eq!(
        (&q["orderable"], &q["unit_price"]),
        (&json!(true), &json!("1.75")),
        "{q}"
    );
    assert_eq!(q["extended_price"], "3.9375");
    let (_, answer) = call(
        "GET",
        format!("{url}&quantity=3"),
        Some(READER),
        Value::Null,
    )
    .await;
    let why = quote(&answer)["not_orderable_because"].to_string();
    assert!(why.contains("more than the 2.5 in stock"), "{why}");
    let finer = format!("{url}&quantity=1.255");
    let (_, answer) = call("GET", finer, Some(READER), Value::Null).await;
    let why = quote(&answer)["not_orderable_because"].to_string();
    assert!(
        why.contains("finer than the offer's unit allows (2 decimal places)"),
        "{why}"
    );
}

/// Metres allow two places; a third is refused by the preview, and an `each` row whole.
async fn the_preview_refuses_finer_quantities(base: &str) {
    let preview = format!("{base}/v1/connectors/cable-m/preview");
    for (row, says) in [
        (
            json!({ "stock": 2.505 }),
            "quantity 2.505 has 3 decimal places; its unit allows 2",
        ),
        (
            json!({ "uom": "EA", "multiple": 1, "moq": 1, "prices": [{"break_qty": 1, "unit_price": "1"}] }),
            "quantity 2.5 is not a whole number",
        ),
    ] {
        let mut sent = row.clone();
        for (k, v) in json!({"mpn": "NYM-J 3X1.5", "stock": 2.5, "uom": "MTR"})
            .as_object()
            .unwrap()
        {
            sent.as_object_mut().unwrap().entry(k).or_insert(v.clone());
        }
        let sample = base64_of(&snapshot("S-R", sent));
        let (status, answer) = call(
            "POST",
            preview.clone(),
            Some(OPERATOR),
            json!({ "sample_base64": sample }),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        let reason = answer["refused_rows"][0]["reason"]
            .as_str()
            .unwrap_or_default();
        assert!(reason.contains(says), "{says:?} not in {answer}");
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
