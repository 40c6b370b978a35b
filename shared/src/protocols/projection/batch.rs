//! Applying a stream batch, in the order the protocol runs: gather what the changes ask for (run
//! pages counted, large deliveries and runs split into work slices, fresh copies of the claims
//! read), decide each claim's eligibility (re-attributing the claims an identity rule sends
//! elsewhere), decide and write each affected row (`Projector::project_key`), and report the
//! first change that was not fully applied.

use super::*;

/// One projection key's pending work in a batch: the observations that may now win it, and
/// whether its current row must be recomputed from history.
#[derive(Default)]
struct KeyWork {
    candidates: Vec<ObservationId>,
    full: bool,
    /// The first change of the batch that contributed to this key.
    first_change: usize,
}

/// What the changes of a batch ask for before any claim is read: the claims that may now win
/// their key and the keys whose row must be recomputed from history, each with the position of
/// the change it came from.
struct Gathered {
    candidates: Vec<(usize, ObservationId)>,
    full_keys: Vec<(usize, ProjectionKey)>,
    /// Observations this invocation may still project inline (`INLINE_BUDGET`).
    budget: u32,
    /// Whether a work slice runs in this invocation already (at least one always does).
    sliced_any: bool,
}

impl Gathered {
    fn new() -> Self {
        Self {
            candidates: Vec::new(),
            full_keys: Vec::new(),
            budget: INLINE_BUDGET,
            sliced_any: false,
        }
    }

    /// The rows of `items` under `source` are recomputed from history.
    fn recompute(&mut self, index: usize, source: &SourceRef, items: impl Iterator<Item = String>) {
        self.full_keys.extend(items.map(|item| {
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

/// The claims of a batch, freshly read, grouped by the projection key each may change.
struct Batch {
    /// The first change (by position) that named each claim, or the claim it supersedes.
    first_of: HashMap<ObservationId, usize>,
    by_id: HashMap<ObservationId, Observation>,
    work: BTreeMap<ProjectionKey, KeyWork>,
}

impl Batch {
    /// Groups the fresh claims by key, and marks the keys to recompute from history.
    fn group(
        first_of: HashMap<ObservationId, usize>,
        fresh: Vec<Observation>,
        full_keys: Vec<(usize, ProjectionKey)>,
    ) -> Self {
        let mut work: BTreeMap<ProjectionKey, KeyWork> = BTreeMap::new();
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
        Self {
            first_of,
            by_id,
            work,
        }
    }

    /// The first change behind any key of the batch.
    fn first_change(&self) -> usize {
        self.work
            .values()
            .map(|w| w.first_change)
            .min()
            .unwrap_or(0)
    }

    /// The first change behind one claim.
    fn first_change_of(&self, id: &ObservationId) -> usize {
        self.first_of.get(id).copied().unwrap_or(0)
    }

    /// The keys without a row whose newest eligible claim came from a work slice (as a run
    /// published on completion is projected) and from a run: each with the change and claim.
    fn published_firsts(
        &self,
        changes: &[EvidenceChange],
        rows: &HashMap<ProjectionKey, ProjectedOffer>,
        visibility: &HashMap<ObservationId, Visibility>,
    ) -> Vec<(usize, ProjectionKey, Observation)> {
        let from_work = |id: &ObservationId| {
            let index = self.first_change_of(id);
            matches!(changes.get(index), Some(EvidenceChange::Work(_))).then_some(index)
        };
        let mut firsts = Vec::new();
        for (key, work) in self.work.iter().filter(|(k, _)| !rows.contains_key(*k)) {
            let newest = work
                .candidates
                .iter()
                .filter(|id| visibility.get(*id) == Some(&Visibility::Eligible))
                .filter_map(|id| self.by_id.get(id))
                .filter(|o| o.run_id.is_some())
                .max_by_key(|o| o.basis());
            if let Some((index, o)) = newest.and_then(|o| Some((from_work(&o.observation_id)?, o)))
            {
                firsts.push((index, key.clone(), o.clone()));
            }
        }
        firsts
    }

    /// A claim that is not committed (or awaits its run) has never been a row and cannot become
    /// one in this batch: keys with nothing else to do are dropped before their rows are read.
    fn keep_published(&mut self, visibility: &HashMap<ObservationId, Visibility>) {
        self.work.retain(|_, w| {
            w.candidates
                .retain(|id| visibility.get(id).is_some_and(Visibility::is_published));
            w.full || !w.candidates.is_empty()
        });
    }
}

/// One key's candidates that a held claim depends on: those held back, and those superseded
/// (one of them may be the claim held).
struct HeldWork {
    key: ProjectionKey,
    candidates: Vec<(Observation, Visibility)>,
    first_change: usize,
}

impl HeldWork {
    fn of(
        batch: &Batch,
        key: &ProjectionKey,
        work: &KeyWork,
        visibility: &HashMap<ObservationId, Visibility>,
    ) -> Option<Self> {
        let candidates: Vec<(Observation, Visibility)> = work
            .candidates
            .iter()
            .filter_map(|id| Some((batch.by_id.get(id)?, *visibility.get(id)?)))
            .filter(|(_, v)| v.held().is_some() || *v == Visibility::Superseded)
            .map(|(o, v)| (o.clone(), v))
            .collect();
        (!candidates.is_empty()).then(|| Self {
            key: key.clone(),
            candidates,
            first_change: work.first_change,
        })
    }

    fn awaits_run(&self) -> bool {
        self.candidates
            .iter()
            .any(|(_, v)| *v == Visibility::AwaitingRun)
    }
}

/// Maps a store error to a failure of change `index`.
fn failed(index: usize) -> impl FnOnce(StoreError) -> BatchFailure {
    move |error| BatchFailure { index, error }
}

impl Projector {
    /// Applies a stream batch: every projection key the changes can affect is computed once,
    /// from fresh (consistent) reads, up to `KEY_CONCURRENCY` keys at a time. A new claim is
    /// compared with the current row (no history read); only a row whose own claim lost its
    /// eligibility is recomputed from the item's history. Large deliveries and runs are split
    /// into `ProjectionWork` records instead of being projected inline.
    pub async fn apply_batch(&self, changes: &[EvidenceChange]) -> Result<(), BatchFailure> {
        // Gather.
        self.count_run_pages(changes).await?;
        let gathered = self.gather(changes).await?;
        let mut batch = self.read_claims(gathered).await?;
        // Decide eligibility.
        let eligibility = Eligibility::new(self.reads.as_ref());
        let visibility = self.decide_visibility(&batch, &eligibility).await?;
        self.reattribute_claims(&batch, &visibility, &eligibility)
            .await?;
        self.hold_claims(&batch, &visibility, &eligibility).await?;
        batch.keep_published(&visibility);
        if batch.work.is_empty() {
            return Ok(());
        }
        let rows = self.current_rows(&batch).await?;
        self.reattribute_rows(&mut batch, &rows, &eligibility)
            .await?;
        let published = batch.published_firsts(changes, &rows, &visibility);
        // Decide winners and write.
        let results = self
            .project_keys(batch, &rows, &visibility, &eligibility)
            .await;
        // Report.
        first_failure(results)?;
        self.release_published(published, &eligibility).await
    }

    /// A source's first row for an item, from a run just published on completion, stands
    /// where the held claim its page left while unpublished stood (the same claim, so the same
    /// basis): that held claim is removed. A held claim of any other claim stays.
    async fn release_published(
        &self,
        firsts: Vec<(usize, ProjectionKey, Observation)>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), BatchFailure> {
        let results: Vec<Result<(), BatchFailure>> = futures_util::stream::iter(firsts)
            .map(|(index, key, claim)| async move {
                let release = async {
                    if eligibility.awaits_its_run(&claim).await? {
                        let held = self.projection.held_claims();
                        held.release(&key, &claim.basis()).await?;
                    }
                    Ok(())
                };
                release.await.map_err(failed(index))
            })
            .buffer_unordered(KEY_CONCURRENCY)
            .collect()
            .await;
        first_failure(results)
    }

    /// Runs: one page count per run and batch.
    async fn count_run_pages(&self, changes: &[EvidenceChange]) -> Result<(), BatchFailure> {
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
            self.note_pages(page, count).await.map_err(failed(index))?;
        }
        Ok(())
    }

    /// The claims and keys the changes ask for, within this invocation's inline budget; what
    /// does not fit is put back as work records, and completed runs enqueue theirs.
    async fn gather(&self, changes: &[EvidenceChange]) -> Result<Gathered, BatchFailure> {
        let mut gathered = Gathered::new();
        for (index, change) in changes.iter().enumerate() {
            self.gather_change(index, change, &mut gathered)
                .await
                .map_err(failed(index))?;
        }
        Ok(gathered)
    }

    async fn gather_change(
        &self,
        index: usize,
        change: &EvidenceChange,
        gathered: &mut Gathered,
    ) -> Result<(), StoreError> {
        match change {
            EvidenceChange::Ignored | EvidenceChange::RunPage(_) => {}
            EvidenceChange::Observation(o) => {
                gathered.budget = gathered.budget.saturating_sub(1);
                gathered.candidates.push((index, o.observation_id.clone()))
            }
            EvidenceChange::DeliveryCommitted(ids) if ids.len() as u32 <= gathered.budget => {
                gathered.budget -= ids.len() as u32;
                gathered
                    .candidates
                    .extend(ids.iter().map(|id| (index, id.clone())))
            }
            EvidenceChange::DeliveryCommitted(ids) => {
                let work = self.slices_of_delivery(ids).await?;
                self.writes.enqueue_work(&work).await?;
            }
            EvidenceChange::Work(work) => self.take_slice(index, work, gathered).await?,
            EvidenceChange::RunCompleted(run) => self.run_completed(run).await?,
            EvidenceChange::CorrectionRules { source, items } => {
                gathered.recompute(index, source, items.iter().cloned())
            }
            EvidenceChange::SourceQuarantine(source) => {
                let items = self.projection.items_of_source(source).await?;
                gathered.recompute(index, source, items.into_iter());
            }
        }
        Ok(())
    }

    /// A work slice runs inline if it fits the budget (or is this invocation's first); otherwise
    /// a later invocation takes it.
    async fn take_slice(
        &self,
        index: usize,
        work: &ProjectionWork,
        gathered: &mut Gathered,
    ) -> Result<(), StoreError> {
        let size = work.end.saturating_sub(work.start);
        if size <= gathered.budget || !gathered.sliced_any {
            gathered.sliced_any = true;
            gathered.budget = gathered.budget.saturating_sub(size);
            gathered.candidates.extend((work.start..work.end).map(|i| {
                (
                    index,
                    ObservationId::derive_for(&work.delivery_key, work.epoch, i as usize),
                )
            }));
            return Ok(());
        }
        let later = ProjectionWork {
            deferrals: work.deferrals + 1,
            ..work.clone()
        };
        self.writes.enqueue_work(std::slice::from_ref(&later)).await
    }

    /// Fresh copies of every candidate (an image may predate a supersession marker), and the
    /// copies that superseded them: a claim re-attributed while its delivery was pending
    /// becomes eligible with the delivery, under its copy's id.
    async fn read_claims(&self, gathered: Gathered) -> Result<Batch, BatchFailure> {
        let mut first_of: HashMap<ObservationId, usize> = gathered
            .candidates
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
        Ok(Batch::group(first_of, fresh, gathered.full_keys))
    }

    /// Each candidate's eligibility, once, after one read of the state of every source the
    /// batch touches.
    async fn decide_visibility(
        &self,
        batch: &Batch,
        eligibility: &Eligibility<'_>,
    ) -> Result<HashMap<ObservationId, Visibility>, BatchFailure> {
        eligibility
            .prefetch_sources(
                batch
                    .by_id
                    .values()
                    .map(Observation::source)
                    .chain(batch.work.keys().map(|k| k.source.clone())),
            )
            .await
            .map_err(failed(batch.first_change()))?;
        let visibilities: Vec<Result<(ObservationId, Visibility), BatchFailure>> =
            futures_util::stream::iter(batch.by_id.keys().cloned().collect::<Vec<_>>())
                .map(|id: ObservationId| async move {
                    let visibility = match batch.by_id.get(&id) {
                        Some(o) => eligibility.check_for_row(o).await,
                        None => Ok(Visibility::NotCommitted),
                    };
                    visibility
                        .map(|v| (id.clone(), v))
                        .map_err(failed(batch.first_change_of(&id)))
                })
                .buffer_unordered(KEY_CONCURRENCY)
                .collect()
                .await;
        let mut visibility: HashMap<ObservationId, Visibility> = HashMap::new();
        for result in visibilities {
            let (id, v) = result?;
            visibility.insert(id, v);
        }
        Ok(visibility)
    }

    /// Claims an identity rule attributes elsewhere (written before the rule, or by an ingest
    /// that read the rules before they changed, or chunks of a delivery that was pending when
    /// they changed) are re-attributed now; their copies come back as their own stream records.
    async fn reattribute_claims(
        &self,
        batch: &Batch,
        visibility: &HashMap<ObservationId, Visibility>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), BatchFailure> {
        let mut moves: Vec<Reattribution> = Vec::new();
        for (id, v) in visibility {
            if *v == Visibility::AwaitingCorrection {
                if let Some(o) = batch.by_id.get(id) {
                    moves.extend(Self::move_needed(batch, id, o, eligibility).await?);
                }
            }
        }
        // Staged observations not committed yet are re-attributed too (a correction must cover
        // the rest of a pending delivery): their visibility stopped at NotCommitted.
        for (id, v) in visibility {
            if *v == Visibility::NotCommitted {
                if let Some(o) = batch.by_id.get(id).filter(|o| o.superseded_by.is_none()) {
                    moves.extend(Self::move_needed(batch, id, o, eligibility).await?);
                }
            }
        }
        if moves.is_empty() {
            return Ok(());
        }
        self.writes
            .reattribute(&moves, Timestamp::now())
            .await
            .map_err(|error| BatchFailure {
                index: moves
                    .iter()
                    .filter_map(|m| batch.first_of.get(&m.old.observation_id).copied())
                    .min()
                    .unwrap_or(0),
                error,
            })?;
        Ok(())
    }

    /// The re-attribution one claim needs under its source's rules, if any.
    async fn move_needed(
        batch: &Batch,
        id: &ObservationId,
        observation: &Observation,
        eligibility: &Eligibility<'_>,
    ) -> Result<Option<Reattribution>, BatchFailure> {
        let rules = eligibility
            .rules(&observation.source())
            .await
            .map_err(failed(batch.first_change_of(id)))?;
        Ok(Reattribution::needed(&rules, observation))
    }

    /// Holds each key's newest held claim (`Projector::hold_key`), up to `KEY_CONCURRENCY` keys
    /// at a time, after one read of the rows of the keys with a claim awaiting its run.
    async fn hold_claims(
        &self,
        batch: &Batch,
        visibility: &HashMap<ObservationId, Visibility>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), BatchFailure> {
        let keys: Vec<HeldWork> = batch
            .work
            .iter()
            .filter_map(|(key, work)| HeldWork::of(batch, key, work, visibility))
            .collect();
        let awaiting: Vec<ProjectionKey> = keys
            .iter()
            .filter(|k| k.awaits_run())
            .map(|k| k.key.clone())
            .collect();
        let rows = match awaiting.is_empty() {
            true => HashMap::new(),
            false => self
                .projection
                .current_many(&awaiting)
                .await
                .map_err(failed(batch.first_change()))?,
        };
        let results: Vec<Result<(), BatchFailure>> = futures_util::stream::iter(keys)
            .map(|k| {
                let has_row = rows.contains_key(&k.key);
                async move {
                    self.hold_key(&k.key, &k.candidates, has_row, eligibility)
                        .await
                        .map_err(failed(k.first_change))
                }
            })
            .buffer_unordered(KEY_CONCURRENCY)
            .collect()
            .await;
        first_failure(results)
    }

    /// The current row of every key left to compute, in one read.
    async fn current_rows(
        &self,
        batch: &Batch,
    ) -> Result<HashMap<ProjectionKey, ProjectedOffer>, BatchFailure> {
        let keys: Vec<ProjectionKey> = batch.work.keys().cloned().collect();
        self.projection
            .current_many(&keys)
            .await
            .map_err(failed(batch.first_change()))
    }

    /// A current row whose claim an identity rule attributes elsewhere: re-attribute the
    /// claim from the row itself (whatever the index shows) and recompute the row.
    async fn reattribute_rows(
        &self,
        batch: &mut Batch,
        rows: &HashMap<ProjectionKey, ProjectedOffer>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), BatchFailure> {
        let mut row_moves: Vec<Reattribution> = Vec::new();
        for (key, row) in rows {
            let rules = eligibility
                .rules(&key.source)
                .await
                .map_err(failed(batch.work.get(key).map_or(0, |w| w.first_change)))?;
            if !rules.attributes(&row.observation) {
                if let Some(w) = batch.work.get_mut(key) {
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
        if row_moves.is_empty() {
            return Ok(());
        }
        self.writes
            .reattribute(&row_moves, Timestamp::now())
            .await
            .map_err(failed(batch.first_change()))?;
        Ok(())
    }

    /// Decides and writes every key's row, up to `KEY_CONCURRENCY` keys at a time.
    async fn project_keys(
        &self,
        batch: Batch,
        rows: &HashMap<ProjectionKey, ProjectedOffer>,
        visibility: &HashMap<ObservationId, Visibility>,
        eligibility: &Eligibility<'_>,
    ) -> Vec<Result<(), BatchFailure>> {
        let Batch { by_id, work, .. } = batch;
        let by_id = &by_id;
        futures_util::stream::iter(work)
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
                .map_err(failed(key_work.first_change))
            })
            .buffer_unordered(KEY_CONCURRENCY)
            .collect()
            .await
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

    /// Pages of a per-page run were projected as they committed; those of a run that recorded
    /// on_run_complete when it started become eligible now: one work record per page slice.
    async fn run_completed(&self, run: &Run) -> Result<(), StoreError> {
        let policy = match run.publication {
            Some(recorded) => recorded,
            None => self
                .reads
                .connector_config(&run.connector)
                .await?
                .map_or(Publication::PerPage, |c| c.publication),
        };
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
}

/// The first failure by change position; every change before it was fully applied.
fn first_failure(results: Vec<Result<(), BatchFailure>>) -> Result<(), BatchFailure> {
    match results
        .into_iter()
        .filter_map(Result::err)
        .min_by_key(|f| f.index)
    {
        Some(failure) => Err(failure),
        None => Ok(()),
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
