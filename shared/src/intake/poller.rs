//! The scheduled pull connector: one ingestion run per supplier export, every page enqueued as
//! its own delivery (`{export_id}/{page}`, strength `source`, basis `export_page`).
//!
//! The run id is derived from the export (`run-{connector}.{export_id}`), so running the same
//! export again — after a lost response, a timeout or a Lambda retry — resumes the same run, and
//! the pages it enqueues again are replays of the same delivery keys (ingest stores them once).
//! The run is recorded (pages requested, page count, deadline, credential reference) before any
//! page is enqueued; a page that cannot be fetched after `max_attempts` is reported and not
//! enqueued, so the run stays incomplete and the sweeper names the missing page.

use crate::domain::connector::{ConnectorConfig, ConnectorConfigError, IdentityRule, PullSettings};
use crate::domain::envelope::RunPage;
use crate::domain::hashing::{hex, sha256_fields};
use crate::domain::ids::{ConnectorId, DeliveryKey, IdentityStrength, RunId, SourceDeliveryId};
use crate::domain::model::{Run, RunStart, RunStatus};
use crate::intake::{envelope_for, ClaimStore, DeliveryQueue};
use crate::protocols::ports::{Clock, ConnectorDirectory, StoreError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
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
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The export answered with a status outside 2xx.
    #[error("export answered HTTP {0}")]
    Status(u16),
    /// No answer: connection refused, timeout, TLS or protocol failure.
    #[error("export request failed: {0}")]
    Transport(String),
    /// The page is larger than `MAX_EXPORT_PAGE_BYTES`.
    #[error("export page is larger than {0} bytes")]
    TooLarge(u64),
}

impl FetchError {
    /// Whether another attempt may succeed: transport failures, 5xx, 408 and 429.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status(code) => *code >= 500 || *code == 408 || *code == 429,
            Self::Transport(_) => true,
            Self::TooLarge(_) => false,
        }
    }
}

/// Reads one page of the supplier's current export.
#[async_trait]
pub trait ExportSource: Send + Sync {
    /// The body of `GET {export_url}?page={page}`.
    async fn fetch_page(&self, settings: &PullSettings, page: u32) -> Result<Vec<u8>, FetchError>;
}

/// `ExportSource` over HTTP(S) (ureq with rustls, run on the blocking pool). Sends no
/// credential: `credential_ref` is recorded with the run, resolving it is the caller's concern.
#[derive(Debug, Clone)]
pub struct HttpExportSource {
    agent: ureq::Agent,
}

impl HttpExportSource {
    pub fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent("feedsafe-poller")
            .build()
            .new_agent();
        Self { agent }
    }
}

impl Default for HttpExportSource {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ExportSource for HttpExportSource {
    async fn fetch_page(&self, settings: &PullSettings, page: u32) -> Result<Vec<u8>, FetchError> {
        let agent = self.agent.clone();
        let url = settings.export_url.clone();
        let timeout = Duration::from_millis(settings.page_timeout_ms.max(1));
        tokio::task::spawn_blocking(move || {
            let mut response = agent
                .get(&url)
                .query("page", page.to_string())
                .config()
                .timeout_global(Some(timeout))
                .build()
                .call()
                .map_err(|e| FetchError::Transport(e.to_string()))?;
            let status = response.status().as_u16();
            if !(200..300).contains(&status) {
                return Err(FetchError::Status(status));
            }
            response
                .body_mut()
                .with_config()
                .limit(MAX_EXPORT_PAGE_BYTES)
                .read_to_vec()
                .map_err(|e| match e {
                    ureq::Error::BodyExceedsLimit(_) => FetchError::TooLarge(MAX_EXPORT_PAGE_BYTES),
                    other => FetchError::Transport(other.to_string()),
                })
        })
        .await
        .map_err(|e| FetchError::Transport(format!("fetch task failed: {e}")))?
    }
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
    /// Set when the export's run was already settled: `COMPLETE` (nothing is enqueued again)
    /// or `INCOMPLETE` (only its missing pages are fetched and enqueued; it stays INCOMPLETE
    /// until they commit, which completes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_was: Option<RunStatus>,
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

/// The run id of an export: `run-{connector}.{export_id}`, e.g. `run-acme-eu.EXP-8821`. A
/// connector id never holds `.`, so the first `.` ends it (with `-` there, `acme` + `eu-X` and
/// `acme-eu` + `X` named one run, and `start_run` would have handed it to the other connector).
/// An export id that is empty, holds anything but ASCII letters, digits, `-` and `.`, or makes
/// the id longer than 64 characters is named `{readable prefix}_{20 hex}` instead, the hex
/// being sha256 over (connector, export id) as netstrings. A readable id has every `_` (from
/// the connector) before a `.`; a digest id has none after its last `_`: the two never meet.
pub fn run_id_for(connector: &ConnectorId, export_id: &str) -> RunId {
    const DIGEST_HEX: usize = 20;
    let readable = format!("run-{connector}.{export_id}");
    let plain = !export_id.is_empty()
        && export_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'));
    if plain && readable.len() <= 64 {
        if let Ok(id) = RunId::parse(&readable) {
            return id;
        }
    }
    let digest = hex(&sha256_fields(&[
        b"run",
        connector.as_str().as_bytes(),
        export_id.as_bytes(),
    ]));
    let kept: String = readable
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(64 - 1 - DIGEST_HEX)
        .collect();
    // ASCII letters, digits and `-_.` only, at most 64 of them: always a valid run id.
    RunId::parse(&format!("{kept}_{}", &digest[..DIGEST_HEX]))
        .unwrap_or_else(|_| unreachable!("a sanitized run id is valid"))
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
        }
    }

    /// Other retry delays (tests use milliseconds).
    pub fn with_backoff(mut self, initial: Duration, cap: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = cap;
        self
    }

    /// Pulls the supplier's current export for `connector`: records the run, then enqueues every
    /// page that could be fetched. Pages that could not are in `PullReport::failed`.
    pub async fn run_connector(&self, connector: &ConnectorId) -> Result<PullReport, PullError> {
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
        let run_id = run_id_for(connector, &export_id);
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
        let now = self.clock.now();
        let deadline_seconds = i64::try_from(settings.run_deadline_seconds).unwrap_or(i64::MAX);
        let run = Run {
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
        };
        let mut report = PullReport {
            run_id,
            export_id,
            page_count,
            enqueued: Vec::new(),
            failed: Vec::new(),
            run_was: None,
        };
        // A settled run is never reopened: a complete export is not enqueued again (each page
        // would only replay), an incomplete one gets its missing pages only.
        let wanted: Vec<u32> = match self.ledger.start_run(&run).await? {
            RunStart::Open => {
                info!(page_count, "run started");
                (1..=page_count).collect()
            }
            RunStart::Closed { status, committed } => {
                report.run_was = Some(status);
                let missing: Vec<u32> = (1..=page_count)
                    .filter(|p| !committed.contains(p))
                    .collect();
                info!(
                    ?status,
                    missing = missing.len(),
                    "run already settled; only its missing pages are pulled"
                );
                if status == RunStatus::Complete {
                    Vec::new()
                } else {
                    missing
                }
            }
        };
        let mut first = Some(first).filter(|_| wanted.first() == Some(&1));
        for page in wanted {
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
                Ok(()) => report.enqueued.push(page),
                Err(reason) => {
                    warn!(page, reason = %reason, "export page not enqueued");
                    report.failed.push((page, reason));
                }
            }
        }
        info!(
            enqueued = report.enqueued.len(),
            failed = report.failed.len(),
            "run pages handed to the ingest queue"
        );
        Ok(report)
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

/// In-memory fakes of the poller's ports, for unit tests here and in `fake_supplier`.
#[cfg(test)]
pub(crate) mod fakes {
    use super::*;
    use crate::domain::connector::{Publication, DEFAULT_HORIZON_DAYS, DEFAULT_MAX_BODY_BYTES};
    use crate::domain::envelope::DeliveryEnvelope;
    use crate::domain::fingerprint::CanonicalizationRule;
    use crate::domain::ids::{SourceAccount, TenantId};
    use crate::domain::timestamp::Timestamp;
    use crate::intake::{QueueError, StoredClaim};
    use std::collections::HashMap;
    use std::sync::Mutex;

    pub const NOW: &str = "2026-11-29T08:00:05Z";

    pub fn acme_eu(export_url: &str, max_attempts: u32) -> ConnectorConfig {
        ConnectorConfig {
            connector: ConnectorId::parse("acme-eu").unwrap(),
            tenant: TenantId::parse("demo").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            payload_format: crate::domain::connector::PayloadFormat::AcmeExportV1,
            identity_rule: IdentityRule::ExportPage,
            canonicalization: CanonicalizationRule::JsonV1,
            horizon_days: DEFAULT_HORIZON_DAYS,
            publication: Publication::PerPage,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            clock_skew_seconds: crate::domain::connector::DEFAULT_CLOCK_SKEW_SECONDS,
            pull: Some(PullSettings {
                export_url: export_url.to_owned(),
                credential_ref: "acme-eu/export-token".to_owned(),
                run_deadline_seconds: 900,
                page_timeout_ms: 2000,
                max_attempts,
            }),
        }
    }

    pub struct Directory(pub HashMap<ConnectorId, ConnectorConfig>);

    #[async_trait]
    impl ConnectorDirectory for Directory {
        async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
            Ok(self.0.get(id).cloned())
        }
    }

    /// Ledger and queue write into one journal so that tests can check their order.
    #[derive(Default)]
    pub struct Journal {
        pub runs: Mutex<Vec<Run>>,
        pub envelopes: Mutex<Vec<DeliveryEnvelope>>,
        pub events: Mutex<Vec<String>>,
        /// What the ledger answers `start_run` with (default: `Open`).
        pub closed: Mutex<Option<RunStart>>,
    }

    impl Journal {
        pub fn runs(&self) -> Vec<Run> {
            self.runs.lock().unwrap().clone()
        }
        pub fn envelopes(&self) -> Vec<DeliveryEnvelope> {
            self.envelopes.lock().unwrap().clone()
        }
        pub fn events(&self) -> Vec<String> {
            self.events.lock().unwrap().clone()
        }
        pub fn keys(&self) -> Vec<String> {
            self.envelopes()
                .iter()
                .map(|e| e.delivery_key().as_string())
                .collect()
        }
    }

    pub struct Ledger(pub Arc<Journal>);

    #[async_trait]
    impl RunLedger for Ledger {
        async fn start_run(&self, run: &Run) -> Result<RunStart, StoreError> {
            self.0
                .events
                .lock()
                .unwrap()
                .push(format!("start {}", run.run_id));
            self.0.runs.lock().unwrap().push(run.clone());
            Ok(self
                .0
                .closed
                .lock()
                .unwrap()
                .clone()
                .unwrap_or(RunStart::Open))
        }
    }

    pub struct Queue(pub Arc<Journal>);

    #[async_trait]
    impl DeliveryQueue for Queue {
        async fn enqueue(&self, envelope: &DeliveryEnvelope) -> Result<(), QueueError> {
            self.0
                .events
                .lock()
                .unwrap()
                .push(format!("enqueue {}", envelope.delivery.id));
            self.0.envelopes.lock().unwrap().push(envelope.clone());
            Ok(())
        }
    }

    pub struct NoClaims;

    #[async_trait]
    impl ClaimStore for NoClaims {
        async fn put_claim(&self, _: &str, _: &[u8], _: &str) -> Result<StoredClaim, QueueError> {
            Err(QueueError(anyhow::anyhow!("no claim store in this test")))
        }
    }

    pub struct FixedClock;

    impl Clock for FixedClock {
        fn now(&self) -> Timestamp {
            Timestamp::parse(NOW).unwrap()
        }
    }

    pub fn page_body(export_id: &str, page: u32, page_count: u32) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "export_id": export_id, "page": page, "page_count": page_count,
            "offers": [{"sku": format!("AX-{page}"), "quantity": 6, "unit": "each", "price": "820.00",
                        "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}]
        }))
        .unwrap()
    }

    /// Pages by number; `fail(page, times)` makes the next `times` fetches of it fail (503).
    #[derive(Default)]
    pub struct ScriptedSource {
        pub pages: Mutex<HashMap<u32, Vec<u8>>>,
        pub failures: Mutex<HashMap<u32, (u32, FetchError)>>,
        pub calls: Mutex<HashMap<u32, u32>>,
    }

    impl ScriptedSource {
        pub fn export(export_id: &str, page_count: u32) -> Self {
            let source = Self::default();
            for page in 1..=page_count {
                source.set_page(page, page_body(export_id, page, page_count));
            }
            source
        }
        pub fn set_page(&self, page: u32, body: Vec<u8>) {
            self.pages.lock().unwrap().insert(page, body);
        }
        pub fn fail(&self, page: u32, times: u32, error: FetchError) {
            self.failures.lock().unwrap().insert(page, (times, error));
        }
        pub fn calls(&self, page: u32) -> u32 {
            self.calls.lock().unwrap().get(&page).copied().unwrap_or(0)
        }
    }

    #[async_trait]
    impl ExportSource for ScriptedSource {
        async fn fetch_page(&self, _: &PullSettings, page: u32) -> Result<Vec<u8>, FetchError> {
            *self.calls.lock().unwrap().entry(page).or_default() += 1;
            if let Some((times, error)) = self.failures.lock().unwrap().get_mut(&page) {
                if *times > 0 {
                    if *times != u32::MAX {
                        *times -= 1;
                    }
                    return Err(error.clone());
                }
            }
            self.pages
                .lock()
                .unwrap()
                .get(&page)
                .cloned()
                .ok_or(FetchError::Status(404))
        }
    }

    pub struct Harness {
        pub service: PullService,
        pub journal: Arc<Journal>,
    }

    impl Harness {
        pub fn new(configs: Vec<ConnectorConfig>, source: Arc<dyn ExportSource>) -> Self {
            let journal = Arc::new(Journal::default());
            let directory = Directory(
                configs
                    .into_iter()
                    .map(|c| (c.connector.clone(), c))
                    .collect(),
            );
            let service = PullService::new(
                Arc::new(directory),
                Arc::new(Ledger(journal.clone())),
                source,
                Arc::new(Queue(journal.clone())),
                Arc::new(NoClaims),
                Arc::new(FixedClock),
            )
            .with_backoff(Duration::from_millis(1), Duration::from_millis(5));
            Self { service, journal }
        }
    }

    pub fn acme() -> ConnectorId {
        ConnectorId::parse("acme-eu").unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::fakes::*;
    use super::*;
    use crate::domain::envelope::BodyRef;
    use crate::domain::hashing::base64_decode;
    use crate::domain::timestamp::Timestamp;

    fn harness(source: ScriptedSource, max_attempts: u32) -> (Harness, Arc<ScriptedSource>) {
        let source = Arc::new(source);
        let harness = Harness::new(
            vec![acme_eu(
                "http://supplier.invalid/exports/acme-eu",
                max_attempts,
            )],
            source.clone(),
        );
        (harness, source)
    }

    fn failed_pages(report: &PullReport) -> Vec<u32> {
        report.failed.iter().map(|(page, _)| *page).collect()
    }

    #[tokio::test]
    async fn three_pages_become_three_envelopes_of_one_run() {
        let (h, _) = harness(ScriptedSource::export("EXP-8821", 3), 3);
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.run_id.as_str(), "run-acme-eu.EXP-8821");
        assert_eq!(report.export_id, "EXP-8821");
        assert_eq!(report.page_count, 3);
        assert_eq!(report.enqueued, vec![1, 2, 3]);
        assert!(report.failed.is_empty());

        let envelopes = h.journal.envelopes();
        assert_eq!(envelopes.len(), 3);
        for (envelope, page) in envelopes.iter().zip(1u32..) {
            assert_eq!(envelope.delivery.id.as_str(), format!("EXP-8821/{page}"));
            assert_eq!(envelope.delivery.strength, IdentityStrength::Source);
            assert_eq!(envelope.delivery.basis, "export_page");
            assert_eq!(envelope.content_type, "application/json");
            assert_eq!(envelope.retrieved_at, Timestamp::parse(NOW).unwrap());
            assert_eq!(
                envelope.delivery_key().as_string(),
                format!("demo/acme-eu/ACC-1/EXP-8821/{page}")
            );
            assert_eq!(
                envelope.run,
                Some(RunPage {
                    run_id: report.run_id.clone(),
                    page,
                    page_count: Some(3)
                })
            );
            let BodyRef::Inline { base64 } = &envelope.body else {
                panic!("small pages travel inline")
            };
            assert_eq!(
                base64_decode(base64).unwrap(),
                page_body("EXP-8821", page, 3)
            );
            // What the poller sends is what ingest accepts.
            crate::domain::envelope::DeliveryEnvelope::parse(envelope.to_json().as_bytes())
                .unwrap();
        }

        let runs = h.journal.runs();
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        let now = Timestamp::parse(NOW).unwrap();
        assert_eq!(run.run_id, report.run_id);
        assert_eq!(run.status, None);
        assert_eq!(run.credential_ref.as_deref(), Some("acme-eu/export-token"));
        assert_eq!(run.started_at, Some(now));
        assert_eq!(run.deadline, Some(now.unix_seconds() + 900));
        assert_eq!(run.page_count, Some(3), "pages 1..=3 are requested");
        assert_eq!(run.tenant.as_str(), "demo");
        // The run is recorded before any page is enqueued.
        assert_eq!(
            h.journal.events(),
            [
                "start run-acme-eu.EXP-8821",
                "enqueue EXP-8821/1",
                "enqueue EXP-8821/2",
                "enqueue EXP-8821/3"
            ]
        );
        // The report is JSON for the Lambda's result.
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["run_id"], "run-acme-eu.EXP-8821");
        assert_eq!(json["enqueued"], serde_json::json!([1, 2, 3]));
    }

    #[tokio::test]
    async fn a_page_failing_once_is_retried_and_enqueued() {
        let source = ScriptedSource::export("EXP-8821", 3);
        source.fail(2, 1, FetchError::Status(503));
        let (h, source) = harness(source, 3);
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.enqueued, vec![1, 2, 3]);
        assert!(report.failed.is_empty());
        assert_eq!(source.calls(2), 2);
        assert_eq!(h.journal.envelopes().len(), 3);
    }

    #[tokio::test]
    async fn a_page_failing_every_time_is_reported_and_not_enqueued() {
        let source = ScriptedSource::export("EXP-8821", 3);
        source.fail(3, u32::MAX, FetchError::Transport("timed out".into()));
        let (h, source) = harness(source, 3);
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.enqueued, vec![1, 2]);
        assert_eq!(failed_pages(&report), vec![3]);
        assert!(
            report.failed[0].1.contains("timed out"),
            "{:?}",
            report.failed
        );
        assert_eq!(source.calls(3), 3, "max_attempts bounds the attempts");
        assert_eq!(h.journal.envelopes().len(), 2);
        // The run still requests all three pages, so the sweeper names page 3.
        assert_eq!(h.journal.runs()[0].page_count, Some(3));
    }

    #[tokio::test]
    async fn a_client_error_is_not_retried() {
        let source = ScriptedSource::export("EXP-8821", 2);
        source.fail(2, u32::MAX, FetchError::Status(404));
        let (h, source) = harness(source, 3);
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(failed_pages(&report), vec![2]);
        assert_eq!(source.calls(2), 1);
    }

    #[tokio::test]
    async fn running_the_same_export_twice_resumes_the_same_run_with_the_same_keys() {
        let (h, _) = harness(ScriptedSource::export("EXP-8821", 3), 3);
        let first = h.service.run_connector(&acme()).await.unwrap();
        let first_keys = h.journal.keys();
        let second = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(first.run_id, second.run_id);
        assert_eq!(first, second);
        let keys = h.journal.keys();
        assert_eq!(keys.len(), 6);
        assert_eq!(keys[3..], first_keys[..]);
        let runs = h.journal.runs();
        assert_eq!(runs[0].run_id, runs[1].run_id);
    }

    #[tokio::test]
    async fn a_complete_run_is_not_pulled_again_and_an_incomplete_one_only_for_its_missing_pages() {
        let (h, source) = harness(ScriptedSource::export("EXP-8821", 3), 3);
        *h.journal.closed.lock().unwrap() = Some(RunStart::Closed {
            status: RunStatus::Complete,
            committed: (1..=3).collect(),
        });
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.run_was, Some(RunStatus::Complete));
        assert!(report.enqueued.is_empty(), "{report:?}");
        assert!(h.journal.envelopes().is_empty());
        assert_eq!(source.calls(2), 0, "no page beyond the first is fetched");

        *h.journal.closed.lock().unwrap() = Some(RunStart::Closed {
            status: RunStatus::Incomplete,
            committed: [1, 3].into(),
        });
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.run_was, Some(RunStatus::Incomplete));
        assert_eq!(report.enqueued, vec![2]);
        assert_eq!(h.journal.keys(), vec!["demo/acme-eu/ACC-1/EXP-8821/2"]);
    }

    #[tokio::test]
    async fn a_new_export_gets_a_new_run() {
        let (h, source) = harness(ScriptedSource::export("EXP-8821", 1), 3);
        let first = h.service.run_connector(&acme()).await.unwrap();
        source.set_page(1, page_body("EXP-8822", 1, 1));
        let second = h.service.run_connector(&acme()).await.unwrap();
        assert_ne!(first.run_id, second.run_id);
        assert_eq!(h.journal.keys()[1], "demo/acme-eu/ACC-1/EXP-8822/1");
    }

    #[tokio::test]
    async fn a_page_of_another_export_is_not_enqueued_under_this_one() {
        let source = ScriptedSource::export("EXP-8821", 3);
        source.set_page(2, page_body("EXP-8822", 2, 3));
        source.set_page(3, b"<html>maintenance</html>".to_vec());
        let (h, _) = harness(source, 3);
        let report = h.service.run_connector(&acme()).await.unwrap();
        assert_eq!(report.enqueued, vec![1]);
        assert_eq!(failed_pages(&report), vec![2, 3]);
        assert!(report.failed[0].1.contains("EXP-8822"));
    }

    #[tokio::test]
    async fn a_connector_stored_with_an_invalid_configuration_starts_no_run() {
        let source = Arc::new(ScriptedSource::export("EXP-8821", 1));
        let mut zero = acme_eu("http://supplier.invalid/exports/acme-eu", 3);
        zero.horizon_days = 0;
        let h = Harness::new(vec![zero], source.clone());
        let err = h.service.run_connector(&acme()).await.unwrap_err();
        assert!(
            matches!(&err, PullError::Misconfigured(_)) && err.to_string().contains("horizon_days"),
            "{err}"
        );
        assert_eq!(source.calls(1), 0, "the supplier is not asked");
        assert!(h.journal.runs().is_empty());
    }

    #[tokio::test]
    async fn connectors_that_cannot_be_pulled_are_refused() {
        let source = Arc::new(ScriptedSource::export("EXP-8821", 1));
        let mut push = acme_eu("http://x", 1);
        push.connector = ConnectorId::parse("acme-events").unwrap();
        push.identity_rule = IdentityRule::CloudEventsSourceId;
        let mut bare = acme_eu("http://x", 1);
        bare.connector = ConnectorId::parse("bare").unwrap();
        bare.pull = None;
        let h = Harness::new(vec![push, bare], source.clone());
        for (id, expected) in [
            ("nobody", "unknown"),
            ("acme-events", "not_pullable"),
            ("bare", "not_pullable"),
        ] {
            let err = h
                .service
                .run_connector(&ConnectorId::parse(id).unwrap())
                .await
                .unwrap_err();
            let kind = match err {
                PullError::UnknownConnector(_) => "unknown",
                PullError::NotPullable { .. } => "not_pullable",
                other => panic!("{other}"),
            };
            assert_eq!(kind, expected, "{id}");
        }
        assert_eq!(source.calls(1), 0);
        assert!(h.journal.runs().is_empty());
    }

    #[tokio::test]
    async fn a_garbage_first_page_starts_no_run() {
        for body in [
            b"not json".to_vec(),
            br#"{"page": 1, "page_count": 3}"#.to_vec(),
            br#"{"export_id": 8821, "page": 1, "page_count": 3}"#.to_vec(),
            br#"{"export_id": "EXP-1", "page": 1, "page_count": 0}"#.to_vec(),
            br#"{"export_id": "EXP-1", "page": 1}"#.to_vec(),
            br#"{"export_id": "EXP-1", "page": 1, "page_count": -2}"#.to_vec(),
            br#"{"export_id": "EXP-1", "page": 2, "page_count": 3}"#.to_vec(),
            br#"{"export_id": "has space", "page": 1, "page_count": 3}"#.to_vec(),
            br#"{"export_id": "", "page": 1, "page_count": 3}"#.to_vec(),
            br#"{"export_id": "EXP-1", "page": 1, "page_count": 4000000000}"#.to_vec(),
        ] {
            let source = ScriptedSource::default();
            source.set_page(1, body.clone());
            let (h, _) = harness(source, 3);
            let err = h.service.run_connector(&acme()).await.unwrap_err();
            assert!(
                matches!(err, PullError::BadExport(_)),
                "{}: {err}",
                String::from_utf8_lossy(&body)
            );
            assert!(h.journal.events().is_empty());
        }
    }

    #[tokio::test]
    async fn an_unreachable_first_page_starts_no_run() {
        let source = ScriptedSource::export("EXP-8821", 3);
        source.fail(1, u32::MAX, FetchError::Status(503));
        let (h, source) = harness(source, 2);
        let err = h.service.run_connector(&acme()).await.unwrap_err();
        assert!(
            matches!(
                err,
                PullError::FirstPage {
                    attempts: 2,
                    error: FetchError::Status(503)
                }
            ),
            "{err}"
        );
        assert_eq!(source.calls(1), 2);
        assert!(h.journal.events().is_empty());
    }

    #[test]
    fn run_ids_are_valid_deterministic_and_distinct() {
        let acme = acme();
        assert_eq!(
            run_id_for(&acme, "EXP-8821").as_str(),
            "run-acme-eu.EXP-8821"
        );
        let slashed = run_id_for(&acme, "EXP/8821");
        assert!(slashed.as_str().starts_with("run-acme-eu.EXP-8821_"));
        assert_eq!(slashed, run_id_for(&acme, "EXP/8821"));
        assert_ne!(slashed, run_id_for(&acme, "EXP:8821"));
        let long = "X".repeat(500);
        let id = run_id_for(&acme, &long);
        assert_eq!(id.as_str().len(), 64);
        assert_ne!(id, run_id_for(&acme, &format!("{long}Y")));
        assert!(RunId::parse(run_id_for(&acme, "ÉXP 1").as_str()).is_ok());
    }

    #[test]
    fn run_ids_of_two_connectors_never_meet_where_connector_and_export_join() {
        // Connector ids may contain `-`, so `run-{connector}-{export}` cannot tell where the
        // connector ends: `acme` + `eu-EXP-8821` and `acme-eu` + `EXP-8821` named one run.
        let acme = ConnectorId::parse("acme").unwrap();
        let acme_eu = ConnectorId::parse("acme-eu").unwrap();
        assert_ne!(
            run_id_for(&acme, "eu-EXP-8821"),
            run_id_for(&acme_eu, "EXP-8821")
        );
        // An export named like another export's digest form is not that export.
        let slashed = run_id_for(&acme_eu, "EXP/8821");
        let imitation = &slashed.as_str()["run-acme-eu-".len()..];
        assert_ne!(run_id_for(&acme_eu, imitation), slashed, "{imitation}");
    }

    #[test]
    fn export_page_identities_keep_the_page_after_the_last_slash() {
        // The page is a decimal number without `/`, so `{export_id}/{page}` splits at its last
        // `/` even when the export id holds slashes of its own.
        let id = |export: &str, page: u32| SourceDeliveryId::export_page(export, page).unwrap();
        assert_eq!(id("EXP-8821", 2).as_str(), "EXP-8821/2");
        assert_eq!(id("EXP/8821", 2).as_str(), "EXP/8821/2");
        assert_ne!(id("A/1", 2), id("A", 12));
        assert_ne!(id("A/1", 2), id("A/12", 2));
    }

    #[test]
    fn backoff_doubles_from_100ms_and_caps_at_2s() {
        let delays: Vec<u128> = (1..=7)
            .map(|a| backoff_delay(a, INITIAL_BACKOFF, MAX_BACKOFF).as_millis())
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(
            backoff_delay(u32::MAX, INITIAL_BACKOFF, MAX_BACKOFF),
            MAX_BACKOFF
        );
    }

    #[test]
    fn pull_settings_default_their_numbers() {
        let settings: PullSettings = serde_json::from_str(
            r#"{"export_url": "https://supplier.example/exports", "credential_ref": "acme-eu/token"}"#,
        )
        .unwrap();
        assert_eq!(settings.run_deadline_seconds, 900);
        assert_eq!(settings.page_timeout_ms, 5000);
        assert_eq!(settings.max_attempts, 3);
        // A connector without pull settings reads and writes as before.
        let config = acme_eu("http://x", 1);
        let mut value = serde_json::to_value(&config).unwrap();
        value.as_object_mut().unwrap().remove("pull");
        let plain: ConnectorConfig = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(plain.pull, None);
        assert_eq!(serde_json::to_value(&plain).unwrap(), value);
    }
}
