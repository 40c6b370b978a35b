//! Whether a stored claim may be current (`Visibility`), decided once per value per batch
//! (`Eligibility`: single-flight reads of commit markers, connectors, rules and source
//! quarantine state).

use super::*;

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
    /// Observed later than it was retrieved (beyond the connector's clock-skew tolerance): a
    /// claim from the future, in history (flagged), never current.
    FutureDated,
    /// An identity correction in force attributes it to another item; its re-attributed copy
    /// takes its place (in history, marked; never current under this item).
    AwaitingCorrection,
    /// Its source is quarantined: in history, not current.
    SourceQuarantined,
}

impl Visibility {
    /// Whether readers may see the observation at all (in history).
    pub fn is_published(&self) -> bool {
        !matches!(self, Self::NotCommitted | Self::AwaitingRun)
    }

    /// Why a claim of this visibility is held back from being current while its source may have
    /// nothing current to show: from the future, or in a run not published yet.
    pub fn held(&self) -> Option<Held> {
        match self {
            Self::FutureDated => Some(Held::FutureDated),
            Self::AwaitingRun => Some(Held::RunUnpublished),
            _ => None,
        }
    }
}

type Cell<T> = Arc<tokio::sync::OnceCell<T>>;

#[derive(Default)]
struct EligibilityCache {
    markers: HashMap<(String, u32), Cell<bool>>,
    runs: HashMap<String, Cell<Option<Run>>>,
    connectors: HashMap<ConnectorId, Cell<Option<ConnectorConfig>>>,
    quarantines: HashMap<SourceRef, Cell<bool>>,
    rules: HashMap<SourceRef, Cell<CorrectionRules>>,
}

/// Evaluates eligibility with per-pass caches (one projector batch or one read request). Shared
/// by the concurrent key computations of a batch (`&self`): each value is read once, however
/// many keys ask for it at the same moment.
pub struct Eligibility<'a> {
    reads: &'a dyn EvidenceReads,
    cache: Mutex<EligibilityCache>,
}

impl<'a> Eligibility<'a> {
    pub fn new(reads: &'a dyn EvidenceReads) -> Self {
        Self {
            reads,
            cache: Mutex::new(EligibilityCache::default()),
        }
    }

    /// The cell that holds (or will hold) one cached value.
    fn cell<K: Clone + Eq + std::hash::Hash, T>(
        &self,
        pick: impl FnOnce(&mut EligibilityCache) -> &mut HashMap<K, Cell<T>>,
        key: &K,
    ) -> Cell<T> {
        match self.cache.lock() {
            Ok(mut cache) => pick(&mut cache).entry(key.clone()).or_default().clone(),
            // A poisoned cache only costs a read.
            Err(_) => Cell::default(),
        }
    }

    /// Reads the state of each source in `sources` not read yet in this pass, all in one round
    /// trip, so that the checks of many claims do not read them one by one.
    pub async fn prefetch_sources(
        &self,
        sources: impl IntoIterator<Item = SourceRef>,
    ) -> Result<(), StoreError> {
        let wanted: Vec<SourceRef> = sources
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|source| {
                !self.cell(|c| &mut c.quarantines, source).initialized()
                    || !self.cell(|c| &mut c.rules, source).initialized()
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        for state in self.reads.source_states(&wanted).await? {
            self.seed_source(state);
        }
        Ok(())
    }

    /// Fresh (consistent) copies of `indexed` claims (index copies, which may lag their base
    /// items), read in the same round trip as what their visibility depends on and this pass
    /// has not read yet: their sources' state, the connectors of run pages, the commit markers
    /// of staged deliveries. In the order of `indexed`; a claim no longer stored is left out.
    pub async fn fresh_copies(
        &self,
        indexed: &[Observation],
    ) -> Result<Vec<Observation>, StoreError> {
        let ids: Vec<ObservationId> = indexed.iter().map(|o| o.observation_id.clone()).collect();
        let sources: BTreeSet<SourceRef> = indexed
            .iter()
            .map(Observation::source)
            .filter(|source| {
                !self.cell(|c| &mut c.quarantines, source).initialized()
                    || !self.cell(|c| &mut c.rules, source).initialized()
            })
            .collect();
        let connectors: BTreeSet<ConnectorId> = indexed
            .iter()
            .filter(|o| o.run_id.is_some())
            .map(|o| o.connector.clone())
            .filter(|id| !self.cell(|c| &mut c.connectors, id).initialized())
            .collect();
        let markers: BTreeSet<(String, u32)> = indexed
            .iter()
            .filter(|o| o.staged)
            .map(|o| (o.delivery_key.clone(), o.epoch))
            .filter(|key| !self.cell(|c| &mut c.markers, key).initialized())
            .collect();
        let context = ContextKeys {
            sources: sources.into_iter().collect(),
            connectors: connectors.into_iter().collect(),
            commit_markers: markers.into_iter().collect(),
        };
        let (observations, found) = self.reads.observations_in_context(&ids, &context).await?;
        // A cell a concurrent check filled meanwhile holds an equally fresh value.
        for state in found.sources {
            self.seed_source(state);
        }
        for (id, config) in found.connectors {
            let _ = self.cell(|c| &mut c.connectors, &id).set(config);
        }
        for (key, exists) in found.commit_markers {
            let _ = self.cell(|c| &mut c.markers, &key).set(exists);
        }
        Ok(observations)
    }

    fn seed_source(&self, state: SourceState) {
        let _ = self
            .cell(|c| &mut c.quarantines, &state.source)
            .set(state.quarantine.is_some_and(|q| q.active));
        let _ = self.cell(|c| &mut c.rules, &state.source).set(state.rules);
    }

    pub async fn source_quarantined(&self, source: &SourceRef) -> Result<bool, StoreError> {
        let cell = self.cell(|c| &mut c.quarantines, source);
        cell.get_or_try_init(|| async {
            Ok(self
                .reads
                .source_quarantine(source)
                .await?
                .is_some_and(|q| q.active))
        })
        .await
        .copied()
    }

    /// The identity rules in force for a source.
    pub async fn rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError> {
        let cell = self.cell(|c| &mut c.rules, source);
        cell.get_or_try_init(|| self.reads.correction_rules(source))
            .await
            .cloned()
    }

    /// Unstaged observations were committed with their delivery; staged ones once their
    /// delivery's commit marker exists (which, unlike the replay record, never expires).
    async fn delivery_committed(&self, observation: &Observation) -> Result<bool, StoreError> {
        if !observation.staged {
            return Ok(true);
        }
        let key = (observation.delivery_key.clone(), observation.epoch);
        let cell = self.cell(|c| &mut c.markers, &key);
        cell.get_or_try_init(|| self.reads.commit_marker_exists(&key.0, key.1))
            .await
            .copied()
    }

    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        let cell = self.cell(|c| &mut c.connectors, id);
        cell.get_or_try_init(|| self.reads.connector_config(id))
            .await
            .cloned()
    }

    /// Whether the observation is from a run of a connector that publishes a run's pages only
    /// once the run is complete.
    /// The policy is the one its run recorded when it started (copied onto the claim at
    /// ingest); a claim stored before runs recorded it follows its connector's current policy.
    pub async fn awaits_its_run(&self, observation: &Observation) -> Result<bool, StoreError> {
        if observation.run_id.is_none() {
            return Ok(false);
        }
        let policy = match observation.run_publication {
            Some(recorded) => recorded,
            None => self
                .connector(&observation.connector)
                .await?
                .map_or(Publication::PerPage, |c| c.publication),
        };
        Ok(policy == Publication::OnRunComplete)
    }

    async fn run_published(&self, observation: &Observation) -> Result<bool, StoreError> {
        let Some(run_id) = &observation.run_id else {
            return Ok(true);
        };
        if !self.awaits_its_run(observation).await? {
            return Ok(true);
        }
        let cell = self.cell(|c| &mut c.runs, &run_id.to_string());
        let run = cell
            .get_or_try_init(|| self.reads.run(run_id.as_str()))
            .await?;
        // Published when the projector marked the run COMPLETE (after counting its pages).
        Ok(run
            .as_ref()
            .is_some_and(|r| r.status == Some(RunStatus::Complete)))
    }

    /// Everything but the source quarantine: whether the observation may be a projection row.
    pub async fn check_for_row(&self, observation: &Observation) -> Result<Visibility, StoreError> {
        if !self.delivery_committed(observation).await? {
            return Ok(Visibility::NotCommitted);
        }
        if !self.run_published(observation).await? {
            return Ok(Visibility::AwaitingRun);
        }
        if observation.superseded_by.is_some() {
            return Ok(Visibility::Superseded);
        }
        if observation.future_dated {
            return Ok(Visibility::FutureDated);
        }
        if !self
            .rules(&observation.source())
            .await?
            .attributes(observation)
        {
            return Ok(Visibility::AwaitingCorrection);
        }
        Ok(Visibility::Eligible)
    }

    /// The full rule: whether the observation may be the current offer of its source.
    pub async fn check(&self, observation: &Observation) -> Result<Visibility, StoreError> {
        match self.check_for_row(observation).await? {
            Visibility::Eligible if self.source_quarantined(&observation.source()).await? => {
                Ok(Visibility::SourceQuarantined)
            }
            other => Ok(other),
        }
    }
}
