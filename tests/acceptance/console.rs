//! The operator console's server side (docs/console.md) through the running local stack (routes
//! from `template.yaml`, the ops function's entry point): the page and its assets without a token
//! and with a strict Content-Security-Policy, and the two views that read the projection, the
//! connectors (freshness, open quarantines, source quarantine) and an item's timeline (current
//! offers marked, retrieval lag, the claims of quarantined payloads), scoped to the operator's
//! tenant and changing nothing. The page itself, in Chromium: `tests/console/browser_test.py`.

use crate::read_path::Stored;
use acceptance::*;
use feedsafe::ops::console::CONTENT_SECURITY_POLICY;
use local_stack::{sample_connectors, Stack};
use serde_json::{json, Value};

const READER: &str = LOCAL_READER;
const OPERATOR: &str = LOCAL_OPERATOR;
const OTHER_OPERATOR: &str = "console-test-other-tenant-operator";
const PAGE2: &str = "demo/acme-eu/ACC-1/EXP-8821/2";

async fn stack(env: &TestEnv) -> Stack {
    spawn_stack_with_other_tenant(env, OTHER_OPERATOR).await
}

/// `GET url` without a token: status, content type, Content-Security-Policy and body.
async fn page(url: String) -> (u16, String, String, String) {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.get(&url).call().expect("the stack answers");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let (kind, policy) = (header("content-type"), header("content-security-policy"));
        let body = response.body_mut().read_to_string().unwrap_or_default();
        (response.status().as_u16(), kind, policy, body)
    })
    .await
    .unwrap()
}

async fn get(url: String, token: &str) -> Value {
    let (status, body) = call("GET", url, Some(token), Value::Null).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn connector<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["connectors"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["connector"] == id))
        .unwrap_or_else(|| panic!("no connector {id} in {list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_and_its_views_show_freshness_and_every_claim_and_change_nothing() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let base = stack.base_url();

    // The page and its assets: no token, the policy on each, nothing else under /console.
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let (status, content_type, policy, body) = page(format!("{base}{path}")).await;
        assert_eq!(status, 200, "{path}");
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        assert_eq!(policy, CONTENT_SECURITY_POLICY, "{path}");
        assert!(!body.is_empty());
    }
    let (status, _, _, body) = page(format!("{base}/console/secrets.json")).await;
    assert_eq!(status, 404, "{body}");

    // The essay: page 2 of EXP-8821 says quantity 6 at 08:00Z; then it comes back saying 5.
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();
    let at = "2026-11-29T08:00:00Z";
    let pages = |quantity: i64| {
        vec![
            vec![offer("AX-100", 1, "1.00", at)],
            vec![offer("AX-440-R2", quantity, "820.00", at)],
            vec![offer("AX-300", 3, "3.00", at)],
        ]
    };
    stack.supplier.set_export("acme-eu", "EXP-8821", pages(6));
    let (status, report) = call(
        "POST",
        format!("{base}/v1/connectors/acme-eu/runs"),
        Some(OPERATOR),
        Value::Null,
    )
    .await;
    assert_eq!(status, 202, "{report}");
    let offers_url = format!("{base}/v1/items/AX-440-R2/offers");
    wait_until("quantity 6 to be current", || async {
        let (_, body) = call("GET", offers_url.clone(), Some(READER), Value::Null).await;
        body["offers"][0]["quantity"] == 6
    })
    .await;
    let changed = pages(5).swap_remove(1);
    env.send(
        "IngestQueue",
        &plain_envelope(&acme, "EXP-8821/2", &export_page("EXP-8821", 2, 3, changed)),
    )
    .await;
    let quarantine_url = format!("{base}/v1/quarantine");
    wait_until("the changed page to be quarantined", || async {
        let (_, body) = call("GET", quarantine_url.clone(), Some(OPERATOR), Value::Null).await;
        body["entries"].as_array().is_some_and(|e| e.len() == 1)
    })
    .await;
    // The stack finishes the run's bookkeeping in the background: compare against a quiet state.
    let before = Stored::settled(&env).await;

    // Connectors: kind, freshness from the current offers, the open entry, no quarantine.
    let connectors_url = format!("{base}/v1/connectors");
    let list = get(connectors_url.clone(), OPERATOR).await;
    let acme_eu = connector(&list, "acme-eu");
    assert_eq!(acme_eu["kind"], "pull");
    assert_eq!(acme_eu["source_account"], "ACC-1");
    assert_eq!(acme_eu["open_quarantines"], 1, "{acme_eu}");
    assert_eq!(acme_eu["source_quarantine"]["active"], false);
    let freshness = &acme_eu["freshness"];
    assert_eq!(freshness["items"], 3, "{freshness}");
    assert_eq!(freshness["newest_observed_at"], at);
    let age = freshness["age_seconds"].as_i64().expect("an age");
    let expected_age = feedsafe::domain::timestamp::Timestamp::now()
        .seconds_since(feedsafe::domain::timestamp::Timestamp::parse(at).unwrap());
    assert!(
        (expected_age - 60..=expected_age).contains(&age),
        "age {age}"
    );
    assert!(
        freshness["last_delivery"]["delivery_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("demo/acme-eu/ACC-1/EXP-8821/")),
        "{freshness}"
    );
    assert_eq!(
        connector(&list, "acme-events")["kind"],
        "push",
        "every seeded connector is listed"
    );

    // The timeline: the stored claim current, its lag, and what the quarantined page claimed.
    let timeline_url = format!("{base}/v1/items/AX-440-R2/timeline");
    let timeline = get(timeline_url.clone(), OPERATOR).await;
    assert_eq!(timeline["item"], "AX-440-R2~each~new");
    assert_eq!(timeline["truncated"], false);
    let claims = timeline["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{timeline}");
    let claim = &claims[0];
    assert_eq!(
        (claim["quantity"].clone(), claim["current"].clone()),
        (json!(6), json!(true))
    );
    let lag = |c: &Value| {
        let t = |f: &str| {
            feedsafe::domain::timestamp::Timestamp::parse(c[f].as_str().unwrap()).unwrap()
        };
        t("retrieved_at").seconds_since(t("observed_at"))
    };
    assert_eq!(claim["retrieval_lag_seconds"], lag(claim));
    let quarantined = timeline["quarantined"].as_array().unwrap();
    assert_eq!(quarantined.len(), 1, "{timeline}");
    assert_eq!(quarantined[0]["readable"], true);
    assert_eq!(quarantined[0]["quantity"], 5);
    assert_eq!(quarantined[0]["observed_at"], at);
    assert_eq!(quarantined[0]["delivery_key"], PAGE2);
    assert_eq!(quarantined[0]["status"], "open");
    assert_eq!(
        quarantined[0]["read_under"],
        json!({"normalizer": feedsafe::domain::normalize::NORMALIZER_VERSION}),
        "read now under today's normalizer; acme-eu was configured before definitions"
    );

    // Scope and tenant: a reader is refused; another tenant's operator sees none of it.
    for url in [&connectors_url, &timeline_url] {
        let (status, body) = call("GET", url.clone(), Some(READER), Value::Null).await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (403, json!("forbidden")),
            "{url}"
        );
        let (status, _) = call("GET", url.clone(), None, Value::Null).await;
        assert_eq!(status, 401, "{url}");
    }
    let other = get(connectors_url.clone(), OTHER_OPERATOR).await;
    assert_eq!(other["connectors"], json!([]), "{other}");
    let other = get(timeline_url.clone(), OTHER_OPERATOR).await;
    assert_eq!(
        (other["claims"].clone(), other["quarantined"].clone()),
        (json!([]), json!([]))
    );

    // Looking changes nothing: the views twenty times each, every item, queue and object as before.
    for _ in 0..20 {
        get(connectors_url.clone(), OPERATOR).await;
        get(timeline_url.clone(), OPERATOR).await;
    }
    Stored::of(&env).await.assert_unchanged_since(&before);

    // A quarantined payload that can no longer be read says so, with no value guessed.
    let (_, listed) = call("GET", quarantine_url, Some(OPERATOR), Value::Null).await;
    let evidence_key = listed["entries"][0]["evidence_key"]
        .as_str()
        .unwrap()
        .to_owned();
    env.clients
        .s3
        .delete_object()
        .bucket(&env.bucket)
        .key(&evidence_key)
        .send()
        .await
        .unwrap();
    let timeline = get(timeline_url.clone(), OPERATOR).await;
    let refused = &timeline["quarantined"][0];
    assert_eq!(refused["readable"], false, "{refused}");
    assert!(refused.get("quantity").is_none(), "{refused}");
    assert_eq!(
        refused["reason"],
        format!("artifact {evidence_key} is missing"),
        "{refused}"
    );

    // A source quarantine shows in both views at once.
    let (status, body) = call(
        "POST",
        format!("{base}/v1/source-quarantines"),
        Some(OPERATOR),
        json!({"connector": "acme-eu", "reason": "console test"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let list = get(connectors_url, OPERATOR).await;
    assert_eq!(
        connector(&list, "acme-eu")["source_quarantine"]["active"],
        true
    );
    let timeline = get(timeline_url, OPERATOR).await;
    let claim = &timeline["claims"][0];
    assert_eq!(claim["current"], false, "{claim}");
    assert_eq!(claim["current_eligibility"], "source_quarantined");
    stack.stop().await;
}
