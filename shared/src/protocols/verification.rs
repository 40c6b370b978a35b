//! Recording, withdrawing and reading verification records (`domain::verification`): the
//! verifier's authority, apart from readers' and operators'. Recording checks that the claim it
//! names exists, is the caller's tenant's and is published; stores an evidence document like a
//! raw artifact (its sha256 verified where it is stored); and writes the record append-only.
//! Nothing here changes a claim, the projection or the queue.

use crate::domain::definition::Problem;
use crate::domain::model::Observation;
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::{
    withdrawal_of, ClaimRef, EvidenceDocument, StatedEvidence, VerificationEvidence,
    VerificationRecord, VerificationRequest, VerificationWithdrawal,
};
use crate::protocols::ports::{ArtifactError, ArtifactMeta, ArtifactStore, StoreError};
use crate::protocols::projection::{Eligibility, EvidenceReads};
use crate::protocols::query::Principal;
use async_trait::async_trait;
use tracing::info;

/// Where evidence documents are kept: under the raw prefix, which never expires.
pub const EVIDENCE_PREFIX: &str = "raw/verifications/";

/// A record with its withdrawal, if it was withdrawn.
pub type StoredVerification = (VerificationRecord, Option<VerificationWithdrawal>);

/// The evidence-table writes and reads of verification records (append-only).
#[async_trait]
pub trait VerificationStore: Send + Sync {
    /// Stores the record and its copy beside the item's claims in one transaction; `false`,
    /// writing nothing, when a record of that id is stored already.
    async fn record_verification(&self, record: &VerificationRecord) -> Result<bool, StoreError>;
    /// The record `id` and its withdrawal (consistent).
    async fn verification(&self, id: &str) -> Result<Option<StoredVerification>, StoreError>;
    /// Stores the withdrawal and its copy beside the item's claims; `false`, writing nothing,
    /// when the record is withdrawn already.
    async fn withdraw_verification(
        &self,
        withdrawal: &VerificationWithdrawal,
    ) -> Result<bool, StoreError>;
}

#[derive(Debug, thiserror::Error)]
pub enum VerificationError {
    /// The request, each problem with its JSON pointer.
    #[error("the verification has {} problem(s)", .0.len())]
    Invalid(Vec<Problem>),
    #[error("{0}")]
    NotFound(String),
    /// A stable code (HTTP 409) and its message.
    #[error("{1}")]
    Conflict(&'static str, String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Archive(#[from] ArtifactError),
}

/// What recording answered: the record, and whether this call stored it (`false`: the same
/// request was recorded before, and this is that record).
pub struct Recorded {
    pub record: VerificationRecord,
    pub created: bool,
}

/// Records a verification of the claim the request names, for `principal` at `now`.
pub async fn record_verification(
    reads: &dyn EvidenceReads,
    store: &dyn VerificationStore,
    archive: &dyn ArtifactStore,
    principal: &Principal,
    request: &VerificationRequest,
    now: Timestamp,
) -> Result<Recorded, VerificationError> {
    let claim = published_claim(reads, principal, request).await?;
    let evidence = match &request.evidence {
        StatedEvidence::Reference(reference) => VerificationEvidence::Reference {
            reference: reference.clone(),
        },
        StatedEvidence::Document(document) => {
            store_document(archive, &claim, document, now).await?
        }
    };
    let record = request.record(&claim, evidence, principal.subject.clone(), now);
    if store.record_verification(&record).await? {
        info!(verification = %record.verification_id, observation = %record.observation_id, "verification recorded");
        return Ok(Recorded {
            record,
            created: true,
        });
    }
    let (stored, _) = store
        .verification(&record.verification_id)
        .await?
        .ok_or_else(|| {
            StoreError::Invariant(format!(
                "verification {} was refused as stored and is not there",
                record.verification_id
            ))
        })?;
    Ok(Recorded {
        record: stored,
        created: false,
    })
}

/// The claim the request names: a published observation of the caller's tenant, of the item
/// and source the request also names, if it names them. Anything else is not found: another
/// tenant's observation answers as one that does not exist.
async fn published_claim(
    reads: &dyn EvidenceReads,
    principal: &Principal,
    request: &VerificationRequest,
) -> Result<ClaimRef, VerificationError> {
    let id = &request.observation_id;
    let not_found = || VerificationError::NotFound(format!("observation {id} not found"));
    let observation: Observation = reads
        .observation(id.as_str())
        .await?
        .ok_or_else(not_found)?;
    if observation.tenant != principal.tenant {
        return Err(not_found());
    }
    if !Eligibility::new(reads)
        .check(&observation)
        .await?
        .is_published()
    {
        return Err(not_found());
    }
    let claim = ClaimRef {
        tenant: observation.tenant.clone(),
        item: observation.item.clone(),
        connector: observation.connector.clone(),
        source_account: observation.source_account.clone(),
    };
    let mismatches = request.mismatches(&claim);
    if !mismatches.is_empty() {
        return Err(VerificationError::Invalid(mismatches));
    }
    Ok(claim)
}

/// Stores the document under the tenant and its sha256 (written once, `If-None-Match`) and
/// verifies what is stored before the record points at it.
async fn store_document(
    archive: &dyn ArtifactStore,
    claim: &ClaimRef,
    document: &EvidenceDocument,
    now: Timestamp,
) -> Result<VerificationEvidence, VerificationError> {
    let sha256 = crate::domain::hashing::hex(&document.sha256);
    let key = format!("{EVIDENCE_PREFIX}{}/{sha256}", claim.tenant);
    let meta = ArtifactMeta {
        content_type: document.content_type.clone(),
        delivery_key: None,
        retrieved_at: now,
    };
    archive
        .put_verified(&key, &document.bytes, &document.sha256, &meta)
        .await?;
    archive.verify(&key, &document.sha256).await?;
    Ok(VerificationEvidence::Document {
        artifact_key: key,
        sha256,
        content_type: document.content_type.clone(),
        size_bytes: document.bytes.len() as u64,
        file_name: document.file_name.clone(),
    })
}

/// The tenant's record `id` with its withdrawal; another tenant's is not found.
pub async fn verification_of(
    store: &dyn VerificationStore,
    principal: &Principal,
    id: &str,
) -> Result<StoredVerification, VerificationError> {
    match store.verification(id).await? {
        Some(stored) if stored.0.tenant == principal.tenant => Ok(stored),
        _ => Err(VerificationError::NotFound(format!(
            "verification {:?} not found",
            id.chars().take(64).collect::<String>()
        ))),
    }
}

/// Withdraws the tenant's record `id` for `reason`: a new record; the first stays as it was.
pub async fn withdraw_verification(
    store: &dyn VerificationStore,
    principal: &Principal,
    id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<StoredVerification, VerificationError> {
    let (record, withdrawn) = verification_of(store, principal, id).await?;
    if withdrawn.is_some() {
        return Err(already_withdrawn(id));
    }
    let withdrawal = withdrawal_of(&record, reason, principal.subject.clone(), now);
    if !store.withdraw_verification(&withdrawal).await? {
        return Err(already_withdrawn(id));
    }
    info!(verification = %id, withdrawal = %withdrawal.withdrawal_id, "verification withdrawn");
    Ok((record, Some(withdrawal)))
}

fn already_withdrawn(id: &str) -> VerificationError {
    VerificationError::Conflict(
        "already_withdrawn",
        format!("verification {id} is withdrawn already"),
    )
}
