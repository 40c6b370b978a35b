//! The ingest queue, for producers.

use crate::domain::envelope::DeliveryEnvelope;
use crate::intake::{DeliveryQueue, QueueError};
use async_trait::async_trait;

#[derive(Clone, Debug)]
pub struct SqsDeliveryQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsDeliveryQueue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }
}

#[async_trait]
impl DeliveryQueue for SqsDeliveryQueue {
    async fn enqueue(&self, envelope: &DeliveryEnvelope) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(envelope.to_json())
            .send()
            .await
            .map_err(|e| QueueError(anyhow::Error::new(e).context("send envelope")))?;
        Ok(())
    }
}
