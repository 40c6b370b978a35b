//! HTTP routing for the read API, independent of the transport: API Gateway (Lambda) and the
//! local stack's server both translate into `HttpRequest` and back from `HttpResponse`.

use crate::domain::terms::Decimal;
use crate::domain::timestamp::Timestamp;
use crate::protocols::query::{Principal, QueryError, QueryService, READ_SCOPE};
use serde::Serialize;
use std::borrow::Cow;
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
    /// `application/json` for every API answer; the operator console's page and assets differ.
    pub content_type: &'static str,
    /// Headers beyond `Content-Type` and `Cache-Control: no-store` (the console's
    /// Content-Security-Policy and its companions).
    pub headers: Vec<(&'static str, &'static str)>,
}

/// `{"error": {"code", "message"}}` (docs/openapi.yaml `Error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

/// A stable `code` clients branch on, and a `message` for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail<'a> {
    pub code: &'a str,
    pub message: &'a str,
}

impl HttpResponse {
    /// `body` as JSON. The API's bodies always serialize (string keys, no non-finite
    /// floats); were one not to, the caller gets the 500 answer of a defect, and it is logged.
    pub fn json(status: u16, body: &impl Serialize) -> Self {
        match serde_json::to_string(body) {
            Ok(text) => Self::text(status, "application/json", text),
            Err(e) => {
                error!(error = %e, "a response body did not serialize");
                Self::error(
                    500,
                    "internal_error",
                    "the request failed on a defect of ours; the failure is logged",
                )
            }
        }
    }

    /// A body of another content type, with no extra headers.
    pub fn text(status: u16, content_type: &'static str, body: String) -> Self {
        Self {
            status,
            body,
            content_type,
            headers: Vec::new(),
        }
    }

    /// `{"error": {"code", "message"}}` with a stable code.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        let body = ErrorBody {
            error: ErrorDetail { code, message },
        };
        // Two strings: serializing cannot fail (and must not recurse into `json`).
        Self::text(
            status,
            "application/json",
            serde_json::to_string(&body).unwrap_or_default(),
        )
    }
}

/// Decodes `%XX` escapes (invalid ones stay literal; bytes that are not UTF-8 become U+FFFD).
/// `plus_is_space` for query strings and S3 event keys; in URL paths `+` is a literal.
pub fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = if plus_is_space && text.contains('+') {
        // Before decoding, so that an escaped plus (`%2B`) stays a plus.
        Cow::Owned(text.replace('+', " ").into_bytes())
    } else {
        Cow::Borrowed(text.as_bytes())
    };
    percent_encoding::percent_decode(&bytes)
        .decode_utf8_lossy()
        .into_owned()
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
        QueryError::InvalidCursor(m) => HttpResponse::error(400, "invalid_cursor", &m),
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
    match segments(&request.path).as_slice() {
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
            let quantity = match request.query.get("quantity").map(|q| positive_quantity(q)) {
                None => None,
                Some(Ok(q)) => Some(q),
                Some(Err(why)) => return HttpResponse::error(400, "invalid_request", &why),
            };
            answer(
                service
                    .offers_for(principal, item, max_age, quantity.as_ref(), now)
                    .await,
            )
        }
        ["v1", "items", item, "observations"] => {
            let limit = match request.query.get("limit").map(|v| v.parse::<i32>()) {
                None => 50,
                Some(Ok(v)) if (1..=100).contains(&v) => v,
                Some(_) => {
                    return HttpResponse::error(400, "invalid_request", "limit must be 1-100")
                }
            };
            let cursor = request.query.get("cursor").map(String::as_str);
            answer(service.history(principal, item, cursor, limit).await)
        }
        ["v1", "observations", id] => answer(service.observation(principal, id).await),
        _ => HttpResponse::error(404, "not_found", "no such route"),
    }
}

/// A `?quantity=` to quote: a decimal above zero, as the price grammar writes it.
pub fn positive_quantity(text: &str) -> Result<Decimal, String> {
    Decimal::parse(text)
        .ok()
        .filter(|q| !q.is_zero())
        .ok_or_else(|| {
            let shown: String = text.chars().take(40).collect();
            format!("quantity {shown:?} must be a decimal above 0 such as 2500 or 2.5 (no sign, exponent or separators)")
        })
}

/// A read's body (200), or its refusal.
fn answer(result: Result<impl Serialize, QueryError>) -> HttpResponse {
    match result {
        Ok(body) => HttpResponse::json(200, &body),
        Err(e) => query_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn escapes_decode_and_a_plus_is_a_space_only_where_asked() {
        // Paths: `+` is a literal; `%2F` is a slash inside a segment (a delivery key's id).
        assert_eq!(
            percent_decode("/v1/deliveries/demo/acme-eu/ACC-1/EXP%2F2+x%3A", false),
            "/v1/deliveries/demo/acme-eu/ACC-1/EXP/2+x:"
        );
        // Query strings and S3 event keys: `+` is a space, an escaped plus stays a plus.
        assert_eq!(
            percent_decode("price+list%202026.csv", true),
            "price list 2026.csv"
        );
        assert_eq!(percent_decode("a%2Bb+c", true), "a+b c");
        assert_eq!(percent_decode("a%2Bb+c", false), "a+b+c");
        // Either case of hex digits; multi-byte UTF-8.
        assert_eq!(percent_decode("%2f%2F", false), "//");
        assert_eq!(percent_decode("caf%C3%A9", false), "café");
    }

    #[test]
    fn invalid_escapes_stay_literal_and_invalid_utf8_is_replaced() {
        assert_eq!(percent_decode("100%", true), "100%");
        assert_eq!(percent_decode("%zz", true), "%zz");
        assert_eq!(percent_decode("%4", false), "%4");
        assert_eq!(percent_decode("%%41", false), "%A");
        assert_eq!(percent_decode("%+41", true), "% 41");
        assert_eq!(percent_decode("%FF", false), "\u{FFFD}");
        assert_eq!(percent_decode("%C3", false), "\u{FFFD}");
    }

    /// The decoder this module had before it used `percent-encoding`.
    fn hand_written(text: &str, plus_is_space: bool) -> String {
        let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match (
                bytes[i],
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (b'%', Some(high), Some(low)) => {
                    out.push(high * 16 + low);
                    i += 3;
                }
                (b'+', _, _) if plus_is_space => {
                    out.push(b' ');
                    i += 1;
                }
                (b, _, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Every string of up to 4 characters over an alphabet of escapes, digits, pluses and
    /// multi-byte characters decodes exactly as before.
    #[test]
    fn decodes_exactly_as_the_hand_written_decoder_did() {
        let alphabet = [
            "%", "+", "2", "B", "f", "C", "3", "A", "9", "z", "/", " ", "é",
        ];
        let mut texts = vec![String::new()];
        let mut compared = 0;
        for _ in 0..4 {
            texts = texts
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            for text in &texts {
                for plus_is_space in [false, true] {
                    assert_eq!(
                        percent_decode(text, plus_is_space),
                        hand_written(text, plus_is_space),
                        "{text:?} (plus_is_space: {plus_is_space})"
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 60_000);
    }
}
