//! HTTP routing for the read API, independent of the transport: API Gateway (Lambda) and the
//! local stack's server both translate into `HttpRequest` and back from `HttpResponse`.

use crate::domain::terms::Decimal;
use crate::domain::timestamp::Timestamp;
use crate::protocols::query::{OffersAsked, Principal, QueryError, QueryService, READ_SCOPE};
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

/// `GET /v1/items?mpn=`, `GET /v1/items/{item}/offers`, `GET /v1/items/{item}/observations`,
/// `GET /v1/observations/{id}`, `GET /v1/sources` (`?connector=`), and the item reads by
/// query parameter, `GET /v1/offers?item=`
/// and `GET /v1/observations?item=` (same answers: an item whose part number holds `/`, `%`,
/// `?` or `#` cannot travel in a path segment through API Gateway, which decodes the path
/// before routing). Reads only.
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
    let query = &request.query;
    match segments(&request.path).as_slice() {
        ["v1", "items", item, "offers"] => read_offers(service, principal, item, query, now).await,
        ["v1", "items", item, "observations"] => {
            read_history(service, principal, item, query, now).await
        }
        ["v1", "offers"] => match queried_item(query) {
            Ok(item) => read_offers(service, principal, item, query, now).await,
            Err(refusal) => refusal,
        },
        ["v1", "observations"] => match queried_item(query) {
            Ok(item) => read_history(service, principal, item, query, now).await,
            Err(refusal) => refusal,
        },
        ["v1", "observations", id] => match as_of(query) {
            Ok(at) => answer(service.observation_as_of(principal, id, at, now).await),
            Err(refusal) => refusal,
        },
        ["v1", "receipts", "verify"] => verify_receipt(service, principal, query, now).await,
        ["v1", "sources"] => {
            let connector = query.get("connector").map(String::as_str);
            answer(service.sources(principal, connector, now).await)
        }
        ["v1", "items"] => match (found_part(query), as_of(query)) {
            (Ok((mpn, manufacturer)), Ok(at)) => answer(
                service
                    .items_as_of(principal, mpn, manufacturer, at, now)
                    .await,
            ),
            (Err(refusal), _) | (_, Err(refusal)) => refusal,
        },
        _ => HttpResponse::error(404, "not_found", "no such route"),
    }
}

/// The current offers of `item`, with the query's `max_age_seconds` and `quantity`.
async fn read_offers(
    service: &QueryService,
    principal: &Principal,
    item: &str,
    query: &HashMap<String, String>,
    now: Timestamp,
) -> HttpResponse {
    let (max_age, quantity, as_of) = match (max_age_of(query), quantity_of(query), as_of(query)) {
        (Ok(max_age), Ok(quantity), Ok(as_of)) => (max_age, quantity, as_of),
        (Err(refusal), _, _) | (_, Err(refusal), _) | (_, _, Err(refusal)) => return refusal,
    };
    let asked = OffersAsked {
        max_age_seconds: max_age,
        quantity: quantity.as_ref(),
        as_of,
    };
    answer(service.offers_as_asked(principal, item, &asked, now).await)
}

/// `GET /v1/receipts/verify?item=&as_of=&digest=` (with the `quantity` and `max_age_seconds`
/// the answer was asked with): the offers answer at `as_of` recomputed from the evidence, and
/// whether its digest is the one given.
async fn verify_receipt(
    service: &QueryService,
    principal: &Principal,
    query: &HashMap<String, String>,
    now: Timestamp,
) -> HttpResponse {
    let item = match queried_item(query) {
        Ok(item) => item,
        Err(refusal) => return refusal,
    };
    let digest = match query.get("digest").filter(|d| !d.is_empty()) {
        Some(digest) => digest.clone(),
        None => return invalid("digest is required (the receipt's `sha256:...`)"),
    };
    let (max_age, quantity, as_of) = match (max_age_of(query), quantity_of(query), as_of(query)) {
        (Ok(max_age), Ok(quantity), Ok(Some(as_of))) => (max_age, quantity, as_of),
        (_, _, Ok(None)) => return invalid("as_of is required (the receipt's instant)"),
        (Err(refusal), _, _) | (_, Err(refusal), _) | (_, _, Err(refusal)) => return refusal,
    };
    let asked = OffersAsked {
        max_age_seconds: max_age,
        quantity: quantity.as_ref(),
        as_of: Some(as_of),
    };
    let (recomputed, before_held) =
        match service.offers_as_asked(principal, item, &asked, now).await {
            Ok(answer) => (answer.digest(), answer.digest_before_held()),
            Err(e) => return query_error(e),
        };
    HttpResponse::json(
        200,
        &ReceiptCheck {
            item: item.to_owned(),
            as_of,
            // A receipt made before held claims were named digests the answer without them.
            matches: recomputed == digest || before_held == digest,
            digest,
            recomputed_digest: recomputed,
        },
    )
}

/// The answer of `GET /v1/receipts/verify`.
#[derive(Debug, Serialize)]
struct ReceiptCheck {
    item: String,
    as_of: Timestamp,
    /// The digest asked about.
    digest: String,
    /// The digest of the answer recomputed at `as_of`.
    recomputed_digest: String,
    matches: bool,
}

/// `?as_of=`: an RFC 3339 instant, or absent.
fn as_of(query: &HashMap<String, String>) -> Result<Option<Timestamp>, HttpResponse> {
    query
        .get("as_of")
        .map(|text| Timestamp::parse(text))
        .transpose()
        .map_err(|e| invalid(&format!("as_of must be an RFC 3339 instant: {e}")))
}

/// One page of `item`'s history, with the query's `limit`, `cursor` and `as_of`.
async fn read_history(
    service: &QueryService,
    principal: &Principal,
    item: &str,
    query: &HashMap<String, String>,
    now: Timestamp,
) -> HttpResponse {
    let (limit, at) = match (limit_of(query), as_of(query)) {
        (Ok(limit), Ok(at)) => (limit, at),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    let cursor = query.get("cursor").map(String::as_str);
    answer(
        service
            .history_as_of(principal, item, cursor, limit, at, now)
            .await,
    )
}

/// `?item=` of the query forms: present and not empty (the service checks it is an item key).
fn queried_item(query: &HashMap<String, String>) -> Result<&str, HttpResponse> {
    query
        .get("item")
        .map(String::as_str)
        .filter(|item| !item.is_empty())
        .ok_or_else(|| {
            invalid(
                "item is required (the canonical item key or a part number, \
                 percent-encoded in the query string)",
            )
        })
}

/// `?max_age_seconds=`: a non-negative integer, or absent.
fn max_age_of(query: &HashMap<String, String>) -> Result<Option<i64>, HttpResponse> {
    match query.get("max_age_seconds").map(|v| v.parse::<i64>()) {
        None => Ok(None),
        Some(Ok(v)) if v >= 0 => Ok(Some(v)),
        Some(_) => Err(invalid("max_age_seconds must be a non-negative integer")),
    }
}

/// `?quantity=`: a quantity to quote (`positive_quantity`), or absent.
fn quantity_of(query: &HashMap<String, String>) -> Result<Option<Decimal>, HttpResponse> {
    query
        .get("quantity")
        .map(|q| positive_quantity(q))
        .transpose()
        .map_err(|why| invalid(&why))
}

/// `?limit=`: 1-100, 50 when absent.
fn limit_of(query: &HashMap<String, String>) -> Result<i32, HttpResponse> {
    match query.get("limit").map(|v| v.parse::<i32>()) {
        None => Ok(50),
        Some(Ok(v)) if (1..=100).contains(&v) => Ok(v),
        Some(_) => Err(invalid("limit must be 1-100")),
    }
}

/// The `mpn` and optional `manufacturer` of `GET /v1/items`.
fn found_part(query: &HashMap<String, String>) -> Result<(&str, Option<&str>), HttpResponse> {
    let mpn = query
        .get("mpn")
        .map(String::as_str)
        .filter(|mpn| !mpn.trim().is_empty())
        .ok_or_else(|| invalid("mpn is required (a manufacturer part number, percent-encoded)"))?;
    match query.get("manufacturer").map(String::as_str) {
        Some(m) if m.trim().is_empty() => Err(invalid(
            "manufacturer, when given, must not be empty (leave it out to list every manufacturer)",
        )),
        manufacturer => Ok((mpn, manufacturer)),
    }
}

fn invalid(message: &str) -> HttpResponse {
    HttpResponse::error(400, "invalid_request", message)
}

/// The parameters of a raw (still percent-encoded) query string such as API Gateway's
/// `rawQueryString`: `&`-separated `name=value` pairs, names and values decoded exactly once
/// as form data (`+` is a space, `%2B` a plus, `%2F` a slash, `%25` a percent; UTF-8 escapes
/// become their character). A comma is an ordinary character; a name given twice is refused.
pub fn parse_query(raw: &str) -> Result<HashMap<String, String>, HttpResponse> {
    given_once(raw.split('&').filter(|pair| !pair.is_empty()).map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(name, true), percent_decode(value, true))
    }))
}

/// Decoded query parameters, each given once: a parameter given twice is ambiguous, and
/// refused rather than resolved to one of its values.
pub fn given_once(
    parameters: impl IntoIterator<Item = (String, String)>,
) -> Result<HashMap<String, String>, HttpResponse> {
    let mut query = HashMap::new();
    for (name, value) in parameters {
        if query.contains_key(&name) {
            let shown: String = name.chars().take(64).collect();
            return Err(invalid(&format!(
                "query parameter {shown:?} is given more than once; give it once"
            )));
        }
        query.insert(name, value);
    }
    Ok(query)
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
    #[test]
    fn a_quantity_to_quote_is_a_decimal_above_zero_as_written() {
        let longest = format!("{}.{}", "9".repeat(11), "9".repeat(18));
        for accepted in ["1", "2500", "2.5", "0.000000000000000001", longest.as_str()] {
            let quantity = super::positive_quantity(accepted).unwrap();
            assert_eq!(quantity.as_str(), accepted);
        }
        let too_long = format!("{longest}9");
        let refused = [
            "",
            "0",
            "0.0",
            "-1",
            "+1",
            "1e3",
            "1,5",
            " 1",
            "01",
            "1.",
            "٣",
            too_long.as_str(),
        ];
        for text in refused {
            let why = super::positive_quantity(text).unwrap_err();
            assert!(why.contains("must be a decimal above 0"), "{text:?}: {why}");
        }
    }

    use super::{parse_query, percent_decode, queried_item};
    use std::collections::HashMap;

    fn item_of(raw: &str) -> String {
        let query = parse_query(raw).unwrap_or_else(|e| panic!("{raw:?}: {}", e.body));
        query
            .get("item")
            .cloned()
            .unwrap_or_else(|| panic!("{raw:?}: no item"))
    }

    /// Part numbers in `?item=`: every escape decoded once, as form data.
    #[test]
    fn a_queried_item_is_decoded_exactly_once() {
        for (raw, item) in [
            ("item=LM358DR~reel~new", "LM358DR~reel~new"),
            ("item=LM358DR%7Ereel%7Enew", "LM358DR~reel~new"),
            ("item=LM358DR%7ereel%7enew", "LM358DR~reel~new"),
            ("item=LM358DR%2FNOPB~reel~new", "LM358DR/NOPB~reel~new"),
            ("item=LM358DR/NOPB", "LM358DR/NOPB"),
            // `+` is a space, an escaped plus a plus.
            ("item=AX+440", "AX 440"),
            ("item=AX%2B440", "AX+440"),
            ("item=AX%20440", "AX 440"),
            // A percent once: `%2525` is `%25`, never `%`.
            ("item=100%25", "100%"),
            ("item=100%2525", "100%25"),
            ("item=50%25%7E1", "50%~1"),
            // Characters that would end or split the query or the URL, escaped.
            ("item=a%26b%3Dc", "a&b=c"),
            ("item=x%3Fy%23z", "x?y#z"),
            ("item=a,b", "a,b"),
            ("item=a%2Cb", "a,b"),
            // Multi-byte UTF-8: 2, 3 and 4 bytes.
            ("item=caf%C3%A9", "café"),
            ("item=R%E2%80%93100%CE%A9", "R–100Ω"),
            ("item=bolt%F0%9F%94%A9", "bolt🔩"),
            // An invalid escape stays literal; bytes that are not UTF-8 become U+FFFD.
            ("item=100%", "100%"),
            ("item=%zz", "%zz"),
            ("item=%FF", "\u{FFFD}"),
            // Only the first `=` separates the name.
            ("item=a=b", "a=b"),
            ("item", ""),
            ("item=", ""),
        ] {
            assert_eq!(item_of(raw), item, "{raw:?}");
        }
    }

    #[test]
    fn query_strings_split_at_ampersands_and_refuse_a_repeated_name() {
        let query = parse_query("&item=AX%2F1&&quantity=2500&max_age_seconds=60&").unwrap();
        let expected: HashMap<String, String> = [
            ("item", "AX/1"),
            ("quantity", "2500"),
            ("max_age_seconds", "60"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(query, expected);
        assert!(parse_query("").unwrap().is_empty());
        // Names decode too: `%69tem` is `item`, so it is given twice.
        for raw in ["item=a&item=b", "item=a&%69tem=b", "limit=1&limit=1"] {
            let refusal = parse_query(raw).expect_err(raw);
            assert_eq!(refusal.status, 400, "{raw}");
            assert!(refusal.body.contains("more than once"), "{}", refusal.body);
        }
    }

    #[test]
    fn the_query_forms_need_a_non_empty_item() {
        for raw in ["", "item=", "item", "quantity=1", "Item=AX-1"] {
            let query = parse_query(raw).unwrap();
            let refusal = queried_item(&query).expect_err(raw);
            assert_eq!(refusal.status, 400);
            assert!(
                refusal.body.contains("\"invalid_request\"")
                    && refusal.body.contains("item is required"),
                "{}",
                refusal.body
            );
        }
        let query = parse_query("item=+").unwrap();
        assert_eq!(
            queried_item(&query).ok(),
            Some(" "),
            "the service refuses it"
        );
    }

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
