//! The local API server: API Gateway's HTTP API as `apigw` emulates it from `template.yaml`, in
//! front of the functions' own entry points. Bearer tokens stand in for the JWT authorizer
//! (tenant and scopes come from the token, never from a header a caller sets). `GET /health` is
//! the local server's own (no function behind it).

use crate::apigw::{self, IncomingRequest, OutgoingResponse};
use crate::Services;
use feedsafe::protocols::query::Principal;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use tokio::sync::watch;
use tracing::{info, warn};

/// API Gateway's payload limit for HTTP APIs (10 MB); the handlers apply their own, smaller ones.
const MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;
pub use feedsafe::ops::OPS_SCOPE;

/// Serves until `stopped`: then it stops accepting, lets each open connection finish the request
/// it is handling (keep-alive connections are closed after it), and returns once they have.
pub async fn serve(
    listener: tokio::net::TcpListener,
    services: Services,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = stopped.changed() => break,
        };
        let services = services.clone();
        let mut stop = stopped.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let services = services.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(
                        handle_isolated(services, peer, request).await,
                    )
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                _ = stop.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                warn!(error = %e, "connection error");
            }
        });
        // Reap the finished ones as we go.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

fn to_hyper(response: OutgoingResponse) -> Response<Full<Bytes>> {
    let mut builder = Response::builder().status(response.status);
    for (name, value) in &response.headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(response.body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"{}"))))
}

fn json(status: u16, body: serde_json::Value) -> OutgoingResponse {
    OutgoingResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string().into_bytes(),
    }
}

/// What the JWT authorizer would accept: a known bearer token.
fn principal(
    tokens: &HashMap<String, Principal>,
    headers: &BTreeMap<String, String>,
) -> Option<Principal> {
    let token = headers.get("authorization")?.strip_prefix("Bearer ")?;
    tokens.get(token.trim()).cloned()
}

/// One request, isolated from the others: a panic while handling it is its `500
/// internal_error` alone (`feedsafe::lambda::isolation`), as the functions answer in AWS.
async fn handle_isolated(
    services: Services,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let route = format!("{} {}", request.method(), request.uri().path());
    match feedsafe::lambda::isolation::isolated(&route, handle(services, peer, request)).await {
        Ok(response) => response,
        Err(_) => {
            let answer = feedsafe::lambda::apigw::internal_error();
            let body = serde_json::from_str(&answer.body).unwrap_or_default();
            to_hyper(json(answer.status, body))
        }
    }
}

async fn handle(
    services: Services,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let method = request.method().as_str().to_owned();
    let raw_path = request.uri().path().to_owned();
    let raw_query = request.uri().query().unwrap_or_default().to_owned();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in request.headers() {
        if let Ok(value) = value.to_str() {
            headers
                .entry(name.as_str().to_ascii_lowercase())
                .and_modify(|v| {
                    v.push(',');
                    v.push_str(value);
                })
                .or_insert_with(|| value.to_owned());
        }
    }
    if method == "GET" && raw_path == "/health" {
        return to_hyper(json(200, serde_json::json!({"status": "ok"})));
    }
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => {
            return to_hyper(json(
                413,
                serde_json::json!({"message": "Request Entity Too Large"}),
            ))
        }
    };
    let Some(matched) = services.api.find(&method, &raw_path) else {
        info!(method = %method, path = %raw_path, status = 404, "no route");
        return to_hyper(apigw::no_route());
    };
    let caller = principal(&services.tokens, &headers);
    let source_ip = peer.ip().to_string();
    let incoming = IncomingRequest {
        method: &method,
        raw_path: &raw_path,
        raw_query: &raw_query,
        headers: &headers,
        body: &body,
        source_ip: &source_ip,
    };
    let event = match apigw::request_event(&matched, &incoming, caller.as_ref()) {
        Ok(event) => event,
        Err(e) => {
            warn!(error = %e, "the request does not make an API Gateway event");
            return to_hyper(json(
                500,
                serde_json::json!({"message": "Internal Server Error"}),
            ));
        }
    };
    if let Some(recorder) = &services.recorder {
        recorder.record(&matched.route.function, &event);
    }
    let route = matched.route.key();
    let function = matched.route.function.clone();
    let response = match function.as_str() {
        "QueryFunction" => feedsafe::lambda::apigw::handle_apigw_read(&services.query, event).await,
        "OpsFunction" => feedsafe::lambda::apigw::handle_apigw_ops(&services.ops, event).await,
        "WebhookFunction" => {
            feedsafe::lambda::apigw::handle_apigw_webhook(&services.webhook, event).await
        }
        other => {
            warn!(function = %other, route = %route, "no local host for this function");
            return to_hyper(json(
                500,
                serde_json::json!({"message": "Internal Server Error"}),
            ));
        }
    };
    let response = apigw::http_response(response);
    info!(function = %function, route = %route, status = response.status, "api gateway");
    to_hyper(response)
}
