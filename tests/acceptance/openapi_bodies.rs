//! `docs/openapi.yaml` against the bodies the code sends (`tests/support/openapi.rs`): the
//! document's own examples hold under the closed contract, the check refuses what the document
//! does not say, and a handful of representative routes of the local stack answer as documented.
//! Every other test that calls a route through the support helpers is checked the same way.

use acceptance::openapi::{check_documented_examples, check_exchange, validated_bodies, Exchange};
use acceptance::*;
use serde_json::{json, Value};

#[test]
fn openapi_validates_every_documented_example() {
    let (checked, failures) = check_documented_examples();
    assert!(checked >= 5, "only {checked} examples found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn refusal(exchange: Exchange<'_>) -> String {
    let panic = std::panic::catch_unwind(|| check_exchange(&exchange))
        .expect_err("the check lets an undocumented exchange through");
    panic.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn an_undocumented_field_status_or_route_fails_the_check() {
    let not_found = Exchange {
        method: "GET",
        target: "http://127.0.0.1:1/v1/runs/r-1?x=1",
        request: None,
        status: 404,
        content_type: Some("application/json"),
        body: r#"{"error": {"code": "not_found", "message": "no such run"}}"#,
    };
    check_exchange(&not_found);

    let extra = refusal(Exchange {
        body: r#"{"error": {"code": "not_found", "message": "m", "detail": 1}}"#,
        ..not_found
    });
    assert!(
        extra.contains("GET http://127.0.0.1:1/v1/runs/r-1?x=1 -> 404")
            && extra.contains("\"/error\"")
            && extra.contains("detail"),
        "{extra}"
    );
    let status = refusal(Exchange {
        status: 418,
        ..not_found
    });
    assert!(status.contains("status 418 is not documented"), "{status}");
    let code = refusal(Exchange {
        body: r#"{"error": {"code": "no_such_code", "message": "m"}}"#,
        ..not_found
    });
    assert!(code.contains("\"/error/code\""), "{code}");
    let route = refusal(Exchange {
        target: "/v1/nowhere",
        status: 200,
        body: "{}",
        ..not_found
    });
    assert!(route.contains("no documented operation"), "{route}");
    // A delivery key spans segments; `/artifact` picks the artifact route, not the delivery.
    let link = refusal(Exchange {
        target: "/v1/deliveries/demo/acme-eu/ACC-1/EXP-1/2/artifact",
        status: 200,
        body: r#"{"delivery_key": "demo/acme-eu/ACC-1/EXP-1/2", "quarantine": []}"#,
        ..not_found
    });
    assert!(link.contains("artifact_key"), "{link}");
}

fn cloud_event(id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": id, "source": "urn:acme:events", "type": "offer.snapshot",
        "time": "2026-11-29T08:00:00Z",
        "data": {"offers": [{"sku": "OA-1", "quantity": 3, "unit": "each", "price": "9.50", "currency": "EUR"}]}
    }))
    .expect("a JSON event")
}

/// A signed `POST /v1/webhooks/acme-events` of one event (checked by `intake::call`).
async fn post_event(base: &str, id: &str) -> Value {
    let body = cloud_event(id);
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    let (status, answer) = crate::intake::call(
        "POST",
        format!("{base}/v1/webhooks/acme-events"),
        crate::intake::signed_headers(crate::intake::SECRET, id, now, &body),
        body,
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread")]
async fn representative_routes_answer_as_documented() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let before = validated_bodies();
    let key = post_event(&base, "oa-evt-1").await["delivery_key"]
        .as_str()
        .expect("a delivery key")
        .to_owned();
    let offers = format!("{base}/v1/items/OA-1/offers?max_age_seconds=60");
    wait_until("the event's offer", || {
        let url = offers.clone();
        async move {
            let (_, body) = call("GET", url, Some(LOCAL_READER), Value::Null).await;
            body["offers"].as_array().is_some_and(|o| o.len() == 1)
        }
    })
    .await;
    let (_, history) = call(
        "GET",
        format!("{base}/v1/items/OA-1/observations?limit=1"),
        Some(LOCAL_READER),
        Value::Null,
    )
    .await;
    let id = history["observations"][0]["observation_id"]
        .as_str()
        .expect("an observation")
        .to_owned();
    let reads = [
        format!("/v1/observations/{id}"),
        "/v1/items/OA-1/offers?max_age_seconds=x".into(),
    ];
    let ops = [
        format!("/v1/deliveries/{key}"),
        format!("/v1/deliveries/{key}/artifact"),
        format!("/v1/observations/{id}/artifact"),
        "/v1/quarantine?status=all".into(),
        "/v1/connectors".into(),
        "/v1/items/OA-1/timeline".into(),
        "/v1/source-quarantines/acme-events".into(),
        "/v1/runs/no-such-run".into(),
        "/v1/no-such-route".into(),
    ];
    for (token, path) in reads
        .iter()
        .map(|p| (LOCAL_READER, p))
        .chain(ops.iter().map(|p| (LOCAL_OPERATOR, p)))
    {
        let (status, body) = call("GET", format!("{base}{path}"), Some(token), Value::Null).await;
        assert!(status < 500, "{path}: {status} {body}");
    }
    let (status, body) = call(
        "POST",
        format!("{base}/v1/source-quarantines"),
        Some(LOCAL_OPERATOR),
        json!({"connector": "acme-events", "reason": "contract check"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Each exchange above validated its response (and the accepted requests their bodies).
    assert!(
        validated_bodies() - before >= 16,
        "{} bodies",
        validated_bodies() - before
    );
}
