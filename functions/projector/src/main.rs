//! Projector Lambda: DynamoDB stream of the evidence table ->
//! `feedsafe::lambda::stream::handle_stream_batch`.

use aws_lambda_events::event::dynamodb::Event;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::aws::AwsClients;
use feedsafe::lambda::init_tracing;
use feedsafe::lambda::stream::handle_stream_batch;
use feedsafe::protocols::projection::Projector;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = feedsafe::lambda::config::required("EVIDENCE_TABLE")?;
    let projection_table = feedsafe::lambda::config::required("PROJECTION_TABLE")?;
    let clients = AwsClients::from_env(false).await;
    let evidence = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        evidence_table,
    ));
    let projector = Projector::new(
        evidence.clone(),
        Arc::new(DynamoProjectionStore::new(
            clients.dynamodb.clone(),
            projection_table,
        )),
        evidence,
    );
    let projector = &projector;
    run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, Error>(handle_stream_batch(projector, event.payload).await)
    }))
    .await
}
