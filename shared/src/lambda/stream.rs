//! The evidence table's DynamoDB stream -> the projector function (records decoded by
//! `crate::aws::stream_records`).

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
        match crate::aws::stream_records::classify(
            &record.event_name,
            Some(record.change.old_image),
            Some(record.change.new_image),
        ) {
            Ok(change) => changes.push(change),
            Err(e) => {
                failed_at = Some((index, e.to_string()));
                break;
            }
        }
    }
    if let Err(failure) = projector.apply_batch(&changes).await {
        failed_at = Some((failure.index, failure.error.to_string()));
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
