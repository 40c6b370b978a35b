//! Poller Lambda: on an EventBridge schedule with payload `{"connector": "acme-eu"}`, pulls the
//! connector's current export (`feedsafe::lambda::schedule::handle_pull_schedule`) and enqueues
//! every page on the ingest queue. Returns the `PullReport`; an unknown or non-pull connector, an
//! unreadable first page or an unavailable run ledger fails the invocation.
//!
//! On the dispatcher's schedule (`{"dispatch": true}`, every minute) it launches, by invoking
//! itself asynchronously with `{"connector": id}`, every connector whose own pull schedule is
//! due (`feedsafe::intake::poller::dispatch`).

#[path = "../../ops/src/launcher.rs"]
mod launcher;

use feedsafe::aws::claims::S3ClaimStore;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::pull_credentials::SecretsManagerPullCredentials;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::aws::AwsClients;
use feedsafe::intake::poller::dispatch::PullDispatcher;
use feedsafe::intake::poller::{HttpExportSource, PullService};
use feedsafe::lambda::config::{required, EVIDENCE_TABLE, RAW_BUCKET, S3_FORCE_PATH_STYLE};
use feedsafe::lambda::schedule::{handle_dispatch_schedule, handle_pull_schedule, is_dispatch};
use feedsafe::lambda::{init_tracing, CachedConnectors};
use feedsafe::protocols::ports::SystemClock;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = required(EVIDENCE_TABLE)?;
    let queue_url = required("INGEST_QUEUE_URL")?;
    let raw_bucket = required(RAW_BUCKET)?;
    let path_style = matches!(
        std::env::var(S3_FORCE_PATH_STYLE).ok().as_deref(),
        Some("true" | "1")
    );
    let clients = AwsClients::from_env(path_style).await;
    let store = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        evidence_table,
    ));
    // The function's own name, from the Lambda runtime: the dispatcher invokes this function.
    let own_name = required("AWS_LAMBDA_FUNCTION_NAME")?;
    let dispatcher = PullDispatcher::new(
        store.clone(),
        Arc::new(launcher::PollerInvoker::from_env(own_name).await),
        Arc::new(SystemClock),
    );
    let service = PullService::new(
        Arc::new(CachedConnectors::new(
            store.clone(),
            Duration::from_secs(30),
        )),
        store,
        Arc::new(HttpExportSource::new()),
        Arc::new(SqsDeliveryQueue::new(clients.sqs.clone(), queue_url)),
        Arc::new(S3ClaimStore::new(clients.s3.clone(), raw_bucket)),
        Arc::new(SystemClock),
    )
    // A defined pull's pages go through the same guarded client; its credential is read from
    // Secrets Manager by the definition's `secret_ref` (cached briefly, so rotation needs no
    // deploy).
    .with_defined_pulls(
        Arc::new(HttpExportSource::new()),
        Arc::new(SecretsManagerPullCredentials::from_env().await),
    );
    let (service, dispatcher) = (&service, &dispatcher);
    run(service_fn(move |event: LambdaEvent<Value>| async move {
        if is_dispatch(&event.payload) {
            let report = handle_dispatch_schedule(dispatcher).await?;
            return Ok::<_, Error>(serde_json::to_value(&report)?);
        }
        let report = handle_pull_schedule(service, &event.payload).await?;
        Ok::<_, Error>(serde_json::to_value(&report)?)
    }))
    .await
}
