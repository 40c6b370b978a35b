//! The evidence table's DynamoDB stream -> the projector function (records decoded by
//! `crate::aws::stream_records`).

use crate::lambda::isolation::isolated;
use crate::protocols::projection::{EvidenceChange, Projector};
use tracing::warn;

/// Handles one DynamoDB stream batch for the projector: the whole batch is applied at once
/// (`Projector::apply_batch`: every projection key once, bounded concurrency). If a record
/// cannot be applied, it is reported (the event source then retries from it, and everything
/// before it is done).
pub async fn handle_stream_batch(
    projector: &crate::protocols::projection::Projector,
    event: aws_lambda_events::event::dynamodb::Event,
) -> aws_lambda_events::event::streams::DynamoDbEventResponse {
    let mut response = aws_lambda_events::event::streams::DynamoDbEventResponse::default();
    let now_ms = crate::domain::timestamp::Timestamp::now().unix_millis();
    let lag_ms = event
        .records
        .iter()
        .map(|r| r.change.approximate_creation_date_time.timestamp_millis())
        .filter(|created| *created > 0)
        .map(|created| now_ms - created)
        .max()
        .unwrap_or(0);
    let sequences: Vec<String> = event
        .records
        .iter()
        .map(|r| r.change.sequence_number.clone().unwrap_or_default())
        .collect();
    let mut changes = Vec::with_capacity(event.records.len());
    let mut failed_at: Option<(usize, String)> = None;
    for (index, record) in event.records.into_iter().enumerate() {
        let sequence = sequences.get(index).cloned().unwrap_or_default();
        let classified = isolated(&sequence, async {
            crate::aws::stream_records::classify(
                &record.event_name,
                Some(record.change.old_image),
                Some(record.change.new_image),
            )
        })
        .await;
        match classified {
            Ok(Ok(change)) => changes.push(change),
            Ok(Err(e)) => {
                failed_at = Some((index, e.to_string()));
                break;
            }
            Err(panicked) => {
                failed_at = Some((index, panicked.to_string()));
                break;
            }
        }
    }
    let first_sequence = sequences.first().cloned().unwrap_or_default();
    if let Err(failure) = apply_isolated(projector, &changes, &first_sequence).await {
        failed_at = Some(failure);
    }
    if let Some((index, error)) = failed_at {
        let sequence = sequences.get(index).cloned().unwrap_or_default();
        warn!(sequence = %sequence, error = %error, "projection failed; the batch resumes here");
        let mut failure = aws_lambda_events::event::streams::DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence);
        response.batch_item_failures.push(failure);
    }
    let mut m = crate::lambda::metrics::BatchMetrics::default();
    m.millis("ProjectionLagMs", lag_ms.max(0));
    m.count(
        "ProjectionFailures",
        response.batch_item_failures.len() as u64,
    );
    m.emit("projector");
    response
}

/// Applies `changes` as one batch; if that panics, applies them again one at a time (applying a
/// change twice gives the same rows) to find the change that panics. `Err((index, why))`: the
/// first change not applied; every change before it was.
async fn apply_isolated(
    projector: &Projector,
    changes: &[EvidenceChange],
    batch: &str,
) -> Result<(), (usize, String)> {
    match isolated(batch, projector.apply_batch(changes)).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(failure)) => return Err((failure.index, failure.error.to_string())),
        Err(_) => {}
    }
    for (index, change) in changes.iter().enumerate() {
        let one = std::slice::from_ref(change);
        match isolated(batch, projector.apply_batch(one)).await {
            Ok(Ok(())) => {}
            Ok(Err(failure)) => return Err((index, failure.error.to_string())),
            Err(panicked) => return Err((index, panicked.to_string())),
        }
    }
    // The batch panicked as a whole, but every change applied alone: all of them are applied.
    Ok(())
}
