//! Every sample event in `events/` through its function's own entry point, with the services
//! wired as the function's `main` wires them, on the local engines (DynamoDB Local, and moto
//! for S3, SQS and Secrets Manager). The test reads the folder: a sample without a case here, or
//! a case without its sample, fails it.

mod evidence;
mod sources;
mod world;

use acceptance::*;
use aws_lambda_events::event::apigw::ApiGatewayV2httpResponse;
use evidence::{ingest_sqs, ops_http, projector_stream, query_http};
use feedsafe::domain::timestamp::Timestamp;
use serde_json::Value;
use sources::{drops_s3, poller_schedule, sweeper_schedule, webhook_http};
use std::path::PathBuf;
use std::sync::Arc;
use world::World;

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
        "samples in events/ without a case in tests/acceptance/entry_points/: {unknown:?}"
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
