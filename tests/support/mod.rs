//! Test harness: every test gets its own tables, queues and bucket on the shared local engines
//! (started by `scripts/test` or `infra/engines.sh start`), created from `template.yaml`.

#[path = "../model/mod.rs"]
pub mod model;
pub mod scale;

use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::aws::dynamo::{decode, DynamoEvidenceStore, Item};
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::AwsClients;
use feedsafe::domain::connector::{
    ConnectorConfig, IdentityRule, PayloadFormat, Publication, DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_BODY_BYTES,
};
use feedsafe::domain::envelope::{DeliveryEnvelope, RunPage};
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use feedsafe::domain::model::{Observation, QuarantineEntry, ReplayRecord};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::lambda::sqs::handle_sqs_batch;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{Clock, CrashPoint, Faults, NoFaults, SystemClock};
use local_stack::resources::{create_resources, CreateOptions, LocalResources};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    env_on(AwsClients::local_database(&dynamodb, &moto, &database), ttl).await
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

/// Fires at `point` the first time only, as a process dying there once would.
pub struct CrashOnce {
    point: CrashPoint,
    fired: AtomicBool,
}

impl CrashOnce {
    pub fn at(point: CrashPoint) -> Arc<Self> {
        Arc::new(Self {
            point,
            fired: AtomicBool::new(false),
        })
    }
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Faults for CrashOnce {
    fn crash_at(&self, point: CrashPoint) -> bool {
        point == self.point && !self.fired.swap(true, Ordering::SeqCst)
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

/// The pull connector of the essay: `acme-eu`, export pages, json-v1.
pub fn acme_eu() -> ConnectorConfig {
    ConnectorConfig {
        connector: ConnectorId::parse("acme-eu").unwrap(),
        tenant: TenantId::parse(TENANT).unwrap(),
        source_account: SourceAccount::parse(ACCOUNT).unwrap(),
        payload_format: PayloadFormat::AcmeExportV1,
        identity_rule: IdentityRule::ExportPage,
        canonicalization: CanonicalizationRule::JsonV1,
        horizon_days: DEFAULT_HORIZON_DAYS,
        publication: Publication::PerPage,
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        clock_skew_seconds: feedsafe::domain::connector::DEFAULT_CLOCK_SKEW_SECONDS,
        pull: None,
    }
}

pub fn offer(sku: &str, quantity: i64, price: &str, observed_at: &str) -> Value {
    json!({"sku": sku, "quantity": quantity, "unit": "each", "price": price, "currency": "EUR", "observed_at": observed_at})
}

pub fn export_page(export_id: &str, page: u32, page_count: u32, offers: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"export_id": export_id, "page": page, "page_count": page_count, "offers": offers}),
    )
    .unwrap()
}

pub fn delivery_key(config: &ConnectorConfig, source_delivery_id: &str) -> DeliveryKey {
    DeliveryKey::new(
        config.tenant.clone(),
        config.connector.clone(),
        config.source_account.clone(),
        SourceDeliveryId::parse(source_delivery_id).unwrap(),
        IdentityStrength::Source,
    )
}

/// The envelope the poller would enqueue for page `page` of `export_id`.
pub fn page_envelope(
    config: &ConnectorConfig,
    export_id: &str,
    page: u32,
    page_count: u32,
    body: &[u8],
) -> Vec<u8> {
    let key = delivery_key(config, &format!("{export_id}/{page}"));
    let run = RunPage {
        run_id: feedsafe::intake::poller::run_id_for(&config.connector, export_id),
        page,
        page_count: Some(page_count),
    };
    DeliveryEnvelope::inline(
        &key,
        "export_page",
        Timestamp::now(),
        "application/json",
        Some(run),
        body,
    )
    .to_json()
    .into_bytes()
}

/// An envelope without run information, for a delivery named `source_delivery_id`.
pub fn plain_envelope(config: &ConnectorConfig, source_delivery_id: &str, body: &[u8]) -> Vec<u8> {
    let key = delivery_key(config, source_delivery_id);
    DeliveryEnvelope::inline(
        &key,
        "export_page",
        Timestamp::now(),
        "application/json",
        None,
        body,
    )
    .to_json()
    .into_bytes()
}

/// Counts AWS operations by `Service.Operation` (each SDK operation once, its retries not counted).
#[derive(Debug, Default, Clone)]
pub struct RequestCounter(Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>);

impl RequestCounter {
    pub fn take(&self) -> std::collections::BTreeMap<String, usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_serialization(
        &self,
        _context: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(meta) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>() {
            let name = format!("{}.{}", meta.service(), meta.name());
            *self.0.lock().unwrap().entry(name).or_default() += 1;
        }
        Ok(())
    }
}

impl TestEnv {
    /// An ingest service whose DynamoDB and S3 clients report every operation to `counter`.
    pub fn counted_service(&self, counter: &RequestCounter) -> IngestService {
        let AwsClients { dynamodb, s3, .. } = intercepted(&self.clients, counter.clone());
        let store = Arc::new(DynamoEvidenceStore::new(dynamodb, &self.table));
        IngestService::new(
            store.clone(),
            Arc::new(S3ArtifactStore::new(s3, &self.bucket)),
            store,
            Arc::new(SystemClock),
            Arc::new(NoFaults),
        )
    }
}

impl TestEnv {
    pub fn projection_table(&self) -> String {
        self.resources
            .table("ProjectionTable")
            .expect("projection table")
            .to_owned()
    }

    pub fn projection_store(&self) -> Arc<feedsafe::aws::projection_table::DynamoProjectionStore> {
        Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            self.clients.dynamodb.clone(),
            self.projection_table(),
        ))
    }

    pub fn projector(&self) -> feedsafe::protocols::projection::Projector {
        self.projector_into(self.projection_store())
    }

    pub fn projector_into(
        &self,
        projection: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
    ) -> feedsafe::protocols::projection::Projector {
        feedsafe::protocols::projection::Projector::new(
            self.store.clone(),
            projection,
            self.store.clone(),
        )
    }

    pub fn query(&self) -> feedsafe::protocols::query::QueryService {
        feedsafe::protocols::query::QueryService::new(self.store.clone(), self.projection_store())
    }

    pub async fn stream(&self) -> local_stack::events::StreamReader {
        let (dynamodb, _) = engine_endpoints();
        local_stack::events::StreamReader::open(&self.clients, &dynamodb, &self.table)
            .await
            .expect("evidence stream")
    }

    /// Reads the stream until it is quiet and applies every record in batches of 100, as the
    /// event source would.
    pub async fn drain(
        &self,
        stream: &mut local_stack::events::StreamReader,
        projector: &feedsafe::protocols::projection::Projector,
    ) -> Vec<local_stack::events::StreamRecordImages> {
        let mut all = Vec::new();
        let mut quiet = 0;
        while quiet < 2 {
            let records = stream.poll().await.expect("poll stream");
            if records.is_empty() {
                quiet += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            quiet = 0;
            for batch in records.chunks(100) {
                let changes: Vec<_> = batch
                    .iter()
                    .map(|(name, old, new, _)| {
                        feedsafe::aws::stream_records::classify(name, old.clone(), new.clone())
                            .expect("classify")
                    })
                    .collect();
                projector
                    .apply_batch(&changes)
                    .await
                    .expect("projection applies");
            }
            all.extend(records);
        }
        all
    }

    pub fn reader(&self) -> feedsafe::protocols::query::Principal {
        feedsafe::protocols::query::Principal {
            tenant: TenantId::parse(TENANT).unwrap(),
            scopes: vec!["offers:read".into()],
            subject: None,
        }
    }

    pub async fn table_items(&self, table: &str) -> Vec<Item> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .clients
                .dynamodb
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return items;
            }
        }
    }
}

/// A connector like `acme_eu` for another supplier or policy.
pub fn connector(id: &str, account: &str, publication: Publication) -> ConnectorConfig {
    ConnectorConfig {
        connector: ConnectorId::parse(id).unwrap(),
        source_account: SourceAccount::parse(account).unwrap(),
        publication,
        ..acme_eu()
    }
}

impl TestEnv {
    pub async fn service_ingest(&self, service: &IngestService, envelope: &[u8]) {
        let outcome = service
            .ingest_message(envelope)
            .await
            .expect("ingest settles");
        assert!(outcome.result().is_some(), "{outcome:?}");
    }
}

/// The local stack on free ports over this test's resources, with the sample connectors seeded
/// and a 1-second visibility timeout so that redelivery takes seconds.
pub async fn spawn_stack(
    env: &TestEnv,
    tokens_file: Option<std::path::PathBuf>,
) -> local_stack::Stack {
    spawn_stack_with(env, |options| {
        if let Some(file) = tokens_file {
            options.tokens_file = file;
        }
    })
    .await
}

/// `spawn_stack` with the options changed by `adjust` first.
pub async fn spawn_stack_with(
    env: &TestEnv,
    adjust: impl FnOnce(&mut local_stack::StackOptions),
) -> local_stack::Stack {
    let (dynamodb, _) = engine_endpoints();
    let mut options = local_stack::StackOptions {
        port: 0,
        supplier_port: 0,
        pull_every: None,
        sweep_every: std::time::Duration::from_secs(3600),
        visibility_override: Some(1),
        ..local_stack::StackOptions::default()
    };
    adjust(&mut options);
    let stack = local_stack::start_stack(
        env.clients.clone(),
        &dynamodb,
        env.resources.clone(),
        options,
    )
    .await
    .expect("stack starts");
    for connector in local_stack::sample_connectors(&stack.supplier).unwrap() {
        env.seed(&connector).await;
    }
    stack
}

/// An evidence store that answers the first staged-chunk advance with `Contended` without
/// writing it, as a transaction conflict with another worker would: the caller backs off and
/// probes again. A test seam through the `EvidenceStore` port; everything else is the real store.
pub struct ContendedAdvanceOnce {
    pub inner: Arc<DynamoEvidenceStore>,
    fired: AtomicBool,
}

impl ContendedAdvanceOnce {
    pub fn new(inner: Arc<DynamoEvidenceStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fired: AtomicBool::new(false),
        })
    }
}

#[async_trait::async_trait]
impl feedsafe::protocols::ports::EvidenceStore for ContendedAdvanceOnce {
    async fn record_attempt(
        &self,
        delivery_key: &str,
        expected: &feedsafe::domain::fingerprint::Fingerprint,
        count: bool,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::AttemptProbe, feedsafe::protocols::ports::StoreError>
    {
        self.inner
            .record_attempt(delivery_key, expected, count, now)
            .await
    }

    async fn write_chunk(
        &self,
        chunk: &feedsafe::protocols::ports::ChunkWrite,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::ChunkOutcome, feedsafe::protocols::ports::StoreError>
    {
        if matches!(
            chunk.replay,
            feedsafe::protocols::ports::ReplayAction::Advance { .. }
        ) && !self.fired.swap(true, Ordering::SeqCst)
        {
            return Ok(feedsafe::protocols::ports::ChunkOutcome::Contended);
        }
        self.inner.write_chunk(chunk, now).await
    }

    async fn observation_exists(
        &self,
        id: &feedsafe::domain::ids::ObservationId,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        self.inner.observation_exists(id).await
    }

    async fn put_quarantine(
        &self,
        entry: &QuarantineEntry,
    ) -> Result<(), feedsafe::protocols::ports::StoreError> {
        self.inner.put_quarantine(entry).await
    }

    async fn correction_rules(
        &self,
        source: &feedsafe::domain::model::SourceRef,
    ) -> Result<feedsafe::domain::model::CorrectionRules, feedsafe::protocols::ports::StoreError>
    {
        feedsafe::protocols::ports::EvidenceStore::correction_rules(self.inner.as_ref(), source)
            .await
    }
}

/// A clock the test sets: frozen at an instant until moved.
pub struct SettableClock(std::sync::Mutex<Timestamp>);

impl SettableClock {
    pub fn at(at: Timestamp) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(at)))
    }
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap() = at;
    }
}

impl Clock for SettableClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

/// A small seeded generator for test interleavings (xorshift64*); the seed is printed by the
/// tests that use it so that any failure can be replayed exactly.
pub struct TestRng(u64);

impl TestRng {
    pub fn seeded(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// A seed from `FEEDSAFE_SEED`, else from the clock.
pub fn test_seed() -> u64 {
    std::env::var("FEEDSAFE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// The observation id in a projection basis (`{observed_at}#{observation_id}`).
fn basis_observation(basis: &str) -> String {
    basis.rsplit('#').next().unwrap_or_default().to_owned()
}

/// Every removal and replacement of a projection row, for tests that must prove a row was
/// never dropped or rolled back. Wraps the real projection table.
pub struct RecordingProjection {
    pub inner: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
    /// (item, removed observation id)
    pub removed: std::sync::Mutex<Vec<(String, String)>>,
    /// (item, previous observation id, new observation id)
    pub replaced: std::sync::Mutex<Vec<(String, String, String)>>,
}

impl RecordingProjection {
    pub fn new(inner: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            removed: Default::default(),
            replaced: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl feedsafe::protocols::projection::ProjectionStore for RecordingProjection {
    async fn current(
        &self,
        key: &feedsafe::protocols::projection::ProjectionKey,
    ) -> Result<
        Option<feedsafe::protocols::projection::ProjectedOffer>,
        feedsafe::protocols::ports::StoreError,
    > {
        self.inner.current(key).await
    }

    async fn replace(
        &self,
        offer: &feedsafe::protocols::projection::ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        let done = self.inner.replace(offer, expected).await?;
        if let (true, Some(before)) = (done, expected) {
            self.replaced.lock().unwrap().push((
                offer.observation.item.clone(),
                basis_observation(before),
                offer.observation.observation_id.to_string(),
            ));
        }
        Ok(done)
    }

    async fn remove(
        &self,
        key: &feedsafe::protocols::projection::ProjectionKey,
        expected: &str,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        let done = self.inner.remove(key, expected).await?;
        if done {
            self.removed
                .lock()
                .unwrap()
                .push((key.item.clone(), basis_observation(expected)));
        }
        Ok(done)
    }

    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<
        Vec<feedsafe::protocols::projection::ProjectedOffer>,
        feedsafe::protocols::ports::StoreError,
    > {
        self.inner.offers(tenant, item).await
    }

    async fn items_of_source(
        &self,
        source: &feedsafe::domain::model::SourceRef,
    ) -> Result<Vec<String>, feedsafe::protocols::ports::StoreError> {
        self.inner.items_of_source(source).await
    }
}

impl TestEnv {
    /// Reads the stream until it is quiet and returns every record without applying any.
    pub async fn collect(
        &self,
        stream: &mut local_stack::events::StreamReader,
    ) -> Vec<local_stack::events::StreamRecordImages> {
        let mut all = Vec::new();
        let mut quiet = 0;
        while quiet < 2 {
            let records = stream.poll().await.expect("poll stream");
            if records.is_empty() {
                quiet += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            quiet = 0;
            all.extend(records);
        }
        all
    }

    /// Another, empty projection table shaped like the template's (for side-by-side projections).
    pub async fn extra_projection_table(
        &self,
    ) -> Arc<feedsafe::aws::projection_table::DynamoProjectionStore> {
        let mut spec = read_template(&template_path()).expect("template.yaml parses");
        spec.tables.retain(|t| t.logical_id == "ProjectionTable");
        spec.queues.clear();
        spec.buckets.clear();
        let created = create_resources(
            &self.clients,
            &spec,
            &CreateOptions {
                prefix: unique_prefix(),
                ttl: false,
            },
        )
        .await
        .expect("projection table created");
        Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            self.clients.dynamodb.clone(),
            created.table("ProjectionTable").expect("table"),
        ))
    }
}

/// What every `TransactWriteItems` call through a client carried and how it ended: the item
/// keys of each call, the number of attempts sent (SDK retries included) and the error codes
/// (cancellation reasons included). For structural proofs such as "no key is shared by the
/// transactions of two pages".
#[derive(Debug, Default, Clone)]
pub struct TransactionLog(Arc<std::sync::Mutex<TransactionLogInner>>);

#[derive(Debug, Default)]
pub struct TransactionLogInner {
    /// One entry per call: the `pk|sk` of every item it names.
    pub transactions: Vec<Vec<String>>,
    /// Attempts sent on the wire (a call retried by the SDK counts more than once).
    pub attempts: usize,
    /// Error codes of failed attempts, with `TransactionCanceled:{reason}` per cancellation reason.
    pub errors: Vec<String>,
}

impl TransactionLog {
    pub fn snapshot(&self) -> (Vec<Vec<String>>, usize, Vec<String>) {
        let inner = self.0.lock().unwrap();
        (
            inner.transactions.clone(),
            inner.attempts,
            inner.errors.clone(),
        )
    }

    /// A DynamoDB client like `client` that reports to this log.
    pub fn client(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            client
                .config()
                .to_builder()
                .interceptor(self.clone())
                .build(),
        )
    }
}

fn key_text(key: &std::collections::HashMap<String, AttributeValue>) -> String {
    let part = |name: &str| {
        key.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    format!("{}|{}", part("pk"), part("sk"))
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for TransactionLog {
    fn name(&self) -> &'static str {
        "TransactionLog"
    }

    fn read_before_serialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
        if let Some(input) = context.input().downcast_ref::<TransactWriteItemsInput>() {
            let keys = input
                .transact_items()
                .iter()
                .map(|action| {
                    if let Some(put) = action.put() {
                        key_text(put.item())
                    } else if let Some(update) = action.update() {
                        key_text(update.key())
                    } else if let Some(check) = action.condition_check() {
                        key_text(check.key())
                    } else if let Some(delete) = action.delete() {
                        key_text(delete.key())
                    } else {
                        String::new()
                    }
                })
                .collect();
            self.0.lock().unwrap().transactions.push(keys);
        }
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(meta) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>() {
            if meta.name() == "TransactWriteItems" {
                self.0.lock().unwrap().attempts += 1;
            }
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::error::ProvideErrorMetadata;
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
        if let Err(error) = context.output_or_error() {
            let Some(error) = error
                .as_operation_error()
                .and_then(|e| e.downcast_ref::<TransactWriteItemsError>())
            else {
                return Ok(());
            };
            let mut inner = self.0.lock().unwrap();
            inner
                .errors
                .push(error.code().unwrap_or("unknown").to_owned());
            if let TransactWriteItemsError::TransactionCanceledException(cancelled) = error {
                for reason in cancelled.cancellation_reasons() {
                    if let Some(code) = reason.code() {
                        if code != "None" {
                            inner.errors.push(format!("TransactionCanceled:{code}"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Polls `probe` every 200 ms until it holds; panics naming `what` after 60 seconds.
pub async fn wait_until<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) {
        if probe().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("timed out waiting for {what}");
}

/// (status, JSON body) of a request with a bearer token, run off the async runtime.
pub async fn call(
    method: &'static str,
    url: String,
    token: Option<&str>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = if method == "GET" || method == "DELETE" {
            let mut request = if method == "GET" {
                agent.get(&url)
            } else {
                agent.delete(&url)
            };
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
            }
            request.call()
        } else {
            let mut request = agent.post(&url).header("content-type", "application/json");
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
            }
            let bytes = if body.is_null() {
                Vec::new()
            } else {
                body.to_string().into_bytes()
            };
            request.send(&bytes[..])
        }
        .expect("request sent");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    })
    .await
    .unwrap()
}

/// (status, bytes) of an unauthenticated GET (a presigned link).
pub async fn get_bytes(url: String) -> (u16, Vec<u8>) {
    let (status, _, bytes) = get_with_headers(url, Vec::new()).await;
    (status, bytes)
}

/// (status, response headers with lower-cased names, bytes) of a GET with `headers`.
pub async fn get_with_headers(
    url: String,
    headers: Vec<(String, String)>,
) -> (u16, std::collections::BTreeMap<String, String>, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut request = agent.get(&url);
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let mut response = request.call().expect("request sent");
        let status = response.status().as_u16();
        let names = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let bytes = response.body_mut().read_to_vec().unwrap_or_default();
        (status, names, bytes)
    })
    .await
    .unwrap()
}

impl TestEnv {
    /// The identity-corrections service over this test's tables, reading history through
    /// `reads` (e.g. a lagging index) and stopping where `faults` says.
    pub fn corrections_with(
        &self,
        reads: Arc<dyn feedsafe::protocols::projection::EvidenceReads>,
        faults: Arc<dyn Faults>,
    ) -> feedsafe::protocols::corrections::CorrectionService {
        feedsafe::protocols::corrections::CorrectionService::new(
            reads,
            self.store.clone(),
            self.store.clone(),
            Arc::new(SystemClock),
            faults,
        )
    }

    pub fn corrections(&self) -> feedsafe::protocols::corrections::CorrectionService {
        self.corrections_with(self.store.clone(), Arc::new(NoFaults))
    }
}

pub use local_stack::faults::FaultInjector;

/// `clients` with `interceptor` on the DynamoDB and S3 clients (SQS unchanged).
pub fn intercepted(
    clients: &AwsClients,
    interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
) -> AwsClients {
    AwsClients {
        dynamodb: aws_sdk_dynamodb::Client::from_conf(
            clients
                .dynamodb
                .config()
                .to_builder()
                .interceptor(interceptor.clone())
                .build(),
        ),
        s3: aws_sdk_s3::Client::from_conf(
            clients
                .s3
                .config()
                .to_builder()
                .interceptor(interceptor)
                .build(),
        ),
        sqs: clients.sqs.clone(),
        local_access_key: clients.local_access_key.clone(),
    }
}

/// The local stack on `clients` (e.g. wrapped by a `FaultInjector`), its connectors seeded;
/// a received message not acknowledged within `visibility` seconds is received again.
pub async fn spawn_stack_on(
    env: &TestEnv,
    clients: AwsClients,
    visibility: i32,
) -> local_stack::Stack {
    let (dynamodb, _) = engine_endpoints();
    let defaults = local_stack::StackOptions::default();
    let options = local_stack::StackOptions {
        port: 0,
        supplier_port: 0,
        pull_every: None,
        sweep_every: std::time::Duration::from_secs(3600),
        visibility_override: Some(visibility),
        ..defaults
    };
    let stack = local_stack::start_stack(clients, &dynamodb, env.resources.clone(), options)
        .await
        .expect("stack starts");
    for connector in local_stack::sample_connectors(&stack.supplier).unwrap() {
        env.seed(&connector).await;
    }
    stack
}
