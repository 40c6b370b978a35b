//! `local-stack up` runs the whole system locally (see lib.rs); `local-stack demo` drives the
//! essay's scenario through a running stack; `local-stack resources` only creates resources.

mod demo;
mod drill;

use anyhow::{bail, Context, Result};
use feedsafe::aws::AwsClients;
use local_stack::resources::{create_resources, CreateOptions, LocalResources};
use local_stack::{repo_root, start_stack, StackOptions};
use template_spec::{read_template, template_path};

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

/// `.local/stack.json`, or FEEDSAFE_STACK_FILE (the drill's stack keeps its own).
fn write_stack_file(value: &serde_json::Value) -> Result<()> {
    let out = std::env::var_os("FEEDSAFE_STACK_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".local/stack.json"));
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Whole or not at all: a reader polls for it while the stack starts.
    let tmp = out.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
    std::fs::rename(&tmp, &out)?;
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
  drop CONNECTOR FILE
             put FILE into the running stack's bucket under drops/CONNECTOR/, as a
             supplier's file drop (the stack then ingests it)
  drill      the crash drill (scripts/drill runs it): kill -9 the function host while webhooks,
             file drops and pull runs arrive, then check that every acknowledged event is
             stored once with its raw artifact; `local-stack drill --help`
  help       this text

The engines' endpoints come from FEEDSAFE_DYNAMODB_ENDPOINT and FEEDSAFE_MOTO_ENDPOINT
(infra/local.sh starts the engines and sets them). Other settings of `up`:
  FEEDSAFE_PORT                the API's port (8790)
  FEEDSAFE_SUPPLIER_PORT       the fake supplier's port (8791)
  FEEDSAFE_DATA_DIR            where the stack keeps its stream checkpoint and saved queues
                               (infra/local.sh: .local/data, beside the engines' data)
  FEEDSAFE_STACK_PREFIX        resource name prefix (local)
  FEEDSAFE_PULL_EVERY_SECONDS  scheduled pull runs (60; 0 or off: only on request)
  FEEDSAFE_DRAIN_SECONDS       how long a graceful stop may drain the queues (60)

Ctrl-C (or SIGTERM) stops gracefully: the intake closes, the queues drain, the projector catches
up, what waits in the queues is saved; exit status 75 when messages were left in flight.";

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
        "drill" => drill::run(std::env::args().skip(2).collect()).await,
        "drop" => drop_command(std::env::args().skip(2).collect()).await,
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

/// `local-stack drop CONNECTOR FILE`, against the stack `.local/stack.json` describes.
async fn drop_command(args: Vec<String>) -> Result<()> {
    let [connector, file] = args.as_slice() else {
        bail!("usage: local-stack drop CONNECTOR FILE");
    };
    let path = std::env::var_os("FEEDSAFE_STACK_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".local/stack.json"));
    let stack: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path)
            .context("no .local/stack.json: start the stack with infra/local.sh")?,
    )?;
    let key =
        local_stack::definitions::drop_file(&stack, connector, std::path::Path::new(file)).await?;
    println!("dropped {file} as {key}");
    Ok(())
}

fn env_port(key: &str, default: u16) -> Result<u16> {
    match std::env::var(key) {
        Ok(text) => text
            .parse()
            .with_context(|| format!("{key}={text:?} is not a port number")),
        Err(_) => Ok(default),
    }
}

/// Exit status of `up` when a graceful stop left messages in flight: the queue engine must stay
/// up for them (`infra/local.sh` then leaves the engines running). EX_TEMPFAIL.
const IN_FLIGHT_EXIT: i32 = 75;

async fn up() -> Result<()> {
    let dynamodb = endpoint("FEEDSAFE_DYNAMODB_ENDPOINT")?;
    let moto = endpoint("FEEDSAFE_MOTO_ENDPOINT")?;
    // S3's 409 for racing conditional puts, which moto does not give.
    let clients = local_stack::conditional_puts::with_s3_conditional_puts(AwsClients::local(
        &dynamodb, &moto,
    ));
    // Stable names: a restart finds the same tables, queues and bucket (created only when
    // missing), so nothing acknowledged before it is out of reach after it.
    let prefix = std::env::var("FEEDSAFE_STACK_PREFIX").unwrap_or_else(|_| "local".into());
    let data_dir = std::env::var_os("FEEDSAFE_DATA_DIR").map(std::path::PathBuf::from);
    let created = resources(&clients, &prefix)
        .await
        .context("creating resources from template.yaml")?;
    let options = stack_options(data_dir)?;
    let drain_seconds: u64 = std::env::var("FEEDSAFE_DRAIN_SECONDS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(60);
    let stack = start_stack(clients.clone(), &dynamodb, created.clone(), options.clone()).await?;
    demo::seed_first_export(&stack.supplier);
    let engines = Engines {
        dynamodb: &dynamodb,
        moto: &moto,
    };
    write_stack_file(&stack_file(&created, &stack, &options, &engines)?)?;
    print_running(&stack, options.data_dir.as_deref());
    wait_for_stop_signal().await?;
    stop(stack, drain_seconds).await
}

/// `up`'s stack settings from the environment (see USAGE).
fn stack_options(data_dir: Option<std::path::PathBuf>) -> Result<StackOptions> {
    Ok(StackOptions {
        port: env_port("FEEDSAFE_PORT", 8790)?,
        // Stable too: the seeded pull connector names the fake supplier's address.
        supplier_port: env_port("FEEDSAFE_SUPPLIER_PORT", 8791)?,
        pull_every: match std::env::var("FEEDSAFE_PULL_EVERY_SECONDS").ok().as_deref() {
            Some("0") | Some("off") => None,
            Some(text) => Some(std::time::Duration::from_secs(text.parse().with_context(
                || format!("FEEDSAFE_PULL_EVERY_SECONDS={text:?} is not a number of seconds"),
            )?)),
            None => Some(std::time::Duration::from_secs(60)),
        },
        data_dir,
        definitions_dir: Some(repo_root().join("infra/local/definitions")),
        // The drill's short form: messages a killed host held come back after this many
        // seconds instead of the queue's 180 (the same redelivery, sooner). Unset: the queue's.
        visibility_override: match std::env::var("FEEDSAFE_VISIBILITY_SECONDS").ok() {
            Some(text) => Some(text.parse().with_context(|| {
                format!("FEEDSAFE_VISIBILITY_SECONDS={text:?} is not a number of seconds")
            })?),
            None => None,
        },
        ..StackOptions::default()
    })
}

/// The engines' endpoints the stack runs against.
struct Engines<'a> {
    dynamodb: &'a str,
    moto: &'a str,
}

/// What `.local/stack.json` says of a running stack: its resources, addresses, engines, the
/// names and scopes of its tokens, and its process.
fn stack_file(
    created: &LocalResources,
    stack: &local_stack::Stack,
    options: &StackOptions,
    engines: &Engines,
) -> Result<serde_json::Value> {
    let tokens = local_stack::load_tokens(&options.tokens_file)?;
    let mut token_names: Vec<(String, Vec<String>)> =
        tokens.into_iter().map(|(t, p)| (t, p.scopes)).collect();
    token_names.sort();
    let mut stack_file = resources_json(created);
    stack_file["http"] = serde_json::json!(stack.base_url());
    stack_file["fake_supplier"] =
        serde_json::json!(format!("http://127.0.0.1:{}", stack.supplier.port()));
    stack_file["dynamodb_endpoint"] = serde_json::json!(engines.dynamodb);
    stack_file["moto_endpoint"] = serde_json::json!(engines.moto);
    stack_file["tokens"] = serde_json::json!(token_names);
    stack_file["webhook_secrets_file"] = serde_json::json!(options.secrets_file);
    stack_file["data_dir"] = serde_json::json!(options.data_dir);
    stack_file["pid"] = serde_json::json!(std::process::id());
    Ok(stack_file)
}

/// Where the running stack answers, and how to use it.
fn print_running(stack: &local_stack::Stack, data_dir: Option<&std::path::Path>) {
    let base = stack.base_url();
    let data = match data_dir {
        Some(dir) => format!(
            "{}  (kept across restarts; infra/local.sh --fresh starts empty)",
            dir.display()
        ),
        None => "in the engines only (FEEDSAFE_DATA_DIR unset)".into(),
    };
    println!(
        "\nfeedsafe local stack is up on {base}  (Ctrl-C stops it gracefully)
  read offers:   curl -H 'Authorization: Bearer local-reader-demo-token' {base}/v1/items/AX-440-R2/offers
  operate:       cargo run -q -p opsctl -- quarantine list      (token: local-operator-demo-token, a local sample)
  demo:          cargo run -q -p local-stack -- demo
  fake supplier: http://127.0.0.1:{supplier}/exports/acme-eu?page=1
  data:          {data}
  endpoints, resource names and tokens: .local/stack.json
",
        supplier = stack.supplier.port()
    );
}

/// A graceful stop after the first signal: drain for up to `drain_seconds`; a second signal
/// stops at once.
async fn stop(stack: local_stack::Stack, drain_seconds: u64) -> Result<()> {
    println!("stopping: intake closed, draining the queues (up to {drain_seconds}s; Ctrl-C again stops at once)");
    let drained = tokio::select! {
        drained = stack.drain(std::time::Duration::from_secs(drain_seconds)) => drained?,
        _ = wait_for_stop_signal() => {
            println!("stopped at once: messages in flight come back after their visibility timeout");
            std::process::exit(IN_FLIGHT_EXIT);
        }
    };
    match drained {
        local_stack::Drained::Clean { saved_messages } => {
            if saved_messages > 0 {
                println!("stopped; {saved_messages} waiting message(s) saved, sent again at the next start");
            } else {
                println!("stopped; every queue drained");
            }
            Ok(())
        }
        local_stack::Drained::InFlight(why) => {
            println!("stopped, but {why}: keep the engines running, the next start picks them up");
            std::process::exit(IN_FLIGHT_EXIT);
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn wait_for_stop_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
