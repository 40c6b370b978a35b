//! The response bodies of the ops routes, as types (`docs/openapi.yaml`, components/schemas:
//! the field names are those). A field documented as nullable is an `Option` serialized as
//! `null`; a field that is only present sometimes is skipped when `None`.

use super::{QuarantineResolution, ResolutionEvent, PRESIGN_SECONDS};
use crate::domain::connector::{IdentityRule, PayloadFormat};
use crate::domain::ids::{ConnectorId, ObservationId, SourceAccount, TenantId};
use crate::domain::model::{QuarantineEntry, ReplayRecord, Run, RunStatus};
use crate::domain::quantity::Quantity;
use crate::domain::timestamp::Timestamp;
use crate::intake::poller::ExportRun;
use crate::protocols::query::HistoryEntry;
use serde::Serialize;

/// `QuarantineEntry`: the entry with its resolution (`null` when no operator acted on it).
#[derive(Debug, Clone, Serialize)]
pub struct EntryBody {
    #[serde(flatten)]
    pub entry: QuarantineEntry,
    pub resolution: Option<QuarantineResolution>,
}

impl EntryBody {
    pub fn new(entry: &QuarantineEntry, resolution: Option<&QuarantineResolution>) -> Self {
        Self {
            entry: entry.clone(),
            resolution: resolution.cloned(),
        }
    }
}

/// `QuarantineDetail` (`GET /v1/quarantine/{id}`): the entry, its append-only history and, for
/// a mismatch, the payload diff.
#[derive(Debug, Clone, Serialize)]
pub struct EntryDetail {
    #[serde(flatten)]
    pub entry: EntryBody,
    pub resolutions: Vec<ResolutionEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<MismatchDiff>,
}

/// `QuarantineList` (`GET /v1/quarantine`).
#[derive(Debug, Clone, Serialize)]
pub struct QuarantineList<'a> {
    pub tenant: &'a TenantId,
    pub status: &'a str,
    pub count: usize,
    pub entries: Vec<EntryBody>,
}

/// The `diff` of a mismatch's detail: the payload diff, or why there is none.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum MismatchDiff {
    Unavailable {
        available: bool,
        reason: String,
    },
    Available {
        available: bool,
        stored_artifact_key: String,
        received_artifact_key: String,
        #[serde(flatten)]
        diff: Box<PayloadDiff>,
    },
}

impl MismatchDiff {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::Unavailable {
            available: false,
            reason: reason.into(),
        }
    }
}

/// What differs between two payloads: field by field when both are JSON, else by bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PayloadDiff {
    Json(JsonPayloadDiff),
    Bytes(ByteSummary),
}

/// `format: json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonPayloadDiff {
    pub format: &'static str,
    pub differences: Vec<super::JsonDifference>,
    pub difference_count: usize,
    pub truncated: bool,
    /// Present when the documents hold the same values but their bytes differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<ByteSummary>,
}

/// `format: bytes`, or `format: text` with the differing lines when both sides are UTF-8.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByteSummary {
    pub format: &'static str,
    pub stored_bytes: usize,
    pub received_bytes: usize,
    pub identical: bool,
    pub common_prefix_bytes: usize,
    /// `null` when the payloads are identical.
    pub first_difference_offset: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_excerpt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_excerpt: Option<String>,
    #[serde(flatten)]
    pub lines: Option<LineSummary>,
}

/// The line differences of two text payloads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineSummary {
    pub line_differences: Vec<LineDifference>,
    pub line_difference_count: usize,
    pub truncated: bool,
}

/// One differing line; a side is `null` when that payload has fewer lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineDifference {
    pub line: usize,
    pub stored: Option<String>,
    pub received: Option<String>,
}

/// `ResolveResponse` of a reject.
#[derive(Debug, Clone, Serialize)]
pub struct Rejected {
    pub quarantine_id: String,
    pub status: &'static str,
    pub resolution: QuarantineResolution,
    pub event: ResolutionEvent,
}

/// `ResolveResponse` of an accept.
#[derive(Debug, Clone, Serialize)]
pub struct Accepted {
    pub quarantine_id: String,
    pub status: &'static str,
    pub original_delivery_key: String,
    pub new_delivery_key: String,
    pub resolution: QuarantineResolution,
}

/// `DeliveryStatus`: the replay record, or (after TTL deleted it) a note, and the entries.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DeliveryStatus {
    Stored {
        #[serde(flatten)]
        record: Box<ReplayRecord>,
        artifact: ArtifactRef,
        quarantine: Vec<EntryBody>,
    },
    Unrecorded {
        delivery_key: String,
        /// Always `null`: no record is stored under the key.
        state: Option<String>,
        note: &'static str,
        quarantine: Vec<EntryBody>,
    },
}

/// `DeliveryStatus.artifact`.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactRef {
    pub key: String,
    pub sha256: String,
}

/// `ArtifactLink`: a presigned download link.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactLink {
    pub artifact_key: String,
    pub sha256: String,
    pub url: String,
    pub method: &'static str,
    pub expires_in_seconds: u64,
    pub of: ArtifactOf,
}

impl ArtifactLink {
    pub fn new(key: &str, sha256: &str, url: String, of: ArtifactOf) -> Self {
        Self {
            artifact_key: key.to_owned(),
            sha256: sha256.to_owned(),
            url,
            method: "GET",
            expires_in_seconds: PRESIGN_SECONDS,
            of,
        }
    }
}

/// `ArtifactLink.of`: what the artifact belongs to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArtifactOf {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation_id: Option<ObservationId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_id: Option<String>,
}

/// `RunStatus` (`GET /v1/runs/{run_id}`): the run and its pages.
#[derive(Debug, Clone, Serialize)]
pub struct RunBody {
    #[serde(flatten)]
    pub run: Run,
    pub pages_requested: Vec<u32>,
    pub pages_committed: Vec<u32>,
    pub pages_missing: Vec<u32>,
    pub all_pages_committed: bool,
    pub delivery_keys: Vec<String>,
}

/// `PullStarted` (`POST /v1/connectors/{id}/runs`).
#[derive(Debug, Clone, Serialize)]
pub struct PullStarted {
    #[serde(flatten)]
    pub export: ExportRun,
    pub status: &'static str,
    /// The run's status before this start; `null` for a new run.
    pub run_status: Option<RunStatus>,
    pub pages_to_compare: usize,
    pub pages_to_commit: usize,
    pub run: String,
}

/// `ConnectorList` (`GET /v1/connectors`).
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorList {
    pub as_of: String,
    pub connectors: Vec<ConnectorView>,
}

/// `DefinitionStored` (`PUT /v1/connectors/{id}`): the version now current, and whether this
/// request `created` the connector, `updated` it or found it `unchanged`.
#[derive(Debug, Clone, Serialize)]
pub struct DefinitionStored {
    pub connector: String,
    pub version: u64,
    pub outcome: &'static str,
}

/// `ConnectorDefinition` (`GET /v1/connectors/{id}`): the current definition as it was sent
/// (`null` for a connector configured before definitions, version 0) and every version.
#[derive(Debug, Clone, Serialize)]
pub struct DefinitionView {
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    /// `webhook`, `pull` or `drop`.
    pub transport: &'static str,
    pub payload_format: PayloadFormat,
    pub version: u64,
    pub definition: Option<serde_json::Value>,
    pub versions: Vec<DefinitionSummary>,
}

/// One stored version, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct DefinitionSummary {
    pub version: u64,
    pub recorded_at: Timestamp,
    pub recorded_by: Option<String>,
}

/// One connector of `ConnectorList`.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorView {
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    /// `pull` or `push`.
    pub kind: &'static str,
    pub payload_format: PayloadFormat,
    pub identity_rule: IdentityRule,
    pub open_quarantines: usize,
    pub source_quarantine: SourceQuarantineState,
    pub freshness: Freshness,
}

/// Whether a connector's source is quarantined, and since when (`null` when it is not).
#[derive(Debug, Clone, Serialize)]
pub struct SourceQuarantineState {
    pub active: bool,
    pub since: Option<Timestamp>,
}

/// The newest current claim of a source: the age a reader would see (`null`s when none).
#[derive(Debug, Clone, Serialize)]
pub struct Freshness {
    pub items: usize,
    pub newest_observed_at: Option<String>,
    pub age_seconds: Option<i64>,
    pub last_delivery: Option<LastDelivery>,
}

/// The delivery of the most recently retrieved current offer.
#[derive(Debug, Clone, Serialize)]
pub struct LastDelivery {
    pub delivery_key: String,
    pub retrieved_at: String,
}

/// `ItemTimeline` (`GET /v1/items/{item}/timeline`).
#[derive(Debug, Clone, Serialize)]
pub struct ItemTimeline {
    pub item: String,
    pub as_of: String,
    pub claims: Vec<TimelineClaim>,
    pub truncated: bool,
    pub quarantined: Vec<QuarantinedClaim>,
    pub quarantined_entries: usize,
}

/// A claim of the timeline: a history entry marked current or not, with its retrieval lag.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineClaim {
    #[serde(flatten)]
    pub claim: HistoryEntry,
    pub current: bool,
    pub retrieval_lag_seconds: Option<i64>,
}

/// What a quarantined payload claimed about an item: its rows' claims when it could be read,
/// else one entry saying why not (`readable: false`, `reason`).
#[derive(Debug, Clone, Serialize)]
pub struct QuarantinedClaim {
    pub quarantine_id: String,
    pub status: String,
    pub reason_code: String,
    pub delivery_key: Option<String>,
    pub first_seen_at: String,
    pub readable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub row: Option<QuarantinedRow>,
    /// What the payload was read under now: its connector's current definition version and
    /// today's normalizer (absent when there were no rules to read it with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_under: Option<crate::domain::model::Derivation>,
}

/// One row of a quarantined payload, as the connector's rules read it.
#[derive(Debug, Clone, Serialize)]
pub struct QuarantinedRow {
    pub source_record: String,
    pub quantity: Quantity,
    pub price: String,
    pub currency: String,
    pub observed_at: String,
}

/// A connector definition refused (HTTP 422): the error, and every problem with its JSON
/// pointer (docs/openapi.yaml `DefinitionProblems`).
#[derive(Debug, Clone, Serialize)]
pub struct DefinitionProblems {
    pub error: DefinitionError,
    pub problems: Vec<crate::domain::definition::Problem>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DefinitionError {
    pub code: &'static str,
    pub message: String,
}
