//! `local-stack up` runs the whole system locally (see lib.rs); `local-stack demo` drives the
//! essay's scenario through a running stack; `local-stack resources` only creates resources.

mod demo;

use anyhow::{bail, Context, Result};
use feedsafe::aws::AwsClients;
use feedsafe::local::{
    create_resources, read_template, template_path, CreateOptions, LocalResources,
};
use local_stack::{repo_root, start_stack, StackOptions};

fn endpoint(key: &str) -> Result<String> {
    std::env::var(key).with_context(|| {
        format!("{key} is not set: start the engines with `infra/engines.sh start` and `eval \"$(infra/engines.sh env)\"` (infra/local.sh does both)")
    })
}

async fn resources(clients: &AwsClients, prefix: &str) -> Result<LocalResources> {
    let spec = read_template(&template_path())?;
    create_resources(
        clients,
        &spec,
        &CreateOptions {
            prefix: prefix.into(),
            ttl: true,
        },
    )
    .await
}

fn write_stack_file(value: &serde_json::Value) -> Result<()> {
    let out = repo_root().join(".local/stack.json");
    std::fs::create_dir_all(repo_root().join(".local"))?;
    std::fs::write(&out, serde_json::to_vec_pretty(value)?)?;
    Ok(())
}

fn resources_json(resources: &LocalResources) -> serde_json::Value {
    serde_json::json!({
        "tables": resources.tables,
        "queues": resources.queues.iter().map(|(id, q)| (id.clone(), serde_json::json!({"name": q.name, "url": q.url, "arn": q.arn}))).collect::<serde_json::Map<_, _>>(),
        "buckets": resources.buckets,
    })
}

const USAGE: &str = "\
usage: local-stack [COMMAND]

commands:
  up         create the resources of template.yaml on the local engines, seed the sample
             tenant, connectors, secrets and tokens, and run every function (the default)
  demo       drive the essay's scenario through a running stack, a table per step
  resources  create the resources only and print their names
  help       this text

The engines' endpoints come from FEEDSAFE_DYNAMODB_ENDPOINT and FEEDSAFE_MOTO_ENDPOINT
(infra/local.sh starts the engines and sets them). FEEDSAFE_PORT: the API's port (8790).";

#[tokio::main]
async fn main() -> Result<()> {
    let command = std::env::args().nth(1).unwrap_or_else(|| "up".into());
    if matches!(command.as_str(), "help" | "--help" | "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "info,aws_config=warn,aws_smithy_runtime=warn,hyper=warn",
        )
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .compact()
        .init();
    match command.as_str() {
        "up" => up().await,
        "demo" => demo::run().await,
        "resources" => {
            let clients = AwsClients::local(
                &endpoint("FEEDSAFE_DYNAMODB_ENDPOINT")?,
                &endpoint("FEEDSAFE_MOTO_ENDPOINT")?,
            );
            let created = resources(&clients, "local").await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&resources_json(&created))?
            );
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}

async fn up() -> Result<()> {
    let dynamodb = endpoint("FEEDSAFE_DYNAMODB_ENDPOINT")?;
    let moto = endpoint("FEEDSAFE_MOTO_ENDPOINT")?;
    let clients = AwsClients::local(&dynamodb, &moto);
    let prefix = format!(
        "local{}",
        feedsafe::timestamp::Timestamp::now().unix_seconds() % 1_000_000
    );
    let created = resources(&clients, &prefix)
        .await
        .context("creating resources from template.yaml")?;
    let port: u16 = std::env::var("FEEDSAFE_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8790);
    let options = StackOptions {
        port,
        ..StackOptions::default()
    };
    let stack = start_stack(clients.clone(), &dynamodb, created.clone(), options.clone()).await?;
    demo::seed_first_export(&stack.supplier);
    let tokens = local_stack::load_tokens(&options.tokens_file)?;
    let mut token_names: Vec<(String, Vec<String>)> =
        tokens.into_iter().map(|(t, p)| (t, p.scopes)).collect();
    token_names.sort();
    let mut stack_file = resources_json(&created);
    stack_file["http"] = serde_json::json!(stack.base_url());
    stack_file["fake_supplier"] =
        serde_json::json!(format!("http://127.0.0.1:{}", stack.supplier.port()));
    stack_file["dynamodb_endpoint"] = serde_json::json!(dynamodb);
    stack_file["moto_endpoint"] = serde_json::json!(moto);
    stack_file["tokens"] = serde_json::json!(token_names);
    stack_file["webhook_secrets_file"] = serde_json::json!(options.secrets_file);
    write_stack_file(&stack_file)?;
    let base = stack.base_url();
    println!(
        "\nfeedsafe local stack is up on {base}  (Ctrl-C stops it)
  read offers:   curl -H 'Authorization: Bearer local-reader-demo-token' {base}/v1/items/AX-440-R2/offers
  operate:       cargo run -q -p opsctl -- quarantine list      (token: local-operator-demo-token, a local sample)
  demo:          cargo run -q -p local-stack -- demo
  fake supplier: http://127.0.0.1:{supplier}/exports/acme-eu?page=1
  endpoints, resource names and tokens: .local/stack.json
",
        supplier = stack.supplier.port()
    );
    tokio::signal::ctrl_c().await?;
    println!("stopping the local stack");
    stack.stop().await;
    Ok(())
}
