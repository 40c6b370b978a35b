//! The resources of `template.yaml` the local engines can host (tables with their keys, GSIs,
//! stream and TTL; queues with redrive, visibility and retention; buckets with versioning), read
//! from the template itself so that the local stack, the tests and the capacity plan use the
//! deployed shapes. Creating them on the engines is the local stack's (`local_stack::resources`).

use anyhow::{anyhow, Context, Result};
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
