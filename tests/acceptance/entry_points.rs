//! Every sample event in `events/` through its function's own entry point, with the services
//! wired as the function's `main` wires them, on the local engines (DynamoDB Local, and moto
//! for S3, SQS and Secrets Manager). The test reads the folder: a sample without a case here, or
//! a case without its sample, fails it.

use acceptance::*;
use aws_lambda_events::event::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::secrets::SecretsManagerSecrets;
use feedsafe::aws::sqs::{S3ClaimStore, SqsDeliveryQueue};
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::envelope::DeliveryEnvelope;
use feedsafe::domain::ids::{ConnectorId, RunId};
use feedsafe::domain::model::{ReplayState, Run, RunStatus};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::intake::poller::{HttpExportSource, PullService};
use feedsafe::intake::webhook::WebhookService;
use feedsafe::lambda::apigw::handle_apigw_ops;
use feedsafe::lambda::apigw::handle_apigw_read;
use feedsafe::lambda::apigw::handle_apigw_webhook;
use feedsafe::lambda::schedule::{handle_pull_schedule, handle_sweep_schedule};
use feedsafe::lambda::sqs::handle_sqs_batch;
use feedsafe::lambda::stream::handle_stream_batch;
use feedsafe::lambda::CachedConnectors;
use feedsafe::ops::{OpsService, RawArchive};
use feedsafe::protocols::corrections::CorrectionService;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{Clock, NoFaults, SystemClock};
use feedsafe::protocols::projection::{ProjectionStore, Projector};
use feedsafe::protocols::query::{observation_json, QueryService};
use local_stack::fake_supplier::{FakeSupplier, FakeSupplierHandle};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One case per file in `events/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    IngestSqs,
    ProjectorStream,
    QueryHttp,
    OpsHttp,
    WebhookHttp,
    DropsS3,
    PollerSchedule,
    SweeperSchedule,
}

const CASES: [(&str, Case); 8] = [
    ("ingest-sqs.json", Case::IngestSqs),
    ("projector-stream.json", Case::ProjectorStream),
    ("query-http.json", Case::QueryHttp),
    ("ops-http.json", Case::OpsHttp),
    ("webhook-http.json", Case::WebhookHttp),
    ("drops-s3.json", Case::DropsS3),
    ("poller-schedule.json", Case::PollerSchedule),
    ("sweeper-schedule.json", Case::SweeperSchedule),
];

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("events")
}

fn sample(file: &str) -> Value {
    let path = events_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?} is not JSON: {e}"))
}

fn parse<T: serde::de::DeserializeOwned>(file: &str, event: Value) -> T {
    serde_json::from_value(event).unwrap_or_else(|e| {
        panic!(
            "{file} is not a {}: {e}",
            std::any::type_name::<T>().rsplit("::").next().unwrap()
        )
    })
}

// The values the samples name (tenant, connectors, delivery, run, observation).
const DELIVERY_KEY: &str = "demo/acme-eu/ACC-1/EXP-8821/2";
const RUN_ID: &str = "run-acme-eu.EXP-8821";
const ITEM: &str = "AX-440-R2~each~new";
const OBSERVATION_ID: &str = "obs_stioybn25xilfvzntqx5h72uwi";
/// `ApproximateFirstReceiveTimestamp` of the ingest sample, `webhook-timestamp` of the webhook.
const RECEIVED_AT: i64 = 1_795_939_205;
/// The file the drops sample announces (its `size` and `eTag` are this file's).
const DROPPED_CSV: &[u8] = b"sku,quantity,unit,price,currency,observed_at\nAX-440-R2,6,each,820.00,EUR,2026-11-29T08:00:00Z\nBX-120,14,each,35.50,EUR,2026-11-29T08:00:00Z\n";

#[tokio::test(flavor = "multi_thread")]
async fn every_sample_event_runs_through_its_functions_entry_point() {
    let mut files: Vec<String> = std::fs::read_dir(events_dir())
        .expect("events/ is readable")
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .into_string()
                .expect("a UTF-8 file name")
        })
        .collect();
    files.sort();
    let case_of = |file: &str| CASES.iter().find(|(name, _)| *name == file).map(|c| c.1);
    let unknown: Vec<&String> = files.iter().filter(|f| case_of(f).is_none()).collect();
    assert!(
        unknown.is_empty(),
        "samples in events/ without a case in tests/acceptance/entry_points.rs: {unknown:?}"
    );
    let missing: Vec<&str> = CASES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !files.iter().any(|f| f == name))
        .collect();
    assert!(
        missing.is_empty(),
        "cases whose sample is missing from events/: {missing:?}"
    );

    // Each case on resources of its own, all at once.
    let runs: Vec<_> = files
        .iter()
        .map(|file| {
            let (file, case) = (file.clone(), case_of(file).unwrap());
            (
                file.clone(),
                tokio::spawn(async move { run_case(case, &file, sample(&file)).await }),
            )
        })
        .collect();
    let mut failed = Vec::new();
    for (file, run) in runs {
        if let Err(e) = run.await {
            let why = match e.try_into_panic() {
                Ok(panic) => panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into()),
                Err(e) => e.to_string(),
            };
            failed.push(format!("{file}: {why}"));
        }
    }
    assert!(failed.is_empty(), "failed samples:\n{}", failed.join("\n"));
}

async fn run_case(case: Case, file: &str, event: Value) {
    let world = World::new().await;
    match case {
        Case::IngestSqs => ingest_sqs(&world, file, event).await,
        Case::ProjectorStream => projector_stream(&world, file, event).await,
        Case::QueryHttp => query_http(&world, file, event).await,
        Case::OpsHttp => ops_http(&world, file, event).await,
        Case::WebhookHttp => webhook_http(&world, file, event).await,
        Case::DropsS3 => drops_s3(&world, file, event).await,
        Case::PollerSchedule => poller_schedule(&world, file, event).await,
        Case::SweeperSchedule => sweeper_schedule(&world, file, event).await,
    }
}

/// One test's resources, the sample connectors (`infra/local/connectors.json`, tenant `demo`)
/// seeded, and the services built as each function's `main` builds them.
struct World {
    env: TestEnv,
    supplier: FakeSupplierHandle,
    store: Arc<DynamoEvidenceStore>,
    queue: Arc<SqsDeliveryQueue>,
}

impl World {
    async fn new() -> Self {
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

    fn connectors(&self, ttl: Duration) -> Arc<CachedConnectors> {
        Arc::new(CachedConnectors::new(self.store.clone(), ttl))
    }

    fn claims(&self) -> Arc<S3ClaimStore> {
        Arc::new(S3ClaimStore::new(
            self.env.clients.s3.clone(),
            &self.env.bucket,
        ))
    }

    /// functions/ingest
    fn ingest(&self, clock: Arc<dyn Clock>) -> IngestService {
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

    fn projection(&self) -> Arc<DynamoProjectionStore> {
        Arc::new(DynamoProjectionStore::new(
            self.env.clients.dynamodb.clone(),
            self.env.projection_table(),
        ))
    }

    /// functions/projector
    fn projector(&self) -> Projector {
        Projector::new(self.store.clone(), self.projection(), self.store.clone())
    }

    /// functions/query
    fn query(&self) -> QueryService {
        QueryService::new(self.store.clone(), self.projection())
    }

    /// functions/poller (and the pull service of functions/ops, with a shorter cache)
    fn pull(&self, cache: Duration) -> PullService {
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
    fn ops(&self) -> OpsService {
        OpsService::new(
            self.store.clone(),
            RawArchive::new(self.env.clients.s3.clone(), &self.env.bucket),
            self.queue.clone(),
            Some(feedsafe::ops::PullStarter {
                service: Arc::new(self.pull(Duration::from_secs(5))),
                launcher: Arc::new(InvokesPoller(Arc::new(self.pull(Duration::from_secs(30))))),
            }),
            Arc::new(SystemClock),
        )
    }

    /// functions/webhook, its signing secrets in (moto's) Secrets Manager under `prefix`.
    fn webhook(&self, prefix: &str, clock: Arc<dyn Clock>) -> WebhookService {
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
    fn drops(&self) -> feedsafe::intake::drops::DropService {
        feedsafe::intake::drops::DropService::new(
            self.connectors(Duration::from_secs(30)),
            self.queue.clone(),
            Arc::new(SystemClock),
        )
    }

    /// functions/sweeper
    fn corrections(&self) -> CorrectionService {
        CorrectionService::new(
            self.store.clone(),
            self.store.clone(),
            self.store.clone(),
            Arc::new(SystemClock),
            Arc::new(NoFaults),
        )
    }

    /// A Secrets Manager client on moto, with the test's HTTP client, credentials and region.
    fn secrets_client(&self) -> aws_sdk_secretsmanager::Client {
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

    fn connector(&self, id: &str) -> ConnectorConfig {
        local_stack::sample_connectors(&self.supplier)
            .unwrap()
            .into_iter()
            .find(|c| c.connector.as_str() == id)
            .unwrap_or_else(|| panic!("no sample connector {id}"))
    }

    /// Waits for `count` messages on the ingest queue (left in flight for 60 s).
    async fn receive(&self, count: usize) -> Vec<aws_sdk_sqs::types::Message> {
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
    async fn ingest_messages(&self, messages: &[aws_sdk_sqs::types::Message]) {
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
    async fn ingest_sample_delivery(&self) {
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
    async fn observations_json(&self, key: &str) -> Vec<Value> {
        self.env
            .observations_of(key)
            .await
            .iter()
            .map(|o| Value::Object(observation_json(o)))
            .collect()
    }
}

/// A clock standing at the moment the samples were received (2026-11-29T08:00:05Z).
fn received_clock() -> Arc<SettableClock> {
    SettableClock::at(Timestamp::from_unix_seconds(RECEIVED_AT).unwrap())
}

fn body_json(file: &str, response: &ApiGatewayV2httpResponse) -> Value {
    let Some(aws_lambda_events::encodings::Body::Text(text)) = &response.body else {
        panic!("{file}: a text body, got {:?}", response.body);
    };
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{file}: a JSON body ({e}): {text}"))
}

/// The observation the ingest sample carries (and the projector sample's `NewImage` shows).
fn sample_observation(observation: &Value) {
    assert_eq!(
        observation["observation_id"], OBSERVATION_ID,
        "{observation}"
    );
    assert_eq!(observation["item"], ITEM);
    assert_eq!(observation["connector"], "acme-eu");
    assert_eq!(observation["source_account"], "ACC-1");
    assert_eq!(observation["delivery_key"], DELIVERY_KEY);
    assert_eq!(observation["quantity"], 6);
    assert_eq!(observation["price"], "820.00");
    assert_eq!(observation["currency"], "EUR");
    assert_eq!(observation["observed_at"], "2026-11-29T08:00:00Z");
    assert_eq!(observation["retrieved_at"], "2026-11-29T08:00:05Z");
    assert_eq!(observation["run_id"], RUN_ID);
    assert_eq!(observation["future_dated"], false);
}

// --- The cases -------------------------------------------------------------------------------

/// ingest-sqs: a poller's envelope for page 2 of export EXP-8821 is stored once, committed.
async fn ingest_sqs(world: &World, file: &str, event: Value) {
    let event: aws_lambda_events::event::sqs::SqsEvent = parse(file, event);
    let service = world.ingest(received_clock());
    let response = handle_sqs_batch(&service, event.clone())
        .await
        .expect("batch handled");
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let record = world.env.replay(DELIVERY_KEY).await.expect("replay record");
    assert_eq!(record.state, ReplayState::Committed);
    assert_eq!(record.attempts, 1);
    assert!(
        world.env.quarantine().await.is_empty(),
        "nothing refused or quarantined"
    );
    let observations = world.observations_json(DELIVERY_KEY).await;
    assert_eq!(observations.len(), 1, "{observations:?}");
    sample_observation(&observations[0]);
    // The raw artifact is the payload the envelope carries.
    let artifact = world.env.read_object(&record.artifact_key).await;
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&artifact),
        record.payload_sha256
    );
    // The same message again (SQS delivers at least once) is a replay: nothing new is stored.
    let again = handle_sqs_batch(&service, event).await.expect("handled");
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(world.env.replay(DELIVERY_KEY).await.unwrap().attempts, 2);
    assert_eq!(world.env.observations().await.len(), 1);
}

/// projector-stream: the stream record of the ingest sample's observation projects it.
async fn projector_stream(world: &World, file: &str, event: Value) {
    world.ingest_sample_delivery().await;
    let event: aws_lambda_events::event::dynamodb::Event = parse(file, event);
    // The sample's image is the item ingest wrote, attribute for attribute.
    let new_image = event.records[0].change.new_image.clone();
    let stored = world
        .env
        .items()
        .await
        .into_iter()
        .find(|item| {
            item.get("pk")
                == Some(&aws_sdk_dynamodb::types::AttributeValue::S(format!(
                    "OBS#{OBSERVATION_ID}"
                )))
        })
        .expect("the sample's observation is stored");
    let stored = serde_dynamo::Item::from(stored);
    let image: serde_json::Map<String, Value> =
        serde_json::from_value(serde_json::to_value(&new_image).unwrap()).unwrap();
    let written: serde_json::Map<String, Value> =
        serde_json::from_value(serde_json::to_value(&stored).unwrap()).unwrap();
    let differing: Vec<String> = image
        .keys()
        .chain(written.keys())
        .filter(|k| image.get(*k) != written.get(*k))
        .map(|k| {
            format!(
                "{k}: sample {:?}, stored {:?}",
                image.get(k),
                written.get(k)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "the sample's NewImage differs from the stored observation:\n{}",
        differing.join("\n")
    );

    let projector = world.projector();
    let response = handle_stream_batch(&projector, event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let rows = world
        .projection()
        .offers(
            &feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
            ITEM,
        )
        .await
        .expect("projection readable");
    assert_eq!(rows.len(), 1, "one current offer: {rows:?}");
    sample_observation(&Value::Object(observation_json(&rows[0].observation)));
}

/// query-http: a reader's `GET /v1/items/{item}/offers?max_age_seconds=3600`.
async fn query_http(world: &World, file: &str, event: Value) {
    let mut stream = world.env.stream().await;
    world.ingest_sample_delivery().await;
    world.env.drain(&mut stream, &world.projector()).await;
    let request: ApiGatewayV2httpRequest = parse(file, event);
    let response = handle_apigw_read(&world.query(), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 200, "{body}");
    assert_eq!(body["item"], ITEM);
    let offers = body["offers"].as_array().expect("offers");
    assert_eq!(offers.len(), 1, "{body}");
    sample_observation(&offers[0]);
    // Observed on 2026-11-29, read later: more than an hour old, and the read says what would
    // refresh it (it refreshes nothing itself).
    assert_eq!(offers[0]["freshness"]["stale"], true, "{body}");
    let gaps = body["freshness_gaps"].as_array().expect("freshness gaps");
    assert_eq!(gaps.len(), 1, "{body}");
    assert_eq!(gaps[0]["connector"], "acme-eu");
    assert_eq!(gaps[0]["max_age_seconds"], 3600);
    assert_eq!(
        world.env.queue_depth("IngestQueue").await,
        (0, 0),
        "reads never trigger ingestion"
    );
}

/// ops-http: an operator's `GET /v1/deliveries/{delivery_key+}`.
async fn ops_http(world: &World, file: &str, event: Value) {
    world.ingest_sample_delivery().await;
    let request: ApiGatewayV2httpRequest = parse(file, event);
    let response = handle_apigw_ops(&world.ops(), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 200, "{body}");
    assert_eq!(body["delivery_key"], DELIVERY_KEY, "{body}");
    assert_eq!(body["state"], "COMMITTED", "{body}");
    assert_eq!(body["attempts"], 1, "{body}");
    assert_eq!(
        body["run"],
        json!({"run_id": RUN_ID, "page": 2, "page_count": 3}),
        "{body}"
    );
    assert_eq!(body["quarantine"], json!([]), "{body}");
    let record = world.env.replay(DELIVERY_KEY).await.unwrap();
    assert_eq!(
        body["artifact"]["key"],
        record.artifact_key.as_str(),
        "{body}"
    );
    assert_eq!(
        body["artifact"]["sha256"],
        record.payload_sha256.as_str(),
        "{body}"
    );
}

/// webhook-http: acme-events' signed CloudEvent, verified against the secret in Secrets
/// Manager at the moment it was sent, then ingested.
async fn webhook_http(world: &World, file: &str, event: Value) {
    let prefix = format!("{}/webhook-signing/", world.env.table);
    world
        .secrets_client()
        .create_secret()
        .name(format!("{prefix}acme-events"))
        .secret_string(
            std::fs::read_to_string(local_stack::repo_root().join("infra/local/secrets.json"))
                .map(|text| {
                    serde_json::from_str::<Value>(&text).unwrap()["acme-events"].to_string()
                })
                .unwrap(),
        )
        .send()
        .await
        .expect("secret stored");
    let request: ApiGatewayV2httpRequest = parse(file, event);

    // Our clock, days after the signature: refused as stale, nothing enqueued.
    let late = handle_apigw_webhook(
        &world.webhook(&prefix, Arc::new(SystemClock)),
        request.clone(),
    )
    .await;
    let body = body_json(file, &late);
    assert_eq!(late.status_code, 401, "{body}");
    assert_eq!(body["error"]["code"], "stale_timestamp", "{body}");
    assert_eq!(world.env.queue_depth("IngestQueue").await, (0, 0));

    // At the sample's own moment: accepted under the CloudEvent's source and id.
    let response = handle_apigw_webhook(&world.webhook(&prefix, received_clock()), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 202, "{body}");
    let key = "demo/acme-events/ACME-EVT/urn:acme:events/evt-1042";
    assert_eq!(
        body,
        json!({"delivery_key": key, "status": "accepted"}),
        "{body}"
    );
    let messages = world.receive(1).await;
    world.ingest_messages(&messages).await;
    let observations = world.observations_json(key).await;
    assert_eq!(observations.len(), 1, "{observations:?}");
    assert_eq!(observations[0]["item"], ITEM);
    assert_eq!(observations[0]["price"], "820.00");
    assert_eq!(observations[0]["quantity"], 6);
}

/// drops-s3: a CSV file dropped under `drops/acme-files/` becomes one delivery, its body read
/// from that object version.
async fn drops_s3(world: &World, file: &str, mut event: Value) {
    let object = &event["Records"][0]["s3"]["object"];
    let key = object["key"].as_str().expect("object key").to_owned();
    assert_eq!(
        object["size"],
        DROPPED_CSV.len(),
        "the sample announces the file this test drops"
    );
    let put = world
        .env
        .clients
        .s3
        .put_object()
        .bucket(&world.env.bucket)
        .key(&key)
        .body(DROPPED_CSV.to_vec().into())
        .send()
        .await
        .expect("file dropped");
    assert_eq!(
        put.e_tag().map(|t| t.trim_matches('"')),
        object["eTag"].as_str(),
        "the sample's eTag is the file's"
    );
    // The bucket and the version id are the engine's, not the sample's.
    let version = put.version_id().expect("a versioned bucket").to_owned();
    let s3 = &mut event["Records"][0]["s3"];
    s3["bucket"]["name"] = json!(world.env.bucket);
    s3["bucket"]["arn"] = json!(format!("arn:aws:s3:::{}", world.env.bucket));
    s3["object"]["versionId"] = json!(version);

    let event: aws_lambda_events::event::s3::S3Event = parse(file, event);
    let keys = feedsafe::lambda::s3::handle_s3_event(&world.drops(), event)
        .await
        .expect("drop enqueued");
    let delivery_key = format!("demo/acme-files/ACC-FILES/offers-2026-11-29.csv@{version}");
    assert_eq!(keys, vec![delivery_key.clone()]);
    let messages = world.receive(1).await;
    world.ingest_messages(&messages).await;
    let record = world.env.replay(&delivery_key).await.expect("stored");
    assert_eq!(record.state, ReplayState::Committed);
    assert_eq!(
        record.payload_sha256,
        feedsafe::domain::hashing::sha256_hex(DROPPED_CSV)
    );
    let observations = world.observations_json(&delivery_key).await;
    let rows: Vec<(Value, Value, Value)> = observations
        .iter()
        .map(|o| (o["item"].clone(), o["quantity"].clone(), o["price"].clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (json!(ITEM), json!(6), json!("820.00")),
            (json!("BX-120~each~new"), json!(14), json!("35.50")),
        ]
    );
}

/// poller-schedule: the schedule names acme-eu; its current export's pages are enqueued, and
/// they are the envelopes the ingest sample shows.
async fn poller_schedule(world: &World, file: &str, event: Value) {
    let row = |sku: &str, quantity: u64| json!({"sku": sku, "quantity": quantity, "unit": "each", "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"});
    world.supplier.set_export(
        "acme-eu",
        "EXP-8821",
        vec![
            vec![row("AX-440", 2)],
            vec![row("AX-440-R2", 6)],
            vec![row("AX-441", 1)],
        ],
    );
    let report = handle_pull_schedule(&world.pull(Duration::from_secs(30)), &event)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(report.run_id.as_str(), RUN_ID);
    assert_eq!(report.export_id, "EXP-8821");
    assert_eq!(report.page_count, 3);
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    assert!(report.failed.is_empty(), "{:?}", report.failed);

    let messages = world.receive(3).await;
    let envelopes: Vec<DeliveryEnvelope> = messages
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap()).expect("an envelope"))
        .collect();
    let page_2 = envelopes
        .iter()
        .find(|e| e.delivery.id.as_str() == "EXP-8821/2")
        .expect("page 2 enqueued");
    // What the ingest sample's message carries, but for the moment and the body's bytes.
    let ingest_sample: aws_lambda_events::event::sqs::SqsEvent =
        parse("ingest-sqs.json", sample("ingest-sqs.json"));
    let mut shown: DeliveryEnvelope =
        serde_json::from_str(ingest_sample.records[0].body.as_deref().unwrap()).unwrap();
    shown.retrieved_at = page_2.retrieved_at;
    shown.body = page_2.body.clone();
    assert_eq!(
        &shown, page_2,
        "the ingest sample is an envelope the poller sends"
    );

    world.ingest_messages(&messages).await;
    for page in 1..=3 {
        let key = format!("demo/acme-eu/ACC-1/EXP-8821/{page}");
        let record = world.env.replay(&key).await.expect("page stored");
        assert_eq!(record.state, ReplayState::Committed, "{key}");
    }
    let run = world.store.run(RUN_ID).await.unwrap().expect("the run");
    assert_eq!(run.page_count, Some(3));
    // An event that names no connector fails the invocation.
    let refused = handle_pull_schedule(&world.pull(Duration::from_secs(30)), &json!({}))
        .await
        .expect_err("no connector");
    assert!(refused.to_string().contains("connector"), "{refused}");
}

/// sweeper-schedule: a run past its deadline with page 2 of 3 committed is settled INCOMPLETE,
/// naming the missing pages.
async fn sweeper_schedule(world: &World, file: &str, event: Value) {
    // An EventBridge schedule's event; the function ignores its payload.
    assert_eq!(event["detail-type"], "Scheduled Event", "{file}");
    assert_eq!(event["source"], "aws.events", "{file}");
    let acme = world.connector("acme-eu");
    // The poller started the run on 2026-11-29 with its 900-second deadline.
    let started = Timestamp::from_unix_seconds(RECEIVED_AT - 5).unwrap();
    world
        .store
        .start_run(&Run {
            run_id: RunId::parse(RUN_ID).unwrap(),
            tenant: acme.tenant.clone(),
            connector: ConnectorId::parse("acme-eu").unwrap(),
            status: None,
            credential_ref: acme.pull.as_ref().map(|p| p.credential_ref.clone()),
            started_at: Some(started),
            deadline: Some(started.unix_seconds() + 900),
            page_count: Some(3),
            pages_seen: 0,
            missing_pages: vec![],
            missing_count: 0,
            completed_at: None,
            updated_at: started,
        })
        .await
        .expect("run started");
    world.ingest_sample_delivery().await;

    let report = handle_sweep_schedule(&world.store, &world.corrections(), Timestamp::now())
        .await
        .expect("sweep");
    assert_eq!(report.runs.len(), 1, "{:?}", report.runs);
    assert_eq!(report.corrections, 0);
    let run = world.store.run(RUN_ID).await.unwrap().expect("the run");
    assert_eq!(run.status, Some(RunStatus::Incomplete), "{run:?}");
    assert_eq!(run.missing_pages, vec![1, 3]);
    assert_eq!(run.missing_count, 2);
    // A second sweep finds nothing more to do.
    let again = handle_sweep_schedule(&world.store, &world.corrections(), Timestamp::now())
        .await
        .expect("sweep");
    assert!(again.runs.is_empty(), "{:?}", again.runs);
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
