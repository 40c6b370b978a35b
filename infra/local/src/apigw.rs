//! The local API Gateway (HTTP API, payload format 2.0). Its routes are the functions' `HttpApi`
//! events in `template.yaml` (method, path, authorizer), matched as API Gateway matches them
//! (exact routes first, then routes with path variables, greedy `{name+}` variables last). A
//! request becomes the JSON event API Gateway would send, with the JWT claims its authorizer
//! would pass (`sub`, `tenant`, `scope`) in `requestContext.authorizer.jwt`; that JSON is
//! deserialized into `ApiGatewayV2httpRequest` as the Lambda runtime deserializes it, handed to
//! the function's own entry point (`handle_apigw_read`, `handle_apigw_ops`,
//! `handle_apigw_webhook`), and the function's response is turned back into HTTP.
//!
//! One difference, on purpose: a request without a valid token (or without the route's scope)
//! reaches the function, which refuses it with the contract's error body (`unauthorized`,
//! `forbidden`); in AWS the JWT authorizer refuses it first, with the same status and API
//! Gateway's own body (`{"message":"Unauthorized"}`).

use anyhow::{bail, Context, Result};
use aws_lambda_events::event::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use feedsafe::protocols::query::Principal;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Variable(String),
    /// `{name+}`: the rest of the path, one segment or more (the last segment only).
    Greedy(String),
}

/// One route of the HTTP API: which function serves it and whether it needs a token.
#[derive(Debug, Clone)]
pub struct Route {
    /// The function's logical id in the template (`QueryFunction`, ...).
    pub function: String,
    pub method: String,
    /// As written in the template: `/v1/items/{item}/offers`.
    pub path: String,
    /// The authorizer's name, `None` for `Authorizer: NONE`.
    pub authorizer: Option<String>,
    segments: Vec<Segment>,
}

impl Route {
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// API Gateway's order: routes without variables, then with variables (more literal
    /// segments first), greedy ones last.
    fn rank(&self) -> (u8, usize) {
        let greedy = self
            .segments
            .iter()
            .any(|s| matches!(s, Segment::Greedy(_)));
        let variables = self
            .segments
            .iter()
            .any(|s| matches!(s, Segment::Variable(_)));
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        let class = match (greedy, variables) {
            (false, false) => 0,
            (false, true) => 1,
            (true, _) => 2,
        };
        (class, usize::MAX - literals)
    }

    /// The path variables (percent-decoded, as API Gateway passes them) if `raw_path` matches.
    fn matches(&self, raw_path: &str) -> Option<BTreeMap<String, String>> {
        let parts: Vec<&str> = raw_path.trim_start_matches('/').split('/').collect();
        let mut variables = BTreeMap::new();
        for (index, segment) in self.segments.iter().enumerate() {
            match segment {
                Segment::Literal(literal) => {
                    if parts.get(index) != Some(&literal.as_str()) {
                        return None;
                    }
                }
                Segment::Variable(name) => {
                    let part = parts.get(index).filter(|p| !p.is_empty())?;
                    variables.insert(name.clone(), decode(part));
                }
                Segment::Greedy(name) => {
                    let rest = parts.get(index..).filter(|r| !r.is_empty())?.join("/");
                    if rest.is_empty() {
                        return None;
                    }
                    variables.insert(name.clone(), decode(&rest));
                    return Some(variables);
                }
            }
        }
        (parts.len() == self.segments.len()).then_some(variables)
    }
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

fn parse_path(path: &str) -> Result<Vec<Segment>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let last = parts.len().saturating_sub(1);
    parts
        .iter()
        .enumerate()
        .map(|(index, part)| {
            match part
                .strip_prefix('{')
                .and_then(|rest| rest.strip_suffix('}'))
            {
                Some(name) if name.ends_with('+') => {
                    if index != last {
                        bail!("{path}: a greedy variable must be the last segment");
                    }
                    Ok(Segment::Greedy(name.trim_end_matches('+').to_owned()))
                }
                Some(name) => Ok(Segment::Variable(name.to_owned())),
                None => Ok(Segment::Literal((*part).to_owned())),
            }
        })
        .collect()
}

/// The HTTP API's routes, from the template.
#[derive(Debug, Clone)]
pub struct ApiRoutes {
    routes: Vec<Route>,
}

/// What a request matched: the route and its path variables.
#[derive(Debug, Clone)]
pub struct Matched<'a> {
    pub route: &'a Route,
    pub variables: BTreeMap<String, String>,
}

impl ApiRoutes {
    /// Every `HttpApi` event of every `AWS::Serverless::Function` in the template document.
    pub fn from_template(document: &serde_norway::Value) -> Result<Self> {
        let resources = document["Resources"]
            .as_mapping()
            .context("template.yaml has no Resources")?;
        let mut routes = Vec::new();
        for (id, resource) in resources {
            if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
                continue;
            }
            let function = id.as_str().context("a resource id is not a string")?;
            let Some(events) = resource["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for (name, event) in events {
                if event["Type"].as_str() != Some("HttpApi") {
                    continue;
                }
                let properties = &event["Properties"];
                let what = || format!("{function} event {:?}", name.as_str().unwrap_or("?"));
                let method = properties["Method"]
                    .as_str()
                    .with_context(|| format!("{}: no Method", what()))?
                    .to_ascii_uppercase();
                let path = properties["Path"]
                    .as_str()
                    .with_context(|| format!("{}: no Path", what()))?
                    .to_owned();
                let authorizer = properties["Auth"]["Authorizer"]
                    .as_str()
                    .filter(|a| *a != "NONE")
                    .map(str::to_owned);
                routes.push(Route {
                    function: function.to_owned(),
                    segments: parse_path(&path).with_context(what)?,
                    method,
                    path,
                    authorizer,
                });
            }
        }
        if routes.is_empty() {
            bail!("template.yaml declares no HttpApi route");
        }
        routes.sort_by_key(Route::rank);
        Ok(Self { routes })
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route API Gateway would pick for `method` and the raw (still percent-encoded) path.
    pub fn find(&self, method: &str, raw_path: &str) -> Option<Matched<'_>> {
        self.routes
            .iter()
            .filter(|r| r.method == method || r.method == "ANY")
            .find_map(|route| {
                route
                    .matches(raw_path)
                    .map(|variables| Matched { route, variables })
            })
    }
}

/// An HTTP request as the local server received it.
#[derive(Debug, Clone)]
pub struct IncomingRequest<'a> {
    pub method: &'a str,
    /// The path as sent, percent-encoding kept.
    pub raw_path: &'a str,
    pub raw_query: &'a str,
    /// Lower-cased names; repeated headers joined with commas, as API Gateway joins them.
    pub headers: &'a BTreeMap<String, String>,
    pub body: &'a [u8],
    pub source_ip: &'a str,
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);

fn text_content(headers: &BTreeMap<String, String>) -> bool {
    headers.get("content-type").is_none_or(|t| {
        let t = t.to_ascii_lowercase();
        t.starts_with("text/")
            || t.contains("json")
            || t.contains("xml")
            || t.contains("x-www-form-urlencoded")
    })
}

/// The payload 2.0 event API Gateway sends the function for `request` on `matched`, with the
/// caller's token resolved as the JWT authorizer resolves it (`principal`: `None` when there is
/// no valid token, or the route needs none).
pub fn request_event(
    matched: &Matched<'_>,
    request: &IncomingRequest<'_>,
    principal: Option<&Principal>,
) -> Result<ApiGatewayV2httpRequest> {
    let now = feedsafe::domain::timestamp::Timestamp::now();
    let request_id = format!("local-{:08}", REQUESTS.fetch_add(1, Ordering::Relaxed));
    let mut query: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(request.raw_query.as_bytes()) {
        query
            .entry(name.into_owned())
            .and_modify(|v| {
                v.push(',');
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let text_body = text_content(request.headers)
        .then(|| std::str::from_utf8(request.body).ok())
        .flatten();
    let (body, base64) = match (request.body.is_empty(), text_body) {
        (true, _) => (Value::Null, false),
        (false, Some(text)) => (json!(text), false),
        (false, None) => (
            json!(feedsafe::domain::hashing::base64_encode(request.body)),
            true,
        ),
    };
    let mut context = json!({
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": request.headers.get("host").cloned().unwrap_or_else(|| "localhost".into()),
        "domainPrefix": "local",
        "http": {
            "method": request.method,
            "path": request.raw_path,
            "protocol": "HTTP/1.1",
            "sourceIp": request.source_ip,
            "userAgent": request.headers.get("user-agent").cloned().unwrap_or_default(),
        },
        "requestId": request_id,
        "routeKey": matched.route.key(),
        "stage": "$default",
        "time": now.to_rfc3339(),
        "timeEpoch": now.unix_millis(),
    });
    if let (Some(principal), Some(_)) = (principal, &matched.route.authorizer) {
        let mut claims = Map::new();
        claims.insert("tenant".into(), json!(principal.tenant.as_str()));
        claims.insert("scope".into(), json!(principal.scopes.join(" ")));
        if let Some(subject) = &principal.subject {
            claims.insert("sub".into(), json!(subject));
        }
        context["authorizer"] = json!({"jwt": {"claims": claims, "scopes": principal.scopes}});
    }
    let event = json!({
        "version": "2.0",
        "routeKey": matched.route.key(),
        "rawPath": request.raw_path,
        "rawQueryString": request.raw_query,
        "headers": request.headers,
        "queryStringParameters": if query.is_empty() { Value::Null } else { json!(query) },
        "pathParameters": if matched.variables.is_empty() { Value::Null } else { json!(matched.variables) },
        "requestContext": context,
        "body": body,
        "isBase64Encoded": base64,
    });
    serde_json::from_value(event).context("the local API Gateway event does not deserialize")
}

/// An HTTP response from the function's API Gateway response.
pub struct OutgoingResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

pub fn http_response(response: ApiGatewayV2httpResponse) -> OutgoingResponse {
    let status = u16::try_from(response.status_code)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .unwrap_or(502);
    let mut headers: Vec<(String, String)> = response
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    for (name, value) in response.multi_value_headers.iter() {
        if let Ok(value) = value.to_str() {
            headers.push((name.as_str().to_owned(), value.to_owned()));
        }
    }
    let body = match response.body {
        None => Vec::new(),
        Some(aws_lambda_events::encodings::Body::Empty) => Vec::new(),
        Some(aws_lambda_events::encodings::Body::Text(text)) => text.into_bytes(),
        Some(aws_lambda_events::encodings::Body::Binary(bytes)) => bytes,
        Some(_) => Vec::new(),
    };
    OutgoingResponse {
        status,
        headers,
        body,
    }
}

/// Writes every event the local API Gateway sends to a function into a folder, one JSON file
/// each (`{n}-{function}.json`), so that tests can feed them to the entry points again. The
/// `authorization` header is left out: a token is a secret.
pub struct EventRecorder {
    dir: std::path::PathBuf,
    next: AtomicU64,
}

impl EventRecorder {
    pub fn new(dir: &std::path::Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_owned(),
            next: AtomicU64::new(0),
        })
    }

    pub fn record(&self, function: &str, event: &ApiGatewayV2httpRequest) {
        let mut event = event.clone();
        event.headers.remove("authorization");
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{n:05}-{function}.json"));
        let written = serde_json::to_vec_pretty(&event)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| std::fs::write(&path, bytes).map_err(anyhow::Error::from));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %path.display(), "could not record the event");
        }
    }
}

/// API Gateway's own answer when no route matches.
pub fn no_route() -> OutgoingResponse {
    OutgoingResponse {
        status: 404,
        headers: vec![("content-type".into(), "application/json".into())],
        body: br#"{"message":"Not Found"}"#.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> ApiRoutes {
        let template =
            template_spec::read_template(&template_spec::template_path()).expect("template.yaml");
        ApiRoutes::from_template(&template.document).expect("routes")
    }

    #[test]
    fn every_route_of_the_template_is_served_by_its_function() {
        let routes = routes();
        let find = |method: &str, path: &str| {
            routes
                .find(method, path)
                .map(|m| (m.route.function.clone(), m.route.path.clone(), m.variables))
        };
        let (function, path, variables) = find("GET", "/v1/items/AX-440-R2/offers").unwrap();
        assert_eq!(function, "QueryFunction");
        assert_eq!(path, "/v1/items/{item}/offers");
        assert_eq!(variables["item"], "AX-440-R2");
        // Greedy: a delivery key holds slashes (sent percent-encoded or not).
        let (function, _, variables) =
            find("GET", "/v1/deliveries/demo/acme-eu/ACC-1/EXP-8821/2").unwrap();
        assert_eq!(function, "OpsFunction");
        assert_eq!(variables["delivery_key"], "demo/acme-eu/ACC-1/EXP-8821/2");
        let (function, _, variables) = find("POST", "/v1/webhooks/acme-events").unwrap();
        assert_eq!(function, "WebhookFunction");
        assert_eq!(variables["connector"], "acme-events");
        // An exact route wins over one with a variable in the same place.
        let (_, path, _) = find("GET", "/v1/quarantine").unwrap();
        assert_eq!(path, "/v1/quarantine");
        // The item reads by query parameter: exact routes of the query function, beside the
        // routes with a variable that share their first segments.
        for exact in ["/v1/offers", "/v1/observations"] {
            let (function, path, variables) = find("GET", exact).unwrap();
            assert_eq!((function.as_str(), path.as_str()), ("QueryFunction", exact));
            assert!(variables.is_empty(), "{exact}: {variables:?}");
        }
        let (_, path, variables) = find("GET", "/v1/observations/obs_1").unwrap();
        assert_eq!(path, "/v1/observations/{observation_id}");
        assert_eq!(variables["observation_id"], "obs_1");
        assert!(find("GET", "/v1/offers/extra").is_none());
        // The wrong method or an unknown path matches nothing, as in API Gateway.
        assert!(find("DELETE", "/v1/items/AX-440-R2/offers").is_none());
        assert!(find("GET", "/v1/nothing").is_none());
        assert!(find("GET", "/v1/items//offers").is_none());
        // Open at the gateway: the webhook route (signed) and the operator console's page and
        // assets (no data; every call the page makes needs an operator token).
        let mut open: Vec<(String, String)> = routes
            .routes()
            .iter()
            .filter(|r| r.authorizer.is_none())
            .map(|r| (r.key(), r.function.clone()))
            .collect();
        open.sort();
        let expected = [
            ("GET /console", "OpsFunction"),
            ("GET /console/{asset}", "OpsFunction"),
            ("POST /v1/webhooks/{connector}", "WebhookFunction"),
        ];
        assert_eq!(
            open,
            expected.map(|(k, f)| (k.to_owned(), f.to_owned())).to_vec()
        );
    }

    /// `?item=` reaches the query function as sent: `rawQueryString` keeps its escapes (the
    /// function decodes it once), `queryStringParameters` holds API Gateway's decoded values.
    #[test]
    fn a_queried_item_keeps_its_escapes_in_the_raw_query_string() {
        let routes = routes();
        let matched = routes.find("GET", "/v1/offers").expect("route");
        let headers = BTreeMap::new();
        let raw_query = "item=LM358DR%2FNOPB%7Ereel%7Enew&quantity=2500";
        let event = request_event(
            &matched,
            &IncomingRequest {
                method: "GET",
                raw_path: "/v1/offers",
                raw_query,
                headers: &headers,
                body: b"",
                source_ip: "127.0.0.1",
            },
            None,
        )
        .unwrap();
        assert_eq!(event.raw_query_string.as_deref(), Some(raw_query));
        assert_eq!(
            event.query_string_parameters.first("item"),
            Some("LM358DR/NOPB~reel~new")
        );
        assert_eq!(event.route_key.as_deref(), Some("GET /v1/offers"));
        assert!(event.path_parameters.is_empty());
        let query = feedsafe::protocols::http::parse_query(raw_query).unwrap();
        assert_eq!(query["item"], "LM358DR/NOPB~reel~new");
    }

    #[test]
    fn the_event_carries_what_api_gateway_and_its_jwt_authorizer_would() {
        let routes = routes();
        let matched = routes
            .find("GET", "/v1/items/AX%2F440/offers")
            .expect("route");
        let headers = BTreeMap::from([
            ("host".to_owned(), "127.0.0.1:8790".to_owned()),
            ("authorization".to_owned(), "Bearer x".to_owned()),
        ]);
        let principal = Principal {
            tenant: feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
            scopes: vec!["offers:read".into()],
            subject: Some("agent-7".into()),
        };
        let event = request_event(
            &matched,
            &IncomingRequest {
                method: "GET",
                raw_path: "/v1/items/AX%2F440/offers",
                raw_query: "max_age_seconds=60&a=1&a=2",
                headers: &headers,
                body: b"",
                source_ip: "127.0.0.1",
            },
            Some(&principal),
        )
        .unwrap();
        assert_eq!(event.raw_path.as_deref(), Some("/v1/items/AX%2F440/offers"));
        assert_eq!(
            event.path_parameters.get("item").map(String::as_str),
            Some("AX/440")
        );
        assert_eq!(
            event.query_string_parameters.first("max_age_seconds"),
            Some("60")
        );
        // API Gateway joins a repeated parameter with commas; the event type splits it again.
        assert_eq!(event.query_string_parameters.all("a"), Some(vec!["1", "2"]));
        assert_eq!(
            event.route_key.as_deref(),
            Some("GET /v1/items/{item}/offers")
        );
        let principal = feedsafe::lambda::apigw::principal_from_apigw(&event).expect("principal");
        assert_eq!(principal.tenant.as_str(), "demo");
        assert_eq!(principal.subject.as_deref(), Some("agent-7"));
        assert!(principal.scopes.contains(&"offers:read".to_owned()));
    }
}
