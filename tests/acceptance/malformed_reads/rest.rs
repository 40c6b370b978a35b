//! The read routes, parameter by parameter: through the query function's handler (the decoded
//! path and query API Gateway hands over), then over HTTP through the local stack (what a
//! client sends: percent-encoding, repeated parameters, methods no route serves).

use super::{assert_error, foreign_cursors, issued_cursor, principal, read, HISTORY};
use crate::read_path::{projected_scenario, Stored};
use acceptance::*;
use feedsafe::protocols::http::HttpRequest;
use feedsafe::protocols::query::Principal;
use serde_json::Value;

/// One malformed read and the refusal the contract gives it.
struct Case {
    what: String,
    method: &'static str,
    /// Decoded, as the function sees it.
    path: String,
    query: Vec<(String, String)>,
    principal: Principal,
    expected: (u16, &'static str),
}

impl Case {
    fn get(
        what: impl Into<String>,
        path: impl Into<String>,
        expected: (u16, &'static str),
    ) -> Self {
        Case {
            what: what.into(),
            method: "GET",
            path: path.into(),
            query: Vec::new(),
            principal: principal(TENANT),
            expected,
        }
    }

    fn with(mut self, name: &str, value: &str) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    fn request(&self) -> HttpRequest {
        HttpRequest {
            method: self.method.into(),
            path: self.path.clone(),
            query: self.query.iter().cloned().collect(),
            principal: Some(self.principal.clone()),
        }
    }
}

const INVALID: (u16, &str) = (400, "invalid_request");
const BAD_CURSOR: (u16, &str) = (400, "invalid_cursor");
const NOT_FOUND: (u16, &str) = (404, "not_found");

/// Item path segments (decoded) that are not an item key.
fn bad_items(longest: usize) -> Vec<(&'static str, String)> {
    vec![
        ("a part number over 128 characters", "A".repeat(129)),
        ("an item far over any limit", "A".repeat(longest)),
        ("a zero-width space inside", "AX\u{200B}440".into()),
        ("a no-break space inside", "AX\u{A0}440".into()),
        ("a right-to-left override", "AX\u{202E}440".into()),
        ("a NUL", "AX\u{0}440".into()),
        ("a newline", "AX\n440".into()),
        ("a % not written %25 in a key", "50%~each~new".into()),
        ("an invalid escape, kept literally", "%zz".into()),
        ("a unit outside its alphabet", "AX-440~re!el~new".into()),
        (
            "bytes that are not UTF-8, decoded lossily",
            "\u{FFFD}".into(),
        ),
        ("two components", "AX-440~each".into()),
        ("five components", "AX-440~r1~each~new~x".into()),
        ("a revision without r", "AX-440~1~each~new".into()),
        ("an empty part number", "~each~new".into()),
        ("only separators", "~~".into()),
        ("blank", " ".into()),
    ]
}

fn item_cases(longest: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    for (what, item) in bad_items(longest) {
        for route in ["offers", "observations"] {
            let path = format!("/v1/items/{item}/{route}");
            cases.push(Case::get(
                format!("{route}: item with {what}"),
                path,
                INVALID,
            ));
        }
    }
    cases
}

fn number_cases() -> Vec<Case> {
    let offers = "/v1/items/AX-440-R2/offers";
    let mut cases = Vec::new();
    for value in [
        "-1",
        "abc",
        "",
        "1.5",
        "1e3",
        "0x10",
        "+-1",
        "99999999999999999999",
        "1,2",
        " 1",
    ] {
        let what = format!("max_age_seconds {value:?}");
        cases.push(Case::get(what, offers, INVALID).with("max_age_seconds", value));
    }
    for value in [
        "0",
        "101",
        "-1",
        "abc",
        "",
        "1.5",
        "50.0",
        "2147483648",
        "99999999999",
        "1,2",
        "1e2",
    ] {
        let what = format!("limit {value:?}");
        cases.push(Case::get(what, HISTORY, INVALID).with("limit", value));
    }
    cases
}

fn cursor_cases(issued: &str, longest: usize) -> Vec<Case> {
    let mut cases = vec![
        Case::get(
            "another item's cursor",
            "/v1/items/AX-440-R2/observations",
            BAD_CURSOR,
        )
        .with("cursor", issued),
        Case {
            principal: principal("other"),
            ..Case::get("another tenant's cursor", HISTORY, BAD_CURSOR).with("cursor", issued)
        },
        Case::get("a cursor with a space added", HISTORY, BAD_CURSOR)
            .with("cursor", &format!("{issued} ")),
        Case::get("a valid limit, a bad cursor", HISTORY, BAD_CURSOR)
            .with("limit", "5")
            .with("cursor", "%zz"),
    ];
    for (what, cursor) in foreign_cursors(issued, longest) {
        cases.push(
            Case::get(format!("cursor: {what}"), HISTORY, BAD_CURSOR).with("cursor", &cursor),
        );
    }
    cases
}

fn observation_cases(longest: usize) -> Vec<Case> {
    let ids = [
        "obs_".to_owned(),
        "OBS_ABC".into(),
        "obs_ABC".into(),
        "obs_a-b".into(),
        "obs_a b".into(),
        "obs_%zz".into(),
        "obs_é".into(),
        "nope".into(),
        format!("obs_{}", "a".repeat(33)),
        format!("obs_{}", "a".repeat(longest)),
        "obs_aaaaaaaaaaaaaaaaaaaaaaaaaa".into(), // well-formed, not stored
    ];
    ids.into_iter()
        .map(|id| {
            let what = format!(
                "observation id {:?}",
                id.chars().take(40).collect::<String>()
            );
            Case::get(what, format!("/v1/observations/{id}"), NOT_FOUND)
        })
        .collect()
}

/// Paths under the read function that are no read route, and methods other than GET.
fn route_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for path in [
        "/v1/items/AX-440-R2",
        "/v1/items/AX-440-R2/offers/extra",
        "/v1/items/AX/440/offers",
        "/v1/observations/a/b",
    ] {
        cases.push(Case::get(format!("path {path}"), path, NOT_FOUND));
    }
    // The query forms without their item.
    for path in ["/v1/observations", "/v1/offers"] {
        cases.push(Case::get(
            format!("the query form {path} without an item"),
            path,
            INVALID,
        ));
    }
    for path in [
        "/v1/items/AX-440-R2/offers",
        HISTORY,
        "/v1/observations/obs_aaaa",
    ] {
        for method in ["POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] {
            cases.push(Case {
                method,
                ..Case::get(
                    format!("{method} {path}"),
                    path,
                    (405, "method_not_allowed"),
                )
            });
        }
    }
    cases
}

fn all_cases(issued: &str, longest: usize) -> Vec<Case> {
    let mut cases = item_cases(longest);
    cases.extend(number_cases());
    cases.extend(cursor_cases(issued, longest));
    cases.extend(observation_cases(longest));
    cases.extend(route_cases());
    cases
}

#[tokio::test(flavor = "multi_thread")]
async fn every_malformed_read_is_a_clean_4xx_from_the_query_function() {
    let env = projected_scenario().await;
    let service = env.query();
    let issued = issued_cursor(&service, &env.reader()).await;
    let before = Stored::of(&env).await;
    let cases = all_cases(&issued, 100_000);
    assert!(cases.len() >= 100, "{} cases", cases.len());
    for case in &cases {
        let answer = read(&service, case.request()).await;
        assert_error(&case.what, &answer, case.expected);
    }
    Stored::of(&env).await.assert_unchanged_since(&before);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_item_is_an_empty_answer_and_an_unknown_observation_is_not_found() {
    let env = projected_scenario().await;
    let service = env.query();
    let reader = env.reader();
    let get = |path: &str| super::get(&reader, path, &[]);
    let offers = read(&service, get("/v1/items/NOPE-1/offers")).await;
    assert_eq!(offers.0, 200, "{}", offers.1);
    assert_eq!(offers.1["offers"], serde_json::json!([]), "{}", offers.1);
    let history = read(&service, get("/v1/items/NOPE-1~r2~box~used/observations")).await;
    assert_eq!(history.0, 200, "{}", history.1);
    assert_eq!(
        (&history.1["observations"], &history.1["next_cursor"]),
        (&serde_json::json!([]), &Value::Null),
        "{}",
        history.1
    );
}

/// Every byte outside the unreserved set percent-encoded, as a careful client sends it.
fn encode(text: &str) -> String {
    percent_encoded(text)
}

/// The URL a client builds for `case`: each path segment and query value encoded.
fn url(base: &str, case: &Case) -> String {
    let path: Vec<String> = case.path.split('/').map(encode).collect();
    let query: Vec<String> = case
        .query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if query.is_empty() {
        format!("{base}{}", path.join("/"))
    } else {
        format!("{base}{}?{}", path.join("/"), query.join("&"))
    }
}

/// (status, JSON body) of a request with a bearer token, off the async runtime.
async fn send(method: &'static str, url: String, token: Option<&str>) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let shown: String = url.chars().take(200).collect();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .allow_non_standard_methods(true)
            .build()
            .into();
        let mut request = http::Request::builder().method(method).uri(&url);
        if let Some(auth) = &auth {
            request = request.header("authorization", auth);
        }
        let request = request
            .body(())
            .unwrap_or_else(|e| panic!("{method} {shown}: {e}"));
        let mut response = agent
            .run(request)
            .unwrap_or_else(|e| panic!("{method} {shown}: {e}"));
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {shown}: {status}, not JSON ({e}): {text}"));
        (status, body)
    })
    .await
    .unwrap()
}

const READER_TOKEN: &str = "malformed-reads-reader";
const OTHER_TOKEN: &str = "malformed-reads-other-tenant";
const OPS_TOKEN: &str = "malformed-reads-ops-only";

/// The local stack over `env`, its tokens a reader of the scenario's tenant, a reader of
/// another tenant and an operator without `offers:read`.
async fn stack_with_readers(env: &TestEnv) -> local_stack::Stack {
    let tokens = std::env::temp_dir().join(format!(
        "feedsafe-tokens-malformed-{}-{}.json",
        std::process::id(),
        env.table
    ));
    std::fs::write(
        &tokens,
        serde_json::json!({"tokens": {
            READER_TOKEN: {"tenant": TENANT, "scopes": ["offers:read"]},
            OTHER_TOKEN: {"tenant": "other", "scopes": ["offers:read"]},
            OPS_TOKEN: {"tenant": TENANT, "scopes": ["ops:write"]},
        }})
        .to_string(),
    )
    .expect("the test's tokens file is written");
    spawn_stack(env, Some(tokens)).await
}

/// A request only a client on the wire can make: what, the raw path and query, the token, the
/// expected status and code.
type WireCase = (
    &'static str,
    &'static str,
    Option<&'static str>,
    (u16, &'static str),
);

/// Raw escapes, repeated parameters, tokens.
fn wire_cases() -> Vec<WireCase> {
    let mut cases = escape_cases();
    cases.extend(parameter_and_token_cases());
    cases
}

/// Escapes in the path and in the query forms' item.
fn escape_cases() -> Vec<WireCase> {
    vec![
        (
            "not UTF-8 in a queried item",
            "/v1/offers?item=%FF",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an item queried twice",
            "/v1/observations?item=BX-1&item=BX-2",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an empty part number to find",
            "/v1/items?mpn=",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an empty manufacturer to find",
            "/v1/items?mpn=LM358&manufacturer=",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an invisible character in a manufacturer",
            "/v1/items?mpn=LM358&manufacturer=T%E2%80%8BI",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "not UTF-8 in an item",
            "/v1/items/%FF/offers",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "a truncated UTF-8 escape",
            "/v1/items/AX%C3/observations",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an invalid escape",
            "/v1/items/%zz/offers",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "a bare percent",
            "/v1/items/AX%25/offers",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an escaped slash in an item",
            "/v1/items/AX%2F440/offers",
            Some(READER_TOKEN),
            NOT_FOUND,
        ),
        (
            "an escaped NUL",
            "/v1/items/AX%00/observations",
            Some(READER_TOKEN),
            INVALID,
        ),
    ]
}

/// Repeated or malformed parameters, and tokens.
fn parameter_and_token_cases() -> Vec<WireCase> {
    vec![
        (
            "a limit given twice",
            "/v1/items/BX-1/observations?limit=1&limit=2",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "an escaped limit",
            "/v1/items/BX-1/observations?limit=%zz",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "max_age_seconds given twice",
            "/v1/items/BX-1/offers?max_age_seconds=1&max_age_seconds=2",
            Some(READER_TOKEN),
            INVALID,
        ),
        (
            "a cursor that is not UTF-8",
            "/v1/items/BX-1/observations?cursor=%FF",
            Some(READER_TOKEN),
            BAD_CURSOR,
        ),
        (
            "a cursor with a plus",
            "/v1/items/BX-1/observations?cursor=a+b",
            Some(READER_TOKEN),
            BAD_CURSOR,
        ),
        (
            "an observation id not UTF-8",
            "/v1/observations/obs_%FF",
            Some(READER_TOKEN),
            NOT_FOUND,
        ),
        (
            "no token",
            "/v1/items/BX-1/offers",
            None,
            (401, "unauthorized"),
        ),
        (
            "an unknown token",
            "/v1/items/BX-1/observations",
            Some("not-a-token"),
            (401, "unauthorized"),
        ),
        (
            "a token without offers:read",
            "/v1/observations/obs_aaaa",
            Some(OPS_TOKEN),
            (403, "forbidden"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_malformed_read_is_a_clean_4xx_through_the_local_stack() {
    let env = projected_scenario().await;
    let issued = issued_cursor(&env.query(), &env.reader()).await;
    let stack = stack_with_readers(&env).await;
    let base = stack.base_url();
    let before = Stored::settled(&env).await;

    let mut cases = all_cases(&issued, 5_000);
    // No route serves these at the gateway: API Gateway's own 404, no function runs.
    cases.retain(|c| c.method != "HEAD");
    for case in &cases {
        let token = if case.principal.tenant.as_str() == "other" {
            OTHER_TOKEN
        } else {
            READER_TOKEN
        };
        let answer = send(case.method, url(&base, case), Some(token)).await;
        let routed = case.method == "GET" && !case.what.starts_with("path ");
        if routed {
            assert_error(&case.what, &answer, case.expected);
        } else {
            assert_gateway_404(&case.what, &answer);
        }
    }
    for (what, path, token, expected) in wire_cases() {
        let answer = send("GET", format!("{base}{path}"), token).await;
        assert_error(what, &answer, expected);
    }
    for (method, path) in [
        ("GET", "/v1/mcp"),
        ("PUT", "/v1/mcp"),
        ("DELETE", "/v1/mcp"),
    ] {
        let answer = send(method, format!("{base}{path}"), Some(READER_TOKEN)).await;
        assert_gateway_404(&format!("{method} {path}"), &answer);
    }

    Stored::settled(&env).await.assert_unchanged_since(&before);
    stack.stop().await;
}

/// API Gateway's answer to a method or path no route serves.
#[track_caller]
fn assert_gateway_404(what: &str, (status, body): &(u16, Value)) {
    assert_eq!(
        (*status, body),
        (404, &serde_json::json!({"message": "Not Found"})),
        "{what}"
    );
}
