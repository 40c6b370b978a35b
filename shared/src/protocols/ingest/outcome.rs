//! What ingesting one message answers: a final outcome (committed, replayed, mismatch,
//! rejected) or a transient error that redelivery may get past.

use super::MAX_ROUNDS;
use crate::domain::connector::ConnectorConfigError;
use crate::domain::fingerprint::Fingerprint;
use crate::domain::ids::ObservationId;
use crate::domain::model::{DedupConfidence, ReplayRecord};
use crate::domain::reject::RejectCode;
use crate::protocols::ports::{ArtifactError, CrashPoint, StoreError};
use serde::Serialize;

pub const MISMATCH_CODE: &str = "replay_payload_mismatch";

/// The stored result of a delivery, as every attempt at it reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryResult {
    pub delivery_key: String,
    pub fingerprint: Fingerprint,
    pub observation_ids: Vec<ObservationId>,
    pub attempts: u32,
    pub epoch: u32,
    pub dedup_confidence: DedupConfidence,
    pub artifact_key: String,
}

impl DeliveryResult {
    pub(super) fn of(record: &ReplayRecord) -> Self {
        Self {
            delivery_key: record.delivery_key.clone(),
            fingerprint: record.fingerprint.clone(),
            observation_ids: record.observation_ids.clone(),
            attempts: record.attempts,
            epoch: record.epoch,
            dedup_confidence: record.dedup_confidence,
            artifact_key: record.artifact_key.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MismatchReport {
    pub delivery_key: String,
    pub quarantine_id: String,
    pub stored_fingerprint: Fingerprint,
    pub received_fingerprint: Fingerprint,
    pub evidence_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectReport {
    pub quarantine_id: String,
    pub code: RejectCode,
    pub message: String,
}

/// What happened to one message. Every variant is final: the message is acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestOutcome {
    /// This attempt stored the delivery (or finished storing it).
    Committed(DeliveryResult),
    /// The delivery was already stored with the same fingerprint; nothing new was created.
    Replayed(DeliveryResult),
    /// Same key, different fingerprint: quarantined, nothing stored was changed.
    Mismatch(MismatchReport),
    /// Input that can never be stored: recorded with its reason code.
    Rejected(RejectReport),
}

impl IngestOutcome {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Committed(_) => "committed",
            Self::Replayed(_) => "replayed",
            Self::Mismatch(_) => MISMATCH_CODE,
            Self::Rejected(r) => r.code.as_str(),
        }
    }

    pub fn result(&self) -> Option<&DeliveryResult> {
        match self {
            Self::Committed(r) | Self::Replayed(r) => Some(r),
            _ => None,
        }
    }
}

/// A failure that a later delivery of the same message may get past: the message is retried
/// (and, after the queue's `maxReceiveCount`, moved to the dead-letter queue).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error("injected crash at {0:?}")]
    InjectedCrash(CrashPoint),
    #[error("delivery {0} stayed contended for {MAX_ROUNDS} rounds")]
    Contended(String),
    /// The stored connector breaks `ConnectorConfig::validate` (written past `put_connector`).
    /// Nothing is guessed: the message is retried and ends in the dead-letter queue until an
    /// operator fixes the connector and redrives it.
    #[error("connector configuration refused: {0}")]
    ConnectorMisconfigured(#[from] ConnectorConfigError),
    /// Handling the message panicked and so did quarantining it: the message alone is
    /// redelivered, and ends in the dead-letter queue if it keeps failing.
    #[error("handling the message panicked, and so did quarantining it: {0}")]
    Panicked(String),
}
