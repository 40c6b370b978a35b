//! Drops Lambda: S3 `ObjectCreated` under `drops/{connector}/` -> one delivery envelope per file
//! on the ingest queue, named by the file name and the sha256 of that object version, which it
//! reads (`feedsafe::lambda::s3::handle_s3_event`).

use aws_lambda_events::event::s3::S3Event;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::aws::AwsClients;
use feedsafe::intake::drops::DropService;
use feedsafe::lambda::config::{required, EVIDENCE_TABLE, RAW_BUCKET, S3_FORCE_PATH_STYLE};
use feedsafe::lambda::s3::handle_s3_event;
use feedsafe::lambda::{init_tracing, CachedConnectors};
use feedsafe::protocols::ports::SystemClock;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
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
    let service = DropService::new(
        Arc::new(CachedConnectors::new(store, Duration::from_secs(30))),
        Arc::new(SqsDeliveryQueue::new(clients.sqs.clone(), queue_url)),
        Arc::new(S3ArtifactStore::new(clients.s3.clone(), raw_bucket)),
        Arc::new(SystemClock),
    );
    let service = &service;
    run(service_fn(move |event: LambdaEvent<S3Event>| async move {
        handle_s3_event(service, event.payload)
            .await
            .map_err(Error::from)
    }))
    .await
}
