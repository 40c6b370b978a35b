//! Operator actions with projection effects. Each writes evidence only by appending (new
//! records, supersession markers); the raw archive is never touched. The projector picks the
//! changes up from the stream.

use crate::aws::dynamo::DynamoEvidenceStore;
use crate::hashing::{base32_lower, sha256};
use crate::ids::ObservationId;
use crate::item::CanonicalItem;
use crate::model::{IdentityCorrection, Observation, SourceQuarantine, SourceRef};
use crate::ports::StoreError;
use crate::projection::EvidenceReads;
use crate::timestamp::Timestamp;
use tracing::info;

#[derive(Debug, Clone)]
pub struct CorrectionRequest {
    pub source: SourceRef,
    /// The item the rows were normalized to, e.g. `AX-440` (or its full key).
    pub from_item: String,
    pub to_item: CanonicalItem,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Re-maps every observation of `request.source` under `from_item` to `to_item`: each gets a
/// superseding observation (same evidence, corrected identity) and is marked superseded.
/// Idempotent: running it again supersedes nothing twice.
pub async fn correct_identity(
    store: &DynamoEvidenceStore,
    request: &CorrectionRequest,
    now: Timestamp,
) -> Result<IdentityCorrection, OperationError> {
    let from = CanonicalItem::parse_key(&request.from_item)
        .map_err(|e| OperationError::Invalid(format!("from_item: {e}")))?
        .key();
    if from == request.to_item.key() {
        return Err(OperationError::Invalid(
            "from_item and to_item are the same item".into(),
        ));
    }
    let correction_id = format!(
        "corr_{}",
        base32_lower(
            &sha256(
                format!(
                    "{}\n{}\n{}\n{}\n{}",
                    request.source.tenant,
                    request.source.connector,
                    request.source.source_account,
                    from,
                    request.to_item.key()
                )
                .as_bytes()
            )[..16]
        )
    );
    let mut affected: Vec<Observation> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .item_history(&request.source.tenant, &from, cursor.as_deref(), 100)
            .await?;
        affected.extend(
            page.observations
                .into_iter()
                .filter(|o| o.source() == request.source),
        );
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut superseded: Vec<ObservationId> = Vec::new();
    for indexed in affected {
        let Some(old) = store.observation(indexed.observation_id.as_str()).await? else {
            continue;
        };
        if old.superseded_by.is_some() {
            continue;
        }
        let new = Observation {
            observation_id: ObservationId::derive_superseding(&old.observation_id, &correction_id),
            item: request.to_item.key(),
            canonical_item: request.to_item.clone(),
            supersedes: Some(old.observation_id.clone()),
            correction_id: Some(correction_id.clone()),
            superseded_by: None,
            normalized_item: Some(old.normalized_item().to_owned()),
            recorded_at: Some(now),
            ..old.clone()
        };
        if store.supersede(&old, &new).await? {
            superseded.push(old.observation_id.clone());
        }
    }
    let correction = IdentityCorrection {
        correction_id,
        source: request.source.clone(),
        source_part: from.clone(),
        from_item: from,
        to_item: request.to_item.clone(),
        reason: request.reason.clone(),
        created_at: now,
        superseded_observations: superseded,
    };
    store.put_correction(&correction).await?;
    info!(correction = %correction.correction_id, superseded = correction.superseded_observations.len(), "identity corrected");
    Ok(correction)
}

/// Excludes a source from the current projection; history keeps everything it said.
pub async fn quarantine_source(
    store: &DynamoEvidenceStore,
    source: &SourceRef,
    reason: &str,
    now: Timestamp,
) -> Result<SourceQuarantine, OperationError> {
    if reason.trim().is_empty() {
        return Err(OperationError::Invalid("a reason is required".into()));
    }
    let quarantine = SourceQuarantine {
        source: source.clone(),
        active: true,
        reason: reason.to_owned(),
        created_at: now,
    };
    store.put_source_quarantine(&quarantine).await?;
    info!(connector = %source.connector, account = %source.source_account, "source quarantined");
    Ok(quarantine)
}
