//! Test harness: every test gets its own tables, queues and bucket on the shared local engines
//! (started by `scripts/test` or `infra/engines.sh start`), created from `template.yaml`.

pub mod baseline;
mod fixtures;
mod http;
mod interceptors;
pub mod load;
pub mod metering;
#[path = "../model/mod.rs"]
pub mod model;
pub mod openapi;
mod projection;
mod rng;
pub mod scale;
mod seams;
mod stack;

pub use fixtures::*;
pub use http::*;
pub use interceptors::*;
pub use projection::*;
pub use rng::*;
pub use seams::*;
pub use stack::*;

use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::aws::dynamo::{decode, DynamoEvidenceStore, Item};
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::AwsClients;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::model::{Observation, QuarantineEntry, ReplayRecord};
use feedsafe::lambda::sqs::handle_sqs_batch;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{Clock, Faults, NoFaults, SystemClock};
use local_stack::resources::{create_resources, CreateOptions, LocalResources};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use template_spec::{read_template, template_path};

pub const TENANT: &str = "acme";
pub const ACCOUNT: &str = "ACC-1";

/// Endpoints of the running local engines.
pub fn engine_endpoints() -> (String, String) {
    let dynamodb = std::env::var("FEEDSAFE_DYNAMODB_ENDPOINT");
    let moto = std::env::var("FEEDSAFE_MOTO_ENDPOINT");
    match (dynamodb, moto) {
        (Ok(d), Ok(m)) => (d, m),
        _ => panic!(
            "the local engines are not running: use `scripts/test`, or `infra/engines.sh start` \
             and `eval \"$(infra/engines.sh env)\"` before `cargo test`"
        ),
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "t{:x}{}{}",
        (nanos / 1000) % 0xffff_ffff,
        std::process::id() % 1000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

pub struct TestEnv {
    pub clients: AwsClients,
    pub resources: LocalResources,
    pub store: Arc<DynamoEvidenceStore>,
    pub artifacts: Arc<S3ArtifactStore>,
    pub table: String,
    pub bucket: String,
}

/// Fresh resources from the template; `ttl: false` keeps expired records present.
/// Each test gets a DynamoDB Local database of its own (a unique access key): DynamoDB Local
/// keeps one SQLite database per access key, which slows down as it fills and takes a lock per
/// write, so tests sharing one would slow each other down.
pub async fn spawn_env(ttl: bool) -> TestEnv {
    spawn_heavy_env(ttl, "t").await
}

/// Like `spawn_env`, in a DynamoDB Local database of its own (`database`: letters and digits),
/// for tests that write thousands of items: DynamoDB Local slows down as one database fills.
pub async fn spawn_heavy_env(ttl: bool, database: &str) -> TestEnv {
    let (dynamodb, moto) = engine_endpoints();
    // A fresh database each time, even when the same engine serves several test runs.
    let database: String = format!("{database}{}", unique_prefix())
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    // S3's 409 for racing conditional puts, which moto does not give.
    let clients = local_stack::conditional_puts::with_s3_conditional_puts(
        AwsClients::local_database(&dynamodb, &moto, &database),
    );
    env_on(clients, ttl).await
}

async fn env_on(clients: AwsClients, ttl: bool) -> TestEnv {
    let spec = read_template(&template_path()).expect("template.yaml parses");
    let resources = create_resources(
        &clients,
        &spec,
        &CreateOptions {
            prefix: unique_prefix(),
            ttl,
        },
    )
    .await
    .expect("resources are created from template.yaml");
    let table = resources
        .table("EvidenceTable")
        .expect("evidence table")
        .to_owned();
    let bucket = resources
        .bucket("RawBucket")
        .expect("raw bucket")
        .to_owned();
    TestEnv {
        store: Arc::new(DynamoEvidenceStore::new(clients.dynamodb.clone(), &table)),
        artifacts: Arc::new(S3ArtifactStore::new(clients.s3.clone(), &bucket)),
        clients,
        resources,
        table,
        bucket,
    }
}

impl TestEnv {
    pub fn service(&self) -> IngestService {
        self.service_with(Arc::new(SystemClock), Arc::new(NoFaults))
    }

    pub fn service_with(&self, clock: Arc<dyn Clock>, faults: Arc<dyn Faults>) -> IngestService {
        IngestService::new(
            self.store.clone(),
            self.artifacts.clone(),
            self.store.clone(),
            clock,
            faults,
        )
    }

    pub async fn seed(&self, config: &ConnectorConfig) {
        self.store
            .put_connector(config)
            .await
            .expect("connector stored");
    }

    /// Deletes this env's tables, so that a long run of envs on one engine (the model test's
    /// histories) does not leave DynamoDB Local holding and sweeping hundreds of tables, which
    /// slows every later test on it. A table that cannot be deleted is reported, not hidden.
    pub async fn delete_tables(&self) {
        for table in self.resources.tables.values() {
            if let Err(e) = self
                .clients
                .dynamodb
                .delete_table()
                .table_name(table)
                .send()
                .await
            {
                eprintln!("could not delete test table {table}: {e}");
            }
        }
    }

    /// Every item of the evidence table (test-only Scan).
    pub async fn items(&self) -> Vec<Item> {
        self.table_items(&self.table).await
    }

    async fn of_kind<T: serde::de::DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        self.items()
            .await
            .into_iter()
            .filter(|i| i.get("entity") == Some(&AttributeValue::S(kind.into())))
            .map(|i| decode(i).expect("decodes"))
            .collect()
    }

    pub async fn observations(&self) -> Vec<Observation> {
        self.of_kind("observation").await
    }

    pub async fn observations_of(&self, delivery_key: &str) -> Vec<Observation> {
        let mut found: Vec<Observation> = self
            .observations()
            .await
            .into_iter()
            .filter(|o| o.delivery_key == delivery_key)
            .collect();
        found.sort_by_key(|o| o.row_index);
        found
    }

    pub async fn replay_records(&self) -> Vec<ReplayRecord> {
        self.of_kind("replay").await
    }

    pub async fn quarantine(&self) -> Vec<QuarantineEntry> {
        self.of_kind("quarantine").await
    }

    pub async fn replay(&self, delivery_key: &str) -> Option<ReplayRecord> {
        self.store
            .replay_record(delivery_key)
            .await
            .expect("read replay record")
    }

    /// Every version of every object under `prefix` in the raw bucket.
    pub async fn object_versions(&self, prefix: &str) -> Vec<String> {
        let out = self
            .clients
            .s3
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .expect("list versions");
        out.versions()
            .iter()
            .map(|v| {
                format!(
                    "{}@{}",
                    v.key().unwrap_or_default(),
                    v.version_id().unwrap_or_default()
                )
            })
            .collect()
    }

    pub async fn read_object(&self, key: &str) -> Vec<u8> {
        self.artifacts.read(key).await.expect("object readable")
    }

    pub async fn send(&self, queue_logical_id: &str, body: &[u8]) {
        let queue = self.resources.queue(queue_logical_id).expect("queue");
        self.clients
            .sqs
            .send_message()
            .queue_url(&queue.url)
            .message_body(String::from_utf8_lossy(body))
            .send()
            .await
            .expect("send message");
    }

    /// Receives up to one batch and runs it through the Lambda handler as the SQS event source
    /// would: acknowledged messages are deleted, failed ones come back after `visibility` seconds.
    pub async fn pump_once(
        &self,
        queue_logical_id: &str,
        service: &IngestService,
        visibility: i32,
    ) -> (usize, usize) {
        let queue = self.resources.queue(queue_logical_id).expect("queue");
        let received = self
            .clients
            .sqs
            .receive_message()
            .queue_url(&queue.url)
            .max_number_of_messages(10)
            .visibility_timeout(visibility)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        let messages = received.messages.unwrap_or_default();
        let event = local_stack::events::sqs_event(&messages);
        let response = handle_sqs_batch(service, event)
            .await
            .expect("batch handled");
        let failed: Vec<String> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        for m in &messages {
            if !failed.contains(&m.message_id.clone().unwrap_or_default()) {
                self.clients
                    .sqs
                    .delete_message()
                    .queue_url(&queue.url)
                    .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete");
            }
        }
        (messages.len(), failed.len())
    }

    pub async fn queue_depth(&self, queue_logical_id: &str) -> (i64, i64) {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let queue = self.resources.queue(queue_logical_id).expect("queue");
        let attrs = self
            .clients
            .sqs
            .get_queue_attributes()
            .queue_url(&queue.url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("queue attributes")
            .attributes
            .unwrap_or_default();
        let get = |a: A| attrs.get(&a).and_then(|v| v.parse().ok()).unwrap_or(0);
        (
            get(A::ApproximateNumberOfMessages),
            get(A::ApproximateNumberOfMessagesNotVisible),
        )
    }
}

impl TestEnv {
    /// Drops `body` as the supplier's file `file` of `connector` (`drops/{connector}/{file}`),
    /// as a supplier's upload does; the version the bucket gave it.
    pub async fn drop_file(&self, connector: &str, file: &str, body: Vec<u8>) -> String {
        self.clients
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(format!("drops/{connector}/{file}"))
            .body(body.into())
            .send()
            .await
            .expect("the supplier's upload")
            .version_id
            .expect("a versioned bucket")
    }

    pub async fn service_ingest(&self, service: &IngestService, envelope: &[u8]) {
        let outcome = service
            .ingest_message(envelope)
            .await
            .expect("ingest settles");
        assert!(outcome.result().is_some(), "{outcome:?}");
    }
}

impl TestEnv {
    /// The identity-corrections service over this test's tables, reading history through
    /// `reads` (e.g. a lagging index) and stopping where `faults` says.
    pub fn corrections_with(
        &self,
        reads: Arc<dyn feedsafe::protocols::projection::EvidenceReads>,
        faults: Arc<dyn Faults>,
    ) -> feedsafe::protocols::identity_corrections::CorrectionService {
        feedsafe::protocols::identity_corrections::CorrectionService::new(
            reads,
            self.store.clone(),
            self.store.clone(),
            Arc::new(SystemClock),
            faults,
        )
    }

    pub fn corrections(&self) -> feedsafe::protocols::identity_corrections::CorrectionService {
        self.corrections_with(self.store.clone(), Arc::new(NoFaults))
    }
}
