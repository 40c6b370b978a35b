//! As-of reads: what a read route would have answered at an earlier instant `at`, rebuilt from
//! the evidence (docs/architecture.md section 7), never from the projection, which only knows
//! the present. A claim counts if it was recorded by `at`; its visibility is judged by what was
//! in force at `at`:
//!
//! - a staged delivery is committed once its commit marker's `committed_at` is not later;
//! - a run of an `on_run_complete` connector is published once it was completed by then;
//! - a claim is superseded once the copy that supersedes it was recorded (identity corrections
//!   write the copy when they re-attribute the claim);
//! - a source is quarantined when its last quarantine event by then is a `set`;
//! - a verification counts from when it was recorded (`VerificationView::at`).
//!
//! The current offer of each source is then the eligible claim with the greatest
//! `Observation::basis`, as the projector chooses it.

use crate::domain::connector::{ConnectorConfig, Publication};
use crate::domain::ids::{ConnectorId, ObservationId, TenantId};
use crate::domain::model::{
    CommitMarker, Observation, Run, RunStatus, SourceQuarantineEvent, SourceRef,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use crate::protocols::projection::{EvidenceReads, Visibility};
use crate::protocols::query::{ExcludedSource, Exclusion};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Claims asked of the history index per request of an as-of read.
const PAGE: i32 = 1000;

/// When a claim was stored. A claim stored before the time was kept counts from when its
/// delivery was first recorded, or else from when it was retrieved: the earliest it can have
/// been stored.
pub fn recorded_time(o: &Observation) -> Timestamp {
    o.recorded_at
        .or(o.delivery_recorded_at)
        .unwrap_or(o.retrieved_at)
}

/// Every claim of the tenant's `item` recorded by `at`, each with its visibility at `at`,
/// newest first in the projection order.
pub async fn claims_at(
    reads: &dyn EvidenceReads,
    tenant: &TenantId,
    item: &str,
    at: Timestamp,
) -> Result<Vec<(Observation, Visibility)>, StoreError> {
    stood_at(reads, every_claim(reads, tenant, item).await?, at).await
}

/// Those of `claims` recorded by `at`, each as it stood then (a supersession recorded later is
/// not shown) with its visibility then, in the order given.
pub async fn stood_at(
    reads: &dyn EvidenceReads,
    claims: Vec<Observation>,
    at: Timestamp,
) -> Result<Vec<(Observation, Visibility)>, StoreError> {
    let recorded: Vec<Observation> = claims
        .into_iter()
        .filter(|o| recorded_time(o) <= at)
        .collect();
    let context = Context::read(reads, &recorded, at).await?;
    Ok(recorded
        .into_iter()
        .map(|mut o| {
            let visibility = context.visibility(&o);
            if !context.superseded(&o) {
                o.superseded_by = None;
            }
            (o, visibility)
        })
        .collect())
}

/// The current claim of each source at `at`, ordered by source as the projection orders its
/// rows.
pub fn current_claims(claims: &[(Observation, Visibility)]) -> Vec<Observation> {
    standing(claims).0
}

/// Each source's newest claim that would be current but for its source's quarantine, as the
/// projection tracks it, and for a source without one its newest held claim, as the projector
/// holds it: the current claims, ordered by source, and the sources left out (quarantined,
/// their run unpublished, or their claims from the future), ordered as a live answer orders them.
pub fn standing(claims: &[(Observation, Visibility)]) -> (Vec<Observation>, Vec<ExcludedSource>) {
    type Newest<'a> = BTreeMap<String, (String, &'a Observation, Visibility)>;
    let (mut best, mut held): (Newest, Newest) = (BTreeMap::new(), BTreeMap::new());
    for (o, visibility) in claims {
        let slot = match visibility {
            Visibility::Eligible | Visibility::SourceQuarantined => &mut best,
            v if v.held().is_some() => &mut held,
            _ => continue,
        };
        let row = format!("{}#{}", o.connector, o.source_account);
        let basis = o.basis();
        if slot.get(&row).is_none_or(|(newest, _, _)| *newest < basis) {
            slot.insert(row, (basis, o, *visibility));
        }
    }
    let mut current = Vec::new();
    let mut excluded = Vec::new();
    for (row, (_, o, visibility)) in &best {
        match visibility {
            Visibility::Eligible => current.push((*o).clone()),
            _ => excluded.push(ExcludedSource::of(o, Exclusion::SourceQuarantined)),
        }
        held.remove(row);
    }
    for (_, o, visibility) in held.into_values() {
        if let Some(reason) = visibility.held() {
            excluded.push(ExcludedSource::of(o, reason.into()));
        }
    }
    ExcludedSource::order(&mut excluded);
    (current, excluded)
}

/// The item's whole history, page by page.
async fn every_claim(
    reads: &dyn EvidenceReads,
    tenant: &TenantId,
    item: &str,
) -> Result<Vec<Observation>, StoreError> {
    let mut claims = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = reads
            .item_history(tenant, item, cursor.as_deref(), PAGE)
            .await?;
        claims.extend(page.observations);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(claims),
        }
    }
}

/// What the visibility of the claims at `at` depends on, read once for all of them.
struct Context {
    at: Timestamp,
    /// When each superseding copy was recorded.
    copies: HashMap<ObservationId, Timestamp>,
    quarantines: HashMap<SourceRef, Vec<SourceQuarantineEvent>>,
    connectors: HashMap<ConnectorId, Option<ConnectorConfig>>,
    runs: HashMap<String, Option<Run>>,
    markers: HashMap<(String, u32), Option<CommitMarker>>,
}

impl Context {
    async fn read(
        reads: &dyn EvidenceReads,
        claims: &[Observation],
        at: Timestamp,
    ) -> Result<Self, StoreError> {
        let copies: Vec<ObservationId> = claims
            .iter()
            .filter_map(|o| o.superseded_by.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let copies = reads
            .observations(&copies)
            .await?
            .into_iter()
            .map(|copy| (copy.observation_id.clone(), recorded_time(&copy)))
            .collect();
        let mut context = Self {
            at,
            copies,
            quarantines: HashMap::new(),
            connectors: HashMap::new(),
            runs: HashMap::new(),
            markers: HashMap::new(),
        };
        context.read_sources(reads, claims).await?;
        context.read_runs(reads, claims).await?;
        context.read_markers(reads, claims).await?;
        Ok(context)
    }

    async fn read_sources(
        &mut self,
        reads: &dyn EvidenceReads,
        claims: &[Observation],
    ) -> Result<(), StoreError> {
        let sources: BTreeSet<SourceRef> = claims.iter().map(Observation::source).collect();
        for source in sources {
            let events = reads.source_quarantine_history(&source).await?;
            self.quarantines.insert(source, events);
        }
        Ok(())
    }

    /// The connectors of claims from runs and, where one publishes on run completion, the runs.
    async fn read_runs(
        &mut self,
        reads: &dyn EvidenceReads,
        claims: &[Observation],
    ) -> Result<(), StoreError> {
        for o in claims
            .iter()
            .filter(|o| o.run_id.is_some() && o.run_publication.is_none())
        {
            if !self.connectors.contains_key(&o.connector) {
                let config = reads.connector_config(&o.connector).await?;
                self.connectors.insert(o.connector.clone(), config);
            }
        }
        for o in claims {
            let (Some(run_id), Publication::OnRunComplete) = (&o.run_id, self.publication(o))
            else {
                continue;
            };
            if !self.runs.contains_key(run_id.as_str()) {
                let run = reads.run(run_id.as_str()).await?;
                self.runs.insert(run_id.to_string(), run);
            }
        }
        Ok(())
    }

    async fn read_markers(
        &mut self,
        reads: &dyn EvidenceReads,
        claims: &[Observation],
    ) -> Result<(), StoreError> {
        let staged: BTreeSet<(String, u32)> = claims
            .iter()
            .filter(|o| o.staged)
            .map(|o| (o.delivery_key.clone(), o.epoch))
            .collect();
        for key in staged {
            let marker = reads.commit_marker(&key.0, key.1).await?;
            self.markers.insert(key, marker);
        }
        Ok(())
    }

    /// As the live rule: the policy the claim's run recorded, else its connector's current one.
    fn publication(&self, o: &Observation) -> Publication {
        o.run_publication.unwrap_or_else(|| {
            self.connectors
                .get(&o.connector)
                .and_then(Option::as_ref)
                .map_or(Publication::PerPage, |c| c.publication)
        })
    }

    /// The claim's visibility at `at`, in the order the live rule checks it.
    fn visibility(&self, o: &Observation) -> Visibility {
        if !self.committed(o) {
            return Visibility::NotCommitted;
        }
        if !self.run_published(o) {
            return Visibility::AwaitingRun;
        }
        if self.superseded(o) {
            return Visibility::Superseded;
        }
        if o.future_dated {
            return Visibility::FutureDated;
        }
        if self.source_quarantined(&o.source()) {
            return Visibility::SourceQuarantined;
        }
        Visibility::Eligible
    }

    fn committed(&self, o: &Observation) -> bool {
        !o.staged
            || self
                .markers
                .get(&(o.delivery_key.clone(), o.epoch))
                .and_then(Option::as_ref)
                .is_some_and(|m| m.committed_at <= self.at)
    }

    fn run_published(&self, o: &Observation) -> bool {
        let Some(run_id) = &o.run_id else {
            return true;
        };
        if self.publication(o) == Publication::PerPage {
            return true;
        }
        self.runs
            .get(run_id.as_str())
            .and_then(Option::as_ref)
            .is_some_and(|run| {
                run.status == Some(RunStatus::Complete)
                    && run.completed_at.unwrap_or(run.updated_at) <= self.at
            })
    }

    fn superseded(&self, o: &Observation) -> bool {
        o.superseded_by
            .as_ref()
            .and_then(|copy| self.copies.get(copy))
            .is_some_and(|recorded| *recorded <= self.at)
    }

    fn source_quarantined(&self, source: &SourceRef) -> bool {
        self.quarantines
            .get(source)
            .and_then(|events| {
                events
                    .iter()
                    .filter(|e| e.at <= self.at)
                    .max_by_key(|e| e.at)
            })
            .is_some_and(|last| last.action == "set")
    }
}
