//! The rest of a staged delivery (more than 98 rows), once its `PENDING` record exists: every
//! chunk after the first at once, then the commit that requires them all.

use super::keys::{parallel_chunks, transaction_token};
use super::{
    chunk_plan, Delivery, DeliveryResult, IngestError, IngestOutcome, IngestService, Step,
};
use crate::domain::model::{CommitMarker, ReplayRecord, ReplayState, RunPageUpdate};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{ChunkOutcome, ChunkWrite, CrashPoint, ReplayAction, StoreError};
use tracing::info;

impl IngestService {
    /// Writes the chunks a `PENDING` record still lacks, all at once, then commits the delivery
    /// in one transaction that requires every chunk to be there. A chunk another attempt of
    /// this payload wrote already (its ids taken) counts as written: a chunk is written whole
    /// or not at all, and only attempts that matched the record's fingerprint write chunks.
    pub(super) async fn resume(
        &self,
        d: &Delivery,
        mut record: ReplayRecord,
    ) -> Result<Step, IngestError> {
        let rows = self.rows_for(d, &record)?;
        let rules = &d.rules;
        let observations = self.observations(&record, &rows, &d.connector, rules, d.now);
        let plan = chunk_plan(rows.len());
        if plan.len() as u32 != record.chunks_total || plan.len() < 2 {
            return Err(StoreError::Invariant(format!(
                "record plans {} chunks but {} rows make {}",
                record.chunks_total,
                rows.len(),
                plan.len()
            ))
            .into());
        }
        let parallel = parallel_chunks(&plan);
        // A record written by the protocol before this one may vouch for more than the first.
        let first_missing = (record.chunks_done as usize).clamp(1, parallel.end);
        let delivery_key = record.delivery_key.as_str();
        let writes = (first_missing..parallel.end).map(|chunk_index| {
            let chunk = ChunkWrite {
                token: transaction_token(&record, chunk_index as u32, d.nonce),
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
        if written.contains(&false) {
            return Ok(Step::Backoff);
        }
        let in_commit = parallel.end..plan.len();
        let commit = ChunkWrite {
            token: transaction_token(&record, record.chunks_total, d.nonce),
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
            witnesses: parallel
                .map(|chunk_index| record.observation_ids[plan[chunk_index].start].clone())
                .collect(),
            run_page: run_page(&record, d.now),
            commit_marker: Some(CommitMarker {
                delivery_key: record.delivery_key.clone(),
                epoch: record.epoch,
                observation_count: record.observation_ids.len() as u32,
                committed_at: d.now,
            }),
        };
        match self.store.write_chunk(&commit, d.now).await? {
            ChunkOutcome::Written => {}
            ChunkOutcome::ReplayConditionFailed(_) => {
                return Ok(Step::Probe(record.fingerprint.clone()))
            }
            ChunkOutcome::Contended => return Ok(Step::Backoff),
            ChunkOutcome::ObservationIdTaken | ChunkOutcome::WitnessMissing => {
                return Err(StoreError::Invariant(format!(
                    "the commit of {} found its last chunk taken or a chunk missing",
                    record.delivery_key
                ))
                .into())
            }
        }
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
