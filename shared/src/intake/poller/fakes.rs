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
            allowed_hosts: Vec::new(),
        }),
        version: None,
        definition: None,
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
