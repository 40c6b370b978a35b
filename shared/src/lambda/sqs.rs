//! SQS -> the ingest function: one batch at a time, with partial batch failures.

use crate::lambda::isolation::{isolated, Panicked};
use crate::protocols::ingest::{IngestError, IngestOutcome, IngestService};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use std::time::{Duration, Instant};
use tracing::{error, info, warn, Instrument};

/// The time one message may take at worst, with a margin: a message is started only while at
/// least this much of the invocation is left; the rest of the batch is handed back untouched
/// (as batch item failures) and comes back after the visibility timeout.
///
/// The slowest message of the sizing bench ([`crate::lambda::sizing::INGEST_MESSAGE`], 5,000
/// rows) takes 8.0 s at 256 MB; 15 s is 1.9 times that. The ingest function's timeout (30 s)
/// is at least three times it (template test `timeouts_and_visibility_follow_the_sizing_figures`).
pub const MESSAGE_RESERVE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
#[error("SQS message without a messageId cannot be reported as a partial batch failure")]
pub struct MissingMessageId;

/// The `Instant` of an invocation deadline given in milliseconds since the epoch (Lambda's
/// `Context::deadline`).
pub fn deadline_at(epoch_ms: u64) -> Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Instant::now() + Duration::from_millis(epoch_ms.saturating_sub(now_ms))
}

/// Handles one SQS batch. Messages whose ingestion failed transiently are reported as batch item
/// failures so that only they are redelivered; every final outcome is acknowledged.
pub async fn handle_sqs_batch(
    service: &IngestService,
    event: SqsEvent,
) -> Result<SqsBatchResponse, MissingMessageId> {
    handle_sqs_batch_by(service, event, None).await
}

/// `handle_sqs_batch` within an invocation that ends at `deadline`: a message is started only
/// while [`MESSAGE_RESERVE`] is left; the messages not started are reported as batch item
/// failures (nothing of them was read or written), so that a batch of large deliveries never
/// runs into the function's timeout with a message half done.
pub async fn handle_sqs_batch_by(
    service: &IngestService,
    event: SqsEvent,
    deadline: Option<Instant>,
) -> Result<SqsBatchResponse, MissingMessageId> {
    let mut response = SqsBatchResponse::default();
    let mut tally = OutcomeTally::default();
    let mut records = event.records.into_iter();
    while let Some(message) = records.next() {
        if deadline.is_some_and(|d| d.saturating_duration_since(Instant::now()) < MESSAGE_RESERVE) {
            let deferred: Vec<_> = std::iter::once(message).chain(records).collect();
            if deferred
                .iter()
                .any(|m| m.message_id.as_deref().unwrap_or_default().is_empty())
            {
                tally.emit();
                error!(
                    "a message without messageId cannot be handed back: failing the whole batch"
                );
                return Err(MissingMessageId);
            }
            warn!(
                deferred = deferred.len(),
                "the invocation is nearly out of time; the rest of the batch is handed back untouched"
            );
            for m in deferred {
                response.add_failure(m.message_id.unwrap_or_default());
            }
            break;
        }
        let message_id = message.message_id.clone().unwrap_or_default();
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .cloned()
            .unwrap_or_default();
        let span = tracing::info_span!("sqs_message", message_id = %message_id, receive_count = %receive_count);
        let body = message.body.unwrap_or_default();
        match ingest_isolated(service, &message_id, body.as_bytes(), &mut tally)
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
    emit_connector_counts(service);
    Ok(response)
}

/// Each connector's deliveries of the batch, by outcome (EMF, dimension `Connector`).
fn emit_connector_counts(service: &IngestService) {
    for (connector, counts) in service.take_connector_counts() {
        let mut m = crate::lambda::metrics::BatchMetrics::default();
        m.count("DeliveriesCommitted", counts.committed);
        m.count("DeliveriesReplayed", counts.replayed);
        m.count("DeliveriesQuarantined", counts.quarantined);
        m.count("DeliveriesRefused", counts.refused);
        m.emit_for_connector(connector.as_str());
    }
}

/// One message, isolated from the others (`crate::lambda::isolation`): a panic while ingesting
/// it quarantines it `internal_error` and acknowledges it; a panic or failure while quarantining
/// it is this message's transient failure alone.
async fn ingest_isolated(
    service: &IngestService,
    message_id: &str,
    body: &[u8],
    tally: &mut OutcomeTally,
) -> Result<IngestOutcome, IngestError> {
    let panic = match isolated(message_id, service.ingest_message(body)).await {
        Ok(result) => return result,
        Err(Panicked(panic)) => panic,
    };
    tally.panics += 1;
    match isolated(message_id, service.quarantine_internal_error(body, &panic)).await {
        Ok(result) => result,
        Err(Panicked(again)) => Err(IngestError::Panicked(again)),
    }
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
    panics: u64,
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
        m.count("Panics", self.panics);
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
