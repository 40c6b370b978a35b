//! SQS -> the ingest function: one batch at a time, with partial batch failures.

use crate::protocols::ingest::{IngestOutcome, IngestService};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use tracing::{error, info, warn, Instrument};

#[derive(Debug, thiserror::Error)]
#[error("SQS message without a messageId cannot be reported as a partial batch failure")]
pub struct MissingMessageId;

/// Handles one SQS batch. Messages whose ingestion failed transiently are reported as batch item
/// failures so that only they are redelivered; every final outcome is acknowledged.
pub async fn handle_sqs_batch(
    service: &IngestService,
    event: SqsEvent,
) -> Result<SqsBatchResponse, MissingMessageId> {
    let mut response = SqsBatchResponse::default();
    let mut tally = OutcomeTally::default();
    for message in event.records {
        let message_id = message.message_id.clone().unwrap_or_default();
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .cloned()
            .unwrap_or_default();
        let span = tracing::info_span!("sqs_message", message_id = %message_id, receive_count = %receive_count);
        let body = message.body.unwrap_or_default();
        match service
            .ingest_message(body.as_bytes())
            .instrument(span.clone())
            .await
        {
            Ok(outcome) => {
                tally.add(&outcome);
                span.in_scope(|| log_outcome(&outcome))
            }
            Err(err) => {
                span.in_scope(
                    || warn!(error = %err, "ingest failed; the message will be redelivered"),
                );
                tally.transient += 1;
                if message_id.is_empty() {
                    tally.emit();
                    error!(
                        "transient failure on a message without messageId: failing the whole batch"
                    );
                    return Err(MissingMessageId);
                }
                response.add_failure(message_id);
            }
        }
    }
    tally.emit();
    Ok(response)
}

/// Per-batch counters, emitted as CloudWatch metrics (EMF) by the ingest function.
#[derive(Default)]
struct OutcomeTally {
    committed: u64,
    replays: u64,
    mismatches: u64,
    rejected: u64,
    observations: u64,
    transient: u64,
}

impl OutcomeTally {
    fn add(&mut self, outcome: &IngestOutcome) {
        match outcome {
            IngestOutcome::Committed(r) => {
                self.committed += 1;
                self.observations += r.observation_ids.len() as u64;
            }
            IngestOutcome::Replayed(_) => self.replays += 1,
            IngestOutcome::Mismatch(_) => self.mismatches += 1,
            IngestOutcome::Rejected(_) => self.rejected += 1,
        }
    }

    fn emit(&self) {
        let mut m = crate::lambda::metrics::BatchMetrics::default();
        m.count("Committed", self.committed);
        m.count("Replays", self.replays);
        m.count("Mismatches", self.mismatches);
        m.count("RejectedInputs", self.rejected);
        m.count("ObservationsWritten", self.observations);
        m.count("TransientFailures", self.transient);
        m.emit("ingest");
    }
}

fn log_outcome(outcome: &IngestOutcome) {
    match outcome.result() {
        Some(result) => info!(
            outcome = outcome.code(),
            observations = result.observation_ids.len(),
            attempts = result.attempts,
            "delivery settled"
        ),
        None => info!(outcome = outcome.code(), "delivery settled"),
    }
}
