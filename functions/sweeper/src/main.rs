//! Sweeper Lambda: on an EventBridge schedule, settles runs past their deadline
//! (`DynamoEvidenceStore::sweep_runs`). The scheduled event's payload is ignored.

use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::AwsClients;
use feedsafe::lambda::init_tracing;
use feedsafe::timestamp::Timestamp;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use tracing::info;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = feedsafe::config::required("EVIDENCE_TABLE")?;
    let clients = AwsClients::from_env(false).await;
    let store = DynamoEvidenceStore::new(clients.dynamodb.clone(), evidence_table);
    let store = &store;
    run(service_fn(
        move |_event: LambdaEvent<serde_json::Value>| async move {
            // A store failure fails the invocation so that it is visible (and retried).
            let changed = store.sweep_runs(Timestamp::now()).await?;
            info!(changed = changed.len(), "run sweep finished");
            Ok::<_, Error>(())
        },
    ))
    .await
}
