//! How `start_stack` wires the stack, step by step: the services over the local resources,
//! the samples seeded, and the event sources that feed the functions (the projector's stream,
//! the drop watcher, the scheduler).

use crate::events::StreamReader;
use crate::fake_supplier::FakeSupplierHandle;
use crate::resources::LocalResources;
use crate::stream_source::StreamSourceSettings;
use crate::{
    apigw, async_invoke, definitions, drop_trigger, fake_supplier, load_tokens, queue_files,
    sample_connectors, schedule, spawn_stream_reader, supervise, Phase, Services, StackOptions,
};
use anyhow::Result;
use feedsafe::aws::claims::S3ClaimStore;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::aws::AwsClients;
use feedsafe::domain::ids::ConnectorId;
use feedsafe::intake::drops::DropService;
use feedsafe::intake::poller::{HttpExportSource, PullService};
use feedsafe::intake::webhook::{LocalSecretsFile, WebhookService};
use feedsafe::ops::{OpsService, RawArchive};
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use feedsafe::protocols::projection::Projector;
use feedsafe::protocols::query::QueryService;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::info;

/// The stores and clients every service shares.
struct Shared {
    evidence: Arc<DynamoEvidenceStore>,
    projection: Arc<DynamoProjectionStore>,
    queue: Arc<SqsDeliveryQueue>,
    claims: Arc<S3ClaimStore>,
    artifacts: Arc<S3ArtifactStore>,
    clock: Arc<SystemClock>,
}

impl Shared {
    fn new(clients: &AwsClients, resources: &LocalResources) -> Result<Self> {
        let bucket = resources.bucket("RawBucket")?;
        let dynamodb = clients.dynamodb.clone();
        Ok(Self {
            evidence: Arc::new(DynamoEvidenceStore::new(
                dynamodb.clone(),
                resources.table("EvidenceTable")?,
            )),
            projection: Arc::new(DynamoProjectionStore::new(
                dynamodb,
                resources.table("ProjectionTable")?,
            )),
            queue: Arc::new(SqsDeliveryQueue::new(
                clients.sqs.clone(),
                &resources.queue("IngestQueue")?.url,
            )),
            claims: Arc::new(S3ClaimStore::new(clients.s3.clone(), bucket)),
            artifacts: Arc::new(S3ArtifactStore::new(clients.s3.clone(), bucket)),
            clock: Arc::new(SystemClock),
        })
    }

    /// The pull service, the fake supplier's APIs reachable and the local pull secrets read.
    fn pull(&self, options: &StackOptions) -> Result<Arc<PullService>> {
        Ok(Arc::new(fake_supplier::apis::with_local_pulls(
            PullService::new(
                self.evidence.clone(),
                self.evidence.clone(),
                Arc::new(HttpExportSource::allowing_loopback_http()),
                self.queue.clone(),
                self.claims.clone(),
                self.clock.clone(),
            ),
            &options.pull_secrets_file,
        )?))
    }

    fn ops(
        &self,
        pull: Arc<PullService>,
        launcher: mpsc::UnboundedSender<ConnectorId>,
    ) -> Arc<OpsService> {
        Arc::new(
            OpsService::new(
                self.evidence.clone(),
                RawArchive::new(self.artifacts.clone()),
                self.queue.clone(),
                Some(feedsafe::ops::PullStarter {
                    service: pull,
                    launcher: Arc::new(schedule::LocalPullLauncher(launcher)),
                }),
                self.clock.clone(),
            )
            .with_read_model(self.projection.clone()),
        )
    }

    fn webhook(&self, options: &StackOptions) -> Result<Arc<WebhookService>> {
        Ok(Arc::new(WebhookService::new(
            self.evidence.clone(),
            Arc::new(LocalSecretsFile::load(&options.secrets_file)?),
            self.evidence.clone(),
            self.queue.clone(),
            self.claims.clone(),
            self.clock.clone(),
        )))
    }
}

/// Every service over the local resources, and the receiving end of the ops route's pull
/// launches (the scheduler takes them).
pub(crate) fn services(
    clients: &AwsClients,
    resources: &LocalResources,
    options: &StackOptions,
) -> Result<(Services, mpsc::UnboundedReceiver<ConnectorId>)> {
    let shared = Shared::new(clients, resources)?;
    let pull = shared.pull(options)?;
    let (launcher, launches) = mpsc::unbounded_channel();
    let e = &shared.evidence;
    let services = Services {
        evidence: e.clone(),
        ingest: IngestService::new(
            e.clone(),
            shared.artifacts.clone(),
            e.clone(),
            shared.clock.clone(),
            Arc::new(NoFaults),
        ),
        projector: Projector::new(e.clone(), shared.projection.clone(), e.clone()),
        query: QueryService::new(e.clone(), shared.projection.clone()),
        webhook: shared.webhook(options)?,
        ops: shared.ops(pull.clone(), launcher),
        pull,
        drops: DropService::new(
            e.clone(),
            shared.queue.clone(),
            shared.artifacts.clone(),
            shared.clock.clone(),
        ),
        tokens: Arc::new(load_tokens(&options.tokens_file)?),
        api: Arc::new(apigw::ApiRoutes::from_template(
            &template_spec::read_template(&template_spec::template_path())?.document,
        )?),
        recorder: options
            .record_events
            .as_deref()
            .map(apigw::EventRecorder::new)
            .transpose()?
            .map(Arc::new),
    };
    Ok((services, launches))
}

/// The sample connectors and definitions, each created only when missing: a durable stack
/// keeps what operators changed since.
pub(crate) async fn seed_samples(
    evidence: &DynamoEvidenceStore,
    supplier: &FakeSupplierHandle,
    options: &StackOptions,
) -> Result<()> {
    for connector in sample_connectors(supplier)? {
        let existing = feedsafe::protocols::ports::ConnectorDirectory::connector(
            evidence,
            &connector.connector,
        )
        .await?;
        if existing.is_none() {
            evidence.put_connector(&connector).await?;
        }
    }
    if let Some(dir) = &options.definitions_dir {
        definitions::seed_definitions(evidence, dir).await?;
    }
    Ok(())
}

/// The projector's stream event source, from its checkpoint when the stack keeps one.
pub(crate) async fn start_stream(
    clients: &AwsClients,
    dynamodb_endpoint: &str,
    resources: &LocalResources,
    options: &StackOptions,
    projector: Projector,
    phases: watch::Receiver<Phase>,
) -> Result<JoinHandle<()>> {
    let failure_queue = resources
        .queue("ProjectorFailureQueue")
        .ok()
        .map(|q| q.url.clone());
    let table = resources.table("EvidenceTable")?;
    let mut stream = StreamReader::open(clients, dynamodb_endpoint, table).await?;
    if let Some(dir) = &options.data_dir {
        std::fs::create_dir_all(dir)?;
        stream = stream.with_checkpoint(dir.join("stream-checkpoint.json"))?;
    }
    let spec = template_spec::read_template(&template_spec::template_path())?;
    let settings = StreamSourceSettings::from_template(&spec.document)?;
    Ok(spawn_stream_reader(
        stream,
        settings,
        projector,
        clients.sqs.clone(),
        failure_queue,
        phases,
    ))
}

/// The messages saved at the last graceful stop, sent again.
pub(crate) async fn restore_queues(
    clients: &AwsClients,
    resources: &LocalResources,
    options: &StackOptions,
) -> Result<()> {
    if let Some(dir) = &options.data_dir {
        let restored = queue_files::restore(clients, resources, &dir.join("queues")).await?;
        if restored > 0 {
            info!(
                restored,
                "messages saved at the last graceful stop sent again"
            );
        }
    }
    Ok(())
}

/// The drop watcher: the bucket's `drops/` notifications as S3 events of the drops function.
pub(crate) fn spawn_drop_watcher(
    clients: &AwsClients,
    resources: &LocalResources,
    drop_events: String,
    services: &Services,
    options: &StackOptions,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>> {
    let spec = template_spec::read_template(&template_spec::template_path())?;
    let invoke =
        async_invoke::AsyncInvoke::from_template(&spec.document, "DropsFunction", resources)?;
    let (clients, drops, bucket) = (
        clients.clone(),
        services.drops.clone(),
        resources.bucket("RawBucket")?.to_owned(),
    );
    let visibility = options.visibility_override.unwrap_or(5);
    Ok(tokio::spawn(supervise::supervised(
        "drop watcher",
        move || {
            drop_trigger::drops_watcher(
                clients.clone(),
                drop_events.clone(),
                bucket.clone(),
                drops.clone(),
                invoke.clone(),
                visibility,
                stopped.clone(),
            )
        },
    )))
}

/// The scheduler: the pull schedule and its dispatcher, the ops route's launches, the sweeper.
pub(crate) fn spawn_scheduler(
    clients: &AwsClients,
    resources: &LocalResources,
    services: &Services,
    options: &StackOptions,
    launches: mpsc::UnboundedReceiver<ConnectorId>,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>> {
    let spec = template_spec::read_template(&template_spec::template_path())?;
    let invoke = |function: &str| {
        async_invoke::AsyncInvoke::from_template(&spec.document, function, resources)
    };
    let invokes = [invoke("PollerFunction")?, invoke("SweeperFunction")?];
    let (services, sqs) = (services.clone(), clients.sqs.clone());
    let every = (options.pull_every, options.sweep_every);
    let launches = Arc::new(tokio::sync::Mutex::new(launches));
    Ok(tokio::spawn(supervise::supervised(
        "scheduler",
        move || {
            schedule::scheduler(
                services.clone(),
                sqs.clone(),
                invokes.clone(),
                every,
                launches.clone(),
                stopped.clone(),
            )
        },
    )))
}
