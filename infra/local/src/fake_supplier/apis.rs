//! Supplier APIs the fake supplier also serves, for pulls made from a definition. Their
//! content is fixed (the same answer every time), so a test can name every value it expects:
//!
//! - `GET /apis/distributor/v2/inventory[?cursor=c2|c3]`: a distributor's JSON API (the shape of
//!   `tests/fixtures/suppliers/distributor-api/page-1.json`), cursor-paginated at
//!   `$.meta.next_cursor`, three pages of 2, 2 and 1 rows; `Authorization: Bearer`
//!   [`DISTRIBUTOR_TOKEN`] required, 401 without it.
//! - `GET /apis/catalog/items[?page=2|3]`: a JSON API paginated by `Link: <…>; rel="next"` (a
//!   relative target on page 1, an absolute one on page 2), three pages of one row, each
//!   answered with the export id in `X-Export-Id`; `X-Api-Key` [`CATALOG_KEY`] required.
//! - `GET /apis/stock.csv?page=N`: a semicolon CSV by page number (3 rows, then 1, then the
//!   header alone); basic auth `local:`[`CSV_PASSWORD`] required.
//!
//! The credentials are local samples (`infra/local/pull-secrets.json`), not production secrets.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{HeaderMap, Response, StatusCode};
use serde_json::{json, Value};

/// The distributor API's bearer token (a local sample).
pub const DISTRIBUTOR_TOKEN: &str = "local-sample-distributor-token-not-for-production";
/// The catalog API's key (a local sample).
pub const CATALOG_KEY: &str = "local-sample-catalog-key-not-for-production";
/// The CSV's basic-auth password of user `local` (a local sample).
pub const CSV_PASSWORD: &str = "local-sample-csv-password";
/// The catalog API's export id.
pub const CATALOG_EXPORT: &str = "CAT-2026-12-07";

type Answer = Response<Full<Bytes>>;

/// The local stack's pull service with pulls made from a definition wired: their pages over
/// the loopback-allowing client (the fake supplier), their credentials from the local sample
/// file `secrets` (`infra/local/pull-secrets.json`).
pub fn with_local_pulls(
    service: feedsafe::intake::poller::PullService,
    secrets: &std::path::Path,
) -> anyhow::Result<feedsafe::intake::poller::PullService> {
    use feedsafe::intake::poller::{credentials::LocalPullCredentials, HttpExportSource};
    Ok(service.with_defined_pulls(
        std::sync::Arc::new(HttpExportSource::allowing_loopback_http()),
        std::sync::Arc::new(LocalPullCredentials::load(secrets)?),
    ))
}

/// The answer to `GET {path}?{query}`, if `path` is one of these APIs.
pub fn route(path: &str, query: &str, headers: &HeaderMap) -> Option<Answer> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match path {
        "/apis/distributor/v2/inventory" => Some(
            match header("authorization") == Some(&format!("Bearer {DISTRIBUTOR_TOKEN}")) {
                true => distributor(param(query, "cursor")),
                false => unauthorized(),
            },
        ),
        "/apis/catalog/items" => Some(match header("x-api-key") == Some(CATALOG_KEY) {
            true => catalog(param(query, "page"), header("host").unwrap_or("127.0.0.1")),
            false => unauthorized(),
        }),
        "/apis/stock.csv" => {
            // base64("local:local-sample-csv-password")
            let expected = "Basic bG9jYWw6bG9jYWwtc2FtcGxlLWNzdi1wYXNzd29yZA==";
            Some(match header("authorization") == Some(expected) {
                true => csv(param(query, "page")),
                false => unauthorized(),
            })
        }
        _ => None,
    }
}

fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

fn answer(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn unauthorized() -> Answer {
    let body =
        json!({"error": {"code": "unauthorized", "message": "a valid credential is required"}});
    answer(
        StatusCode::UNAUTHORIZED,
        "application/json",
        body.to_string(),
    )
}

fn not_found() -> Answer {
    let body = json!({"error": {"code": "not_found", "message": "no such page"}});
    answer(StatusCode::NOT_FOUND, "application/json", body.to_string())
}

/// `(mpn, stock, uom, amount)` of each distributor page's rows, in USD.
pub const DISTRIBUTOR_PAGES: [&[(&str, &str, &str, &str)]; 3] = [
    &[
        ("LM358DR", "500 In Stock", "EA", "0.41"),
        ("TPS7A4701RGWR", "12 In Stock", "PCS", "7.85"),
    ],
    &[
        ("NE555DR", "1200 In Stock", "EA", "0.19"),
        ("SN74HC595N", "75 In Stock", "EA", "0.62"),
    ],
    &[("ATMEGA328P-PU", "3 In Stock", "PCS", "2.95")],
];

fn distributor(cursor: Option<&str>) -> Answer {
    let (index, next) = match cursor {
        None => (0, json!("c2")),
        Some("c2") => (1, json!("c3")),
        Some("c3") => (2, Value::Null),
        Some(_) => return not_found(),
    };
    let items: Vec<Value> = DISTRIBUTOR_PAGES
        .get(index)
        .copied()
        .unwrap_or_default()
        .iter()
        .map(|(mpn, stock, uom, amount)| {
            json!({"mpn": mpn, "stock": stock, "uom": uom,
                   "price": {"amount": amount, "currency": "USD"},
                   "updated_at": "2026-12-07T05:55:00Z"})
        })
        .collect();
    let body = json!({
        "meta": {"generated_at": "2026-12-07T06:00:00Z", "next_cursor": next},
        "data": {"items": items}
    });
    answer(StatusCode::OK, "application/json", body.to_string())
}

/// `(sku, quantity, price)` of the catalog's pages, one row each, in EUR.
pub const CATALOG_PAGES: [(&str, u32, &str); 3] = [
    ("CAT-100", 40, "12.50"),
    ("CAT-200", 0, "3.10"),
    ("CAT-300", 9, "99.00"),
];

fn catalog(page: Option<&str>, host: &str) -> Answer {
    let number = match page {
        None => 1,
        Some(text) => match text.parse::<usize>() {
            Ok(n @ 1..=3) => n,
            _ => return not_found(),
        },
    };
    let Some((sku, quantity, price)) = number.checked_sub(1).and_then(|i| CATALOG_PAGES.get(i))
    else {
        return not_found();
    };
    let body = json!({"items": [{"sku": sku, "available": quantity, "unit_price": price,
                                 "currency": "EUR", "as_of": "2026-12-07T06:00:00Z"}]});
    let mut response = answer(StatusCode::OK, "application/json", body.to_string());
    let link = match number {
        1 => Some(r#"</apis/catalog/items?page=2>; rel="next""#.to_owned()),
        2 => Some(format!(
            r#"<http://{host}/apis/catalog/items?page=1>; rel="prev", <http://{host}/apis/catalog/items?page=3>; rel="next""#
        )),
        _ => Some(format!(
            r#"<http://{host}/apis/catalog/items?page=2>; rel="prev""#
        )),
    };
    let headers = response.headers_mut();
    if let Some(link) = link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert("link", link);
    }
    headers.insert("x-export-id", HeaderValue::from_static(CATALOG_EXPORT));
    response
}

/// The CSV's pages (semicolon-separated, decimal commas), the header on each.
pub const CSV_PAGES: [&str; 2] = [
    "sku;qty;price\r\nCSV-1;10;1,50\r\nCSV-2;20;2,50\r\nCSV-3;30;3,50\r\n",
    "sku;qty;price\r\nCSV-4;40;4,50\r\n",
];

fn csv(page: Option<&str>) -> Answer {
    let Some(number) = page.and_then(|p| p.parse::<usize>().ok()) else {
        return not_found();
    };
    let body = match number.checked_sub(1).and_then(|i| CSV_PAGES.get(i)) {
        Some(text) => (*text).to_owned(),
        None if number > 0 => "sku;qty;price\r\n".to_owned(),
        None => return not_found(),
    };
    answer(StatusCode::OK, "text/csv; charset=utf-8", body)
}
