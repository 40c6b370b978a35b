//! The current projection and the read path, through the real DynamoDB stream.

use acceptance::*;
use feedsafe::domain::connector::{ConnectorConfig, Publication};
use feedsafe::domain::ids::{RunId, SourceAccount};
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::model::{Run, RunStatus, SourceRef};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::identity_corrections::CorrectionRequest;
use feedsafe::protocols::ingest::{IngestOutcome, IngestService};
use feedsafe::protocols::projection::ProjectionStore;
use feedsafe::protocols::source_quarantine::quarantine_source;
use std::sync::Arc;

const ITEM: &str = "AX-440-R2";

async fn ingest_ok(service: &IngestService, envelope: &[u8]) {
    let outcome = service
        .ingest_message(envelope)
        .await
        .expect("ingest settles");
    assert!(
        matches!(
            outcome,
            IngestOutcome::Committed(_) | IngestOutcome::Replayed(_)
        ),
        "{outcome:?}"
    );
}

fn quantities(offers: &impl serde::Serialize) -> Vec<(String, u64)> {
    let offers = serde_json::to_value(offers).unwrap();
    let mut out: Vec<(String, u64)> = offers["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["connector"].as_str().unwrap().to_owned(),
                o["quantity"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn history_quantities(history: &impl serde::Serialize) -> Vec<u64> {
    let history = serde_json::to_value(history).unwrap();
    history["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["quantity"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn late_backfill_is_kept_in_history_and_never_moves_the_current_offer_back() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let page = |export: &str, q: i64, at: &str| {
        page_envelope(
            &acme,
            export,
            2,
            3,
            &export_page(export, 2, 3, vec![offer(ITEM, q, "820.00", at)]),
        )
    };
    ingest_ok(&service, &page("EXP-8821", 6, "2026-11-29T08:00:00Z")).await;
    ingest_ok(&service, &page("EXP-8822", 4, "2026-11-29T09:00:00Z")).await;
    env.drain(&mut stream, &projector).await;
    let now = Timestamp::now();
    assert_eq!(
        quantities(&query.offers(&env.reader(), ITEM, None, now).await.unwrap()),
        vec![("acme-eu".into(), 4)]
    );

    // A late delivery observed at 07:00 with quantity 9.
    ingest_ok(&service, &page("EXP-8820", 9, "2026-11-29T07:00:00Z")).await;
    env.drain(&mut stream, &projector).await;
    let offers = query.offers(&env.reader(), ITEM, None, now).await.unwrap();
    let offers = serde_json::to_value(offers).unwrap();
    assert_eq!(
        quantities(&offers),
        vec![("acme-eu".into(), 4)],
        "the current offer stays quantity 4"
    );
    let history = query.history(&env.reader(), ITEM, None, 50).await.unwrap();
    let history = serde_json::to_value(history).unwrap();
    assert_eq!(
        history_quantities(&history),
        vec![4, 6, 9],
        "history holds it, newest first"
    );
}

/// The run of export EXP-7000, three pages, started as the poller starts it.
async fn start_run(env: &TestEnv, config: &ConnectorConfig, run_id: &RunId) {
    let started = Timestamp::now();
    env.store
        .start_run(&Run {
            run_id: run_id.clone(),
            tenant: config.tenant.clone(),
            connector: config.connector.clone(),
            status: None,
            credential_ref: Some("secret:acme-eu/export-token".into()),
            started_at: Some(started),
            deadline: Some(started.unix_seconds() + 2),
            page_count: Some(3),
            pages_seen: 0,
            missing_pages: vec![],
            missing_count: 0,
            completed_at: None,
            updated_at: started,
            publication: Some(config.publication),
        })
        .await
        .unwrap();
}

/// Page `n` of EXP-7000 (one claim about `sku`), as the poller enqueues it under its run
/// (`run-acme-eu.EXP-7000`).
fn run_page(config: &ConnectorConfig, n: u32, sku: &str) -> Vec<u8> {
    let body = export_page(
        "EXP-7000",
        n,
        3,
        vec![offer(sku, i64::from(n), "10.00", "2026-11-29T08:00:00Z")],
    );
    page_envelope(config, "EXP-7000", n, 3, &body)
}

/// Page 3 keeps failing (its archive write fails) until the queue dead-letters it.
async fn dead_letter(env: &TestEnv, page: &[u8]) {
    let (dynamodb, _) = engine_endpoints();
    let broken = feedsafe::aws::AwsClients::local(&dynamodb, "http://127.0.0.1:9");
    let failing_archive = IngestService::new(
        env.store.clone(),
        Arc::new(feedsafe::aws::s3::S3ArtifactStore::new(
            broken.s3,
            &env.bucket,
        )),
        env.store.clone(),
        Arc::new(feedsafe::protocols::ports::SystemClock),
        Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    env.send("IngestQueue", page).await;
    for _ in 0..60 {
        env.pump_once("IngestQueue", &failing_archive, 1).await;
        if env.queue_depth("IngestDLQ").await.0 == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert!(env.replay("acme/acme-eu/ACC-1/EXP-7000/3").await.is_none());
    assert_eq!(
        env.queue_depth("IngestDLQ").await.0,
        1,
        "page 3 is in the DLQ"
    );
}

/// Pumps the ingest queue until `count` messages were handled, none failing.
async fn ingested(env: &TestEnv, service: &IngestService, count: usize) {
    let mut handled = 0;
    while handled < count {
        let (received, failed) = env.pump_once("IngestQueue", service, 1).await;
        assert_eq!(failed, 0);
        handled += received;
    }
}

/// Moves every message of the DLQ back to the ingest queue.
async fn redrive(env: &TestEnv) {
    let dlq = env.resources.queue("IngestDLQ").unwrap().url.clone();
    let moved = env
        .clients
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    for m in moved.messages.unwrap_or_default() {
        env.send("IngestQueue", m.body().unwrap().as_bytes()).await;
        env.clients
            .sqs
            .delete_message()
            .queue_url(&dlq)
            .receipt_handle(m.receipt_handle().unwrap())
            .send()
            .await
            .unwrap();
    }
}

/// The deadline passes: the sweeper names page 3 as missing.
async fn swept_incomplete(env: &TestEnv, run_id: &RunId) {
    let swept = env
        .store
        .sweep_runs(Timestamp::now().plus_seconds(5))
        .await
        .unwrap();
    assert_eq!(swept.len(), 1);
    let run = env.store.run(run_id.as_str()).await.unwrap().unwrap();
    assert_eq!(run.status, Some(RunStatus::Incomplete));
    assert_eq!(run.missing_pages, vec![3]);
    assert_eq!(
        run.credential_ref.as_deref(),
        Some("secret:acme-eu/export-token")
    );
}

async fn partial_run(publication: Publication) {
    let env = spawn_env(true).await;
    let config = connector("acme-eu", "ACC-1", publication);
    env.seed(&config).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let run_id = RunId::parse("run-acme-eu.EXP-7000").unwrap();
    start_run(&env, &config, &run_id).await;
    // Pages 1 and 2 commit; page 3 is dead-lettered.
    env.send("IngestQueue", &run_page(&config, 1, "P-1")).await;
    env.send("IngestQueue", &run_page(&config, 2, "P-2")).await;
    ingested(&env, &service, 2).await;
    dead_letter(&env, &run_page(&config, 3, "P-3")).await;
    env.drain(&mut stream, &projector).await;
    swept_incomplete(&env, &run_id).await;
    let now = Timestamp::now();
    let visible = |sku: &'static str| {
        let query = query.clone();
        let principal = env.reader();
        async move {
            !serde_json::to_value(query.offers(&principal, sku, None, now).await.unwrap()).unwrap()
                ["offers"]
                .as_array()
                .unwrap()
                .is_empty()
        }
    };
    let history_len = |sku: &'static str| {
        let query = query.clone();
        let principal = env.reader();
        async move {
            serde_json::to_value(query.history(&principal, sku, None, 50).await.unwrap()).unwrap()
                ["observations"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    let excluded = |sku: &'static str| {
        let query = query.clone();
        let principal = env.reader();
        async move {
            let answer = query.offers(&principal, sku, None, now).await.unwrap();
            serde_json::to_value(answer).unwrap()["excluded_sources"].clone()
        }
    };
    match publication {
        Publication::PerPage => {
            assert!(
                visible("P-1").await && visible("P-2").await,
                "per_page shows pages 1-2"
            );
            assert_eq!(history_len("P-1").await, 1);
            assert!(excluded("P-1").await.is_null());
        }
        Publication::OnRunComplete => {
            assert!(
                !visible("P-1").await && !visible("P-2").await,
                "on_run_complete shows nothing yet"
            );
            assert_eq!(history_len("P-1").await, 0, "not in history either");
            the_unpublished_run_is_named(&env, &query, &run_id, now).await;
        }
    }
    assert!(!visible("P-3").await);

    // Redrive page 3 from the DLQ; now it commits, the run completes, everything is visible.
    redrive(&env).await;
    let (received, failed) = env.pump_once("IngestQueue", &service, 1).await;
    assert_eq!((received, failed), (1, 0));
    env.drain(&mut stream, &projector).await;
    let run = env.store.run(run_id.as_str()).await.unwrap().unwrap();
    assert_eq!(run.status, Some(RunStatus::Complete));
    assert!(run.missing_pages.is_empty());
    assert!(visible("P-1").await && visible("P-2").await && visible("P-3").await);
    assert!(excluded("P-1").await.is_null(), "published: an offer now");
}

/// An `on_run_complete` source whose run is not published is named in the offers answer with
/// its run, not left out in silence; the answer as of that instant is the same.
async fn the_unpublished_run_is_named(
    env: &TestEnv,
    query: &feedsafe::protocols::query::QueryService,
    run_id: &RunId,
    now: Timestamp,
) {
    let live = query.offers(&env.reader(), "P-1", None, now).await.unwrap();
    let excluded = serde_json::to_value(&live.excluded_sources).unwrap();
    assert_eq!(excluded.as_array().map(Vec::len), Some(1), "{excluded}");
    assert_eq!(
        (
            &excluded[0]["connector"],
            &excluded[0]["reason"],
            &excluded[0]["run_id"]
        ),
        (
            &serde_json::json!("acme-eu"),
            &serde_json::json!("run_unpublished"),
            &serde_json::json!(run_id.as_str())
        )
    );
    let asked = feedsafe::protocols::query::OffersAsked {
        max_age_seconds: None,
        quantity: None,
        as_of: Some(now),
    };
    let then = query
        .offers_as_asked(&env.reader(), "P-1", &asked, now)
        .await
        .unwrap();
    assert_eq!(then.digest(), live.digest(), "as of that instant, the same");
}

#[tokio::test(flavor = "multi_thread")]
async fn partial_pagination_per_page_shows_committed_pages_of_an_incomplete_run() {
    partial_run(Publication::PerPage).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partial_pagination_on_run_complete_shows_nothing_until_the_last_page_commits() {
    partial_run(Publication::OnRunComplete).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_correction_supersedes_without_rewriting_the_raw_artifact() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let body = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440", 6, "820.00", "2026-11-29T08:00:00Z")],
    );
    ingest_ok(&service, &page_envelope(&acme, "EXP-8821", 2, 3, &body)).await;
    env.drain(&mut stream, &projector).await;
    let now = Timestamp::now();
    let before = query
        .offers(&env.reader(), "AX-440", None, now)
        .await
        .unwrap();
    let before = serde_json::to_value(before).unwrap();
    assert_eq!(quantities(&before).len(), 1);
    let original = env.observations().await.remove(0);
    let versions_before = env.object_versions(&original.artifact_key).await;

    let source = SourceRef {
        tenant: acme.tenant.clone(),
        connector: acme.connector.clone(),
        source_account: acme.source_account.clone(),
    };
    let request = CorrectionRequest {
        source,
        from_item: "AX-440".into(),
        to_item: CanonicalItem::parse_key("AX-440-R2").unwrap(),
        reason: "manufacturer confirmed revision R2".into(),
        actor: None,
    };
    let (correction, recorded) = env.corrections().correct(&request).await.unwrap();
    assert!(recorded);
    assert_eq!(
        correction.superseded_observations,
        vec![original.observation_id.clone()]
    );
    let (again, recorded) = env.corrections().correct(&request).await.unwrap();
    assert!(!recorded, "the same correction, run again");
    assert_eq!(
        again.superseded_observations, correction.superseded_observations,
        "idempotent: nothing superseded twice"
    );
    env.drain(&mut stream, &projector).await;

    assert!(serde_json::to_value(
        query
            .offers(&env.reader(), "AX-440", None, now)
            .await
            .unwrap()
    )
    .unwrap()["offers"]
        .as_array()
        .unwrap()
        .is_empty());
    let corrected = query
        .offers(&env.reader(), "AX-440-R2", None, now)
        .await
        .unwrap();
    let corrected = serde_json::to_value(corrected).unwrap();
    let offer = &corrected["offers"][0];
    assert_eq!(offer["quantity"], 6);
    assert_eq!(offer["delivery_key"], original.delivery_key.as_str());
    let old_history = query
        .history(&env.reader(), "AX-440", None, 50)
        .await
        .unwrap();
    let old_history = serde_json::to_value(old_history).unwrap();
    let old_entry = &old_history["observations"][0];
    assert_eq!(old_entry["superseded"], true);
    let new_id = old_entry["superseded_by"].as_str().unwrap().to_owned();
    let new_entry = query.observation(&env.reader(), &new_id).await.unwrap();
    let new_entry = serde_json::to_value(new_entry).unwrap();
    assert_eq!(new_entry["supersedes"], original.observation_id.as_str());
    assert_eq!(
        new_entry["provenance"]["artifact_sha256"],
        original.artifact_sha256.as_str()
    );
    // The raw artifact is the same object, byte for byte.
    assert_eq!(
        env.object_versions(&original.artifact_key).await,
        versions_before
    );
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&env.read_object(&original.artifact_key).await),
        original.artifact_sha256
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn quarantining_one_source_leaves_the_other_current_and_history_keeps_both() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    let beta = connector("beta-eu", "ACC-9", Publication::PerPage);
    env.seed(&acme).await;
    env.seed(&beta).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let body = |q| {
        export_page(
            "EXP-1",
            1,
            1,
            vec![offer(ITEM, q, "820.00", "2026-11-29T08:00:00Z")],
        )
    };
    ingest_ok(&service, &page_envelope(&acme, "EXP-1", 1, 1, &body(6))).await;
    ingest_ok(&service, &page_envelope(&beta, "EXP-1", 1, 1, &body(3))).await;
    env.drain(&mut stream, &projector).await;
    let now = Timestamp::now();
    assert_eq!(
        quantities(&query.offers(&env.reader(), ITEM, None, now).await.unwrap()),
        vec![("acme-eu".into(), 6), ("beta-eu".into(), 3)]
    );

    let source = SourceRef {
        tenant: acme.tenant.clone(),
        connector: acme.connector.clone(),
        source_account: SourceAccount::parse("ACC-1").unwrap(),
    };
    quarantine_source(
        env.store.as_ref(),
        &source,
        "supplier disputes its own feed",
        None,
        now,
    )
    .await
    .unwrap();
    env.drain(&mut stream, &projector).await;
    assert_eq!(
        quantities(&query.offers(&env.reader(), ITEM, None, now).await.unwrap()),
        vec![("beta-eu".into(), 3)]
    );
    // The quarantined source's row is suppressed, not deleted: it keeps tracking the source's
    // newest claim so that lifting the quarantine restores it through the projector.
    let rows = env
        .projection_store()
        .offers(&acme.tenant, "AX-440-R2~each~new")
        .await
        .unwrap();
    let suppressed: Vec<(String, bool)> = rows
        .iter()
        .map(|r| (r.observation.connector.to_string(), r.source_quarantined))
        .collect();
    assert_eq!(
        suppressed,
        vec![("acme-eu".into(), true), ("beta-eu".into(), false)],
        "the quarantined source's row is marked and served to no reader"
    );
    let history = query.history(&env.reader(), ITEM, None, 50).await.unwrap();
    let history = serde_json::to_value(history).unwrap();
    let mut kept = history_quantities(&history);
    kept.sort();
    assert_eq!(kept, vec![3, 6], "history keeps both");
}

/// A claim observed later than it was retrieved (beyond the connector's
/// clock-skew tolerance, 5 minutes by default) is kept in history, flagged, and never current.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_from_the_future_is_kept_flagged_in_history_and_never_made_current() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let now = Timestamp::now();
    let at = |seconds: i64| now.plus_seconds(seconds).to_rfc3339();
    let page = |export: &str, q: i64, observed: String| {
        plain_envelope(
            &acme,
            export,
            &export_page(export, 1, 1, vec![offer(ITEM, q, "820.00", &observed)]),
        )
    };
    // An ordinary claim from an hour ago, one two minutes ahead of its retrieval (within the
    // tolerance) and one a day ahead (a supplier clock or data error).
    ingest_ok(&service, &page("F-1", 3, at(-3600))).await;
    ingest_ok(&service, &page("F-2", 4, at(120))).await;
    ingest_ok(&service, &page("F-3", 99, at(86_400))).await;
    env.drain(&mut stream, &projector).await;

    let offers = query.offers(&env.reader(), ITEM, None, now).await.unwrap();
    let offers = serde_json::to_value(offers).unwrap();
    assert_eq!(
        quantities(&offers),
        vec![("acme-eu".into(), 4)],
        "the claim within the tolerance is current; the one from the future is not"
    );
    let history = query.history(&env.reader(), ITEM, None, 50).await.unwrap();
    let history = serde_json::to_value(history).unwrap();
    let flags: Vec<(u64, bool)> = history["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["quantity"].as_u64().unwrap(),
                o["future_dated"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(flags, vec![(99, true), (4, false), (3, false)]);
    let future = &history["observations"][0];
    assert_eq!(future["current_eligibility"], "future_dated");
    // A rebuild agrees.
    let rebuilt = env.extra_projection_table().await;
    env.projector_into(rebuilt.clone())
        .rebuild_item(&acme.tenant, "AX-440-R2~each~new")
        .await
        .unwrap();
    let rows = rebuilt
        .offers(&acme.tenant, "AX-440-R2~each~new")
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].observation.quantity, 4);
}

/// Pages 1 and 2 of a 3-page run started under `started_with`, ingested and projected after
/// the connector's policy was changed to the other one; whether P-1 is readable.
async fn readable_after_the_policy_changed(started_with: Publication) -> (bool, serde_json::Value) {
    let env = spawn_env(true).await;
    let config = connector("acme-eu", "ACC-1", started_with);
    env.seed(&config).await;
    let (service, projector, query) = (env.service(), env.projector(), env.query());
    let mut stream = env.stream().await;
    let run_id = RunId::parse("run-acme-eu.EXP-7000").unwrap();
    start_run(&env, &config, &run_id).await;
    let changed = match started_with {
        Publication::PerPage => Publication::OnRunComplete,
        Publication::OnRunComplete => Publication::PerPage,
    };
    let changed = connector("acme-eu", "ACC-1", changed);
    env.seed(&changed).await;
    // A pull resumed after the change announces the run again under the new policy: the run
    // keeps the one it recorded.
    start_run(&env, &changed, &run_id).await;
    let run = env.store.run(run_id.as_str()).await.unwrap().unwrap();
    assert_eq!(run.publication, Some(started_with));
    env.send("IngestQueue", &run_page(&config, 1, "P-1")).await;
    env.send("IngestQueue", &run_page(&config, 2, "P-2")).await;
    ingested(&env, &service, 2).await;
    env.drain(&mut stream, &projector).await;
    let now = Timestamp::now();
    let live = query.offers(&env.reader(), "P-1", None, now).await.unwrap();
    let asked = feedsafe::protocols::query::OffersAsked {
        as_of: Some(now),
        ..Default::default()
    };
    let then = query
        .offers_as_asked(&env.reader(), "P-1", &asked, now)
        .await
        .unwrap();
    assert_eq!(then.digest(), live.digest(), "as of that instant, the same");
    let live = serde_json::to_value(live).unwrap();
    (!live["offers"].as_array().unwrap().is_empty(), live)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_keeps_the_publication_policy_it_started_with() {
    let (readable, answer) = readable_after_the_policy_changed(Publication::OnRunComplete).await;
    assert!(
        !readable,
        "started on_run_complete: private until complete: {answer}"
    );
    assert_eq!(answer["excluded_sources"][0]["reason"], "run_unpublished");
    let (readable, answer) = readable_after_the_policy_changed(Publication::PerPage).await;
    assert!(
        readable,
        "started per_page: its pages are readable as they commit: {answer}"
    );
}
