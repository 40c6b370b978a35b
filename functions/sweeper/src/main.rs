//! Sweeper Lambda: on an EventBridge schedule, settles runs past their deadline
//! (`DynamoEvidenceStore::sweep_runs`) and completes identity corrections whose settling is due
//! (`CorrectionService::settle_due`: a sweep after the item-history index has caught up), through
//! `feedsafe::lambda::schedule::handle_sweep_schedule`. The scheduled event's payload is ignored.

use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::AwsClients;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::lambda::init_tracing;
use feedsafe::lambda::schedule::handle_sweep_schedule;
use feedsafe::protocols::identity_corrections::CorrectionService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let evidence_table = feedsafe::lambda::config::required("EVIDENCE_TABLE")?;
    let clients = AwsClients::from_env(false).await;
    let store = Arc::new(DynamoEvidenceStore::new(
        clients.dynamodb.clone(),
        evidence_table,
    ));
    let corrections = CorrectionService::new(
        store.clone(),
        store.clone(),
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let (store, corrections) = (&store, &corrections);
    run(service_fn(
        move |_event: LambdaEvent<serde_json::Value>| async move {
            handle_sweep_schedule(store, corrections, Timestamp::now()).await?;
            Ok::<_, Error>(())
        },
    ))
    .await
}
