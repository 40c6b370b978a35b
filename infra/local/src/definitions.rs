//! Connector definitions on the local stack: the sample definitions seeded through the same
//! checks as `PUT /v1/connectors/{id}` (schema, rules, mapping, configuration), and a supplier's
//! file dropped into the stack's bucket as the supplier would drop it (`local-stack drop`).

use anyhow::{bail, Context, Result};
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::domain::definition::Definition;
use feedsafe::domain::ids::TenantId;
use feedsafe::domain::mapping::Mapping;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::ops::ports::{DefinitionWrite, DefinitionWritten};
use feedsafe::protocols::ports::ConnectorDirectory;
use std::path::Path;

/// The tenant the sample definitions belong to.
const SAMPLE_TENANT: &str = "demo";

/// Stores every `*.json` definition of `dir` as version 1 of its connector for the sample
/// tenant, unless the connector exists (a durable stack keeps what operators changed since).
/// A definition the checks refuse stops the stack with every problem listed.
pub async fn seed_definitions(evidence: &DynamoEvidenceStore, dir: &Path) -> Result<()> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in files {
        seed_one(evidence, &file).await?;
    }
    Ok(())
}

async fn seed_one(evidence: &DynamoEvidenceStore, file: &Path) -> Result<()> {
    let document: serde_json::Value = serde_json::from_slice(&std::fs::read(file)?)
        .with_context(|| format!("{} is not JSON", file.display()))?;
    let definition = Definition::read(&document)
        .and_then(|d| Mapping::compile(&d).map(|_| d))
        .map_err(|problems| refused(file, problems))?;
    let config = definition
        .to_config(TenantId::parse(SAMPLE_TENANT)?, 1)
        .map_err(|problems| refused(file, problems))?;
    if evidence.connector(&config.connector).await?.is_some() {
        return Ok(());
    }
    let write = DefinitionWrite {
        config: &config,
        document: &document,
        recorded_by: Some("local-stack seed"),
        recorded_at: Timestamp::now(),
    };
    match evidence.put_definition(&write).await? {
        DefinitionWritten::Stored | DefinitionWritten::VersionMoved => Ok(()),
        DefinitionWritten::Taken => bail!(
            "{}: connector {} belongs to another tenant",
            file.display(),
            config.connector
        ),
    }
}

fn refused(file: &Path, problems: Vec<feedsafe::domain::definition::Problem>) -> anyhow::Error {
    let listed: Vec<String> = problems
        .iter()
        .map(|p| format!("  {}: {}", p.pointer, p.message))
        .collect();
    anyhow::anyhow!("{} is refused:\n{}", file.display(), listed.join("\n"))
}

/// `local-stack drop CONNECTOR FILE`: puts FILE into the running stack's bucket under
/// `drops/{CONNECTOR}/{file name}`, as a supplier's upload; the stack ingests it from there.
pub async fn drop_file(stack: &serde_json::Value, connector: &str, file: &Path) -> Result<String> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} has no file name", file.display()))?;
    let key = format!("drops/{connector}/{name}");
    let body = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let clients = feedsafe::aws::AwsClients::local(
        &text(&stack["dynamodb_endpoint"]),
        &text(&stack["moto_endpoint"]),
    );
    clients
        .s3
        .put_object()
        .bucket(text(&stack["buckets"]["RawBucket"]))
        .key(&key)
        .body(body.into())
        .send()
        .await
        .with_context(|| format!("putting {key}"))?;
    Ok(key)
}
