//! The local stack: every function in-process behind faithful local event sources, on the
//! local engines (DynamoDB Local, moto). Used by `local-stack up`, the demo and the tests.
//!
//! - an HTTP server on 127.0.0.1 with the API routes (bearer tokens from `tokens.json`);
//! - SQS pollers for the ingest queue with the template's batch size and the queue's
//!   visibility timeout, partial batch responses (through `handle_sqs_batch`), and moto's
//!   redrive after `maxReceiveCount`;
//! - the projector's stream event source with the template's filters, batch size, retries and
//!   on-failure queue (`stream_source`; batches through `handle_stream_batch`);
//! - the drop trigger: moto's S3 notifications turned into S3 events for `handle_s3_event`;
//! - the fake supplier export API, the pull schedule and the runs sweeper.

pub mod apigw;
pub mod async_invoke;
pub mod conditional_puts;
pub mod definitions;
pub mod drop_trigger;
pub mod events;
pub mod fake_supplier;
pub mod faults;
pub mod fidelity;
pub mod http;
pub mod queue_files;
pub mod resources;
mod schedule;
mod stream_poll;
pub mod stream_source;
mod supervise;
mod wiring;

use crate::events::StreamReader;
use crate::fake_supplier::{FakeSupplier, FakeSupplierHandle};
use crate::resources::LocalResources;
use anyhow::{Context, Result};
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::AwsClients;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::intake::drops::DropService;
use feedsafe::intake::poller::PullService;
use feedsafe::intake::webhook::WebhookService;
use feedsafe::ops::OpsService;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::projection::Projector;
use feedsafe::protocols::query::{Principal, QueryService};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use stream_source::StreamSourceSettings;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
}

/// Local bearer tokens (sample values, documented in README): token -> tenant and scopes.
pub fn load_tokens(path: &Path) -> Result<HashMap<String, Principal>> {
    #[derive(serde::Deserialize)]
    struct Entry {
        tenant: String,
        scopes: Vec<String>,
        /// Who the token names (recorded on operator actions), like a JWT's `sub`.
        #[serde(default)]
        subject: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct File {
        tokens: HashMap<String, Entry>,
    }
    let file: File = serde_json::from_slice(
        &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    file.tokens
        .into_iter()
        .map(|(token, e)| {
            let tenant = feedsafe::domain::ids::TenantId::parse(&e.tenant)?;
            Ok((
                token,
                Principal {
                    tenant,
                    scopes: e.scopes,
                    subject: e.subject,
                },
            ))
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct StackOptions {
    /// HTTP port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Fake supplier port; 0 picks a free one.
    pub supplier_port: u16,
    /// Run every pull connector this often (None: only on request).
    pub pull_every: Option<Duration>,
    pub sweep_every: Duration,
    /// Overrides the queue's visibility timeout for received messages (tests only; None keeps
    /// the template's value, as Lambda's event source does).
    pub visibility_override: Option<i32>,
    pub tokens_file: PathBuf,
    pub secrets_file: PathBuf,
    /// Local sample credentials of pulls made from a definition, by `secret_ref`.
    pub pull_secrets_file: PathBuf,
    /// Seed `infra/local/connectors.json` before the server answers.
    pub seed_samples: bool,
    /// Seed the connector definitions of this folder (through the checks of
    /// `PUT /v1/connectors/{id}`) when `seed_samples`; `local-stack up` seeds
    /// `infra/local/definitions`, tests none.
    pub definitions_dir: Option<PathBuf>,
    /// Record every API Gateway event the local server sends a function into this folder.
    pub record_events: Option<PathBuf>,
    /// Where a durable stack keeps its own state beside the engines' (the stream checkpoint,
    /// the queues saved at a graceful stop): `.local/data` for `local-stack up`; None for tests.
    pub data_dir: Option<PathBuf>,
}

impl Default for StackOptions {
    fn default() -> Self {
        let local = repo_root().join("infra/local");
        Self {
            port: 8790,
            supplier_port: 0,
            pull_every: Some(Duration::from_secs(60)),
            sweep_every: Duration::from_secs(30),
            visibility_override: None,
            tokens_file: local.join("tokens.json"),
            secrets_file: local.join("secrets.json"),
            pull_secrets_file: local.join("pull-secrets.json"),
            seed_samples: true,
            definitions_dir: None,
            record_events: None,
            data_dir: None,
        }
    }
}

/// Every service of the system, wired to the local resources.
#[derive(Clone)]
pub struct Services {
    pub evidence: Arc<DynamoEvidenceStore>,
    pub ingest: IngestService,
    pub projector: Projector,
    pub query: QueryService,
    pub webhook: Arc<WebhookService>,
    pub pull: Arc<PullService>,
    pub drops: DropService,
    pub tokens: Arc<HashMap<String, Principal>>,
    /// The operators' API (`feedsafe::ops`), sharing the pull service and the ingest queue.
    pub ops: Arc<OpsService>,
    /// The HTTP API's routes, from the template (`apigw`).
    pub api: Arc<apigw::ApiRoutes>,
    /// Where the API Gateway events are recorded, if anywhere (`StackOptions::record_events`).
    pub recorder: Option<Arc<apigw::EventRecorder>>,
}

pub struct Stack {
    pub http: SocketAddr,
    pub supplier: FakeSupplierHandle,
    pub services: Services,
    pub resources: LocalResources,
    /// Closes the intake: the HTTP server, the schedules, the drop trigger.
    shutdown: watch::Sender<bool>,
    /// The event sources' phase (see `Phase`).
    phase: watch::Sender<Phase>,
    /// The intake's tasks, the ingest pollers' and the stream poller's.
    intake: Vec<JoinHandle<()>>,
    pollers: Vec<JoinHandle<()>>,
    stream: Option<JoinHandle<()>>,
    clients: AwsClients,
    data_dir: Option<PathBuf>,
}

/// Where the event sources stand in a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Running,
    /// The intake is closed: each ingest poller returns once the queue has nothing for it.
    Draining,
    /// The ingest queue is drained: the stream poller returns once it has caught up.
    Settling,
    /// Return at once (a test's stop, or a drain that ran out of time).
    Stopped,
}

/// How a graceful stop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drained {
    /// Everything acknowledged was handled or saved: the engines may stop.
    Clean { saved_messages: usize },
    /// Messages are still in flight somewhere (named): the queue engine must stay up for them
    /// to come back after their visibility timeout.
    InFlight(String),
}

impl Stack {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Stops every task the stack started, at once (tests).
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.phase.send(Phase::Stopped);
        for task in self
            .intake
            .into_iter()
            .chain(self.pollers)
            .chain(self.stream)
        {
            task.abort();
            let _ = task.await;
        }
    }

    /// A graceful stop: the intake closes first (no new webhook, schedule or drop is taken; the
    /// requests being handled finish), the ingest pollers drain the queue, the projector catches
    /// up with the stream, then, for a durable stack, what is left in the queues (dead letters,
    /// failure reports) is saved beside the data and sent again at the next start. Within
    /// `limit`; past it the tasks are stopped where they are and nothing is lost either (the
    /// messages come back after their visibility timeout), as long as the queue engine stays up.
    pub async fn drain(mut self, limit: Duration) -> Result<Drained> {
        let deadline = tokio::time::Instant::now() + limit;
        let _ = self.shutdown.send(true);
        let intake = std::mem::take(&mut self.intake);
        let timed_out = |what: &str| {
            Drained::InFlight(format!("{what} did not finish within {}s", limit.as_secs()))
        };
        if !join_by(intake, deadline).await {
            self.stop_now().await;
            return Ok(timed_out("the intake"));
        }
        let _ = self.phase.send(Phase::Draining);
        let pollers = std::mem::take(&mut self.pollers);
        if !join_by(pollers, deadline).await {
            self.stop_now().await;
            return Ok(timed_out("draining the ingest queue"));
        }
        let _ = self.phase.send(Phase::Settling);
        let stream: Vec<_> = self.stream.take().into_iter().collect();
        if !join_by(stream, deadline).await {
            self.stop_now().await;
            return Ok(timed_out("the projector"));
        }
        let Some(dir) = self.data_dir.clone() else {
            return Ok(Drained::Clean { saved_messages: 0 });
        };
        queue_files::save(&self.clients, &self.resources, &dir.join("queues")).await
    }

    async fn stop_now(self) {
        self.stop().await
    }
}

/// Waits for `tasks` until `deadline`; false when some were still running (they are aborted).
async fn join_by(tasks: Vec<JoinHandle<()>>, deadline: tokio::time::Instant) -> bool {
    let mut finished = true;
    for mut task in tasks {
        if !finished || tokio::time::timeout_at(deadline, &mut task).await.is_err() {
            finished = false;
            task.abort();
        }
    }
    finished
}

/// Concurrent ingest batches, as Lambda's SQS event source runs several pollers at once.
const INGEST_POLLERS: usize = 4;

/// The template's `BatchSize` for the ingest function's SQS event (parameter default resolved).
fn ingest_batch_size() -> i32 {
    let Ok(spec) = template_spec::read_template(&template_spec::template_path()) else {
        return 10;
    };
    let doc = &spec.document;
    let size = &doc["Resources"]["IngestFunction"]["Properties"]["Events"]["Deliveries"]
        ["Properties"]["BatchSize"];
    let resolved = match size {
        serde_norway::Value::Tagged(t) => t
            .value
            .as_str()
            .map(|p| doc["Parameters"][p]["Default"].clone()),
        other => Some(other.clone()),
    };
    resolved
        .and_then(|v| v.as_i64())
        .map_or(10, |v| v.clamp(1, 10) as i32)
}

/// The ingest function's timeout in `template.yaml` (its own, else the Globals'): each batch
/// is handled by that deadline, as a Lambda invocation is.
fn ingest_timeout() -> Duration {
    let seconds = template_spec::read_template(&template_spec::template_path())
        .ok()
        .and_then(|spec| {
            let doc = &spec.document;
            doc["Resources"]["IngestFunction"]["Properties"]["Timeout"]
                .as_u64()
                .or_else(|| doc["Globals"]["Function"]["Timeout"].as_u64())
        })
        .unwrap_or(3);
    Duration::from_secs(seconds)
}

pub async fn start_stack(
    clients: AwsClients,
    dynamodb_endpoint: &str,
    resources: LocalResources,
    options: StackOptions,
) -> Result<Stack> {
    let supplier = FakeSupplier::start(options.supplier_port).await?;
    let (services, launches) = wiring::services(&clients, &resources, &options)?;
    if options.seed_samples {
        wiring::seed_samples(&services.evidence, &supplier, &options).await?;
    }
    let (shutdown, stopped) = watch::channel(false);
    let (phase, phases) = watch::channel(Phase::Running);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", options.port))?;
    let http = listener.local_addr()?;
    let mut intake = vec![tokio::spawn(http::serve(
        listener,
        services.clone(),
        stopped.clone(),
    ))];
    let ingest_queue = resources.queue("IngestQueue")?.url.clone();
    let pollers = spawn_ingest_pollers(
        &clients,
        &ingest_queue,
        &services.ingest,
        options.visibility_override,
        &phases,
    );
    let stream = wiring::start_stream(
        &clients,
        dynamodb_endpoint,
        &resources,
        &options,
        services.projector.clone(),
        phases,
    )
    .await?;
    let bucket = resources.bucket("RawBucket")?.to_owned();
    let drop_events = drop_trigger::subscribe_to_drops(&clients, &resources, &bucket).await?;
    wiring::restore_queues(&clients, &resources, &options).await?;
    intake.push(wiring::spawn_drop_watcher(
        &clients,
        &resources,
        drop_events,
        &services,
        &options,
        stopped.clone(),
    )?);
    intake.push(wiring::spawn_scheduler(
        &clients, &resources, &services, &options, launches, stopped,
    )?);
    info!(%http, supplier = %supplier.port(), "local stack up");
    Ok(Stack {
        http,
        supplier,
        services,
        resources,
        shutdown,
        phase,
        intake,
        pollers,
        stream: Some(stream),
        clients,
        data_dir: options.data_dir,
    })
}

/// Lambda's SQS event source starts with five concurrent pollers, each invoking its own function
/// instance; locally, `INGEST_POLLERS` share this process, each supervised.
fn spawn_ingest_pollers(
    clients: &AwsClients,
    queue: &str,
    ingest: &IngestService,
    visibility: Option<i32>,
    phases: &watch::Receiver<Phase>,
) -> Vec<JoinHandle<()>> {
    (0..INGEST_POLLERS)
        .map(|_| {
            let (sqs, queue, ingest) = (clients.sqs.clone(), queue.to_owned(), ingest.clone());
            let phases = phases.clone();
            tokio::spawn(supervise::supervised("ingest poller", move || {
                sqs_poller(
                    sqs.clone(),
                    queue.clone(),
                    ingest.clone(),
                    ingest_batch_size(),
                    visibility,
                    phases.clone(),
                )
            }))
        })
        .collect()
}

/// The projector's stream reader, supervised: a run that dies hands the reader to the next.
fn spawn_stream_reader(
    stream: StreamReader,
    settings: StreamSourceSettings,
    projector: Projector,
    sqs: aws_sdk_sqs::Client,
    failure_queue: Option<String>,
    phases: watch::Receiver<Phase>,
) -> JoinHandle<()> {
    let stream = Arc::new(tokio::sync::Mutex::new(stream));
    tokio::spawn(supervise::supervised("stream reader", move || {
        stream_poll::stream_poller(
            stream.clone(),
            settings.clone(),
            projector.clone(),
            sqs.clone(),
            failure_queue.clone(),
            phases.clone(),
        )
    }))
}

/// Lambda's SQS event source, locally: long-poll, hand a batch to the handler, delete what it
/// acknowledged, leave the reported failures to reappear after the visibility timeout.
async fn sqs_poller(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    ingest: IngestService,
    batch_size: i32,
    visibility: Option<i32>,
    mut phase: watch::Receiver<Phase>,
) {
    let timeout = ingest_timeout();
    loop {
        if *phase.borrow() >= Phase::Settling {
            return;
        }
        let draining = *phase.borrow() == Phase::Draining;
        let received = tokio::select! {
            r = sqs
                .receive_message()
                .queue_url(&queue_url)
                .max_number_of_messages(batch_size)
                .wait_time_seconds(1)
                .set_visibility_timeout(visibility)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
                .send() => r,
            // Draining does not interrupt a receive; stopping does.
            _ = wait_for_phase(&mut phase, Phase::Stopped) => return,
        };
        let messages = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                warn!(error = %feedsafe_error(&e), "receive failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            if draining {
                return;
            }
            continue;
        }
        let event = crate::events::sqs_event(&messages);
        let failed: BTreeSet<String> = match feedsafe::lambda::sqs::handle_sqs_batch_by(
            &ingest,
            event,
            Some(tokio::time::Instant::now().into_std() + timeout),
        )
        .await
        {
            Ok(response) => response
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect(),
            // The whole batch failed: nothing is deleted, everything comes back.
            Err(_) => messages
                .iter()
                .filter_map(|m| m.message_id.clone())
                .collect(),
        };
        for m in &messages {
            if failed.contains(m.message_id.as_deref().unwrap_or_default()) {
                continue;
            }
            if let Some(handle) = &m.receipt_handle {
                if let Err(e) = sqs
                    .delete_message()
                    .queue_url(&queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                {
                    warn!(error = %feedsafe_error(&e), "delete failed; the message will be redelivered and replay");
                }
            }
        }
    }
}

/// Returns once the phase is `at_least` or later.
async fn wait_for_phase(phase: &mut watch::Receiver<Phase>, at_least: Phase) {
    let _ = phase.wait_for(|p| *p >= at_least).await;
}

fn feedsafe_error<E: std::error::Error>(e: &E) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The sample connectors, with the pull connector pointed at the fake supplier.
pub fn sample_connectors(supplier: &FakeSupplierHandle) -> Result<Vec<ConnectorConfig>> {
    let path = repo_root().join("infra/local/connectors.json");
    let mut connectors: Vec<ConnectorConfig> = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .context("infra/local/connectors.json")?;
    for connector in &mut connectors {
        if let Some(pull) = &mut connector.pull {
            pull.export_url = supplier.url(connector.connector.as_str());
        }
    }
    Ok(connectors)
}
