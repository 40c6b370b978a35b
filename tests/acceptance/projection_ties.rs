//! Claims about one item observed at the same instant: the one recorded later is current,
//! whatever the observation ids (which are hashes); history lists it first. A delivery that
//! makes two different claims about one item at one instant is refused as ambiguous.

use acceptance::*;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::ids::ObservationId;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ingest::{IngestOutcome, IngestService};
use feedsafe::protocols::ports::{CrashPoint, NoFaults};
use serde_json::{json, Value};
use std::sync::Arc;

const ITEM: &str = "TIE-1";
const AT: &str = "2026-11-29T08:00:00Z";

/// The observation id of row 0 of a single-page export `{export}/1` of `config`.
fn first_id(config: &ConnectorConfig, export: &str) -> ObservationId {
    ObservationId::derive(&delivery_key(config, &format!("{export}/1")), 0, 0)
}

/// Two export ids whose observations' ids order as `first_greater` asks: with `true`, the id
/// order alone would keep the earlier delivery current.
fn export_pair(config: &ConnectorConfig, tag: &str, first_greater: bool) -> (String, String) {
    for n in 0..64 {
        let (a, b) = (format!("{tag}-A{n}"), format!("{tag}-B{n}"));
        if (first_id(config, &a) > first_id(config, &b)) == first_greater {
            return (a, b);
        }
    }
    panic!("no pair of export ids in 64 tries");
}

fn page(config: &ConnectorConfig, export: &str, offers: Vec<Value>) -> Vec<u8> {
    page_envelope(config, export, 1, 1, &export_page(export, 1, 1, offers))
}

async fn committed(service: &IngestService, envelope: &[u8]) {
    let outcome = service.ingest_message(envelope).await.expect("settles");
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
}

/// (quantity, observation id) of the item's current offer, and the history's quantities.
async fn shown(env: &TestEnv, item: &str) -> (Option<(u64, String)>, Vec<u64>) {
    let query = env.query();
    let offers = query
        .offers(&env.reader(), item, None, Timestamp::now())
        .await
        .unwrap();
    let offers = serde_json::to_value(offers).unwrap();
    let current = offers["offers"].as_array().unwrap().first().map(|o| {
        (
            o["quantity"].as_u64().unwrap(),
            o["observation_id"].as_str().unwrap().to_owned(),
        )
    });
    let history = query.history(&env.reader(), item, None, 50).await.unwrap();
    let history = serde_json::to_value(history).unwrap();
    let quantities = history["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["quantity"].as_u64().unwrap())
        .collect();
    (current, quantities)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_later_recorded_of_two_claims_at_one_instant_is_current_whatever_the_ids() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (service, projector) = (env.service(), env.projector());
    let mut stream = env.stream().await;
    // Both id orders, each item on its own: the later delivery wins either way.
    for (item, first_greater) in [("TIE-HI", true), ("TIE-LO", false)] {
        let (first, second) = export_pair(&acme, item, first_greater);
        committed(
            &service,
            &page(&acme, &first, vec![offer(item, 5, "10.00", AT)]),
        )
        .await;
        env.drain(&mut stream, &projector).await;
        committed(
            &service,
            &page(&acme, &second, vec![offer(item, 7, "10.00", AT)]),
        )
        .await;
        env.drain(&mut stream, &projector).await;
        let later = first_id(&acme, &second).to_string();
        assert_eq!(
            shown(&env, item).await,
            (Some((7, later.clone())), vec![7, 5]),
            "{item}: the later delivery ({second}) is current and first in history \
             (first id greater than the second's: {first_greater})"
        );
        // Recomputed from history (a rebuild into an empty table), the same row.
        let rebuilt = env.extra_projection_table().await;
        env.projector_into(rebuilt.clone())
            .rebuild_item(&acme.tenant, &item_key(item))
            .await
            .unwrap();
        let rows = feedsafe::protocols::projection::ProjectionStore::offers(
            rebuilt.as_ref(),
            &acme.tenant,
            &item_key(item),
        )
        .await
        .unwrap();
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.observation.observation_id.to_string())
            .collect();
        assert_eq!(ids, vec![later], "{item}: a rebuild picks the same claim");
    }
}

fn item_key(part: &str) -> String {
    feedsafe::domain::item::CanonicalItem::parse_key(part)
        .unwrap()
        .key()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_staged_delivery_is_ordered_by_when_it_was_first_recorded_not_when_it_committed() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let projector = env.projector();
    let mut stream = env.stream().await;
    // A 99-row (staged) delivery whose first attempt dies after its first chunk...
    let (staged, small) = export_pair(&acme, "STG", true);
    let mut rows = vec![offer(ITEM, 3, "10.00", AT)];
    rows.extend((0..98).map(|i| offer(&format!("FILL-{i:03}"), 1, "1.00", AT)));
    let staged = page(&acme, &staged, rows);
    let crashed = env
        .service_with(
            Arc::new(feedsafe::protocols::ports::SystemClock),
            CrashOnce::at(CrashPoint::AfterChunk(1)),
        )
        .ingest_message(&staged)
        .await;
    assert!(crashed.is_err(), "the first attempt dies: {crashed:?}");
    // ...then a small delivery about the same item at the same instant is recorded and
    // committed, and only then does the staged one commit (its retry).
    let service = env.service_with(
        Arc::new(feedsafe::protocols::ports::SystemClock),
        Arc::new(NoFaults),
    );
    committed(
        &service,
        &page(&acme, &small, vec![offer(ITEM, 8, "10.00", AT)]),
    )
    .await;
    committed(&service, &staged).await;
    env.drain(&mut stream, &projector).await;
    assert_eq!(
        shown(&env, ITEM).await,
        (Some((8, first_id(&acme, &small).to_string())), vec![8, 3]),
        "the delivery first recorded later is current, though the staged one committed last"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_naming_one_item_twice_at_one_instant_with_different_claims_is_quarantined() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();
    let ambiguous = page(
        &acme,
        "AMB-1",
        vec![
            offer(ITEM, 5, "10.00", AT),
            offer("OTHER-1", 1, "1.00", AT),
            offer(ITEM, 7, "10.00", AT),
        ],
    );
    let outcome = service.ingest_message(&ambiguous).await.expect("settles");
    let IngestOutcome::Rejected(report) = &outcome else {
        panic!("the ambiguous delivery is refused, not {outcome:?}");
    };
    assert_eq!(report.code.as_str(), "ambiguous_item", "{report:?}");
    assert!(
        report.message.contains("rows 0 and 2") && report.message.contains("TIE-1~each~new"),
        "the message names both rows and the item: {}",
        report.message
    );
    let entries = env.quarantine().await;
    assert_eq!(
        entries
            .iter()
            .map(|e| (e.reason_code.as_str(), e.delivery_key.as_deref()))
            .collect::<Vec<_>>(),
        vec![("ambiguous_item", Some("acme/acme-eu/ACC-1/AMB-1/1"))]
    );
    assert!(env.replay("acme/acme-eu/ACC-1/AMB-1/1").await.is_none());
    assert!(env.observations().await.is_empty(), "nothing is stored");
    // The same message again files the same entry.
    service.ingest_message(&ambiguous).await.expect("settles");
    assert_eq!(env.quarantine().await.len(), 1);

    // Not ambiguous: one item at two instants (a history), another unit (another item), and
    // an identical row repeated (both say the same; kept as sent).
    for (export, rows) in [
        (
            "OK-1",
            vec![
                offer(ITEM, 5, "10.00", AT),
                offer(ITEM, 7, "10.00", "2026-11-29T08:00:01Z"),
            ],
        ),
        (
            "OK-2",
            vec![
                offer(ITEM, 5, "10.00", AT),
                json!({"sku": ITEM, "quantity": 7, "unit": "reel", "price": "10.00",
                       "currency": "EUR", "observed_at": AT}),
            ],
        ),
        (
            "OK-3",
            vec![offer(ITEM, 5, "10.00", AT), offer(ITEM, 5, "10.00", AT)],
        ),
    ] {
        committed(&service, &page(&acme, export, rows)).await;
    }
    assert_eq!(env.observations().await.len(), 6);
}

/// Two signed webhook events through the local stack about one item at the same instant, the
/// second sent after the first was current: the second is current, whatever their ids.
#[tokio::test(flavor = "multi_thread")]
async fn a_later_webhook_event_about_the_same_instant_replaces_the_earlier_one() {
    use crate::intake::{call, signed_headers, READER, SECRET};
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let url = format!("{}/v1/webhooks/acme-events", stack.base_url());
    let event_key = |id: &str| format!("demo/acme-events/ACME-EVT/urn:acme:events/{id}");
    let id_of = |id: &str| ObservationId::derive_for(&event_key(id), 0, 0);
    // Event ids whose observation ids would keep the first event current.
    let (first, second) = (0..64)
        .map(|n| (format!("tie-a{n}"), format!("tie-b{n}")))
        .find(|(a, b)| id_of(a) > id_of(b))
        .expect("a pair of event ids");
    let event = |id: &str, quantity: u64| {
        serde_json::to_vec(&json!({
            "specversion": "1.0", "id": id, "source": "urn:acme:events", "type": "offer.snapshot",
            "time": AT,
            "data": {"offers": [{"sku": "EV-TIE", "quantity": quantity, "unit": "each",
                                 "price": "12.00", "currency": "EUR"}]}
        }))
        .unwrap()
    };
    let get = |path: String| {
        let url = format!("{}{path}", stack.base_url());
        async move {
            call(
                "GET",
                url,
                vec![("authorization".into(), format!("Bearer {READER}"))],
                vec![],
            )
            .await
            .1
        }
    };
    let current = || async {
        get("/v1/items/EV-TIE/offers".into()).await["offers"]
            .as_array()
            .and_then(|o| o.first())
            .map(|o| o["quantity"].clone())
    };
    let now = Timestamp::now().unix_seconds();
    for (id, quantity) in [(&first, 5), (&second, 7)] {
        let body = event(id, quantity);
        let (status, answer) = call(
            "POST",
            url.clone(),
            signed_headers(SECRET, &format!("msg-{id}"), now, &body),
            body,
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        wait_until("the event's claim to be in history", || async {
            get("/v1/items/EV-TIE/observations".into()).await["observations"]
                .as_array()
                .is_some_and(|o| o.iter().any(|o| o["quantity"] == quantity))
        })
        .await;
        if quantity == 5 {
            wait_until("the first event to be current", || async {
                current().await == Some(json!(5))
            })
            .await;
        }
    }
    // The projector runs beside the stack: give it time to settle, then compare.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while current().await != Some(json!(7)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let history: Vec<Value> = get("/v1/items/EV-TIE/observations".into()).await["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["quantity"].clone())
        .collect();
    assert_eq!(
        (current().await, history),
        (Some(json!(7)), vec![json!(7), json!(5)]),
        "the second event ({second}) is current and newest in history, though its id ({}) \
         sorts below the first's ({})",
        id_of(&second),
        id_of(&first)
    );
}

/// Observations stored before deliveries' record times were kept have no
/// `delivery_recorded_at` and keep their index key `{observed_at}#{observation_id}`: they stay
/// readable, and at the same instant a claim recorded since ranks above them.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_stored_before_record_times_were_kept_ranks_below_one_recorded_since() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (service, projector) = (env.service(), env.projector());
    let mut stream = env.stream().await;
    let (old, new) = export_pair(&acme, "OLD", true);
    committed(
        &service,
        &page(&acme, &old, vec![offer(ITEM, 5, "10.00", AT)]),
    )
    .await;
    // Rewrite it as the earlier code stored it: no record time, the earlier index key.
    let key = delivery_key(&acme, &format!("{old}/1")).as_string();
    let mut legacy = env.observations_of(&key).await.remove(0);
    legacy.delivery_recorded_at = None;
    let item = feedsafe::aws::dynamo::observation_item(&legacy).unwrap();
    assert_eq!(
        item["gsi1sk"].as_s().unwrap(),
        &format!("2026-11-29T08:00:00.000000Z#{}", legacy.observation_id)
    );
    env.clients
        .dynamodb
        .put_item()
        .table_name(&env.table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
    env.drain(&mut stream, &projector).await;
    assert_eq!(
        shown(&env, ITEM).await,
        (Some((5, legacy.observation_id.to_string())), vec![5])
    );
    committed(
        &service,
        &page(&acme, &new, vec![offer(ITEM, 7, "10.00", AT)]),
    )
    .await;
    env.drain(&mut stream, &projector).await;
    let newer = first_id(&acme, &new).to_string();
    assert_eq!(
        shown(&env, ITEM).await,
        (Some((7, newer.clone())), vec![7, 5]),
        "the claim recorded since is current and first in history, though its id is lower"
    );
    let rebuilt = env.extra_projection_table().await;
    env.projector_into(rebuilt.clone())
        .rebuild_item(&acme.tenant, &item_key(ITEM))
        .await
        .unwrap();
    let rows = feedsafe::protocols::projection::ProjectionStore::offers(
        rebuilt.as_ref(),
        &acme.tenant,
        &item_key(ITEM),
    )
    .await
    .unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r.observation.observation_id.to_string())
            .collect::<Vec<_>>(),
        vec![newer]
    );
}
