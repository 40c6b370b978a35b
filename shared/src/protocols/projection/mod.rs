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
    ClaimContext, ContextKeys, EvidenceReads, HistoryPage, ProjectedOffer, ProjectionKey,
    ProjectionStore, ProjectorWrites, Reattribution, Reattributor, SourceState,
};

mod eligibility;
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
/// Lost conditional writes of one row, each followed by a fresh read of the row, before the
/// row is settled from the item's history instead.
pub const LOST_RACE_RETRIES: usize = 3;
pub const INLINE_BUDGET: u32 = 1_000;
/// Superseding copies followed from a candidate (a correction of a correction of ...).
const MAX_SUPERSESSION_CHAIN: usize = 6;
/// Projection keys computed at once within a batch.
const KEY_CONCURRENCY: usize = 16;

/// One projection key's pending work in a batch: the observations that may now win it, and
/// whether its current row must be recomputed from history.
#[derive(Default)]
struct KeyWork {
    candidates: Vec<ObservationId>,
    full: bool,
    /// The first change of the batch that contributed to this key.
    first_change: usize,
}

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

    /// Applies a stream batch: every projection key the changes can affect is computed once,
    /// from fresh (consistent) reads, up to `KEY_CONCURRENCY` keys at a time. A new claim is
    /// compared with the current row (no history read); only a row whose own claim lost its
    /// eligibility is recomputed from the item's history. Large deliveries and runs are split
    /// into `ProjectionWork` records instead of being projected inline.
    pub async fn apply_batch(&self, changes: &[EvidenceChange]) -> Result<(), BatchFailure> {
        let fail = |index: usize| move |error: StoreError| BatchFailure { index, error };
        // Runs: one page count per run and batch.
        let mut pages_by_run: BTreeMap<RunId, (usize, &RunPageRecord, u32)> = BTreeMap::new();
        for (index, change) in changes.iter().enumerate() {
            if let EvidenceChange::RunPage(page) = change {
                pages_by_run
                    .entry(page.run_id.clone())
                    .or_insert((index, page, 0))
                    .2 += 1;
            }
        }
        for (index, page, count) in pages_by_run.into_values() {
            self.note_pages(page, count).await.map_err(fail(index))?;
        }

        let mut candidates: Vec<(usize, ObservationId)> = Vec::new();
        let mut full_keys: Vec<(usize, ProjectionKey)> = Vec::new();
        let mut budget = INLINE_BUDGET;
        let mut sliced_any = false;
        for (index, change) in changes.iter().enumerate() {
            match change {
                EvidenceChange::Ignored | EvidenceChange::RunPage(_) => {}
                EvidenceChange::Observation(o) => {
                    budget = budget.saturating_sub(1);
                    candidates.push((index, o.observation_id.clone()))
                }
                EvidenceChange::DeliveryCommitted(ids) if ids.len() as u32 <= budget => {
                    budget -= ids.len() as u32;
                    candidates.extend(ids.iter().map(|id| (index, id.clone())))
                }
                EvidenceChange::DeliveryCommitted(ids) => {
                    let work = self.slices_of_delivery(ids).await.map_err(fail(index))?;
                    self.writes.enqueue_work(&work).await.map_err(fail(index))?;
                }
                EvidenceChange::Work(work) => {
                    let size = work.end.saturating_sub(work.start);
                    if size <= budget || !sliced_any {
                        sliced_any = true;
                        budget = budget.saturating_sub(size);
                        candidates.extend((work.start..work.end).map(|i| {
                            (
                                index,
                                ObservationId::derive_for(
                                    &work.delivery_key,
                                    work.epoch,
                                    i as usize,
                                ),
                            )
                        }));
                    } else {
                        // Over this invocation's budget: a later invocation takes it.
                        let later = ProjectionWork {
                            deferrals: work.deferrals + 1,
                            ..(**work).clone()
                        };
                        self.writes
                            .enqueue_work(std::slice::from_ref(&later))
                            .await
                            .map_err(fail(index))?;
                    }
                }
                EvidenceChange::RunCompleted(run) => {
                    self.run_completed(run).await.map_err(fail(index))?
                }
                EvidenceChange::CorrectionRules { source, items } => {
                    full_keys.extend(items.iter().map(|item| {
                        (
                            index,
                            ProjectionKey {
                                item: item.clone(),
                                source: source.clone(),
                            },
                        )
                    }));
                }
                EvidenceChange::SourceQuarantine(source) => {
                    let items = self
                        .projection
                        .items_of_source(source)
                        .await
                        .map_err(fail(index))?;
                    full_keys.extend(items.into_iter().map(|item| {
                        (
                            index,
                            ProjectionKey {
                                item,
                                source: source.clone(),
                            },
                        )
                    }));
                }
            }
        }

        // Fresh copies of every candidate (an image may predate a supersession marker), and the
        // copies that superseded them: a claim re-attributed while its delivery was pending
        // becomes eligible with the delivery, under its copy's id.
        let mut first_of: HashMap<ObservationId, usize> = candidates
            .iter()
            .rev()
            .map(|(i, id)| (id.clone(), *i))
            .collect();
        let mut fresh: Vec<Observation> = Vec::new();
        let mut next: Vec<ObservationId> = first_of.keys().cloned().collect();
        for _ in 0..MAX_SUPERSESSION_CHAIN {
            if next.is_empty() {
                break;
            }
            let found = self
                .reads
                .observations(&next)
                .await
                .map_err(|error| BatchFailure {
                    index: next
                        .iter()
                        .filter_map(|id| first_of.get(id).copied())
                        .min()
                        .unwrap_or(0),
                    error,
                })?;
            next = Vec::new();
            for observation in &found {
                if let Some(by) = &observation.superseded_by {
                    if !first_of.contains_key(by) {
                        let index = first_of[&observation.observation_id];
                        first_of.insert(by.clone(), index);
                        next.push(by.clone());
                    }
                }
            }
            fresh.extend(found);
        }
        let mut work: BTreeMap<ProjectionKey, KeyWork> = BTreeMap::new();
        let first_of = &first_of;
        let mut by_id: HashMap<ObservationId, Observation> = HashMap::new();
        for observation in fresh {
            let index = first_of[&observation.observation_id];
            let entry = work
                .entry(ProjectionKey::of(&observation))
                .or_insert(KeyWork {
                    first_change: index,
                    ..KeyWork::default()
                });
            entry.first_change = entry.first_change.min(index);
            entry.candidates.push(observation.observation_id.clone());
            by_id.insert(observation.observation_id.clone(), observation);
        }
        for (index, key) in full_keys {
            let entry = work.entry(key).or_insert(KeyWork {
                first_change: index,
                ..KeyWork::default()
            });
            entry.full = true;
            entry.first_change = entry.first_change.min(index);
        }
        let eligibility = Eligibility::new(self.reads.as_ref());
        let eligibility = &eligibility;
        eligibility
            .prefetch_sources(
                by_id
                    .values()
                    .map(Observation::source)
                    .chain(work.keys().map(|k| k.source.clone())),
            )
            .await
            .map_err(fail(
                work.values().map(|w| w.first_change).min().unwrap_or(0),
            ))?;
        // Each candidate's eligibility, once. A claim that is not committed (or awaits its run)
        // has never been a row and cannot become one in this batch: keys with nothing else
        // to do are dropped before their rows are read.
        let visibilities: Vec<Result<(ObservationId, Visibility), BatchFailure>> =
            futures_util::stream::iter(by_id.keys().cloned().collect::<Vec<_>>())
                .map(|id: ObservationId| {
                    let by_id = &by_id;
                    async move {
                        let visibility = match by_id.get(&id) {
                            Some(o) => eligibility.check_for_row(o).await,
                            None => Ok(Visibility::NotCommitted),
                        };
                        visibility
                            .map(|v| (id.clone(), v))
                            .map_err(|error| BatchFailure {
                                index: first_of.get(&id).copied().unwrap_or(0),
                                error,
                            })
                    }
                })
                .buffer_unordered(KEY_CONCURRENCY)
                .collect()
                .await;
        let mut visibility: HashMap<ObservationId, Visibility> = HashMap::new();
        for result in visibilities {
            let (id, v) = result?;
            visibility.insert(id, v);
        }
        // Claims an identity rule attributes elsewhere (written before the rule, or by an
        // ingest that read the rules before they changed, or chunks of a delivery that was
        // pending when they changed) are re-attributed now; their copies come back as their own
        // stream records.
        let mut moves: Vec<Reattribution> = Vec::new();
        for (id, v) in &visibility {
            if *v == Visibility::AwaitingCorrection {
                if let Some(o) = by_id.get(id) {
                    let rules = eligibility
                        .rules(&o.source())
                        .await
                        .map_err(fail(first_of.get(id).copied().unwrap_or(0)))?;
                    moves.extend(Reattribution::needed(&rules, o));
                }
            }
        }
        // Staged observations not committed yet are re-attributed too (a correction must cover
        // the rest of a pending delivery): their visibility stopped at NotCommitted.
        for (id, v) in &visibility {
            if *v == Visibility::NotCommitted {
                if let Some(o) = by_id.get(id).filter(|o| o.superseded_by.is_none()) {
                    let rules = eligibility
                        .rules(&o.source())
                        .await
                        .map_err(fail(first_of.get(id).copied().unwrap_or(0)))?;
                    moves.extend(Reattribution::needed(&rules, o));
                }
            }
        }
        if !moves.is_empty() {
            self.writes
                .reattribute(&moves, Timestamp::now())
                .await
                .map_err(|error| BatchFailure {
                    index: moves
                        .iter()
                        .filter_map(|m| first_of.get(&m.old.observation_id).copied())
                        .min()
                        .unwrap_or(0),
                    error,
                })?;
        }
        work.retain(|_, w| {
            w.candidates
                .retain(|id| visibility.get(id).is_some_and(Visibility::is_published));
            w.full || !w.candidates.is_empty()
        });
        if work.is_empty() {
            return Ok(());
        }
        let keys: Vec<ProjectionKey> = work.keys().cloned().collect();
        let rows = self
            .projection
            .current_many(&keys)
            .await
            .map_err(|error| BatchFailure {
                index: work.values().map(|w| w.first_change).min().unwrap_or(0),
                error,
            })?;
        // A current row whose claim an identity rule attributes elsewhere: re-attribute the
        // claim from the row itself (whatever the index shows) and recompute the row.
        let mut row_moves: Vec<Reattribution> = Vec::new();
        for (key, row) in &rows {
            let rules = eligibility
                .rules(&key.source)
                .await
                .map_err(|error| BatchFailure {
                    index: work.get(key).map_or(0, |w| w.first_change),
                    error,
                })?;
            if !rules.attributes(&row.observation) {
                if let Some(w) = work.get_mut(key) {
                    w.full = true;
                }
                if let Ok(Some(fresh)) = self
                    .reads
                    .observation(row.observation.observation_id.as_str())
                    .await
                {
                    row_moves.extend(Reattribution::needed(&rules, &fresh));
                }
            }
        }
        if !row_moves.is_empty() {
            self.writes
                .reattribute(&row_moves, Timestamp::now())
                .await
                .map_err(|error| BatchFailure {
                    index: work.values().map(|w| w.first_change).min().unwrap_or(0),
                    error,
                })?;
        }
        let by_id = &by_id;
        let rows = &rows;
        let visibility = &visibility;
        let results: Vec<Result<(), BatchFailure>> = futures_util::stream::iter(work)
            .map(|(key, key_work)| async move {
                let candidates: Vec<(&Observation, Visibility)> = key_work
                    .candidates
                    .iter()
                    .filter_map(|id| Some((by_id.get(id)?, *visibility.get(id)?)))
                    .collect();
                self.project_key(
                    &key,
                    &candidates,
                    key_work.full,
                    rows.get(&key),
                    eligibility,
                )
                .await
                .map_err(|error| BatchFailure {
                    index: key_work.first_change,
                    error,
                })
            })
            .buffer_unordered(KEY_CONCURRENCY)
            .collect()
            .await;
        match results
            .into_iter()
            .filter_map(Result::err)
            .min_by_key(|f| f.index)
        {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    async fn note_pages(&self, page: &RunPageRecord, count: u32) -> Result<(), StoreError> {
        let run = self.writes.note_pages(page, count).await?;
        if run.status != Some(RunStatus::Complete)
            && run.page_count.is_some_and(|count| run.pages_seen >= count)
            && self
                .reads
                .run_pages(run.run_id.as_str())
                .await?
                .all_committed(run.page_count)
        {
            self.writes
                .mark_complete(run.run_id.as_str(), Timestamp::now())
                .await?;
        }
        Ok(())
    }

    /// The work slices of a committed delivery, from its first observation's key and epoch.
    async fn slices_of_delivery(
        &self,
        ids: &[ObservationId],
    ) -> Result<Vec<ProjectionWork>, StoreError> {
        let Some(first) = ids.first() else {
            return Ok(Vec::new());
        };
        let observation = self
            .reads
            .observation(first.as_str())
            .await?
            .ok_or_else(|| {
                StoreError::Invariant(format!(
                    "committed delivery's first observation {first} is missing"
                ))
            })?;
        Ok(slices(
            &observation.delivery_key,
            observation.epoch,
            ids.len() as u32,
        ))
    }

    /// Pages of a per-page connector were projected as they committed; those of an
    /// on_run_complete connector become eligible now: one work record per page slice.
    async fn run_completed(&self, run: &Run) -> Result<(), StoreError> {
        let policy = self
            .reads
            .connector_config(&run.connector)
            .await?
            .map_or(Publication::PerPage, |c| c.publication);
        if policy != Publication::OnRunComplete {
            return Ok(());
        }
        let work: Vec<ProjectionWork> = self
            .reads
            .run_pages(run.run_id.as_str())
            .await?
            .pages
            .iter()
            .flat_map(|page| slices(&page.delivery_key, page.epoch, page.observation_count))
            .collect();
        self.writes.enqueue_work(&work).await
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
        let eligibility = Eligibility::new(self.reads.as_ref());
        for source in &sources {
            self.recompute(
                &ProjectionKey {
                    item: item.to_owned(),
                    source: source.clone(),
                },
                &[],
                &eligibility,
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

/// Work records covering observations `0..count` of a delivery epoch, `WORK_SLICE` at a time.
fn slices(delivery_key: &str, epoch: u32, count: u32) -> Vec<ProjectionWork> {
    (0..count)
        .step_by(WORK_SLICE as usize)
        .map(|start| ProjectionWork {
            delivery_key: delivery_key.to_owned(),
            epoch,
            start,
            end: (start + WORK_SLICE).min(count),
            deferrals: 0,
        })
        .collect()
}

fn offer(observation: Observation, source_quarantined: bool) -> ProjectedOffer {
    ProjectedOffer {
        basis: observation.basis(),
        observation,
        source_quarantined,
    }
}
