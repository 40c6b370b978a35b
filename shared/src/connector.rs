//! Connector configuration: who a feed belongs to and the rules its deliveries are judged by.

use crate::fingerprint::CanonicalizationRule;
use crate::ids::{ConnectorId, SourceAccount, TenantId};
use serde::{Deserialize, Serialize};

/// The supplier payload shapes the normalizer understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PayloadFormat {
    /// `{"export_id", "page", "page_count", "offers": [row...]}` (the `acme-eu` pull export).
    AcmeExportV1,
    /// CloudEvents 1.0 structured JSON with the rows under `data.offers` (the `acme-events` push feed).
    CloudEventsOffersV1,
    /// A CSV file with a header row naming the row fields (`sku,quantity,unit,price,currency,
    /// observed_at[,revision,condition]`), as dropped under `drops/{connector}/`. Fingerprint it
    /// with `bytes-v1`.
    CsvOffersV1,
}

impl PayloadFormat {
    /// Path of object keys from the document root to the rows array.
    pub fn rows_path(&self) -> &'static [&'static str] {
        match self {
            Self::AcmeExportV1 => &["offers"],
            Self::CloudEventsOffersV1 => &["data", "offers"],
            Self::CsvOffersV1 => &[],
        }
    }

    /// The media type of a body in this format.
    pub fn content_type(&self) -> &'static str {
        match self {
            Self::CsvOffersV1 => "text/csv",
            _ => "application/json",
        }
    }
}

/// Whether a committed page of an unfinished run is visible to readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Publication {
    PerPage,
    OnRunComplete,
}

/// Which source field names a delivery, strongest first; used by the intake functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityRule {
    /// Export id (or snapshot token) plus page number.
    ExportPage,
    /// CloudEvents `source` + `id`, else the `webhook-id` header, else the documented fallback.
    CloudEventsSourceId,
    /// The Standard Webhooks `webhook-id` header, else the fallback.
    WebhookId,
    /// File name plus object version.
    FileVersion,
}

pub const DEFAULT_HORIZON_DAYS: u32 = 30;
/// Bodies above this are refused (`payload_too_large`) unless a connector says otherwise.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 5 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorConfig {
    pub connector: ConnectorId,
    pub tenant: TenantId,
    pub source_account: SourceAccount,
    pub payload_format: PayloadFormat,
    pub identity_rule: IdentityRule,
    pub canonicalization: CanonicalizationRule,
    /// Dedup horizon; it must outlive SQS retention (14 days) and suppliers' retry schedules.
    pub horizon_days: u32,
    pub publication: Publication,
    pub max_body_bytes: u64,
    /// For a scheduled pull connector: where and how the poller fetches exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullSettings>,
}

/// How the poller reads a supplier's paginated export (`GET {export_url}?page=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullSettings {
    /// Base URL of the export; the poller asks for `{export_url}?page=N`.
    pub export_url: String,
    /// A reference to the credential (e.g. a secret's name), never the credential itself.
    pub credential_ref: String,
    /// Seconds after the run starts at which the sweeper settles it.
    #[serde(default = "default_run_deadline_seconds")]
    pub run_deadline_seconds: u64,
    /// Timeout of one page request, in milliseconds.
    #[serde(default = "default_page_timeout_ms")]
    pub page_timeout_ms: u64,
    /// Attempts per page before the page is reported as failed.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
}

pub const DEFAULT_RUN_DEADLINE_SECONDS: u64 = 900;
pub const DEFAULT_PAGE_TIMEOUT_MS: u64 = 5000;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

fn default_run_deadline_seconds() -> u64 {
    DEFAULT_RUN_DEADLINE_SECONDS
}

fn default_page_timeout_ms() -> u64 {
    DEFAULT_PAGE_TIMEOUT_MS
}

fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}

impl ConnectorConfig {
    pub fn horizon_seconds(&self) -> i64 {
        i64::from(self.horizon_days) * 86_400
    }
}
