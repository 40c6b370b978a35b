//! The fidelity of the local stack: its HTTP server against the deployed entry points, and a
//! graceful stop that saves what waits in the queues.

use super::{call, cloud_event, signed_headers, OPERATOR, READER, SECRET};
use acceptance::*;
use serde_json::{json, Value};
use std::time::Duration;

/// Removes what depends on the moment of the request (`as_of`, ages, the receipt), recursively.
fn timeless(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("as_of");
            map.remove("age_seconds");
            // A receipt digests its answer's instant.
            map.remove("receipt");
            for v in map.values_mut() {
                *v = timeless(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = timeless(v.take());
            }
        }
        _ => {}
    }
    value
}

/// What the local server answers is what the deployed entry points answer. Every
/// request that matches a route of the template reaches its function as the API Gateway event
/// (recorded by the stack); fed again straight to that function's `handle_apigw_*`, each
/// recorded event gets the answer the HTTP client got. A path no route matches gets API
/// Gateway's own 404 and reaches no function.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_servers_requests_reach_the_functions_as_api_gateway_events() {
    let env = spawn_env(true).await;
    let recorded = std::env::temp_dir().join(format!(
        "feedsafe-apigw-{}-{}",
        std::process::id(),
        feedsafe::domain::timestamp::Timestamp::now().unix_millis()
    ));
    let stack = spawn_stack_with(&env, |o| o.record_events = Some(recorded.clone())).await;
    let base = stack.base_url();
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    let reader = vec![("authorization".to_owned(), format!("Bearer {READER}"))];
    let operator = vec![("authorization".to_owned(), format!("Bearer {OPERATOR}"))];
    // Each answer, and whether the state it saw is still the state (polls taken before the
    // offer was projected are not: replayed now, they would see it).
    let mut answers: Vec<(u16, Value, bool)> = Vec::new();

    let body = cloud_event("evt-apigw", 3);
    let accepted = call(
        "POST",
        format!("{base}/v1/webhooks/acme-events"),
        signed_headers(SECRET, "msg-apigw", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(accepted.0, 202, "{}", accepted.1);
    let key = accepted.1["delivery_key"].as_str().unwrap().to_owned();
    answers.push((accepted.0, accepted.1, true));
    let offers = format!("{base}/v1/items/EV-1/offers?max_age_seconds=60");
    let offers_seen = loop {
        let answer = call("GET", offers.clone(), reader.clone(), vec![]).await;
        let projected = answer.1["offers"].as_array().is_some_and(|o| !o.is_empty());
        answers.push((answer.0, answer.1.clone(), projected));
        if projected {
            break answer;
        }
        assert!(
            answers.len() < 200,
            "the webhook's offer never became readable"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(offers_seen.1["offers"][0]["quantity"], 3);
    let encoded_key = key.replace('/', "%2F").replace(':', "%3A");
    for (url, headers, status) in [
        (
            format!("{base}/v1/items/EV-1/observations"),
            reader.clone(),
            200,
        ),
        (format!("{base}/v1/deliveries/{key}"), operator.clone(), 200),
        (
            format!("{base}/v1/deliveries/{encoded_key}"),
            operator.clone(),
            200,
        ),
        (format!("{base}/v1/quarantine"), operator.clone(), 200),
        // The function refuses these (in AWS the JWT authorizer would, with the same status).
        (format!("{base}/v1/quarantine"), reader.clone(), 403),
        (format!("{base}/v1/items/EV-1/offers"), vec![], 401),
        (
            format!("{base}/v1/items/NO-SUCH/offers"),
            reader.clone(),
            200,
        ),
    ] {
        let answer = call("GET", url.clone(), headers, vec![]).await;
        assert_eq!(answer.0, status, "{url}: {}", answer.1);
        answers.push((answer.0, answer.1, true));
    }
    let (status, body) = call(
        "GET",
        format!("{base}/v1/nothing/here"),
        reader.clone(),
        vec![],
    )
    .await;
    assert_eq!(
        (status, body),
        (404, json!({"message": "Not Found"})),
        "no route: API Gateway's own answer"
    );

    // One recorded event per routed request, in order, each answered the same way again by the
    // function's own entry point.
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&recorded)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), answers.len(), "{files:?}");
    let services = &stack.services;
    // The webhook's event last: fed again, it is one more delivery attempt, which the
    // delivery's record read before it would not show.
    let mut replays: Vec<_> = files.iter().zip(&answers).collect();
    replays.sort_by_key(|(file, _)| file.to_string_lossy().ends_with("-WebhookFunction.json"));
    for (file, (status, body, settled)) in replays {
        let text = std::fs::read_to_string(file).unwrap();
        let event: aws_lambda_events::event::apigw::ApiGatewayV2httpRequest =
            serde_json::from_str(&text).unwrap();
        assert!(
            !text.contains(READER) && !text.contains(OPERATOR),
            "a recorded event holds a token: {}",
            file.display()
        );
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let response = if name.ends_with("-QueryFunction.json") {
            feedsafe::lambda::apigw::handle_apigw_read(&services.query, event).await
        } else if name.ends_with("-OpsFunction.json") {
            feedsafe::lambda::apigw::handle_apigw_ops(&services.ops, event).await
        } else if name.ends_with("-WebhookFunction.json") {
            feedsafe::lambda::apigw::handle_apigw_webhook(&services.webhook, event).await
        } else {
            panic!("{name}: no such function");
        };
        let replayed = local_stack::apigw::http_response(response);
        let replayed_body: Value = serde_json::from_slice(&replayed.body).unwrap();
        assert_eq!(replayed.status, *status, "{name}");
        if !settled {
            continue;
        }
        if !name.ends_with("-WebhookFunction.json") {
            assert_eq!(timeless(replayed_body), timeless(body.clone()), "{name}");
        } else {
            // The same webhook again: accepted again, under the same delivery key.
            assert_eq!(
                replayed_body["delivery_key"], body["delivery_key"],
                "{name}"
            );
        }
    }
    println!(
        "{} requests through the local API Gateway, each answered alike by its function's entry point",
        files.len()
    );
    std::fs::remove_dir_all(&recorded).ok();
    stack.stop().await;
}

/// A graceful stop closes the intake first, lets the queue drain and the projector
/// catch up, saves what waits in the queues (a dead letter here) beside the data, and the next
/// start sends it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_stop_closes_the_intake_drains_the_queue_and_saves_dead_letters_for_the_next_start(
) {
    let env = spawn_env(false).await;
    let data = std::env::temp_dir().join(format!("feedsafe-drain-{}", env.bucket));
    let _ = std::fs::remove_dir_all(&data);
    let stack = spawn_stack_with(&env, |o| {
        o.data_dir = Some(data.clone());
        o.visibility_override = Some(30);
    })
    .await;
    let base = stack.base_url();
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    for n in 0..40 {
        let body = serde_json::to_vec(&json!({
            "specversion": "1.0", "id": format!("drain-{n}"), "source": "urn:acme:events", "type": "offer.snapshot",
            "time": "2026-11-29T08:00:00Z",
            "data": {"offers": [{"sku": format!("DR-{n}"), "quantity": n + 1, "unit": "each", "price": "1.00", "currency": "EUR"}]}
        }))
        .unwrap();
        let headers = signed_headers(SECRET, &format!("msg-drain-{n}"), now, &body);
        let answer = call(
            "POST",
            format!("{base}/v1/webhooks/acme-events"),
            headers,
            body,
        )
        .await;
        assert_eq!(answer.0, 202, "{}", answer.1);
    }
    env.send("IngestDLQ", br#"{"a":"dead letter"}"#).await;

    let drained = stack.drain(Duration::from_secs(60)).await.unwrap();
    assert_eq!(drained, local_stack::Drained::Clean { saved_messages: 1 });
    // The intake is closed: nothing listens any more.
    let address = base.trim_start_matches("http://").to_owned();
    assert!(std::net::TcpStream::connect(&address).is_err());
    // Every acknowledged webhook was ingested before the stop returned, and projected.
    assert_eq!(env.queue_depth("IngestQueue").await, (0, 0));
    assert_eq!(
        env.queue_depth("IngestDLQ").await,
        (0, 0),
        "saved and removed"
    );
    let query = env.query();
    let reader = feedsafe::protocols::query::Principal {
        tenant: feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
        scopes: vec!["offers:read".into()],
        subject: None,
    };
    for n in 0..40u64 {
        let key = format!("demo/acme-events/ACME-EVT/urn:acme:events/drain-{n}");
        assert_eq!(env.observations_of(&key).await.len(), 1, "{key}");
        let offers = query
            .offers(
                &reader,
                &format!("DR-{n}"),
                None,
                feedsafe::domain::timestamp::Timestamp::now(),
            )
            .await
            .unwrap();
        let offers = serde_json::to_value(offers).unwrap();
        assert_eq!(offers["offers"][0]["quantity"], n + 1, "DR-{n}: {offers}");
    }
    let saved = std::fs::read_dir(data.join("queues")).unwrap().count();
    assert_eq!(saved, 1, "one file: the dead-letter queue's");

    // The next start sends the saved dead letter again and removes the file.
    let stack = spawn_stack_with(&env, |o| o.data_dir = Some(data.clone())).await;
    assert_eq!(env.queue_depth("IngestDLQ").await.0, 1);
    assert_eq!(std::fs::read_dir(data.join("queues")).unwrap().count(), 0);
    stack.stop().await;
    let _ = std::fs::remove_dir_all(&data);
}
