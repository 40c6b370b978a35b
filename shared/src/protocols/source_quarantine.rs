//! Source quarantines (docs/architecture.md section 7): an operator excludes a (connector, source
//! account) from the current projection, or lifts that exclusion. Each set and each lift is its own
//! append-only record (who, why, when), written in one transaction with the state readers consult;
//! the projector picks the change up from the stream and marks (or unmarks) the source's rows.
//! History keeps everything the source said. Identity corrections are in
//! `crate::protocols::identity_corrections`.

use crate::domain::hashing::{base32_lower, sha256};
use crate::domain::model::{SourceQuarantine, SourceQuarantineEvent, SourceRef};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::EvidenceReads;
use crate::protocols::ports::StoreError;
use async_trait::async_trait;
use serde::Serialize;
use tracing::info;

#[derive(Debug, thiserror::Error)]
pub enum SourceQuarantineError {
    #[error("{0}")]
    Invalid(String),
    /// The source is already quarantined (set) or is not (lift).
    #[error("{message}")]
    State { code: &'static str, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The evidence-table writes and reads of source quarantines. Implemented by
/// `DynamoEvidenceStore`.
#[async_trait]
pub trait SourceQuarantineStore: EvidenceReads {
    /// Writes `event` (a set) and the source's state in one transaction; `false`, writing
    /// nothing, when the source is already quarantined.
    async fn set_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError>;
    /// Writes `event` (a lift) and clears the source's state in one transaction; `false`,
    /// writing nothing, when the source is not quarantined.
    async fn lift_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError>;
    /// Every set and lift of a source's quarantine, oldest first.
    async fn source_quarantine_events(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<SourceQuarantineEvent>, StoreError>;
}

/// A source's quarantine state and every set and lift of it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceQuarantineView {
    pub source: SourceRef,
    pub active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    pub events: Vec<SourceQuarantineEvent>,
}

fn event(
    source: &SourceRef,
    action: &str,
    reason: &str,
    actor: Option<String>,
    at: Timestamp,
) -> Result<SourceQuarantineEvent, SourceQuarantineError> {
    if reason.trim().is_empty() {
        return Err(SourceQuarantineError::Invalid(
            "a reason is required".into(),
        ));
    }
    let event_id = format!(
        "sq_{}",
        base32_lower(
            &sha256(
                format!(
                    "{}\n{}\n{}\n{action}\n{}\n{}",
                    source.tenant,
                    source.connector,
                    source.source_account,
                    at.to_rfc3339(),
                    crate::protocols::ingest::attempt_nonce()
                )
                .as_bytes()
            )[..12]
        )
    );
    Ok(SourceQuarantineEvent {
        event_id,
        source: source.clone(),
        action: action.to_owned(),
        reason: reason.to_owned(),
        actor,
        at,
    })
}

/// Excludes a source from the current projection; refused while it is already excluded.
pub async fn quarantine_source(
    store: &(impl SourceQuarantineStore + ?Sized),
    source: &SourceRef,
    reason: &str,
    actor: Option<String>,
    now: Timestamp,
) -> Result<SourceQuarantineView, SourceQuarantineError> {
    let event = event(source, "set", reason, actor, now)?;
    if !store.set_source_quarantine(&event).await? {
        return Err(SourceQuarantineError::State {
            code: "already_quarantined",
            message: format!(
                "{}/{} is already quarantined; lift it first to change why",
                source.connector, source.source_account
            ),
        });
    }
    info!(connector = %source.connector, account = %source.source_account, event = %event.event_id, "source quarantined");
    source_quarantine_view(store, source).await
}

/// Lifts a source's quarantine: its eligible claims become current again through the projector.
pub async fn lift_source_quarantine(
    store: &(impl SourceQuarantineStore + ?Sized),
    source: &SourceRef,
    reason: &str,
    actor: Option<String>,
    now: Timestamp,
) -> Result<SourceQuarantineView, SourceQuarantineError> {
    let event = event(source, "lift", reason, actor, now)?;
    if !store.lift_source_quarantine(&event).await? {
        return Err(SourceQuarantineError::State {
            code: "not_quarantined",
            message: format!(
                "{}/{} is not quarantined",
                source.connector, source.source_account
            ),
        });
    }
    info!(connector = %source.connector, account = %source.source_account, event = %event.event_id, "source quarantine lifted");
    source_quarantine_view(store, source).await
}

pub async fn source_quarantine_view(
    store: &(impl SourceQuarantineStore + ?Sized),
    source: &SourceRef,
) -> Result<SourceQuarantineView, SourceQuarantineError> {
    let state: Option<SourceQuarantine> = EvidenceReads::source_quarantine(store, source).await?;
    let events = store.source_quarantine_events(source).await?;
    Ok(SourceQuarantineView {
        source: source.clone(),
        active: state.as_ref().is_some_and(|s| s.active),
        since: state.map(|s| s.created_at),
        events,
    })
}
