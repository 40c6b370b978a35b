//! The projector's DynamoDB Streams event source, locally (settings from the template, see
//! `stream_source`): filtered records are dropped, each batch goes through the function's entry
//! point `handle_stream_batch`, a reported failure resumes the batch at that record, and a
//! record that fails `MaximumRetryAttempts` retries is reported to the on-failure queue, then
//! passed. Without an on-failure queue (or when the send fails) it is retried, never dropped.

use crate::events::StreamReader;
use crate::stream_source::StreamSourceSettings;
use crate::{feedsafe_error, Phase};
use aws_lambda_events::event::dynamodb::EventRecord;
use feedsafe::protocols::projection::Projector;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{error, warn};

/// Where the stream's records go: the projector, and the on-failure queue.
struct Target {
    settings: StreamSourceSettings,
    projector: Projector,
    sqs: aws_sdk_sqs::Client,
    failure_queue: Option<String>,
}

pub(crate) async fn stream_poller(
    stream: Arc<tokio::sync::Mutex<StreamReader>>,
    settings: StreamSourceSettings,
    projector: Projector,
    sqs: aws_sdk_sqs::Client,
    failure_queue: Option<String>,
    phase: watch::Receiver<Phase>,
) {
    // Held for the task's life; a run that panics drops it and its next run takes it again.
    let mut stream = stream.lock().await;
    let target = Target {
        settings,
        projector,
        sqs,
        failure_queue,
    };
    let stopped = || *phase.borrow() == Phase::Stopped;
    while !stopped() {
        let settling = *phase.borrow() == Phase::Settling;
        let records = match stream.poll().await {
            Ok(records) => records,
            Err(e) => {
                warn!(error = %e, "stream read failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let empty = records.is_empty();
        let event = crate::events::stream_event(&records);
        if !target.deliver(target.passing(event.records), &phase).await {
            return;
        }
        // Every record of this poll is projected or reported: the checkpoint moves past them.
        if let Err(e) = stream.commit() {
            warn!(error = %e, "saving the stream checkpoint failed; records may be projected again");
        }
        if settling && empty {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Target {
    /// The records the template's filters let through.
    fn passing(&self, records: Vec<EventRecord>) -> Vec<EventRecord> {
        records
            .into_iter()
            .filter(|r| serde_json::to_value(r).is_ok_and(|json| self.settings.passes(&json)))
            .collect()
    }

    /// Every record projected or reported, in batches; `false` when the stack stopped first.
    async fn deliver(&self, records: Vec<EventRecord>, phase: &watch::Receiver<Phase>) -> bool {
        let stopped = || *phase.borrow() == Phase::Stopped;
        let mut start = 0;
        let mut retries = 0;
        while start < records.len() {
            let end = (start + self.settings.batch_size).min(records.len());
            let Some(index) = self.first_failure(&records[start..end]).await else {
                start = end;
                retries = 0;
                continue;
            };
            // Everything before the failed record is done.
            start += index;
            let record = &records[start];
            let sequence = record.change.sequence_number.clone().unwrap_or_default();
            if retries < self.settings.max_retries {
                retries += 1;
                warn!(sequence = %sequence, retries, "projection failed; retrying from this record");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(retries.min(5)))).await;
                if stopped() {
                    return false;
                }
                continue;
            }
            if self.park(record, &sequence).await {
                warn!(sequence = %sequence, "projection gave up; record reported to the on-failure queue");
                start += 1;
                retries = 0;
                continue;
            }
            if stopped() {
                return false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        true
    }

    /// One batch through the function's entry point: the index of the failure it reports.
    async fn first_failure(&self, batch: &[EventRecord]) -> Option<usize> {
        let mut event = aws_lambda_events::event::dynamodb::Event::default();
        event.records = batch.to_vec();
        let response = feedsafe::lambda::stream::handle_stream_batch(&self.projector, event).await;
        let sequence = response
            .batch_item_failures
            .first()
            .and_then(|f| f.item_identifier.clone())?;
        batch
            .iter()
            .position(|r| r.change.sequence_number.as_deref() == Some(sequence.as_str()))
    }

    /// Reports a record that exhausted its retries to the on-failure queue; `false` when there
    /// is none or it refused the record (then the record is retried, never dropped).
    async fn park(&self, record: &EventRecord, sequence: &str) -> bool {
        let Some(queue) = &self.failure_queue else {
            return false;
        };
        let body = serde_json::json!({
            "sequence_number": sequence,
            "event_name": record.event_name,
            "condition": "RetryAttemptsExhausted",
        });
        match self
            .sqs
            .send_message()
            .queue_url(queue)
            .message_body(body.to_string())
            .send()
            .await
        {
            Ok(_) => true,
            Err(send) => {
                error!(sequence = %sequence, error = %feedsafe_error(&send), "on-failure queue refused the record; retrying it");
                false
            }
        }
    }
}
