//! The scheduled pull connector: one ingestion run per supplier export, every page enqueued as
//! its own delivery (`{export_id}/{page}`, strength `source`, basis `export_page`).
//!
//! The run id is derived from the export (`run-{connector}.{export_id}`), so running the same
//! export again — after a lost response, a timeout or a Lambda retry — resumes the same run, and
//! the pages it enqueues again are replays of the same delivery keys (ingest stores them once).
//! The run is recorded (pages requested, page count, deadline, credential reference) before any
//! page is enqueued; a page that cannot be fetched after `max_attempts` is reported and not
//! enqueued, so the run stays incomplete and the sweeper names the missing page.
//!
//! An export whose run is already settled (`COMPLETE`, `INCOMPLETE`) is not reopened, but every
//! page is still fetched and enqueued: ingest compares each page it already stored with the one
//! fetched now, so a supplier re-publishing the export with changed content is quarantined
//! (`replay_payload_mismatch`) rather than lost.

use crate::domain::connector::{ConnectorConfig, ConnectorConfigError, IdentityRule, PullSettings};
use crate::domain::envelope::RunPage;
use crate::domain::ids::{ConnectorId, DeliveryKey, IdentityStrength, RunId, SourceDeliveryId};
use crate::domain::model::{Run, RunStart, RunStatus};
use crate::intake::{envelope_for, ClaimStore, DeliveryQueue};
use crate::protocols::ports::{Clock, ConnectorDirectory, StoreError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn, Instrument};

/// An export with more pages than this is refused as garbage (`BadExport`).
pub const MAX_EXPORT_PAGES: u32 = 10_000;
/// A page body larger than this is refused by `HttpExportSource` (`FetchError::TooLarge`).
pub const MAX_EXPORT_PAGE_BYTES: u64 = 16 * 1024 * 1024;
/// First delay between two attempts at one page; it doubles after each failure.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Longest delay between two attempts at one page.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The delivery identity basis of an export page.
pub const EXPORT_PAGE_BASIS: &str = "export_page";

/// Where runs are recorded. `start_run` MUST be idempotent: starting a run that is open keeps
/// its committed pages; a run that is already `COMPLETE` or `INCOMPLETE` MUST be left untouched
/// (not reopened) and reported `Closed` with its committed pages.
#[async_trait]
pub trait RunLedger: Send + Sync {
    async fn start_run(&self, run: &Run) -> Result<RunStart, StoreError>;

    /// Records the page count of a run started without one (a defined pull learns it at its
    /// last page), so that the run completes once those pages have committed. A store whose
    /// pages may all have committed before this MUST complete the run then.
    async fn count_pages(&self, run: &Run) -> Result<(), StoreError> {
        self.start_run(run).await.map(|_| ())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The export answered with a status outside 2xx.
    #[error("export answered HTTP {0}")]
    Status(u16),
    /// No answer: connection refused, timeout, TLS or protocol failure. The detail is logged,
    /// never returned: an ops caller must not learn what the network looks like from inside.
    #[error("export_unreachable: the export did not answer")]
    Transport,
    /// Not sent: the URL or a redirect is not https to a public address of an allowed host
    /// (`HttpExportSource`); the reason is logged only.
    #[error("export_refused: the export URL must be https to a public address of an allowed host, without redirects to another host")]
    Refused,
    /// The page is larger than `MAX_EXPORT_PAGE_BYTES`.
    #[error("export page is larger than {0} bytes")]
    TooLarge(u64),
}

impl FetchError {
    /// Whether another attempt may succeed: transport failures, 5xx, 408 and 429.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status(code) => *code >= 500 || *code == 408 || *code == 429,
            Self::Transport => true,
            Self::Refused | Self::TooLarge(_) => false,
        }
    }
}

/// Starts a connector's pull run asynchronously, elsewhere: in AWS the poller function invoked
/// with `InvocationType: Event` and the schedule's input `{"connector": id}` (so its retries and
/// its on-failure queue are the schedule's); locally the function host's asynchronous invoker.
/// `Ok` once the invocation is accepted, not once the pull finished.
#[async_trait]
pub trait PullLauncher: Send + Sync {
    async fn launch(&self, connector: &ConnectorId) -> Result<(), anyhow::Error>;
}

/// The export a pull of the connector would run now, as its page 1 names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportRun {
    pub run_id: RunId,
    pub export_id: String,
    pub page_count: u32,
}

/// Reads one page of the supplier's current export.
#[async_trait]
pub trait ExportSource: Send + Sync {
    /// The body of `GET {export_url}?page={page}`.
    async fn fetch_page(&self, settings: &PullSettings, page: u32) -> Result<Vec<u8>, FetchError>;
}

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("unknown connector {0}")]
    UnknownConnector(ConnectorId),
    #[error("connector {connector} is not a pull connector: {reason}")]
    NotPullable {
        connector: ConnectorId,
        reason: &'static str,
    },
    /// Page 1 names the export; without it there is no run to start.
    #[error("export page 1 could not be fetched after {attempts} attempt(s): {error}")]
    FirstPage { attempts: u32, error: FetchError },
    #[error("export page 1 is not a usable export: {0}")]
    BadExport(String),
    /// The stored connector breaks `ConnectorConfig::validate`: no run is started under it.
    #[error("{0}")]
    Misconfigured(#[from] ConnectorConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The definition's credential could not be had (its reference is named, never a value).
    #[error("{0}")]
    Credential(credentials::CredentialError),
}

/// What one run of a pull connector did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullReport {
    pub run_id: RunId,
    pub export_id: String,
    pub page_count: u32,
    /// Pages handed to the ingest queue, in order.
    pub enqueued: Vec<u32>,
    /// Pages not enqueued, with the reason; the run stays incomplete until they are.
    pub failed: Vec<(u32, String)>,
    /// Set when the export's run was already settled (`COMPLETE` or `INCOMPLETE`). It is not
    /// reopened: every page is still enqueued, so that ingest compares each committed page with
    /// what it stored (see `compared`); a missing page of an `INCOMPLETE` run commits and, once
    /// all have, completes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_was: Option<RunStatus>,
    /// Enqueued pages the settled run had already committed: ingest compares each with the
    /// payload stored under its delivery key (the same one is a counted replay, another one a
    /// `replay_payload_mismatch` quarantine entry). Asynchronous: the outcome is ingest's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compared: Vec<u32>,
    /// Why a defined pull asked for no further page (its pagination's end, or a guard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// The fields of an export page the poller reads; the rows are ingest's business.
#[derive(Debug, Deserialize)]
struct ExportHeader {
    export_id: String,
    #[serde(default)]
    page: Option<u32>,
    #[serde(default)]
    page_count: Option<u32>,
}

fn header(body: &[u8]) -> Result<ExportHeader, String> {
    serde_json::from_slice(body).map_err(|e| format!("not an export page: {e}"))
}

/// The run id of an export: see [`RunId::for_export`].
pub fn run_id_for(connector: &ConnectorId, export_id: &str) -> RunId {
    RunId::for_export(connector, export_id)
}

/// Delay before attempt `attempt + 1` after `attempt` failed (1-based): `initial * 2^(attempt-1)`,
/// capped.
pub fn backoff_delay(attempt: u32, initial: Duration, cap: Duration) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    initial.saturating_mul(factor).min(cap)
}

pub struct PullService {
    connectors: Arc<dyn ConnectorDirectory>,
    ledger: Arc<dyn RunLedger>,
    source: Arc<dyn ExportSource>,
    queue: Arc<dyn DeliveryQueue>,
    claims: Arc<dyn ClaimStore>,
    clock: Arc<dyn Clock>,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// A defined pull's pages and credentials (`with_defined_pulls`).
    pages: Arc<dyn paged::PageSource>,
    credentials: Arc<dyn credentials::PullCredentials>,
}

impl PullService {
    pub fn new(
        connectors: Arc<dyn ConnectorDirectory>,
        ledger: Arc<dyn RunLedger>,
        source: Arc<dyn ExportSource>,
        queue: Arc<dyn DeliveryQueue>,
        claims: Arc<dyn ClaimStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            connectors,
            ledger,
            source,
            queue,
            claims,
            clock,
            initial_backoff: INITIAL_BACKOFF,
            max_backoff: MAX_BACKOFF,
            pages: Arc::new(HttpExportSource::new()),
            credentials: Arc::new(credentials::NoPullCredentials),
        }
    }

    /// Where a defined pull's pages and credentials come from (by default: the deployed
    /// guarded client, and no credentials, so that only `auth: none` pulls run).
    pub fn with_defined_pulls(
        mut self,
        pages: Arc<dyn paged::PageSource>,
        credentials: Arc<dyn credentials::PullCredentials>,
    ) -> Self {
        self.pages = pages;
        self.credentials = credentials;
        self
    }

    /// Other retry delays (tests use milliseconds).
    pub fn with_backoff(mut self, initial: Duration, cap: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = cap;
        self
    }

    /// The export `connector`'s pull would run now: page 1 fetched (with retries) and read,
    /// nothing recorded, nothing enqueued. What `POST /v1/connectors/{id}/runs` answers with
    /// before the pull itself runs asynchronously.
    pub async fn locate(&self, connector: &ConnectorId) -> Result<ExportRun, PullError> {
        let config = self.config(connector).await?;
        if let Some(defined) = paged::defined(&config) {
            return self.locate_defined(&defined).await;
        }
        let (_, export, _) = self.first_page(connector).await?;
        Ok(export)
    }

    async fn config(&self, connector: &ConnectorId) -> Result<ConnectorConfig, PullError> {
        self.connectors
            .connector(connector)
            .await?
            .ok_or_else(|| PullError::UnknownConnector(connector.clone()))
    }

    /// The connector's configuration, its export as page 1 names it, and page 1's body.
    async fn first_page(
        &self,
        connector: &ConnectorId,
    ) -> Result<(ConnectorConfig, ExportRun, Vec<u8>), PullError> {
        let config = self
            .connectors
            .connector(connector)
            .await?
            .ok_or_else(|| PullError::UnknownConnector(connector.clone()))?;
        let settings = pull_settings(&config)?;
        let first = self
            .fetch_with_retries(settings, 1)
            .await
            .map_err(|(attempts, error)| {
                warn!(connector = %connector, attempts, error = %error, "export page 1 unavailable");
                PullError::FirstPage { attempts, error }
            })?;
        let (export_id, page_count) = first_page_header(&first)?;
        let export = ExportRun {
            run_id: run_id_for(connector, &export_id),
            export_id,
            page_count,
        };
        Ok((config, export, first))
    }

    /// Pulls the supplier's current export for `connector`: records the run, then enqueues every
    /// page that could be fetched. Pages that could not are in `PullReport::failed`.
    pub async fn run_connector(&self, connector: &ConnectorId) -> Result<PullReport, PullError> {
        let config = self.config(connector).await?;
        if let Some(defined) = paged::defined(&config) {
            return self.run_defined(&defined).await;
        }
        let (config, export, first) = self.first_page(connector).await?;
        let settings = pull_settings(&config)?;
        let ExportRun {
            run_id,
            export_id,
            page_count,
        } = export;
        let span = tracing::info_span!(
            "pull_run",
            connector = %connector,
            run_id = %run_id,
            export_id = %export_id
        );
        self.pull_export(&config, settings, run_id, export_id, page_count, first)
            .instrument(span)
            .await
    }

    async fn pull_export(
        &self,
        config: &ConnectorConfig,
        settings: &PullSettings,
        run_id: RunId,
        export_id: String,
        page_count: u32,
        first: Vec<u8>,
    ) -> Result<PullReport, PullError> {
        let run = self.run_record(config, settings, &run_id, page_count);
        let mut report = PullReport {
            run_id,
            export_id,
            page_count,
            enqueued: Vec::new(),
            failed: Vec::new(),
            run_was: None,
            compared: Vec::new(),
            stopped: None,
        };
        let committed = self.start_or_find_run(&run, &mut report).await?;
        // Every page is enqueued, whatever the run's state: a page already committed under its
        // delivery key is compared there by ingest (the same payload is a counted replay, a
        // changed one a `replay_payload_mismatch` quarantine entry); a settled run is never
        // reopened by it.
        let mut first = Some(first);
        for page in 1..=page_count {
            let body = match first.take() {
                Some(body) => body,
                None => match self.fetch_with_retries(settings, page).await {
                    Ok(body) => body,
                    Err((attempts, error)) => {
                        let reason = format!("{error} (after {attempts} attempt(s))");
                        warn!(page, reason = %reason, "export page not enqueued");
                        report.failed.push((page, reason));
                        continue;
                    }
                },
            };
            match self.enqueue_page(config, &report, page, &body).await {
                Ok(()) => {
                    report.enqueued.push(page);
                    if committed.contains(&page) {
                        report.compared.push(page);
                    }
                }
                Err(reason) => {
                    warn!(page, reason = %reason, "export page not enqueued");
                    report.failed.push((page, reason));
                }
            }
        }
        info!(
            enqueued = report.enqueued.len(),
            compared = report.compared.len(),
            failed = report.failed.len(),
            "run pages handed to the ingest queue"
        );
        Ok(report)
    }

    /// The run record written before any page is enqueued.
    fn run_record(
        &self,
        config: &ConnectorConfig,
        settings: &PullSettings,
        run_id: &RunId,
        page_count: u32,
    ) -> Run {
        let now = self.clock.now();
        let deadline_seconds = i64::try_from(settings.run_deadline_seconds).unwrap_or(i64::MAX);
        Run {
            run_id: run_id.clone(),
            tenant: config.tenant.clone(),
            connector: config.connector.clone(),
            status: None,
            credential_ref: Some(settings.credential_ref.clone()),
            started_at: Some(now),
            deadline: Some(now.unix_seconds().saturating_add(deadline_seconds)),
            page_count: Some(page_count),
            pages_seen: 0,
            missing_pages: Vec::new(),
            missing_count: 0,
            completed_at: None,
            updated_at: now,
            publication: Some(config.publication),
        }
    }

    /// Starts the run, or finds it settled (left untouched, `report.run_was` set). The pages
    /// the run has committed: those ingest will compare rather than store.
    async fn start_or_find_run(
        &self,
        run: &Run,
        report: &mut PullReport,
    ) -> Result<BTreeSet<u32>, PullError> {
        match self.ledger.start_run(run).await? {
            RunStart::Open => {
                info!(page_count = report.page_count, "run started");
                Ok(BTreeSet::new())
            }
            RunStart::Closed { status, committed } => {
                report.run_was = Some(status);
                info!(
                    ?status,
                    committed = committed.len(),
                    "run already settled: not reopened; every page is sent to ingest, which compares the committed ones with what it stored"
                );
                Ok(committed)
            }
        }
    }

    async fn enqueue_page(
        &self,
        config: &ConnectorConfig,
        report: &PullReport,
        page: u32,
        body: &[u8],
    ) -> Result<(), String> {
        if page > 1 {
            let found = header(body)?;
            if found.export_id != report.export_id {
                return Err(format!(
                    "page belongs to export {:?}, not {:?}",
                    found.export_id, report.export_id
                ));
            }
            if found.page.is_some_and(|p| p != page) {
                return Err(format!("page says it is page {:?}", found.page));
            }
        }
        let id =
            SourceDeliveryId::export_page(&report.export_id, page).map_err(|e| e.to_string())?;
        let key = DeliveryKey::new(
            config.tenant.clone(),
            config.connector.clone(),
            config.source_account.clone(),
            id,
            IdentityStrength::Source,
        );
        let run = RunPage {
            run_id: report.run_id.clone(),
            page,
            page_count: Some(report.page_count),
        };
        let envelope = envelope_for(
            &key,
            EXPORT_PAGE_BASIS,
            self.clock.now(),
            "application/json",
            Some(run),
            body,
            self.claims.as_ref(),
        )
        .await
        .map_err(|e| e.to_string())?;
        self.queue
            .enqueue(&envelope)
            .await
            .map_err(|e| e.to_string())?;
        info!(page, delivery_key = %key, "export page enqueued");
        Ok(())
    }

    /// Fetches `page`, retrying retryable failures up to `max_attempts` in all. On failure,
    /// the attempts made and the last error.
    async fn fetch_with_retries(
        &self,
        settings: &PullSettings,
        page: u32,
    ) -> Result<Vec<u8>, (u32, FetchError)> {
        let max_attempts = settings.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            match self.source.fetch_page(settings, page).await {
                Ok(body) => return Ok(body),
                Err(error) if attempt < max_attempts && error.is_retryable() => {
                    let delay = backoff_delay(attempt, self.initial_backoff, self.max_backoff);
                    warn!(page, attempt, error = %error, delay_ms = delay.as_millis() as u64, "export page fetch failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(error) => return Err((attempt, error)),
            }
        }
    }
}

fn pull_settings(config: &ConnectorConfig) -> Result<&PullSettings, PullError> {
    let not_pullable = |reason| PullError::NotPullable {
        connector: config.connector.clone(),
        reason,
    };
    let settings = config
        .pull
        .as_ref()
        .ok_or_else(|| not_pullable("it has no pull settings"))?;
    if config.identity_rule != IdentityRule::ExportPage {
        return Err(not_pullable("its identity rule is not export_page"));
    }
    config.validate()?;
    Ok(settings)
}

/// The export id and page count named by page 1.
fn first_page_header(body: &[u8]) -> Result<(String, u32), PullError> {
    let found = header(body).map_err(PullError::BadExport)?;
    if found.page.is_some_and(|p| p != 1) {
        return Err(PullError::BadExport(format!(
            "page 1 says it is page {:?}",
            found.page
        )));
    }
    let page_count = match found.page_count {
        Some(count @ 1..=MAX_EXPORT_PAGES) => count,
        other => {
            return Err(PullError::BadExport(format!(
                "page_count must be 1..={MAX_EXPORT_PAGES}, found {other:?}"
            )))
        }
    };
    if found.export_id.is_empty() {
        return Err(PullError::BadExport("export_id is empty".into()));
    }
    // The longest identity of the export must be a valid source delivery id.
    SourceDeliveryId::export_page(&found.export_id, page_count)
        .map_err(|e| PullError::BadExport(format!("export_id: {e}")))?;
    Ok((found.export_id, page_count))
}

/// In-memory fakes of the poller's ports, for unit tests here and in `crate::intake::drops`.
pub mod credentials;
pub mod dispatch;
mod http_source;
pub mod paged;
pub mod pagination;
pub use http_source::HttpExportSource;

#[cfg(test)]
pub(crate) mod fakes;

#[cfg(test)]
mod tests;
