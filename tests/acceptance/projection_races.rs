//! A projection row that another batch writes between this batch's read and its conditional
//! write (a busy item's row is written from many stream shards at once, docs/scale.md). The
//! batch that lost reads the row again and decides again: it writes its claim only if that is
//! still the newer one, and never moves the row back.

use acceptance::*;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::domain::ids::TenantId;
use feedsafe::domain::model::{Observation, SourceRef};
use feedsafe::protocols::ports::StoreError;
use feedsafe::protocols::projection::{
    EvidenceChange, ProjectedOffer, ProjectionKey, ProjectionStore,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const ITEM: &str = "AX-440";

/// Lets "another batch" write `sneak` just before the first conditional write it forwards.
struct BeatenOnce {
    inner: Arc<DynamoProjectionStore>,
    sneak: Mutex<Option<ProjectedOffer>>,
    /// Conditional writes asked for by the projector under test, and how many succeeded.
    asked: AtomicUsize,
    written: AtomicUsize,
}

#[async_trait::async_trait]
impl ProjectionStore for BeatenOnce {
    async fn current(&self, key: &ProjectionKey) -> Result<Option<ProjectedOffer>, StoreError> {
        self.inner.current(key).await
    }

    async fn current_many(
        &self,
        keys: &[ProjectionKey],
    ) -> Result<HashMap<ProjectionKey, ProjectedOffer>, StoreError> {
        self.inner.current_many(keys).await
    }

    async fn replace(
        &self,
        offer: &ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, StoreError> {
        let sneak = self.sneak.lock().unwrap().take();
        if let Some(sneak) = sneak {
            let key = ProjectionKey {
                item: sneak.observation.item.clone(),
                source: sneak.observation.source(),
            };
            let now = self.inner.current(&key).await?.map(|row| row.basis);
            assert!(self.inner.replace(&sneak, now.as_deref()).await?);
        }
        self.asked.fetch_add(1, Ordering::SeqCst);
        let done = self.inner.replace(offer, expected).await?;
        if done {
            self.written.fetch_add(1, Ordering::SeqCst);
        }
        Ok(done)
    }

    async fn remove(&self, key: &ProjectionKey, expected: &str) -> Result<bool, StoreError> {
        self.inner.remove(key, expected).await
    }

    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<ProjectedOffer>, StoreError> {
        self.inner.offers(tenant, item).await
    }
    fn held_claims(&self) -> &dyn feedsafe::protocols::projection::HeldClaims {
        self.inner.as_ref()
    }

    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError> {
        self.inner.items_of_source(source).await
    }
    async fn items_of_part(
        &self,
        tenant: &feedsafe::domain::ids::TenantId,
        part: &feedsafe::domain::item::CanonicalItem,
    ) -> Result<Vec<String>, feedsafe::protocols::ports::StoreError> {
        self.inner.items_of_part(tenant, part).await
    }
}

/// Three observations of one item from one source, observed at 08:00, 09:00 and 10:00, the
/// first of them projected.
async fn three_claims(env: &TestEnv) -> [Observation; 3] {
    let acme = acme_eu();
    env.seed(&acme).await;
    let service = env.service();
    let mut found = Vec::new();
    for (export, quantity, at) in [
        ("EXP-1", 8, "2026-11-29T08:00:00Z"),
        ("EXP-2", 9, "2026-11-29T09:00:00Z"),
        ("EXP-3", 10, "2026-11-29T10:00:00Z"),
    ] {
        let body = export_page(export, 1, 1, vec![offer(ITEM, quantity, "820.00", at)]);
        service
            .ingest_message(&page_envelope(&acme, export, 1, 1, &body))
            .await
            .expect("ingest settles");
        let mut rows = env
            .observations_of(&format!("acme/acme-eu/ACC-1/{export}/1"))
            .await;
        assert_eq!(rows.len(), 1);
        found.push(rows.remove(0));
    }
    found.try_into().unwrap()
}

fn row_of(observation: &Observation) -> ProjectedOffer {
    ProjectedOffer {
        basis: observation.basis(),
        observation: observation.clone(),
        source_quarantined: false,
    }
}

async fn project_beaten(
    env: &TestEnv,
    table: Arc<DynamoProjectionStore>,
    first: &Observation,
    sneak: &Observation,
    mine: &Observation,
) -> (Option<ProjectedOffer>, usize, usize) {
    env.projector_into(table.clone())
        .apply(&EvidenceChange::Observation(Box::new(first.clone())))
        .await
        .unwrap();
    let beaten = Arc::new(BeatenOnce {
        inner: table.clone(),
        sneak: Mutex::new(Some(row_of(sneak))),
        asked: AtomicUsize::new(0),
        written: AtomicUsize::new(0),
    });
    feedsafe::protocols::projection::Projector::new(
        env.store.clone(),
        beaten.clone(),
        env.store.clone(),
    )
    .apply(&EvidenceChange::Observation(Box::new(mine.clone())))
    .await
    .unwrap();
    let key = ProjectionKey {
        item: mine.item.clone(),
        source: mine.source(),
    };
    (
        table.current(&key).await.unwrap(),
        beaten.asked.load(Ordering::SeqCst),
        beaten.written.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_beaten_by_an_older_claim_writes_its_newer_one_after_reading_the_row_again() {
    let env = spawn_env(true).await;
    let [at8, at9, at10] = three_claims(&env).await;
    let table = env.extra_projection_table().await;
    // The row holds 08:00; another batch writes 09:00 between this batch's read and its write
    // of 10:00.
    let (row, asked, written) = project_beaten(&env, table, &at8, &at9, &at10).await;
    assert_eq!(
        row.map(|r| r.observation.observation_id),
        Some(at10.observation_id.clone()),
        "the newest claim is current"
    );
    assert_eq!(
        (asked, written),
        (2, 1),
        "one refused write, then one that landed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_beaten_by_a_newer_claim_leaves_the_row_as_the_other_batch_wrote_it() {
    let env = spawn_env(true).await;
    let [at8, at9, at10] = three_claims(&env).await;
    let table = env.extra_projection_table().await;
    // The row holds 08:00; another batch writes 10:00 between this batch's read and its write
    // of 09:00: the row must stay at 10:00.
    let (row, asked, written) = project_beaten(&env, table, &at8, &at10, &at9).await;
    assert_eq!(
        row.map(|r| r.observation.observation_id),
        Some(at10.observation_id.clone()),
        "never moved back to 09:00"
    );
    assert_eq!((asked, written), (1, 0), "the refused write is not retried");
}
