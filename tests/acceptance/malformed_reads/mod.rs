//! Every malformed read a client can build from `docs/openapi.yaml` gets a clean answer: a 4xx
//! with a JSON error body (`{"error": {"code", "message"}}`, a stable code and a message), never
//! a 5xx, and nothing stored changes. Through the query function's handlers (what API Gateway
//! hands over) and through the local stack over HTTP (paths and query strings as sent), on
//! DynamoDB Local and moto.

mod mcp_calls;
mod rest;

use crate::read_path::{projected_scenario, Stored};
use acceptance::*;
use feedsafe::domain::hashing::base64_encode;
use feedsafe::domain::ids::TenantId;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::http::HttpRequest;
use feedsafe::protocols::mcp::McpRequest;
use feedsafe::protocols::query::{Principal, QueryService};
use serde_json::{json, Value};

const HISTORY: &str = "/v1/items/BX-1/observations";

fn principal(tenant: &str) -> Principal {
    Principal {
        tenant: TenantId::parse(tenant).unwrap(),
        scopes: vec!["offers:read".into()],
        subject: None,
    }
}

fn get(principal: &Principal, path: &str, query: &[(&str, &str)]) -> HttpRequest {
    read_request(principal, path, query)
}

/// (status, JSON body) of one read through the query function's handler.
async fn read(service: &QueryService, request: HttpRequest) -> (u16, Value) {
    let response = handle_read(service, request, Timestamp::now()).await;
    assert_eq!(response.content_type, "application/json");
    let body = serde_json::from_str(&response.body)
        .unwrap_or_else(|e| panic!("not a JSON body ({e}): {}", response.body));
    (response.status, body)
}

/// `body` is the contract's error shape with `code` and a message.
#[track_caller]
fn assert_error(what: &str, (status, body): &(u16, Value), expected: (u16, &str)) {
    assert_eq!(
        (*status, body["error"]["code"].as_str()),
        (expected.0, Some(expected.1)),
        "{what}: {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.trim().is_empty(), "{what}: no message in {body}");
    assert!(
        message.len() <= 512,
        "{what}: the message echoes the input unbounded ({} bytes)",
        message.len()
    );
    let keys: Vec<&String> = body["error"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, ["code", "message"], "{what}: {body}");
}

/// A real cursor: the second page of BX-1's history (two claims, one per page).
async fn issued_cursor(service: &QueryService, reader: &Principal) -> String {
    let first = read(service, get(reader, HISTORY, &[("limit", "1")])).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let cursor = first.1["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let second = read(
        service,
        get(reader, HISTORY, &[("limit", "1"), ("cursor", &cursor)]),
    )
    .await;
    assert_eq!(
        second.0, 200,
        "the cursor pages where it was issued: {}",
        second.1
    );
    assert_ne!(
        first.1["observations"][0]["observation_id"], second.1["observations"][0]["observation_id"],
        "the second page is another claim"
    );
    cursor
}

/// Cursors a client could hold that were not issued for the listing it sends them to.
fn foreign_cursors(issued: &str, longest: usize) -> Vec<(&'static str, String)> {
    let b64 = |v: Value| base64_encode(v.to_string().as_bytes());
    let half = issued
        .get(..issued.len() / 2)
        .unwrap_or_default()
        .to_owned();
    vec![
        ("empty", String::new()),
        ("not base64", "!!!not-a-cursor!!!".into()),
        ("base64 of text", base64_encode(b"page 2 please")),
        ("base64 of a JSON array", b64(json!([1, 2]))),
        ("base64 of another JSON object", b64(json!({"page": 2}))),
        ("cut in half", half),
        (
            "a raw key with empty values",
            b64(json!({"pk": "", "sk": "", "gsi1pk": "", "gsi1sk": ""})),
        ),
        (
            "a raw key of another tenant's partition",
            b64(json!({"pk": "OBS#obs_aaaa", "sk": "OBS",
                "gsi1pk": "ITEM#other#BX-1~each~new", "gsi1sk": "2026-11-29T08:00:00.000000Z#obs_aaaa"})),
        ),
        ("far longer than any issued", "A".repeat(longest)),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_answers_only_the_listing_it_was_issued_for() {
    let env = projected_scenario().await;
    let service = env.query();
    let reader = env.reader();
    let cursor = issued_cursor(&service, &reader).await;
    let before = Stored::of(&env).await;

    let other_tenant = principal("other");
    let mut cases = vec![
        (
            "another item's cursor",
            reader.clone(),
            "/v1/items/AX-440-R2/observations",
            cursor.clone(),
        ),
        (
            "another tenant's cursor",
            other_tenant,
            HISTORY,
            cursor.clone(),
        ),
    ];
    for (what, forged) in foreign_cursors(&cursor, 100_000) {
        cases.push((what, reader.clone(), HISTORY, forged));
    }
    for (what, who, path, cursor) in cases {
        let answer = read(&service, get(&who, path, &[("cursor", &cursor)])).await;
        assert_error(what, &answer, (400, "invalid_cursor"));
    }
    Stored::of(&env).await.assert_unchanged_since(&before);
}

const PROTOCOL: &str = "2025-06-18";

fn mcp(principal: &Principal, headers: &[(&str, &str)], body: &[u8]) -> McpRequest {
    let mut all: Vec<(String, String)> = vec![
        ("host".into(), "api.example.com".into()),
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("mcp-protocol-version".into(), PROTOCOL.into()),
    ];
    for (name, value) in headers {
        all.retain(|(n, _)| n != name);
        all.push((name.to_string(), value.to_string()));
    }
    McpRequest {
        method: "POST".into(),
        headers: all,
        body: body.to_vec(),
        principal: Some(principal.clone()),
    }
}

async fn mcp_answer(service: &QueryService, request: McpRequest) -> (u16, Value) {
    let response = handle_mcp(service, request).await;
    let body = serde_json::from_str(&response.body).unwrap_or(Value::String(response.body.clone()));
    (response.status, body)
}

/// Bodies that are not one JSON-RPC 2.0 message, sent as `application/json`.
fn not_json_rpc() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", Vec::new()),
        ("not JSON", b"hello".to_vec()),
        (
            "truncated JSON",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/li"#.to_vec(),
        ),
        ("not UTF-8", vec![0xff, 0xfe, 0x00]),
        ("a JSON string", br#""tools/list""#.to_vec()),
        ("a JSON number", b"42".to_vec()),
        ("an empty object", b"{}".to_vec()),
        ("no method", br#"{"jsonrpc":"2.0","id":1}"#.to_vec()),
        (
            "JSON-RPC 1.0",
            br#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_vec(),
        ),
        ("no jsonrpc", br#"{"id":1,"method":"tools/list"}"#.to_vec()),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#.to_vec(),
        ),
        ("an empty batch", b"[]".to_vec()),
        (
            "a method that is not a string",
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#.to_vec(),
        ),
        (
            "an id that is an object",
            br#"{"jsonrpc":"2.0","id":{},"method":"tools/list"}"#.to_vec(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_body_that_is_not_a_json_rpc_message_is_400_invalid_request() {
    let env = spawn_env(false).await;
    let service = env.query();
    let reader = env.reader();
    for (what, body) in not_json_rpc() {
        let answer = mcp_answer(&service, mcp(&reader, &[], &body)).await;
        assert_error(what, &answer, (400, "invalid_request"));
    }
}
