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
            let mut request = agent.post(&url).header("content-type", "application/json");
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
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
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    })
    .await
    .unwrap()
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
        let names = response
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
        (status, names, bytes)
    })
    .await
    .unwrap()
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
