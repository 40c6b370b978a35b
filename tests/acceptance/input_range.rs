//! The edges of what a supplier can send, through the running local stack: a value outside the
//! supported range (docs/decisions.md, "Supported ranges of stored values") is refused as
//! `invalid_row` with its literal, and never stops the ingestion of what comes after it.

use crate::intake::{call, signed_headers, READER, SECRET};
use acceptance::*;
use serde_json::{json, Value};
use std::sync::{Mutex, OnceLock};

/// Where product code (not a test) panicked in this test process, recorded by a panic hook that
/// then hands over to the default one. Tests that fail panic in `tests/`; a panic anywhere under
/// `shared/` or `infra/` is the product's.
fn product_panics() -> &'static Mutex<Vec<String>> {
    static PANICS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    PANICS.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(location) = info.location() {
                let file = location.file();
                if file.contains("shared/src") || file.contains("infra/local/src") {
                    if let Some(panics) = PANICS.get() {
                        if let Ok(mut list) = panics.lock() {
                            list.push(format!("{file}:{}: {info}", location.line()));
                        }
                    }
                }
            }
            previous(info);
        }));
        Mutex::new(Vec::new())
    })
}

/// A CloudEvent of the sample connector `acme-events` with one row observed at `observed_at`.
fn event(id: &str, sku: &str, quantity: u64, observed_at: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": id, "source": "urn:acme:events",
        "type": "offer.snapshot", "time": "2026-11-29T08:00:00Z",
        "data": {"offers": [{"sku": sku, "quantity": quantity, "unit": "each",
                             "price": "12.00", "currency": "EUR", "observed_at": observed_at}]}
    }))
    .unwrap()
}

async fn post_event(base: &str, id: &str, body: Vec<u8>) -> (u16, Value) {
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    call(
        "POST",
        format!("{base}/v1/webhooks/acme-events"),
        signed_headers(SECRET, id, now, &body),
        body,
    )
    .await
}

async fn read(base: &str, path: &str) -> (u16, Value) {
    call(
        "GET",
        format!("{base}{path}"),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await
}

/// Sends one event observed at `edge`, then 20 ordinary ones; the edge one must be quarantined
/// `invalid_row` naming its literal, all 20 readable, and no product code may have panicked.
async fn an_edge_timestamp_is_refused_and_ingestion_goes_on(edge: &str, tag: &str) {
    product_panics();
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    let edge_sku = format!("EDGE-{tag}");
    let (status, answer) = post_event(
        &base,
        &format!("msg-{tag}-edge"),
        event(&format!("evt-{tag}-edge"), &edge_sku, 3, edge),
    )
    .await;
    assert_eq!(status, 202, "the edge event is acknowledged: {answer}");
    for i in 0..20u64 {
        let (status, answer) = post_event(
            &base,
            &format!("msg-{tag}-{i}"),
            event(
                &format!("evt-{tag}-{i}"),
                &format!("AFTER-{tag}-{i}"),
                i + 1,
                "2026-11-29T08:00:00Z",
            ),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
    }
    wait_until("all 20 events after the edge one to be readable", || {
        let base = base.clone();
        let tag = tag.to_owned();
        async move {
            for i in 0..20u64 {
                let (status, body) =
                    read(&base, &format!("/v1/items/AFTER-{tag}-{i}/offers")).await;
                let quantity = body["offers"][0]["quantity"].as_u64();
                if status != 200 || quantity != Some(i + 1) {
                    return false;
                }
            }
            true
        }
    })
    .await;
    wait_until("the edge event to be quarantined", || {
        let env = &env;
        async move { !env.quarantine().await.is_empty() }
    })
    .await;
    let entries = env.quarantine().await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].reason_code, "invalid_row", "{:?}", entries[0]);
    assert!(
        entries[0].message.contains(edge),
        "the refusal names the literal {edge:?}: {}",
        entries[0].message
    );
    let (status, history) = read(&base, &format!("/v1/items/{edge_sku}/observations")).await;
    assert_eq!(status, 200, "the edge item's history answers: {history}");
    assert_eq!(history["observations"], json!([]), "{history}");
    let panics = product_panics().lock().unwrap().clone();
    assert!(panics.is_empty(), "product code panicked: {panics:?}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn year_ten_thousand_in_utc_is_refused_and_twenty_events_after_it_are_stored() {
    an_edge_timestamp_is_refused_and_ingestion_goes_on("9999-12-31T23:59:59-01:00", "y10k").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn year_minus_one_in_utc_is_refused_and_the_history_answers() {
    an_edge_timestamp_is_refused_and_ingestion_goes_on("0000-01-01T00:00:00+00:01", "y0").await;
}
