//! Intake: the producers that turn what a supplier sends into delivery envelopes on the ingest
//! queue — signed webhooks (`webhook`), scheduled pulls of an export (`poller`), file drops
//! (`drops`). Nothing here stores evidence; ingest does, once, whatever the producers repeat.
//!
//! What every producer shares is here: building the delivery envelope (inline, or through an S3
//! claim check when the body is large) and handing it to the ingest queue (`DeliveryQueue`,
//! `ClaimStore`: the intake's ports). A producer acknowledges its source only after
//! `DeliveryQueue::enqueue` succeeded.

pub mod drops;
pub mod poller;
pub mod webhook;

use crate::domain::envelope::{BodyRef, DeliveryEnvelope, RunPage, MAX_INLINE_BODY_BYTES};
use crate::domain::hashing::sha256_hex;
use crate::domain::ids::DeliveryKey;
use crate::domain::timestamp::Timestamp;
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("ingest queue unavailable: {0:#}")]
pub struct QueueError(pub anyhow::Error);

#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Durably enqueues the envelope; `Ok` only once the queue accepted it.
    async fn enqueue(&self, envelope: &DeliveryEnvelope) -> Result<(), QueueError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredClaim {
    pub bucket: String,
    pub key: String,
    pub version_id: Option<String>,
}

#[async_trait]
pub trait ClaimStore: Send + Sync {
    /// Stores a body too large to travel inline and says where it is.
    async fn put_claim(
        &self,
        key: &str,
        body: &[u8],
        content_type: &str,
    ) -> Result<StoredClaim, QueueError>;
}

/// `claims/{tenant}/{connector}/{sha256 of the body}`: where a body too large to travel inline
/// waits for ingest.
pub fn claim_key(key: &DeliveryKey, body_sha256_hex: &str) -> String {
    format!("claims/{}/{}/{body_sha256_hex}", key.tenant, key.connector)
}

/// The envelope for `body`: inline up to `MAX_INLINE_BODY_BYTES`, else a claim check under
/// `claims/{tenant}/{connector}/{sha256}`.
pub async fn envelope_for(
    key: &DeliveryKey,
    basis: &str,
    retrieved_at: Timestamp,
    content_type: &str,
    run: Option<RunPage>,
    body: &[u8],
    claims: &dyn ClaimStore,
) -> Result<DeliveryEnvelope, QueueError> {
    let mut envelope = DeliveryEnvelope::inline(key, basis, retrieved_at, content_type, run, body);
    if body.len() > MAX_INLINE_BODY_BYTES {
        let stored = claims
            .put_claim(&claim_key(key, &sha256_hex(body)), body, content_type)
            .await?;
        envelope.body = BodyRef::S3 {
            bucket: stored.bucket,
            key: stored.key,
            version_id: stored.version_id,
            size: body.len() as u64,
        };
    }
    Ok(envelope)
}
