//! The MCP endpoint for buying agents (`POST /v1/mcp` on the query function): three read-only
//! tools over the query service, served by `rmcp`'s streamable HTTP transport, stateless (no
//! session survives a request, so any Lambda instance answers any call) and answering in JSON.
//!
//! Authorization is the read routes' own: a principal with the `offers:read` scope, its tenant
//! from the token (never from the tool's arguments); without one the request never reaches the
//! MCP layer. Each tool returns, as structured content, the same body its REST route returns
//! (every observation with `observed_at`, `retrieved_at`, source, delivery key, claim,
//! verification, identity strength, dedup confidence, freshness and the named freshness gap),
//! and a text summary an agent can quote. Calling a tool reads; it never refreshes, pulls or
//! writes anything.

use crate::domain::quote::Quote;
use crate::domain::terms::{Decimal, Terms};
use crate::domain::timestamp::Timestamp;
use crate::protocols::http::{positive_quantity, HttpResponse};
use crate::protocols::query::sources::{SourceRefresh, SourcesResponse};
use crate::protocols::query::{
    HistoryResponse, ItemsResponse, ObservationBody, ObservationDetail, OffersAsked,
    OffersResponse, Principal, QueryError, QueryService, READ_SCOPE,
};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::RoleServer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The route the endpoint answers on.
mod summaries;
use summaries::{history_summary, items_summary, offers_summary, sources_summary, text_of};

pub const MCP_PATH: &str = "/v1/mcp";

/// Said in every tool's description and in the server's instructions.
const CAVEAT: &str = "The data is what suppliers reported, stored with its raw evidence; it \
    is not verified by anyone. Calling this tool only reads what is already stored: it never \
    refreshes, pulls or asks a supplier for anything.";

/// One MCP request as the transport hands it over.
pub struct McpRequest {
    pub method: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub principal: Option<Principal>,
}

/// `POST /v1/mcp`: authorizes like the read routes, then hands the JSON-RPC message to rmcp.
pub async fn handle_mcp(service: &QueryService, request: McpRequest) -> HttpResponse {
    let Some(principal) = request.principal else {
        return HttpResponse::error(401, "unauthorized", "a reader's bearer token is required");
    };
    if !principal.scopes.iter().any(|s| s == READ_SCOPE) {
        return HttpResponse::error(403, "forbidden", "the offers:read scope is required");
    }
    let json_body = request
        .headers
        .iter()
        .any(|(name, value)| name == "content-type" && is_json_content_type(value));
    let body = bytes::Bytes::from(request.body);
    let mut http = http::Request::builder()
        .method(request.method.as_str())
        .uri(MCP_PATH);
    for (name, value) in &request.headers {
        // The token stays with the authorizer; rmcp has no use for it.
        if name != "authorization" {
            http = http.header(name.as_str(), value.as_str());
        }
    }
    let Ok(mut http) = http.body(http_body_util::Full::new(body.clone())) else {
        return HttpResponse::error(
            400,
            "invalid_request",
            "the request's headers are not valid HTTP",
        );
    };
    http.extensions_mut().insert(principal);
    let tools = OfferTools {
        query: service.clone(),
    };
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.legacy_session_mode = false;
    config.json_response = true;
    let transport = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let response = transport.handle(http).await;
    if response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE && json_body {
        // The transport answers 415 both for another content type and for a JSON body it
        // cannot read as one message; the contract answers the latter 400.
        return HttpResponse::error(400, "invalid_request", &not_a_message(&body));
    }
    clarify_tool_call(json_answer(response).await, &body)
}

/// A `tools/call` whose params do not deserialize (`name` not a string, `arguments` not an
/// object) reaches no handler, and the transport answers "method not found" (`-32601`,
/// naming `tools/call`); it is answered as the invalid params it is (`-32602`), with a message
/// saying what they must be.
fn clarify_tool_call(answer: HttpResponse, body: &[u8]) -> HttpResponse {
    let Ok(reply) = serde_json::from_str::<ErrorAnswer>(&answer.body) else {
        return answer;
    };
    if reply.error.code != METHOD_NOT_FOUND
        || !serde_json::from_slice::<RequestMethod>(body)
            .is_ok_and(|request| request.method == "tools/call")
    {
        return answer;
    }
    let clarified = ClarifiedAnswer {
        envelope: &reply.envelope,
        error: RpcError {
            code: INVALID_PARAMS,
            message: "tools/call params must be an object with name (a tool's name, a string) \
                and arguments (an object)",
        },
    };
    HttpResponse::json(answer.status, &clarified)
}

/// JSON-RPC's "method not found" and "invalid params" error codes.
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC error answer as the transport wrote it.
#[derive(Deserialize)]
struct ErrorAnswer {
    error: ErrorCode,
    /// Free-form on purpose: the envelope's other keys (`jsonrpc`, `id`), passed on as written.
    #[serde(flatten)]
    envelope: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
struct ErrorCode {
    code: i64,
}

/// The method a JSON-RPC request names (a JSON object, its other keys unread).
#[derive(Deserialize)]
struct RequestMethod {
    method: String,
    #[serde(flatten)]
    _rest: BTreeMap<String, serde::de::IgnoredAny>,
}

/// The transport's answer with its error replaced.
#[derive(Serialize)]
struct ClarifiedAnswer<'a> {
    #[serde(flatten)]
    envelope: &'a serde_json::Map<String, Value>,
    error: RpcError,
}

#[derive(Serialize)]
struct RpcError {
    code: i64,
    message: &'static str,
}

/// The transport's answer in the contract's shape: its JSON-RPC answers as they are, its own
/// refusals (plain text) as `{"error": {"code", "message"}}` with its message.
async fn json_answer(response: TransportResponse) -> HttpResponse {
    let status = response.status().as_u16();
    let streamed = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = match http_body_util::BodyExt::collect(response.into_body()).await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    if streamed {
        // Only a handler that sends notifications before its answer streams; these tools do not.
        tracing::error!(status, "the MCP layer answered with an event stream");
        return HttpResponse::error(
            503,
            "unavailable",
            "the MCP endpoint could not answer in JSON; try again",
        );
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    // Only whether the body is JSON at all: any JSON answer is the transport's own, passed on.
    if status >= 400 && serde_json::from_str::<Value>(&body).is_err() {
        // The transport's own refusals (no JSON accepted, not a JSON body, too large, a bad
        // protocol version) come as text: in the contract's error shape, with its message.
        let code = match status {
            405 => "method_not_allowed",
            413 => "payload_too_large",
            500.. => "unavailable",
            _ => "invalid_request",
        };
        return HttpResponse::error(status, code, body.trim());
    }
    HttpResponse::text(status, "application/json", body)
}

type TransportResponse =
    http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>;

/// `application/json`, parameters allowed: what the transport takes as a JSON body.
fn is_json_content_type(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Why `body` is not one JSON-RPC 2.0 message the endpoint reads, for the caller.
fn not_a_message(body: &[u8]) -> String {
    // Free-form on purpose: a body the transport could not read as a message, told apart by
    // its outline only.
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return "the body is not JSON: send one JSON-RPC 2.0 message".into();
    };
    match &value {
        Value::Array(_) => "JSON-RPC batches are not accepted: send one message per request".into(),
        Value::Object(m) if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") => {
            "the body is not a JSON-RPC 2.0 message: jsonrpc must be \"2.0\"".into()
        }
        Value::Object(_) => "the body is not a JSON-RPC 2.0 request, notification or response: \
             check method (a string), id (a string or an integer) and params (an object)"
            .into(),
        _ => "the body is not a JSON-RPC 2.0 message: send one JSON object".into(),
    }
}

/// The tools: a query service and nothing else (no writer, no queue, no pull).
#[derive(Clone)]
struct OfferTools {
    query: QueryService,
}

/// A tool's input schema. The schemas are JSON Schema literals (`json!` below), free-form by
/// nature: the contract agents read, not a body this code parses.
fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// `find_items`: the canonical items of a part number (`GET /v1/items?mpn=`).
fn find_items_tool() -> Tool {
    use serde_json::json;
    Tool::new(
        "find_items",
        format!(
            "The canonical items of a manufacturer part number (every packaging, condition \
             and revision, e.g. LM358DR/NOPB as reel and as cut-tape), each with its number \
             of current offers; pass an item to get_current_offers. {CAVEAT}"
        ),
        schema(json!({
            "type": "object",
            "properties": {
                "mpn": {"type": "string", "description": "The manufacturer part number as written, e.g. LM358DR/NOPB"},
                "manufacturer": {"type": "string", "description": "Only the items of this manufacturer, as the sources name it (any case), e.g. Texas Instruments"},
                "as_of": {"type": "string", "format": "date-time", "description": "Answer as it stood at this earlier instant (RFC 3339): only what was recorded by then, judged by what was in force then"}
            },
            "required": ["mpn"],
            "additionalProperties": false
        })),
    )
}

/// `get_source_status`: how each source's deliveries are arriving (`GET /v1/sources`).
fn source_status_tool() -> Tool {
    use serde_json::json;
    Tool::new(
        "get_source_status",
        format!(
            "How each supplier feed of this tenant is arriving: the last delivery received and \
             committed, how the last one settled (committed, replayed, quarantined, refused), \
             the cadence its connector expects, whether it is overdue and since when, the share \
             of its items refreshed within the cadence, an active source quarantine, its last \
             pull run, a run in flight and the next scheduled pull, and what would refresh it. \
             {CAVEAT}"
        ),
        schema(json!({
            "type": "object",
            "properties": {
                "connector": {"type": "string", "description": "Only this connector, e.g. acme-eu"}
            },
            "additionalProperties": false
        })),
    )
}

fn tools() -> Vec<Tool> {
    use serde_json::json;
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    vec![
        Tool::new(
            "get_current_offers",
            format!(
                "The current offer of each source for an item (quantity, price, currency), each \
                 with when the supplier observed it (observed_at), when we received it \
                 (retrieved_at), its source, delivery key, identity strength, dedup confidence \
                 and freshness. With max_age_seconds, an offer older than that is marked stale \
                 and named in freshness_gaps with what would refresh it. With quantity, each \
                 offer is quoted for that quantity and the cheapest orderable ones come first \
                 within each currency. The answer carries a receipt (as_of and a digest) that \
                 GET /v1/receipts/verify checks later. {CAVEAT}"
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "item": {"type": "string", "description": "The item's SKU or canonical key, e.g. AX-440-R2"},
                    "max_age_seconds": {"type": "integer", "minimum": 0, "description": "Mark offers observed longer ago than this as stale"},
                    "quantity": {"type": ["string", "number"], "description": "A quantity to buy, e.g. 2500 or \"2.5\": each offer then says whether it can be ordered (MOQ, order multiple, stock, price breaks), its unit and extended price, and its rank by price per unit within its currency (never across currencies)"},
                    "as_of": {"type": "string", "format": "date-time", "description": "Answer as it stood at this earlier instant (RFC 3339): only what was recorded by then, judged by what was in force then"}
                },
                "required": ["item"],
                "additionalProperties": false
            })),
        )
        .annotate(read_only.clone()),
        find_items_tool().annotate(read_only.clone()),
        Tool::new(
            "get_offer_history",
            format!(
                "Every stored claim about an item, newest first, superseded ones marked, with \
                 the same provenance fields as get_current_offers. {CAVEAT}"
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "item": {"type": "string", "description": "The item's SKU or canonical key"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many claims (default 50)"},
                    "as_of": {"type": "string", "format": "date-time", "description": "Answer as it stood at this earlier instant (RFC 3339): only what was recorded by then, judged by what was in force then"}
                },
                "required": ["item"],
                "additionalProperties": false
            })),
        )
        .annotate(read_only.clone()),
        Tool::new(
            "get_observation",
            format!(
                "One stored observation by its id, with its provenance: the raw artifact it came \
                 from, its delivery, and how its identity was established. {CAVEAT}"
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "observation_id": {"type": "string", "description": "An observation_id from another tool's result"},
                    "as_of": {"type": "string", "format": "date-time", "description": "Answer as it stood at this earlier instant (RFC 3339): only what was recorded by then, judged by what was in force then"}
                },
                "required": ["observation_id"],
                "additionalProperties": false
            })),
        )
        .annotate(read_only.clone()),
        source_status_tool().annotate(read_only),
    ]
}

/// A tool's arguments, or the message an agent can act on.
struct Arguments(JsonObject);

impl Arguments {
    fn string(&self, name: &str) -> Result<&str, String> {
        match self.0.get(name) {
            None => Err(format!("{name} is required")),
            Some(_) => self
                .optional_string(name)?
                .ok_or_else(|| format!("{name} must be a non-empty string")),
        }
    }

    fn optional_string(&self, name: &str) -> Result<Option<&str>, String> {
        match self.0.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(format!("{name} must be a non-empty string")),
        }
    }

    /// A decimal above zero, written as a JSON string or number (its literal).
    fn quantity(&self, name: &str) -> Result<Option<Decimal>, String> {
        let text = match self.0.get(name) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => return Err(format!("{name} must be a decimal string or number")),
        };
        positive_quantity(&text).map(Some)
    }

    /// An RFC 3339 instant, or absent.
    fn instant(&self, name: &str) -> Result<Option<Timestamp>, String> {
        self.optional_string(name)?
            .map(|text| {
                Timestamp::parse(text)
                    .map_err(|e| format!("{name} must be an RFC 3339 instant: {e}"))
            })
            .transpose()
    }

    fn integer(
        &self,
        name: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<i64>, String> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if range.contains(&n) => Ok(Some(n)),
                _ => Err(format!(
                    "{name} must be an integer from {} to {}",
                    range.start(),
                    range.end()
                )),
            },
        }
    }
}

/// A `tools/call` with its arguments checked: which read it asks for.
enum ToolCall<'a> {
    CurrentOffers {
        item: &'a str,
        max_age_seconds: Option<i64>,
        quantity: Option<Decimal>,
        as_of: Option<Timestamp>,
    },
    OfferHistory {
        item: &'a str,
        limit: i32,
        as_of: Option<Timestamp>,
    },
    Observation {
        observation_id: &'a str,
        as_of: Option<Timestamp>,
    },
    Items {
        mpn: &'a str,
        manufacturer: Option<&'a str>,
        as_of: Option<Timestamp>,
    },
    Sources {
        connector: Option<&'a str>,
    },
}

impl<'a> ToolCall<'a> {
    /// The call to tool `name` with `args`, the first invalid argument's message, or an
    /// unknown tool.
    fn parse(name: &str, args: &'a Arguments) -> Result<Self, CallError> {
        let invalid = CallError::Arguments;
        Ok(match name {
            "get_current_offers" => Self::CurrentOffers {
                item: args.string("item").map_err(invalid)?,
                max_age_seconds: args
                    .integer("max_age_seconds", 0..=i64::MAX)
                    .map_err(invalid)?,
                quantity: args.quantity("quantity").map_err(invalid)?,
                as_of: args.instant("as_of").map_err(invalid)?,
            },
            "get_offer_history" => {
                let item = args.string("item").map_err(invalid)?;
                let limit = args
                    .integer("limit", 1..=100)
                    .map_err(invalid)?
                    .unwrap_or(50);
                Self::OfferHistory {
                    item,
                    limit: i32::try_from(limit).unwrap_or(50),
                    as_of: args.instant("as_of").map_err(invalid)?,
                }
            }
            "get_observation" => Self::Observation {
                observation_id: args.string("observation_id").map_err(invalid)?,
                as_of: args.instant("as_of").map_err(invalid)?,
            },
            "find_items" => Self::Items {
                mpn: args.string("mpn").map_err(invalid)?,
                manufacturer: args.optional_string("manufacturer").map_err(invalid)?,
                as_of: args.instant("as_of").map_err(invalid)?,
            },
            "get_source_status" => Self::Sources {
                connector: args.optional_string("connector").map_err(invalid)?,
            },
            other => return Err(CallError::UnknownTool(other.to_owned())),
        })
    }
}

/// A tool's result: the body its REST route returns, as the tool's structured content.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolAnswer {
    Items(ItemsResponse),
    Offers(OffersResponse),
    History(HistoryResponse),
    Observation(Box<ObservationDetail>),
    Sources(SourcesResponse),
}

impl ToolAnswer {
    /// The text an agent can quote for the structured result.
    fn summary(&self) -> String {
        let mut lines = match self {
            Self::Items(body) => items_summary(body),
            Self::Offers(body) => offers_summary(body),
            Self::History(body) => history_summary(body),
            Self::Observation(body) => vec![format!("- {}", text_of(&body.entry.observation))],
            Self::Sources(body) => sources_summary(body),
        };
        lines.push(
            "Supplier-reported; unverified unless a claim's verification says otherwise; this \
             read refreshed nothing."
                .into(),
        );
        lines.join("\n")
    }
}

impl OfferTools {
    async fn call(
        &self,
        principal: &Principal,
        name: &str,
        args: &Arguments,
    ) -> Result<ToolAnswer, CallError> {
        let now = Timestamp::now();
        let query = &self.query;
        let answer = match ToolCall::parse(name, args)? {
            ToolCall::CurrentOffers {
                item,
                max_age_seconds,
                quantity,
                as_of,
            } => {
                let asked = OffersAsked {
                    max_age_seconds,
                    quantity: quantity.as_ref(),
                    as_of,
                };
                query
                    .offers_as_asked(principal, item, &asked, now)
                    .await
                    .map(ToolAnswer::Offers)
            }
            ToolCall::OfferHistory { item, limit, as_of } => query
                .history_as_of(principal, item, None, limit, as_of, now)
                .await
                .map(ToolAnswer::History),
            ToolCall::Observation {
                observation_id,
                as_of,
            } => query
                .observation_as_of(principal, observation_id, as_of, now)
                .await
                .map(|detail| ToolAnswer::Observation(Box::new(detail))),
            ToolCall::Items {
                mpn,
                manufacturer,
                as_of,
            } => query
                .items_as_of(principal, mpn, manufacturer, as_of, now)
                .await
                .map(ToolAnswer::Items),
            ToolCall::Sources { connector } => query
                .sources(principal, connector, now)
                .await
                .map(ToolAnswer::Sources),
        };
        answer.map_err(CallError::Query)
    }
}

enum CallError {
    UnknownTool(String),
    Arguments(String),
    Query(QueryError),
}

impl ServerHandler for OfferTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("feedsafe-offers", env!("CARGO_PKG_VERSION"))
                    .with_title("Supplier offers with provenance"),
            )
            .with_instructions(format!(
                "Current offers, offer history and single observations of supplier price and \
                 stock feeds, each with its provenance, trust and freshness. {CAVEAT}"
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let principal = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("no principal on the request", None))?;
        let args = Arguments(request.arguments.unwrap_or_default());
        let result = match self.call(&principal, &request.name, &args).await {
            Ok(answer) => {
                let structured = serde_json::to_value(&answer).map_err(|e| {
                    tracing::error!(error = %e, tool = %request.name, "an MCP tool's result did not serialize");
                    ErrorData::internal_error("the result could not be encoded; try again", None)
                })?;
                let mut result = CallToolResult::structured(structured);
                result.content = vec![ContentBlock::text(answer.summary())];
                result
            }
            Err(CallError::UnknownTool(name)) => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {name:?}; the tools are find_items, get_current_offers, get_offer_history, get_observation and get_source_status"),
                    None,
                ))
            }
            Err(CallError::Arguments(message))
            | Err(CallError::Query(QueryError::InvalidRequest(message)))
            | Err(CallError::Query(QueryError::InvalidCursor(message))) => {
                CallToolResult::error(vec![ContentBlock::text(format!("invalid arguments: {message}"))])
            }
            Err(CallError::Query(QueryError::NotFound(message))) => {
                CallToolResult::error(vec![ContentBlock::text(format!("not found: {message}"))])
            }
            Err(CallError::Query(QueryError::Store(e))) => {
                tracing::error!(error = %e, tool = %request.name, "an MCP tool's read failed");
                return Err(ErrorData::internal_error("the evidence store could not be read; try again", None));
            }
        };
        Ok(result.into())
    }
}
