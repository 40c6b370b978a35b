//! The projector under an index that lags like AWS's (docs/architecture.md section 7): it never
//! removes or rolls back a current offer that is still eligible, whatever the order, repetition or
//! lag of the stream records it is given; once the lag has passed, a rebuild gives the same
//! projection.

use acceptance::*;
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::model::SourceRef;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::identity_corrections::CorrectionRequest;
use feedsafe::protocols::ingest::IngestOutcome;
use feedsafe::protocols::ports::{CrashPoint, OffsetClock};
use feedsafe::protocols::projection::{EvidenceChange, ProjectionKey, ProjectionStore, Projector};
use local_stack::fidelity::LaggingIndex;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

const X: &str = "AX-440-R2~each~new";
const Z: &str = "AX-999~each~new";
const LAG_MS: i64 = 2_000;
const INTERLEAVINGS: usize = 200;
const LANES: usize = 8;

fn one_row(sku: &str, quantity: i64, at: &str) -> Vec<u8> {
    export_page("E", 1, 1, vec![offer(sku, quantity, "820.00", at)])
}

/// A delivery of 99 rows (staged: two transactions) whose first row is for `X`.
fn staged_with_x(at: &str) -> Vec<u8> {
    let mut offers: Vec<Value> = vec![offer("AX-440-R2", 4, "820.00", at)];
    offers.extend((1..99).map(|i| offer(&format!("FILL-{i:03}"), 1, "1.00", at)));
    export_page("E", 1, 1, offers)
}

struct Lane {
    table: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
}

#[tokio::test(flavor = "multi_thread")]
async fn under_a_lagging_index_an_eligible_current_offer_is_never_dropped_or_rolled_back() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let mut stream = env.stream().await;
    let setup_started = Timestamp::now();

    // The evidence: an older and a newer claim for X, a claim for another item that a correction
    // then re-attributes to X (a superseding copy), all too recent for the index to show; and a
    // claim for X inside a staged delivery that never committed (ineligible), recorded an hour
    // ago so that the index does show it.
    let service = env.service();
    let ok = |o: IngestOutcome| assert!(o.result().is_some(), "{o:?}");
    ok(service
        .ingest_message(&plain_envelope(
            &acme,
            "D-old",
            &one_row("AX-440-R2", 1, "2026-11-29T08:00:00Z"),
        ))
        .await
        .unwrap());
    ok(service
        .ingest_message(&plain_envelope(
            &acme,
            "D-new",
            &one_row("AX-440-R2", 2, "2026-11-29T10:00:00Z"),
        ))
        .await
        .unwrap());
    ok(service
        .ingest_message(&plain_envelope(
            &acme,
            "D-z",
            &one_row("AX-999", 3, "2026-11-29T07:30:00Z"),
        ))
        .await
        .unwrap());
    env.service_with(
        Arc::new(OffsetClock(-3600)),
        CrashOnce::at(CrashPoint::AfterChunk(1)),
    )
    .ingest_message(&plain_envelope(
        &acme,
        "D-staged",
        &staged_with_x("2026-11-29T09:30:00Z"),
    ))
    .await
    .expect_err("the staged delivery stops after its first chunk");
    let source = SourceRef {
        tenant: acme.tenant.clone(),
        connector: acme.connector.clone(),
        source_account: acme.source_account.clone(),
    };
    env.corrections()
        .correct(&CorrectionRequest {
            source: source.clone(),
            from_item: "AX-999".into(),
            to_item: CanonicalItem::parse_key("AX-440-R2").unwrap(),
            reason: "AX-999 was a typo for AX-440-R2".into(),
            actor: None,
        })
        .await
        .expect("correction recorded");

    // Every stream record about X or Z, and which observations each one brings to the projector.
    let by_id = |delivery: &str| {
        let key = delivery_key(&acme, delivery);
        feedsafe::domain::ids::ObservationId::derive(&key, 0, 0)
    };
    let (old, new, z) = (by_id("D-old"), by_id("D-new"), by_id("D-z"));
    let all = env.observations().await;
    let copy = all
        .iter()
        .find(|o| o.supersedes.as_ref() == Some(&z))
        .expect("the correction wrote a superseding copy of the Z claim")
        .observation_id
        .clone();
    let pending = all
        .iter()
        .find(|o| o.delivery_key.ends_with("/D-staged") && o.item == X)
        .expect("the staged delivery's X claim exists")
        .observation_id
        .clone();
    let records = env.collect(&mut stream).await;
    let mut changes: Vec<(EvidenceChange, BTreeSet<String>)> = Vec::new();
    for (name, old_image, new_image, _) in records {
        let change = feedsafe::aws::stream_records::classify(&name, old_image, new_image).unwrap();
        let touches: BTreeSet<String> = match &change {
            // A record about the Z claim also brings its superseding copy: the projector follows
            // supersession chains from a claim to the copy that replaced it.
            EvidenceChange::Observation(o) if o.observation_id == z => {
                BTreeSet::from([o.observation_id.to_string(), copy.to_string()])
            }
            EvidenceChange::Observation(o) if o.item == X || o.item == Z => {
                BTreeSet::from([o.observation_id.to_string()])
            }
            EvidenceChange::DeliveryCommitted(ids) => ids
                .iter()
                .filter(|id| [&old, &new, &z].contains(id))
                .map(|id| id.to_string())
                .collect(),
            _ => BTreeSet::new(),
        };
        if !touches.is_empty() {
            changes.push((change, touches));
        }
    }
    assert!(
        changes.len() >= 6,
        "inserts of old, new, z, copy and the staged X claim, and the z supersession: {}",
        changes.len()
    );
    let eligible = [
        (old.to_string(), "2026-11-29T08:00:00Z"),
        (new.to_string(), "2026-11-29T10:00:00Z"),
        (copy.to_string(), "2026-11-29T07:30:00Z"),
    ];
    let ineligible = [pending.to_string(), z.to_string()];

    // The index hides everything recorded since the setup started (the old claim stays visible).
    let clock = SettableClock::at(setup_started);
    let reads = Arc::new(LaggingIndex::new(env.store.clone(), LAG_MS, clock.clone()));
    let lanes: Vec<Lane> = futures_lanes(&env).await;
    let seed = test_seed();
    println!("interleavings seed: FEEDSAFE_SEED={seed}");
    let x_key = ProjectionKey {
        item: X.to_owned(),
        source: source.clone(),
    };
    let z_key = ProjectionKey {
        item: Z.to_owned(),
        source: source.clone(),
    };
    let mut tasks = Vec::new();
    for (lane_index, lane) in lanes.into_iter().enumerate() {
        let changes = changes.clone();
        let reads = reads.clone();
        let store = env.store.clone();
        let (x_key, z_key) = (x_key.clone(), z_key.clone());
        let eligible = eligible.clone();
        let ineligible = ineligible.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = TestRng::seeded(seed.wrapping_add(lane_index as u64));
            let mut finals = Vec::new();
            for run in (lane_index..INTERLEAVINGS).step_by(LANES) {
                for key in [&x_key, &z_key] {
                    if let Some(row) = lane.table.current(key).await.unwrap() {
                        lane.table.remove(key, &row.basis).await.unwrap();
                    }
                }
                let recording = RecordingProjection::new(lane.table.clone());
                let projector = Projector::new(reads.clone(), recording.clone(), store.clone());
                // Every record once, some twice, in a random order.
                let mut order: Vec<usize> = (0..changes.len()).collect();
                for i in 0..changes.len() {
                    if rng.below(3) == 0 {
                        order.push(i);
                    }
                }
                rng.shuffle(&mut order);
                let mut applied: BTreeSet<String> = BTreeSet::new();
                for (step, &i) in order.iter().enumerate() {
                    let (change, touches) = &changes[i];
                    projector.apply(change).await.unwrap();
                    applied.extend(touches.iter().cloned());
                    let expected = eligible
                        .iter()
                        .filter(|(id, _)| applied.contains(id))
                        .max_by_key(|(_, at)| *at)
                        .map(|(id, _)| id.clone());
                    let current = lane
                        .table
                        .current(&x_key)
                        .await
                        .unwrap()
                        .map(|r| r.observation.observation_id.to_string());
                    assert_eq!(
                        current, expected,
                        "seed {seed} lane {lane_index} interleaving {run} step {step}: \
                         the current offer is the newest eligible claim seen so far (order {order:?})"
                    );
                }
                for (item, removed) in recording.removed.lock().unwrap().iter() {
                    assert!(
                        !eligible.iter().any(|(id, _)| id == removed),
                        "seed {seed} interleaving {run}: the eligible current row {removed} of {item} was deleted"
                    );
                }
                let observed_at = |id: &str| eligible.iter().find(|(e, _)| e == id).map(|(_, at)| *at);
                for (_, from, to) in recording.replaced.lock().unwrap().iter() {
                    assert!(
                        !ineligible.contains(to),
                        "seed {seed}: an ineligible claim {to} replaced {from}"
                    );
                    if let (Some(was), Some(now)) = (observed_at(from), observed_at(to)) {
                        assert!(
                            now > was,
                            "seed {seed} interleaving {run}: the eligible current {from} was rolled back to {to}"
                        );
                    }
                }
                assert!(
                    lane.table.current(&z_key).await.unwrap().is_none(),
                    "seed {seed}: the re-attributed claim is never current for its old item"
                );
                finals.push(lane.table.current(&x_key).await.unwrap());
            }
            finals
        }));
    }
    let mut finals = Vec::new();
    for task in tasks {
        finals.extend(task.await.expect("lane finished"));
    }
    assert_eq!(finals.len(), INTERLEAVINGS);

    // After the lag has passed, a rebuild over the evidence gives the same projection.
    clock.set(Timestamp::now().plus_seconds(LAG_MS / 1000 + 1));
    let rebuilt = env.projection_store();
    let projector = Projector::new(reads.clone(), rebuilt.clone(), env.store.clone());
    projector.rebuild_item(&acme.tenant, X).await.unwrap();
    projector.rebuild_item(&acme.tenant, Z).await.unwrap();
    let rebuilt_x = rebuilt.current(&x_key).await.unwrap();
    assert!(rebuilt.current(&z_key).await.unwrap().is_none());
    assert_eq!(
        rebuilt_x
            .as_ref()
            .map(|r| r.observation.observation_id.to_string()),
        Some(new.to_string())
    );
    for row in finals {
        assert_eq!(
            row.map(|r| r.basis),
            rebuilt_x.as_ref().map(|r| r.basis.clone()),
            "every interleaving ends where the rebuild does"
        );
    }
}

/// One projection table per lane, so lanes run concurrently without sharing rows.
async fn futures_lanes(env: &TestEnv) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for _ in 0..LANES {
        lanes.push(Lane {
            table: env.extra_projection_table().await,
        });
    }
    lanes
}
