//! What would bite in a real AWS account — poison input that outgrows DynamoDB's item
//! limit, artifact links, credentials — checked through the running local stack.

use crate::intake::{call, signed_headers, OPERATOR, READER, SECRET};
use acceptance::*;
use serde_json::{json, Value};

/// A CloudEvent of the sample connector `acme-events` carrying one offer row.
fn offer_event(id: &str, sku: &str, price: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": id, "source": "urn:acme:events",
        "type": "offer.snapshot", "time": "2026-11-29T08:00:00Z",
        "data": {"offers": [{"sku": sku, "quantity": 1, "unit": "each",
                             "price": price, "currency": "EUR"}]}
    }))
    .unwrap()
}

/// `body` POSTed to the connector's webhook, signed with `secret` now: (status, JSON answer).
async fn post_signed(
    base: &str,
    connector: &str,
    secret: &str,
    id: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    call(
        "POST",
        format!("{base}/v1/webhooks/{connector}"),
        signed_headers(secret, id, now, &body),
        body,
    )
    .await
}

/// A signed webhook whose row carries a 500 KB price: the refusal names the field without
/// echoing it whole, so the quarantine entry fits DynamoDB's 400 KB item limit, the message is
/// acknowledged (not retried into the DLQ) and the full literal stays in the rejected artifact.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_row_with_a_500_kb_field_is_quarantined_once_and_nothing_reaches_the_dlq() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let huge = "9".repeat(500 * 1024);
    let body = offer_event("evt-huge", "EV-HUGE", &format!("{huge}.0.0"));
    let (status, accepted) =
        post_signed(&stack.base_url(), "acme-events", SECRET, "msg-huge", body).await;
    assert_eq!(status, 202, "{accepted}");

    wait_until("the refusal to be quarantined", || {
        let env = &env;
        async move { !env.quarantine().await.is_empty() }
    })
    .await;
    // The stack's ingest has had time to retry a failing message (visibility 1 s) into the DLQ.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let entries = env.quarantine().await;
    assert_eq!(entries.len(), 1, "one quarantine entry: {entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.reason_code, "invalid_price");
    assert!(
        entry.message.len() <= 2048,
        "the message is capped: {} bytes",
        entry.message.len()
    );
    assert!(entry.message.contains("truncated"), "{}", entry.message);
    let evidence = env.read_object(&entry.evidence_key).await;
    assert!(
        evidence.windows(huge.len()).any(|w| w == huge.as_bytes()),
        "the full literal is kept in the rejected artifact"
    );
    assert_eq!(
        env.queue_depth("IngestDLQ").await,
        (0, 0),
        "nothing in the DLQ"
    );
    assert!(env.observations().await.is_empty());

    // The operator reads it through the ops route.
    let (status, list) = call(
        "GET",
        format!("{}/v1/quarantine", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {OPERATOR}"))],
        vec![],
    )
    .await;
    assert_eq!(status, 200, "{list}");
    stack.stop().await;
}

/// An artifact link downloads as an attachment with an allowlisted content type, and no
/// response that carries links or evidence may be cached.
#[tokio::test(flavor = "multi_thread")]
async fn artifact_links_download_as_attachments_and_evidence_is_never_cached() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let body = offer_event("evt-link", "EV-LINK", "12.00");
    let (status, _) = post_signed(&base, "acme-events", SECRET, "msg-link", body).await;
    assert_eq!(status, 202);
    wait_until("the observation", || {
        let env = &env;
        async move { !env.observations().await.is_empty() }
    })
    .await;
    let observation = env.observations().await.remove(0);
    let bearer = |token: &str| vec![("authorization".to_owned(), format!("Bearer {token}"))];

    let (status, headers, _) =
        get_with_headers(format!("{base}/v1/items/EV-LINK/offers"), bearer(READER)).await;
    assert_eq!(status, 200);
    assert_eq!(
        headers.get("cache-control").map(String::as_str),
        Some("no-store")
    );

    let (status, headers, link) = get_with_headers(
        format!(
            "{base}/v1/observations/{}/artifact",
            observation.observation_id
        ),
        bearer(OPERATOR),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        headers.get("cache-control").map(String::as_str),
        Some("no-store")
    );
    let link: serde_json::Value = serde_json::from_slice(&link).unwrap();
    let url = link["url"].as_str().unwrap().to_owned();
    assert!(
        url.contains("response-content-disposition=attachment"),
        "{url}"
    );
    assert!(
        url.contains("response-content-type=application%2Fjson"),
        "{url}"
    );
    let (status, headers, bytes) = get_with_headers(url, Vec::new()).await;
    assert_eq!(status, 200);
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&bytes),
        observation.artifact_sha256
    );
    assert!(
        headers
            .get("content-disposition")
            .is_some_and(|d| d.starts_with("attachment")),
        "{headers:?}"
    );
    assert_eq!(
        headers.get("content-type").map(String::as_str),
        Some("application/json")
    );

    // An artifact that is gone (here: deleted behind the system's back) is a clear 404 with
    // a stable code, not a link that fails later.
    env.clients
        .s3
        .delete_object()
        .bucket(&env.bucket)
        .key(&observation.artifact_key)
        .send()
        .await
        .unwrap();
    let (status, _, answer) = get_with_headers(
        format!(
            "{base}/v1/observations/{}/artifact",
            observation.observation_id
        ),
        bearer(OPERATOR),
    )
    .await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&answer));
    stack.stop().await;
}

/// A signature does not name its connector, so a secret on two connectors would let a delivery
/// signed for one be replayed into the other. The first connector to use a secret owns it;
/// the second is refused with that secret (and says why in the log), while its own secret
/// still works.
#[tokio::test(flavor = "multi_thread")]
async fn a_signing_secret_on_two_connectors_signs_for_the_first_only() {
    let env = spawn_env(true).await;
    let dir = std::env::temp_dir().join(format!(
        "feedsafe-shared-secret-{}-{}",
        std::process::id(),
        feedsafe::domain::timestamp::Timestamp::now().unix_seconds()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let own = "whsec_dGhlLXNlY29uZC1jb25uZWN0b3JzLW93bi1zZWNyZXQtbG9jYWw=";
    let secrets = dir.join("secrets.json");
    std::fs::write(
        &secrets,
        serde_json::to_vec(&json!({"acme-events": [SECRET], "acme-events-two": [SECRET, own]}))
            .unwrap(),
    )
    .unwrap();
    let stack = spawn_stack_with(&env, |o| o.secrets_file = secrets.clone()).await;
    let mut second = local_stack::sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-events")
        .unwrap();
    second.connector = feedsafe::domain::ids::ConnectorId::parse("acme-events-two").unwrap();
    env.seed(&second).await;
    let base = stack.base_url();
    let post = |connector: &'static str, secret: &'static str, id: &'static str| {
        post_signed(
            &base,
            connector,
            secret,
            id,
            offer_event(id, "EV-SHARED", "1.00"),
        )
    };

    let (status, first) = post("acme-events", SECRET, "evt-a").await;
    assert_eq!(status, 202, "{first}");
    let (status, refused) = post("acme-events-two", SECRET, "evt-b").await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (401, Some("invalid_signature")),
        "{refused}"
    );
    let (status, accepted) = post("acme-events-two", own, "evt-c").await;
    assert_eq!(status, 202, "{accepted}");
    stack.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A page can only count for the run of its own connector's export: an envelope whose run id
/// names another connector's run (a forged or mis-built message on the queue) is refused
/// before anything is written, so it can neither complete nor corrupt that run.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_naming_another_connectors_run_is_refused_and_that_run_is_untouched() {
    use feedsafe::domain::envelope::{DeliveryEnvelope, RunPage};
    use feedsafe::domain::ids::{ConnectorId, TenantId};
    use feedsafe::intake::poller::run_id_for;
    use feedsafe::protocols::ingest::IngestOutcome;
    let env = spawn_env(true).await;
    let victim = acme_eu();
    env.seed(&victim).await;
    let intruder = feedsafe::domain::connector::ConnectorConfig {
        connector: ConnectorId::parse("intruder").unwrap(),
        tenant: TenantId::parse("other").unwrap(),
        ..acme_eu()
    };
    env.seed(&intruder).await;
    let service = env.service();
    let page = |n: u32| {
        export_page(
            "EXP-8821",
            n,
            3,
            vec![offer(&format!("AX-{n}"), 1, "1.00", "2026-11-29T08:00:00Z")],
        )
    };
    env.service_ingest(
        &service,
        &page_envelope(&victim, "EXP-8821", 1, 3, &page(1)),
    )
    .await;
    let victim_run = run_id_for(&victim.connector, "EXP-8821");
    let forged = DeliveryEnvelope::inline(
        &delivery_key(&intruder, "EXP-8821/2"),
        "export_page",
        feedsafe::domain::timestamp::Timestamp::now(),
        "application/json",
        Some(RunPage {
            run_id: victim_run.clone(),
            page: 2,
            page_count: Some(3),
        }),
        &page(2),
    )
    .to_json();
    let outcome = service.ingest_message(forged.as_bytes()).await;
    assert!(
        matches!(&outcome, Ok(IngestOutcome::Rejected(r)) if r.code.as_str() == "invalid_envelope"),
        "{outcome:?}"
    );
    let pages = env.store.run_pages(victim_run.as_str()).await.unwrap();
    assert_eq!(
        pages.committed().into_iter().collect::<Vec<_>>(),
        vec![1],
        "the victim's run holds its own page only"
    );
    assert!(env.observations().await.iter().all(|o| o
        .delivery_key
        .starts_with(&format!("{}/acme-eu/", victim.tenant))));
}

/// Sized for the worst delivery: a message is started only while the invocation has at least
/// `MESSAGE_RESERVE` left; the rest of the batch goes back untouched, so no message is ever
/// cut off by the function's timeout halfway through its transactions.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_near_its_deadline_hands_back_the_messages_it_has_no_time_for() {
    use feedsafe::lambda::sqs::{handle_sqs_batch_by, MESSAGE_RESERVE};
    use std::time::{Duration, Instant};
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();
    let event = |from: u32| -> aws_lambda_events::event::sqs::SqsEvent {
        let records: Vec<_> = (from..from + 3)
            .map(|n| {
                let body = export_page(
                    "EXP-DL",
                    n,
                    9,
                    vec![offer(&format!("DL-{n}"), 1, "1.00", "2026-11-29T08:00:00Z")],
                );
                json!({"messageId": format!("m-{n}"),
                       "body": String::from_utf8(page_envelope(&acme, "EXP-DL", n, 9, &body)).unwrap(),
                       "attributes": {"ApproximateReceiveCount": "1"}})
            })
            .collect();
        serde_json::from_value(json!({ "Records": records })).unwrap()
    };
    let short = Instant::now() + MESSAGE_RESERVE - Duration::from_millis(1);
    let response = handle_sqs_batch_by(&service, event(1), Some(short))
        .await
        .unwrap();
    let handed_back: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(handed_back, ["m-1", "m-2", "m-3"]);
    assert!(env.observations().await.is_empty(), "nothing was started");
    assert!(env.replay_records().await.is_empty());

    let ample = Instant::now() + Duration::from_secs(3600);
    let response = handle_sqs_batch_by(&service, event(1), Some(ample))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(env.observations().await.len(), 3);
}
