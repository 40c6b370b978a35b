//! The rest of a staged delivery (more than 98 rows), once its `PENDING` record exists: every
//! chunk after the first at once, then the commit that requires them all.

use super::keys::{parallel_chunks, transaction_token};
use super::{
    chunk_plan, Delivery, DeliveryResult, IngestError, IngestOutcome, IngestService, Step,
};
use crate::domain::model::{CommitMarker, Observation, ReplayRecord, ReplayState, RunPageUpdate};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{ChunkOutcome, ChunkWrite, CrashPoint, ReplayAction, StoreError};
use std::ops::Range;
use tracing::info;

impl IngestService {
    /// Writes the chunks a `PENDING` record still lacks, all at once, then commits the delivery
    /// in one transaction that requires every chunk to be there. A chunk another attempt of
    /// this payload wrote already (its ids taken) counts as written: a chunk is written whole
    /// or not at all, and only attempts that matched the record's fingerprint write chunks.
    pub(super) async fn resume(
        &self,
        d: &Delivery,
        record: ReplayRecord,
    ) -> Result<Step, IngestError> {
        let rows = self.rows_for(d, &record).await?;
        let observations = self.observations(&record, &rows, d);
        let plan = checked_plan(&record, rows.len())?;
        let staged = Staged {
            d,
            record: &record,
            observations: &observations,
            parallel: parallel_chunks(&plan),
            plan: &plan,
        };
        if !self.write_missing_chunks(&staged).await? {
            return Ok(Step::Backoff);
        }
        let outcome = self.store.write_chunk(&staged.commit(), d.now).await?;
        if let Some(step) = not_committed(outcome, &record)? {
            return Ok(step);
        }
        self.committed(d, record)
    }

    /// Every chunk after the first that the record does not vouch for, at once: `false` if any
    /// of them met a conflicting transaction (then the delivery backs off and probes again).
    async fn write_missing_chunks(&self, staged: &Staged<'_>) -> Result<bool, IngestError> {
        let Staged {
            d,
            record,
            observations,
            plan,
            ..
        } = *staged;
        let parallel = &staged.parallel;
        // A record written by the protocol before this one may vouch for more than the first.
        let first_missing = (record.chunks_done as usize).clamp(1, parallel.end);
        let delivery_key = record.delivery_key.as_str();
        let writes = (first_missing..parallel.end).map(|chunk_index| {
            let chunk = ChunkWrite {
                token: transaction_token(record, chunk_index as u32, d.nonce),
                replay: None,
                observations: observations[plan[chunk_index].clone()].to_vec(),
                witnesses: Vec::new(),
                run_page: None,
                commit_marker: None,
            };
            async move {
                match self.store.write_chunk(&chunk, d.now).await? {
                    ChunkOutcome::Written => {
                        self.crash_point(CrashPoint::AfterChunk(chunk_index as u32 + 1))?;
                        Ok(true)
                    }
                    ChunkOutcome::ObservationIdTaken => Ok(true),
                    ChunkOutcome::Contended => Ok(false),
                    other => Err(IngestError::from(StoreError::Invariant(format!(
                        "chunk {chunk_index} of {delivery_key} written without the record answered {other:?}"
                    )))),
                }
            }
        });
        let written = futures_util::future::try_join_all(writes).await?;
        Ok(!written.contains(&false))
    }

    /// The commit transaction went through: the delivery is `COMMITTED`.
    fn committed(&self, d: &Delivery, mut record: ReplayRecord) -> Result<Step, IngestError> {
        record.chunks_done = record.chunks_total;
        record.state = ReplayState::Committed;
        record.committed_at = Some(d.now);
        self.crash_point(CrashPoint::AfterCommit)?;
        info!(
            observations = record.observation_ids.len(),
            chunks = record.chunks_total,
            "committed in chunks"
        );
        Ok(Step::Done(IngestOutcome::Committed(DeliveryResult::of(
            &record,
        ))))
    }
}

/// The rows of a staged delivery and how they are written: its chunk plan, and which chunks
/// are written at once before the commit (the others go in the commit itself).
struct Staged<'a> {
    d: &'a Delivery,
    record: &'a ReplayRecord,
    observations: &'a [Observation],
    plan: &'a [Range<usize>],
    parallel: Range<usize>,
}

impl Staged<'_> {
    /// The commit: the record flipped to `COMMITTED`, the chunks not written at once, a witness
    /// (first observation) of each chunk written at once, the run page and the commit marker.
    fn commit(&self) -> ChunkWrite {
        let Staged {
            d,
            record,
            observations,
            plan,
            ..
        } = *self;
        let in_commit = self.parallel.end..plan.len();
        ChunkWrite {
            token: transaction_token(record, record.chunks_total, d.nonce),
            replay: Some(ReplayAction::Commit {
                delivery_key: record.delivery_key.clone(),
                fingerprint: record.fingerprint.clone(),
                epoch: record.epoch,
                chunks_total: record.chunks_total,
                commit_at: d.now,
            }),
            observations: in_commit
                .clone()
                .flat_map(|chunk_index| observations[plan[chunk_index].clone()].to_vec())
                .collect(),
            witnesses: self
                .parallel
                .clone()
                .map(|chunk_index| record.observation_ids[plan[chunk_index].start].clone())
                .collect(),
            run_page: run_page(record, d.now),
            commit_marker: Some(CommitMarker {
                delivery_key: record.delivery_key.clone(),
                epoch: record.epoch,
                observation_count: record.observation_ids.len() as u32,
                committed_at: d.now,
            }),
        }
    }
}

/// The record's chunk plan, which the payload's rows must make, and in more than one chunk.
fn checked_plan(record: &ReplayRecord, rows: usize) -> Result<Vec<Range<usize>>, IngestError> {
    let plan = chunk_plan(rows);
    if plan.len() as u32 != record.chunks_total || plan.len() < 2 {
        return Err(StoreError::Invariant(format!(
            "record plans {} chunks but {} rows make {}",
            record.chunks_total,
            rows,
            plan.len()
        ))
        .into());
    }
    Ok(plan)
}

/// What the commit transaction answered, unless it committed (`None`): a record changed under
/// it sends the delivery back to the probe, a conflict to the backoff.
fn not_committed(
    outcome: ChunkOutcome,
    record: &ReplayRecord,
) -> Result<Option<Step>, IngestError> {
    match outcome {
        ChunkOutcome::Written => Ok(None),
        ChunkOutcome::ReplayConditionFailed(_) => Ok(Some(Step::Probe(record.fingerprint.clone()))),
        ChunkOutcome::Contended => Ok(Some(Step::Backoff)),
        ChunkOutcome::ObservationIdTaken | ChunkOutcome::WitnessMissing => {
            Err(StoreError::Invariant(format!(
                "the commit of {} found its last chunk taken or a chunk missing",
                record.delivery_key
            ))
            .into())
        }
    }
}

pub(super) fn run_page(record: &ReplayRecord, at: Timestamp) -> Option<RunPageUpdate> {
    record.run.as_ref().map(|run| RunPageUpdate {
        run_id: run.run_id.clone(),
        tenant: record.tenant.clone(),
        connector: record.connector.clone(),
        page: run.page,
        page_count: run.page_count,
        delivery_key: record.delivery_key.clone(),
        epoch: record.epoch,
        observation_count: record.observation_ids.len() as u32,
        at,
    })
}
