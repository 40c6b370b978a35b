//! The essay's failure modes for the ingest path.

use acceptance::*;
use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::model::{DedupConfidence, Observation, ReplayRecord, ReplayState};
use feedsafe::protocols::ingest::{IngestOutcome, IngestService, MismatchReport};
use feedsafe::protocols::ports::{NoFaults, OffsetClock};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Barrier;

async fn ingest(service: &IngestService, envelope: &[u8]) -> IngestOutcome {
    service
        .ingest_message(envelope)
        .await
        .expect("ingest settles")
}

fn committed(outcome: IngestOutcome) -> feedsafe::protocols::ingest::DeliveryResult {
    match outcome {
        IngestOutcome::Committed(r) => r,
        other => panic!("expected committed, got {other:?}"),
    }
}

fn replayed(outcome: IngestOutcome) -> feedsafe::protocols::ingest::DeliveryResult {
    match outcome {
        IngestOutcome::Replayed(r) => r,
        other => panic!("expected replayed, got {other:?}"),
    }
}

/// EXP-8821's page 2, the page the essay follows.
const EXP8821_PAGE2: &str = "acme/acme-eu/ACC-1/EXP-8821/2";

/// EXP-8821's three pages sent to the ingest queue and pumped until all three are handled.
async fn deliver_exp8821_through_the_queue(
    env: &TestEnv,
    acme: &ConnectorConfig,
    service: &IngestService,
) -> [Vec<u8>; 3] {
    let pages = [
        export_page(
            "EXP-8821",
            1,
            3,
            vec![offer("BX-100", 10, "12.50", "2026-11-29T08:00:00Z")],
        ),
        export_page(
            "EXP-8821",
            2,
            3,
            vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
        ),
        export_page(
            "EXP-8821",
            3,
            3,
            vec![offer("CX-7", 1, "99.00", "2026-11-29T08:00:00Z")],
        ),
    ];
    for (i, body) in pages.iter().enumerate() {
        env.send(
            "IngestQueue",
            &page_envelope(acme, "EXP-8821", i as u32 + 1, 3, body),
        )
        .await;
    }
    let mut handled = 0;
    while handled < 3 {
        let (received, failed) = env.pump_once("IngestQueue", service, 5).await;
        assert_eq!(failed, 0, "no transient failures expected");
        handled += received;
    }
    pages
}

/// Page 2's one observation (quantity 6 at 08:00) and its committed replay record; the raw
/// artifact holds the literal page and every page wrote its own record.
async fn page2_observation_and_record(
    env: &TestEnv,
    pages: &[Vec<u8>; 3],
) -> (Observation, ReplayRecord) {
    let first = env.observations_of(EXP8821_PAGE2).await;
    assert_eq!(first.len(), 1, "page 2 yields one observation");
    let obs77 = first[0].clone();
    assert_eq!(obs77.item, "AX-440-R2~each~new");
    assert_eq!(
        (
            obs77.quantity.whole(),
            obs77.price.as_str(),
            obs77.currency.as_str()
        ),
        (Some(6), "820.00", "EUR")
    );
    assert_eq!(obs77.observed_at.to_rfc3339(), "2026-11-29T08:00:00Z");
    assert_eq!(obs77.claim, "source_reported");
    assert_eq!(obs77.verification, "unverified");
    let record = env.replay(EXP8821_PAGE2).await.expect("replay record");
    assert_eq!((record.state, record.attempts), (ReplayState::Committed, 1));
    // The raw artifact holds the literal page, and the observation points at it.
    assert_eq!(env.read_object(&obs77.artifact_key).await, pages[1]);
    assert_eq!(
        obs77.artifact_sha256,
        feedsafe::domain::hashing::sha256_hex(&pages[1])
    );
    // Each page's final transaction wrote the page's own record (the run item is the
    // projector's to keep).
    let run_pages = env.store.run_pages("run-acme-eu.EXP-8821").await.unwrap();
    assert_eq!(
        run_pages.committed().into_iter().collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(run_pages.pages.iter().all(|p| p.page_count == Some(3)));
    assert!(run_pages.missing(Some(3)).is_empty());
    (obs77, record)
}

/// Page 2 delivered again after a lost acknowledgement: replayed with the same observation,
/// the attempt counted, no new observation.
async fn lost_acknowledgement_replays_page2(
    env: &TestEnv,
    acme: &ConnectorConfig,
    service: &IngestService,
    page2: &[u8],
    obs77: &Observation,
) {
    let total_before = env.observations().await.len();
    let again = replayed(ingest(service, &page_envelope(acme, "EXP-8821", 2, 3, page2)).await);
    assert_eq!(again.observation_ids, vec![obs77.observation_id.clone()]);
    assert_eq!(again.attempts, 2);
    assert_eq!(
        env.observations().await.len(),
        total_before,
        "no new observation on replay"
    );
    assert_eq!(env.replay(EXP8821_PAGE2).await.unwrap().attempts, 2);
}

/// EXP-8822 at 09:00 reports quantity 4: a second observation; both stay in history.
async fn new_export_keeps_both_observations_in_history(
    env: &TestEnv,
    acme: &ConnectorConfig,
    service: &IngestService,
    obs77: &Observation,
) {
    let exp8822 = export_page(
        "EXP-8822",
        2,
        3,
        vec![offer("AX-440-R2", 4, "820.00", "2026-11-29T09:00:00Z")],
    );
    let obs78 = committed(ingest(service, &page_envelope(acme, "EXP-8822", 2, 3, &exp8822)).await);
    assert_eq!(obs78.observation_ids.len(), 1);
    assert_ne!(obs78.observation_ids[0], obs77.observation_id);
    let history: Vec<_> = env
        .observations()
        .await
        .into_iter()
        .filter(|o| o.item == "AX-440-R2~each~new")
        .map(|o| (o.quantity, o.observed_at.to_rfc3339()))
        .collect();
    assert_eq!(history.len(), 2);
    assert!(history.contains(&(6.into(), "2026-11-29T08:00:00Z".into())));
    assert!(history.contains(&(4.into(), "2026-11-29T09:00:00Z".into())));
}

/// EXP-8821 page 2 claiming quantity 5: a mismatch, quarantined with its own raw artifact,
/// nothing overwritten; returns the changed page and the mismatch report.
async fn changed_page2_is_quarantined_and_overwrites_nothing(
    env: &TestEnv,
    acme: &ConnectorConfig,
    service: &IngestService,
    obs77: &Observation,
    record: &ReplayRecord,
) -> (Vec<u8>, MismatchReport) {
    let mutated = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 5, "820.00", "2026-11-29T08:00:00Z")],
    );
    let report = match ingest(service, &page_envelope(acme, "EXP-8821", 2, 3, &mutated)).await {
        IngestOutcome::Mismatch(report) => report,
        other => panic!("expected replay_payload_mismatch, got {other:?}"),
    };
    let after = env
        .store
        .observation(obs77.observation_id.as_str())
        .await
        .unwrap()
        .expect("still there");
    assert_eq!(after, *obs77, "the quantity-6 observation is unchanged");
    let record_after = env.replay(EXP8821_PAGE2).await.unwrap();
    assert_eq!(record_after.fingerprint, record.fingerprint);
    assert_eq!(record_after.observation_ids, record.observation_ids);
    assert_eq!(env.observations_of(EXP8821_PAGE2).await.len(), 1);
    let entry = env
        .store
        .quarantine_entry(&report.quarantine_id)
        .await
        .unwrap()
        .expect("quarantine entry");
    assert_eq!(entry.reason_code, "replay_payload_mismatch");
    assert_eq!(entry.stored_fingerprint.as_ref(), Some(&record.fingerprint));
    let received = entry
        .received_fingerprint
        .clone()
        .expect("received fingerprint");
    assert_ne!(received, record.fingerprint);
    assert_eq!(received.rule, record.fingerprint.rule);
    assert_ne!(
        entry.evidence_key, record.artifact_key,
        "the mismatch has its own raw artifact"
    );
    assert_eq!(env.read_object(&entry.evidence_key).await, mutated);
    assert_eq!(
        entry.evidence_sha256,
        feedsafe::domain::hashing::sha256_hex(&mutated)
    );
    (mutated, report)
}

/// The changed page delivered once more: still refused, still quarantined once.
async fn changed_page2_again_stays_quarantined_once(
    env: &TestEnv,
    acme: &ConnectorConfig,
    service: &IngestService,
    mutated: &[u8],
    report: &MismatchReport,
) {
    let again = ingest(service, &page_envelope(acme, "EXP-8821", 2, 3, mutated)).await;
    assert!(
        matches!(again, IngestOutcome::Mismatch(ref r) if r.quarantine_id == report.quarantine_id)
    );
    assert_eq!(env.quarantine().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn essay_timeout_between_pages_replays_mismatches_and_keeps_history() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();

    // EXP-8821, three pages, through the real queue and the Lambda handler.
    let pages = deliver_exp8821_through_the_queue(&env, &acme, &service).await;
    let (obs77, record) = page2_observation_and_record(&env, &pages).await;

    // Lost acknowledgement: page 2 delivered again.
    lost_acknowledgement_replays_page2(&env, &acme, &service, &pages[1], &obs77).await;

    // 09:00: a new export reports quantity 4: a second observation; both stay in history.
    new_export_keeps_both_observations_in_history(&env, &acme, &service, &obs77).await;

    // EXP-8821 page 2 again, now claiming quantity 5: mismatch, quarantined, nothing overwritten.
    let (mutated, report) =
        changed_page2_is_quarantined_and_overwrites_nothing(&env, &acme, &service, &obs77, &record)
            .await;

    // Delivered once more, the mismatch is still refused and still quarantined once.
    changed_page2_again_stays_quarantined_once(&env, &acme, &service, &mutated, &report).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_duplicates_yield_one_set_and_the_same_ids_for_every_worker() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = Arc::new(env.service());
    for round in 0..20 {
        let export = format!("EXP-C{round}");
        let body = export_page(
            &export,
            1,
            1,
            vec![
                offer("AX-440-R2", round, "820.00", "2026-11-29T08:00:00Z"),
                offer("BX-100", 3, "1.00", "2026-11-29T08:00:00Z"),
            ],
        );
        let envelope = Arc::new(page_envelope(&acme, &export, 1, 1, &body));
        let barrier = Arc::new(Barrier::new(16));
        let workers: Vec<_> = (0..16)
            .map(|_| {
                let (service, envelope, barrier) =
                    (service.clone(), envelope.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    service.ingest_message(&envelope).await
                })
            })
            .collect();
        let mut ids = Vec::new();
        let mut commits = 0;
        for worker in workers {
            let outcome = worker
                .await
                .expect("worker ran")
                .expect("every worker settles");
            if matches!(outcome, IngestOutcome::Committed(_)) {
                commits += 1;
            }
            ids.push(
                outcome
                    .result()
                    .expect("committed or replayed")
                    .observation_ids
                    .clone(),
            );
        }
        assert_eq!(commits, 1, "round {round}: exactly one worker commits");
        assert!(
            ids.iter().all(|i| *i == ids[0]),
            "round {round}: every worker gets the same ids"
        );
        let key = format!("acme/acme-eu/ACC-1/{export}/1");
        assert_eq!(
            env.observations_of(&key).await.len(),
            2,
            "round {round}: one set of observations"
        );
        assert_eq!(
            env.replay(&key).await.unwrap().attempts,
            16,
            "round {round}: every attempt counted"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn identical_content_under_two_snapshot_ids_is_two_deliveries() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();
    let rows = vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")];
    let body =
        serde_json::to_vec(&serde_json::json!({"export_id": "SNAP", "page": 1, "offers": rows}))
            .unwrap();
    let a = committed(ingest(&service, &plain_envelope(&acme, "S-1042", &body)).await);
    let b = committed(ingest(&service, &plain_envelope(&acme, "S-1043", &body)).await);
    assert_eq!(a.fingerprint, b.fingerprint, "same content");
    assert_ne!(a.observation_ids, b.observation_ids);
    assert_eq!(env.observations().await.len(), 2);
}

fn reordered_pages() -> (Vec<u8>, Vec<u8>) {
    let a = offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z");
    let b = offer("BX-100", 2, "10.00", "2026-11-29T08:00:00Z");
    (
        export_page("EXP-9000", 1, 1, vec![a.clone(), b.clone()]),
        export_page("EXP-9000", 1, 1, vec![b, a]),
    )
}

async fn with_rule(env: &TestEnv, rule: CanonicalizationRule) -> ConnectorConfig {
    let config = ConnectorConfig {
        canonicalization: rule,
        ..acme_eu()
    };
    env.seed(&config).await;
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn reordered_rows_replay_under_unordered_rule_and_mismatch_under_json_v1() {
    let (forward, reverse) = reordered_pages();

    let env = spawn_env(true).await;
    let config = with_rule(&env, CanonicalizationRule::JsonUnorderedRowsV1).await;
    let service = env.service();
    let first = committed(ingest(&service, &plain_envelope(&config, "EXP-9000/1", &forward)).await);
    let second = replayed(ingest(&service, &plain_envelope(&config, "EXP-9000/1", &reverse)).await);
    assert_eq!(first.observation_ids, second.observation_ids);
    assert_eq!(env.observations().await.len(), 2);

    let env = spawn_env(true).await;
    let config = with_rule(&env, CanonicalizationRule::JsonV1).await;
    let service = env.service();
    committed(ingest(&service, &plain_envelope(&config, "EXP-9000/1", &forward)).await);
    let outcome = ingest(&service, &plain_envelope(&config, "EXP-9000/1", &reverse)).await;
    assert!(matches!(outcome, IngestOutcome::Mismatch(_)), "{outcome:?}");
    assert_eq!(env.observations().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rule_recorded_with_the_original_decides_when_the_connector_rule_changes() {
    let (forward, reverse) = reordered_pages();

    // Stored under the unordered rule; the connector then moves to json-v1: still a replay.
    let env = spawn_env(true).await;
    let config = with_rule(&env, CanonicalizationRule::JsonUnorderedRowsV1).await;
    let first = committed(
        ingest(
            &env.service(),
            &plain_envelope(&config, "EXP-9000/1", &forward),
        )
        .await,
    );
    let config = with_rule(&env, CanonicalizationRule::JsonV1).await;
    let again = replayed(
        ingest(
            &env.service(),
            &plain_envelope(&config, "EXP-9000/1", &reverse),
        )
        .await,
    );
    assert_eq!(again.observation_ids, first.observation_ids);
    assert_eq!(
        again.fingerprint.rule,
        CanonicalizationRule::JsonUnorderedRowsV1
    );

    // Stored under json-v1; the connector then moves to the unordered rule: still a mismatch.
    let env = spawn_env(true).await;
    let config = with_rule(&env, CanonicalizationRule::JsonV1).await;
    committed(
        ingest(
            &env.service(),
            &plain_envelope(&config, "EXP-9000/1", &forward),
        )
        .await,
    );
    let config = with_rule(&env, CanonicalizationRule::JsonUnorderedRowsV1).await;
    let outcome = ingest(
        &env.service(),
        &plain_envelope(&config, "EXP-9000/1", &reverse),
    )
    .await;
    match outcome {
        IngestOutcome::Mismatch(report) => {
            assert_eq!(report.stored_fingerprint.rule, CanonicalizationRule::JsonV1);
            assert_eq!(
                report.received_fingerprint.rule,
                CanonicalizationRule::JsonV1
            );
        }
        other => panic!("expected mismatch, got {other:?}"),
    }
    // A byte-identical retry after the rule change is still a replay.
    replayed(
        ingest(
            &env.service(),
            &plain_envelope(&config, "EXP-9000/1", &forward),
        )
        .await,
    );
}

pub fn big_page(export: &str, rows: usize) -> Vec<u8> {
    let offers: Vec<Value> = (0..rows)
        .map(|i| {
            offer(
                &format!("PART-{i:04}"),
                i as i64,
                "1.00",
                "2026-11-29T08:00:00Z",
            )
        })
        .collect();
    export_page(export, 1, 1, offers)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_400_row_page_commits_exactly_400_observations() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = big_page("EXP-400", 400);
    let result = committed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-400", 1, 1, &body),
        )
        .await,
    );
    assert_eq!(result.observation_ids.len(), 400);
    let key = "acme/acme-eu/ACC-1/EXP-400/1";
    let stored = env.observations_of(key).await;
    assert_eq!(stored.len(), 400);
    let record = env.replay(key).await.unwrap();
    assert_eq!(
        (record.state, record.chunks_done, record.chunks_total),
        (ReplayState::Committed, 5, 5)
    );
    // Every chunk's transaction rewrites the replay record, so it must not grow with the
    // delivery (docs/scale.md): its ids are derived, not stored.
    let raw = env
        .clients
        .dynamodb
        .get_item()
        .table_name(&env.table)
        .key("pk", AttributeValue::S(format!("DLV#{key}")))
        .key("sk", AttributeValue::S("REPLAY".into()))
        .consistent_read(true)
        .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)
        .send()
        .await
        .expect("read the raw replay item");
    let units = raw.consumed_capacity().and_then(|c| c.capacity_units());
    let item = raw.item().expect("the replay item");
    assert!(
        !item.contains_key("observation_ids"),
        "ids stored in the replay item"
    );
    assert_eq!(
        units,
        Some(1.0),
        "a 400-row replay item is read in one 4 KB unit"
    );
    let again = replayed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-400", 1, 1, &body),
        )
        .await,
    );
    assert_eq!(again.observation_ids, result.observation_ids);
    assert_eq!(env.observations_of(key).await.len(), 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_record_still_present_is_absent_and_the_new_delivery_is_flagged_beyond_horizon()
{
    // No TTL: DynamoDB Local would otherwise delete the expired record within a second.
    let env = spawn_env(false).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
    );
    let horizon = acme.horizon_seconds();
    let month_ago = env.service_with(
        Arc::new(OffsetClock(-(horizon + 86_400))),
        Arc::new(NoFaults),
    );
    let old = committed(ingest(&month_ago, &page_envelope(&acme, "EXP-8821", 2, 3, &body)).await);
    let key = "acme/acme-eu/ACC-1/EXP-8821/2";
    let expired = env
        .replay(key)
        .await
        .expect("expired record is still present");
    assert!(expired.expires_at < feedsafe::domain::timestamp::Timestamp::now().unix_seconds());

    let now = committed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-8821", 2, 3, &body),
        )
        .await,
    );
    assert_eq!(now.dedup_confidence, DedupConfidence::BeyondHorizon);
    assert_eq!(now.epoch, 1);
    assert_ne!(now.observation_ids, old.observation_ids);
    let record = env.replay(key).await.unwrap();
    let link = record
        .previous_epoch
        .expect("linked to the earlier evidence");
    assert_eq!((link.epoch, link.observation_count), (0, Some(1)));
    assert_eq!(link.fingerprint.as_ref(), Some(&old.fingerprint));
    let observations = env.observations_of(key).await;
    assert_eq!(observations.len(), 2, "earlier evidence is kept");
    let new_obs = observations
        .iter()
        .find(|o| o.observation_id == now.observation_ids[0])
        .unwrap();
    assert_eq!(new_obs.dedup_confidence, DedupConfidence::BeyondHorizon);

    // Within the new horizon, the key replays again.
    let again = replayed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-8821", 2, 3, &body),
        )
        .await,
    );
    assert_eq!(again.observation_ids, now.observation_ids);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_whose_record_was_deleted_by_ttl_is_stored_again_beyond_the_horizon() {
    let env = spawn_env(false).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
    );
    let first = committed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-8821", 2, 3, &body),
        )
        .await,
    );
    let key = "acme/acme-eu/ACC-1/EXP-8821/2";
    // What TTL does after expiry: the replay record disappears; observations stay.
    env.clients
        .dynamodb
        .delete_item()
        .table_name(&env.table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("DLV#{key}")),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("REPLAY".into()),
        )
        .send()
        .await
        .unwrap();
    let again = committed(
        ingest(
            &env.service(),
            &page_envelope(&acme, "EXP-8821", 2, 3, &body),
        )
        .await,
    );
    assert_eq!(again.epoch, 1);
    assert_eq!(again.dedup_confidence, DedupConfidence::BeyondHorizon);
    assert_ne!(again.observation_ids, first.observation_ids);
    assert_eq!(
        env.observations_of(key).await.len(),
        2,
        "both epochs' evidence kept"
    );
    let record = env.replay(key).await.unwrap();
    assert_eq!(record.previous_epoch.map(|p| p.epoch), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connector_with_a_horizon_below_one_day_cannot_be_stored() {
    let env = spawn_env(true).await;
    let zero = ConnectorConfig {
        horizon_days: 0,
        ..acme_eu()
    };
    let refused = env.store.put_connector(&zero).await;
    assert!(refused.is_err(), "a zero-day horizon was stored");
    let no_body = ConnectorConfig {
        max_body_bytes: 0,
        ..acme_eu()
    };
    assert!(env.store.put_connector(&no_body).await.is_err());
    assert!(
        env.items().await.is_empty(),
        "nothing stored: {:?}",
        env.items().await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_for_a_connector_stored_with_an_invalid_horizon_is_refused_loudly_and_nothing_is_stored(
) {
    let env = spawn_env(true).await;
    // Written past `put_connector`, as a hand edit of the table would be.
    let zero = ConnectorConfig {
        horizon_days: 0,
        ..acme_eu()
    };
    env.clients
        .dynamodb
        .put_item()
        .table_name(&env.table)
        .set_item(Some(feedsafe::aws::dynamo::connector_item(&zero).unwrap()))
        .send()
        .await
        .unwrap();
    let body = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
    );
    let outcome = env
        .service()
        .ingest_message(&page_envelope(&zero, "EXP-8821", 2, 3, &body))
        .await;
    let error = outcome.expect_err("the delivery must be retried, not settled");
    assert!(
        error.to_string().contains("horizon_days"),
        "the failure names the bad setting: {error}"
    );
    assert!(env.replay_records().await.is_empty(), "no replay record");
    assert!(env.observations().await.is_empty(), "no observation");
    assert!(
        env.quarantine().await.is_empty(),
        "not a refusal of the input"
    );
    assert!(env.object_versions("raw/").await.is_empty(), "no artifact");
}
