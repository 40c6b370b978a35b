//! Local resources created from `template.yaml` itself (read by `template_spec`), so that the
//! local engines and the deployed stack cannot drift: tables (keys, GSIs, stream, TTL), queues
//! (redrive, visibility, retention) and buckets (versioning), each name given a prefix so tests
//! isolate.

use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use aws_sdk_sqs::types::QueueAttributeName;
use feedsafe::aws::AwsClients;
use std::collections::BTreeMap;
use template_spec::{QueueSpec, TemplateResources};

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
