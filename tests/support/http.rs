//! HTTP helpers for tests against the running stack: requests off the async runtime, polling.

/// Polls `probe` every 200 ms until it holds; panics naming `what` after 60 seconds.
pub async fn wait_until<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) {
        if probe().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("timed out waiting for {what}");
}

/// (status, JSON body) of a request with a bearer token, run off the async runtime.
pub async fn call(
    method: &'static str,
    url: String,
    token: Option<&str>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    call_with(method, url, token, None, body).await
}

/// `call`, with an `If-Match` header when given (`PUT` of a versioned record).
pub async fn call_with(
    method: &'static str,
    url: String,
    token: Option<&str>,
    if_match: Option<String>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = if method == "GET" || method == "DELETE" {
            let mut request = if method == "GET" {
                agent.get(&url)
            } else {
                agent.delete(&url)
            };
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
            }
            request.call()
        } else {
            let mut request = match method {
                "PUT" => agent.put(&url),
                _ => agent.post(&url),
            }
            .header("content-type", "application/json");
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
            }
            if let Some(version) = &if_match {
                request = request.header("if-match", version);
            }
            let bytes = if body.is_null() {
                Vec::new()
            } else {
                body.to_string().into_bytes()
            };
            request.send(&bytes[..])
        }
        .expect("request sent");
        let status = response.status().as_u16();
        let content_type = header_of(&response, "content-type");
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let sent = (method != "GET" && !body.is_null()).then(|| body.to_string());
        crate::openapi::check_exchange(&crate::openapi::Exchange {
            method,
            target: &url,
            request: sent.as_deref().map(|b| ("application/json", b.as_bytes())),
            status,
            content_type: content_type.as_deref(),
            body: &text,
        });
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

fn header_of<B>(response: &ureq::http::Response<B>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// (status, bytes) of an unauthenticated GET (a presigned link).
pub async fn get_bytes(url: String) -> (u16, Vec<u8>) {
    let (status, _, bytes) = get_with_headers(url, Vec::new()).await;
    (status, bytes)
}

/// (status, response headers with lower-cased names, bytes) of a GET with `headers`.
pub async fn get_with_headers(
    url: String,
    headers: Vec<(String, String)>,
) -> (u16, std::collections::BTreeMap<String, String>, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut request = agent.get(&url);
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let mut response = request.call().expect("request sent");
        let status = response.status().as_u16();
        let names: std::collections::BTreeMap<String, String> = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let bytes = response.body_mut().read_to_vec().unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        crate::openapi::check_exchange(&crate::openapi::Exchange {
            method: "GET",
            target: &url,
            request: None,
            status,
            content_type: names.get("content-type").map(String::as_str),
            body: &text,
        });
        (status, names, bytes)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// A `GET` of the read routes as `handle_read` takes it: `path`, its query parameters, and the
/// caller (the authorizer's principal).
pub fn read_request(
    principal: &feedsafe::protocols::query::Principal,
    path: &str,
    query: &[(&str, &str)],
) -> feedsafe::protocols::http::HttpRequest {
    feedsafe::protocols::http::HttpRequest {
        method: "GET".into(),
        path: path.into(),
        query: query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        principal: Some(principal.clone()),
    }
}

/// `feedsafe::protocols::http::handle_read`, its answer checked against `docs/openapi.yaml`.
pub async fn handle_read(
    service: &feedsafe::protocols::query::QueryService,
    request: feedsafe::protocols::http::HttpRequest,
    now: feedsafe::domain::timestamp::Timestamp,
) -> feedsafe::protocols::http::HttpResponse {
    let method = request.method.clone();
    let target = request.path.clone();
    let response = feedsafe::protocols::http::handle_read(service, request, now).await;
    crate::openapi::check_exchange(&crate::openapi::Exchange {
        method: &method,
        target: &target,
        request: None,
        status: response.status,
        content_type: Some(response.content_type),
        body: &response.body,
    });
    response
}

/// `feedsafe::protocols::mcp::handle_mcp` (`POST /v1/mcp`), its answer checked against
/// `docs/openapi.yaml`.
pub async fn handle_mcp(
    service: &feedsafe::protocols::query::QueryService,
    request: feedsafe::protocols::mcp::McpRequest,
) -> feedsafe::protocols::http::HttpResponse {
    let content_type = request
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let (method, body) = (request.method.clone(), request.body.clone());
    let response = feedsafe::protocols::mcp::handle_mcp(service, request).await;
    crate::openapi::check_exchange(&crate::openapi::Exchange {
        method: &method,
        target: "/v1/mcp",
        request: Some((&content_type, &body)),
        status: response.status,
        content_type: Some(response.content_type),
        body: &response.body,
    });
    response
}

/// Checks a Lambda entry point's answer to an API Gateway event against `docs/openapi.yaml`.
pub fn check_apigw(
    event: &aws_lambda_events::event::apigw::ApiGatewayV2httpRequest,
    response: &aws_lambda_events::event::apigw::ApiGatewayV2httpResponse,
) {
    use aws_lambda_events::encodings::Body;
    let body = match &response.body {
        Some(Body::Text(text)) => text.clone(),
        Some(Body::Binary(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        _ => String::new(),
    };
    let header = |headers: &aws_lambda_events::http::HeaderMap, name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let sent_type = header(&event.headers, "content-type").unwrap_or_default();
    let sent = event.body.as_deref().filter(|_| !event.is_base64_encoded);
    crate::openapi::check_exchange(&crate::openapi::Exchange {
        method: event.request_context.http.method.as_str(),
        target: event.raw_path.as_deref().unwrap_or("/"),
        request: sent.map(|b| (sent_type.as_str(), b.as_bytes())),
        status: u16::try_from(response.status_code).unwrap_or(0),
        content_type: header(&response.headers, "content-type").as_deref(),
        body: &body,
    });
}

/// The offer of `connector` the offers route answers at `url` (read with `token`), once there
/// is one; `None` after 60 s.
pub async fn offer_of(url: &str, token: &str, connector: &str) -> Option<serde_json::Value> {
    for _ in 0..300 {
        let (_, body) = call("GET", url.to_owned(), Some(token), serde_json::Value::Null).await;
        let found = body["offers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["connector"] == connector);
        if let Some(offer) = found {
            return Some(offer.clone());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    None
}

/// One MCP `tools/call` of `name` through the local stack's `POST /v1/mcp` (JSON answers, as
/// the endpoint gives them), checked against `docs/openapi.yaml`; the JSON-RPC result.
pub async fn mcp_tool(
    base_url: &str,
    token: &str,
    name: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let url = format!("{base_url}/v1/mcp");
    let message = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}
    })
    .to_string();
    let auth = format!("Bearer {token}");
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("authorization", &auth)
            .send(message.as_bytes())
            .expect("request sent");
        let status = response.status().as_u16();
        let content_type = header_of(&response, "content-type");
        let text = response.body_mut().read_to_string().unwrap_or_default();
        crate::openapi::check_exchange(&crate::openapi::Exchange {
            method: "POST",
            target: &url,
            request: Some(("application/json", message.as_bytes())),
            status,
            content_type: content_type.as_deref(),
            body: &text,
        });
        assert_eq!(status, 200, "{text}");
        let answer: serde_json::Value = serde_json::from_str(&text).expect("a JSON answer");
        assert!(answer["error"].is_null(), "{answer}");
        answer["result"].clone()
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Every byte outside the unreserved set percent-encoded, as a careful client encodes a path
/// segment or a query value.
pub fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A `GET` of `url` with `token` is refused as `400 invalid_request`.
pub async fn assert_invalid_request(url: String, token: &str) {
    let (status, refused) = call("GET", url, Some(token), serde_json::Value::Null).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &serde_json::json!("invalid_request")),
        "{refused}"
    );
}

/// The JSON pointers of a 422 answer's `problems`, in order.
pub fn problem_pointers(answer: &serde_json::Value) -> Vec<&str> {
    answer["problems"]
        .as_array()
        .expect("a problems list")
        .iter()
        .map(|p| p["pointer"].as_str().expect("a pointer"))
        .collect()
}
