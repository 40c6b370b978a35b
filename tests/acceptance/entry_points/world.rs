//! The harness: one test's resources and the services wired as each function's `main` wires
//! them.

use super::{parse, received_clock, sample, DELIVERY_KEY};
use acceptance::*;
use feedsafe::aws::claims::S3ClaimStore;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::secrets::SecretsManagerSecrets;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::model::ReplayState;
use feedsafe::intake::poller::{HttpExportSource, PullService};
use feedsafe::intake::webhook::WebhookService;
use feedsafe::lambda::sqs::handle_sqs_batch;
use feedsafe::lambda::CachedConnectors;
use feedsafe::ops::{OpsService, RawArchive};
use feedsafe::protocols::identity_corrections::CorrectionService;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{Clock, NoFaults, SystemClock};
use feedsafe::protocols::projection::Projector;
use feedsafe::protocols::query::{ObservationBody, QueryService};
use local_stack::fake_supplier::{FakeSupplier, FakeSupplierHandle};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// One test's resources, the sample connectors (`infra/local/connectors.json`, tenant `demo`)
/// seeded, and the services built as each function's `main` builds them.
pub(super) struct World {
    pub(super) env: TestEnv,
    pub(super) supplier: FakeSupplierHandle,
    pub(super) store: Arc<DynamoEvidenceStore>,
    pub(super) queue: Arc<SqsDeliveryQueue>,
}

impl World {
    pub(super) async fn new() -> Self {
        let env = spawn_env(true).await;
        let supplier = FakeSupplier::start(0).await.expect("fake supplier starts");
        for connector in local_stack::sample_connectors(&supplier).expect("sample connectors") {
            env.seed(&connector).await;
        }
        let queue = Arc::new(SqsDeliveryQueue::new(
            env.clients.sqs.clone(),
            &env.resources
                .queue("IngestQueue")
                .expect("ingest queue")
                .url,
        ));
        Self {
            store: env.store.clone(),
            env,
            supplier,
            queue,
        }
    }

    pub(super) fn connectors(&self, ttl: Duration) -> Arc<CachedConnectors> {
        Arc::new(CachedConnectors::new(self.store.clone(), ttl))
    }

    pub(super) fn claims(&self) -> Arc<S3ClaimStore> {
        Arc::new(S3ClaimStore::new(
            self.env.clients.s3.clone(),
            &self.env.bucket,
        ))
    }

    /// functions/ingest
    pub(super) fn ingest(&self, clock: Arc<dyn Clock>) -> IngestService {
        IngestService::new(
            self.store.clone(),
            Arc::new(S3ArtifactStore::new(
                self.env.clients.s3.clone(),
                &self.env.bucket,
            )),
            self.connectors(Duration::from_secs(30)),
            clock,
            Arc::new(NoFaults),
        )
    }

    pub(super) fn projection(&self) -> Arc<DynamoProjectionStore> {
        Arc::new(DynamoProjectionStore::new(
            self.env.clients.dynamodb.clone(),
            self.env.projection_table(),
        ))
    }

    /// functions/projector
    pub(super) fn projector(&self) -> Projector {
        Projector::new(self.store.clone(), self.projection(), self.store.clone())
    }

    /// functions/query
    pub(super) fn query(&self) -> QueryService {
        QueryService::new(self.store.clone(), self.projection())
    }

    /// functions/poller (and the pull service of functions/ops, with a shorter cache)
    pub(super) fn pull(&self, cache: Duration) -> PullService {
        PullService::new(
            self.connectors(cache),
            self.store.clone(),
            Arc::new(HttpExportSource::allowing_loopback_http()),
            self.queue.clone(),
            self.claims(),
            Arc::new(SystemClock),
        )
    }

    /// functions/ops; its launcher invokes functions/poller's entry point as Lambda's
    /// asynchronous invocation would (AWS: `InvocationType: Event`).
    pub(super) fn ops(&self) -> OpsService {
        OpsService::new(
            self.store.clone(),
            RawArchive::new(std::sync::Arc::new(
                feedsafe::aws::s3::S3ArtifactStore::new(
                    self.env.clients.s3.clone(),
                    &self.env.bucket,
                ),
            )),
            self.queue.clone(),
            Some(feedsafe::ops::PullStarter {
                service: Arc::new(self.pull(Duration::from_secs(5))),
                launcher: Arc::new(InvokesPoller(Arc::new(self.pull(Duration::from_secs(30))))),
            }),
            Arc::new(SystemClock),
        )
    }

    /// functions/webhook, its signing secrets in (moto's) Secrets Manager under `prefix`.
    pub(super) fn webhook(&self, prefix: &str, clock: Arc<dyn Clock>) -> WebhookService {
        WebhookService::new(
            self.connectors(Duration::from_secs(30)),
            Arc::new(SecretsManagerSecrets::new(self.secrets_client(), prefix)),
            self.store.clone(),
            self.queue.clone(),
            self.claims(),
            clock,
        )
    }

    /// functions/drops
    pub(super) fn drops(&self) -> feedsafe::intake::drops::DropService {
        feedsafe::intake::drops::DropService::new(
            self.connectors(Duration::from_secs(30)),
            self.queue.clone(),
            Arc::new(S3ArtifactStore::new(
                self.env.clients.s3.clone(),
                &self.env.bucket,
            )),
            Arc::new(SystemClock),
        )
    }

    /// functions/sweeper
    pub(super) fn corrections(&self) -> CorrectionService {
        CorrectionService::new(
            self.store.clone(),
            self.store.clone(),
            self.store.clone(),
            Arc::new(SystemClock),
            Arc::new(NoFaults),
        )
    }

    /// A Secrets Manager client on moto, with the test's HTTP client, credentials and region.
    pub(super) fn secrets_client(&self) -> aws_sdk_secretsmanager::Client {
        let (_, moto) = engine_endpoints();
        let sqs = self.env.clients.sqs.config();
        let mut config = aws_sdk_secretsmanager::Config::builder()
            .behavior_version(aws_sdk_secretsmanager::config::BehaviorVersion::latest())
            .endpoint_url(moto)
            .region(sqs.region().cloned());
        if let Some(http) = sqs.http_client() {
            config = config.http_client(http);
        }
        let access_key = self
            .env
            .clients
            .local_access_key
            .clone()
            .unwrap_or_else(|| feedsafe::aws::LOCAL_ACCESS_KEY_ID.into());
        config = config.credentials_provider(aws_sdk_secretsmanager::config::Credentials::new(
            access_key,
            feedsafe::aws::LOCAL_SECRET_ACCESS_KEY,
            None,
            None,
            "local",
        ));
        aws_sdk_secretsmanager::Client::from_conf(config.build())
    }

    pub(super) fn connector(&self, id: &str) -> ConnectorConfig {
        local_stack::sample_connectors(&self.supplier)
            .unwrap()
            .into_iter()
            .find(|c| c.connector.as_str() == id)
            .unwrap_or_else(|| panic!("no sample connector {id}"))
    }

    /// Waits for `count` messages on the ingest queue (left in flight for 60 s).
    pub(super) async fn receive(&self, count: usize) -> Vec<aws_sdk_sqs::types::Message> {
        let queue = self.env.resources.queue("IngestQueue").unwrap();
        let mut messages = Vec::new();
        let start = std::time::Instant::now();
        while messages.len() < count {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{} of {count} messages arrived on the ingest queue",
                messages.len()
            );
            let out = self
                .env
                .clients
                .sqs
                .receive_message()
                .queue_url(&queue.url)
                .max_number_of_messages(10)
                .visibility_timeout(60)
                .wait_time_seconds(1)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
                .send()
                .await
                .expect("receive");
            messages.extend(out.messages.unwrap_or_default());
        }
        assert_eq!(messages.len(), count, "exactly {count} messages");
        messages
    }

    /// Hands `messages` to the ingest function as the SQS event source would.
    pub(super) async fn ingest_messages(&self, messages: &[aws_sdk_sqs::types::Message]) {
        let event = local_stack::events::sqs_event(messages);
        let response = handle_sqs_batch(&self.ingest(Arc::new(SystemClock)), event)
            .await
            .expect("batch handled");
        assert!(
            response.batch_item_failures.is_empty(),
            "every message settles: {:?}",
            response.batch_item_failures
        );
    }

    /// The ingest sample's delivery stored as the ingest function stores it.
    pub(super) async fn ingest_sample_delivery(&self) {
        let event: aws_lambda_events::event::sqs::SqsEvent =
            parse("ingest-sqs.json", sample("ingest-sqs.json"));
        let response = handle_sqs_batch(&self.ingest(received_clock()), event)
            .await
            .expect("batch handled");
        assert!(response.batch_item_failures.is_empty());
        let record = self
            .env
            .replay(DELIVERY_KEY)
            .await
            .expect("delivery stored");
        assert_eq!(record.state, ReplayState::Committed);
    }

    /// Every observation of `key`, as the read API shows it.
    pub(super) async fn observations_json(&self, key: &str) -> Vec<Value> {
        self.env
            .observations_of(key)
            .await
            .iter()
            .map(|o| serde_json::to_value(ObservationBody::from(o)).unwrap())
            .collect()
    }
}

/// The poller function's entry point, invoked asynchronously.
struct InvokesPoller(Arc<PullService>);

#[async_trait::async_trait]
impl feedsafe::intake::poller::PullLauncher for InvokesPoller {
    async fn launch(
        &self,
        connector: &feedsafe::domain::ids::ConnectorId,
    ) -> Result<(), anyhow::Error> {
        let (pull, event) = (
            self.0.clone(),
            serde_json::json!({"connector": connector.as_str()}),
        );
        tokio::spawn(async move {
            let _ = feedsafe::lambda::schedule::handle_pull_schedule(&pull, &event).await;
        });
        Ok(())
    }
}
