//! Webhook Lambda: HTTP API (payload 2.0) `POST /v1/webhooks/{connector}` ->
//! `feedsafe::lambda::apigw::handle_apigw_webhook`. Verifies the Standard Webhooks signature
//! against the connector's secrets in Secrets Manager and puts the delivery envelope on the
//! ingest queue.

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use feedsafe::aws::claims::S3ClaimStore;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::secrets::SecretsManagerSecrets;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::aws::AwsClients;
use feedsafe::intake::webhook::WebhookService;
use feedsafe::lambda::apigw::handle_apigw_webhook;
use feedsafe::lambda::{init_tracing, CachedConnectors};
use feedsafe::protocols::ports::SystemClock;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = feedsafe::lambda::config::required("EVIDENCE_TABLE")?;
    let ingest_queue_url = feedsafe::lambda::config::required("INGEST_QUEUE_URL")?;
    let raw_bucket = feedsafe::lambda::config::required("RAW_BUCKET")?;
    let secret_prefix = feedsafe::lambda::config::required("SIGNING_SECRET_PREFIX")?;
    let clients = AwsClients::from_env(false).await;
    let evidence = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        evidence_table,
    ));
    let connectors = CachedConnectors::new(evidence.clone(), Duration::from_secs(30))
        .with_negative_ttl(feedsafe::lambda::NEGATIVE_CACHE_TTL);
    let service = WebhookService::new(
        Arc::new(connectors),
        Arc::new(SecretsManagerSecrets::from_env(secret_prefix).await),
        evidence,
        Arc::new(SqsDeliveryQueue::new(clients.sqs.clone(), ingest_queue_url)),
        Arc::new(S3ClaimStore::new(clients.s3.clone(), raw_bucket)),
        Arc::new(SystemClock),
    );
    let service = &service;
    run(service_fn(
        move |event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
            Ok::<_, Error>(handle_apigw_webhook(service, event.payload).await)
        },
    ))
    .await
}
