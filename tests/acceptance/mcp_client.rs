//! The MCP endpoint through rmcp's own client
//! (docs/adr/0053-mcp-endpoint-on-the-query-function.md): its streamable HTTP transport (initialize
//! handshake, the initialized notification, tools/list, tools/call) with the HTTP exchange done in
//! process, each message becoming an API Gateway event for the query function's entry point, so the
//! client talks to exactly what Lambda runs.

use crate::mcp::{answer, mcp_event, offer_of, quantities_of};
use crate::read_path::{projected_scenario, Stored};
use acceptance::*;
use feedsafe::protocols::query::QueryService;
use rmcp::model::{CallToolRequestParams, ClientJsonRpcMessage, JsonObject};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransport,
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// An "HTTP client" whose every POST is handed to `handle_apigw_read`, with the JWT claims an
/// authorizer would have put on the event.
#[derive(Clone)]
struct ThroughTheEntryPoint {
    service: Arc<QueryService>,
    claims: Value,
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<std::io::Error>>;

impl StreamableHttpClient for ThroughTheEntryPoint {
    type Error = std::io::Error;

    async fn post_message(
        &self,
        _uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> PostResult {
        let mut headers: Vec<(String, String)> = custom_headers
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
            .collect();
        if let Some(session) = session_id {
            headers.push(("mcp-session-id".into(), session.to_string()));
        }
        let event = mcp_event(
            Some(self.claims.clone()),
            &headers,
            &serde_json::to_value(&message)?,
        );
        let response =
            feedsafe::lambda::apigw::handle_apigw_read(&self.service, event.clone()).await;
        check_apigw(&event, &response);
        match response.status_code {
            202 => Ok(StreamableHttpPostResponse::Accepted),
            200 => Ok(StreamableHttpPostResponse::Json(
                serde_json::from_value(answer(&response))?,
                None,
            )),
            status => Err(StreamableHttpError::UnexpectedServerResponse(
                format!("{status}: {}", answer(&response)).into(),
            )),
        }
    }

    async fn delete_session(
        &self,
        _uri: Arc<str>,
        _session_id: Arc<str>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The acme-eu offer of the scenario, with every provenance field.
fn assert_provenance(acme: &Value) {
    assert_eq!(
        (
            acme["quantity"].as_u64(),
            acme["observed_at"].as_str(),
            acme["verification"]["state"].as_str(),
            acme["claim"].as_str()
        ),
        (
            Some(4),
            Some("2026-11-29T09:00:00Z"),
            Some("unverified"),
            Some("source_reported")
        )
    );
    for field in [
        "retrieved_at",
        "delivery_key",
        "identity_strength",
        "dedup_confidence",
        "freshness",
    ] {
        assert!(!acme[field].is_null(), "{field} in {acme}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rmcp_client_lists_the_tools_and_reads_offers_with_provenance() {
    let env = projected_scenario().await;
    let before = Stored::of(&env).await;
    let http = ThroughTheEntryPoint {
        service: Arc::new(env.query()),
        claims: json!({"tenant": TENANT, "scope": "offers:read"}),
    };
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri("https://api.example.com/v1/mcp"),
    );
    let client = ().serve(transport).await.expect("initialized");
    let server = client.peer_info().expect("the server's initialize result");
    assert_eq!(
        server.server_info.as_ref().map(|i| i.name.as_str()),
        Some("feedsafe-offers")
    );

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, crate::mcp::TOOL_NAMES);

    let offers = client
        .call_tool(
            CallToolRequestParams::new("get_current_offers")
                .with_arguments(arguments(json!({"item": "AX-440-R2"}))),
        )
        .await
        .expect("tools/call");
    assert_ne!(offers.is_error, Some(true));
    let structured = offers.structured_content.expect("structured content");
    let acme = offer_of(&structured, "acme-eu");
    assert_provenance(&acme);

    let history = client
        .call_tool(
            CallToolRequestParams::new("get_offer_history")
                .with_arguments(arguments(json!({"item": "AX-440-R2", "limit": 10}))),
        )
        .await
        .expect("tools/call");
    let history = history.structured_content.expect("structured content");
    assert_eq!(quantities_of(&history, "acme-eu"), [4, 6, 9]);

    let observation = client
        .call_tool(
            CallToolRequestParams::new("get_observation")
                .with_arguments(arguments(json!({"observation_id": acme["observation_id"]}))),
        )
        .await
        .expect("tools/call");
    assert_eq!(
        observation.structured_content.expect("structured")["observation_id"],
        acme["observation_id"]
    );
    client.cancel().await.expect("closed");
    Stored::of(&env).await.assert_unchanged_since(&before);
}
