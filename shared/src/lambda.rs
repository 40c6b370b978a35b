//! Glue between Lambda event shapes and the services: the same functions run under
//! `lambda_runtime`, in the local stack and in tests.

use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::ConnectorId;
use crate::protocols::ingest::{IngestOutcome, IngestService};
use crate::protocols::ports::{ConnectorDirectory, StoreError};
use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{error, info, warn, Instrument};

/// JSON logs for CloudWatch (`RUST_LOG` filters; default `info`). Secrets are never logged.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Err only when a subscriber is already installed, which is fine.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .without_time()
        .with_target(false)
        .try_init();
}

#[derive(Debug, thiserror::Error)]
#[error("SQS message without a messageId cannot be reported as a partial batch failure")]
pub struct MissingMessageId;

/// Handles one SQS batch. Messages whose ingestion failed transiently are reported as batch item
/// failures so that only they are redelivered; every final outcome is acknowledged.
pub async fn handle_sqs_batch(
    service: &IngestService,
    event: SqsEvent,
) -> Result<SqsBatchResponse, MissingMessageId> {
    let mut response = SqsBatchResponse::default();
    let mut tally = OutcomeTally::default();
    for message in event.records {
        let message_id = message.message_id.clone().unwrap_or_default();
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .cloned()
            .unwrap_or_default();
        let span = tracing::info_span!("sqs_message", message_id = %message_id, receive_count = %receive_count);
        let body = message.body.unwrap_or_default();
        match service
            .ingest_message(body.as_bytes())
            .instrument(span.clone())
            .await
        {
            Ok(outcome) => {
                tally.add(&outcome);
                span.in_scope(|| log_outcome(&outcome))
            }
            Err(err) => {
                span.in_scope(
                    || warn!(error = %err, "ingest failed; the message will be redelivered"),
                );
                tally.transient += 1;
                if message_id.is_empty() {
                    tally.emit();
                    error!(
                        "transient failure on a message without messageId: failing the whole batch"
                    );
                    return Err(MissingMessageId);
                }
                response.add_failure(message_id);
            }
        }
    }
    tally.emit();
    Ok(response)
}

/// Per-batch counters, emitted as CloudWatch metrics (EMF) by the ingest function.
#[derive(Default)]
struct OutcomeTally {
    committed: u64,
    replays: u64,
    mismatches: u64,
    rejected: u64,
    observations: u64,
    transient: u64,
}

impl OutcomeTally {
    fn add(&mut self, outcome: &IngestOutcome) {
        match outcome {
            IngestOutcome::Committed(r) => {
                self.committed += 1;
                self.observations += r.observation_ids.len() as u64;
            }
            IngestOutcome::Replayed(_) => self.replays += 1,
            IngestOutcome::Mismatch(_) => self.mismatches += 1,
            IngestOutcome::Rejected(_) => self.rejected += 1,
        }
    }

    fn emit(&self) {
        let mut m = crate::metrics::BatchMetrics::default();
        m.count("Committed", self.committed);
        m.count("Replays", self.replays);
        m.count("Mismatches", self.mismatches);
        m.count("RejectedInputs", self.rejected);
        m.count("ObservationsWritten", self.observations);
        m.count("TransientFailures", self.transient);
        m.emit("ingest");
    }
}

fn log_outcome(outcome: &IngestOutcome) {
    match outcome.result() {
        Some(result) => info!(
            outcome = outcome.code(),
            observations = result.observation_ids.len(),
            attempts = result.attempts,
            "delivery settled"
        ),
        None => info!(outcome = outcome.code(), "delivery settled"),
    }
}

/// Keeps connector configurations for a short time so that a batch does not read them per message.
pub struct CachedConnectors {
    inner: Arc<dyn ConnectorDirectory>,
    ttl: Duration,
    entries: Mutex<HashMap<ConnectorId, (Instant, Option<ConnectorConfig>)>>,
}

impl CachedConnectors {
    pub fn new(inner: Arc<dyn ConnectorDirectory>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl ConnectorDirectory for CachedConnectors {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        if let Ok(entries) = self.entries.lock() {
            if let Some((at, config)) = entries.get(id) {
                if at.elapsed() < self.ttl {
                    return Ok(config.clone());
                }
            }
        }
        let config = self.inner.connector(id).await?;
        // Only hits are cached: a connector created a moment ago must not be refused for 30 s.
        if let (Some(_), Ok(mut entries)) = (&config, self.entries.lock()) {
            entries.insert(id.clone(), (Instant::now(), config.clone()));
        }
        Ok(config)
    }
}

/// Handles one DynamoDB stream batch for the projector: the whole batch is applied at once
/// (`Projector::apply_batch`: every projection key once, bounded concurrency). If a record
/// cannot be applied, it is reported (the event source then retries from it, and everything
/// before it is done).
pub async fn handle_stream_batch(
    projector: &crate::protocols::projection::Projector,
    event: aws_lambda_events::event::dynamodb::Event,
) -> aws_lambda_events::event::streams::DynamoDbEventResponse {
    let mut response = aws_lambda_events::event::streams::DynamoDbEventResponse::default();
    let now_ms = crate::domain::timestamp::Timestamp::now().unix_millis();
    let lag_ms = event
        .records
        .iter()
        .map(|r| r.change.approximate_creation_date_time.timestamp_millis())
        .filter(|created| *created > 0)
        .map(|created| now_ms - created)
        .max()
        .unwrap_or(0);
    let sequences: Vec<String> = event
        .records
        .iter()
        .map(|r| r.change.sequence_number.clone().unwrap_or_default())
        .collect();
    let mut changes = Vec::with_capacity(event.records.len());
    let mut failed_at: Option<(usize, String)> = None;
    for (index, record) in event.records.into_iter().enumerate() {
        match crate::stream::classify(
            &record.event_name,
            Some(record.change.old_image),
            Some(record.change.new_image),
        ) {
            Ok(change) => changes.push(change),
            Err(e) => {
                failed_at = Some((index, e.to_string()));
                break;
            }
        }
    }
    if let Err(failure) = projector.apply_batch(&changes).await {
        failed_at = Some((failure.index, failure.error.to_string()));
    }
    if let Some((index, error)) = failed_at {
        let sequence = sequences.get(index).cloned().unwrap_or_default();
        warn!(sequence = %sequence, error = %error, "projection failed; the batch resumes here");
        let mut failure = aws_lambda_events::event::streams::DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence);
        response.batch_item_failures.push(failure);
    }
    let mut m = crate::metrics::BatchMetrics::default();
    m.millis("ProjectionLagMs", lag_ms.max(0));
    m.count(
        "ProjectionFailures",
        response.batch_item_failures.len() as u64,
    );
    m.emit("projector");
    response
}

/// Tenant and scopes from the API Gateway JWT authorizer (claim `tenant`, token scopes).
pub fn principal_from_apigw(
    request: &aws_lambda_events::event::apigw::ApiGatewayV2httpRequest,
) -> Option<crate::protocols::query::Principal> {
    let jwt = request.request_context.authorizer.as_ref()?.jwt.as_ref()?;
    let tenant = jwt
        .claims
        .get("tenant")
        .and_then(|t| crate::domain::ids::TenantId::parse(t).ok())?;
    let mut scopes: Vec<String> = jwt.scopes.clone().unwrap_or_default();
    if let Some(scope) = jwt.claims.get("scope") {
        scopes.extend(scope.split(' ').map(str::to_owned));
    }
    let subject = jwt.claims.get("sub").cloned();
    Some(crate::protocols::query::Principal {
        tenant,
        scopes,
        subject,
    })
}

/// The query function: API Gateway HTTP API (payload 2.0) -> read routes -> JSON.
pub async fn handle_apigw_read(
    service: &crate::protocols::query::QueryService,
    request: aws_lambda_events::event::apigw::ApiGatewayV2httpRequest,
) -> aws_lambda_events::event::apigw::ApiGatewayV2httpResponse {
    let http = crate::protocols::http::HttpRequest {
        method: request.request_context.http.method.to_string(),
        path: crate::protocols::http::percent_decode(request.raw_path.as_deref().unwrap_or_default(), false),
        query: request
            .query_string_parameters
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        principal: principal_from_apigw(&request),
    };
    let response =
        crate::protocols::http::handle_read(service, http, crate::domain::timestamp::Timestamp::now()).await;
    let mut out = aws_lambda_events::event::apigw::ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(response.status);
    out.headers.insert(
        aws_lambda_events::http::header::CONTENT_TYPE,
        aws_lambda_events::http::HeaderValue::from_static("application/json"),
    );
    out.body = Some(aws_lambda_events::encodings::Body::Text(response.body));
    out
}

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

/// The connector an EventBridge schedule names: its input is `{"connector": "acme-eu"}`.
pub fn scheduled_connector(event: &serde_json::Value) -> Result<ConnectorId, PullScheduleError> {
    let text = event
        .get("connector")
        .and_then(serde_json::Value::as_str)
        .ok_or(PullScheduleError::NoConnector)?;
    Ok(ConnectorId::parse(text)?)
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
        failed = report.failed.len(),
        "pull finished"
    );
    Ok(report)
}

/// Why the sweeper function's invocation failed (a store failure fails it, so that it is
/// visible and retried).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Runs(#[from] StoreError),
    #[error(transparent)]
    Corrections(#[from] crate::protocols::corrections::CorrectionError),
}

/// What one sweep settled.
#[derive(Debug)]
pub struct SweepReport {
    /// The runs past their deadline at `now`, as the sweep left them.
    pub runs: Vec<crate::domain::model::Run>,
    /// Identity corrections whose settling was due and is now done.
    pub corrections: usize,
}

/// The sweeper function (its scheduled event's payload is ignored): settles the runs past their
/// deadline at `now` and completes the identity corrections whose settling is due.
pub async fn handle_sweep_schedule(
    store: &crate::aws::dynamo::DynamoEvidenceStore,
    corrections: &crate::protocols::corrections::CorrectionService,
    now: crate::domain::timestamp::Timestamp,
) -> Result<SweepReport, SweepError> {
    let runs = store.sweep_runs(now).await?;
    let corrections = corrections.settle_due().await?;
    info!(
        runs = runs.len(),
        corrections = corrections,
        "sweep finished"
    );
    Ok(SweepReport { runs, corrections })
}

#[cfg(test)]
mod tests {
    use super::principal_from_apigw;
    use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;

    fn with_tenant_claim(tenant: &str) -> ApiGatewayV2httpRequest {
        serde_json::from_value(serde_json::json!({
            "version": "2.0",
            "rawPath": "/v1/quarantine",
            "requestContext": {
                "http": {"method": "GET", "path": "/v1/quarantine"},
                "authorizer": {"jwt": {"claims": {"tenant": tenant, "scope": "ops:write"}, "scopes": null}}
            }
        }))
        .expect("an API Gateway v2 request")
    }

    #[test]
    fn a_jwt_naming_a_reserved_tenant_grants_nothing() {
        let demo = principal_from_apigw(&with_tenant_claim("demo")).expect("demo is a tenant");
        assert_eq!(demo.tenant.as_str(), "demo");
        // `_unknown` files the refusals of unreadable envelopes; no caller may read them.
        assert!(principal_from_apigw(&with_tenant_claim("_unknown")).is_none());
    }

    #[test]
    fn the_poller_schedule_names_its_connector() {
        use super::{scheduled_connector, PullScheduleError};
        let named = scheduled_connector(&serde_json::json!({"connector": "acme-eu"}));
        assert_eq!(named.expect("a connector").as_str(), "acme-eu");
        for event in [
            serde_json::json!({}),
            serde_json::json!({"connector": 7}),
            serde_json::json!("acme-eu"),
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
