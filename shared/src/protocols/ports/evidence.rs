//! The ports of the projection and the read path: the evidence reads they need, the projection
//! table, and the projector's own writes to the evidence table.

use super::reattribution::Reattribution;
use super::StoreError;
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::{ConnectorId, ObservationId, RunId, SourceAccount, TenantId};
use crate::domain::item::CanonicalItem;
use crate::domain::model::{
    CommitMarker, CorrectionRules, Observation, ProjectionWork, ReplayRecord, Run, RunPageRecord,
    RunPages, SourceQuarantine, SourceQuarantineEvent, SourceRef,
};
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::VerificationEvent;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

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
    /// The identity rules in force for a source (consistent; empty when none).
    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError>;
    /// The quarantine state and identity rules of each of `sources` (consistent, in the order
    /// asked): what the eligibility of their claims depends on, in one round trip where the
    /// store allows it.
    async fn source_states(&self, sources: &[SourceRef]) -> Result<Vec<SourceState>, StoreError> {
        let mut states = Vec::with_capacity(sources.len());
        for source in sources {
            states.push(SourceState {
                source: source.clone(),
                quarantine: self.source_quarantine(source).await?,
                rules: self.correction_rules(source).await?,
            });
        }
        Ok(states)
    }
    async fn observation(&self, id: &str) -> Result<Option<Observation>, StoreError>;
    /// The stored observations of `ids` (consistent reads, in the order asked; the ids not
    /// found are left out).
    async fn observations(&self, ids: &[ObservationId]) -> Result<Vec<Observation>, StoreError>;
    /// `observations(ids)` together with what their visibility depends on, as `context` names
    /// it (consistent reads), in one round trip (one `BatchGetItem` per 100 keys in DynamoDB).
    async fn observations_in_context(
        &self,
        ids: &[ObservationId],
        context: &ContextKeys,
    ) -> Result<(Vec<Observation>, ClaimContext), StoreError>;
    /// `limit` observations of the item, newest first in the projection order
    /// (`Observation::basis`: `observed_at`, then `delivery_recorded_at`, then `observation_id`).
    async fn item_history(
        &self,
        tenant: &TenantId,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<HistoryPage, StoreError>;
    /// Every set and lift of a source's quarantine, oldest first (consistent): what an as-of
    /// read judges the source by.
    async fn source_quarantine_history(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<SourceQuarantineEvent>, StoreError>;
    /// When a staged delivery's epoch committed (`None`: it has not).
    async fn commit_marker(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<Option<CommitMarker>, StoreError>;
    /// Every verification record about the tenant's `item`, any of its claims (consistent).
    async fn item_verifications(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<VerificationEvent>, StoreError>;
    /// The tenant's connectors (their current configurations).
    async fn connectors_of(&self, tenant: &TenantId) -> Result<Vec<ConnectorConfig>, StoreError>;
    /// The health records of the tenant's connectors (`docs/item-schema.md`).
    async fn source_health_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<crate::domain::source_health::SourceHealth>, StoreError>;
    /// A pull connector's schedule (`None`: it is not on the dispatcher's list).
    async fn pull_schedule(
        &self,
        connector: &ConnectorId,
    ) -> Result<Option<crate::domain::source_health::PullSlot>, StoreError>;
}

/// What the visibility of some claims depends on besides the claims themselves: their sources'
/// state, the connectors of run pages (publication policy), the commit markers of staged
/// deliveries (`(delivery key, epoch)`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextKeys {
    pub sources: Vec<SourceRef>,
    pub connectors: Vec<ConnectorId>,
    pub commit_markers: Vec<(String, u32)>,
}

/// What `ContextKeys` named, as stored: each source's state (in the order asked), each
/// connector's configuration (`None`: not stored), whether each commit marker exists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimContext {
    pub sources: Vec<SourceState>,
    pub connectors: Vec<(ConnectorId, Option<ConnectorConfig>)>,
    pub commit_markers: Vec<((String, u32), bool)>,
}

/// What a source's claims are judged by besides themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceState {
    pub source: SourceRef,
    pub quarantine: Option<SourceQuarantine>,
    pub rules: CorrectionRules,
}

/// A projection row: the observation that is current for one (item, source).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedOffer {
    pub observation: Observation,
    /// `observation.basis()`, stored for conditional writes.
    pub basis: String,
    /// The row's source is quarantined: the row keeps tracking the source's newest claim (so
    /// that lifting the quarantine restores it through the projector), and readers skip it.
    #[serde(default)]
    pub source_quarantined: bool,
}

/// Why a source's claim about an item is held back from being current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Observed later than it was retrieved, beyond the connector's clock-skew tolerance.
    FutureDated,
    /// In a run of an `on_run_complete` connector that is not published yet.
    RunUnpublished,
}

/// A source's newest held claim about an item (`Held`), kept beside the item's rows so that an
/// offers answer names the source instead of leaving it out in silence. Readers show it only
/// when the source has no row for the item: a source with a current claim is in the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldClaim {
    pub tenant: TenantId,
    pub item: String,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub reason: Held,
    pub observation_id: ObservationId,
    /// The run that has not been published (`RunUnpublished` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// The claim's `Observation::basis`: a newer held claim replaces an older one.
    pub basis: String,
}

impl HeldClaim {
    /// `o`, held back for `reason`.
    pub fn of(o: &Observation, reason: Held) -> Self {
        Self {
            tenant: o.tenant.clone(),
            item: o.item.clone(),
            connector: o.connector.clone(),
            source_account: o.source_account.clone(),
            reason,
            observation_id: o.observation_id.clone(),
            run_id: match reason {
                Held::RunUnpublished => o.run_id.clone(),
                Held::FutureDated => None,
            },
            basis: o.basis(),
        }
    }

    pub fn key(&self) -> ProjectionKey {
        ProjectionKey {
            item: self.item.clone(),
            source: SourceRef {
                tenant: self.tenant.clone(),
                connector: self.connector.clone(),
                source_account: self.source_account.clone(),
            },
        }
    }
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
    /// The current rows of many keys at once (consistent); absent keys have no row.
    async fn current_many(
        &self,
        keys: &[ProjectionKey],
    ) -> Result<HashMap<ProjectionKey, ProjectedOffer>, StoreError> {
        let mut rows = HashMap::new();
        for key in keys {
            if let Some(row) = self.current(key).await? {
                rows.insert(key.clone(), row);
            }
        }
        Ok(rows)
    }
    /// Writes `offer` if the row's basis is still `expected` (`None`: no row). False when not.
    async fn replace(
        &self,
        offer: &ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, StoreError>;
    /// Deletes the row if its basis is still `expected`. False when not.
    async fn remove(&self, key: &ProjectionKey, expected: &str) -> Result<bool, StoreError>;
    /// Every row of an item (all sources) for a tenant, quarantined sources' rows included.
    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<ProjectedOffer>, StoreError>;
    /// The held claims kept beside the rows (`HeldClaims`).
    fn held_claims(&self) -> &dyn HeldClaims;
    /// Items a source has a row for (quarantined or not).
    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError>;
    /// The current row of every item of a source (consistent rows, quarantined or not).
    async fn rows_of_source(&self, source: &SourceRef) -> Result<Vec<ProjectedOffer>, StoreError> {
        let keys: Vec<ProjectionKey> = self
            .items_of_source(source)
            .await?
            .into_iter()
            .map(|item| ProjectionKey {
                item,
                source: source.clone(),
            })
            .collect();
        Ok(self.current_many(&keys).await?.into_values().collect())
    }
    /// The tenant's items with a row whose part number is `part`'s (every packaging,
    /// condition and revision), each once, sorted.
    async fn items_of_part(
        &self,
        tenant: &TenantId,
        part: &CanonicalItem,
    ) -> Result<Vec<String>, StoreError>;
}

/// The held claims beside the projection's rows (`HeldClaim`), and the offers read of both.
#[async_trait]
pub trait HeldClaims: Send + Sync {
    /// Every row of an item and every held claim about it, in one read: what an offers answer
    /// is made of.
    async fn standing(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<(Vec<ProjectedOffer>, Vec<HeldClaim>), StoreError>;
    /// The held claim of one (item, source), if any (consistent).
    async fn held(&self, key: &ProjectionKey) -> Result<Option<HeldClaim>, StoreError>;
    /// Writes a held claim: with `expected` `None`, only over an older one (or none); else only
    /// if the stored one's basis is still `expected`. False when not.
    async fn hold(&self, claim: &HeldClaim, expected: Option<&str>) -> Result<bool, StoreError>;
    /// Deletes the held claim of one (item, source) if its basis is still `expected`.
    async fn release(&self, key: &ProjectionKey, expected: &str) -> Result<bool, StoreError>;
}

/// Writes the projector makes to the evidence table: run bookkeeping and its own work records.
#[async_trait]
pub trait ProjectorWrites: Send + Sync {
    /// Counts `new_pages` more committed pages on the run item (creating it for a run nobody
    /// started) and returns the item. The count is a hint: stream redelivery may count a page
    /// twice. MUST refuse (`Invariant`) a page whose tenant or connector differs from the run's.
    async fn note_pages(&self, page: &RunPageRecord, new_pages: u32) -> Result<Run, StoreError>;
    /// Marks the run `COMPLETE` (and takes it out of the open-runs index); false, changing
    /// nothing, when it already is or does not exist.
    async fn mark_complete(&self, run_id: &str, at: Timestamp) -> Result<bool, StoreError>;
    /// Stores projection work records; each reaches the projector as its own stream record.
    /// Idempotent: the same work stored twice is one record.
    async fn enqueue_work(&self, work: &[ProjectionWork]) -> Result<(), StoreError>;
    /// Re-attributes observations the rules in force attribute elsewhere (see
    /// `Reattributor`); returns those this call re-attributed.
    async fn reattribute(
        &self,
        moves: &[Reattribution],
        at: Timestamp,
    ) -> Result<Vec<ObservationId>, StoreError>;
}
