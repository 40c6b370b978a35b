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
}

impl PayloadFormat {
    /// Path of object keys from the document root to the rows array.
    pub fn rows_path(&self) -> &'static [&'static str] {
        match self {
            Self::AcmeExportV1 => &["offers"],
            Self::CloudEventsOffersV1 => &["data", "offers"],
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
}

impl ConnectorConfig {
    pub fn horizon_seconds(&self) -> i64 {
        i64::from(self.horizon_days) * 86_400
    }
}
