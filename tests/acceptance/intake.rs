//! Intake through the running local stack: signed webhooks, pull runs against the fake supplier,
//! file drops, and the fidelity of the local event sources.

use acceptance::*;
use feedsafe::intake::drops::DroppedObject;
use feedsafe::intake::webhook::{sign, SigningSecret};
use local_stack::{sample_connectors, Stack};
use serde_json::{json, Value};
use std::time::Duration;

pub(crate) const READER: &str = "local-reader-demo-token";
pub(crate) const OPERATOR: &str = "local-operator-demo-token";
pub(crate) const SECRET: &str = "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1ub3QtZm9yLXByb2R1Y3Rpb24=";
const ROTATED: &str = "whsec_bG9jYWwtcm90YXRlZC1zZWNyZXQtbm90LWZvci1wcm9kdWN0aW9u";

async fn stack(env: &TestEnv) -> Stack {
    spawn_stack(env, None).await
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// (status, JSON body) of a request, run off the async runtime.
pub(crate) async fn call(
    method: &'static str,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
) -> (u16, Value) {
    tokio::task::spawn_blocking(move || {
        let agent = agent();
        let mut response = if method == "GET" {
            let mut request = agent.get(&url);
            for (k, v) in &headers {
                request = request.header(k, v);
            }
            request.call()
        } else {
            let mut request = agent.post(&url);
            for (k, v) in &headers {
                request = request.header(k, v);
            }
            request.send(&body[..])
        }
        .expect("request sent");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    })
    .await
    .unwrap()
}

fn cloud_event(id: &str, quantity: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": id, "source": "urn:acme:events", "type": "offer.snapshot",
        "time": "2026-11-29T08:00:00Z",
        "data": {"offers": [{"sku": "EV-1", "quantity": quantity, "unit": "each", "price": "12.00", "currency": "EUR"}]}
    }))
    .unwrap()
}

pub(crate) fn signed_headers(
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    let secret = SigningSecret::parse(secret).unwrap();
    vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-id".into(), id.into()),
        ("webhook-timestamp".into(), timestamp.to_string()),
        (
            "webhook-signature".into(),
            sign(&secret, id, timestamp, body),
        ),
    ]
}

async fn history(stack: &Stack, item: &str) -> Vec<Value> {
    let (_, body) = call(
        "GET",
        format!("{}/v1/items/{item}/observations", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    body["observations"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_webhooks_are_accepted_verified_and_deduplicated() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let url = format!("{}/v1/webhooks/acme-events", stack.base_url());
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();

    // Valid signature -> 202, then a committed observation readable through the query route.
    let body = cloud_event("evt-1", 6);
    let (status, accepted) = call(
        "POST",
        url.clone(),
        signed_headers(SECRET, "msg-1", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], "accepted");
    let key = accepted["delivery_key"].as_str().unwrap().to_owned();
    assert_eq!(key, "demo/acme-events/ACME-EVT/urn:acme:events/evt-1");
    let offers_url = format!("{}/v1/items/EV-1/offers", stack.base_url());
    wait_until("the webhook's observation to be readable", || {
        let url = offers_url.clone();
        async move {
            let (_, body) = call(
                "GET",
                url,
                vec![("authorization".into(), format!("Bearer {READER}"))],
                vec![],
            )
            .await;
            body["offers"]
                .as_array()
                .is_some_and(|o| o.len() == 1 && o[0]["quantity"] == 6)
        }
    })
    .await;

    // The same event delivered twice more (supplier retries, new webhook-ids) -> one set.
    for attempt in 2..=3 {
        let (status, again) = call(
            "POST",
            url.clone(),
            signed_headers(SECRET, &format!("msg-1-retry-{attempt}"), now, &body),
            body.clone(),
        )
        .await;
        assert_eq!(status, 202);
        assert_eq!(again["delivery_key"], key.as_str());
    }
    wait_until("both retries to be replayed", || {
        let store = env.store.clone();
        let key = key.clone();
        async move {
            store
                .replay_record(&key)
                .await
                .unwrap()
                .is_some_and(|r| r.attempts == 3)
        }
    })
    .await;
    assert_eq!(
        history(&stack, "EV-1").await.len(),
        1,
        "one observation set"
    );

    // Rotation: the old and the new secret are both accepted.
    let rotated = cloud_event("evt-2", 2);
    let (status, _) = call(
        "POST",
        url.clone(),
        signed_headers(ROTATED, "msg-2", now, &rotated),
        rotated,
    )
    .await;
    assert_eq!(status, 202);

    // Refusals with stable codes.
    let (status, err) = call(
        "POST",
        url.clone(),
        signed_headers("whsec_d3Jvbmcta2V5", "msg-3", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("invalid_signature"))
    );
    let (status, err) = call(
        "POST",
        url.clone(),
        signed_headers(SECRET, "msg-4", now - 360, &body),
        body.clone(),
    )
    .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("stale_timestamp"))
    );
    let big = vec![b' '; 1_100_000];
    let (status, err) = call(
        "POST",
        url.clone(),
        signed_headers(SECRET, "msg-5", now, &big),
        big,
    )
    .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    let (status, err) = call(
        "POST",
        format!("{}/v1/webhooks/nobody", stack.base_url()),
        signed_headers(SECRET, "msg-6", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("unknown_connector"))
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cloudevents_whose_source_and_id_split_differently_are_two_deliveries() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let url = format!("{}/v1/webhooks/acme-events", stack.base_url());
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    // `{source}/{id}` made one key of these two events, so the second was refused as a
    // changed payload under the first one's key.
    let events = [("/x", "y/z", 4), ("/x/y", "z", 5)];
    let mut keys = Vec::new();
    for (n, (source, id, quantity)) in events.into_iter().enumerate() {
        let body = serde_json::to_vec(&json!({
            "specversion": "1.0", "id": id, "source": source, "type": "offer.snapshot",
            "time": "2026-11-29T08:00:00Z",
            "data": {"offers": [{"sku": "SPLIT-1", "quantity": quantity, "unit": "each", "price": "12.00", "currency": "EUR"}]}
        }))
        .unwrap();
        let (status, accepted) = call(
            "POST",
            url.clone(),
            signed_headers(SECRET, &format!("msg-split-{n}"), now, &body),
            body,
        )
        .await;
        assert_eq!(status, 202, "{accepted}");
        keys.push(accepted["delivery_key"].as_str().unwrap().to_owned());
    }
    assert_ne!(keys[0], keys[1], "two events, two delivery keys");
    assert_eq!(keys[0], "demo/acme-events/ACME-EVT//x/y%2Fz");
    assert_eq!(keys[1], "demo/acme-events/ACME-EVT//x/y/z");
    for key in &keys {
        wait_until("each event's delivery to commit", || {
            let store = env.store.clone();
            let key = key.clone();
            async move {
                store
                    .replay_record(&key)
                    .await
                    .unwrap()
                    .is_some_and(|r| r.state == feedsafe::domain::model::ReplayState::Committed)
            }
        })
        .await;
    }
    let mut seen: Vec<String> = history(&stack, "SPLIT-1")
        .await
        .iter()
        .map(|o| o["delivery_key"].as_str().unwrap_or_default().to_owned())
        .collect();
    seen.sort();
    keys.sort();
    assert_eq!(seen, keys, "one observation per event");
    assert!(env.quarantine().await.is_empty(), "nothing was quarantined");
    // Operators find each one; a key holding `%` travels percent-encoded like any path.
    for key in &keys {
        let (status, delivery) = call(
            "GET",
            format!(
                "{}/v1/deliveries/{}",
                stack.base_url(),
                key.replace('%', "%25")
            ),
            vec![("authorization".into(), format!("Bearer {OPERATOR}"))],
            vec![],
        )
        .await;
        assert_eq!(status, 200, "{delivery}");
        assert_eq!(delivery["delivery_key"], key.as_str(), "{delivery}");
    }
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_pull_run_after_a_lost_response_duplicates_nothing_and_a_failing_page_leaves_the_run_incomplete(
) {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let pages = vec![
        vec![
            json!({"sku": "PL-1", "quantity": 1, "unit": "each", "price": "1.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
        vec![
            json!({"sku": "PL-2", "quantity": 2, "unit": "each", "price": "2.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
        vec![
            json!({"sku": "PL-3", "quantity": 3, "unit": "each", "price": "3.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
    ];
    stack.supplier.set_export("acme-eu", "EXP-5000", pages);
    // The response for page 2 is lost (more often than the poller retries within one run).
    stack.supplier.lose_response("acme-eu", 2, 3);
    let runs = format!("{}/v1/connectors/acme-eu/runs", stack.base_url());
    let operator = vec![("authorization".to_owned(), format!("Bearer {OPERATOR}"))];
    // 202 at once: the run is named from page 1 and the pull runs asynchronously.
    let (status, first) = call("POST", runs.clone(), operator.clone(), vec![]).await;
    assert_eq!(status, 202, "{first}");
    assert_eq!(first["status"], "started", "{first}");
    assert_eq!(first["export_id"], "EXP-5000");
    assert_eq!(first["page_count"], 3);
    assert!(
        first.get("enqueued").is_none(),
        "not run inside the request: {first}"
    );
    let committed = |n: u32| {
        let store = env.store.clone();
        async move {
            store
                .replay_record(&format!("demo/acme-eu/ACC-1/EXP-5000/{n}"))
                .await
                .unwrap()
                .is_some()
        }
    };
    wait_until("the first pull to give up on page 2", || async {
        stack.supplier.requests("acme-eu", 2) >= 3 && committed(1).await && committed(3).await
    })
    .await;
    assert!(!committed(2).await, "page 2 lost in the first run");
    // The run is repeated.
    let (status, second) = call("POST", runs.clone(), operator.clone(), vec![]).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(
        second["run_id"], first["run_id"],
        "the same export resumes the same run"
    );
    wait_until("all three pages", || async {
        committed(1).await && committed(2).await && committed(3).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for sku in ["PL-1", "PL-2", "PL-3"] {
        assert_eq!(
            history(&stack, sku).await.len(),
            1,
            "{sku}: no duplicate observation"
        );
    }
    let run = env
        .store
        .run(first["run_id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(env
        .store
        .run_pages(first["run_id"].as_str().unwrap())
        .await
        .unwrap()
        .all_committed(run.page_count));

    // A page that keeps failing leaves its run INCOMPLETE with that page named.
    stack
        .supplier
        .set_export("acme-eu", "EXP-5001", vec![vec![], vec![], vec![]]);
    stack.supplier.fail_page("acme-eu", 3, u32::MAX);
    let (status, report) = call("POST", runs, operator, vec![]).await;
    assert_eq!(status, 202);
    let run_id = report["run_id"].as_str().unwrap().to_owned();
    wait_until("pages 1 and 2 of EXP-5001", || async {
        env.store.run_pages(&run_id).await.unwrap().pages.len() == 2
    })
    .await;
    let swept = env
        .store
        .sweep_runs(feedsafe::domain::timestamp::Timestamp::now().plus_seconds(3600))
        .await
        .unwrap();
    assert!(swept.iter().any(|r| r.run_id.as_str() == run_id));
    let run = env.store.run(&run_id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        Some(feedsafe::domain::model::RunStatus::Incomplete)
    );
    assert_eq!(run.missing_pages, vec![3]);
    // Reads never start ingestion; only the operator may.
    let (status, _) = call(
        "POST",
        format!("{}/v1/connectors/acme-eu/runs", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    assert_eq!(status, 403);
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_sqs_source_redelivers_only_failed_messages_and_dead_letters_after_max_receives()
{
    let env = spawn_env(true).await;
    // 3 s, not the usual 1 s: a batch slower than the visibility timeout (a loaded machine)
    // would see its good message again and count it twice, which the timeout of six function
    // timeouts in AWS rules out.
    let stack = spawn_stack_with(&env, |o| o.visibility_override = Some(3)).await;
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();
    let good = page_envelope(
        &acme,
        "EXP-G",
        1,
        1,
        &export_page(
            "EXP-G",
            1,
            1,
            vec![offer("GOOD-1", 1, "1.00", "2026-11-29T08:00:00Z")],
        ),
    );
    // A claim check pointing at an object that does not exist: a transient failure every time.
    let mut bad: feedsafe::domain::envelope::DeliveryEnvelope =
        serde_json::from_slice(&plain_envelope(&acme, "EXP-B/1", b"{}")).unwrap();
    bad.body = feedsafe::domain::envelope::BodyRef::S3 {
        bucket: env.bucket.clone(),
        key: "claims/missing".into(),
        version_id: None,
        size: 10,
    };
    env.send("IngestQueue", &good).await;
    env.send("IngestQueue", bad.to_json().as_bytes()).await;
    wait_until("the failing message to reach the DLQ", || async {
        env.queue_depth("IngestDLQ").await.0 == 1
    })
    .await;
    let record = env
        .replay("demo/acme-eu/ACC-1/EXP-G/1")
        .await
        .expect("the good message committed");
    assert_eq!(
        record.attempts, 1,
        "the acknowledged message was not redelivered"
    );
    let dlq = env.resources.queue("IngestDLQ").unwrap().url.clone();
    let dead = env
        .clients
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let message = dead.messages.unwrap_or_default().remove(0);
    assert!(message.body().unwrap().contains("EXP-B/1"));
    let receives: u32 = message
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        receives >= 5,
        "received {receives} times before dead-lettering (maxReceiveCount 5)"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_dropped_twice_with_one_version_is_one_delivery_and_a_new_version_is_another() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let csv = b"sku,quantity,unit,price,currency,observed_at\nFD-1,5,each,3.20,EUR,2026-11-29T08:00:00Z\n".to_vec();
    let put = |body: Vec<u8>| {
        let s3 = env.clients.s3.clone();
        let bucket = env.bucket.clone();
        async move {
            s3.put_object()
                .bucket(bucket)
                .key("drops/acme-files/prices.csv")
                .body(body.into())
                .send()
                .await
                .unwrap()
                .version_id
                .unwrap()
        }
    };
    let v1 = put(csv.clone()).await;
    let key_v1 = format!("demo/acme-files/ACC-FILES/prices.csv@{v1}");
    wait_until("the dropped file's delivery", || async {
        env.replay(&key_v1).await.is_some()
    })
    .await;
    // The same notification again (S3 delivers at least once): same identity, a replay.
    let object = DroppedObject {
        bucket: env.bucket.clone(),
        key: "drops/acme-files/prices.csv".into(),
        version_id: Some(v1.clone()),
        size: csv.len() as u64,
    };
    let again = stack.services.drops.handle(&object).await.unwrap();
    assert_eq!(again.as_string(), key_v1);
    wait_until("the second notification to replay", || async {
        env.replay(&key_v1).await.is_some_and(|r| r.attempts == 2)
    })
    .await;
    assert_eq!(history(&stack, "FD-1").await.len(), 1, "one delivery");

    // A new version of the file is a new delivery.
    let v2 = put(csv.clone()).await;
    assert_ne!(v1, v2);
    let key_v2 = format!("demo/acme-files/ACC-FILES/prices.csv@{v2}");
    wait_until("the new version's delivery", || async {
        env.replay(&key_v2).await.is_some()
    })
    .await;
    wait_until("two observations in history", || async {
        history(&stack, "FD-1").await.len() == 2
    })
    .await;

    // JSON files work too (an export page dropped for the pull connector).
    let page = export_page(
        "EXP-FILE",
        1,
        1,
        vec![offer("FD-2", 1, "1.00", "2026-11-29T08:00:00Z")],
    );
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key("drops/acme-eu/export-1.json")
        .body(page.into())
        .send()
        .await
        .unwrap();
    wait_until("the JSON drop", || async {
        history(&stack, "FD-2").await.len() == 1
    })
    .await;
    stack.stop().await;
}

/// Removes what depends on the moment of the request (`as_of`, ages), recursively.
fn timeless(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("as_of");
            map.remove("age_seconds");
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

/// Issue 10: what the local server answers is what the deployed entry points answer. Every
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

/// Issue 10: a graceful stop closes the intake first, lets the queue drain and the projector
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
