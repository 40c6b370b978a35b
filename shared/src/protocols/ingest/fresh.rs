//! A fresh delivery (or a new epoch of a key whose record expired or was deleted): its replay
//! record and its first chunk in one transaction. A delivery of one chunk is `COMMITTED` by it;
//! a larger one is `PENDING` until `staged` writes the rest and commits.

use super::keys::{chunk_plan, transaction_token};
use super::staged::run_page;
use super::{Delivery, DeliveryResult, IngestError, IngestOutcome, IngestService, Step};
use crate::domain::ids::ObservationId;
use crate::domain::model::{DedupConfidence, PriorEpoch, ReplayRecord, ReplayState};
use crate::protocols::ports::{
    ChunkOutcome, ChunkWrite, CrashPoint, ReplacedRecord, ReplayAction, StoreError,
};
use tracing::info;

impl IngestService {
    /// Creates the record (over nothing, over the expired `replacing`, or beyond the horizon
    /// of the `after_deleted_record` epoch) with the first chunk of observations.
    pub(super) async fn store_fresh(
        &self,
        d: &Delivery,
        replacing: Option<ReplayRecord>,
        after_deleted_record: Option<u32>,
    ) -> Result<Step, IngestError> {
        let epoch = match (&replacing, after_deleted_record) {
            (Some(old), _) => old.epoch + 1,
            (None, Some(epoch)) => epoch,
            (None, None) => 0,
        };
        let previous_epoch = previous_epoch(replacing.as_ref(), after_deleted_record);
        let record = fresh_record(d, epoch, previous_epoch);
        let chunk = self.first_chunk(d, &record, replacing.as_ref());
        let outcome = self.store.write_chunk(&chunk, d.now).await?;
        self.after_first_chunk(d, outcome, record, replacing.as_ref())
    }

    /// The create transaction: the record, the first chunk's observations and, when that is
    /// the whole delivery, its run page.
    fn first_chunk(
        &self,
        d: &Delivery,
        record: &ReplayRecord,
        replacing: Option<&ReplayRecord>,
    ) -> ChunkWrite {
        let total_rows = d.rows.len();
        let staged = record.chunks_total > 1;
        let observations = self.observations(record, &d.rows, d);
        ChunkWrite {
            token: transaction_token(record, 0, d.nonce),
            replay: Some(ReplayAction::Create {
                record: Box::new(record.clone()),
                replacing: replacing.map(|old| ReplacedRecord {
                    epoch: old.epoch,
                    expires_at: old.expires_at,
                }),
            }),
            observations: observations[chunk_plan(total_rows)[0].clone()].to_vec(),
            witnesses: Vec::new(),
            run_page: (!staged).then(|| run_page(record, d.now)).flatten(),
            commit_marker: None,
        }
    }

    /// What the create transaction's answer leads to: done (one chunk), the rest of the chunks,
    /// a new epoch over a record that expired meanwhile, a probe of the record that won, a
    /// backoff, or the search for a free epoch.
    fn after_first_chunk(
        &self,
        d: &Delivery,
        outcome: ChunkOutcome,
        record: ReplayRecord,
        replacing: Option<&ReplayRecord>,
    ) -> Result<Step, IngestError> {
        let staged = record.chunks_total > 1;
        match outcome {
            ChunkOutcome::Written if !staged => {
                self.crash_point(CrashPoint::AfterCommit)?;
                info!(observations = d.rows.len(), "committed");
                Ok(Step::Done(IngestOutcome::Committed(DeliveryResult::of(
                    &record,
                ))))
            }
            ChunkOutcome::Written => {
                self.crash_point(CrashPoint::AfterChunk(1))?;
                Ok(Step::Resume(record))
            }
            ChunkOutcome::ReplayConditionFailed(Some(old))
                if old.is_expired_at(d.now) && replacing.is_none_or(|r| r.epoch != old.epoch) =>
            {
                Ok(Step::Fresh(Some(*old)))
            }
            ChunkOutcome::ReplayConditionFailed(_) => Ok(Step::Probe(d.fingerprint.clone())),
            ChunkOutcome::Contended => Ok(Step::Backoff),
            ChunkOutcome::ObservationIdTaken => Ok(Step::FindEpoch(record.epoch)),
            ChunkOutcome::WitnessMissing => {
                Err(StoreError::Invariant("the create transaction has no witnesses".into()).into())
            }
        }
    }
}

/// The new record of `d` in `epoch`: `PENDING` if it takes more than one chunk, else
/// `COMMITTED` at once; flagged beyond the horizon after an earlier epoch.
fn fresh_record(d: &Delivery, epoch: u32, previous_epoch: Option<PriorEpoch>) -> ReplayRecord {
    let total_rows = d.rows.len();
    let chunks_total = chunk_plan(total_rows).len() as u32;
    let staged = chunks_total > 1;
    ReplayRecord {
        delivery_key: d.key_text.clone(),
        tenant: d.key.tenant.clone(),
        connector: d.key.connector.clone(),
        source_account: d.key.source_account.clone(),
        source_delivery_id: d.key.source_delivery_id.clone(),
        identity_strength: d.key.strength,
        identity_basis: d.envelope.delivery.basis.clone(),
        state: if staged {
            ReplayState::Pending
        } else {
            ReplayState::Committed
        },
        fingerprint: d.fingerprint.clone(),
        payload_format: d.connector.payload_format,
        connector_version: d.connector.version,
        payload_sha256: d.payload_sha256.clone(),
        artifact_key: d.artifact_key.clone(),
        content_type: d.envelope.content_type.clone(),
        observation_ids: (0..total_rows)
            .map(|i| ObservationId::derive(&d.key, epoch, i))
            .collect(),
        chunks_total,
        chunks_done: 1,
        epoch,
        attempts: 1,
        first_attempt_at: d.now,
        last_attempt_at: d.now,
        retrieved_at: d.envelope.retrieved_at,
        committed_at: (!staged).then_some(d.now),
        expires_at: d.now.unix_seconds() + d.connector.horizon_seconds(),
        run: d.envelope.run.clone(),
        dedup_confidence: if epoch > 0 {
            DedupConfidence::BeyondHorizon
        } else {
            DedupConfidence::WithinHorizon
        },
        previous_epoch,
    }
}

/// The epoch a new record follows: the expired record it replaces, or the epoch before the
/// first free one after a record deleted by TTL (of which nothing but the number is known).
fn previous_epoch(
    replacing: Option<&ReplayRecord>,
    after_deleted_record: Option<u32>,
) -> Option<PriorEpoch> {
    match (replacing, after_deleted_record) {
        (Some(old), _) => Some(PriorEpoch {
            epoch: old.epoch,
            fingerprint: Some(old.fingerprint.clone()),
            committed_at: old.committed_at,
            observation_count: Some(old.observation_ids.len() as u32),
        }),
        (None, Some(epoch)) => Some(PriorEpoch {
            epoch: epoch - 1,
            fingerprint: None,
            committed_at: None,
            observation_count: None,
        }),
        (None, None) => None,
    }
}
