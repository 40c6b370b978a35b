//! Workers racing to archive the same payload
//! (docs/adr/0003-learn-a-taken-key-from-the-artifact-put.md): S3 answers a conditional put that
//! overlaps another one for the same key `409 ConditionalRequestConflict`. moto does not, so the
//! tests' and the local stack's S3 client goes through `local_stack::conditional_puts`, which does;
//! `concurrent_duplicates_yield_one_set_and_the_same_ids_for_every_worker` (ingest.rs) is the burst
//! under it.

use acceptance::*;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::domain::hashing::sha256;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ingest::{IngestError, IngestOutcome, IngestService};
use feedsafe::protocols::ports::{
    ArtifactError, ArtifactMeta, ArtifactStore, ArtifactWrite, NoFaults, SystemClock,
};
use local_stack::conditional_puts::with_s3_put_always_racing;
use std::sync::Arc;
use tokio::sync::Barrier;

fn meta() -> ArtifactMeta {
    ArtifactMeta {
        content_type: "application/json".into(),
        delivery_key: None,
        retrieved_at: Timestamp::now(),
    }
}

/// The local S3 answers racing conditional puts as S3 does: one creates the object, the ones
/// that overlap it are told it is racing (409), none fails, and a later put of the key finds it
/// stored. Eight puts at a barrier overlap in practice; a round in which they happened not to
/// is tried again under a new key, up to five rounds.
#[tokio::test(flavor = "multi_thread")]
async fn of_racing_conditional_puts_one_creates_and_none_fails() {
    let env = spawn_env(true).await;
    let store = Arc::new(S3ArtifactStore::new(env.clients.s3.clone(), &env.bucket));
    let body: Arc<Vec<u8>> = Arc::new((0..200_000u32).map(|i| (i % 251) as u8).collect());
    let mut racing = 0;
    for round in 0..5 {
        let key = format!("raw/race/{round}");
        let barrier = Arc::new(Barrier::new(8));
        let puts: Vec<_> = (0..8)
            .map(|_| {
                let (store, body, barrier, key) =
                    (store.clone(), body.clone(), barrier.clone(), key.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store
                        .put_verified(&key, &body, &sha256(&body), &meta())
                        .await
                })
            })
            .collect();
        let mut created = 0;
        for put in puts {
            match put.await.expect("put ran").expect("no racing put fails") {
                ArtifactWrite::Created => created += 1,
                ArtifactWrite::Racing => racing += 1,
                ArtifactWrite::AlreadyStored => {}
            }
        }
        assert_eq!(
            created, 1,
            "round {round}: exactly one put creates the object"
        );
        let again = store
            .put_verified(&key, &body, &sha256(&body), &meta())
            .await
            .expect("a later put");
        assert_eq!(again, ArtifactWrite::AlreadyStored);
        store
            .verify(&key, &sha256(&body))
            .await
            .expect("the stored bytes are the payload");
        if racing > 0 {
            break;
        }
    }
    assert!(racing > 0, "no put was ever answered 409 in five rounds");
}

/// A 409 means another writer's upload was in flight. If it never lands, the delivery must not
/// commit against a missing artifact: after waiting for the other writer's record it verifies
/// the artifact, finds none, and the attempt fails with nothing stored; the retry commits it
/// once. (Locally the missing object is `NotFound`; in AWS, where IngestRole has no
/// `s3:ListBucket`, S3 answers that HEAD 403 and the error is `Unavailable`: retried the same.)
#[tokio::test(flavor = "multi_thread")]
async fn a_racing_upload_that_never_lands_leaves_the_delivery_to_its_retry() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let racing = with_s3_put_always_racing(env.clients.clone());
    let artifacts = Arc::new(S3ArtifactStore::new(racing.s3.clone(), &env.bucket));
    let service = IngestService::new(
        env.store.clone(),
        artifacts.clone(),
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let body = export_page(
        "EXP-RACE",
        1,
        1,
        vec![offer("AX-440-R2", 5, "820.00", "2026-11-29T08:00:00Z")],
    );
    let envelope = page_envelope(&acme, "EXP-RACE", 1, 1, &body);
    let key = "acme/acme-eu/ACC-1/EXP-RACE/1";

    let error = service
        .ingest_message(&envelope)
        .await
        .expect_err("no artifact landed: the attempt is retried");
    assert!(
        matches!(error, IngestError::Artifact(ArtifactError::NotFound { .. })),
        "the artifact is missing: {error:?}"
    );
    assert!(env.replay(key).await.is_none(), "no record");
    assert!(env.observations_of(key).await.is_empty(), "no observation");

    let retried = env
        .service()
        .ingest_message(&envelope)
        .await
        .expect("the retry");
    assert!(
        matches!(retried, IngestOutcome::Committed(_)),
        "{retried:?}"
    );
    assert_eq!(env.observations_of(key).await.len(), 1);
    assert_eq!(env.replay(key).await.expect("record").attempts, 1);
}
