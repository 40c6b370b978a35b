//! The edges of what a supplier can send, through the running local stack: a value outside the
//! supported range (docs/adr/0012-supported-ranges-of-stored-values.md) is refused as
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

/// An observation stored before today's ranges were enforced (here: year -1, as a `+00:01`
/// offset on year 0000 used to store) cannot be decoded. The history route and the projector
/// skip it and report it; they never fail, or retry, on it forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_observation_that_no_longer_decodes_is_skipped_not_retried() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let mut stream = env.stream().await;
    let body = export_page(
        "EXP-OLD",
        1,
        1,
        vec![offer("OLD-1", 4, "1.00", "2026-11-29T08:00:00Z")],
    );
    env.service_ingest(&env.service(), &plain_envelope(&acme, "EXP-OLD/1", &body))
        .await;
    // A copy of the stored row under another id, observed at the year -1 text the parser refuses.
    let mut legacy = env
        .items()
        .await
        .into_iter()
        .find(|i| i.get("entity") == Some(&AttributeValue::S("observation".into())))
        .expect("the stored observation");
    let id = "obs_legacyyearminusone0000000000";
    let text = |v: &str| AttributeValue::S(v.to_owned());
    legacy.insert("pk".into(), text(&format!("OBS#{id}")));
    legacy.insert("observation_id".into(), text(id));
    legacy.insert("observed_at".into(), text("-001-12-31T23:59:00Z"));
    legacy.insert(
        "gsi1sk".into(),
        text(&format!("9999-12-31T23:59:59.999999Z#{id}")),
    );
    env.clients
        .dynamodb
        .put_item()
        .table_name(&env.table)
        .set_item(Some(legacy))
        .send()
        .await
        .expect("legacy row written");
    let records = env.collect(&mut stream).await;
    let projector = env.projector();
    let response = feedsafe::lambda::stream::handle_stream_batch(
        &projector,
        local_stack::events::stream_event(&records),
    )
    .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "the projector passes the legacy row: {response:?}"
    );
    let query = env.query();
    let history = query
        .history(&env.reader(), "OLD-1", None, 50)
        .await
        .expect("the history answers");
    let history = serde_json::to_value(history).unwrap();
    let observations = history["observations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(observations.len(), 1, "only the decodable claim: {history}");
    assert_eq!(observations[0]["quantity"], 4);
    let now = feedsafe::domain::timestamp::Timestamp::now();
    let offers = query
        .offers(&env.reader(), "OLD-1", None, now)
        .await
        .expect("offers");
    let offers = serde_json::to_value(offers).unwrap();
    assert_eq!(offers["offers"][0]["quantity"], 4, "{offers}");
}

/// One generated supplier row: every field drawn from its whole range and past its edges.
#[derive(Debug, Clone)]
struct Generated {
    sku: String,
    quantity: String,
    price: String,
    observed_at: String,
}

fn generated() -> impl proptest::strategy::Strategy<Value = Generated> {
    use proptest::prelude::*;
    let sku = prop_oneof![
        4 => "[A-Za-z0-9][A-Za-z0-9._+#-]{0,20}",
        1 => "[A-Z0-9/~% é]{1,6}",
        1 => "\\PC{1,12}",
        1 => "[a-z]{1,4}[\u{200B}\u{A0}\u{FFFD}\t][a-z]{1,4}",
        1 => (127usize..=129).prop_map(|n| "Z".repeat(n)),
        1 => (127usize..=129).prop_map(|n| "µ".repeat(n)),
    ];
    let quantity = prop_oneof![
        4 => (0u64..=1_000_000).prop_map(|q| q.to_string()),
        1 => proptest::sample::select(vec![
            "9007199254740991".to_owned(),
            "9007199254740992".to_owned(),
            "18446744073709551615".to_owned(),
            "-1".to_owned(),
            "2.5".to_owned(),
        ]),
    ];
    let price = prop_oneof![
        4 => "(0|[1-9][0-9]{0,6})(\\.[0-9]{1,4})?",
        1 => proptest::sample::select(vec!["9".repeat(30), "9".repeat(31), "01".to_owned()]),
    ];
    let offset = prop_oneof![
        Just("Z".to_owned()),
        (-1439i32..=1439).prop_map(|m| {
            let sign = if m < 0 { '-' } else { '+' };
            format!("{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
        }),
    ];
    let observed_at = prop_oneof![
        4 => ("[0-9]{0,9}", offset.clone()).prop_map(|(f, o)| {
            let fraction = if f.is_empty() { f } else { format!(".{f}") };
            format!("2026-11-29T08:00:00{fraction}{o}")
        }),
        1 => (0u32..=23, offset.clone()).prop_map(|(h, o)| format!("0000-01-01T{h:02}:00:00{o}")),
        1 => (0u32..=23, offset).prop_map(|(h, o)| format!("9999-12-31T{h:02}:59:59{o}")),
        1 => Just("2016-12-31T23:59:60Z".to_owned()),
    ];
    (sku, quantity, price, observed_at).prop_map(|(sku, quantity, price, observed_at)| Generated {
        sku,
        quantity,
        price,
        observed_at,
    })
}

impl Generated {
    fn event(&self, id: &str) -> Vec<u8> {
        format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"urn:acme:events","type":"offer.snapshot","data":{{"offers":[{{"sku":{},"quantity":{},"unit":"each","price":{},"currency":"EUR","observed_at":{}}}]}}}}"#,
            serde_json::to_string(&self.sku).unwrap(),
            self.quantity,
            serde_json::to_string(&self.price).unwrap(),
            serde_json::to_string(&self.observed_at).unwrap(),
        )
        .into_bytes()
    }
}

/// The webhook-to-stored path over generated rows: each signed event is either stored with
/// exactly the values the supplier sent (read back through the history route) or refused with
/// the code normalization gives it; none is lost and nothing panics. `FEEDSAFE_FUZZ_CASES`
/// events (32 by default; `FEEDSAFE_FUZZ_CASES=100000` for the long run).
#[tokio::test(flavor = "multi_thread")]
async fn generated_rows_through_the_webhook_are_stored_as_sent_or_refused() {
    use feedsafe::domain::connector::PayloadFormat;
    use feedsafe::domain::fingerprint::CanonicalizationRule;
    use proptest::strategy::{Strategy, ValueTree};
    product_panics();
    let cases: usize = std::env::var("FEEDSAFE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let mut runner = proptest::test_runner::TestRunner::default();
    let rows: Vec<Generated> = (0..cases)
        .map(|_| generated().new_tree(&mut runner).unwrap().current())
        .collect();
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let base = stack.base_url();
    for chunk in rows.chunks(16).enumerate() {
        let sends = chunk.1.iter().enumerate().map(|(i, row)| {
            let id = format!("fz-{}", chunk.0 * 16 + i);
            let base = base.clone();
            let body = row.event(&id);
            async move { post_event(&base, &format!("msg-{id}"), body).await }
        });
        for (status, answer) in futures_util::future::join_all(sends).await {
            assert_eq!(status, 202, "{answer}");
        }
    }
    let expected: Vec<_> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let payload = row.event(&format!("fz-{i}"));
            let normalized = feedsafe::domain::normalize::normalize(
                PayloadFormat::CloudEventsOffersV1,
                CanonicalizationRule::JsonV1,
                &payload,
            );
            (format!("/fz-{i}"), row, normalized)
        })
        .collect();
    let refused = expected.iter().filter(|(_, _, n)| n.is_err()).count();
    // The weights make both likely beyond doubt (each under 1e-6 to be missing at 32 rows).
    assert!(
        refused > 0 && refused < cases,
        "both stored and refused rows: {refused} of {cases} refused"
    );
    println!("generated rows: {cases}, refused at normalization: {refused}");
    settle(&env, cases).await;
    let quarantine = env.quarantine().await;
    assert_eq!(quarantine.len(), refused, "{quarantine:?}");
    for (suffix, row, normalized) in &expected {
        match normalized {
            Err(rejection) => {
                let entry = quarantine
                    .iter()
                    .find(|q| {
                        q.delivery_key
                            .as_deref()
                            .is_some_and(|k| k.ends_with(suffix.as_str()))
                    })
                    .unwrap_or_else(|| panic!("{row:?} refused without an entry"));
                assert_eq!(entry.reason_code, rejection.code.as_str(), "{row:?}");
            }
            Ok(stored) => read_back_as_sent(&base, suffix, row, &stored[0]).await,
        }
    }
    let panics = product_panics().lock().unwrap().clone();
    assert!(panics.is_empty(), "product code panicked: {panics:?}");
    stack.stop().await;
}

/// Waits until `cases` events are settled (one row each: one observation when stored, one
/// quarantine entry when refused), for as long as they keep settling: a long run takes minutes,
/// a lost event stops the count for good.
async fn settle(env: &TestEnv, cases: usize) {
    let (mut last, mut since) = (0, std::time::Instant::now());
    loop {
        let settled = env.observations().await.len() + env.quarantine().await.len();
        if settled >= cases {
            return;
        }
        if settled > last {
            (last, since) = (settled, std::time::Instant::now());
        }
        assert!(
            since.elapsed() < std::time::Duration::from_secs(60),
            "{settled} of {cases} events settled, none more for 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The history of `row`'s item holds its observation with the values as sent.
async fn read_back_as_sent(
    base: &str,
    suffix: &str,
    row: &Generated,
    normalized: &feedsafe::domain::normalize::NormalizedRow,
) {
    // By the query form: a part number may hold `/`, `%` or any character a path cannot carry
    // through API Gateway. The key (escaping `%` and `~`) percent-encoded once more as a value.
    let item: String = normalized
        .item
        .key()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let path = format!("/v1/observations?item={item}&limit=100");
    let (status, history) = read(base, &path).await;
    assert_eq!(status, 200, "{row:?}: {history}");
    let observation = history["observations"]
        .as_array()
        .and_then(|all| {
            all.iter().find(|o| {
                o["delivery_key"]
                    .as_str()
                    .is_some_and(|k| k.ends_with(suffix))
            })
        })
        .unwrap_or_else(|| panic!("{row:?} accepted but not in its history: {history}"));
    assert_eq!(observation["quantity"].to_string(), row.quantity, "{row:?}");
    assert_eq!(observation["price"], row.price.as_str(), "{row:?}");
    assert_eq!(
        observation["observed_at"],
        normalized.observed_at.to_rfc3339(),
        "{row:?}"
    );
    let read_back = feedsafe::domain::timestamp::Timestamp::parse(
        observation["observed_at"].as_str().unwrap_or_default(),
    );
    assert_eq!(read_back, Ok(normalized.observed_at), "{row:?}");
}
