//! EventBridge, locally: the pull schedule and the sweeper's, invoked asynchronously as Lambda
//! invokes them (`async_invoke`).

use crate::{async_invoke, Services};
use feedsafe::domain::ids::ConnectorId;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

/// `POST /v1/connectors/{id}/runs`, locally: the pull is handed to the scheduler, which invokes
/// the poller's entry point asynchronously as it does for a schedule (retries, then parked).
/// Accepted launches still waiting at a graceful stop are run before the scheduler ends; a
/// killed host loses them (Lambda's event queue would not): start the run again.
pub(crate) struct LocalPullLauncher(pub(crate) mpsc::UnboundedSender<ConnectorId>);

#[async_trait::async_trait]
impl feedsafe::intake::poller::PullLauncher for LocalPullLauncher {
    async fn launch(&self, connector: &ConnectorId) -> Result<(), anyhow::Error> {
        self.0
            .send(connector.clone())
            .map_err(|_| anyhow::anyhow!("the local function host is stopping"))
    }
}

/// EventBridge, locally: the pull schedule (the poller's entry point with each connector's
/// schedule input) and the sweeper's (a scheduled event), each invoked asynchronously as Lambda
/// does: a failed invocation is retried (`EventInvokeConfig`), then parked in the on-failure queue.
pub(crate) async fn scheduler(
    services: Services,
    sqs: aws_sdk_sqs::Client,
    [poller, sweeper]: [async_invoke::AsyncInvoke; 2],
    (pull_every, sweep_every): (Option<Duration>, Duration),
    launches: std::sync::Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<ConnectorId>>>,
    stopped: watch::Receiver<bool>,
) {
    // Held for the task's life; a run that panics drops it and its next run takes it again.
    let mut launches = launches.lock().await;
    let mut last_pull = tokio::time::Instant::now();
    let mut last_sweep = tokio::time::Instant::now();
    let corrections = feedsafe::protocols::identity_corrections::CorrectionService::new(
        services.evidence.clone(),
        services.evidence.clone(),
        services.evidence.clone(),
        std::sync::Arc::new(SystemClock),
        std::sync::Arc::new(NoFaults),
    );
    while !*stopped.borrow() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            Some(connector) = launches.recv() => {
                pull_async(&sqs, &poller, &services, connector, &stopped).await;
            }
        }
        if let Some(every) = pull_every {
            if last_pull.elapsed() >= every {
                last_pull = tokio::time::Instant::now();
                let mut due = pull_connectors(&services).await;
                due.extend(dispatched(&services).await);
                for connector in due {
                    pull_async(&sqs, &poller, &services, connector, &stopped).await;
                }
            }
        }
        if last_sweep.elapsed() >= sweep_every {
            last_sweep = tokio::time::Instant::now();
            let event = scheduled_event("SweeperFunction");
            invoke_async(&sqs, &sweeper, event, &stopped, |_| {
                let (evidence, corrections) = (services.evidence.clone(), corrections.clone());
                async move {
                    feedsafe::lambda::schedule::handle_sweep_schedule(
                        &evidence,
                        &corrections,
                        feedsafe::domain::timestamp::Timestamp::now(),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                }
            })
            .await;
        }
    }
    // Launches accepted before the stop still run: their callers were answered 202.
    launches.close();
    while let Ok(connector) = launches.try_recv() {
        pull_async(&sqs, &poller, &services, connector, &stopped).await;
    }
}

/// The poller's entry point with the schedule's input for `connector`, invoked asynchronously.
async fn pull_async(
    sqs: &aws_sdk_sqs::Client,
    poller: &async_invoke::AsyncInvoke,
    services: &Services,
    connector: ConnectorId,
    stopped: &watch::Receiver<bool>,
) {
    let event = serde_json::json!({"connector": connector.as_str()});
    invoke_async(sqs, poller, event, stopped, |event| {
        let services = services.clone();
        async move {
            feedsafe::lambda::schedule::handle_pull_schedule(&services.pull, &event)
                .await
                .map(
                    |report| info!(run = %report.run_id, pages = report.enqueued.len(), "pull run"),
                )
                .map_err(|e| e.to_string())
        }
    })
    .await;
}

/// EventBridge's scheduled event, as the rule delivers it.
fn scheduled_event(function: &str) -> serde_json::Value {
    let now = feedsafe::domain::timestamp::Timestamp::now();
    serde_json::json!({
        "version": "0",
        "id": format!("local-{}", now.unix_seconds()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": now.to_rfc3339(),
        "region": feedsafe::aws::LOCAL_REGION,
        "resources": [format!("arn:aws:events:{}:000000000000:rule/local-{function}", feedsafe::aws::LOCAL_REGION)],
        "detail": {}
    })
}

/// One asynchronous invocation: the first attempt and `max_retries` more (a second apart
/// locally; Lambda waits about a minute, then two), then the event is parked.
async fn invoke_async<F, Fut>(
    sqs: &aws_sdk_sqs::Client,
    invoke: &async_invoke::AsyncInvoke,
    event: serde_json::Value,
    stopped: &watch::Receiver<bool>,
    handler: F,
) where
    F: Fn(serde_json::Value) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), String>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let error = match handler(event.clone()).await {
            Ok(()) => return,
            Err(error) => error,
        };
        warn!(function = %invoke.function, attempt, error = %error, "asynchronous invocation failed");
        if attempt >= invoke.max_attempts() {
            if !invoke.park(sqs, event, attempt, &error).await {
                error!(function = %invoke.function, "a failed schedule could not be parked; its next tick invokes the function again");
            }
            return;
        }
        if *stopped.borrow() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Connectors seeded with pull settings (the local stack knows its seed file).
/// The connectors the dispatcher finds due (their definitions' own schedules), as the poller
/// function's `{"dispatch": true}` tick finds them; each is then pulled as a launch is.
async fn dispatched(services: &Services) -> Vec<feedsafe::domain::ids::ConnectorId> {
    let collected = std::sync::Arc::new(Collect::default());
    let dispatcher = feedsafe::intake::poller::dispatch::PullDispatcher::new(
        services.evidence.clone(),
        collected.clone(),
        std::sync::Arc::new(SystemClock),
    );
    if let Err(e) = dispatcher.dispatch().await {
        tracing::warn!(error = %e, "pull dispatch failed; the next tick tries again");
    }
    let due = collected
        .0
        .lock()
        .map(|ids| ids.clone())
        .unwrap_or_default();
    due
}

/// A launcher that only collects what it is asked to launch.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<feedsafe::domain::ids::ConnectorId>>);

#[async_trait::async_trait]
impl feedsafe::intake::poller::PullLauncher for Collect {
    async fn launch(
        &self,
        connector: &feedsafe::domain::ids::ConnectorId,
    ) -> Result<(), anyhow::Error> {
        if let Ok(mut ids) = self.0.lock() {
            ids.push(connector.clone());
        }
        Ok(())
    }
}

/// The stack's own pull schedule (the template's `PullConnector`).
async fn pull_connectors(services: &Services) -> Vec<feedsafe::domain::ids::ConnectorId> {
    let mut out = Vec::new();
    for id in ["acme-eu"] {
        if let Ok(id) = feedsafe::domain::ids::ConnectorId::parse(id) {
            if let Ok(Some(config)) = feedsafe::protocols::ports::ConnectorDirectory::connector(
                services.evidence.as_ref(),
                &id,
            )
            .await
            {
                if config.pull.is_some() {
                    out.push(id);
                }
            }
        }
    }
    out
}
