//! Pulls of connectors made from a definition (`transport.kind: pull`): the pages the
//! definition's pagination finds ([`super::pagination`]), fetched with its credential
//! ([`super::credentials`]), at its rate limit, each enqueued as a delivery named by its
//! identity:
//!
//! - `export_page`: the export id of page 1 (at a body path or in a response header), the
//!   delivery `{export_id}/{n}` (strength `source`), the run `run-{connector}.{export_id}`;
//! - `cursor`: the run is the connector's schedule slot (the start time floored to
//!   `every_minutes`, default 60: `RunId::for_slot`), the delivery the slot plus the cursor the
//!   page was asked with (`SourceDeliveryId::pull_cursor`, strength `source`);
//! - `fallback`: the same run, the delivery a digest of the source account, the URL path, the
//!   request's query, the slot and the payload's sha256 (strength `fallback`).
//!
//! A retry of the same scheduled invocation (within its slot, or of the same export) names the
//! same run and the same deliveries, so ingest stores each page once. The page count is known
//! at the end only: the last page's envelope carries it, and the ledger records it
//! ([`super::RunLedger::count_pages`]), so the run completes when every page has committed.

use super::credentials::{auth_header, Secret};
use super::pagination::{retry_after, PageFacts, PageRequest, Pager, Stop};
use super::{
    backoff_delay, run_id_for, ExportRun, FetchError, PullError, PullReport, PullService,
    MAX_EXPORT_PAGES,
};
use crate::domain::canonical_json::{parse_node, Node};
use crate::domain::connector::{ConnectorConfig, PullSettings};
use crate::domain::definition::{Definition, Format, Identity, Pull, Transport};
use crate::domain::envelope::RunPage;
use crate::domain::hashing::sha256_hex;
use crate::domain::ids::{DeliveryKey, FallbackFields, IdentityStrength, RunId, SourceDeliveryId};
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::mapping::{Mapping, RowRead};
use crate::domain::model::Run;
use crate::domain::normalize::MappedRow;
use crate::domain::timestamp::Timestamp;
use crate::intake::envelope_for;
use async_trait::async_trait;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{info, warn, Instrument};

/// The longest `Retry-After` a pull waits for one page; a longer one is waited this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The schedule slot of a pull without `every_minutes`.
pub const DEFAULT_EVERY_MINUTES: u32 = 60;
/// Rows counted in one page to decide whether another follows.
const MAX_COUNTED_ROWS: usize = 1_000_000;

/// One answer of the supplier's API. A status outside 2xx comes with an empty body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageResponse {
    pub status: u16,
    pub body: Vec<u8>,
    pub link: Option<String>,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
    /// The value of the header an `export_page` identity names, if asked for.
    pub identity_header: Option<String>,
}

/// Fetches one page of a defined pull by its URL.
#[async_trait]
pub trait PageSource: Send + Sync {
    /// `GET url` with `headers` (the credential), under the connector's pull settings.
    async fn fetch_url(
        &self,
        settings: &PullSettings,
        url: &str,
        headers: &[(String, Secret)],
        identity_header: Option<&str>,
    ) -> Result<PageResponse, FetchError>;
}

/// A defined pull connector, as the flow needs it.
pub(super) struct Defined<'a> {
    config: &'a ConnectorConfig,
    settings: &'a PullSettings,
    definition: &'a Definition,
    pull: &'a Pull,
}

/// The defined pull of `config`, if it is one.
pub(super) fn defined(config: &ConnectorConfig) -> Option<Defined<'_>> {
    let definition = config.definition.as_deref()?;
    let Transport::Pull(pull) = &definition.transport else {
        return None;
    };
    Some(Defined {
        config,
        settings: config.pull.as_ref()?,
        definition,
        pull,
    })
}

/// What names a run and its pages.
#[derive(Debug, Clone)]
enum Naming {
    Export { export_id: String },
    Slot { label: String },
}

impl Naming {
    /// The export id, or the slot's start (RFC 3339).
    fn label(&self) -> &str {
        match self {
            Naming::Export { export_id } => export_id,
            Naming::Slot { label } => label,
        }
    }
}

/// One run under way: what every page needs.
struct Pulling<'a> {
    defined: &'a Defined<'a>,
    headers: Vec<(String, Secret)>,
    naming: Naming,
    run_id: RunId,
    mapping: Option<Mapping>,
    deadline: Instant,
    last_request: Option<Instant>,
}

/// Where a pull is in its pages.
struct Walk {
    pager: Pager,
    request: PageRequest,
    /// Page 1, when it was fetched to name the run.
    response: Option<PageResponse>,
    /// The pages a settled run had committed (ingest compares them).
    committed: std::collections::BTreeSet<u32>,
}

/// The start of the slot `now` falls in, slots being `every_minutes` long from the epoch.
pub fn slot_start(now: Timestamp, every_minutes: Option<u32>) -> Timestamp {
    let every = i64::from(every_minutes.unwrap_or(DEFAULT_EVERY_MINUTES).max(1)) * 60;
    let seconds = now.unix_seconds();
    Timestamp::from_unix_seconds(seconds - seconds.rem_euclid(every)).unwrap_or(now)
}

impl PullService {
    /// The run a defined pull would run now. `export_page` reads page 1 (nothing recorded or
    /// enqueued); the slot identities need no request. The page count is not known before the
    /// pull: it is answered as 0.
    pub(super) async fn locate_defined(
        &self,
        defined: &Defined<'_>,
    ) -> Result<ExportRun, PullError> {
        let mut pulling = self.pulling(defined).await?;
        if matches!(defined.definition.identity, Identity::ExportPage { .. }) {
            let first = pager(defined)?.first();
            let response = self.first_response(&mut pulling, &first).await?;
            let export_id = export_id_of(defined, &response)?;
            return Ok(ExportRun {
                run_id: run_id_for(&defined.config.connector, &export_id),
                export_id,
                page_count: 0,
            });
        }
        Ok(ExportRun {
            run_id: pulling.run_id.clone(),
            export_id: pulling.naming.label().to_owned(),
            page_count: 0,
        })
    }

    /// Runs a defined pull: names the run, records it, then fetches and enqueues page after
    /// page until the pagination ends (or a guard stops it, or a page cannot be had).
    pub(super) async fn run_defined(&self, defined: &Defined<'_>) -> Result<PullReport, PullError> {
        let mut pulling = self.pulling(defined).await?;
        let mut pager = pager(defined)?;
        let first = pager.first();
        let mut response = None;
        if matches!(defined.definition.identity, Identity::ExportPage { .. }) {
            let page = self.first_response(&mut pulling, &first).await?;
            let export_id = export_id_of(defined, &page)?;
            pulling.run_id = run_id_for(&defined.config.connector, &export_id);
            pulling.naming = Naming::Export { export_id };
            response = Some(page);
        }
        let (label, run_id) = (pulling.naming.label().to_owned(), pulling.run_id.clone());
        let span = tracing::info_span!(
            "pull_run",
            connector = %defined.config.connector,
            run_id = %run_id,
            named_by = %label
        );
        self.pull_pages(&mut pulling, pager, first, response, label)
            .instrument(span)
            .await
    }

    /// The credential header, the mapping, the deadline, and the run's name as far as it is
    /// known before any request (a slot; an export is named by its page 1).
    async fn pulling<'a>(&self, defined: &'a Defined<'a>) -> Result<Pulling<'a>, PullError> {
        defined.config.validate()?;
        let tenant = &defined.config.tenant;
        let headers = auth_header(&defined.pull.auth, tenant, self.credentials.as_ref())
            .await
            .map_err(PullError::Credential)?
            .into_iter()
            .collect();
        let now = self.clock.now();
        let slot = slot_start(now, defined.pull.every_minutes);
        let deadline_seconds = defined.settings.run_deadline_seconds.min(24 * 3600);
        Ok(Pulling {
            defined,
            headers,
            naming: Naming::Slot {
                label: slot.to_rfc3339(),
            },
            run_id: RunId::for_slot(&defined.config.connector, slot),
            mapping: Mapping::compile(defined.definition).ok(),
            deadline: Instant::now() + Duration::from_secs(deadline_seconds),
            last_request: None,
        })
    }

    /// Page 1, or why there is no run.
    async fn first_response(
        &self,
        pulling: &mut Pulling<'_>,
        first: &PageRequest,
    ) -> Result<PageResponse, PullError> {
        self.fetch_paced(pulling, first).await.map_err(|(attempts, error)| {
            warn!(connector = %pulling.defined.config.connector, attempts, error = %error, "page 1 unavailable");
            PullError::FirstPage { attempts, error }
        })
    }

    async fn pull_pages(
        &self,
        pulling: &mut Pulling<'_>,
        pager: Pager,
        first: PageRequest,
        response: Option<PageResponse>,
        label: String,
    ) -> Result<PullReport, PullError> {
        let mut run = self.defined_run_record(pulling);
        let mut report = PullReport {
            run_id: pulling.run_id.clone(),
            export_id: label,
            page_count: 0,
            enqueued: Vec::new(),
            failed: Vec::new(),
            run_was: None,
            compared: Vec::new(),
            stopped: None,
        };
        let committed = self.start_or_find_run(&run, &mut report).await?;
        let walk = Walk {
            pager,
            request: first,
            response,
            committed,
        };
        let (page_count, first_failure) = self.walk(pulling, walk, &mut report).await;
        report.page_count = page_count;
        run.page_count = Some(page_count);
        self.ledger.count_pages(&run).await?;
        if let Some(error) = first_failure {
            // Recorded with its page 1 missing; the invocation fails, as a legacy pull's does.
            return Err(error);
        }
        info!(
            page_count,
            enqueued = report.enqueued.len(),
            failed = report.failed.len(),
            stopped = report.stopped.as_deref().unwrap_or(""),
            "run pages handed to the ingest queue"
        );
        Ok(report)
    }

    /// Page after page until the pagination ends, a guard stops it, a page cannot be fetched
    /// or the deadline passes: the run's page count, and the error of a page 1 that could not
    /// be fetched.
    async fn walk(
        &self,
        pulling: &mut Pulling<'_>,
        mut walk: Walk,
        report: &mut PullReport,
    ) -> (u32, Option<PullError>) {
        loop {
            let sequence = walk.request.sequence;
            let page = match walk.response.take() {
                Some(page) => page,
                None => match self.fetch_paced(pulling, &walk.request).await {
                    Ok(page) => page,
                    Err((attempts, error)) => {
                        let reason = format!("{error} (after {attempts} attempt(s))");
                        warn!(page = sequence, reason = %reason, "page not enqueued; the pull stops");
                        report.failed.push((sequence, reason));
                        report.stopped = Some("a page could not be fetched".into());
                        let first =
                            (sequence == 1).then_some(PullError::FirstPage { attempts, error });
                        return (sequence, first);
                    }
                },
            };
            let next = walk.pager.next(&walk.request, &facts(pulling, &page));
            if next == Err(Stop::EmptyPage) {
                report.stopped = Some(Stop::EmptyPage.to_string());
                return (sequence.saturating_sub(1).max(1), None);
            }
            // A guard's stop leaves the page after this one missing.
            let last = next.as_ref().err().map(|stop| match stop.is_end() {
                true => sequence,
                false => sequence.saturating_add(1),
            });
            self.hand_over(pulling, &walk, &page, last, report).await;
            match next {
                Ok(following) => walk.request = following,
                Err(stop) => {
                    if !stop.is_end() {
                        warn!(page = sequence, reason = %stop, "pagination stopped by a guard");
                        report
                            .failed
                            .push((sequence.saturating_add(1), stop.to_string()));
                    }
                    report.stopped = Some(stop.to_string());
                    return (last.unwrap_or(sequence), None);
                }
            }
            if Instant::now() >= pulling.deadline {
                report.stopped = Some("the run deadline passed".into());
                let missing = walk.request.sequence;
                report
                    .failed
                    .push((missing, "the run deadline passed".into()));
                return (missing, None);
            }
        }
    }

    /// Enqueues the page of `walk.request`, noting the outcome in `report`.
    async fn hand_over(
        &self,
        pulling: &Pulling<'_>,
        walk: &Walk,
        page: &PageResponse,
        page_count: Option<u32>,
        report: &mut PullReport,
    ) {
        let sequence = walk.request.sequence;
        match self
            .enqueue_defined(pulling, &walk.request, page, page_count)
            .await
        {
            Ok(()) => {
                report.enqueued.push(sequence);
                if walk.committed.contains(&sequence) {
                    report.compared.push(sequence);
                }
            }
            Err(reason) => {
                warn!(page = sequence, reason = %reason, "page not enqueued");
                report.failed.push((sequence, reason));
            }
        }
    }

    fn defined_run_record(&self, pulling: &Pulling<'_>) -> Run {
        let config = pulling.defined.config;
        let mut run = self.run_record(config, pulling.defined.settings, &pulling.run_id, 0);
        run.page_count = None;
        run
    }

    /// Fetches one page: at the rate limit, retrying retryable failures up to `max_attempts`
    /// in all, after the `Retry-After` a 429 or 503 asks for (at most [`MAX_RETRY_AFTER`]) or
    /// else the backoff, never past the run's deadline.
    async fn fetch_paced(
        &self,
        pulling: &mut Pulling<'_>,
        request: &PageRequest,
    ) -> Result<PageResponse, (u32, FetchError)> {
        let max_attempts = pulling.defined.settings.max_attempts.max(1);
        let identity_header = match &pulling.defined.definition.identity {
            Identity::ExportPage { header, .. } => header.as_deref(),
            _ => None,
        };
        let mut attempt = 1;
        loop {
            pace(pulling).await;
            let (error, asked) = match self
                .pages
                .fetch_url(
                    pulling.defined.settings,
                    &request.url,
                    &pulling.headers,
                    identity_header,
                )
                .await
            {
                Ok(page) if (200..300).contains(&page.status) => return Ok(page),
                Ok(page) => {
                    let asked = matches!(page.status, 429 | 503)
                        .then(|| page.retry_after.as_deref())
                        .flatten()
                        .and_then(|value| retry_after(value, self.clock.now()));
                    (FetchError::Status(page.status), asked)
                }
                Err(error) => (error, None),
            };
            if attempt >= max_attempts || !error.is_retryable() {
                return Err((attempt, error));
            }
            let delay = asked.map_or_else(
                || backoff_delay(attempt, self.initial_backoff, self.max_backoff),
                |wait| wait.min(MAX_RETRY_AFTER),
            );
            if Instant::now() + delay >= pulling.deadline {
                warn!(
                    page = request.sequence,
                    delay_s = delay.as_secs(),
                    "waiting would pass the run deadline"
                );
                return Err((attempt, error));
            }
            warn!(page = request.sequence, attempt, error = %error, delay_ms = delay.as_millis() as u64, "page fetch failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn enqueue_defined(
        &self,
        pulling: &Pulling<'_>,
        request: &PageRequest,
        page: &PageResponse,
        page_count: Option<u32>,
    ) -> Result<(), String> {
        let defined = pulling.defined;
        let (id, strength, basis) = delivery_id(pulling, request, page)?;
        let config = defined.config;
        let key = DeliveryKey::new(
            config.tenant.clone(),
            config.connector.clone(),
            config.source_account.clone(),
            id,
            strength,
        );
        let run = RunPage {
            run_id: pulling.run_id.clone(),
            page: request.sequence,
            page_count,
        };
        let content_type = page
            .content_type
            .clone()
            .unwrap_or_else(|| default_content_type(&defined.definition.format).to_owned());
        let envelope = envelope_for(
            &key,
            basis,
            self.clock.now(),
            &content_type,
            Some(run),
            &page.body,
            self.claims.as_ref(),
        )
        .await
        .map_err(|e| e.to_string())?;
        self.queue
            .enqueue(&envelope)
            .await
            .map_err(|e| e.to_string())?;
        info!(page = request.sequence, delivery_key = %key, "page enqueued");
        Ok(())
    }
}

/// Waits until the rate limit allows the next request, and notes it.
async fn pace(pulling: &mut Pulling<'_>) {
    if let (Some(rate), Some(last)) = (
        pulling.defined.pull.rate_limit_per_minute,
        pulling.last_request,
    ) {
        let spacing = Duration::from_secs_f64(60.0 / f64::from(rate.max(1)));
        tokio::time::sleep_until(last + spacing).await;
    }
    pulling.last_request = Some(Instant::now());
}

fn pager(defined: &Defined<'_>) -> Result<Pager, PullError> {
    Pager::new(&defined.pull.url, &defined.pull.pagination).ok_or_else(|| PullError::NotPullable {
        connector: defined.config.connector.clone(),
        reason: "its url is not an absolute URL",
    })
}

/// What the pager reads of a page: its rows and page count as the definition reads them.
fn facts<'a>(pulling: &Pulling<'_>, page: &'a PageResponse) -> PageFacts<'a> {
    let read = pulling.mapping.as_ref().and_then(|mapping| {
        // The rows are counted as they are read, none of them kept.
        let mut rows = 0;
        let mut count = |_: RowRead<MappedRow<'_>>, _| rows += 1;
        let (document, _) = mapping
            .read_each(&page.body, MAX_COUNTED_ROWS, None, &mut count)
            .ok()?;
        Some((rows, document.page_count))
    });
    PageFacts {
        body: &page.body,
        link: page.link.as_deref(),
        rows: read.map(|(rows, _)| rows),
        page_count: read.and_then(|(_, page_count)| page_count),
    }
}

/// The delivery id, its strength and its basis.
fn delivery_id(
    pulling: &Pulling<'_>,
    request: &PageRequest,
    page: &PageResponse,
) -> Result<(SourceDeliveryId, IdentityStrength, &'static str), String> {
    let defined = pulling.defined;
    match (&defined.definition.identity, &pulling.naming) {
        (Identity::ExportPage { .. }, Naming::Export { export_id }) => {
            let found = export_id_of(defined, page).map_err(|e| e.to_string())?;
            if &found != export_id {
                return Err(format!(
                    "page belongs to export {found:?}, not {export_id:?}"
                ));
            }
            let id = SourceDeliveryId::export_page(export_id, request.sequence)
                .map_err(|e| e.to_string())?;
            Ok((id, IdentityStrength::Source, super::EXPORT_PAGE_BASIS))
        }
        (Identity::Fallback, Naming::Slot { label }) => {
            let uri: http::Uri = request
                .url
                .parse()
                .map_err(|_| "the page URL cannot be read")?;
            let id = SourceDeliveryId::fallback(&FallbackFields {
                source_account: config_account(defined),
                endpoint: uri.path(),
                page_cursor: uri.query().unwrap_or_default(),
                source_timestamp: label,
                payload_sha256: &sha256_hex(&page.body),
            });
            Ok((id, IdentityStrength::Fallback, "fallback"))
        }
        (_, Naming::Slot { label }) => {
            let id = SourceDeliveryId::pull_cursor(label, &request.asked_with);
            Ok((id, IdentityStrength::Source, "cursor"))
        }
        (_, Naming::Export { .. }) => Err("an export names only export_page deliveries".into()),
    }
}

fn config_account<'a>(defined: &'a Defined<'_>) -> &'a str {
    defined.config.source_account.as_str()
}

/// The export id an `export_page` identity reads from page 1: at its body path (a string, or
/// a number as written) or in its response header.
fn export_id_of(defined: &Defined<'_>, page: &PageResponse) -> Result<String, PullError> {
    let Identity::ExportPage { path, header } = &defined.definition.identity else {
        return Err(PullError::BadExport(
            "the identity is not export_page".into(),
        ));
    };
    let found = match (path, header) {
        (Some(path), _) => {
            let root = parse_node(&page.body)
                .map_err(|e| PullError::BadExport(format!("page is not JSON: {e}")))?;
            let path = JsonPath::parse(path)
                .map_err(|e| PullError::BadExport(format!("export id path: {e}")))?;
            match path.select(&root) {
                Some(Node::String(text)) => Some(text.to_string()),
                Some(Node::Number(text)) => Some(text.to_string()),
                _ => None,
            }
        }
        (None, Some(_)) => page.identity_header.clone(),
        (None, None) => None,
    };
    let export_id = found
        .filter(|id| !id.trim().is_empty())
        .ok_or_else(|| PullError::BadExport("the page names no export id".into()))?;
    SourceDeliveryId::export_page(&export_id, MAX_EXPORT_PAGES)
        .map_err(|e| PullError::BadExport(format!("export id: {e}")))?;
    Ok(export_id)
}

fn default_content_type(format: &Format) -> &'static str {
    match format {
        Format::Csv(_) => "text/csv",
        Format::Json(_) => "application/json",
        Format::Xml(_) => "application/xml",
    }
}

#[cfg(test)]
#[path = "paged_tests.rs"]
mod tests;
