//! The item reads by query parameter through the local stack: `GET /v1/offers?item=` and
//! `GET /v1/observations?item=` answer exactly as `GET /v1/items/{item}/offers` and
//! `GET /v1/items/{item}/observations` (a distributor's reel, its tildes sent as they are and
//! escaped), decode the item exactly once (slashes, percents, pluses, commas: as the query
//! function's handler reads the decoded value), and refuse what the path forms refuse.

use acceptance::*;
use feedsafe::domain::ids::TenantId;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::query::Principal;
use serde_json::{json, Value};

const READER: &str = LOCAL_READER;
const OPERATOR: &str = LOCAL_OPERATOR;
/// An operator of `demo` without `offers:read`.
const OPS_ONLY: &str = "item-queries-ops-only";
const SUPPLIER: &str = "distributor-terms";
const FILE: &str = "snapshot-7731.json";
/// The reel variant of the part (its packaging is part of the item).
const ITEM: &str = "LM358DR~reel~new";

/// The local sample tokens (`infra/local/tokens.json`) and an operator without `offers:read`.
fn tokens_file(env: &TestEnv) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "feedsafe-tokens-item-queries-{}-{}.json",
        std::process::id(),
        env.table
    ));
    let tokens = json!({"tokens": {
        READER: {"tenant": "demo", "scopes": ["offers:read"]},
        OPERATOR: {"tenant": "demo", "scopes": ["offers:read", "ops:write"], "subject": "local-operator"},
        OPS_ONLY: {"tenant": "demo", "scopes": ["ops:write"]},
    }});
    std::fs::write(&path, tokens.to_string()).expect("the test's tokens file is written");
    path
}

/// Stores the distributor's definition and drops its snapshot; the connector's id.
async fn onboard_and_drop(env: &TestEnv, stack: &local_stack::Stack) -> String {
    let document = supplier_definition(SUPPLIER);
    let id = document["connector"].as_str().unwrap().to_owned();
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) = call_with("PUT", url, Some(OPERATOR), None, document).await;
    assert_eq!(status, 201, "{answer}");
    env.drop_file(&id, FILE, supplier_file(SUPPLIER, FILE))
        .await;
    id
}

async fn get(url: String, token: Option<&str>) -> (u16, Value) {
    call("GET", url, token, Value::Null).await
}

/// `answer` without its clock: no `as_of` (nor the receipt, which digests it), and each
/// `age_seconds` counted back from `as_of` (`age - as_of` is minus the observation time,
/// whenever the answer was given).
fn clockless(mut answer: Value) -> Value {
    if let Some(o) = answer.as_object_mut() {
        o.remove("receipt");
    }
    let as_of = answer
        .as_object_mut()
        .and_then(|o| o.remove("as_of"))
        .and_then(|t| Timestamp::parse(t.as_str()?).ok())
        .map(|t| t.unix_seconds());
    if let Some(as_of) = as_of {
        rebase_ages(&mut answer, as_of);
    }
    answer
}

fn rebase_ages(value: &mut Value, as_of: i64) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                match inner.as_i64() {
                    Some(age) if key == "age_seconds" => *inner = json!(age - as_of),
                    _ => rebase_ages(inner, as_of),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rebase_ages(v, as_of)),
        _ => {}
    }
}

/// The path form and the query form answer 200 with the same body (but the clock); the body.
async fn assert_same_answer(base: &str, path_form: &str, query_form: &str) -> Value {
    let (path_status, by_path) = get(format!("{base}{path_form}"), Some(READER)).await;
    let (query_status, by_query) = get(format!("{base}{query_form}"), Some(READER)).await;
    assert_eq!(
        (path_status, query_status),
        (200, 200),
        "{by_path} / {by_query}"
    );
    let by_query = clockless(by_query);
    assert_eq!(clockless(by_path), by_query, "{path_form} vs {query_form}");
    by_query
}

#[tokio::test(flavor = "multi_thread")]
async fn the_query_forms_answer_as_the_path_forms_and_refuse_alike() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, Some(tokens_file(&env))).await;
    let connector = onboard_and_drop(&env, &stack).await;
    let base = stack.base_url();
    let offers_url = format!("{base}/v1/items/{ITEM}/offers");
    offer_of(&offers_url, READER, &connector)
        .await
        .unwrap_or_else(|| panic!("no offer of {connector} at {offers_url}"));

    let offers = assert_same_answer(
        &base,
        &format!("/v1/items/{ITEM}/offers"),
        "/v1/offers?item=LM358DR~reel~new",
    )
    .await;
    assert_eq!(offers["item"], ITEM, "{offers}");
    assert_eq!(offers["offers"][0]["connector"], connector.as_str());
    let history = assert_same_answer(
        &base,
        &format!("/v1/items/{ITEM}/observations"),
        "/v1/observations?item=LM358DR%7Ereel%7Enew",
    )
    .await;
    assert_eq!(history["item"], ITEM, "{history}");
    assert_eq!(history["observations"].as_array().map(Vec::len), Some(1));

    // The parameters of the path forms, in any order, the tildes escaped either way.
    let quoted = assert_same_answer(
        &base,
        &format!("/v1/items/{ITEM}/offers?quantity=2500"),
        "/v1/offers?item=LM358DR%7ereel%7Enew&quantity=2500",
    )
    .await;
    assert_eq!(quoted["quantity"], "2500", "{quoted}");
    let quote = &quoted["offers"][0]["quote"];
    assert_eq!(
        (&quote["orderable"], &quote["unit_price"]),
        (&json!(true), &json!("0.398")),
        "{quoted}"
    );
    let stale = assert_same_answer(
        &base,
        &format!("/v1/items/{ITEM}/offers?max_age_seconds=60"),
        "/v1/offers?max_age_seconds=60&item=LM358DR~reel~new",
    )
    .await;
    assert_eq!(stale["freshness_gaps"].as_array().map(Vec::len), Some(1));
    assert_same_answer(
        &base,
        &format!("/v1/items/{ITEM}/observations?limit=1"),
        "/v1/observations?limit=1&item=%4C%4D358DR~reel~new",
    )
    .await;
    // A bare part number (`each` / `new`: no offer of that variant).
    let bare =
        assert_same_answer(&base, "/v1/items/LM358DR/offers", "/v1/offers?item=LM358DR").await;
    assert_eq!(bare["offers"], json!([]), "{bare}");

    decoded_once(&env, &base).await;
    refusals(&base).await;
    stack.stop().await;
}

/// Items no path segment can carry: the query form answers (status and body) what the query
/// function's handler answers for the value decoded once, whatever item keys accept.
async fn decoded_once(env: &TestEnv, base: &str) {
    let principal = Principal {
        tenant: TenantId::parse("demo").unwrap(),
        scopes: vec!["offers:read".into()],
        subject: None,
    };
    let service = env.query();
    for (sent, decoded) in [
        ("LM358DR%2FNOPB~reel~new", "LM358DR/NOPB~reel~new"),
        ("LM358DR/NOPB%7Ereel%7Enew", "LM358DR/NOPB~reel~new"),
        ("LM358DR%2525", "LM358DR%25"),
        ("100%25~each~new", "100%~each~new"),
        ("AX%2B440+R2", "AX+440 R2"),
        ("AX%2C440%3F%23", "AX,440?#"),
        ("caf%C3%A9%F0%9F%94%A9", "café🔩"),
    ] {
        for route in ["/v1/offers", "/v1/observations"] {
            let (status, body) = get(format!("{base}{route}?item={sent}"), Some(READER)).await;
            let request = read_request(&principal, route, &[("item", decoded)]);
            let expected = handle_read(&service, request, Timestamp::now()).await;
            let expected_body: Value = serde_json::from_str(&expected.body).unwrap();
            assert_eq!(
                (status, clockless(body)),
                (expected.status, clockless(expected_body)),
                "{route}?item={sent} is {decoded:?}"
            );
        }
    }
}

/// What the path forms refuse, the query forms refuse alike; and an absent or empty item.
async fn refusals(base: &str) {
    let pairs = [
        (
            format!("/v1/items/{ITEM}/offers"),
            "/v1/offers?item=LM358DR~reel~new",
        ),
        (
            format!("/v1/items/{ITEM}/observations"),
            "/v1/observations?item=LM358DR%7Ereel%7Enew",
        ),
        (
            format!("/v1/items/{ITEM}/offers?quantity=-5"),
            "/v1/offers?item=LM358DR~reel~new&quantity=-5",
        ),
        (
            format!("/v1/items/{ITEM}/observations?limit=0"),
            "/v1/observations?item=LM358DR~reel~new&limit=0",
        ),
    ];
    for (path_form, query_form) in &pairs {
        for token in [None, Some(OPS_ONLY), Some("not-a-token"), Some(READER)] {
            let (path_status, by_path) = get(format!("{base}{path_form}"), token).await;
            let (query_status, by_query) = get(format!("{base}{query_form}"), token).await;
            assert_eq!(
                path_status, query_status,
                "{query_form} with {token:?}: {by_query}"
            );
            let expected = match token {
                None | Some("not-a-token") => Some((401, "unauthorized")),
                Some(OPS_ONLY) => Some((403, "forbidden")),
                _ => None,
            };
            if let Some((status, code)) = expected {
                assert_eq!(
                    (query_status, &by_query["error"]["code"]),
                    (status, &json!(code))
                );
            }
            assert_eq!(
                clockless(by_path),
                clockless(by_query),
                "{query_form} with {token:?}"
            );
        }
    }
    for query_form in [
        "/v1/offers",
        "/v1/offers?item=",
        "/v1/offers?quantity=2500",
        "/v1/observations",
        "/v1/observations?item&limit=5",
    ] {
        let (status, refused) = get(format!("{base}{query_form}"), Some(READER)).await;
        assert_eq!(status, 400, "{query_form}: {refused}");
        assert_eq!(refused["error"]["code"], "invalid_request", "{refused}");
        assert_eq!(
            refused["error"]["message"],
            "item is required (the canonical item key or a part number, percent-encoded in \
             the query string)"
        );
    }
    let (status, refused) = get(format!("{base}/v1/offers?item=A&item=B"), Some(READER)).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("invalid_request"))
    );
}
