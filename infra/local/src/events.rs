//! The local engines read the way Lambda's event sources read them: a table's DynamoDB stream
//! (`StreamReader`, every shard in order, with a checkpoint), and the SQS and DynamoDB stream
//! events built from what the engines return, as the event sources build them.

use anyhow::{anyhow, Context, Result};
use feedsafe::aws::AwsClients;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Reads a table's DynamoDB stream the way the Lambda event source does (every shard from its
/// start, in order) and hands each record's event name and images to the caller.
pub struct StreamReader {
    client: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    /// Per shard its next iterator; `None` once the shard is closed and read to its end.
    iterators: BTreeMap<String, Option<String>>,
    /// A shard closed since the stream was last described: its children are to be found.
    discover: bool,
    /// Per shard the sequence number of the last record `poll` returned.
    read: BTreeMap<String, String>,
    /// Where `commit` keeps `read`, and where `open` resumes from (the event source mapping's
    /// checkpoint, which Lambda keeps for a deployed function).
    checkpoint: Option<PathBuf>,
    /// The checkpoint found at open: shards resume after these sequence numbers.
    resume: BTreeMap<String, String>,
}

/// One stream record: event name, old and new images (empty when absent), sequence number.
pub type StreamRecordImages = (
    String,
    Option<serde_dynamo::Item>,
    Option<serde_dynamo::Item>,
    String,
);

impl StreamReader {
    pub async fn open(clients: &AwsClients, dynamodb_endpoint: &str, table: &str) -> Result<Self> {
        let stream_arn = clients
            .dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await?
            .table
            .and_then(|t| t.latest_stream_arn)
            .ok_or_else(|| anyhow!("table {table} has no stream"))?;
        let config = aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .http_client(feedsafe::aws::http_client())
            .credentials_provider(aws_credential_types::Credentials::from_keys(
                clients
                    .local_access_key
                    .as_deref()
                    .unwrap_or(feedsafe::aws::LOCAL_ACCESS_KEY_ID),
                feedsafe::aws::LOCAL_SECRET_ACCESS_KEY,
                None,
            ))
            .region(aws_config::Region::new(feedsafe::aws::LOCAL_REGION))
            .endpoint_url(dynamodb_endpoint)
            .build();
        Ok(Self {
            client: aws_sdk_dynamodbstreams::Client::from_conf(config),
            stream_arn,
            iterators: BTreeMap::new(),
            discover: true,
            read: BTreeMap::new(),
            checkpoint: None,
            resume: BTreeMap::new(),
        })
    }

    /// Keeps the reader's position in `path` (see `commit`) and resumes from what is there:
    /// after a restart the records already handed on and committed are not read again, and
    /// none written while the reader was down is missed.
    pub fn with_checkpoint(mut self, path: PathBuf) -> Result<Self> {
        if let Ok(bytes) = std::fs::read(&path) {
            let saved: serde_json::Value = serde_json::from_slice(&bytes)
                .with_context(|| format!("reading the stream checkpoint {}", path.display()))?;
            if saved["stream_arn"].as_str() == Some(self.stream_arn.as_str()) {
                self.resume = serde_json::from_value(saved["shards"].clone()).unwrap_or_default();
                self.read = self.resume.clone();
            }
        }
        self.checkpoint = Some(path);
        Ok(self)
    }

    /// Records that every record returned so far has been handled (written atomically).
    pub fn commit(&self) -> Result<()> {
        let Some(path) = &self.checkpoint else {
            return Ok(());
        };
        let body = serde_json::json!({"stream_arn": self.stream_arn, "shards": self.read});
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&body)?)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    async fn discover_shards(&mut self) -> Result<()> {
        let description = self
            .client
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await?
            .stream_description
            .ok_or_else(|| anyhow!("stream has no description"))?;
        for shard in description.shards.unwrap_or_default() {
            let Some(id) = shard.shard_id else { continue };
            if self.iterators.contains_key(&id) {
                continue;
            }
            use aws_sdk_dynamodbstreams::types::ShardIteratorType;
            let resumed = match self.resume.get(&id) {
                Some(sequence) => self
                    .client
                    .get_shard_iterator()
                    .stream_arn(&self.stream_arn)
                    .shard_id(&id)
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(sequence)
                    .send()
                    .await
                    .ok(),
                None => None,
            };
            let iterator = match resumed {
                Some(out) => out.shard_iterator,
                // New shard, or its checkpoint trimmed away: from its oldest record.
                None => {
                    self.client
                        .get_shard_iterator()
                        .stream_arn(&self.stream_arn)
                        .shard_id(&id)
                        .shard_iterator_type(ShardIteratorType::TrimHorizon)
                        .send()
                        .await?
                        .shard_iterator
                }
            };
            self.iterators.insert(id, iterator);
        }
        Ok(())
    }

    /// Every record that arrived since the last call (possibly none).
    pub async fn poll(&mut self) -> Result<Vec<StreamRecordImages>> {
        // A stream gains a shard only when one closes (its iterator ends), so it is described
        // at the start and after that, not on every poll.
        if self.discover || self.iterators.is_empty() {
            self.discover_shards().await?;
            self.discover = false;
        }
        let mut records = Vec::new();
        let shard_ids: Vec<String> = self.iterators.keys().cloned().collect();
        for shard in shard_ids {
            let Some(Some(iterator)) = self.iterators.get(&shard).cloned() else {
                continue;
            };
            let out = self
                .client
                .get_records()
                .shard_iterator(iterator)
                .limit(1000)
                .send()
                .await?;
            for record in out.records.unwrap_or_default() {
                let name = record
                    .event_name
                    .as_ref()
                    .map(|n| n.as_str().to_owned())
                    .unwrap_or_default();
                let Some(change) = record.dynamodb else {
                    continue;
                };
                let sequence = change.sequence_number.clone().unwrap_or_default();
                self.read.insert(shard.clone(), sequence.clone());
                let old = change.old_image.map(serde_dynamo::Item::from);
                let new = change.new_image.map(serde_dynamo::Item::from);
                records.push((name, old, new, sequence));
            }
            self.discover |= out.next_shard_iterator.is_none();
            self.iterators.insert(shard, out.next_shard_iterator);
        }
        Ok(records)
    }
}

/// The Lambda SQS event for messages received from a queue, as the event source builds it.
pub fn sqs_event(
    messages: &[aws_sdk_sqs::types::Message],
) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    for m in messages {
        let mut record = aws_lambda_events::event::sqs::SqsMessage::default();
        record.message_id = m.message_id.clone();
        record.receipt_handle = m.receipt_handle.clone();
        record.body = m.body.clone();
        record.attributes = m
            .attributes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.as_str().to_owned(), v))
            .collect();
        event.records.push(record);
    }
    event
}

/// The Lambda DynamoDB stream event for `records`, as the event source builds it.
pub fn stream_event(records: &[StreamRecordImages]) -> aws_lambda_events::event::dynamodb::Event {
    let mut event = aws_lambda_events::event::dynamodb::Event::default();
    for (name, old, new, sequence) in records {
        let mut record = aws_lambda_events::event::dynamodb::EventRecord::default();
        record.event_name = name.clone();
        record.event_source = Some("aws:dynamodb".into());
        record.aws_region = feedsafe::aws::LOCAL_REGION.into();
        record.change.sequence_number = Some(sequence.clone());
        record.change.new_image = new.clone().unwrap_or_default();
        record.change.old_image = old.clone().unwrap_or_default();
        event.records.push(record);
    }
    event
}
