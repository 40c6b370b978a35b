//! Commercial terms end to end through the local stack: a distributor's snapshot with three
//! price breaks, a minimum order quantity, an order multiple, stock, lead time, a reel of
//! 3,000 and a price validity, mapped by its connector definition, read back exactly through
//! REST and MCP; the same snapshot re-sent with one break changed is a payload mismatch whose
//! diff names that break.

use acceptance::*;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;
const SUPPLIER: &str = "distributor-terms";
const FILE: &str = "snapshot-7731.json";
/// The reel variant of the part: the snapshot's packaging is part of the item.
const ITEM: &str = "LM358DR~reel~new";

/// Every term of the snapshot's first row, as the read routes must show it.
fn expected_terms() -> Value {
    json!({
        "quantity": 12000,
        "quantity_basis": "each",
        "price": "0.412",
        "currency": "USD",
        "price_breaks": [
            {"min_quantity": "1000", "unit_price": "0.412"},
            {"min_quantity": "2500", "unit_price": "0.398"},
            {"min_quantity": "10000", "unit_price": "0.351"}
        ],
        "minimum_order_quantity": "1000",
        "order_multiple": "500",
        "lead_time_days": 14,
        "lead_time": "14 days",
        "packaging": "reel",
        "pack_size": "3000",
        "valid_until": "2026-12-31T23:59:59Z",
        "incoterms": "FCA",
        "tax_included": false
    })
}

fn assert_terms(offer: &Value, how: &str) {
    for (name, value) in expected_terms().as_object().unwrap() {
        let name = match (how, name.as_str()) {
            ("preview", "quantity_basis") => "unit",
            _ => name,
        };
        assert_eq!(&offer[name], value, "{how}: {name} in {offer}");
    }
    assert!(offer.get("valid_from").is_none(), "{how}: never stated");
}

/// The stored definition's preview of the sample shows the terms the offer will carry.
async fn previewed_row(stack: &local_stack::Stack, id: &str, sample: &[u8]) -> Value {
    use base64::Engine;
    let url = format!("{}/v1/connectors/{id}/preview", stack.base_url());
    let sample = base64::engine::general_purpose::STANDARD.encode(sample);
    let (status, answer) = call(
        "POST",
        url,
        Some(OPERATOR),
        json!({ "sample_base64": sample }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "stored", "{answer}");
    answer["rows"][0].clone()
}

async fn onboard_and_drop(env: &TestEnv, stack: &local_stack::Stack) -> (String, Vec<u8>) {
    let document = supplier_definition(SUPPLIER);
    let id = document["connector"].as_str().unwrap().to_owned();
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document).await;
    assert_eq!(status, 201, "{answer}");
    let body = supplier_file(SUPPLIER, FILE);
    assert_terms(&previewed_row(stack, &id, &body).await, "preview");
    env.drop_file(&id, FILE, body.clone()).await;
    (id, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_term_reads_back_exactly_and_a_changed_break_is_a_mismatch() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let (id, body) = onboard_and_drop(&env, &stack).await;
    let url = format!("{}/v1/items/{ITEM}/offers", stack.base_url());
    let offer = offer_of(&url, READER, &id)
        .await
        .unwrap_or_else(|| panic!("no offer of {id} at {url}"));
    assert_terms(&offer, "REST");

    let result = mcp_tool(
        &stack.base_url(),
        READER,
        "get_current_offers",
        json!({ "item": ITEM }),
    )
    .await;
    let offers = result["structuredContent"]["offers"].as_array().unwrap();
    let mcp_offer = offers
        .iter()
        .find(|o| o["connector"] == id.as_str())
        .unwrap();
    assert_terms(mcp_offer, "MCP");
    let text = result["content"][0]["text"].as_str().unwrap();
    for words in [
        "breaks 1000+ at 0.412 USD, 2500+ at 0.398 USD, 10000+ at 0.351 USD",
        "MOQ 1000",
        "order multiple 500",
        "lead time 14 days",
        "packaging reel",
        "pack of 3000",
        "valid until 2026-12-31T23:59:59Z",
        "incoterms FCA",
        "tax included: no",
    ] {
        assert!(text.contains(words), "{words:?} not in the summary: {text}");
    }

    // The supplier re-sends the snapshot with the second break's price changed.
    let changed = String::from_utf8(body).unwrap().replacen(
        r#""unit_price":"0.398""#,
        r#""unit_price":"0.395""#,
        1,
    );
    env.drop_file(&id, "snapshot-7731-resent.json", changed.into_bytes())
        .await;
    let entry = mismatch_entry(&stack).await;
    assert_eq!(entry["reason_code"], "replay_payload_mismatch", "{entry}");
    let differences = entry["diff"]["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1, "only the break changed: {entry}");
    assert_eq!(
        differences[0]["path"], "/data/items/0/prices/1/unit_price",
        "{entry}"
    );
    assert_eq!(differences[0]["stored"], "0.398");
    assert_eq!(differences[0]["received"], "0.395");
    let offer = offer_of(&url, READER, &id).await.unwrap();
    assert_terms(&offer, "after the mismatch");
}

/// The one quarantine entry, with its diff.
async fn mismatch_entry(stack: &local_stack::Stack) -> Value {
    let list_url = format!("{}/v1/quarantine", stack.base_url());
    for _ in 0..300 {
        let (_, list) = call("GET", list_url.clone(), Some(OPERATOR), Value::Null).await;
        if let Some(first) = list["entries"].as_array().and_then(|e| e.first()) {
            let id = first["quarantine_id"].as_str().unwrap();
            let url = format!("{}/v1/quarantine/{id}", stack.base_url());
            let (status, entry) = call("GET", url, Some(OPERATOR), Value::Null).await;
            assert_eq!(status, 200, "{entry}");
            return entry;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("no quarantine entry");
}

/// A variant of the snapshot from another supplier: its first row's prices, terms and currency
/// replaced by `row` (merged over the first row).
fn variant(body: &[u8], snapshot: &str, row: Value) -> Vec<u8> {
    let mut document: Value = serde_json::from_slice(body).unwrap();
    document["meta"]["snapshot_id"] = json!(snapshot);
    let first = &mut document["data"]["items"][0];
    for key in ["moq", "multiple", "price_valid_until"] {
        first.as_object_mut().unwrap().remove(key);
    }
    for (key, value) in row.as_object().unwrap() {
        first[key] = value.clone();
    }
    serde_json::to_vec(&document).unwrap()
}

/// Four more suppliers of the same reel, each under its own connector: one with a minimum
/// order of 5,000, one whose price expired, one with 3,000 in stock, one in euros.
async fn onboard_four_others(env: &TestEnv, stack: &local_stack::Stack, body: &[u8]) {
    let others = [
        (
            "distri-moq",
            json!({"prices": [{"break_qty": 1, "unit_price": "0.405"}], "moq": 5000}),
        ),
        (
            "distri-old",
            json!({"prices": [{"break_qty": 100, "unit_price": "0.39"}],
                   "price_valid_until": "2026-01-01T00:00:00Z"}),
        ),
        (
            "distri-small",
            json!({"prices": [{"break_qty": 1, "unit_price": "0.401"}], "stock": 3000}),
        ),
        (
            "distri-eu",
            json!({"prices": [{"break_qty": 1, "unit_price": "0.37"}], "currency": "EUR"}),
        ),
    ];
    for (connector, row) in &others {
        let mut document = supplier_definition(SUPPLIER);
        document["connector"] = json!(connector);
        let url = format!("{}/v1/connectors/{connector}", stack.base_url());
        let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document).await;
        assert_eq!(status, 201, "{answer}");
        let file = variant(body, &format!("SNAP-{connector}"), row.clone());
        env.drop_file(connector, FILE, file).await;
    }
}

/// Each offer's quote against the table checked by hand: (connector, orderable, unit price,
/// extended price, price status, rank).
fn assert_quotes(answer: &Value) {
    let table = [
        ("distri-eu", true, "0.37", "925.00", "current", json!(1)),
        (
            "distri-terms",
            true,
            "0.398",
            "995.000",
            "current",
            json!(1),
        ),
        (
            "distri-small",
            true,
            "0.401",
            "1002.500",
            "current",
            json!(2),
        ),
        (
            "distri-moq",
            false,
            "0.405",
            "1012.500",
            "current",
            Value::Null,
        ),
        ("distri-old", true, "0.39", "975.00", "expired", Value::Null),
    ];
    let offers = answer["offers"].as_array().unwrap();
    assert_eq!(offers.len(), table.len(), "{answer}");
    let quote_of =
        |connector: &str| &offers.iter().find(|o| o["connector"] == connector).unwrap()["quote"];
    for (connector, orderable, unit, extended, status, rank) in &table {
        let quote = quote_of(connector);
        assert_eq!(quote["orderable"], *orderable, "{connector}: {quote}");
        assert_eq!(quote["unit_price"], *unit, "{connector}");
        assert_eq!(quote["extended_price"], *extended, "{connector}");
        assert_eq!(quote["price_status"], *status, "{connector}");
        assert_eq!(quote["rank"], *rank, "{connector}");
    }
    assert_eq!(
        quote_of("distri-moq")["not_orderable_because"],
        json!(["below the minimum order quantity 5000"])
    );
    let order: Vec<&str> = offers
        .iter()
        .map(|o| o["connector"].as_str().unwrap())
        .collect();
    assert_eq!(
        &order[..3],
        ["distri-eu", "distri-terms", "distri-small"],
        "ranked first, by currency"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn offers_for_a_quantity_rank_the_orderable_ones_within_each_currency() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let (_, body) = onboard_and_drop(&env, &stack).await;
    onboard_four_others(&env, &stack, &body).await;
    let url = format!("{}/v1/items/{ITEM}/offers", stack.base_url());
    for connector in [
        "distri-terms",
        "distri-moq",
        "distri-old",
        "distri-small",
        "distri-eu",
    ] {
        offer_of(&url, READER, connector)
            .await
            .unwrap_or_else(|| panic!("{connector}"));
    }
    let (status, answer) = call(
        "GET",
        format!("{url}?quantity=2500"),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["quantity"], "2500");
    assert_quotes(&answer);

    let arguments = json!({"item": ITEM, "quantity": 2500});
    let result = mcp_tool(&stack.base_url(), READER, "get_current_offers", arguments).await;
    let text = result["content"][0]["text"].as_str().unwrap();
    let expected = "#1 in USD: 2500 from distri-terms at 0.398 USD each (995.000 USD), \
                    MOQ 1000 met, lead time 14 days, source-reported, unverified";
    assert!(text.contains(expected), "{expected:?} not in {text}");
    assert!(
        text.contains("not orderable: below the minimum order quantity 5000"),
        "{text}"
    );
    assert_invalid_request(format!("{url}?quantity=-5"), READER).await;
}
