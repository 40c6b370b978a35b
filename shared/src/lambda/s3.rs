//! S3 `ObjectCreated` notifications under `drops/{connector}/` -> the drops function.

use crate::intake::drops::{DropError, DropService, DroppedObject};
use crate::protocols::http::percent_decode;
use tracing::warn;

/// The drops function: every record of an S3 event notification. An object that is not a drop
/// of a configured connector is logged and skipped; a queue failure fails the invocation (S3
/// retries the notification).
pub async fn handle_s3_event(
    service: &DropService,
    event: aws_lambda_events::event::s3::S3Event,
) -> Result<Vec<String>, DropError> {
    let mut keys = Vec::new();
    for record in event.records {
        let bucket = record.s3.bucket.name.clone().unwrap_or_default();
        let object = record.s3.object;
        let key = object
            .url_decoded_key
            .clone()
            .or_else(|| object.key.as_deref().map(|k| percent_decode(k, true)))
            .unwrap_or_default();
        let dropped = DroppedObject {
            bucket,
            key,
            version_id: object.version_id.clone(),
            size: object.size.unwrap_or(0).max(0) as u64,
        };
        match service.handle(&dropped).await {
            Ok(key) => keys.push(key.as_string()),
            Err(DropError::Ignored(why)) => warn!(reason = %why, "object skipped"),
            Err(other) => return Err(other),
        }
    }
    Ok(keys)
}
