//! Ingest Lambda: SQS batch -> `feedsafe::lambda::sqs::handle_sqs_batch`.

use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::AwsClients;
use feedsafe::lambda::config::IngestConfig;
use feedsafe::lambda::sqs::handle_sqs_batch_by;
use feedsafe::lambda::{init_tracing, CachedConnectors};
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let config = IngestConfig::from_env()?;
    let clients = AwsClients::from_env(config.s3_force_path_style).await;
    let store = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        &config.evidence_table,
    ));
    let service = IngestService::new(
        store.clone(),
        Arc::new(S3ArtifactStore::new(clients.s3.clone(), &config.raw_bucket)),
        Arc::new(CachedConnectors::new(store, config.connector_cache)),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let service = &service;
    run(service_fn(
        move |event: LambdaEvent<aws_lambda_events::event::sqs::SqsEvent>| async move {
            let deadline = feedsafe::lambda::sqs::deadline_at(event.context.deadline);
            handle_sqs_batch_by(service, event.payload, Some(deadline))
                .await
                .map_err(Error::from)
        },
    ))
    .await
}
