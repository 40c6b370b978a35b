//! Intake through the running local stack: signed webhooks, pull runs against the fake supplier,
//! file drops, and the fidelity of the local event sources.

mod drops;
mod local_server;
mod republished;
mod sources;
mod webhook_only;
mod webhooks;

use acceptance::*;
use feedsafe::intake::webhook::{sign, SigningSecret};
use local_stack::Stack;
use serde_json::{json, Value};

pub(crate) const READER: &str = "local-reader-demo-token";
pub(crate) const OPERATOR: &str = "local-operator-demo-token";
pub(crate) const SECRET: &str = "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1ub3QtZm9yLXByb2R1Y3Rpb24=";
const ROTATED: &str = "whsec_bG9jYWwtcm90YXRlZC1zZWNyZXQtbm90LWZvci1wcm9kdWN0aW9u";

async fn stack(env: &TestEnv) -> Stack {
    spawn_stack(env, None).await
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// (status, JSON body) of a request, run off the async runtime.
pub(crate) async fn call(
    method: &'static str,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
) -> (u16, Value) {
    tokio::task::spawn_blocking(move || {
        let agent = agent();
        let mut response = if method == "GET" {
            let mut request = agent.get(&url);
            for (k, v) in &headers {
                request = request.header(k, v);
            }
            request.call()
        } else {
            let mut request = agent.post(&url);
            for (k, v) in &headers {
                request = request.header(k, v);
            }
            request.send(&body[..])
        }
        .expect("request sent");
        let status = response.status().as_u16();
        let content_type = response.headers().get("content-type").cloned();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let sent_type = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        openapi::check_exchange(&openapi::Exchange {
            method,
            target: &url,
            request: (method == "POST")
                .then(|| (sent_type.map_or("", |(_, v)| v.as_str()), &body[..])),
            status,
            content_type: content_type.as_ref().and_then(|v| v.to_str().ok()),
            body: &text,
        });
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    })
    .await
    .unwrap()
}

fn cloud_event(id: &str, quantity: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": id, "source": "urn:acme:events", "type": "offer.snapshot",
        "time": "2026-11-29T08:00:00Z",
        "data": {"offers": [{"sku": "EV-1", "quantity": quantity, "unit": "each", "price": "12.00", "currency": "EUR"}]}
    }))
    .unwrap()
}

pub(crate) fn signed_headers(
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    let secret = SigningSecret::parse(secret).unwrap();
    vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-id".into(), id.into()),
        ("webhook-timestamp".into(), timestamp.to_string()),
        (
            "webhook-signature".into(),
            sign(&secret, id, timestamp, body),
        ),
    ]
}

async fn history(stack: &Stack, item: &str) -> Vec<Value> {
    let (_, body) = call(
        "GET",
        format!("{}/v1/items/{item}/observations", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    body["observations"].as_array().cloned().unwrap_or_default()
}
