//! EventBridge schedules -> the poller function (one connector's pull run) and the sweeper
//! function (runs past their deadline, identity corrections due to settle).

use crate::domain::ids::ConnectorId;
use crate::protocols::ports::StoreError;
use tracing::info;

/// Why the poller function's invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum PullScheduleError {
    #[error(r#"the event must be {{"connector": "<connector id>"}}"#)]
    NoConnector,
    #[error(transparent)]
    InvalidConnector(#[from] crate::domain::ids::IdError),
    #[error(transparent)]
    Pull(#[from] crate::intake::poller::PullError),
}

/// A pull schedule's input: `{"connector": "acme-eu"}` (other keys are ignored).
#[derive(Debug, serde::Deserialize)]
struct PullScheduleInput {
    connector: String,
}

/// The connector an EventBridge schedule names: its input is `{"connector": "acme-eu"}`.
pub fn scheduled_connector(event: &serde_json::Value) -> Result<ConnectorId, PullScheduleError> {
    // Only an object names a connector (serde would also read a struct from an array).
    if !event.is_object() {
        return Err(PullScheduleError::NoConnector);
    }
    let input = <PullScheduleInput as serde::Deserialize>::deserialize(event)
        .map_err(|_| PullScheduleError::NoConnector)?;
    Ok(ConnectorId::parse(&input.connector)?)
}

/// The poller function: pulls the scheduled connector's current export and enqueues every page.
/// An unknown or non-pull connector, an unreadable first page or an unavailable run ledger fail
/// the invocation.
pub async fn handle_pull_schedule(
    service: &crate::intake::poller::PullService,
    event: &serde_json::Value,
) -> Result<crate::intake::poller::PullReport, PullScheduleError> {
    let connector = scheduled_connector(event)?;
    let report = service.run_connector(&connector).await?;
    info!(
        connector = %connector,
        run_id = %report.run_id,
        export_id = %report.export_id,
        enqueued = report.enqueued.len(),
        compared = report.compared.len(),
        failed = report.failed.len(),
        "pull finished"
    );
    Ok(report)
}

/// Whether the poller function's event is the dispatcher's schedule (`{"dispatch": true}`)
/// rather than one connector's pull.
pub fn is_dispatch(event: &serde_json::Value) -> bool {
    event.get("dispatch") == Some(&serde_json::Value::Bool(true))
}

/// The dispatcher's tick: every pull connector whose own schedule is due is launched
/// asynchronously. A launch that failed fails the invocation (after launching the others), so
/// that it is retried and then parked like every asynchronous invocation; its connector is
/// launched again on the next tick meanwhile.
pub async fn handle_dispatch_schedule(
    dispatcher: &crate::intake::poller::dispatch::PullDispatcher,
) -> Result<crate::intake::poller::dispatch::DispatchReport, anyhow::Error> {
    let report = dispatcher.dispatch().await?;
    info!(launched = ?report.launched, failed = ?report.failed, "pull dispatch");
    if !report.failed.is_empty() {
        anyhow::bail!("scheduled pulls not launched: {}", report.failed.join(", "));
    }
    Ok(report)
}

/// Why the sweeper function's invocation failed (a store failure fails it, so that it is
/// visible and retried).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Corrections(#[from] crate::protocols::identity_corrections::CorrectionError),
}

/// What one sweep settled.
#[derive(Debug)]
pub struct SweepReport {
    /// The runs past their deadline at `now`, as the sweep left them.
    pub runs: Vec<crate::domain::model::Run>,
    /// Identity corrections whose settling was due and is now done.
    pub corrections: usize,
    /// Every registered connector's health at the sweep, as its metrics publish it.
    pub sources: Vec<crate::lambda::source_metrics::SourceMetric>,
}

/// The sweeper function (its scheduled event's payload is ignored): settles the runs past their
/// deadline at `now`, completes the identity corrections whose settling is due, then publishes
/// every connector's health (`lambda::source_metrics`).
pub async fn handle_sweep_schedule(
    store: &crate::aws::dynamo::DynamoEvidenceStore,
    corrections: &crate::protocols::identity_corrections::CorrectionService,
    now: crate::domain::timestamp::Timestamp,
) -> Result<SweepReport, SweepError> {
    let runs = store.sweep_runs(now).await?;
    let corrections = corrections.settle_due().await?;
    let sources = crate::lambda::source_metrics::source_metrics(store, now).await?;
    crate::lambda::source_metrics::emit(&sources);
    info!(
        runs = runs.len(),
        corrections = corrections,
        overdue_sources = sources.iter().filter(|s| s.overdue).count(),
        "sweep finished"
    );
    Ok(SweepReport {
        runs,
        corrections,
        sources,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_poller_schedule_names_its_connector() {
        use super::{scheduled_connector, PullScheduleError};
        let named = scheduled_connector(&serde_json::json!({"connector": "acme-eu"}));
        assert_eq!(named.expect("a connector").as_str(), "acme-eu");
        for event in [
            serde_json::json!({}),
            serde_json::json!({"connector": 7}),
            serde_json::json!("acme-eu"),
            serde_json::json!(["acme-eu"]),
            serde_json::json!({"connector": null}),
        ] {
            let refused = scheduled_connector(&event).expect_err("no connector named");
            assert!(matches!(refused, PullScheduleError::NoConnector), "{event}");
            assert_eq!(
                refused.to_string(),
                r#"the event must be {"connector": "<connector id>"}"#
            );
        }
        assert!(matches!(
            scheduled_connector(&serde_json::json!({"connector": "Not A Connector"})),
            Err(PullScheduleError::InvalidConnector(_))
        ));
    }
}
