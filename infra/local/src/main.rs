//! `local-stack resources`: creates the resources of `template.yaml` on the running local engines
//! (prefix `local`), seeds the sample connectors, and writes `.local/stack.json` for other tools.

use anyhow::{bail, Context, Result};
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::AwsClients;
use feedsafe::connector::ConnectorConfig;
use feedsafe::local::{create_resources, read_template, template_path, CreateOptions};
use std::path::PathBuf;

const PREFIX: &str = "local";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
}

fn endpoint(key: &str) -> Result<String> {
    std::env::var(key).with_context(|| {
        format!("{key} is not set: start the engines with `infra/engines.sh start` and `eval \"$(infra/engines.sh env)\"`")
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let command = std::env::args().nth(1).unwrap_or_default();
    if command != "resources" {
        bail!("usage: local-stack resources");
    }
    let dynamodb = endpoint("FEEDSAFE_DYNAMODB_ENDPOINT")?;
    let moto = endpoint("FEEDSAFE_MOTO_ENDPOINT")?;
    let clients = AwsClients::local(&dynamodb, &moto);
    let existing = clients
        .dynamodb
        .list_tables()
        .send()
        .await
        .context("DynamoDB Local is not answering")?;
    if existing
        .table_names()
        .iter()
        .any(|t| t.starts_with(&format!("{PREFIX}-")))
    {
        bail!("resources with prefix {PREFIX:?} already exist on these engines (restart them for a clean stack)");
    }
    let spec = read_template(&template_path())?;
    let resources = create_resources(
        &clients,
        &spec,
        &CreateOptions {
            prefix: PREFIX.into(),
            ttl: true,
        },
    )
    .await?;
    let store =
        DynamoEvidenceStore::new(clients.dynamodb.clone(), resources.table("EvidenceTable")?);
    let connectors_file = repo_root().join("infra/local/connectors.json");
    let connectors: Vec<ConnectorConfig> = serde_json::from_slice(
        &std::fs::read(&connectors_file)
            .with_context(|| format!("reading {}", connectors_file.display()))?,
    )
    .context("infra/local/connectors.json")?;
    for connector in &connectors {
        store.put_connector(connector).await?;
    }
    let stack = serde_json::json!({
        "dynamodb_endpoint": dynamodb,
        "moto_endpoint": moto,
        "tables": resources.tables,
        "queues": resources.queues.iter().map(|(id, q)| (id.clone(), serde_json::json!({"name": q.name, "url": q.url, "arn": q.arn}))).collect::<serde_json::Map<_, _>>(),
        "buckets": resources.buckets,
        "connectors": connectors.iter().map(|c| c.connector.to_string()).collect::<Vec<_>>(),
    });
    let out = repo_root().join(".local/stack.json");
    std::fs::create_dir_all(out.parent().unwrap_or(&repo_root()))?;
    std::fs::write(&out, serde_json::to_vec_pretty(&stack)?)?;
    println!("{}", serde_json::to_string_pretty(&stack)?);
    eprintln!("local-stack: resources created from template.yaml; written to .local/stack.json");
    Ok(())
}
