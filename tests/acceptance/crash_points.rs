//! One test per row of docs/crash-points.md: crash there, deliver again, check the invariants.

use crate::ingest::big_page;
use acceptance::*;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::AwsClients;
use feedsafe::domain::model::{ReplayRecord, ReplayState};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ingest::{artifact_key, IngestError, IngestOutcome, IngestService};
use feedsafe::protocols::ports::{
    ArtifactWrite, ChunkOutcome, ChunkWrite, CrashPoint, EvidenceStore, NoFaults, ReplayAction,
    SystemClock,
};
use std::sync::Arc;

const PAGE2: &str = "acme/acme-eu/ACC-1/EXP-8821/2";

fn page2() -> Vec<u8> {
    export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z")],
    )
}

async fn crash_then_redeliver(point: CrashPoint) -> (TestEnv, IngestOutcome) {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let envelope = page_envelope(&acme, "EXP-8821", 2, 3, &page2());
    let crash = CrashOnce::at(point);
    let crashing = env.service_with(Arc::new(SystemClock), crash.clone());
    let err = crashing
        .ingest_message(&envelope)
        .await
        .expect_err("the attempt dies");
    assert!(
        matches!(err, IngestError::InjectedCrash(p) if p == point),
        "{err:?}"
    );
    assert!(crash.fired());
    let outcome = crashing
        .ingest_message(&envelope)
        .await
        .expect("redelivery settles");
    (env, outcome)
}

async fn assert_one_committed_delivery(env: &TestEnv) -> ReplayRecord {
    let record = env.replay(PAGE2).await.expect("replay record");
    assert_eq!(record.state, ReplayState::Committed);
    let observations = env.observations_of(PAGE2).await;
    assert_eq!(observations.len(), 1, "exactly one observation");
    assert_eq!(observations[0].observation_id, record.observation_ids[0]);
    // Invariant 3: the observation's artifact exists and hashes to its sha256.
    let bytes = env.read_object(&observations[0].artifact_key).await;
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&bytes),
        observations[0].artifact_sha256
    );
    record
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_before_the_archive_leaves_nothing_and_the_retry_stores_it() {
    let (env, outcome) = crash_then_redeliver(CrashPoint::BeforeArtifact).await;
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
    assert_eq!(assert_one_committed_delivery(&env).await.attempts, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_after_the_archive_before_the_transaction_reuses_the_artifact() {
    let (env, outcome) = crash_then_redeliver(CrashPoint::AfterArtifact).await;
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
    let record = assert_one_committed_delivery(&env).await;
    let versions = env.object_versions(&record.artifact_key).await;
    assert_eq!(
        versions.len(),
        1,
        "the artifact was reused, not written again: {versions:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn archive_failure_stores_no_observation_and_no_replay_record() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let (dynamodb, _) = engine_endpoints();
    // An S3 endpoint nobody listens on: the archive write really fails.
    let broken = AwsClients::local(&dynamodb, "http://127.0.0.1:9");
    let service = IngestService::new(
        env.store.clone(),
        Arc::new(S3ArtifactStore::new(broken.s3, &env.bucket)),
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let envelope = page_envelope(&acme, "EXP-8821", 2, 3, &page2());
    let err = service
        .ingest_message(&envelope)
        .await
        .expect_err("archive unavailable");
    assert!(matches!(err, IngestError::Artifact(_)), "{err:?}");
    assert!(env.replay(PAGE2).await.is_none());
    assert!(env.observations().await.is_empty());
    assert!(env
        .store
        .run("run-acme-eu.EXP-8821")
        .await
        .unwrap()
        .is_none());
    // Once the archive is back, the redelivery stores it.
    let outcome = env.service().ingest_message(&envelope).await.unwrap();
    assert!(matches!(outcome, IngestOutcome::Committed(_)));
    assert_one_committed_delivery(&env).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_artifact_that_fails_verification_blocks_the_commit() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = page2();
    // Other bytes already stand under the deterministic key (a corrupted earlier write).
    let key = artifact_key(
        &delivery_key(&acme, "EXP-8821/2"),
        &feedsafe::domain::hashing::sha256_hex(&body),
    );
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(&key)
        .body(b"corrupted".to_vec().into())
        .send()
        .await
        .unwrap();
    let err = env
        .service()
        .ingest_message(&page_envelope(&acme, "EXP-8821", 2, 3, &body))
        .await
        .expect_err("verification fails");
    assert!(
        matches!(
            err,
            IngestError::Artifact(feedsafe::protocols::ports::ArtifactError::Corrupt { .. })
        ),
        "{err:?}"
    );
    assert!(env.replay(PAGE2).await.is_none());
    assert!(env.observations().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_after_the_second_chunk_of_400_rows_resumes_to_exactly_400() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = big_page("EXP-400", 400);
    let envelope = page_envelope(&acme, "EXP-400", 1, 1, &body);
    let key = "acme/acme-eu/ACC-1/EXP-400/1";
    let crash = CrashOnce::at(CrashPoint::AfterChunk(2));
    let crashing = env.service_with(Arc::new(SystemClock), crash.clone());
    let err = crashing
        .ingest_message(&envelope)
        .await
        .expect_err("dies after chunk 2");
    assert!(matches!(
        err,
        IngestError::InjectedCrash(CrashPoint::AfterChunk(2))
    ));

    // Nothing reads as committed: the record is PENDING and vouches only for the first chunk;
    // the second is written, and the third and fourth, written at the same time, may be too
    // (the crash cut them off in flight). Chunks are whole: never a part of one.
    let pending = env.replay(key).await.unwrap();
    assert_eq!(
        (pending.state, pending.chunks_done, pending.chunks_total),
        (ReplayState::Pending, 1, 5)
    );
    assert!(pending.committed_at.is_none());
    let stored_at_crash = env.observations_of(key).await.len();
    assert!(
        [2 * 98, 3 * 98, 4 * 98].contains(&stored_at_crash),
        "whole chunks, the last not written: {stored_at_crash}"
    );
    assert!(
        env.store
            .run_pages("run-acme-eu.EXP-400")
            .await
            .unwrap()
            .pages
            .is_empty(),
        "run page not yet committed"
    );

    let outcome = crashing
        .ingest_message(&envelope)
        .await
        .expect("redelivery resumes");
    let result = match outcome {
        IngestOutcome::Committed(r) => r,
        other => panic!("expected the resume to commit, got {other:?}"),
    };
    assert_eq!(result.observation_ids.len(), 400);
    assert_eq!(result.attempts, 2);
    let stored = env.observations_of(key).await;
    assert_eq!(stored.len(), 400);
    let mut ids: Vec<_> = stored.iter().map(|o| o.observation_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400);
    let record = env.replay(key).await.unwrap();
    assert_eq!(
        (record.state, record.chunks_done),
        (ReplayState::Committed, 5)
    );
    assert_eq!(
        env.store
            .run_pages("run-acme-eu.EXP-400")
            .await
            .unwrap()
            .committed()
            .into_iter()
            .collect::<Vec<_>>(),
        vec![1]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_after_commit_before_the_acknowledgement_returns_the_replay_result() {
    let (env, outcome) = crash_then_redeliver(CrashPoint::AfterCommit).await;
    let result = match outcome {
        IngestOutcome::Replayed(r) => r,
        other => panic!("expected replayed, got {other:?}"),
    };
    let record = assert_one_committed_delivery(&env).await;
    assert_eq!(result.observation_ids, record.observation_ids);
    assert_eq!(record.attempts, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_transaction_response_retried_with_the_same_token_writes_nothing_twice() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let committed = env
        .service()
        .ingest_message(&page_envelope(&acme, "EXP-8821", 2, 3, &page2()))
        .await
        .unwrap();
    assert!(matches!(committed, IngestOutcome::Committed(_)));
    let record = env.replay(PAGE2).await.unwrap();
    let observation = env.observations_of(PAGE2).await.remove(0);
    // The SDK resends the identical request when a response is lost: same token, same items.
    let other_key = delivery_key(&acme, "T/1");
    let other_observation = feedsafe::domain::model::Observation {
        observation_id: feedsafe::domain::ids::ObservationId::derive(&other_key, 0, 0),
        delivery_key: other_key.as_string(),
        ..observation.clone()
    };
    let chunk = ChunkWrite {
        token: "lost-response-token-0001".into(),
        replay: Some(ReplayAction::Create {
            record: Box::new(ReplayRecord {
                delivery_key: other_key.as_string(),
                observation_ids: vec![other_observation.observation_id.clone()],
                ..record.clone()
            }),
            replacing: None,
        }),
        observations: vec![other_observation],
        witnesses: Vec::new(),
        run_page: None,
        commit_marker: None,
    };
    let now = Timestamp::now();
    assert!(matches!(
        env.store.write_chunk(&chunk, now).await.unwrap(),
        ChunkOutcome::Written
    ));
    assert!(
        matches!(
            env.store.write_chunk(&chunk, now).await.unwrap(),
            ChunkOutcome::Written
        ),
        "absorbed by the token"
    );
    // Without the token's protection, the same write is refused by the replay condition.
    let retry_without_token = ChunkWrite {
        token: "another-token-000000001".into(),
        ..chunk
    };
    assert!(matches!(
        env.store
            .write_chunk(&retry_without_token, now)
            .await
            .unwrap(),
        ChunkOutcome::ReplayConditionFailed(Some(_))
    ));
    assert_eq!(
        env.observations_of(&other_key.as_string()).await.len(),
        1,
        "written once"
    );
    // The original delivery is untouched throughout.
    assert_eq!(env.replay(PAGE2).await.unwrap(), record);
    assert_eq!(env.observations_of(PAGE2).await, vec![observation]);
}

async fn mismatch_after_crash(point: CrashPoint) {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    env.service()
        .ingest_message(&page_envelope(&acme, "EXP-8821", 2, 3, &page2()))
        .await
        .unwrap();
    let before = env.observations_of(PAGE2).await;
    let mutated = export_page(
        "EXP-8821",
        2,
        3,
        vec![offer("AX-440-R2", 5, "820.00", "2026-11-29T08:00:00Z")],
    );
    let envelope = page_envelope(&acme, "EXP-8821", 2, 3, &mutated);
    let crashing = env.service_with(Arc::new(SystemClock), CrashOnce::at(point));
    let err = crashing.ingest_message(&envelope).await.expect_err("dies");
    assert!(matches!(err, IngestError::InjectedCrash(p) if p == point));
    let outcome = crashing
        .ingest_message(&envelope)
        .await
        .expect("redelivery settles");
    assert!(matches!(outcome, IngestOutcome::Mismatch(_)), "{outcome:?}");
    let entries = env.quarantine().await;
    assert_eq!(entries.len(), 1, "quarantined exactly once");
    assert_eq!(env.read_object(&entries[0].evidence_key).await, mutated);
    assert_eq!(
        env.observations_of(PAGE2).await,
        before,
        "stored observations untouched"
    );
    let versions = env.object_versions(&entries[0].evidence_key).await;
    assert_eq!(
        versions.len(),
        1,
        "the mismatch artifact was reused on redelivery"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_before_the_quarantine_entry_quarantines_once_on_redelivery() {
    mismatch_after_crash(CrashPoint::BeforeQuarantineEntry).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_after_the_quarantine_entry_quarantines_once_on_redelivery() {
    mismatch_after_crash(CrashPoint::AfterQuarantineEntry).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_after_a_rejection_is_recorded_records_it_once() {
    let env = spawn_env(true).await;
    let message = b"{\"not\": \"an envelope\"}";
    let crashing = env.service_with(
        Arc::new(SystemClock),
        CrashOnce::at(CrashPoint::AfterQuarantineEntry),
    );
    crashing
        .ingest_message(message)
        .await
        .expect_err("dies after recording");
    let outcome = crashing.ingest_message(message).await.unwrap();
    assert!(matches!(outcome, IngestOutcome::Rejected(_)));
    assert_eq!(env.quarantine().await.len(), 1);
    assert_eq!(env.object_versions("rejected/").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_existing_identical_artifact_is_reused_by_the_store() {
    let env = spawn_env(true).await;
    let meta = feedsafe::protocols::ports::ArtifactMeta {
        content_type: "application/json".into(),
        delivery_key: None,
        retrieved_at: Timestamp::now(),
    };
    let body = b"literal bytes";
    let digest = feedsafe::domain::hashing::sha256(body);
    use feedsafe::protocols::ports::ArtifactStore;
    assert_eq!(
        env.artifacts
            .put_verified("raw/x", body, &digest, &meta)
            .await
            .unwrap(),
        ArtifactWrite::Created
    );
    assert_eq!(
        env.artifacts
            .put_verified("raw/x", body, &digest, &meta)
            .await
            .unwrap(),
        ArtifactWrite::AlreadyStored
    );
    env.artifacts
        .verify("raw/x", &digest)
        .await
        .expect("same bytes verify");
    let other = feedsafe::domain::hashing::sha256(b"other bytes");
    assert!(matches!(
        env.artifacts.verify("raw/x", &other).await,
        Err(feedsafe::protocols::ports::ArtifactError::Corrupt { .. })
    ));
    assert_eq!(env.object_versions("raw/x").await.len(), 1);
}

/// The attempt counter counts deliveries (one per received message), not the
/// protocol's internal re-probes. A resume that meets a conflicting writer backs off and probes
/// the record again; that second probe must not count a second attempt.
/// Row 6, the gap: the chunks after the first are written at the same time, so an attempt can
/// die with a later chunk stored and an earlier one not. The redelivery writes exactly the
/// missing chunk, skips the stored ones, and commits 400 observations, each once.
#[tokio::test(flavor = "multi_thread")]
async fn a_staged_delivery_missing_a_middle_chunk_resumes_to_exactly_400() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = big_page("EXP-402", 400);
    let envelope = page_envelope(&acme, "EXP-402", 1, 1, &body);
    let key = delivery_key(&acme, "EXP-402/1");
    // Chunks: rows 0-97 (with the record), 98-195, 196-293, 294-391 at once, 392-399 commit.
    // The third chunk is lost after the second and the fourth have been answered.
    let losing = ChunkSeam::lose_chunk_once(
        env.store.clone(),
        feedsafe::domain::ids::ObservationId::derive(&key, 0, 196),
        2,
    );
    let service = |store: Arc<dyn EvidenceStore>| {
        IngestService::new(
            store,
            env.artifacts.clone(),
            env.store.clone(),
            Arc::new(SystemClock),
            Arc::new(NoFaults),
        )
    };
    let err = service(losing)
        .ingest_message(&envelope)
        .await
        .expect_err("the lost chunk fails the attempt");
    assert!(matches!(err, IngestError::Store(_)), "{err:?}");
    let pending = env.replay(&key.as_string()).await.unwrap();
    assert_eq!(pending.state, ReplayState::Pending);
    let rows_at_failure: Vec<u32> = env
        .observations_of(&key.as_string())
        .await
        .iter()
        .map(|o| o.row_index)
        .collect();
    let expected_gap: Vec<u32> = (0..196).chain(294..392).collect();
    assert_eq!(
        rows_at_failure, expected_gap,
        "a later chunk stored, an earlier one not"
    );

    let outcome = service(env.store.clone())
        .ingest_message(&envelope)
        .await
        .expect("the redelivery resumes");
    let result = match outcome {
        IngestOutcome::Committed(r) => r,
        other => panic!("expected the resume to commit, got {other:?}"),
    };
    assert_eq!((result.observation_ids.len(), result.attempts), (400, 2));
    let stored = env.observations_of(&key.as_string()).await;
    let rows: Vec<u32> = stored.iter().map(|o| o.row_index).collect();
    assert_eq!(rows, (0..400).collect::<Vec<u32>>(), "every row once");
    let record = env.replay(&key.as_string()).await.unwrap();
    assert_eq!(
        (record.state, record.chunks_done),
        (ReplayState::Committed, 5)
    );
}

/// The commit's guard: it flips the record only if every chunk it did not write itself is
/// stored (a witness observation of each). A commit asked for with a chunk missing is refused
/// and publishes nothing: the record stays `PENDING`, no commit marker, no run page.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_with_a_chunk_missing_is_refused_and_publishes_nothing() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = big_page("EXP-403", 400);
    let envelope = page_envelope(&acme, "EXP-403", 1, 1, &body);
    let key = delivery_key(&acme, "EXP-403/1");
    // Only the first chunk and the PENDING record are written.
    env.service_with(
        Arc::new(SystemClock),
        CrashOnce::at(CrashPoint::AfterChunk(1)),
    )
    .ingest_message(&envelope)
    .await
    .expect_err("dies after the first chunk");
    let pending = env.replay(&key.as_string()).await.unwrap();
    assert_eq!(pending.state, ReplayState::Pending);
    let now = Timestamp::now();
    let commit = ChunkWrite {
        token: "commit-without-chunks-0001".into(),
        replay: Some(ReplayAction::Commit {
            delivery_key: pending.delivery_key.clone(),
            fingerprint: pending.fingerprint.clone(),
            epoch: pending.epoch,
            chunks_total: pending.chunks_total,
            commit_at: now,
        }),
        observations: Vec::new(),
        witnesses: [98usize, 196, 294, 392]
            .iter()
            .map(|&row| pending.observation_ids[row].clone())
            .collect(),
        run_page: None,
        commit_marker: Some(feedsafe::domain::model::CommitMarker {
            delivery_key: pending.delivery_key.clone(),
            epoch: pending.epoch,
            observation_count: 400,
            committed_at: now,
        }),
    };
    let outcome = env.store.write_chunk(&commit, now).await.unwrap();
    assert!(
        matches!(outcome, ChunkOutcome::WitnessMissing),
        "{outcome:?}"
    );
    let after = env.replay(&key.as_string()).await.unwrap();
    assert_eq!(
        (after.state, after.committed_at),
        (ReplayState::Pending, None)
    );
    let marker_pk = aws_sdk_dynamodb::types::AttributeValue::S(
        feedsafe::aws::dynamo::commit_marker_pk(&pending.delivery_key, 0),
    );
    let items = env.items().await;
    assert!(
        !items.iter().any(|i| i.get("pk") == Some(&marker_pk)),
        "no commit marker"
    );
    // The redelivery writes the missing chunks and commits.
    let result = env.service().ingest_message(&envelope).await.unwrap();
    assert!(matches!(result, IngestOutcome::Committed(_)), "{result:?}");
    assert_eq!(env.observations_of(&key.as_string()).await.len(), 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_that_backs_off_and_probes_again_counts_its_delivery_once() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let body = big_page("EXP-401", 400);
    let envelope = page_envelope(&acme, "EXP-401", 1, 1, &body);
    let key = "acme/acme-eu/ACC-1/EXP-401/1";
    let crashing = env.service_with(
        Arc::new(SystemClock),
        CrashOnce::at(CrashPoint::AfterChunk(2)),
    );
    crashing
        .ingest_message(&envelope)
        .await
        .expect_err("the first delivery dies after chunk 2");
    assert_eq!(env.replay(key).await.unwrap().attempts, 1);

    // The second delivery of the message resumes, meets a conflict once, backs off, re-probes.
    let contended = ChunkSeam::contended_commit_once(env.store.clone());
    let service = feedsafe::protocols::ingest::IngestService::new(
        contended,
        env.artifacts.clone(),
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    let outcome = service
        .ingest_message(&envelope)
        .await
        .expect("the redelivery commits");
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
    let record = env.replay(key).await.unwrap();
    assert_eq!(record.state, ReplayState::Committed);
    assert_eq!(
        record.attempts, 2,
        "two deliveries of the message, whatever the number of internal probes"
    );
    assert_eq!(outcome.result().unwrap().attempts, 2);
}

/// Row 13: a byte-identical replay's check stands where the artifact put stands, so a crash at
/// either artifact point on a replay has counted nothing; the redelivery counts once and
/// returns the stored result.
#[tokio::test(flavor = "multi_thread")]
async fn a_byte_identical_replay_crashing_at_the_artifact_step_counts_once_on_redelivery() {
    for point in [CrashPoint::BeforeArtifact, CrashPoint::AfterArtifact] {
        let env = spawn_env(true).await;
        let acme = acme_eu();
        env.seed(&acme).await;
        let envelope = page_envelope(&acme, "EXP-8821", 2, 3, &page2());
        let stored = env.service().ingest_message(&envelope).await.unwrap();
        assert!(matches!(stored, IngestOutcome::Committed(_)), "{stored:?}");

        let crash = CrashOnce::at(point);
        let crashing = env.service_with(Arc::new(SystemClock), crash.clone());
        let err = crashing
            .ingest_message(&envelope)
            .await
            .expect_err("the replay dies at the artifact step");
        assert!(
            matches!(err, IngestError::InjectedCrash(p) if p == point),
            "{err:?}"
        );
        assert_eq!(
            env.replay(PAGE2).await.unwrap().attempts,
            1,
            "{point:?}: nothing counted"
        );

        let outcome = crashing.ingest_message(&envelope).await.unwrap();
        let IngestOutcome::Replayed(result) = outcome else {
            panic!("{point:?}: {outcome:?}")
        };
        assert_eq!(result.attempts, 2, "{point:?}: counted once");
        assert_one_committed_delivery(&env).await;
    }
}
