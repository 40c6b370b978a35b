//! Real manufacturer part numbers end to end through the local stack: `LM358DR/NOPB` offered
//! by two suppliers, one as a reel and one as cut tape, and by a third refurbished, is three
//! items that `GET /v1/items?mpn=` (and the MCP `find_items` tool) find together, each read by
//! the query form; a part number of 129 characters is refused with its literal.

use acceptance::*;
use serde_json::{json, Value};

const OPERATOR: &str = LOCAL_OPERATOR;
const READER: &str = LOCAL_READER;
const MPN: &str = "LM358DR/NOPB";

/// The distributor's definition under `connector`, reading the row's condition too.
fn definition(connector: &str) -> Value {
    let mut document = supplier_definition("distributor-terms");
    document["connector"] = json!(connector);
    document["fields"]["condition"] = json!({ "path": "$.condition" });
    document
}

/// A one-row snapshot of `mpn` with `packaging` (the supplier's words) and `condition`.
fn snapshot(id: &str, mpn: &str, packaging: &str, condition: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "meta": {"snapshot_id": id, "generated_at": "2026-11-29T08:00:00Z"},
        "data": {"items": [{
            "mpn": mpn, "stock": 6000, "uom": "EA", "currency": "USD", "condition": condition,
            "prices": [{"break_qty": 1, "unit_price": "0.45"}],
            "packaging": {"type": packaging, "quantity": 3000}
        }]}
    }))
    .unwrap()
}

async fn onboard(stack: &local_stack::Stack, connector: &str) {
    let url = format!("{}/v1/connectors/{connector}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, definition(connector)).await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_part_number_with_a_slash_is_three_items_found_together() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let variants = [
        (
            "parts-reel",
            "Tape & Reel (TR)",
            "new",
            "LM358DR/NOPB~reel~new",
        ),
        (
            "parts-tape",
            "Cut Tape (CT)",
            "new",
            "LM358DR/NOPB~cut-tape~new",
        ),
        (
            "parts-refurb",
            "Tape & Reel (TR)",
            "refurbished",
            "LM358DR/NOPB~reel~refurbished",
        ),
    ];
    for (connector, packaging, condition, item) in variants {
        onboard(&stack, connector).await;
        let body = snapshot(&format!("SNAP-{connector}"), MPN, packaging, condition);
        env.drop_file(connector, "snapshot.json", body).await;
        let url = format!("{base}/v1/offers?item={}", percent_encoded(item));
        let offer = offer_of(&url, READER, connector)
            .await
            .unwrap_or_else(|| panic!("no offer of {item} by {connector}"));
        assert_eq!(offer["source_record"], MPN, "{offer}");
        assert_eq!(offer["item"], item);
    }
    found_together(&base).await;
    // The operator's timeline of one of them, by query as the console asks for it.
    let url = format!(
        "{base}/v1/timeline?item={}",
        percent_encoded("LM358DR/NOPB~reel~new")
    );
    let (status, timeline) = call("GET", url, Some(OPERATOR), Value::Null).await;
    assert_eq!(status, 200, "{timeline}");
    assert_eq!(
        timeline["claims"].as_array().map(Vec::len),
        Some(1),
        "{timeline}"
    );
}

/// `GET /v1/items?mpn=` and the MCP `find_items` tool list the three items, each with its one
/// current offer.
async fn found_together(base: &str) {
    let url = format!("{base}/v1/items?mpn={}", percent_encoded(MPN));
    let (status, found) = call("GET", url, Some(READER), Value::Null).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["mpn"], MPN);
    let listed: Vec<(&str, &str, &str, u64)> = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let text = |k: &str| i[k].as_str().unwrap();
            (
                text("item"),
                text("packaging"),
                text("condition"),
                i["current_offers"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("LM358DR/NOPB~cut-tape~new", "cut-tape", "new", 1),
            ("LM358DR/NOPB~reel~new", "reel", "new", 1),
            ("LM358DR/NOPB~reel~refurbished", "reel", "refurbished", 1),
        ]
    );
    // The agent's spelling: lower case, as a customer typed it.
    let result = mcp_tool(base, READER, "find_items", json!({ "mpn": "lm358dr/nopb" })).await;
    assert_eq!(
        result["structuredContent"]["items"], found["items"],
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("3 item(s) of part number LM358DR/NOPB."),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_part_number_of_129_characters_is_refused_with_its_literal() {
    use base64::Engine;
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    onboard(&stack, "parts-long").await;
    let longest = format!("{}Ω", "X".repeat(127));
    let too_long = format!("{}Ω", "X".repeat(128));
    let url = format!("{}/v1/connectors/parts-long/preview", stack.base_url());
    for (mpn, outcome) in [(&longest, "stored"), (&too_long, "refused")] {
        let sample = snapshot("SNAP-L", mpn, "Tape & Reel (TR)", "new");
        let sample = base64::engine::general_purpose::STANDARD.encode(sample);
        let (status, answer) = call(
            "POST",
            url.clone(),
            Some(OPERATOR),
            json!({ "sample_base64": sample }),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["outcome"], outcome, "{answer}");
        if outcome == "refused" {
            let reason = answer["refused_rows"][0]["reason"].as_str().unwrap();
            assert!(reason.contains(&format!("{too_long:?}")), "{reason}");
            assert!(reason.contains("longer than 128 characters"), "{reason}");
        }
    }
}
