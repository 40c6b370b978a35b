//! The raw artifact step of the ingest protocol: the conditional put under the deterministic
//! key, and the verification before anything is published against it, including the waits
//! for a writer whose put raced ours (S3's 409).

use super::{backoff, Delivery, IngestError, IngestService};
use crate::domain::hashing::sha256;
use crate::protocols::ports::{ArtifactError, ArtifactMeta, ArtifactWrite};

/// How many times a delivery whose artifact put raced another writer's waits for that writer's
/// record before storing the payload itself: 10-20, 20-40, 40-80, 80-160, 160-320 and 160-320
/// ms, 0.47-0.94 s in all, enough for the other writer's upload and commit to land under load
/// (with fewer, the model test saw losers find the artifact still missing when they gave up).
pub(super) const RACING_WAITS: u32 = 6;

/// The same for a delivery that found the artifact stored (412) while no record existed: the
/// other writer is past its upload, or died after it (then its redelivery pays these waits):
/// 10-20, 20-40 and 40-80 ms.
pub(super) const STORED_WAITS: u32 = 3;

/// After a racing put, how many more times a missing artifact is looked for (about 5 s in all).
const RACING_VERIFIES: u32 = 20;

impl IngestService {
    /// The raw artifact under its deterministic key, written only if no object stands there.
    pub(super) async fn put_artifact(&self, d: &Delivery) -> Result<ArtifactWrite, IngestError> {
        let meta = ArtifactMeta {
            content_type: d.envelope.content_type.clone(),
            delivery_key: Some(d.key_text.clone()),
            retrieved_at: d.envelope.retrieved_at,
        };
        Ok(self
            .artifacts
            .put_verified(&d.artifact_key, &d.body, &sha256(&d.body), &meta)
            .await?)
    }

    /// Nothing is published against an artifact that has not been verified in this attempt or
    /// before its record committed. After a put that raced another writer's (409), that upload
    /// may still be running when the waits for its record are over (DynamoDB Local and moto
    /// under load): a missing object is looked for again, up to `RACING_VERIFIES` times
    /// (160-320 ms apart), before the attempt fails.
    pub(super) async fn verify_once(
        &self,
        d: &Delivery,
        verified: &mut bool,
        put_raced: bool,
    ) -> Result<(), IngestError> {
        if *verified {
            return Ok(());
        }
        let mut looked = 0;
        loop {
            match self
                .artifacts
                .verify(&d.artifact_key, &sha256(&d.body))
                .await
            {
                Ok(()) => break,
                Err(ArtifactError::NotFound { .. }) if put_raced && looked < RACING_VERIFIES => {
                    looked += 1;
                    tokio::time::sleep(backoff(5, &d.key_text)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        *verified = true;
        Ok(())
    }
}
