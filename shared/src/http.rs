//! HTTP routing for the read API, independent of the transport: API Gateway (Lambda) and the
//! local stack's server both translate into `HttpRequest` and back from `HttpResponse`.

use crate::query::{Principal, QueryError, QueryService, READ_SCOPE};
use crate::timestamp::Timestamp;
use serde_json::{json, Value};
use std::collections::HashMap;
use tracing::error;

#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    /// Decoded path, e.g. `/v1/items/AX-440-R2/offers`.
    pub path: String,
    pub query: HashMap<String, String>,
    /// From the authorizer; `None` when the caller is not authenticated.
    pub principal: Option<Principal>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

impl HttpResponse {
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            body: body.to_string(),
        }
    }

    /// `{"error": {"code", "message"}}` with a stable code.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        Self::json(
            status,
            &json!({"error": {"code": code, "message": message}}),
        )
    }
}

fn segments(path: &str) -> Vec<&str> {
    path.trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

fn query_error(e: QueryError) -> HttpResponse {
    match e {
        QueryError::NotFound(m) => HttpResponse::error(404, "not_found", &m),
        QueryError::InvalidRequest(m) => HttpResponse::error(400, "invalid_request", &m),
        QueryError::Store(e) => {
            // Logged for operators; the caller gets no internals.
            error!(error = %e, "read failed");
            HttpResponse::error(
                503,
                "unavailable",
                "the evidence store is unavailable; retry later",
            )
        }
    }
}

/// `GET /v1/items/{item}/offers`, `GET /v1/items/{item}/observations`,
/// `GET /v1/observations/{id}`. Reads only.
pub async fn handle_read(
    service: &QueryService,
    request: HttpRequest,
    now: Timestamp,
) -> HttpResponse {
    let Some(principal) = request.principal.as_ref() else {
        return HttpResponse::error(401, "unauthorized", "a reader's bearer token is required");
    };
    if !principal.scopes.iter().any(|s| s == READ_SCOPE) {
        return HttpResponse::error(403, "forbidden", "the offers:read scope is required");
    }
    if request.method != "GET" {
        return HttpResponse::error(405, "method_not_allowed", "read routes accept GET only");
    }
    let result = match segments(&request.path).as_slice() {
        ["v1", "items", item, "offers"] => {
            let max_age = match request
                .query
                .get("max_age_seconds")
                .map(|v| v.parse::<i64>())
            {
                None => None,
                Some(Ok(v)) if v >= 0 => Some(v),
                Some(_) => {
                    return HttpResponse::error(
                        400,
                        "invalid_request",
                        "max_age_seconds must be a non-negative integer",
                    )
                }
            };
            service.offers(principal, item, max_age, now).await
        }
        ["v1", "items", item, "observations"] => {
            let limit = match request.query.get("limit").map(|v| v.parse::<i32>()) {
                None => 50,
                Some(Ok(v)) if (1..=100).contains(&v) => v,
                Some(_) => {
                    return HttpResponse::error(400, "invalid_request", "limit must be 1-100")
                }
            };
            service
                .history(
                    principal,
                    item,
                    request.query.get("cursor").map(String::as_str),
                    limit,
                )
                .await
        }
        ["v1", "observations", id] => service.observation(principal, id).await,
        _ => return HttpResponse::error(404, "not_found", "no such route"),
    };
    match result {
        Ok(body) => HttpResponse::json(200, &body),
        Err(e) => query_error(e),
    }
}
