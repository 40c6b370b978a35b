//! Query Lambda: HTTP API (payload 2.0, JWT authorizer) ->
//! `feedsafe::lambda::apigw::handle_apigw_read`. Read-only: the function's role allows only
//! DynamoDB reads.

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::AwsClients;
use feedsafe::lambda::apigw::handle_apigw_read;
use feedsafe::lambda::init_tracing;
use feedsafe::protocols::query::QueryService;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = feedsafe::lambda::config::required("EVIDENCE_TABLE")?;
    let projection_table = feedsafe::lambda::config::required("PROJECTION_TABLE")?;
    let clients = AwsClients::from_env(false).await;
    let service = QueryService::new(
        Arc::new(DynamoEvidenceStore::new(
            clients.dynamodb.clone(),
            evidence_table,
        )),
        Arc::new(DynamoProjectionStore::new(
            clients.dynamodb.clone(),
            projection_table,
        )),
    );
    let service = &service;
    run(service_fn(
        move |event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
            Ok::<_, Error>(handle_apigw_read(service, event.payload).await)
        },
    ))
    .await
}
