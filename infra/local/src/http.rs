//! The local API server: the same routes as API Gateway, dispatched to the same handlers.
//! Bearer tokens stand in for the JWT authorizer (tenant and scopes come from the token, never
//! from a header a caller sets).

use crate::Services;
use feedsafe::http::{handle_read, HttpRequest, HttpResponse};
use feedsafe::ops::{handle_ops, OpsRequest};
use feedsafe::query::Principal;
use feedsafe::webhook::WebhookRequest;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use tokio::sync::watch;
use tracing::{info, warn};

/// Bodies above this are refused before any handler runs (handlers apply their own limits).
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;
pub use feedsafe::ops::OPS_SCOPE;

pub async fn serve(
    listener: tokio::net::TcpListener,
    services: Services,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let services = services.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let services = services.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(services, request).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                warn!(error = %e, "connection error");
            }
        });
    }
}

fn to_hyper(response: HttpResponse) -> Response<Full<Bytes>> {
    Response::builder()
        .status(response.status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(response.body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"{}"))))
}

fn principal(
    tokens: &HashMap<String, Principal>,
    headers: &HashMap<String, String>,
) -> Option<Principal> {
    let token = headers.get("authorization")?.strip_prefix("Bearer ")?;
    tokens.get(token.trim()).cloned()
}

fn query_map(uri: &hyper::Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                feedsafe::http::percent_decode(k, true),
                feedsafe::http::percent_decode(v, true),
            )
        })
        .collect()
}

async fn handle(services: Services, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = request.method().as_str().to_owned();
    // `+` is a literal in paths (item keys and delivery ids may hold it); only queries use it
    // for a space.
    let path = feedsafe::http::percent_decode(request.uri().path(), false);
    let query = query_map(request.uri());
    let headers: HashMap<String, String> = request
        .headers()
        .iter()
        .filter_map(|(k, v)| {
            v.to_str()
                .ok()
                .map(|v| (k.as_str().to_ascii_lowercase(), v.to_owned()))
        })
        .collect();
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => {
            return to_hyper(HttpResponse::error(
                413,
                "payload_too_large",
                "request body too large",
            ))
        }
    };
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let response = match (method.as_str(), segments.as_slice()) {
        ("GET", ["health"]) => HttpResponse::json(200, &serde_json::json!({"status": "ok"})),
        ("POST", ["v1", "webhooks", connector]) => {
            services
                .webhook
                .handle(WebhookRequest {
                    connector: (*connector).to_owned(),
                    headers: headers.clone(),
                    body,
                })
                .await
        }
        // The operators' routes (ingestion authority and raw-evidence access): `ops:write` only.
        (_, ["v1", "deliveries", _, ..])
        | (_, ["v1", "artifacts", _, ..])
        | (_, ["v1", "runs", _])
        | (_, ["v1", "quarantine", ..])
        | (_, ["v1", "identity-corrections", ..])
        | (_, ["v1", "source-quarantines", ..])
        | (_, ["v1", "connectors", _, "runs"])
        | (_, ["v1", "observations", _, "artifact"]) => {
            let request = OpsRequest {
                method: method.clone(),
                path: path.clone(),
                query,
                principal: principal(&services.tokens, &headers),
                body,
            };
            handle_ops(&services.ops, request).await
        }
        (_, ["v1", "items", ..]) | (_, ["v1", "observations", _]) => {
            let http = HttpRequest {
                method: method.clone(),
                path: path.clone(),
                query,
                principal: principal(&services.tokens, &headers),
            };
            handle_read(&services.query, http, feedsafe::timestamp::Timestamp::now()).await
        }
        _ => HttpResponse::error(404, "not_found", "no such route"),
    };
    info!(method = %method, path = %path, status = response.status, "request");
    to_hyper(response)
}
