//! The current projection: per (tenant, item, connector, source account) the eligible observation
//! with the greatest (`observed_at`, `observation_id`). It is always *recomputed* from
//! observations, so applying a stream batch once, three times or backwards gives the same rows,
//! and `rebuild` is the same computation run over everything.

use crate::connector::{ConnectorConfig, Publication};
use crate::ids::{ConnectorId, ObservationId, TenantId};
use crate::model::{
    Observation, ReplayRecord, Run, RunPageRecord, RunPages, RunStatus, SourceQuarantine, SourceRef,
};
use crate::ports::StoreError;
use crate::timestamp::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use tracing::{debug, info};

/// One page of an item's history, newest first.
#[derive(Debug, Clone, Default)]
pub struct HistoryPage {
    pub observations: Vec<Observation>,
    /// Opaque cursor for the next page, if any.
    pub next: Option<String>,
}

/// Reads of the evidence the projection and the read path need. Implemented by
/// `aws::dynamo::DynamoEvidenceStore`; every read is strongly consistent except `item_history`
/// (a GSI).
#[async_trait]
pub trait EvidenceReads: Send + Sync {
    async fn replay_record(&self, delivery_key: &str) -> Result<Option<ReplayRecord>, StoreError>;
    /// Whether the staged delivery `delivery_key` committed its epoch `epoch`.
    async fn commit_marker_exists(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<bool, StoreError>;
    /// The run's own item (status, page count); its pages are `run_pages`.
    async fn run(&self, run_id: &str) -> Result<Option<Run>, StoreError>;
    /// The committed pages of a run (consistent).
    async fn run_pages(&self, run_id: &str) -> Result<RunPages, StoreError>;
    async fn connector_config(
        &self,
        id: &ConnectorId,
    ) -> Result<Option<ConnectorConfig>, StoreError>;
    async fn source_quarantine(
        &self,
        source: &SourceRef,
    ) -> Result<Option<SourceQuarantine>, StoreError>;
    async fn observation(&self, id: &str) -> Result<Option<Observation>, StoreError>;
    async fn observations(&self, ids: &[ObservationId]) -> Result<Vec<Observation>, StoreError>;
    /// `limit` observations of the item, newest (`observed_at`, `observation_id`) first.
    async fn item_history(
        &self,
        tenant: &TenantId,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<HistoryPage, StoreError>;
}

/// A projection row: the observation that is current for one (item, source).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedOffer {
    pub observation: Observation,
    /// `observation.basis()`, stored for conditional writes.
    pub basis: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProjectionKey {
    pub item: String,
    pub source: SourceRef,
}

impl ProjectionKey {
    pub fn of(observation: &Observation) -> Self {
        Self {
            item: observation.item.clone(),
            source: observation.source(),
        }
    }
}

#[async_trait]
pub trait ProjectionStore: Send + Sync {
    async fn current(&self, key: &ProjectionKey) -> Result<Option<ProjectedOffer>, StoreError>;
    /// Writes `offer` if the row's basis is still `expected` (`None`: no row). False when not.
    async fn replace(
        &self,
        offer: &ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, StoreError>;
    /// Deletes the row if its basis is still `expected`. False when not.
    async fn remove(&self, key: &ProjectionKey, expected: &str) -> Result<bool, StoreError>;
    /// Every row of an item (all sources) for a tenant.
    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<ProjectedOffer>, StoreError>;
    /// Items a source currently has a row for.
    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError>;
}

/// Why an observation is or is not eligible for the current projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Eligible,
    /// Its delivery is not committed (a staged delivery in progress): invisible everywhere.
    NotCommitted,
    /// Its run is not complete and the connector publishes `on_run_complete`: invisible everywhere.
    AwaitingRun,
    /// Replaced by an identity correction: in history (marked), not current.
    Superseded,
    /// Its source is quarantined: in history, not current.
    SourceQuarantined,
}

impl Visibility {
    /// Whether readers may see the observation at all (in history).
    pub fn is_published(&self) -> bool {
        !matches!(self, Self::NotCommitted | Self::AwaitingRun)
    }
}

/// Evaluates eligibility with per-pass caches (one projector batch or one read request).
pub struct Eligibility<'a> {
    reads: &'a dyn EvidenceReads,
    markers: HashMap<(String, u32), bool>,
    runs: HashMap<String, Option<Run>>,
    connectors: HashMap<ConnectorId, Option<ConnectorConfig>>,
    quarantines: HashMap<SourceRef, bool>,
}

impl<'a> Eligibility<'a> {
    pub fn new(reads: &'a dyn EvidenceReads) -> Self {
        Self {
            reads,
            markers: HashMap::new(),
            runs: HashMap::new(),
            connectors: HashMap::new(),
            quarantines: HashMap::new(),
        }
    }

    pub async fn source_quarantined(&mut self, source: &SourceRef) -> Result<bool, StoreError> {
        if let Some(q) = self.quarantines.get(source) {
            return Ok(*q);
        }
        let active = self
            .reads
            .source_quarantine(source)
            .await?
            .is_some_and(|q| q.active);
        self.quarantines.insert(source.clone(), active);
        Ok(active)
    }

    /// Unstaged observations were committed with their delivery; staged ones once their
    /// delivery's commit marker exists (which, unlike the replay record, never expires).
    async fn delivery_committed(&mut self, observation: &Observation) -> Result<bool, StoreError> {
        if !observation.staged {
            return Ok(true);
        }
        let key = (observation.delivery_key.clone(), observation.epoch);
        if let Some(committed) = self.markers.get(&key) {
            return Ok(*committed);
        }
        let committed = self.reads.commit_marker_exists(&key.0, key.1).await?;
        self.markers.insert(key, committed);
        Ok(committed)
    }

    async fn run_published(&mut self, observation: &Observation) -> Result<bool, StoreError> {
        let Some(run_id) = &observation.run_id else {
            return Ok(true);
        };
        if !self.connectors.contains_key(&observation.connector) {
            let config = self.reads.connector_config(&observation.connector).await?;
            self.connectors
                .insert(observation.connector.clone(), config);
        }
        let policy = self
            .connectors
            .get(&observation.connector)
            .and_then(|c| c.as_ref())
            .map_or(Publication::PerPage, |c| c.publication);
        if policy == Publication::PerPage {
            return Ok(true);
        }
        if !self.runs.contains_key(run_id.as_str()) {
            let run = self.reads.run(run_id.as_str()).await?;
            self.runs.insert(run_id.to_string(), run);
        }
        // Published when the projector marked the run COMPLETE (after counting its pages).
        Ok(self
            .runs
            .get(run_id.as_str())
            .and_then(|r| r.as_ref())
            .is_some_and(|r| r.status == Some(RunStatus::Complete)))
    }

    pub async fn check(&mut self, observation: &Observation) -> Result<Visibility, StoreError> {
        if !self.delivery_committed(observation).await? {
            return Ok(Visibility::NotCommitted);
        }
        if !self.run_published(observation).await? {
            return Ok(Visibility::AwaitingRun);
        }
        if observation.superseded_by.is_some() {
            return Ok(Visibility::Superseded);
        }
        if self.source_quarantined(&observation.source()).await? {
            return Ok(Visibility::SourceQuarantined);
        }
        Ok(Visibility::Eligible)
    }
}

/// What a stream change means for the projection.
#[derive(Debug, Clone)]
pub enum EvidenceChange {
    /// An observation was written or marked (superseded).
    Observation(Box<Observation>),
    /// A delivery's replay record reached `COMMITTED` (or was written committed).
    DeliveryCommitted(Vec<ObservationId>),
    /// A page of a run committed (its page record was written).
    RunPage(Box<RunPageRecord>),
    /// A run reached `COMPLETE`.
    RunCompleted(Box<Run>),
    /// A source quarantine was set or lifted.
    SourceQuarantine(SourceRef),
    /// Nothing the projection depends on (TTL deletions, quarantine entries, connectors...).
    Ignored,
}

#[derive(Clone)]
pub struct Projector {
    reads: Arc<dyn EvidenceReads>,
    projection: Arc<dyn ProjectionStore>,
    runs: Arc<dyn RunWrites>,
}

/// Run state transitions the projector performs when pages complete.
#[async_trait]
pub trait RunWrites: Send + Sync {
    /// Counts `new_pages` more committed pages on the run item (creating it for a run nobody
    /// started) and returns the item. The count is a hint: stream redelivery may count a page
    /// twice. MUST refuse (`Invariant`) a page whose tenant or connector differs from the run's.
    async fn note_pages(&self, page: &RunPageRecord, new_pages: u32) -> Result<Run, StoreError>;
    /// Marks the run `COMPLETE` (and takes it out of the open-runs index); false, changing
    /// nothing, when it already is or does not exist.
    async fn mark_complete(&self, run_id: &str, at: Timestamp) -> Result<bool, StoreError>;
}

const MAX_RECOMPUTE_ROUNDS: usize = 8;
const HISTORY_PAGE: i32 = 50;

impl Projector {
    pub fn new(
        reads: Arc<dyn EvidenceReads>,
        projection: Arc<dyn ProjectionStore>,
        runs: Arc<dyn RunWrites>,
    ) -> Self {
        Self {
            reads,
            projection,
            runs,
        }
    }

    /// Applies one change: recomputes every projection key it can affect.
    pub async fn apply(&self, change: &EvidenceChange) -> Result<(), StoreError> {
        let mut keys: BTreeMap<ProjectionKey, Vec<Observation>> = BTreeMap::new();
        match change {
            EvidenceChange::Ignored => return Ok(()),
            EvidenceChange::Observation(observation) => {
                keys.entry(ProjectionKey::of(observation))
                    .or_default()
                    .push((**observation).clone());
            }
            EvidenceChange::DeliveryCommitted(ids) => {
                for observation in self.reads.observations(ids).await? {
                    keys.entry(ProjectionKey::of(&observation))
                        .or_default()
                        .push(observation);
                }
            }
            EvidenceChange::RunPage(page) => {
                let run = self.runs.note_pages(page, 1).await?;
                if run.status != Some(RunStatus::Complete)
                    && run.page_count.is_some_and(|count| run.pages_seen >= count)
                    && self
                        .reads
                        .run_pages(run.run_id.as_str())
                        .await?
                        .all_committed(run.page_count)
                {
                    self.runs
                        .mark_complete(run.run_id.as_str(), Timestamp::now())
                        .await?;
                }
            }
            EvidenceChange::RunCompleted(run) => {
                // Pages of a per-page connector were projected as they committed; those of an
                // on_run_complete connector become eligible now.
                let policy = self
                    .reads
                    .connector_config(&run.connector)
                    .await?
                    .map_or(Publication::PerPage, |c| c.publication);
                if policy == Publication::OnRunComplete {
                    for page in self.reads.run_pages(run.run_id.as_str()).await?.pages {
                        let ids: Vec<ObservationId> = (0..page.observation_count as usize)
                            .map(|i| ObservationId::derive_for(&page.delivery_key, page.epoch, i))
                            .collect();
                        for observation in self.reads.observations(&ids).await? {
                            keys.entry(ProjectionKey::of(&observation))
                                .or_default()
                                .push(observation);
                        }
                    }
                }
            }
            EvidenceChange::SourceQuarantine(source) => {
                for item in self.projection.items_of_source(source).await? {
                    keys.entry(ProjectionKey {
                        item,
                        source: source.clone(),
                    })
                    .or_default();
                }
            }
        }
        for (key, seen) in keys {
            self.recompute(&key, &seen).await?;
        }
        Ok(())
    }

    /// Recomputes one row from the item's history (plus `seen`, observations known from the
    /// change itself, which an index may not show yet) and writes it without ever moving it to
    /// an older observation while the current one is still eligible.
    pub async fn recompute(
        &self,
        key: &ProjectionKey,
        seen: &[Observation],
    ) -> Result<(), StoreError> {
        for _ in 0..MAX_RECOMPUTE_ROUNDS {
            let mut eligibility = Eligibility::new(self.reads.as_ref());
            let winner = self.find_winner(key, seen, &mut eligibility).await?;
            let current = self.projection.current(key).await?;
            let done = match (current, winner) {
                (None, None) => true,
                (None, Some(w)) => self.projection.replace(&offer(w), None).await?,
                (Some(c), Some(w)) if w.basis() == c.basis => {
                    c.observation == w || self.projection.replace(&offer(w), Some(&c.basis)).await?
                }
                (Some(c), Some(w)) if w.basis() > c.basis => {
                    self.projection.replace(&offer(w), Some(&c.basis)).await?
                }
                // The winner found is older than the current row, or there is none: the current
                // row may be a newer claim the (eventually consistent) index does not show yet.
                // It is kept unless it is no longer eligible itself.
                (Some(c), winner) => {
                    if self.still_eligible(&c, &mut eligibility).await? {
                        debug!(item = %key.item, "kept a current row the index does not show yet");
                        true
                    } else {
                        match winner {
                            Some(w) => self.projection.replace(&offer(w), Some(&c.basis)).await?,
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

    /// Whether the observation of a projection row is still eligible (a fresh, consistent read).
    async fn still_eligible(
        &self,
        row: &ProjectedOffer,
        eligibility: &mut Eligibility<'_>,
    ) -> Result<bool, StoreError> {
        match self
            .reads
            .observation(row.observation.observation_id.as_str())
            .await?
        {
            Some(o) => Ok(eligibility.check(&o).await? == Visibility::Eligible),
            None => Ok(false),
        }
    }

    async fn find_winner(
        &self,
        key: &ProjectionKey,
        seen: &[Observation],
        eligibility: &mut Eligibility<'_>,
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
                if eligibility.check(&current).await? == Visibility::Eligible {
                    return Ok(Some(current));
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(None),
            }
        }
    }

    /// Recomputes every row of one item: the sources in its history and those with a row.
    pub async fn rebuild_item(&self, tenant: &TenantId, item: &str) -> Result<usize, StoreError> {
        let mut sources: BTreeSet<SourceRef> = self
            .projection
            .offers(tenant, item)
            .await?
            .into_iter()
            .map(|o| o.observation.source())
            .collect();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .reads
                .item_history(tenant, item, cursor.as_deref(), 100)
                .await?;
            sources.extend(page.observations.iter().map(Observation::source));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        for source in &sources {
            self.recompute(
                &ProjectionKey {
                    item: item.to_owned(),
                    source: source.clone(),
                },
                &[],
            )
            .await?;
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

fn offer(observation: Observation) -> ProjectedOffer {
    ProjectedOffer {
        basis: observation.basis(),
        observation,
    }
}
