//! The stored records: replay record, observation, quarantine entry, run page update.
//! Field names here are the stored attribute names (docs/item-schema.md).

use crate::domain::connector::PayloadFormat;
use crate::domain::envelope::RunPage;
use crate::domain::fingerprint::Fingerprint;
use crate::domain::ids::{
    ConnectorId, IdentityStrength, ObservationId, RunId, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::domain::item::CanonicalItem;
use crate::domain::money::Price;
use crate::domain::quantity::Quantity;
use crate::domain::terms::Terms;
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};

/// Observations are stored in chunks of this many so that a chunk, the replay-record action and
/// the run update fit in one `TransactWriteItems` (100 actions at most).
pub const ROWS_PER_TRANSACTION: usize = 98;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReplayState {
    /// Some chunks of a large delivery are stored; invisible to readers, resumed by the next attempt.
    Pending,
    /// Every observation and the verified raw artifact exist.
    Committed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupConfidence {
    /// The key was checked against every earlier delivery within the dedup horizon.
    WithinHorizon,
    /// The key had been seen before, but its record had expired: exactly-once is not promised.
    BeyondHorizon,
}

/// A link from a delivery stored beyond the horizon to the earlier evidence under the same key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorEpoch {
    pub epoch: u32,
    /// Unknown when the earlier record was already deleted by TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<Timestamp>,
    /// Its observation ids are `ObservationId::derive(key, epoch, 0..count)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_count: Option<u32>,
}

/// One per delivery key: what was stored for it and how often it was delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRecord {
    pub delivery_key: String,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub source_delivery_id: SourceDeliveryId,
    pub identity_strength: IdentityStrength,
    pub identity_basis: String,
    pub state: ReplayState,
    /// Fingerprint under the rule in force when the delivery was first stored; retries are
    /// compared under that rule, whatever the connector declares today.
    pub fingerprint: Fingerprint,
    pub payload_format: PayloadFormat,
    /// For a `defined` format: the connector definition version the payload was read under;
    /// retries are read under that version, whatever the connector's current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_version: Option<u64>,
    pub payload_sha256: String,
    pub artifact_key: String,
    pub content_type: String,
    pub observation_ids: Vec<ObservationId>,
    pub chunks_total: u32,
    pub chunks_done: u32,
    /// Increases each time the key is stored again after its record expired.
    pub epoch: u32,
    pub attempts: u32,
    pub first_attempt_at: Timestamp,
    pub last_attempt_at: Timestamp,
    pub retrieved_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<Timestamp>,
    /// Unix seconds; the table's TTL attribute. Expiry is decided in condition expressions,
    /// never by TTL deletion, which lags.
    pub expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunPage>,
    pub dedup_confidence: DedupConfidence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_epoch: Option<PriorEpoch>,
}

impl ReplayRecord {
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        self.expires_at <= now.unix_seconds()
    }
}

/// What an observation was derived under: its connector's definition version (`None`: a
/// connector configured before definitions) and the normalizer's version. The raw artifact is
/// never rewritten; a different derivation of it is a new, superseding observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Derivation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_version: Option<u64>,
    pub normalizer: String,
}

impl Derivation {
    /// Under a connector's definition version and today's normalizer.
    pub fn now(connector_version: Option<u64>) -> Self {
        Self {
            connector_version,
            normalizer: crate::domain::normalize::NORMALIZER_VERSION.to_owned(),
        }
    }
}

/// What one source claimed about one identified item at one observed time. Append-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub observation_id: ObservationId,
    pub tenant: TenantId,
    pub item: String,
    pub canonical_item: CanonicalItem,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub source_record: String,
    pub delivery_key: String,
    pub identity_strength: IdentityStrength,
    pub epoch: u32,
    pub row_index: u32,
    pub quantity: Quantity,
    pub quantity_basis: String,
    /// The decimal places the unit allowed when the row was read (its connector's declaration):
    /// a quote of a finer quantity is not orderable. Absent for whole units.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quantity_places: u8,
    pub price: Price,
    pub currency: String,
    /// The commercial terms the row stated; absent on observations without any (and on those
    /// stored before terms were read).
    #[serde(default, skip_serializing_if = "Terms::is_empty")]
    pub terms: Terms,
    pub observed_at: Timestamp,
    pub retrieved_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// The publication policy its run recorded when it started (`Run::publication`), copied
    /// at ingest; absent outside runs and on claims stored before runs recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_publication: Option<crate::domain::connector::Publication>,
    /// What it was derived under; absent on claims stored before derivations were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derivation: Option<Derivation>,
    pub artifact_key: String,
    pub artifact_sha256: String,
    pub dedup_confidence: DedupConfidence,
    /// Written in chunks under a `PENDING` record: visible only once its delivery's commit
    /// marker exists. Unstaged observations were committed in the same transaction as their
    /// delivery, so they are visible as soon as they exist.
    #[serde(default)]
    pub staged: bool,
    /// Always `source_reported`: a stored claim is never confirmed stock.
    pub claim: String,
    /// `unverified` unless a separate verification record says otherwise.
    pub verification: String,
    /// Set on an observation whose item identity was corrected: the observation that replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<ObservationId>,
    /// Set on a superseding observation: the one it corrects, and the correction that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<ObservationId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction_id: Option<String>,
    /// The item key the row normalized to, before any identity correction. Corrections are
    /// rules on this key; it never changes along a chain of superseding copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized_item: Option<String>,
    /// When this observation was written (the attempt's clock; a superseding copy: when the
    /// correction wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<Timestamp>,
    /// When its delivery was first recorded (the replay record's `first_attempt_at`: the same
    /// for every row and chunk of the delivery epoch, kept by superseding copies). It orders
    /// claims observed at the same instant (`basis`). Absent on observations stored before the
    /// field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_recorded_at: Option<Timestamp>,
    /// Observed later than retrieved, beyond the connector's clock-skew tolerance: kept in
    /// history, never current.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub future_dated: bool,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl Observation {
    /// The item key the row normalized to (older observations without the field: their item,
    /// which they were stored under before any correction).
    pub fn normalized_item(&self) -> &str {
        self.normalized_item.as_deref().unwrap_or(&self.item)
    }

    /// The projection order as one string (greatest is newest), also the item history's index
    /// sort key (`gsi1sk`): `{observed_at}#r{delivery_recorded_at}#{observation_id}` (times
    /// fixed-width), so that of two claims observed at the same instant the one whose delivery
    /// was recorded later wins, and the id only decides between claims of one delivery. A
    /// claim named by the fallback identity says `f` instead of `r` (`rank_mark`): at the same
    /// instant it ranks below every claim the source named.
    /// An observation stored before `delivery_recorded_at` existed keeps the key it was stored
    /// under, `{observed_at}#{observation_id}`: at the same instant it sorts below every claim
    /// recorded since (`r` sorts after the `o` of `obs_`), and old ones among themselves by id,
    /// as before. So stored index keys and projection rows stay valid as they are.
    pub fn basis(&self) -> String {
        match self.delivery_recorded_at {
            Some(recorded) => format!(
                "{}#{}{}#{}",
                self.observed_at.sort_key(),
                self.rank_mark(),
                recorded.sort_key(),
                self.observation_id
            ),
            None => format!("{}#{}", self.observed_at.sort_key(), self.observation_id),
        }
    }

    /// Before the recorded time in `basis`: a claim the source named sorts with `r`, one named
    /// by the fallback identity with `f`, below every source claim of the same instant (also
    /// those stored before the recorded time was kept, `obs_`): a delivery the source did not
    /// name never displaces one it did, whenever it was recorded.
    fn rank_mark(&self) -> char {
        match self.identity_strength {
            IdentityStrength::Source => RECORDED_MARK,
            IdentityStrength::Fallback => FALLBACK_MARK,
        }
    }

    pub fn source(&self) -> SourceRef {
        SourceRef {
            tenant: self.tenant.clone(),
            connector: self.connector.clone(),
            source_account: self.source_account.clone(),
        }
    }
}

/// Marks the recorded time in a `basis`; it must sort after `o` (observation ids start with
/// `obs_`), so that a claim recorded with its delivery's time ranks above, at the same instant,
/// one stored before that time was kept.
const RECORDED_MARK: char = 'r';
/// Marks the recorded time of a fallback-named claim; it must sort before `o` and `r`.
const FALLBACK_MARK: char = 'f';

/// A source: one supplier account of one connector, within a tenant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceRef {
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
}

pub const CLAIM_SOURCE_REPORTED: &str = "source_reported";
pub const VERIFICATION_UNVERIFIED: &str = "unverified";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuarantineKind {
    /// Same delivery key, different fingerprint.
    Mismatch,
    /// Input that can never be stored (bad envelope, unknown connector, invalid rows, too large).
    Rejected,
}

/// Held for operator review; the message that produced it is not retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineEntry {
    pub quarantine_id: String,
    pub kind: QuarantineKind,
    pub reason_code: String,
    pub message: String,
    /// [`crate::domain::ids::UNREADABLE_ENVELOPE_TENANT`] when the envelope was unreadable.
    pub tenant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_key: Option<String>,
    /// For a mismatch: the fingerprint stored with the original delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_fingerprint: Option<Fingerprint>,
    /// For a mismatch: the new payload's fingerprint under the stored fingerprint's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_fingerprint: Option<Fingerprint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_artifact_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_observation_ids: Option<Vec<ObservationId>>,
    /// The literal evidence of what was received: the payload's own raw artifact for a
    /// mismatch, the whole queue message for a rejection.
    pub evidence_key: String,
    pub evidence_sha256: String,
    pub first_seen_at: Timestamp,
    pub status: String,
    /// For the rows a connector's `quarantine_rows` policy set aside: each row's place and
    /// reason (the delivery's other rows are its observations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_rows: Option<Vec<crate::domain::normalize::RefusedRow>>,
}

pub const QUARANTINE_OPEN: &str = "open";

/// Written by the last chunk of a staged delivery, without TTL: the durable proof that the
/// epoch's observations are all stored, which outlives the replay record's dedup horizon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitMarker {
    pub delivery_key: String,
    pub epoch: u32,
    pub observation_count: u32,
    pub committed_at: Timestamp,
}

/// Marks one page of a run as committed, inside the page's final transaction: it is written as
/// the page's own record (`RunPageRecord`), never as an update of the run item, so the pages
/// of one run share no item and a run's item does not grow with its page count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPageUpdate {
    pub run_id: RunId,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub page: u32,
    pub page_count: Option<u32>,
    pub delivery_key: String,
    pub epoch: u32,
    pub observation_count: u32,
    pub at: Timestamp,
}

/// One committed page of a run (`RUN#{run_id}` / `PAGE#{page:06}`), written in the page's final
/// transaction. Its observation ids are `ObservationId::derive(delivery_key, epoch, 0..count)`,
/// so the page can be projected without the delivery's replay record (which expires).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPageRecord {
    pub run_id: RunId,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub page: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<u32>,
    pub delivery_key: String,
    pub epoch: u32,
    pub observation_count: u32,
    pub committed_at: Timestamp,
}

impl From<&RunPageUpdate> for RunPageRecord {
    fn from(u: &RunPageUpdate) -> Self {
        Self {
            run_id: u.run_id.clone(),
            tenant: u.tenant.clone(),
            connector: u.connector.clone(),
            page: u.page,
            page_count: u.page_count,
            delivery_key: u.delivery_key.clone(),
            epoch: u.epoch,
            observation_count: u.observation_count,
            committed_at: u.at,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunStatus {
    /// Started; pages are still expected.
    Running,
    /// Every page of `1..=page_count` committed.
    Complete,
    /// Past its deadline with pages missing (`missing_pages`). A page committed later still
    /// completes it.
    Incomplete,
}

/// At most this many missing pages are listed on an `INCOMPLETE` run item (`missing_count`
/// says how many there are); the ops route lists them all from the page records.
pub const MAX_LISTED_MISSING_PAGES: usize = 1000;

/// An ingestion run: which connector and credential reference it used, how many pages it
/// requested (`1..=page_count`) and whether it completed. The committed pages are their own
/// records (`RunPageRecord`); this item holds nothing per page, so its size is bounded whatever
/// the page count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: RunId,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    /// Absent when ingest saw pages of a run nobody started (then it is only a page tally).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// A reference to the credential (e.g. a secret's name), never the credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Unix seconds after which the sweeper marks the run `INCOMPLETE` if pages are missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<u32>,
    /// Committed pages the projector has counted: a hint (stream redelivery may count a page
    /// twice) that says when to count the page records exactly.
    #[serde(default)]
    pub pages_seen: u32,
    /// On an `INCOMPLETE` run: the first `MAX_LISTED_MISSING_PAGES` missing pages.
    #[serde(default)]
    pub missing_pages: Vec<u32>,
    #[serde(default)]
    pub missing_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    pub updated_at: Timestamp,
    /// The connector's publication policy when the run started, recorded once and never
    /// changed: it decides when the run's pages are readable, whatever the connector says
    /// later. Absent on a run nobody started (a page tally) and on runs started before runs
    /// recorded it; their pages follow the connector's current policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication: Option<crate::domain::connector::Publication>,
}

/// A slice of a delivery epoch's observations (`start..end` of its row indices) for the
/// projector to project, stored as its own record (`PROJWORK#{delivery_key}#{epoch}` /
/// `SLICE#{start:06}#{deferrals:04}`, expiring after a week) so that it reaches the projector as its own
/// stream record: a 5,000-row delivery or a 50-page run is projected in slices that each finish
/// well within the projector's timeout, instead of one stream record that might never finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectionWork {
    pub delivery_key: String,
    pub epoch: u32,
    pub start: u32,
    pub end: u32,
    /// How many times a busy projector put this slice back for a later invocation.
    #[serde(default)]
    pub deferrals: u32,
}

/// What starting (or re-announcing) a run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStart {
    /// The run is new or still `RUNNING`: its pages are expected.
    Open,
    /// The run is already settled (`COMPLETE` or `INCOMPLETE`) and was left untouched.
    Closed {
        status: RunStatus,
        committed: std::collections::BTreeSet<u32>,
    },
}

/// The committed pages of a run, read from its page records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunPages {
    pub pages: Vec<RunPageRecord>,
}

impl RunPages {
    pub fn committed(&self) -> std::collections::BTreeSet<u32> {
        self.pages.iter().map(|p| p.page).collect()
    }

    /// Pages of `1..=page_count` not committed yet (empty when the count is unknown).
    pub fn missing(&self, page_count: Option<u32>) -> Vec<u32> {
        let committed = self.committed();
        (1..=page_count.unwrap_or(0))
            .filter(|p| !committed.contains(p))
            .collect()
    }

    /// Every page of `1..=page_count` committed.
    pub fn all_committed(&self, page_count: Option<u32>) -> bool {
        page_count.is_some_and(|count| count > 0) && self.missing(page_count).is_empty()
    }
}

/// The current state of a source's quarantine (`SRCQ#{tenant}#{connector}#{account}` /
/// `SRCQ`): whether it is excluded from the current projection now. Every change to it is an
/// append-only `SourceQuarantineEvent` written in the same transaction; this item is only the
/// pointer the projector and readers consult. History keeps everything the source said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceQuarantine {
    pub source: SourceRef,
    pub active: bool,
    /// The reason of the event that set the current state.
    pub reason: String,
    /// When the current state began.
    pub created_at: Timestamp,
    /// The event that set the current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

/// `set` or `lift` of a source quarantine, by whom and why. Append-only (`SRCQ#…` /
/// `EVENT#{at}#{event_id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceQuarantineEvent {
    pub event_id: String,
    pub source: SourceRef,
    /// `set` or `lift`.
    pub action: String,
    pub reason: String,
    /// The operator (the token's subject), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    pub at: Timestamp,
}

/// What an identity correction does to the source's part `from_item`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionKind {
    /// Rows normalized to `from_item` belong to `to_item`.
    Correct,
    /// The previous correction of `from_item` is withdrawn: its rows belong to `from_item` again.
    Withdraw,
}

/// An operator's statement that a source's part was mis-identified: rows from `source` that
/// normalized to `from_item` belong to `to_item` (for a withdrawal, to `from_item` again). The
/// record is append-only (`CORR#{id}` / `CORR`); the observations it superseded are listed by
/// their own records (`CORR#{id}` / `SUP#{old observation id}`), written in the same
/// transaction as each supersession, so an interrupted correction's record is never rewritten
/// and a resumed one adds exactly what is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityCorrection {
    pub correction_id: String,
    pub kind: CorrectionKind,
    pub source: SourceRef,
    /// The item key the rows normalized to (the part as the source named it).
    pub from_item: String,
    pub to_item: CanonicalItem,
    /// The correction this one replaces as the rule for `from_item`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    pub created_at: Timestamp,
}

/// One observation an identity correction re-attributed (`CORR#{id}` / `SUP#{old}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupersessionRecord {
    pub correction_id: String,
    pub superseded: ObservationId,
    pub superseded_by: ObservationId,
    pub at: Timestamp,
}

/// One pass of a correction over the evidence (`CORR#{id}` / `SWEEP#{at}`), append-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepRecord {
    pub correction_id: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// Observations found that still needed re-attribution, and those this pass re-attributed.
    pub found: u32,
    pub superseded: u32,
}

/// The rule in force for one part of a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectionRule {
    pub to_item: CanonicalItem,
    pub correction_id: String,
    pub since: Timestamp,
}

/// The identity rules in force for one source (`CRULES#{tenant}#{connector}#{account}` /
/// `RULES`), keyed by the normalized item key they apply to. Ingest attributes new rows by
/// them; the projector and the read path never show a claim the rules attribute elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectionRules {
    #[serde(default)]
    pub rules: std::collections::BTreeMap<String, CorrectionRule>,
    /// Bumped by every change; changes are conditional on it.
    #[serde(default)]
    pub version: u64,
}

impl CorrectionRules {
    /// The rule for rows normalized to `normalized_item`, if one is in force.
    pub fn rule_for(&self, normalized_item: &str) -> Option<&CorrectionRule> {
        self.rules.get(normalized_item)
    }

    /// The item a row normalized to `normalized_item` belongs to under these rules.
    pub fn target(&self, normalized_item: &str) -> String {
        self.rule_for(normalized_item)
            .map_or_else(|| normalized_item.to_owned(), |r| r.to_item.key())
    }

    /// Whether `observation` is attributed to the item the rules give it.
    pub fn attributes(&self, observation: &Observation) -> bool {
        self.target(observation.normalized_item()) == observation.item
    }
}

impl Observation {
    /// The copy of this observation that re-attributes it to `to` under `correction_id`: same
    /// evidence (delivery, artifact, row, claim), the corrected item, a new id derived from
    /// (this id, correction id), and a link back. This observation is then marked superseded.
    pub fn reattributed(&self, to: &CanonicalItem, correction_id: &str, at: Timestamp) -> Self {
        Self {
            observation_id: ObservationId::derive_superseding(&self.observation_id, correction_id),
            item: to.key(),
            canonical_item: to.clone(),
            supersedes: Some(self.observation_id.clone()),
            correction_id: Some(correction_id.to_owned()),
            superseded_by: None,
            normalized_item: Some(self.normalized_item().to_owned()),
            recorded_at: Some(at),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(delivery: &str, recorded: Option<&str>) -> Observation {
        let item = CanonicalItem::parse_key("AX-440-R2").unwrap();
        let at = Timestamp::parse("2026-11-29T08:00:00Z").unwrap();
        Observation {
            observation_id: ObservationId::derive_for(delivery, 0, 0),
            tenant: TenantId::parse("acme").unwrap(),
            item: item.key(),
            canonical_item: item,
            connector: ConnectorId::parse("acme-eu").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            source_record: "AX-440-R2".into(),
            delivery_key: delivery.into(),
            identity_strength: IdentityStrength::Source,
            epoch: 0,
            row_index: 0,
            quantity: 1.into(),
            quantity_basis: "each".into(),
            quantity_places: 0,
            price: Price::parse("1.00").unwrap(),
            currency: "EUR".into(),
            terms: Default::default(),
            observed_at: at,
            retrieved_at: at,
            run_id: None,
            run_publication: None,
            derivation: None,
            artifact_key: String::new(),
            artifact_sha256: String::new(),
            dedup_confidence: DedupConfidence::WithinHorizon,
            staged: false,
            claim: CLAIM_SOURCE_REPORTED.into(),
            verification: VERIFICATION_UNVERIFIED.into(),
            superseded_by: None,
            supersedes: None,
            correction_id: None,
            normalized_item: None,
            recorded_at: None,
            delivery_recorded_at: recorded.map(|t| Timestamp::parse(t).unwrap()),
            future_dated: false,
        }
    }

    #[test]
    fn at_one_instant_the_later_recorded_delivery_ranks_higher_whatever_the_ids() {
        // Pairs of deliveries in both id orders: the recorded time decides, never the id.
        for n in 0..16 {
            let (a, b) = (format!("k/a{n}"), format!("k/b{n}"));
            let early = claim(&a, Some("2026-11-29T08:00:05Z"));
            let late = claim(&b, Some("2026-11-29T08:00:05.000001Z"));
            assert!(late.basis() > early.basis(), "{n}");
            // Stored before the recorded time was kept: below every recorded claim, and old
            // ones among themselves by id, exactly the key they were stored under.
            let old = claim(&a, None);
            assert!(late.basis() > old.basis() && early.basis() > old.basis());
            assert_eq!(
                old.basis(),
                format!("2026-11-29T08:00:00.000000Z#{}", old.observation_id)
            );
        }
        // A later instant wins whatever was recorded when.
        let mut newer = claim("k/c", None);
        newer.observed_at = Timestamp::parse("2026-11-29T08:00:01Z").unwrap();
        assert!(newer.basis() > claim("k/d", Some("2030-01-01T00:00:00Z")).basis());
        // The id decides within one delivery (same recorded time).
        let (x, mut y) = (
            claim("k/e", Some("2026-11-29T08:00:05Z")),
            claim("k/e", Some("2026-11-29T08:00:05Z")),
        );
        y.observation_id = ObservationId::derive_for("k/e", 0, 1);
        assert_eq!(x.basis() < y.basis(), x.observation_id < y.observation_id);
    }

    #[test]
    fn a_fallback_claim_never_outranks_a_source_claim_of_the_same_instant() {
        let source = claim("k/s", Some("2026-11-29T08:00:05Z"));
        let old_source = claim("k/o", None);
        for recorded in [
            "2026-11-29T08:00:04Z",
            "2026-11-29T08:00:06Z",
            "2099-01-01T00:00:00Z",
        ] {
            let mut fallback = claim("k/f", Some(recorded));
            fallback.identity_strength = IdentityStrength::Fallback;
            assert!(source.basis() > fallback.basis(), "recorded {recorded}");
            assert!(old_source.basis() > fallback.basis(), "recorded {recorded}");
            // A later instant still wins, whatever names it.
            fallback.observed_at = Timestamp::parse("2026-11-29T08:00:01Z").unwrap();
            assert!(fallback.basis() > source.basis(), "recorded {recorded}");
        }
        // Among fallback claims of one instant, the later recorded one wins, as among sources.
        let mut early = claim("k/g", Some("2026-11-29T08:00:05Z"));
        let mut late = claim("k/h", Some("2026-11-29T08:00:06Z"));
        early.identity_strength = IdentityStrength::Fallback;
        late.identity_strength = IdentityStrength::Fallback;
        assert!(late.basis() > early.basis());
    }

    #[test]
    fn a_superseding_copy_keeps_its_deliverys_recorded_time() {
        let original = claim("k/f", Some("2026-11-29T08:00:05Z"));
        let to = CanonicalItem::parse_key("AX-441").unwrap();
        let copy = original.reattributed(&to, "c1", Timestamp::now());
        assert_eq!(copy.delivery_recorded_at, original.delivery_recorded_at);
        assert!(copy
            .basis()
            .starts_with("2026-11-29T08:00:00.000000Z#r2026-11-29T08:00:05"));
    }
}
