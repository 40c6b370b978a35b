//! `POST /v1/mcp`, everything a client can get wrong: the transport's refusals (method,
//! `Accept`, `Content-Type`, size, a body that is not one JSON-RPC message, the protocol
//! version) in the contract's error shape; JSON-RPC errors for unknown methods and tools; tool
//! errors an agent can read for arguments the tools refuse. Nothing stored changes.

use super::{assert_error, mcp, mcp_answer, not_json_rpc};
use crate::read_path::{projected_scenario, Stored};
use feedsafe::protocols::mcp::McpRequest;
use serde_json::{json, Value};

const INVALID: (u16, &str) = (400, "invalid_request");

fn rpc(method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

const LIST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// A transport refusal: what, the headers changed, the body, the expected status and code.
type TransportCase = (
    String,
    Vec<(&'static str, &'static str)>,
    Vec<u8>,
    (u16, &'static str),
);

fn transport_cases() -> Vec<TransportCase> {
    let mut cases = Vec::new();
    for (what, body) in not_json_rpc() {
        cases.push((format!("body: {what}"), vec![], body, INVALID));
    }
    for content_type in [
        "text/plain",
        "",
        "application/jsonx",
        "application/json-seq",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let what = format!("content-type {content_type:?}");
        cases.push((
            what,
            vec![("content-type", content_type)],
            LIST.to_vec(),
            (415, "invalid_request"),
        ));
    }
    for accept in [
        "",
        "text/html",
        "application/json",
        "text/event-stream",
        "*/*;q=0",
    ] {
        let what = format!("accept {accept:?}");
        cases.push((
            what,
            vec![("accept", accept)],
            LIST.to_vec(),
            (406, "invalid_request"),
        ));
    }
    cases.push((
        "an unsupported protocol version".into(),
        vec![("mcp-protocol-version", "1999-01-01")],
        LIST.to_vec(),
        INVALID,
    ));
    let mut big = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 5 * 1024 * 1024));
    big.extend(br#""}}"#);
    cases.push((
        "a 5 MiB body".into(),
        vec![],
        big,
        (413, "payload_too_large"),
    ));
    cases
}

#[tokio::test(flavor = "multi_thread")]
async fn every_malformed_mcp_request_is_refused_in_the_contracts_shape() {
    let env = projected_scenario().await;
    let service = env.query();
    let reader = env.reader();
    let before = Stored::of(&env).await;
    for (what, headers, body, expected) in transport_cases() {
        let answer = mcp_answer(&service, mcp(&reader, &headers, &body)).await;
        assert_error(&what, &answer, expected);
    }
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        let request = McpRequest {
            method: method.into(),
            ..mcp(&reader, &[], LIST)
        };
        let answer = mcp_answer(&service, request).await;
        assert_error(method, &answer, (405, "method_not_allowed"));
    }
    Stored::of(&env).await.assert_unchanged_since(&before);
}

/// A JSON-RPC error answer: `error.code` the JSON-RPC code, and a message.
#[track_caller]
fn assert_rpc_error(what: &str, (status, body): &(u16, Value), expected: (u16, i64)) {
    assert_eq!(
        (
            *status,
            body["jsonrpc"].as_str(),
            body["error"]["code"].as_i64()
        ),
        (expected.0, Some("2.0"), Some(expected.1)),
        "{what}: {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.trim().is_empty(), "{what}: {body}");
}

/// A tool result an agent reads as an error: `isError` and a text saying what to change.
#[track_caller]
fn assert_tool_error(what: &str, (status, body): &(u16, Value), says: &str) {
    assert_eq!(status, &200, "{what}: {body}");
    let result = &body["result"];
    assert_eq!(result["isError"], true, "{what}: {body}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(says),
        "{what}: {text:?} does not say {says:?}"
    );
    assert!(
        text.len() <= 512,
        "{what}: the message echoes the input unbounded ({} bytes)",
        text.len()
    );
}

/// A tool's name, arguments an agent got wrong, and what the error it reads says.
type ArgumentCase = (&'static str, Value, &'static str);

fn tool_argument_cases() -> Vec<ArgumentCase> {
    let mut cases = offers_argument_cases();
    cases.extend(other_argument_cases());
    cases
}

fn offers_argument_cases() -> Vec<ArgumentCase> {
    let long = "A".repeat(100_000);
    vec![
        ("get_current_offers", json!({}), "item is required"),
        ("get_current_offers", json!({"item": ""}), "item must be"),
        ("get_current_offers", json!({"item": 7}), "item must be"),
        ("get_current_offers", json!({"item": null}), "item must be"),
        (
            "get_current_offers",
            json!({"item": ["AX-440-R2"]}),
            "item must be",
        ),
        (
            "get_current_offers",
            json!({"item": "AX\u{200B}440"}),
            "invalid arguments",
        ),
        (
            "get_current_offers",
            json!({"item": "~~"}),
            "invalid arguments",
        ),
        (
            "get_current_offers",
            json!({"item": long}),
            "invalid arguments",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": -1}),
            "max_age_seconds must be",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": "60"}),
            "max_age_seconds must be",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": 1.5}),
            "max_age_seconds must be",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": 1e30}),
            "max_age_seconds must be",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "quantity": "-5"}),
            "quantity",
        ),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "quantity": [2500]}),
            "quantity must be",
        ),
    ]
}

fn other_argument_cases() -> Vec<ArgumentCase> {
    let long = "A".repeat(100_000);
    vec![
        ("find_items", json!({}), "mpn is required"),
        (
            "find_items",
            json!({"mpn": "AX\u{200B}440"}),
            "invalid arguments",
        ),
        (
            "find_items",
            json!({"mpn": "AX-440", "manufacturer": 7}),
            "manufacturer must be a non-empty string",
        ),
        (
            "find_items",
            json!({"mpn": "AX-440", "manufacturer": "T\u{200B}I"}),
            "invalid item manufacturer",
        ),
        ("get_offer_history", json!({}), "item is required"),
        (
            "get_offer_history",
            json!({"item": "AX-440-R2", "limit": 0}),
            "limit must be",
        ),
        (
            "get_offer_history",
            json!({"item": "AX-440-R2", "limit": 101}),
            "limit must be",
        ),
        (
            "get_offer_history",
            json!({"item": "AX-440-R2", "limit": "5"}),
            "limit must be",
        ),
        (
            "get_offer_history",
            json!({"item": "AX-440-R2", "limit": -1}),
            "limit must be",
        ),
        (
            "get_offer_history",
            json!({"item": "AX\n440"}),
            "invalid arguments",
        ),
        ("get_observation", json!({}), "observation_id is required"),
        (
            "get_observation",
            json!({"observation_id": 5}),
            "observation_id must be",
        ),
        (
            "get_observation",
            json!({"observation_id": "nope"}),
            "not found",
        ),
        (
            "get_observation",
            json!({"observation_id": "obs_UPPER"}),
            "not found",
        ),
        (
            "get_observation",
            json!({"observation_id": format!("obs_{long}")}),
            "not found",
        ),
        (
            "get_observation",
            json!({"observation_id": "obs_aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
            "not found",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_methods_and_tools_and_refused_arguments_are_errors_an_agent_can_read() {
    let env = projected_scenario().await;
    let service = env.query();
    let reader = env.reader();
    let before = Stored::of(&env).await;
    let call = |body: Vec<u8>| mcp_answer(&service, mcp(&reader, &[], &body));

    // Methods MCP does not have, and tools/call without a tool this server has.
    let unknown_method = call(rpc("offers/get", json!({}))).await;
    assert_rpc_error("an unknown method", &unknown_method, (200, -32601));
    for (what, params) in [
        (
            "an unknown tool",
            json!({"name": "buy_now", "arguments": {}}),
        ),
        (
            "a tool name that is empty",
            json!({"name": "", "arguments": {}}),
        ),
    ] {
        assert_rpc_error(what, &call(rpc("tools/call", params)).await, (200, -32602));
    }
    for (what, params) in [
        ("tools/call without a name", json!({"arguments": {}})),
        (
            "arguments that are not an object",
            json!({"name": "get_current_offers", "arguments": "AX-440-R2"}),
        ),
        ("a name that is not a string", json!({"name": 7})),
    ] {
        let answer = call(rpc("tools/call", params)).await;
        assert_rpc_error(what, &answer, (200, -32602));
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("name") && message.contains("arguments"),
            "{what}: {message}"
        );
    }

    for (tool, args, says) in tool_argument_cases() {
        let what = format!(
            "{tool} {}",
            args.to_string().chars().take(80).collect::<String>()
        );
        let answer = call(rpc("tools/call", json!({"name": tool, "arguments": args}))).await;
        assert_tool_error(&what, &answer, says);
    }
    Stored::of(&env).await.assert_unchanged_since(&before);
}
