//! The current projection: per (tenant, item, connector, source account) the eligible observation
//! with the greatest (`observed_at`, `delivery_recorded_at`, `observation_id`): the newest claim,
//! and of claims observed at the same instant the one whose delivery was recorded later (a
//! supplier's correction sent after the claim it corrects); the id only decides between claims of
//! one delivery. `Observation::basis` is that order as one string, and the item history's index
//! is sorted by it, so the history pages the projector reads are in the order it decides by. It
//! is always *recomputed* from observations, so applying a stream batch once, three times or
//! backwards gives the same rows, and `rebuild` is the same computation run over everything.

use crate::domain::connector::{ConnectorConfig, Publication};
use crate::domain::ids::{ConnectorId, ObservationId, RunId, TenantId};
use crate::domain::model::{
    CorrectionRules, Observation, ProjectionWork, Run, RunPageRecord, RunStatus, SourceRef,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use futures_util::StreamExt;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tracing::{debug, info};

// The ports the projector and the read path share live in `crate::protocols::ports`; named here
// too, where the projector's callers have always found them.
pub use crate::protocols::ports::{
    ClaimContext, ContextKeys, EvidenceReads, Held, HeldClaim, HeldClaims, HistoryPage,
    ProjectedOffer, ProjectionKey, ProjectionStore, ProjectorWrites, Reattribution, Reattributor,
    SourceState,
};

mod batch;
mod eligibility;
mod held;
pub use eligibility::{Eligibility, Visibility};

/// What a stream change means for the projection.
#[derive(Debug, Clone)]
pub enum EvidenceChange {
    /// An observation was written or marked (superseded).
    Observation(Box<Observation>),
    /// A staged delivery's replay record reached `COMMITTED`: its observations became eligible.
    DeliveryCommitted(Vec<ObservationId>),
    /// A slice of a large delivery or run to project, split off so that every stream record is
    /// finished well within the projector's timeout.
    Work(Box<ProjectionWork>),
    /// A page of a run committed (its page record was written).
    RunPage(Box<RunPageRecord>),
    /// A run reached `COMPLETE`.
    RunCompleted(Box<Run>),
    /// A source quarantine was set or lifted.
    SourceQuarantine(SourceRef),
    /// A source's identity rules changed: the items whose rows may change.
    CorrectionRules {
        source: SourceRef,
        items: Vec<String>,
    },
    /// Nothing the projection depends on (TTL deletions, quarantine entries, connectors...).
    Ignored,
}

/// A failure while applying a batch of changes: the first change (by position) that was not
/// fully applied. Every change before it was.
#[derive(Debug, thiserror::Error)]
#[error("change {index} of the batch failed: {error}")]
pub struct BatchFailure {
    pub index: usize,
    #[source]
    pub error: StoreError,
}

#[derive(Clone)]
pub struct Projector {
    reads: Arc<dyn EvidenceReads>,
    projection: Arc<dyn ProjectionStore>,
    writes: Arc<dyn ProjectorWrites>,
}

const MAX_RECOMPUTE_ROUNDS: usize = 8;
const HISTORY_PAGE: i32 = 50;
/// A large delivery or run is projected in `ProjectionWork` slices of this many observations.
pub const WORK_SLICE: u32 = 500;
/// At most this many observations are projected inline by one invocation (one stream batch);
/// larger committed deliveries are split into work slices, and slices beyond the budget are put
/// back as new work records for a later invocation. At least one slice always runs, so every
/// batch makes progress, and every batch finishes well within the function's timeout.
pub const INLINE_BUDGET: u32 = 1_000;
/// Lost conditional writes of one row, each followed by a fresh read of the row, before the
/// row is settled from the item's history instead.
pub const LOST_RACE_RETRIES: usize = 3;
/// Superseding copies followed from a candidate (a correction of a correction of ...).
const MAX_SUPERSESSION_CHAIN: usize = 6;
/// Projection keys computed at once within a batch.
const KEY_CONCURRENCY: usize = 16;

impl Projector {
    pub fn new(
        reads: Arc<dyn EvidenceReads>,
        projection: Arc<dyn ProjectionStore>,
        writes: Arc<dyn ProjectorWrites>,
    ) -> Self {
        Self {
            reads,
            projection,
            writes,
        }
    }

    /// Applies one change (a batch of one).
    pub async fn apply(&self, change: &EvidenceChange) -> Result<(), StoreError> {
        self.apply_batch(std::slice::from_ref(change))
            .await
            .map_err(|f| f.error)
    }

    /// One key of a batch. A claim that is newer than the current row (or the first one)
    /// replaces it; the row is recomputed from history only when asked (`full`) or when the
    /// row's own claim is among the candidates and no longer eligible. A conditional write that
    /// another batch beat reads the row again and decides again the same way (a busy item's row
    /// is written by many shards at once: settling each lost race from the item's history would
    /// put those history reads on one index partition, docs/scale.md); only after
    /// `LOST_RACE_RETRIES` lost races in a row is the row settled from history.
    async fn project_key(
        &self,
        key: &ProjectionKey,
        candidates: &[(&Observation, Visibility)],
        full: bool,
        current: Option<&ProjectedOffer>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), StoreError> {
        let seen =
            || -> Vec<Observation> { candidates.iter().map(|(o, _)| (*o).clone()).collect() };
        if full {
            return self.recompute(key, &seen(), eligibility).await;
        }
        let mut fresh: Option<ProjectedOffer>;
        let mut current = current;
        for _ in 0..=LOST_RACE_RETRIES {
            let mut best: Option<&Observation> = None;
            for (candidate, visibility) in candidates {
                let eligible = *visibility == Visibility::Eligible;
                if !eligible
                    && current
                        .is_some_and(|c| c.observation.observation_id == candidate.observation_id)
                {
                    // The current row's own claim lost its eligibility: fall back through history.
                    return self.recompute(key, &seen(), eligibility).await;
                }
                if eligible && best.is_none_or(|b| candidate.basis() > b.basis()) {
                    best = Some(candidate);
                }
            }
            let Some(best) = best else {
                return Ok(());
            };
            let quarantined = eligibility.source_quarantined(&key.source).await?;
            let row = offer(best.clone(), quarantined);
            let written = match current {
                None => self.projection.replace(&row, None).await?,
                Some(c) if row.basis > c.basis || (row.basis == c.basis && *c != row) => {
                    self.projection.replace(&row, Some(&c.basis)).await?
                }
                // Older than (or the same as) the current row: nothing to do.
                Some(_) => true,
            };
            if written {
                return Ok(());
            }
            // Another batch changed the row meanwhile: decide again against what it wrote.
            fresh = self.projection.current(key).await?;
            current = fresh.as_ref();
        }
        self.recompute(key, &seen(), eligibility).await
    }

    /// Recomputes one row from the item's history (plus `seen`, observations known from the
    /// change itself, which an index may not show yet) and writes it without ever moving it to
    /// an older observation while the current one is still eligible.
    pub async fn recompute(
        &self,
        key: &ProjectionKey,
        seen: &[Observation],
        eligibility: &Eligibility<'_>,
    ) -> Result<(), StoreError> {
        let quarantined = eligibility.source_quarantined(&key.source).await?;
        for _ in 0..MAX_RECOMPUTE_ROUNDS {
            let winner = self.find_winner(key, seen, eligibility).await?;
            let current = self.projection.current(key).await?;
            let done = match (current, winner) {
                (None, None) => true,
                (None, Some(w)) => {
                    self.projection
                        .replace(&offer(w, quarantined), None)
                        .await?
                }
                (Some(c), Some(w)) if w.basis() == c.basis => {
                    let row = offer(w, quarantined);
                    c == row || self.projection.replace(&row, Some(&c.basis)).await?
                }
                (Some(c), Some(w)) if w.basis() > c.basis => {
                    self.projection
                        .replace(&offer(w, quarantined), Some(&c.basis))
                        .await?
                }
                // The winner found is older than the current row, or there is none: the current
                // row may be a newer claim the (eventually consistent) index does not show yet.
                // It is kept unless it is no longer eligible itself.
                (Some(c), winner) => {
                    if self.still_eligible(&c, eligibility).await? {
                        debug!(item = %key.item, "kept a current row the index does not show yet");
                        if c.source_quarantined == quarantined {
                            true
                        } else {
                            let row = ProjectedOffer {
                                source_quarantined: quarantined,
                                ..c.clone()
                            };
                            self.projection.replace(&row, Some(&c.basis)).await?
                        }
                    } else {
                        match winner {
                            Some(w) => {
                                self.projection
                                    .replace(&offer(w, quarantined), Some(&c.basis))
                                    .await?
                            }
                            None => self.projection.remove(key, &c.basis).await?,
                        }
                    }
                }
            };
            if done {
                return Ok(());
            }
        }
        Err(StoreError::Unavailable(anyhow::anyhow!(
            "projection row for {} / {} kept changing under us",
            key.item,
            key.source.connector
        )))
    }

    /// Whether the observation of a projection row may still be a row (a fresh, consistent read).
    async fn still_eligible(
        &self,
        row: &ProjectedOffer,
        eligibility: &Eligibility<'_>,
    ) -> Result<bool, StoreError> {
        match self
            .reads
            .observation(row.observation.observation_id.as_str())
            .await?
        {
            Some(o) => Ok(eligibility.check_for_row(&o).await? == Visibility::Eligible),
            None => Ok(false),
        }
    }

    async fn find_winner(
        &self,
        key: &ProjectionKey,
        seen: &[Observation],
        eligibility: &Eligibility<'_>,
    ) -> Result<Option<Observation>, StoreError> {
        let mut extra: Vec<&Observation> = seen
            .iter()
            .filter(|o| ProjectionKey::of(o) == *key)
            .collect();
        extra.sort_by_key(|o| std::cmp::Reverse(o.basis()));
        let mut checked: BTreeSet<ObservationId> = BTreeSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .reads
                .item_history(
                    &key.source.tenant,
                    &key.item,
                    cursor.as_deref(),
                    HISTORY_PAGE,
                )
                .await?;
            let floor = page.observations.last().map(Observation::basis);
            // Merge in the observations from the change that sort above this page's floor.
            let mut candidates: Vec<Observation> = page
                .observations
                .into_iter()
                .filter(|o| o.source() == key.source)
                .collect();
            for o in &extra {
                if page.next.is_none() || floor.as_ref().is_none_or(|f| o.basis() >= *f) {
                    candidates.push((*o).clone());
                }
            }
            candidates.sort_by_key(|o| std::cmp::Reverse(o.basis()));
            for candidate in candidates {
                if !checked.insert(candidate.observation_id.clone()) {
                    continue;
                }
                // Re-read: the index copy may predate a supersession marker.
                let current = self
                    .reads
                    .observation(candidate.observation_id.as_str())
                    .await?
                    .unwrap_or(candidate);
                if eligibility.check_for_row(&current).await? == Visibility::Eligible {
                    return Ok(Some(current));
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(None),
            }
        }
    }

    /// Recomputes every row of one item, and its held claims: the sources in its history and
    /// those with a row.
    pub async fn rebuild_item(&self, tenant: &TenantId, item: &str) -> Result<usize, StoreError> {
        let mut sources: BTreeSet<SourceRef> = self
            .projection
            .offers(tenant, item)
            .await?
            .into_iter()
            .map(|o| o.observation.source())
            .collect();
        let mut maybe_held: BTreeMap<SourceRef, Vec<Observation>> = BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .reads
                .item_history(tenant, item, cursor.as_deref(), 100)
                .await?;
            for o in page.observations {
                sources.insert(o.source());
                if held::may_be_held(&o) {
                    maybe_held.entry(o.source()).or_default().push(o);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let eligibility = Eligibility::new(self.reads.as_ref());
        for source in &sources {
            let key = ProjectionKey {
                item: item.to_owned(),
                source: source.clone(),
            };
            self.recompute(&key, &[], &eligibility).await?;
            let claims = maybe_held.remove(source).unwrap_or_default();
            self.settle_held(&key, claims, &eligibility).await?;
        }
        info!(item, sources = sources.len(), "item projection rebuilt");
        Ok(sources.len())
    }
}

impl Projector {
    /// Recomputes every row of every listed item (from `DynamoEvidenceStore::observed_items`).
    pub async fn rebuild_all(
        &self,
        items: impl IntoIterator<Item = (TenantId, String)>,
    ) -> Result<usize, StoreError> {
        let mut rows = 0;
        for (tenant, item) in items {
            rows += self.rebuild_item(&tenant, &item).await?;
        }
        info!(rows, "projection rebuilt");
        Ok(rows)
    }
}

fn offer(observation: Observation, source_quarantined: bool) -> ProjectedOffer {
    ProjectedOffer {
        basis: observation.basis(),
        observation,
        source_quarantined,
    }
}
