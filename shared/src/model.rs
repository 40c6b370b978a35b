//! The stored records: replay record, observation, quarantine entry, run page update.
//! Field names here are the stored attribute names (docs/item-schema.md).

use crate::connector::PayloadFormat;
use crate::envelope::RunPage;
use crate::fingerprint::Fingerprint;
use crate::ids::{
    ConnectorId, IdentityStrength, ObservationId, RunId, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::item::CanonicalItem;
use crate::money::Price;
use crate::timestamp::Timestamp;
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
    pub fingerprint: Fingerprint,
    pub committed_at: Option<Timestamp>,
    pub observation_ids: Vec<ObservationId>,
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
    pub quantity: u64,
    pub quantity_basis: String,
    pub price: Price,
    pub currency: String,
    pub observed_at: Timestamp,
    pub retrieved_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    pub artifact_key: String,
    pub artifact_sha256: String,
    pub dedup_confidence: DedupConfidence,
    /// Always `source_reported`: a stored claim is never confirmed stock.
    pub claim: String,
    /// `unverified` unless a separate verification record says otherwise.
    pub verification: String,
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
    /// `_unknown` when the envelope was unreadable.
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
}

pub const QUARANTINE_OPEN: &str = "open";

/// Marks one page of a run as committed, inside the page's final transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPageUpdate {
    pub run_id: RunId,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub page: u32,
    pub page_count: Option<u32>,
    pub delivery_key: String,
    pub at: Timestamp,
}

/// An ingestion run as far as ingest knows it: which pages have committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: RunId,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    #[serde(default)]
    pub pages_committed: std::collections::BTreeSet<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<u32>,
    pub updated_at: Timestamp,
}

impl Run {
    /// Pages of `1..=page_count` not committed yet (empty when the count is unknown).
    pub fn missing_pages(&self) -> Vec<u32> {
        let count = self.page_count.unwrap_or(0);
        (1..=count)
            .filter(|p| !self.pages_committed.contains(p))
            .collect()
    }
}
