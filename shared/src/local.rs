//! Local resources created from `template.yaml` itself, so that the local engines and the
//! deployed stack cannot drift: tables (keys, GSIs, stream, TTL), queues (redrive,
//! visibility, retention) and buckets (versioning), each name given a prefix so tests isolate.

use crate::aws::AwsClients;
use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_norway::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsiSpec {
    pub name: String,
    pub keys: Vec<(String, String)>,
    pub projection: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub logical_id: String,
    pub keys: Vec<(String, String)>,
    pub attributes: Vec<(String, String)>,
    pub gsis: Vec<GsiSpec>,
    pub stream_view: Option<String>,
    pub ttl_attribute: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    pub logical_id: String,
    pub visibility_timeout: Option<i64>,
    pub retention_seconds: Option<i64>,
    /// Dead-letter queue (logical id) and `maxReceiveCount`.
    pub redrive: Option<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpec {
    pub logical_id: String,
    pub versioned: bool,
}

/// The resources of `template.yaml` that the local engines can host.
#[derive(Debug, Clone, Default)]
pub struct TemplateResources {
    pub tables: Vec<TableSpec>,
    pub queues: Vec<QueueSpec>,
    pub buckets: Vec<BucketSpec>,
    /// The parsed template, for checks of other resources (functions, policies).
    pub document: Value,
}

/// The repository's `template.yaml` (override with `FEEDSAFE_TEMPLATE`).
pub fn template_path() -> PathBuf {
    if let Ok(path) = std::env::var("FEEDSAFE_TEMPLATE") {
        return PathBuf::from(path);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("template.yaml")
}

fn tag_or_intrinsic<'a>(value: &'a Value, short: &str, long: &str) -> Option<&'a Value> {
    match value {
        Value::Tagged(tagged) if tagged.tag == short => Some(&tagged.value),
        Value::Mapping(map) if map.len() == 1 => map.get(long),
        _ => None,
    }
}

fn resolve<'a>(value: &'a Value, parameters: &'a BTreeMap<String, Value>) -> &'a Value {
    match tag_or_intrinsic(value, "!Ref", "Ref").and_then(Value::as_str) {
        Some(name) => parameters.get(name).unwrap_or(value),
        None => value,
    }
}

fn as_int(value: &Value, parameters: &BTreeMap<String, Value>) -> Option<i64> {
    let value = resolve(value, parameters);
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

fn as_text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

fn key_schema(value: Option<&Value>) -> Result<Vec<(String, String)>> {
    value
        .and_then(Value::as_sequence)
        .ok_or_else(|| anyhow!("KeySchema missing"))?
        .iter()
        .map(|k| {
            Ok((
                k.get("AttributeName")
                    .and_then(as_text)
                    .ok_or_else(|| anyhow!("AttributeName"))?,
                k.get("KeyType")
                    .and_then(as_text)
                    .ok_or_else(|| anyhow!("KeyType"))?,
            ))
        })
        .collect()
}

/// Reads the template's tables, queues and buckets.
pub fn read_template(path: &Path) -> Result<TemplateResources> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let document: Value =
        serde_norway::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let parameters: BTreeMap<String, Value> = document
        .get("Parameters")
        .and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.get("Default")?.clone())))
                .collect()
        })
        .unwrap_or_default();
    let resources = document
        .get("Resources")
        .and_then(Value::as_mapping)
        .ok_or_else(|| anyhow!("template has no Resources"))?;
    let mut out = TemplateResources::default();
    for (id, resource) in resources {
        let id = id
            .as_str()
            .ok_or_else(|| anyhow!("non-string resource id"))?
            .to_owned();
        let kind = resource
            .get("Type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let empty = Value::Mapping(Default::default());
        let props = resource.get("Properties").unwrap_or(&empty);
        match kind {
            "AWS::DynamoDB::Table" => {
                let attributes = props
                    .get("AttributeDefinitions")
                    .and_then(Value::as_sequence)
                    .ok_or_else(|| anyhow!("{id}: AttributeDefinitions missing"))?
                    .iter()
                    .map(|a| {
                        Ok((
                            a.get("AttributeName")
                                .and_then(as_text)
                                .ok_or_else(|| anyhow!("AttributeName"))?,
                            a.get("AttributeType")
                                .and_then(as_text)
                                .ok_or_else(|| anyhow!("AttributeType"))?,
                        ))
                    })
                    .collect::<Result<_>>()?;
                let gsis = props
                    .get("GlobalSecondaryIndexes")
                    .and_then(Value::as_sequence)
                    .map(|list| {
                        list.iter()
                            .map(|g| {
                                Ok(GsiSpec {
                                    name: g
                                        .get("IndexName")
                                        .and_then(as_text)
                                        .ok_or_else(|| anyhow!("IndexName"))?,
                                    keys: key_schema(g.get("KeySchema"))?,
                                    projection: g
                                        .get("Projection")
                                        .and_then(|p| p.get("ProjectionType"))
                                        .and_then(as_text)
                                        .unwrap_or_else(|| "ALL".into()),
                                })
                            })
                            .collect::<Result<Vec<_>>>()
                    })
                    .transpose()?
                    .unwrap_or_default();
                let ttl = props.get("TimeToLiveSpecification");
                let ttl_attribute = ttl
                    .filter(|t| t.get("Enabled").and_then(Value::as_bool) == Some(true))
                    .and_then(|t| t.get("AttributeName"))
                    .and_then(as_text);
                out.tables.push(TableSpec {
                    logical_id: id,
                    keys: key_schema(props.get("KeySchema"))?,
                    attributes,
                    gsis,
                    stream_view: props
                        .get("StreamSpecification")
                        .and_then(|s| s.get("StreamViewType"))
                        .and_then(as_text),
                    ttl_attribute,
                });
            }
            "AWS::SQS::Queue" => {
                let redrive = match props.get("RedrivePolicy") {
                    None => None,
                    Some(policy) => {
                        let target = policy
                            .get("deadLetterTargetArn")
                            .and_then(|t| tag_or_intrinsic(t, "!GetAtt", "Fn::GetAtt"))
                            .and_then(|t| match t {
                                Value::String(s) => s.split('.').next().map(str::to_owned),
                                Value::Sequence(parts) => parts.first().and_then(as_text),
                                _ => None,
                            })
                            .ok_or_else(|| {
                                anyhow!("{id}: deadLetterTargetArn must be !GetAtt Queue.Arn")
                            })?;
                        let count = policy
                            .get("maxReceiveCount")
                            .and_then(|c| as_int(c, &parameters))
                            .ok_or_else(|| anyhow!("{id}: maxReceiveCount missing"))?;
                        Some((target, count))
                    }
                };
                out.queues.push(QueueSpec {
                    logical_id: id,
                    visibility_timeout: props
                        .get("VisibilityTimeout")
                        .and_then(|v| as_int(v, &parameters)),
                    retention_seconds: props
                        .get("MessageRetentionPeriod")
                        .and_then(|v| as_int(v, &parameters)),
                    redrive,
                });
            }
            "AWS::S3::Bucket" => out.buckets.push(BucketSpec {
                logical_id: id,
                versioned: props
                    .get("VersioningConfiguration")
                    .and_then(|v| v.get("Status"))
                    .and_then(Value::as_str)
                    == Some("Enabled"),
            }),
            _ => {}
        }
    }
    out.document = document;
    Ok(out)
}

#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Prepended to every name; lower-case letters, digits and `-`.
    pub prefix: String,
    /// Turn on TTL where the template does. DynamoDB Local deletes expired items within about a
    /// second (AWS: days), so tests of the expired-but-present path create tables without it.
    pub ttl: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalQueue {
    pub name: String,
    pub url: String,
    pub arn: String,
}

/// Names of the created resources, by logical id.
#[derive(Debug, Clone, Default)]
pub struct LocalResources {
    pub tables: BTreeMap<String, String>,
    pub queues: BTreeMap<String, LocalQueue>,
    pub buckets: BTreeMap<String, String>,
}

impl LocalResources {
    pub fn table(&self, logical_id: &str) -> Result<&str> {
        self.tables
            .get(logical_id)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no table {logical_id} in template"))
    }
    pub fn queue(&self, logical_id: &str) -> Result<&LocalQueue> {
        self.queues
            .get(logical_id)
            .ok_or_else(|| anyhow!("no queue {logical_id} in template"))
    }
    pub fn bucket(&self, logical_id: &str) -> Result<&str> {
        self.buckets
            .get(logical_id)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no bucket {logical_id} in template"))
    }
}

fn attribute_type(text: &str) -> Result<ScalarAttributeType> {
    Ok(match text {
        "S" => ScalarAttributeType::S,
        "N" => ScalarAttributeType::N,
        "B" => ScalarAttributeType::B,
        other => bail!("attribute type {other}"),
    })
}

fn key_elements(keys: &[(String, String)]) -> Result<Vec<KeySchemaElement>> {
    keys.iter()
        .map(|(name, kind)| {
            Ok(KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(if kind == "HASH" {
                    KeyType::Hash
                } else {
                    KeyType::Range
                })
                .build()?)
        })
        .collect()
}

/// Creates every table, queue and bucket of `spec` on the local engines.
pub async fn create_resources(
    clients: &AwsClients,
    spec: &TemplateResources,
    options: &CreateOptions,
) -> Result<LocalResources> {
    let mut created = LocalResources::default();
    for table in &spec.tables {
        let name = format!("{}-{}", options.prefix, table.logical_id);
        let mut request = clients
            .dynamodb
            .create_table()
            .table_name(&name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_key_schema(Some(key_elements(&table.keys)?));
        for (attr, kind) in &table.attributes {
            request = request.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(attr)
                    .attribute_type(attribute_type(kind)?)
                    .build()?,
            );
        }
        for gsi in &table.gsis {
            let projection_type = match gsi.projection.as_str() {
                "KEYS_ONLY" => ProjectionType::KeysOnly,
                "INCLUDE" => ProjectionType::Include,
                _ => ProjectionType::All,
            };
            request = request.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(&gsi.name)
                    .set_key_schema(Some(key_elements(&gsi.keys)?))
                    .projection(
                        Projection::builder()
                            .projection_type(projection_type)
                            .build(),
                    )
                    .build()?,
            );
        }
        if let Some(view) = &table.stream_view {
            request = request.stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::from(view.as_str()))
                    .build()?,
            );
        }
        match request.send().await {
            Ok(_) => {}
            // A durable local stack finds its tables again: created only when missing.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception()) =>
            {
                created.tables.insert(table.logical_id.clone(), name);
                continue;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("creating table {name}"))),
        }
        if let (true, Some(attribute)) = (options.ttl, &table.ttl_attribute) {
            clients
                .dynamodb
                .update_time_to_live()
                .table_name(&name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .attribute_name(attribute)
                        .enabled(true)
                        .build()?,
                )
                .send()
                .await
                .with_context(|| format!("enabling TTL on {name}"))?;
        }
        created.tables.insert(table.logical_id.clone(), name);
    }
    // Dead-letter queues first: a redrive policy names its target's ARN.
    let mut queues: Vec<&QueueSpec> = spec.queues.iter().collect();
    queues.sort_by_key(|q| q.redrive.is_some());
    for queue in queues {
        let name = format!("{}-{}", options.prefix, queue.logical_id);
        let mut request = clients.sqs.create_queue().queue_name(&name);
        if let Some(v) = queue.visibility_timeout {
            request = request.attributes(QueueAttributeName::VisibilityTimeout, v.to_string());
        }
        if let Some(v) = queue.retention_seconds {
            request = request.attributes(QueueAttributeName::MessageRetentionPeriod, v.to_string());
        }
        if let Some((target, count)) = &queue.redrive {
            let dlq = created.queue(target)?;
            let policy =
                serde_json::json!({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": count});
            request = request.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
        }
        let url = request
            .send()
            .await
            .with_context(|| format!("creating queue {name}"))?
            .queue_url
            .ok_or_else(|| anyhow!("queue {name} has no url"))?;
        let arn = clients
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await?
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or_else(|| anyhow!("queue {name} has no ARN"))?;
        created
            .queues
            .insert(queue.logical_id.clone(), LocalQueue { name, url, arn });
    }
    for bucket in &spec.buckets {
        let name = format!(
            "{}-{}",
            options.prefix,
            bucket.logical_id.to_ascii_lowercase()
        );
        match clients.s3.create_bucket().bucket(&name).send().await {
            Ok(_) => {}
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_bucket_already_owned_by_you()) => {}
            Err(e) => return Err(anyhow::Error::new(e).context(format!("creating bucket {name}"))),
        }
        if bucket.versioned {
            clients
                .s3
                .put_bucket_versioning()
                .bucket(&name)
                .versioning_configuration(
                    VersioningConfiguration::builder()
                        .status(BucketVersioningStatus::Enabled)
                        .build(),
                )
                .send()
                .await?;
        }
        created.buckets.insert(bucket.logical_id.clone(), name);
    }
    Ok(created)
}

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
            .http_client(crate::aws::http_client())
            .credentials_provider(aws_credential_types::Credentials::from_keys(
                clients
                    .local_access_key
                    .as_deref()
                    .unwrap_or(crate::aws::LOCAL_ACCESS_KEY_ID),
                crate::aws::LOCAL_SECRET_ACCESS_KEY,
                None,
            ))
            .region(aws_config::Region::new(crate::aws::LOCAL_REGION))
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
        record.aws_region = crate::aws::LOCAL_REGION.into();
        record.change.sequence_number = Some(sequence.clone());
        record.change.new_image = new.clone().unwrap_or_default();
        record.change.old_image = old.clone().unwrap_or_default();
        event.records.push(record);
    }
    event
}
