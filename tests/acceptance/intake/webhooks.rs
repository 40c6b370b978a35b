//! Signed webhooks through the local stack: accepted, verified, deduplicated; CloudEvents
//! identities.

use super::{call, cloud_event, history, signed_headers, stack, OPERATOR, READER, ROTATED, SECRET};
use acceptance::*;
use serde_json::json;

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
