//! The MCP endpoint for buying agents (docs/adr/0053-mcp-endpoint-on-the-query-function.md): `POST
//! /v1/mcp` on the query function, through the deployed entry point (an API Gateway event with the
//! JWT authorizer's claims) and through the transport-independent handler, on DynamoDB Local and
//! moto. The reference Python client runs against the local stack in `scripts/check-durability`.

use crate::read_path::{projected_scenario, Stored};
use acceptance::*;
use aws_lambda_events::event::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::http::HttpRequest;
use feedsafe::protocols::mcp::McpRequest;
use feedsafe::protocols::query::{Principal, QueryService};
use serde_json::{json, Value};

const PROTOCOL: &str = "2025-06-18";

/// The tools `tools/list` names, in its order.
pub(crate) const TOOL_NAMES: [&str; 5] = [
    "get_current_offers",
    "find_items",
    "get_offer_history",
    "get_observation",
    "get_source_status",
];

fn rpc(principal: Option<Principal>, method: &str, params: Value) -> McpRequest {
    let mut message = json!({"jsonrpc": "2.0", "id": 7, "method": method});
    if !params.is_null() {
        message["params"] = params;
    }
    McpRequest {
        method: "POST".into(),
        headers: vec![
            ("host".into(), "api.example.com".into()),
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
            ("mcp-protocol-version".into(), PROTOCOL.into()),
        ],
        body: message.to_string().into_bytes(),
        principal,
    }
}

/// The JSON-RPC result of one call (panics on a transport or JSON-RPC error).
async fn call(service: &QueryService, principal: &Principal, method: &str, params: Value) -> Value {
    let response = handle_mcp(service, rpc(Some(principal.clone()), method, params)).await;
    assert_eq!(response.status, 200, "{method}: {}", response.body);
    let answer: Value = serde_json::from_str(&response.body).expect("a JSON answer");
    assert!(answer["error"].is_null(), "{method}: {answer}");
    answer["result"].clone()
}

async fn tool(service: &QueryService, principal: &Principal, name: &str, args: Value) -> Value {
    call(
        service,
        principal,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await
}

fn get(path: &str, query: &[(&str, &str)], principal: &Principal) -> HttpRequest {
    read_request(principal, path, query)
}

/// The current offer of `connector` in a `get_current_offers` body.
pub(crate) fn offer_of(body: &Value, connector: &str) -> Value {
    body["offers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["connector"] == connector)
        .cloned()
        .unwrap_or_else(|| panic!("no offer of {connector} in {body}"))
}

/// The quantities of `connector`'s claims in a `get_offer_history` body, in its order.
pub(crate) fn quantities_of(body: &Value, connector: &str) -> Vec<u64> {
    body["observations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["connector"] == connector)
        .filter_map(|o| o["quantity"].as_u64())
        .collect()
}

/// What an answer says about its observations, without what depends on the clock.
fn claims(body: &Value, list: &str) -> Vec<Value> {
    body[list]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut o| {
            o.as_object_mut().map(|m| m.remove("freshness"));
            o
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tools_answer_with_the_read_routes_bodies_and_say_what_the_data_is() {
    let env = projected_scenario().await;
    let service = env.query();
    let reader = env.reader();
    initialized_with_every_tool(&service, &reader).await;
    let acme = current_offers_are_the_rest_body(&service, &reader).await;
    history_and_observation_are_the_rest_bodies(&service, &reader, &acme).await;
    wrong_arguments_are_tool_errors(&service, &reader).await;
}

/// `initialize`, and `tools/list` naming every tool, each read-only and saying what the data is.
async fn initialized_with_every_tool(service: &QueryService, reader: &Principal) {
    let init = call(
        service,
        reader,
        "initialize",
        json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "acceptance", "version": "1"}}),
    )
    .await;
    assert_eq!(init["serverInfo"]["name"], "feedsafe-offers", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(
        init["instructions"]
            .as_str()
            .unwrap()
            .contains("not verified"),
        "{init}"
    );

    let listed = call(service, reader, "tools/list", json!({})).await;
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOL_NAMES);
    for t in tools {
        let description = t["description"].as_str().unwrap();
        assert!(
            description.contains("not verified") && description.contains("never refreshes"),
            "{description}"
        );
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
}

/// `get_current_offers`: the REST body as structured content, and a summary to quote; the
/// acme-eu offer.
async fn current_offers_are_the_rest_body(service: &QueryService, reader: &Principal) -> Value {
    // Current offers: the REST body, as structured content, and a summary to quote.
    let now = Timestamp::now();
    let offers = tool(
        service,
        reader,
        "get_current_offers",
        json!({"item": "AX-440-R2", "max_age_seconds": 1}),
    )
    .await;
    assert_ne!(offers["isError"], true, "{offers}");
    let rest = handle_read(
        service,
        get(
            "/v1/items/AX-440-R2/offers",
            &[("max_age_seconds", "1")],
            reader,
        ),
        now,
    )
    .await;
    let rest: Value = serde_json::from_str(&rest.body).unwrap();
    let structured = &offers["structuredContent"];
    assert_eq!(claims(structured, "offers"), claims(&rest, "offers"));
    assert_eq!(
        structured["freshness_gaps"].as_array().map(Vec::len),
        Some(2),
        "both sources are older than a second: each gap is named"
    );
    for o in structured["offers"].as_array().unwrap() {
        for field in [
            "observed_at",
            "retrieved_at",
            "connector",
            "source_account",
            "delivery_key",
            "claim",
            "verification",
            "identity_strength",
            "dedup_confidence",
        ] {
            assert!(!o[field].is_null(), "{field} in {o}");
        }
        assert_eq!(o["freshness"]["stale"], true, "{o}");
    }
    let acme = offer_of(structured, "acme-eu");
    assert_eq!(
        (acme["quantity"].as_u64(), acme["observed_at"].as_str()),
        (Some(4), Some("2026-11-29T09:00:00Z"))
    );
    let text = offers["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("quantity 4")
            && text.contains("2026-11-29T09:00:00Z")
            && text.contains("unverified")
            && text.contains("Freshness gap"),
        "{text}"
    );

    acme
}

/// `get_offer_history` and `get_observation`: the REST bodies.
async fn history_and_observation_are_the_rest_bodies(
    service: &QueryService,
    reader: &Principal,
    acme: &Value,
) {
    // History: newest first, superseded marked, the REST body.
    let history = tool(
        service,
        reader,
        "get_offer_history",
        json!({"item": "AX-440-R2"}),
    )
    .await;
    let rest = handle_read(
        service,
        get("/v1/items/AX-440-R2/observations", &[], reader),
        Timestamp::now(),
    )
    .await;
    let rest: Value = serde_json::from_str(&rest.body).unwrap();
    assert_eq!(history["structuredContent"], rest);
    assert_eq!(
        quantities_of(&rest, "acme-eu"),
        [4, 6, 9],
        "by observed_at, newest first"
    );

    // One observation, with its provenance.
    let id = acme["observation_id"].as_str().unwrap();
    let observation = tool(
        service,
        reader,
        "get_observation",
        json!({"observation_id": id}),
    )
    .await;
    let rest = handle_read(
        service,
        get(&format!("/v1/observations/{id}"), &[], reader),
        Timestamp::now(),
    )
    .await;
    assert_eq!(
        observation["structuredContent"],
        serde_json::from_str::<Value>(&rest.body).unwrap()
    );
}

/// Arguments an agent got wrong: a tool error it can read, not a protocol error.
async fn wrong_arguments_are_tool_errors(service: &QueryService, reader: &Principal) {
    // Arguments an agent got wrong: a tool error it can read, not a protocol error.
    for (name, args, says) in [
        ("get_current_offers", json!({}), "item is required"),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": -1}),
            "max_age_seconds must be",
        ),
        (
            "get_offer_history",
            json!({"item": "AX-440-R2", "limit": 500}),
            "limit must be",
        ),
        (
            "get_observation",
            json!({"observation_id": "obs_nope"}),
            "not found",
        ),
    ] {
        let result = tool(service, reader, name, args).await;
        assert_eq!(result["isError"], true, "{name}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(says), "{name}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_tool_calls_change_no_item_no_queue_and_no_object() {
    let env = projected_scenario().await;
    let before = Stored::of(&env).await;
    let any_observation = env
        .observations()
        .await
        .remove(0)
        .observation_id
        .to_string();

    let service = env.query();
    let reader = env.reader();
    let calls = [
        ("get_current_offers", json!({"item": "AX-440-R2"})),
        (
            "get_current_offers",
            json!({"item": "AX-440-R2", "max_age_seconds": 1}),
        ),
        ("get_offer_history", json!({"item": "BX-1", "limit": 2})),
        ("get_current_offers", json!({"item": "NOPE-1"})),
        (
            "get_observation",
            json!({"observation_id": any_observation}),
        ),
    ];
    for i in 0..100 {
        let (name, args) = &calls[i % calls.len()];
        let result = tool(&service, &reader, name, args.clone()).await;
        assert_ne!(result["isError"], true, "{name}: {result}");
    }

    Stored::of(&env).await.assert_unchanged_since(&before);
}

/// An API Gateway HTTP API event for `POST /v1/mcp`, the JWT authorizer's claims as given.
/// `headers` are added to (or replace) a client's usual ones.
pub(crate) fn mcp_event(
    claims: Option<Value>,
    headers: &[(String, String)],
    message: &Value,
) -> ApiGatewayV2httpRequest {
    let mut event = json!({
        "version": "2.0",
        "routeKey": "POST /v1/mcp",
        "rawPath": "/v1/mcp",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "host": "api.example.com"
        },
        "requestContext": {
            "http": {"method": "POST", "path": "/v1/mcp", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "test"},
            "requestId": "r-1", "routeKey": "POST /v1/mcp", "stage": "$default",
            "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com", "domainPrefix": "api",
            "time": "01/Dec/2026:00:00:00 +0000", "timeEpoch": 0
        },
        "body": message.to_string(),
        "isBase64Encoded": false
    });
    for (name, value) in headers {
        event["headers"][name.to_ascii_lowercase()] = json!(value);
    }
    if let Some(claims) = claims {
        event["requestContext"]["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
    }
    serde_json::from_value(event).expect("an API Gateway event")
}

pub(crate) fn answer(response: &ApiGatewayV2httpResponse) -> Value {
    match &response.body {
        Some(aws_lambda_events::encodings::Body::Text(text)) => {
            serde_json::from_str(text).unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_entry_point_refuses_a_missing_token_and_shows_another_tenant_nothing() {
    let env = projected_scenario().await;
    let service = env.query();
    let id = env
        .observations()
        .await
        .remove(0)
        .observation_id
        .to_string();
    let offers = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "get_current_offers", "arguments": {"item": "AX-440-R2"}}});
    let read = |claims: Option<Value>, message: &Value| {
        let event = mcp_event(
            claims,
            &[("mcp-protocol-version".into(), PROTOCOL.into())],
            message,
        );
        let service = &service;
        async move { feedsafe::lambda::apigw::handle_apigw_read(service, event).await }
    };

    // The deployed path works: this tenant's reader gets its offers.
    let ok = read(
        Some(json!({"tenant": TENANT, "scope": "offers:read"})),
        &offers,
    )
    .await;
    assert_eq!(ok.status_code, 200, "{:?}", ok.body);
    let body = answer(&ok);
    assert_eq!(
        body["result"]["structuredContent"]["offers"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{body}"
    );

    // No token: refused before any tool runs, with the read routes' codes.
    let none = read(None, &offers).await;
    assert_eq!(
        (none.status_code, answer(&none)["error"]["code"].clone()),
        (401, json!("unauthorized"))
    );
    // A token without offers:read.
    let ops_only = read(
        Some(json!({"tenant": TENANT, "scope": "ops:write"})),
        &offers,
    )
    .await;
    assert_eq!(
        (
            ops_only.status_code,
            answer(&ops_only)["error"]["code"].clone()
        ),
        (403, json!("forbidden"))
    );

    // A reader of another tenant: the tenant is the token's, so it sees nothing of this one's.
    let other = Some(json!({"tenant": "other-tenant", "scope": "offers:read"}));
    let theirs = answer(&read(other.clone(), &offers).await);
    assert_eq!(
        theirs["result"]["structuredContent"]["offers"],
        json!([]),
        "{theirs}"
    );
    let observation = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_observation", "arguments": {"observation_id": id}}});
    let theirs = answer(&read(other, &observation).await);
    assert_eq!(theirs["result"]["isError"], true, "{theirs}");
    assert!(
        theirs["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{theirs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_transports_refusals_come_in_the_contracts_error_shape() {
    let env = spawn_env(false).await;
    let service = env.query();
    let reader = env.reader();
    let cases = [
        (
            "text/html",
            "application/json",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_vec(),
            406,
        ),
        (
            "application/json, text/event-stream",
            "text/plain",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_vec(),
            415,
        ),
    ];
    for (accept, content_type, body, status) in cases {
        let mut request = rpc(Some(reader.clone()), "tools/list", Value::Null);
        request
            .headers
            .retain(|(name, _)| name != "accept" && name != "content-type");
        request.headers.push(("accept".into(), accept.into()));
        request
            .headers
            .push(("content-type".into(), content_type.into()));
        request.body = body;
        let response = handle_mcp(&service, request).await;
        let answer: Value = serde_json::from_str(&response.body).expect("a JSON body");
        assert_eq!(
            (response.status, answer["error"]["code"].as_str()),
            (status, Some("invalid_request")),
            "accept {accept}, content-type {content_type}: {answer}"
        );
        assert!(
            !answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{answer}"
        );
    }
}
