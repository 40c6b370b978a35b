//! A local fake of a supplier's paginated export API (the `acme-eu` pull connector's source),
//! for the local stack and tests. It serves the current export of each connector page by page
//! and can be told to fail a page (503) or to lose a page's response (504 after building it).
//!
//! - `GET /exports/{connector}?page=N`: page N of the connector's current export as
//!   `{"export_id", "page", "page_count", "offers": [row...]}`; 404 without an export or out of range.
//! - `POST /control/{connector}/export` `{"export_id": "...", "pages": [[row...], ...]}`
//! - `POST /control/{connector}/fail` `{"page": N, "times": K}`: the next K requests of page N get 503.
//! - `POST /control/{connector}/lose` `{"page": N, "times": K}`: the next K get 504 after the page
//!   was built, as if the response were lost on the way.
//!
//! `times: 4294967295` (`u32::MAX`) means always. The same controls are methods of the handle.
//!
//! It also serves fixed supplier APIs under `/apis/` for pulls made from a definition (a
//! cursor-paginated bearer JSON API, a Link-header JSON API, a CSV by page number): [`apis`].

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, warn};

pub mod apis;

/// Control request bodies larger than this are refused (413).
const MAX_CONTROL_BODY_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Default)]
struct Export {
    export_id: String,
    pages: Vec<Vec<Value>>,
}

#[derive(Debug, Default)]
struct ConnectorState {
    export: Option<Export>,
    fail: HashMap<u32, u32>,
    lose: HashMap<u32, u32>,
    requests: HashMap<u32, u32>,
}

#[derive(Debug, Default)]
struct State {
    connectors: HashMap<String, ConnectorState>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Consumes one armed fault for `page`, if any (`u32::MAX` never runs out).
fn take_fault(faults: &mut HashMap<u32, u32>, page: u32) -> bool {
    match faults.get_mut(&page) {
        Some(times) if *times > 0 => {
            if *times != u32::MAX {
                *times -= 1;
            }
            true
        }
        _ => false,
    }
}

pub struct FakeSupplier;

impl FakeSupplier {
    /// Serves on `127.0.0.1:{port}` (0 picks a free port) until the handle is dropped.
    pub async fn start(port: u16) -> anyhow::Result<FakeSupplierHandle> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        let state: Shared = Arc::default();
        let task = tokio::spawn(serve(listener, state.clone()));
        Ok(FakeSupplierHandle { state, port, task })
    }
}

/// Controls of a running fake supplier; dropping it stops accepting connections.
pub struct FakeSupplierHandle {
    state: Shared,
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl FakeSupplierHandle {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The export URL of `connector` (the poller appends `?page=N`).
    pub fn url(&self, connector: &str) -> String {
        format!("http://127.0.0.1:{}/exports/{connector}", self.port)
    }

    /// Replaces the connector's current export; `pages[0]` holds page 1's offer rows.
    pub fn set_export(&self, connector: &str, export_id: &str, pages: Vec<Vec<Value>>) {
        set_export(&self.state, connector, export_id, pages);
    }

    /// The next `times` requests of `page` get 503 (`u32::MAX`: always).
    pub fn fail_page(&self, connector: &str, page: u32, times: u32) {
        arm(&self.state, connector, Fault::Fail, page, times);
    }

    /// The next `times` requests of `page` are served and then answered 504, as if the response
    /// were lost (`u32::MAX`: always).
    pub fn lose_response(&self, connector: &str, page: u32, times: u32) {
        arm(&self.state, connector, Fault::Lose, page, times);
    }

    /// How many times `page` of the connector's export was requested.
    pub fn requests(&self, connector: &str, page: u32) -> u32 {
        lock(&self.state)
            .connectors
            .get(connector)
            .and_then(|c| c.requests.get(&page).copied())
            .unwrap_or(0)
    }
}

impl Drop for FakeSupplierHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Fail,
    Lose,
}

fn set_export(state: &Shared, connector: &str, export_id: &str, pages: Vec<Vec<Value>>) {
    lock(state)
        .connectors
        .entry(connector.to_owned())
        .or_default()
        .export = Some(Export {
        export_id: export_id.to_owned(),
        pages,
    });
}

fn arm(state: &Shared, connector: &str, fault: Fault, page: u32, times: u32) {
    let mut state = lock(state);
    let entry = state.connectors.entry(connector.to_owned()).or_default();
    let faults = match fault {
        Fault::Fail => &mut entry.fail,
        Fault::Lose => &mut entry.lose,
    };
    faults.insert(page, times);
}

async fn serve(listener: TcpListener, state: Shared) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                warn!(error = %e, "fake supplier: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, request).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(error = %e, "fake supplier: connection ended");
            }
        });
    }
}

fn respond(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response<Full<Bytes>> {
    respond(
        status,
        &json!({"error": {"code": code, "message": message.into()}}),
    )
}

async fn route(state: &Shared, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    if method == Method::GET {
        if let Some(answer) = apis::route(&path, &query, request.headers()) {
            return answer;
        }
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        (Method::GET, ["exports", connector]) => export_page(state, connector, &query),
        (Method::POST, ["control", connector, action]) => {
            let body = match Limited::new(request.into_body(), MAX_CONTROL_BODY_BYTES)
                .collect()
                .await
            {
                Ok(collected) => collected.to_bytes(),
                Err(e) => {
                    return error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload_too_large",
                        e.to_string(),
                    )
                }
            };
            control(state, connector, action, &body)
        }
        _ => error(StatusCode::NOT_FOUND, "not_found", "no such route"),
    }
}

fn page_param(query: &str) -> Option<u32> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|value| value.parse().ok())
}

fn export_page(state: &Shared, connector: &str, query: &str) -> Response<Full<Bytes>> {
    let Some(page) = page_param(query) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "query parameter page=N (N >= 1) is required",
        );
    };
    let mut state = lock(state);
    let entry = state.connectors.entry(connector.to_owned()).or_default();
    *entry.requests.entry(page).or_default() += 1;
    if take_fault(&mut entry.fail, page) {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "injected failure",
        );
    }
    let Some(export) = &entry.export else {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            "no export for connector",
        );
    };
    let page_count = export.pages.len();
    let Some(rows) = (page as usize)
        .checked_sub(1)
        .and_then(|index| export.pages.get(index))
    else {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("page {page} is outside 1..={page_count}"),
        );
    };
    let body = json!({
        "export_id": export.export_id,
        "page": page,
        "page_count": page_count,
        "offers": rows,
    });
    if take_fault(&mut entry.lose, page) {
        return error(
            StatusCode::GATEWAY_TIMEOUT,
            "lost",
            "the page was built but its response was lost",
        );
    }
    respond(StatusCode::OK, &body)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportBody {
    export_id: String,
    pages: Vec<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultBody {
    page: u32,
    times: u32,
}

fn control(state: &Shared, connector: &str, action: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let invalid = |e: serde_json::Error| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_payload",
            format!("invalid control body: {e}"),
        )
    };
    match action {
        "export" => match serde_json::from_slice::<ExportBody>(body) {
            Ok(export) => {
                let page_count = export.pages.len();
                set_export(state, connector, &export.export_id, export.pages);
                respond(
                    StatusCode::OK,
                    &json!({"connector": connector, "export_id": export.export_id, "page_count": page_count}),
                )
            }
            Err(e) => invalid(e),
        },
        "fail" | "lose" => match serde_json::from_slice::<FaultBody>(body) {
            Ok(fault) => {
                let kind = if action == "fail" {
                    Fault::Fail
                } else {
                    Fault::Lose
                };
                arm(state, connector, kind, fault.page, fault.times);
                respond(
                    StatusCode::OK,
                    &json!({"connector": connector, action: {"page": fault.page, "times": fault.times}}),
                )
            }
            Err(e) => invalid(e),
        },
        _ => error(StatusCode::NOT_FOUND, "not_found", "no such control"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use feedsafe::domain::connector::{
        ConnectorConfig, IdentityRule, PayloadFormat, Publication, PullSettings,
        DEFAULT_CLOCK_SKEW_SECONDS, DEFAULT_HORIZON_DAYS, DEFAULT_MAX_BODY_BYTES,
    };
    use feedsafe::domain::envelope::DeliveryEnvelope;
    use feedsafe::domain::fingerprint::CanonicalizationRule;
    use feedsafe::domain::ids::{ConnectorId, SourceAccount, TenantId};
    use feedsafe::domain::model::{Run, RunStart};
    use feedsafe::domain::timestamp::Timestamp;
    use feedsafe::intake::poller::{HttpExportSource, PullReport, PullService, RunLedger};
    use feedsafe::intake::{ClaimStore, DeliveryQueue, QueueError, StoredClaim};
    use feedsafe::protocols::ports::{Clock, ConnectorDirectory, StoreError};

    // In-memory ports of the poller (the shared crate's own test fakes are private to it).

    fn acme_eu(export_url: &str, max_attempts: u32) -> ConnectorConfig {
        ConnectorConfig {
            connector: ConnectorId::parse("acme-eu").unwrap(),
            tenant: TenantId::parse("demo").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            payload_format: PayloadFormat::AcmeExportV1,
            identity_rule: IdentityRule::ExportPage,
            canonicalization: CanonicalizationRule::JsonV1,
            horizon_days: DEFAULT_HORIZON_DAYS,
            publication: Publication::PerPage,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            clock_skew_seconds: DEFAULT_CLOCK_SKEW_SECONDS,
            pull: Some(PullSettings {
                export_url: export_url.to_owned(),
                credential_ref: "acme-eu/export-token".to_owned(),
                run_deadline_seconds: 900,
                page_timeout_ms: 2000,
                max_attempts,
                allowed_hosts: Vec::new(),
            }),
            version: None,
            definition: None,
        }
    }

    struct Directory(HashMap<ConnectorId, ConnectorConfig>);

    #[async_trait]
    impl ConnectorDirectory for Directory {
        async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
            Ok(self.0.get(id).cloned())
        }
    }

    /// What the ledger and the queue were handed, in order.
    #[derive(Default)]
    struct Journal {
        runs: Mutex<Vec<Run>>,
        envelopes: Mutex<Vec<DeliveryEnvelope>>,
    }

    impl Journal {
        fn runs(&self) -> Vec<Run> {
            self.runs.lock().unwrap().clone()
        }
        fn envelopes(&self) -> Vec<DeliveryEnvelope> {
            self.envelopes.lock().unwrap().clone()
        }
        fn keys(&self) -> Vec<String> {
            self.envelopes()
                .iter()
                .map(|e| e.delivery_key().as_string())
                .collect()
        }
    }

    struct Ledger(Arc<Journal>);

    #[async_trait]
    impl RunLedger for Ledger {
        async fn start_run(&self, run: &Run) -> Result<RunStart, StoreError> {
            self.0.runs.lock().unwrap().push(run.clone());
            Ok(RunStart::Open)
        }
    }

    struct Queue(Arc<Journal>);

    #[async_trait]
    impl DeliveryQueue for Queue {
        async fn enqueue(&self, envelope: &DeliveryEnvelope) -> Result<(), QueueError> {
            self.0.envelopes.lock().unwrap().push(envelope.clone());
            Ok(())
        }
    }

    struct NoClaims;

    #[async_trait]
    impl ClaimStore for NoClaims {
        async fn put_claim(&self, _: &str, _: &[u8], _: &str) -> Result<StoredClaim, QueueError> {
            Err(QueueError(anyhow::anyhow!("no claim store in this test")))
        }
    }

    struct FixedClock;

    impl Clock for FixedClock {
        fn now(&self) -> Timestamp {
            Timestamp::parse("2026-11-29T08:00:05Z").unwrap()
        }
    }

    struct Harness {
        service: PullService,
        journal: Arc<Journal>,
    }

    impl Harness {
        fn new(configs: Vec<ConnectorConfig>, source: Arc<HttpExportSource>) -> Self {
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

    fn rows(page: u32) -> Vec<Value> {
        vec![
            json!({"sku": format!("AX-440-R{page}"), "quantity": 6, "unit": "each",
                    "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ]
    }

    fn three_pages() -> Vec<Vec<Value>> {
        (1..=3).map(rows).collect()
    }

    fn failed_pages(report: &PullReport) -> Vec<u32> {
        report.failed.iter().map(|(page, _)| *page).collect()
    }

    /// A blocking HTTP call on the blocking pool: (status, body).
    async fn call(method: &'static str, url: String, body: Option<String>) -> (u16, Value) {
        tokio::task::spawn_blocking(move || {
            let agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .new_agent();
            let mut response = match (method, body) {
                ("POST", Some(body)) => agent.post(&url).send(body),
                _ => agent.get(&url).call(),
            }
            .unwrap();
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_pages_and_injects_faults() {
        let supplier = FakeSupplier::start(0).await.unwrap();
        let url = supplier.url("acme-eu");
        assert!(url.ends_with(&format!(":{}/exports/acme-eu", supplier.port())));
        assert_eq!(call("GET", format!("{url}?page=1"), None).await.0, 404);

        supplier.set_export("acme-eu", "EXP-8821", three_pages());
        let (status, page) = call("GET", format!("{url}?page=2"), None).await;
        assert_eq!(status, 200);
        assert_eq!(
            page,
            json!({"export_id": "EXP-8821", "page": 2, "page_count": 3, "offers": rows(2)})
        );
        for bad in ["?page=0", "?page=4"] {
            assert_eq!(call("GET", format!("{url}{bad}"), None).await.0, 404);
        }
        for bad in ["", "?page=x", "?page=-1"] {
            assert_eq!(call("GET", format!("{url}{bad}"), None).await.0, 400);
        }

        supplier.fail_page("acme-eu", 1, 2);
        supplier.lose_response("acme-eu", 3, 1);
        let before = supplier.requests("acme-eu", 1);
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(call("GET", format!("{url}?page=1"), None).await.0);
        }
        assert_eq!(statuses, [503, 503, 200]);
        assert_eq!(supplier.requests("acme-eu", 1), before + 3);
        assert_eq!(call("GET", format!("{url}?page=3"), None).await.0, 504);
        assert_eq!(call("GET", format!("{url}?page=3"), None).await.0, 200);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn controls_are_reachable_over_http_and_refuse_bad_input() {
        let supplier = FakeSupplier::start(0).await.unwrap();
        let base = format!("http://127.0.0.1:{}", supplier.port());
        let export = json!({"export_id": "EXP-9", "pages": [rows(1), rows(2)]}).to_string();
        let (status, body) = call(
            "POST",
            format!("{base}/control/acme-eu/export"),
            Some(export),
        )
        .await;
        assert_eq!((status, body["page_count"].clone()), (200, json!(2)));
        let fault = json!({"page": 2, "times": u32::MAX}).to_string();
        let (status, _) = call(
            "POST",
            format!("{base}/control/acme-eu/fail"),
            Some(fault.clone()),
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) = call("POST", format!("{base}/control/acme-eu/lose"), Some(fault)).await;
        assert_eq!(status, 200);
        for _ in 0..2 {
            assert_eq!(
                call("GET", format!("{base}/exports/acme-eu?page=2"), None)
                    .await
                    .0,
                503
            );
        }
        // The lose fault of page 2 is armed too, but fail answers first.
        let (status, page) = call("GET", format!("{base}/exports/acme-eu?page=1"), None).await;
        assert_eq!((status, page["export_id"].clone()), (200, json!("EXP-9")));

        for (path, body) in [
            ("/control/acme-eu/export", "not json"),
            (
                "/control/acme-eu/export",
                r#"{"export_id": 1, "pages": []}"#,
            ),
            ("/control/acme-eu/fail", r#"{"page": -1, "times": 1}"#),
            ("/control/acme-eu/lose", r#"{"page": 1}"#),
        ] {
            let (status, error) =
                call("POST", format!("{base}{path}"), Some(body.to_owned())).await;
            assert_eq!(status, 400, "{path} {body}");
            assert_eq!(error["error"]["code"], "invalid_payload");
        }
        assert_eq!(
            call(
                "POST",
                format!("{base}/control/acme-eu/explode"),
                Some("{}".into())
            )
            .await
            .0,
            404
        );
        assert_eq!(call("GET", format!("{base}/elsewhere"), None).await.0, 404);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_poller_recovers_a_lost_page_by_running_the_export_again() {
        let supplier = FakeSupplier::start(0).await.unwrap();
        supplier.set_export("acme-eu", "EXP-8821", three_pages());
        supplier.lose_response("acme-eu", 2, 1);
        let h = Harness::new(
            vec![acme_eu(&supplier.url("acme-eu"), 1)],
            Arc::new(HttpExportSource::allowing_loopback_http()),
        );
        let acme = ConnectorId::parse("acme-eu").unwrap();

        let first = h.service.run_connector(&acme).await.unwrap();
        assert_eq!(first.export_id, "EXP-8821");
        assert_eq!(first.page_count, 3);
        assert_eq!(first.enqueued, vec![1, 3]);
        assert_eq!(failed_pages(&first), vec![2]);
        assert!(first.failed[0].1.contains("504"), "{:?}", first.failed);

        let second = h.service.run_connector(&acme).await.unwrap();
        assert_eq!(second.run_id, first.run_id);
        assert_eq!(second.enqueued, vec![1, 2, 3]);
        assert!(second.failed.is_empty());
        assert_eq!(supplier.requests("acme-eu", 2), 2);

        // Pages 1 and 3 went out twice under the same keys: ingest replays them.
        let keys = h.journal.keys();
        assert_eq!(
            keys,
            [1, 3, 1, 2, 3].map(|p| format!("demo/acme-eu/ACC-1/EXP-8821/{p}"))
        );
        let runs = h.journal.runs();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r.run_id == first.run_id));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_that_always_fails_is_reported_after_max_attempts() {
        let supplier = FakeSupplier::start(0).await.unwrap();
        supplier.set_export("acme-eu", "EXP-8821", three_pages());
        supplier.fail_page("acme-eu", 3, u32::MAX);
        let h = Harness::new(
            vec![acme_eu(&supplier.url("acme-eu"), 3)],
            Arc::new(HttpExportSource::allowing_loopback_http()),
        );
        let report = h
            .service
            .run_connector(&ConnectorId::parse("acme-eu").unwrap())
            .await
            .unwrap();
        assert_eq!(report.enqueued, vec![1, 2]);
        assert_eq!(failed_pages(&report), vec![3]);
        assert!(report.failed[0].1.contains("503"), "{:?}", report.failed);
        assert_eq!(supplier.requests("acme-eu", 3), 3);
        assert_eq!(h.journal.envelopes().len(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_supplier_is_a_transport_failure() {
        let supplier = FakeSupplier::start(0).await.unwrap();
        let url = supplier.url("acme-eu");
        drop(supplier);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let h = Harness::new(
            vec![acme_eu(&url, 2)],
            Arc::new(HttpExportSource::allowing_loopback_http()),
        );
        let err = h
            .service
            .run_connector(&ConnectorId::parse("acme-eu").unwrap())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                feedsafe::intake::poller::PullError::FirstPage {
                    attempts: 2,
                    error: feedsafe::intake::poller::FetchError::Transport
                }
            ),
            "{err}"
        );
    }
}
