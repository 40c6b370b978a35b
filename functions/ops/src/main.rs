//! Ops Lambda: HTTP API (payload 2.0, ops JWT authorizer, scope `ops:write`) ->
//! `feedsafe::lambda::apigw::handle_apigw_ops`. Delivery status, runs, quarantine review and
//! resolution, identity corrections, source quarantines, pull runs and presigned raw-artifact
//! links; and the operator console (`GET /console`, static, no authorizer) with its connectors
//! and item-timeline views, which read the projection.
//!
//! Environment: `EVIDENCE_TABLE`, `PROJECTION_TABLE` (read only), `RAW_BUCKET`, `INGEST_QUEUE_URL` (accepted quarantined payloads
//! are enqueued there), `POLLER_FUNCTION` (a pull run is started by invoking it asynchronously),
//! optional `S3_FORCE_PATH_STYLE`.

mod launcher;

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use feedsafe::aws::claims::S3ClaimStore;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::aws::AwsClients;
use feedsafe::intake::poller::{HttpExportSource, PullService};
use feedsafe::lambda::apigw::handle_apigw_ops;
use feedsafe::lambda::config::{required, EVIDENCE_TABLE, RAW_BUCKET, S3_FORCE_PATH_STYLE};
use feedsafe::lambda::{init_tracing, CachedConnectors};
use feedsafe::ops::{OpsService, PullStarter, RawArchive};
use feedsafe::protocols::ports::SystemClock;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = required(EVIDENCE_TABLE)?;
    let projection_table = required("PROJECTION_TABLE")?;
    let raw_bucket = required(RAW_BUCKET)?;
    let queue_url = required("INGEST_QUEUE_URL")?;
    let poller = required("POLLER_FUNCTION")?;
    let path_style = matches!(
        std::env::var(S3_FORCE_PATH_STYLE).ok().as_deref(),
        Some("true" | "1")
    );
    let clients = AwsClients::from_env(path_style).await;
    let evidence = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        evidence_table,
    ));
    let queue = Arc::new(SqsDeliveryQueue::new(clients.sqs.clone(), queue_url));
    let clock = Arc::new(SystemClock);
    let pull = PullService::new(
        // Operators change connectors without a deploy: a short cache only.
        Arc::new(CachedConnectors::new(
            evidence.clone(),
            Duration::from_secs(5),
        )),
        evidence.clone(),
        Arc::new(HttpExportSource::new()),
        queue.clone(),
        Arc::new(S3ClaimStore::new(clients.s3.clone(), &raw_bucket)),
        clock.clone(),
    )
    // Naming an `export_page` run of a defined pull reads its page 1 with its credential.
    .with_defined_pulls(
        Arc::new(HttpExportSource::new()),
        Arc::new(feedsafe::aws::pull_credentials::SecretsManagerPullCredentials::from_env().await),
    );
    let service = OpsService::new(
        evidence,
        RawArchive::new(Arc::new(feedsafe::aws::s3::S3ArtifactStore::new(
            clients.s3.clone(),
            raw_bucket,
        ))),
        queue,
        Some(PullStarter {
            service: Arc::new(pull),
            launcher: Arc::new(launcher::PollerInvoker::from_env(poller).await),
        }),
        clock,
    )
    .with_read_model(Arc::new(DynamoProjectionStore::new(
        clients.dynamodb.clone(),
        projection_table,
    )));
    let service = &service;
    run(service_fn(
        move |event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
            Ok::<_, Error>(handle_apigw_ops(service, event.payload).await)
        },
    ))
    .await
}
