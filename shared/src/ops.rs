//! The operators' API (DESIGN.md sections 1 and 7): delivery status, runs, quarantine review and
//! resolution, identity corrections, source quarantines, pull runs, and short-lived links to the
//! literal payloads for auditors. Every route needs the `ops:write` scope and is scoped to the
//! caller's tenant: another tenant's records answer 404, exactly like records that do not exist.
//!
//! Routes (transport-independent: API Gateway and the local stack both build an `OpsRequest`):
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/deliveries/{delivery_key}` | replay record + quarantine entries of the key |
//! | `GET /v1/deliveries/{delivery_key}/artifact` | presigned link to the delivery's raw artifact |
//! | `GET /v1/observations/{id}/artifact` | presigned link to the observation's raw artifact |
//! | `GET /v1/artifacts/{observation id, quarantine id or delivery key}` | the same links |
//! | `GET /v1/runs/{run_id}` | the run record, missing pages, committed deliveries |
//! | `GET /v1/quarantine[?status=open\|accepting\|accepted\|rejected\|all]` | the tenant's entries |
//! | `GET /v1/quarantine/{id}` | the entry, its resolution, and for a mismatch a payload diff |
//! | `GET /v1/quarantine/{id}/artifact` | presigned link to the quarantined evidence |
//! | `POST /v1/quarantine/{id}/resolve` | `reject`, or `accept_as_new_delivery` under a stated id |
//! | `POST /v1/identity-corrections` | `corrections::CorrectionService::correct` (201; 200 when already in force) |
//! | `GET /v1/identity-corrections/{id}` | the correction, whether in force, what it re-attributed |
//! | `POST /v1/identity-corrections/{id}/withdraw` | a withdrawal: a new record (201) |
//! | `POST /v1/source-quarantines` | `operations::quarantine_source` (201; 409 `already_quarantined`) |
//! | `GET /v1/source-quarantines/{connector}` | the state and every set and lift |
//! | `POST /v1/source-quarantines/{connector}/lift` | `operations::lift_source_quarantine` (200; 409 `not_quarantined`) |
//! | `POST /v1/connectors/{id}/runs` | `PullService::run_connector` (202) |
//!
//! Operator records are append-only: each resolution step, each correction and each source
//! quarantine set or lift is its own record, never rewritten (`aws/corrections.rs`).
//!
//! Resolving never rewrites evidence: a rejected entry only changes `status`; an accepted one
//! becomes a *new* delivery under the operator's stated identity (basis `operator`) whose body
//! is a claim check on the quarantined payload's own raw artifact, so the original delivery,
//! its observations and its artifact stay exactly as they were.

use crate::aws::dynamo::DynamoEvidenceStore;
use crate::aws::s3::S3ArtifactStore;
use crate::domain::canonical_json::{parse_document, JsonValue};
use crate::protocols::corrections::{CorrectionError, CorrectionRequest, CorrectionService};
use crate::domain::envelope::{BodyRef, DeliveryEnvelope, DeliveryIdentity, ENVELOPE_VERSION};
use crate::protocols::http::HttpResponse;
use crate::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, ObservationId, RunId, SourceAccount,
    SourceDeliveryId, TenantId,
};
use crate::intake::DeliveryQueue;
use crate::domain::item::CanonicalItem;
use crate::domain::model::{QuarantineEntry, QuarantineKind, SourceRef, QUARANTINE_OPEN};
use crate::protocols::operations::{
    lift_source_quarantine, quarantine_source, source_quarantine_view, OperationError,
};
use crate::intake::poller::{PullError, PullService};
use crate::protocols::ports::{ArtifactError, ArtifactStore, Clock, ConnectorDirectory, StoreError};
use crate::protocols::projection::EvidenceReads;
use crate::protocols::query::Principal;
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};

/// The scope every ops route requires (the JWT authorizer's scope; locally the token's).
pub const OPS_SCOPE: &str = "ops:write";
/// Lifetime of a presigned artifact link.
pub const PRESIGN_SECONDS: u64 = 300;
/// At most this many differences are listed in a quarantine diff.
pub const MAX_DIFF_ENTRIES: usize = 200;
/// Artifacts larger than this are not downloaded to compute a diff.
pub const MAX_DIFF_BYTES: u64 = 16 * 1024 * 1024;
/// Request bodies of the ops routes are small JSON documents.
pub const MAX_OPS_BODY_BYTES: usize = 64 * 1024;
/// The delivery identity basis of a delivery an operator accepted from quarantine.
pub const OPERATOR_BASIS: &str = "operator";

/// Quarantine statuses. `accepting` is the short step between claiming an entry for an
/// accept and the new delivery being on the ingest queue; an accept retried with the same
/// delivery id resumes it.
pub const STATUS_OPEN: &str = QUARANTINE_OPEN;
pub const STATUS_ACCEPTING: &str = "accepting";
pub const STATUS_ACCEPTED: &str = "accepted";
pub const STATUS_REJECTED: &str = "rejected";

pub const ACTION_REJECT: &str = "reject";
pub const ACTION_ACCEPT: &str = "accept_as_new_delivery";

/// One ops call, whatever the transport.
#[derive(Debug, Clone, Default)]
pub struct OpsRequest {
    pub method: String,
    /// Decoded path, e.g. `/v1/deliveries/demo/acme-eu/ACC-1/EXP-8821/2`.
    pub path: String,
    pub query: HashMap<String, String>,
    /// From the authorizer; `None` when the caller is not authenticated.
    pub principal: Option<Principal>,
    pub body: Vec<u8>,
}

/// Stored beside a quarantine entry (attribute `resolution`) once an operator acted on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineResolution {
    /// `reject` or `accept_as_new_delivery`.
    pub action: String,
    pub reason: String,
    /// For an accept: the operator-stated source delivery id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    /// For an accept: the key of the new delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_delivery_key: Option<String>,
    pub requested_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Timestamp>,
}

/// One operator action on a quarantine entry (`QUAR#{id}` / `RES#{at}#{action}`), append-only:
/// `rejected`, `accept_requested` (the entry is claimed and its payload is being enqueued as a
/// new delivery) and `accepted` (the new delivery is on the ingest queue).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionEvent {
    pub action: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_delivery_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    pub at: Timestamp,
}

pub const EVENT_REJECTED: &str = "rejected";
pub const EVENT_ACCEPT_REQUESTED: &str = "accept_requested";
pub const EVENT_ACCEPTED: &str = "accepted";

/// What an ops route answers when it does not succeed. Only `Unavailable` carries internals,
/// and those are logged, never returned.
#[derive(Debug)]
enum OpsError {
    NotFound(String),
    UnknownConnector(String),
    Invalid(String),
    AlreadyResolved(String),
    /// The request conflicts with the current state (a stable code, HTTP 409).
    Conflict(&'static str, String),
    SupplierUnavailable(String),
    Unavailable {
        public: &'static str,
        internal: String,
    },
}

impl From<StoreError> for OpsError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable {
            public: "the evidence store is unavailable; retry later",
            internal: e.to_string(),
        }
    }
}

impl OpsError {
    fn archive(e: impl std::fmt::Display) -> Self {
        Self::Unavailable {
            public: "the raw archive is unavailable; retry later",
            internal: e.to_string(),
        }
    }

    fn into_response(self) -> HttpResponse {
        match self {
            Self::NotFound(m) => HttpResponse::error(404, "not_found", &m),
            Self::UnknownConnector(m) => HttpResponse::error(404, "unknown_connector", &m),
            Self::Invalid(m) => HttpResponse::error(400, "invalid_request", &m),
            Self::AlreadyResolved(m) => HttpResponse::error(409, "already_resolved", &m),
            Self::Conflict(code, m) => HttpResponse::error(409, code, &m),
            Self::SupplierUnavailable(m) => HttpResponse::error(502, "supplier_unavailable", &m),
            Self::Unavailable { public, internal } => {
                error!(error = %internal, "ops request failed");
                HttpResponse::error(503, "unavailable", public)
            }
        }
    }
}

type OpsResult = Result<(u16, Value), OpsError>;

/// Reads and presigned links on the raw bucket. The ops function's role may read objects;
/// links are signed with its credentials and expire after `PRESIGN_SECONDS`.
#[derive(Clone, Debug)]
pub struct RawArchive {
    client: aws_sdk_s3::Client,
    store: S3ArtifactStore,
}

/// The parts of an archived object's metadata a new delivery envelope needs.
#[derive(Debug, Clone)]
pub struct ArchivedObject {
    pub size: u64,
    pub content_type: Option<String>,
    pub version_id: Option<String>,
    pub retrieved_at: Option<Timestamp>,
}

impl RawArchive {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        let bucket = bucket.into();
        Self {
            store: S3ArtifactStore::new(client.clone(), bucket),
            client,
        }
    }

    pub fn bucket(&self) -> &str {
        self.store.bucket()
    }

    /// Reads an object, refusing objects larger than `limit`.
    pub async fn read(&self, key: &str, limit: u64) -> Result<Vec<u8>, ArtifactError> {
        self.store.fetch(self.bucket(), key, None, limit).await
    }

    /// Size, content type, version and `retrieved-at` metadata of an object; `None` if absent.
    pub async fn head(&self, key: &str) -> Result<Option<ArchivedObject>, ArtifactError> {
        match self
            .client
            .head_object()
            .bucket(self.bucket())
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(ArchivedObject {
                size: out.content_length().unwrap_or(0).max(0) as u64,
                content_type: out.content_type().map(str::to_owned),
                version_id: out.version_id().map(str::to_owned),
                retrieved_at: out
                    .metadata()
                    .and_then(|m| m.get("retrieved-at"))
                    .and_then(|t| Timestamp::parse(t).ok()),
            })),
            Err(e) if e.raw_response().map(|r| r.status().as_u16()) == Some(404) => Ok(None),
            Err(e) => Err(ArtifactError::Unavailable(
                anyhow::Error::new(e).context("head raw artifact"),
            )),
        }
    }

    /// A presigned `GET` for `key`, valid for `PRESIGN_SECONDS`.
    pub async fn presign(&self, key: &str) -> Result<String, anyhow::Error> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(Duration::from_secs(
            PRESIGN_SECONDS,
        ))?;
        let request = self
            .client
            .get_object()
            .bucket(self.bucket())
            .key(key)
            .presigned(config)
            .await?;
        Ok(request.uri().to_owned())
    }
}

pub struct OpsService {
    evidence: Arc<DynamoEvidenceStore>,
    archive: RawArchive,
    queue: Arc<dyn DeliveryQueue>,
    pull: Option<Arc<PullService>>,
    clock: Arc<dyn Clock>,
    corrections: CorrectionService,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    action: String,
    reason: String,
    #[serde(default)]
    delivery_id: Option<String>,
}

/// `to_item` as an item key (`AX-440~rB~each~new`) or as its parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum ItemSpec {
    Key(String),
    Parts {
        part_number: String,
        #[serde(default)]
        revision: Option<String>,
        #[serde(default)]
        packaging_unit: Option<String>,
        #[serde(default)]
        condition: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CorrectionBody {
    connector: String,
    #[serde(default)]
    source_account: Option<String>,
    from_item: String,
    to_item: ItemSpec,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LiftBody {
    #[serde(default)]
    source_account: Option<String>,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceQuarantineBody {
    connector: String,
    #[serde(default)]
    source_account: Option<String>,
    reason: String,
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, OpsError> {
    if body.len() > MAX_OPS_BODY_BYTES {
        return Err(OpsError::Invalid(format!(
            "the request body is larger than {MAX_OPS_BODY_BYTES} bytes"
        )));
    }
    serde_json::from_slice(body).map_err(|e| OpsError::Invalid(format!("request body: {e}")))
}

fn reason_of(reason: &str) -> Result<String, OpsError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(OpsError::Invalid("a reason is required".into()));
    }
    if reason.len() > 2000 {
        return Err(OpsError::Invalid(
            "the reason is longer than 2000 bytes".into(),
        ));
    }
    Ok(reason.to_owned())
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn entry_json(entry: &QuarantineEntry, resolution: Option<&QuarantineResolution>) -> Value {
    let mut value = to_json(entry);
    value["resolution"] = resolution.map(to_json).unwrap_or(Value::Null);
    value
}

/// An entry with its append-only resolution history. The entry's `resolution` holds the first
/// decision as it was requested; when it was carried out is in the history.
fn entry_with_history(
    entry: &QuarantineEntry,
    resolution: Option<&QuarantineResolution>,
    history: &[ResolutionEvent],
) -> Value {
    let mut value = entry_json(entry, resolution);
    if let (Some(done), Some(r)) = (
        history
            .iter()
            .rev()
            .find(|e| e.action == EVENT_ACCEPTED || e.action == EVENT_REJECTED),
        value.get_mut("resolution").filter(|r| r.is_object()),
    ) {
        r["resolved_at"] = json!(done.at);
    }
    value["resolutions"] = to_json(&history);
    value
}

impl OpsService {
    /// `pull` is `None` where no export source is wired; `POST /v1/connectors/{id}/runs` then
    /// answers 503.
    pub fn new(
        evidence: Arc<DynamoEvidenceStore>,
        archive: RawArchive,
        queue: Arc<dyn DeliveryQueue>,
        pull: Option<Arc<PullService>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let corrections = CorrectionService::new(
            evidence.clone(),
            evidence.clone(),
            evidence.clone(),
            clock.clone(),
            Arc::new(crate::protocols::ports::NoFaults),
        );
        Self {
            evidence,
            archive,
            queue,
            pull,
            clock,
            corrections,
        }
    }

    /// The same service with another corrections service (tests: a lagging index, a crash).
    pub fn with_corrections(mut self, corrections: CorrectionService) -> Self {
        self.corrections = corrections;
        self
    }

    /// The tenant's connector, or `unknown_connector` (another tenant's answers the same).
    async fn tenant_connector(
        &self,
        principal: &Principal,
        connector: &str,
    ) -> Result<crate::domain::connector::ConnectorConfig, OpsError> {
        let unknown = || OpsError::UnknownConnector(format!("no connector {connector:?}"));
        let id = ConnectorId::parse(connector).map_err(|_| unknown())?;
        match ConnectorDirectory::connector(self.evidence.as_ref(), &id).await? {
            Some(config) if config.tenant == principal.tenant => Ok(config),
            _ => Err(unknown()),
        }
    }

    fn owns_key(principal: &Principal, delivery_key: &str) -> bool {
        delivery_key.split('/').next() == Some(principal.tenant.as_str())
    }

    async fn quarantine_of_key(
        &self,
        tenant: &TenantId,
        delivery_key: &str,
    ) -> Result<Vec<Value>, OpsError> {
        Ok(self
            .evidence
            .quarantine_list_with_resolution::<QuarantineResolution>(tenant)
            .await?
            .iter()
            .filter(|(e, _)| e.delivery_key.as_deref() == Some(delivery_key))
            .map(|(e, r)| entry_json(e, r.as_ref()))
            .collect())
    }

    /// `GET /v1/deliveries/{key}`.
    async fn delivery(&self, principal: &Principal, key: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("delivery {key} not found"));
        if !Self::owns_key(principal, key) {
            return Err(not_found());
        }
        let record = self.evidence.replay_record(key).await?;
        let quarantine = self.quarantine_of_key(&principal.tenant, key).await?;
        let body = match record {
            Some(record) if record.tenant == principal.tenant => {
                let mut body = to_json(&record);
                body["artifact"] = json!({
                    "key": record.artifact_key,
                    "sha256": record.payload_sha256,
                });
                body["quarantine"] = Value::Array(quarantine);
                body
            }
            Some(_) => return Err(not_found()),
            // The record expired and TTL deleted it, yet entries under the key remain.
            None if !quarantine.is_empty() => json!({
                "delivery_key": key,
                "state": null,
                "note": "no replay record under this key (never stored, or deleted after its dedup horizon)",
                "quarantine": quarantine,
            }),
            None => return Err(not_found()),
        };
        Ok((200, body))
    }

    async fn artifact_link(&self, key: &str, sha256: &str, of: Value) -> OpsResult {
        let url = self.archive.presign(key).await.map_err(OpsError::archive)?;
        Ok((
            200,
            json!({
                "artifact_key": key,
                "sha256": sha256,
                "url": url,
                "method": "GET",
                "expires_in_seconds": PRESIGN_SECONDS,
                "of": of,
            }),
        ))
    }

    async fn delivery_artifact(&self, principal: &Principal, key: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("delivery {key} not found"));
        if !Self::owns_key(principal, key) {
            return Err(not_found());
        }
        let record = self
            .evidence
            .replay_record(key)
            .await?
            .filter(|r| r.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        self.artifact_link(
            &record.artifact_key,
            &record.payload_sha256,
            json!({"delivery_key": key}),
        )
        .await
    }

    async fn observation_artifact(&self, principal: &Principal, id: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("observation {id} not found"));
        let id = ObservationId::parse(id).map_err(|_| not_found())?;
        let observation = self
            .evidence
            .observation(id.as_str())
            .await?
            .filter(|o| o.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        self.artifact_link(
            &observation.artifact_key,
            &observation.artifact_sha256,
            json!({"observation_id": id, "delivery_key": observation.delivery_key}),
        )
        .await
    }

    async fn quarantine_artifact(&self, principal: &Principal, id: &str) -> OpsResult {
        let (entry, _) = self.entry(principal, id).await?;
        self.artifact_link(
            &entry.evidence_key,
            &entry.evidence_sha256,
            json!({"quarantine_id": id}),
        )
        .await
    }

    /// `GET /v1/artifacts/{x}`: an observation id, a quarantine id or a delivery key.
    async fn artifact(&self, principal: &Principal, target: &str) -> OpsResult {
        if ObservationId::parse(target).is_ok() {
            return self.observation_artifact(principal, target).await;
        }
        if !target.contains('/') && (target.starts_with("q_") || target.starts_with("r_")) {
            return self.quarantine_artifact(principal, target).await;
        }
        self.delivery_artifact(principal, target).await
    }

    /// `GET /v1/runs/{run_id}`: the run, the pages it requested, committed and misses, and the
    /// delivery that committed each page (from the page records).
    async fn run(&self, principal: &Principal, run_id: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("run {run_id} not found"));
        let id = RunId::parse(run_id).map_err(|_| not_found())?;
        let run = EvidenceReads::run(self.evidence.as_ref(), id.as_str())
            .await?
            .filter(|r| r.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        let pages = self.evidence.run_pages(id.as_str()).await?;
        let mut body = to_json(&run);
        body["pages_requested"] = json!(match (run.status, run.page_count) {
            (Some(_), Some(count)) => (1..=count).collect::<Vec<u32>>(),
            _ => Vec::new(),
        });
        body["pages_committed"] = json!(pages.committed());
        body["pages_missing"] = json!(pages.missing(run.page_count));
        body["all_pages_committed"] = json!(pages.all_committed(run.page_count));
        body["delivery_keys"] = json!(pages
            .pages
            .iter()
            .map(|p| p.delivery_key.as_str())
            .collect::<Vec<_>>());
        Ok((200, body))
    }

    /// `GET /v1/quarantine[?status=...]`: open entries unless another status (or `all`) is asked.
    async fn quarantine_list(&self, principal: &Principal, status: Option<&str>) -> OpsResult {
        let status = status.unwrap_or(STATUS_OPEN);
        if ![
            STATUS_OPEN,
            STATUS_ACCEPTING,
            STATUS_ACCEPTED,
            STATUS_REJECTED,
            "all",
        ]
        .contains(&status)
        {
            return Err(OpsError::Invalid(
                "status must be open, accepting, accepted, rejected or all".into(),
            ));
        }
        let entries: Vec<Value> = self
            .evidence
            .quarantine_list_with_resolution::<QuarantineResolution>(&principal.tenant)
            .await?
            .iter()
            .filter(|(e, _)| status == "all" || e.status == status)
            .map(|(e, r)| entry_json(e, r.as_ref()))
            .collect();
        Ok((
            200,
            json!({"tenant": principal.tenant, "status": status, "count": entries.len(), "entries": entries}),
        ))
    }

    async fn entry(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<(QuarantineEntry, Option<QuarantineResolution>), OpsError> {
        let not_found = || OpsError::NotFound(format!("quarantine entry {id} not found"));
        if id.is_empty()
            || id.len() > 128
            || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(not_found());
        }
        self.evidence
            .quarantine_entry_with_resolution::<QuarantineResolution>(id)
            .await?
            .filter(|(e, _)| e.tenant == principal.tenant.as_str())
            .ok_or_else(not_found)
    }

    /// `GET /v1/quarantine/{id}`: the entry, its resolution and, for a mismatch, what differs
    /// between the stored payload and the quarantined one.
    async fn quarantine_show(&self, principal: &Principal, id: &str) -> OpsResult {
        let (entry, resolution) = self.entry(principal, id).await?;
        let history = self.evidence.quarantine_resolutions(id).await?;
        let mut body = entry_with_history(&entry, resolution.as_ref(), &history);
        if entry.kind == QuarantineKind::Mismatch {
            body["diff"] = self.mismatch_diff(&entry).await;
        }
        Ok((200, body))
    }

    /// The payload the mismatch was judged against (the entry's own `stored_artifact_key`,
    /// never the key's current record, which a later epoch may have replaced) against the
    /// quarantined one. Degrades to a reason instead of failing the whole answer.
    async fn mismatch_diff(&self, entry: &QuarantineEntry) -> Value {
        let Some(stored_key) = entry.stored_artifact_key.clone() else {
            return json!({"available": false, "reason": "the entry does not record the stored payload's artifact"});
        };
        let (stored, received) = match (
            self.archive.read(&stored_key, MAX_DIFF_BYTES).await,
            self.archive.read(&entry.evidence_key, MAX_DIFF_BYTES).await,
        ) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e), _) | (_, Err(e)) => {
                let reason = match e {
                    ArtifactError::TooLarge { .. } => {
                        format!("a payload is larger than {MAX_DIFF_BYTES} bytes; compare the artifacts directly")
                    }
                    ArtifactError::NotFound { key } => format!("artifact {key} is missing"),
                    other => {
                        warn!(error = %other, "raw archive unreadable for a diff");
                        "the raw archive is unavailable; retry later".to_owned()
                    }
                };
                return json!({"available": false, "reason": reason});
            }
        };
        let mut diff = payload_diff(&stored, &received);
        diff["available"] = json!(true);
        diff["stored_artifact_key"] = json!(stored_key);
        diff["received_artifact_key"] = json!(entry.evidence_key);
        diff
    }

    /// `POST /v1/quarantine/{id}/resolve`.
    async fn resolve(&self, principal: &Principal, id: &str, body: &[u8]) -> OpsResult {
        let request: ResolveBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        let (entry, resolution) = self.entry(principal, id).await?;
        match request.action.as_str() {
            ACTION_REJECT => {
                if request.delivery_id.is_some() {
                    return Err(OpsError::Invalid(
                        "delivery_id belongs to accept_as_new_delivery".into(),
                    ));
                }
                self.reject(&entry, reason, actor_of(principal)).await
            }
            ACTION_ACCEPT => {
                let Some(delivery_id) = request.delivery_id else {
                    return Err(OpsError::Invalid(
                        "accept_as_new_delivery needs delivery_id: the identity the payload is stored under".into(),
                    ));
                };
                self.accept(
                    &entry,
                    resolution,
                    &delivery_id,
                    reason,
                    actor_of(principal),
                )
                .await
            }
            other => Err(OpsError::Invalid(format!(
                "action {other:?} is not reject or accept_as_new_delivery"
            ))),
        }
    }

    fn already_resolved(entry: &QuarantineEntry, status: &str) -> OpsError {
        OpsError::AlreadyResolved(format!(
            "quarantine entry {} is {status}, not open",
            entry.quarantine_id
        ))
    }

    async fn current_status(&self, id: &str) -> Result<String, OpsError> {
        Ok(self
            .evidence
            .quarantine_entry_with_resolution::<QuarantineResolution>(id)
            .await?
            .map(|(e, _)| e.status)
            .unwrap_or_else(|| "gone".into()))
    }

    async fn reject(
        &self,
        entry: &QuarantineEntry,
        reason: String,
        actor: Option<String>,
    ) -> OpsResult {
        if entry.status != STATUS_OPEN {
            return Err(Self::already_resolved(entry, &entry.status));
        }
        let now = self.clock.now();
        let resolution = QuarantineResolution {
            action: ACTION_REJECT.into(),
            reason: reason.clone(),
            delivery_id: None,
            new_delivery_key: None,
            requested_at: now,
            resolved_at: Some(now),
        };
        let event = ResolutionEvent {
            action: EVENT_REJECTED.into(),
            reason,
            delivery_id: None,
            new_delivery_key: None,
            actor,
            at: now,
        };
        if !self
            .evidence
            .resolve_quarantine(
                &entry.quarantine_id,
                STATUS_OPEN,
                STATUS_REJECTED,
                Some(&resolution),
                &event,
                now,
                EVENT_REJECTED,
            )
            .await?
        {
            let status = self.current_status(&entry.quarantine_id).await?;
            return Err(Self::already_resolved(entry, &status));
        }
        info!(quarantine_id = %entry.quarantine_id, "quarantine entry rejected");
        Ok((
            200,
            json!({"quarantine_id": entry.quarantine_id, "status": STATUS_REJECTED, "resolution": resolution, "event": event}),
        ))
    }

    async fn accept(
        &self,
        entry: &QuarantineEntry,
        existing: Option<QuarantineResolution>,
        delivery_id: &str,
        reason: String,
        actor: Option<String>,
    ) -> OpsResult {
        if entry.kind != QuarantineKind::Mismatch {
            return Err(OpsError::Invalid(
                "only a replay_payload_mismatch entry holds a payload that can be accepted as a new delivery".into(),
            ));
        }
        let original = entry
            .delivery_key
            .as_deref()
            .ok_or_else(|| OpsError::Invalid("the entry names no delivery key".into()))?;
        let original_key = parse_delivery_key(original).ok_or_else(|| OpsError::Unavailable {
            public: "the quarantine entry is unreadable",
            internal: format!(
                "quarantine {} has an unparsable delivery key",
                entry.quarantine_id
            ),
        })?;
        let stated = SourceDeliveryId::parse(delivery_id)
            .map_err(|e| OpsError::Invalid(format!("delivery_id: {e}")))?;
        let new_key = DeliveryKey::new(
            original_key.tenant.clone(),
            original_key.connector.clone(),
            original_key.source_account.clone(),
            stated,
            IdentityStrength::Source,
        );
        let new_key_text = new_key.as_string();
        if new_key_text == original || delivery_id == original_key.source_delivery_id.as_str() {
            return Err(OpsError::Invalid(format!(
                "delivery_id {delivery_id:?} is the original delivery's identity; state a new one (e.g. {}-corrected)",
                original_key.source_delivery_id
            )));
        }
        match entry.status.as_str() {
            STATUS_OPEN => {}
            // A previous accept with the same identity stopped before it finished: resume it.
            STATUS_ACCEPTING
                if existing
                    .as_ref()
                    .and_then(|r| r.new_delivery_key.as_deref())
                    == Some(new_key_text.as_str()) => {}
            other => return Err(Self::already_resolved(entry, other)),
        }
        if let Some(taken) = self.evidence.replay_record(&new_key_text).await? {
            if taken.payload_sha256 != entry.evidence_sha256 {
                return Err(OpsError::Invalid(format!(
                    "delivery {new_key_text} already exists with another payload; state another delivery_id"
                )));
            }
        }
        let object = self
            .archive
            .head(&entry.evidence_key)
            .await
            .map_err(OpsError::archive)?
            .ok_or_else(|| OpsError::Unavailable {
                public: "the quarantined payload's raw artifact is missing",
                internal: format!("artifact {} is missing", entry.evidence_key),
            })?;
        let now = self.clock.now();
        let mut resolution = match (entry.status.as_str(), existing) {
            (STATUS_ACCEPTING, Some(existing)) => existing,
            _ => QuarantineResolution {
                action: ACTION_ACCEPT.into(),
                reason,
                delivery_id: Some(delivery_id.to_owned()),
                new_delivery_key: Some(new_key_text.clone()),
                requested_at: now,
                resolved_at: None,
            },
        };
        if entry.status == STATUS_OPEN {
            let event = ResolutionEvent {
                action: EVENT_ACCEPT_REQUESTED.into(),
                reason: resolution.reason.clone(),
                delivery_id: resolution.delivery_id.clone(),
                new_delivery_key: resolution.new_delivery_key.clone(),
                actor: actor.clone(),
                at: now,
            };
            if !self
                .evidence
                .resolve_quarantine(
                    &entry.quarantine_id,
                    STATUS_OPEN,
                    STATUS_ACCEPTING,
                    Some(&resolution),
                    &event,
                    now,
                    EVENT_ACCEPT_REQUESTED,
                )
                .await?
            {
                let status = self.current_status(&entry.quarantine_id).await?;
                return Err(Self::already_resolved(entry, &status));
            }
        }
        let content_type = object
            .content_type
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .unwrap_or_else(|| "application/json".into());
        let envelope = DeliveryEnvelope {
            envelope_version: ENVELOPE_VERSION,
            tenant: new_key.tenant.clone(),
            connector: new_key.connector.clone(),
            source_account: new_key.source_account.clone(),
            delivery: DeliveryIdentity {
                id: new_key.source_delivery_id.clone(),
                strength: IdentityStrength::Source,
                basis: OPERATOR_BASIS.into(),
            },
            retrieved_at: object.retrieved_at.unwrap_or(entry.first_seen_at),
            content_type,
            run: None,
            body: BodyRef::S3 {
                bucket: self.archive.bucket().to_owned(),
                key: entry.evidence_key.clone(),
                version_id: object.version_id,
                size: object.size,
            },
        };
        // Enqueueing the same envelope twice is harmless: ingest replays the same key.
        self.queue
            .enqueue(&envelope)
            .await
            .map_err(|e| OpsError::Unavailable {
                public: "the ingest queue is unavailable; retry the same resolve request",
                internal: e.to_string(),
            })?;
        let accepted_at = self.clock.now();
        let event = ResolutionEvent {
            action: EVENT_ACCEPTED.into(),
            reason: resolution.reason.clone(),
            delivery_id: resolution.delivery_id.clone(),
            new_delivery_key: resolution.new_delivery_key.clone(),
            actor,
            at: accepted_at,
        };
        if !self
            .evidence
            .resolve_quarantine::<QuarantineResolution, ResolutionEvent>(
                &entry.quarantine_id,
                STATUS_ACCEPTING,
                STATUS_ACCEPTED,
                None,
                &event,
                accepted_at,
                EVENT_ACCEPTED,
            )
            .await?
        {
            // A concurrent identical accept finished first; the outcome is the same.
            let status = self.current_status(&entry.quarantine_id).await?;
            if status != STATUS_ACCEPTED {
                return Err(Self::already_resolved(entry, &status));
            }
        }
        resolution.resolved_at = Some(accepted_at);
        info!(quarantine_id = %entry.quarantine_id, new_delivery_key = %new_key_text, "quarantined payload accepted as a new delivery");
        Ok((
            200,
            json!({
                "quarantine_id": entry.quarantine_id,
                "status": STATUS_ACCEPTED,
                "original_delivery_key": original,
                "new_delivery_key": new_key_text,
                "resolution": resolution,
            }),
        ))
    }

    fn source_of(
        principal: &Principal,
        config: &crate::domain::connector::ConnectorConfig,
        account: Option<&str>,
    ) -> Result<SourceRef, OpsError> {
        let source_account = match account {
            None => config.source_account.clone(),
            Some(text) => {
                let account = SourceAccount::parse(text)
                    .map_err(|e| OpsError::Invalid(format!("source_account: {e}")))?;
                if account != config.source_account {
                    return Err(OpsError::Invalid(format!(
                        "connector {} delivers source account {}, not {text}",
                        config.connector, config.source_account
                    )));
                }
                account
            }
        };
        Ok(SourceRef {
            tenant: principal.tenant.clone(),
            connector: config.connector.clone(),
            source_account,
        })
    }

    /// `POST /v1/identity-corrections`: 201 when recorded, 200 when the same correction was
    /// already in force (it is run again to completion; its record is never rewritten).
    async fn identity_correction(&self, principal: &Principal, body: &[u8]) -> OpsResult {
        let request: CorrectionBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        let config = self.tenant_connector(principal, &request.connector).await?;
        let source = Self::source_of(principal, &config, request.source_account.as_deref())?;
        let to_item = match &request.to_item {
            ItemSpec::Key(key) => CanonicalItem::parse_key(key),
            ItemSpec::Parts {
                part_number,
                revision,
                packaging_unit,
                condition,
            } => CanonicalItem::new(
                part_number,
                revision.as_deref(),
                packaging_unit.as_deref(),
                condition.as_deref(),
            ),
        }
        .map_err(|e| OpsError::Invalid(format!("to_item: {e}")))?;
        let (view, recorded) = self
            .corrections
            .correct(&CorrectionRequest {
                source,
                from_item: request.from_item,
                to_item,
                reason,
                actor: actor_of(principal),
            })
            .await
            .map_err(correction_error)?;
        Ok((if recorded { 201 } else { 200 }, to_json(&view)))
    }

    /// The correction `id` if it belongs to the caller's tenant.
    async fn tenant_correction(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<crate::protocols::corrections::CorrectionView, OpsError> {
        let not_found = || OpsError::NotFound(format!("correction {id} not found"));
        if !id.starts_with("corr_")
            || id.len() > 64
            || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(not_found());
        }
        match self.corrections.view(id).await {
            Ok(view) if view.correction.source.tenant == principal.tenant => Ok(view),
            Ok(_) | Err(CorrectionError::NotFound(_)) => Err(not_found()),
            Err(e) => Err(correction_error(e)),
        }
    }

    /// `GET /v1/identity-corrections/{id}`: the record, whether it is in force (or what
    /// replaced it), every observation it re-attributed and every sweep.
    async fn correction_show(&self, principal: &Principal, id: &str) -> OpsResult {
        Ok((200, to_json(&self.tenant_correction(principal, id).await?)))
    }

    /// `POST /v1/identity-corrections/{id}/withdraw`: a new record; the part's rows belong to
    /// the part again.
    async fn correction_withdraw(&self, principal: &Principal, id: &str, body: &[u8]) -> OpsResult {
        let request: ReasonBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        self.tenant_correction(principal, id).await?;
        let (view, recorded) = self
            .corrections
            .withdraw(id, &reason, actor_of(principal))
            .await
            .map_err(correction_error)?;
        Ok((if recorded { 201 } else { 200 }, to_json(&view)))
    }

    /// `POST /v1/source-quarantines`.
    async fn source_quarantine(&self, principal: &Principal, body: &[u8]) -> OpsResult {
        let request: SourceQuarantineBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        let config = self.tenant_connector(principal, &request.connector).await?;
        let source = Self::source_of(principal, &config, request.source_account.as_deref())?;
        let view = quarantine_source(
            &self.evidence,
            &source,
            &reason,
            actor_of(principal),
            self.clock.now(),
        )
        .await
        .map_err(operation_error)?;
        Ok((201, to_json(&view)))
    }

    /// `POST /v1/source-quarantines/{connector}/lift`.
    async fn source_quarantine_lift(
        &self,
        principal: &Principal,
        connector: &str,
        body: &[u8],
    ) -> OpsResult {
        let request: LiftBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        let config = self.tenant_connector(principal, connector).await?;
        let source = Self::source_of(principal, &config, request.source_account.as_deref())?;
        let view = lift_source_quarantine(
            &self.evidence,
            &source,
            &reason,
            actor_of(principal),
            self.clock.now(),
        )
        .await
        .map_err(operation_error)?;
        Ok((200, to_json(&view)))
    }

    /// `GET /v1/source-quarantines/{connector}[?source_account=...]`: the state and every set
    /// and lift.
    async fn source_quarantine_show(
        &self,
        principal: &Principal,
        connector: &str,
        account: Option<&str>,
    ) -> OpsResult {
        let config = self.tenant_connector(principal, connector).await?;
        let source = Self::source_of(principal, &config, account)?;
        let view = source_quarantine_view(&self.evidence, &source)
            .await
            .map_err(operation_error)?;
        Ok((200, to_json(&view)))
    }

    /// `POST /v1/connectors/{id}/runs`: ingestion authority, operators only.
    async fn start_run(&self, principal: &Principal, connector: &str) -> OpsResult {
        let config = self.tenant_connector(principal, connector).await?;
        let Some(pull) = &self.pull else {
            return Err(OpsError::Unavailable {
                public: "pull runs cannot be started here",
                internal: "no PullService wired into the ops service".into(),
            });
        };
        match pull.run_connector(&config.connector).await {
            Ok(report) => Ok((202, to_json(&report))),
            Err(PullError::UnknownConnector(id)) => {
                Err(OpsError::UnknownConnector(format!("no connector {id:?}")))
            }
            Err(e @ (PullError::NotPullable { .. } | PullError::Misconfigured(_))) => {
                Err(OpsError::Invalid(e.to_string()))
            }
            Err(PullError::FirstPage { attempts, error }) => {
                warn!(connector = %config.connector, attempts, error = %error, "export page 1 unavailable");
                Err(OpsError::SupplierUnavailable(format!(
                    "the supplier's export page 1 could not be fetched after {attempts} attempt(s); no run was started"
                )))
            }
            Err(PullError::BadExport(detail)) => {
                warn!(connector = %config.connector, detail = %detail, "unusable export");
                Err(OpsError::SupplierUnavailable(
                    "the supplier's export page 1 is not a usable export; no run was started"
                        .into(),
                ))
            }
            Err(PullError::Store(e)) => Err(e.into()),
        }
    }
}

fn operation_error(e: OperationError) -> OpsError {
    match e {
        OperationError::Invalid(m) => OpsError::Invalid(m),
        OperationError::State { code, message } => OpsError::Conflict(code, message),
        OperationError::Store(e) => e.into(),
    }
}

fn correction_error(e: CorrectionError) -> OpsError {
    match e {
        CorrectionError::Invalid(m) => OpsError::Invalid(m),
        CorrectionError::NotFound(m) => OpsError::NotFound(m),
        CorrectionError::Conflict(m) => OpsError::Conflict("correction_conflict", m),
        CorrectionError::Store(e) => e.into(),
        e @ CorrectionError::InjectedCrash(_) => OpsError::Unavailable {
            public: "the correction stopped before it finished; send the same request again to complete it",
            internal: e.to_string(),
        },
    }
}

/// The operator named in the audit records: the token's subject, when the authorizer gives one.
fn actor_of(principal: &Principal) -> Option<String> {
    principal.subject.clone()
}

/// `{tenant}/{connector}/{account}/{source delivery id}` (the id may itself contain `/`).
fn parse_delivery_key(text: &str) -> Option<DeliveryKey> {
    let mut parts = text.splitn(4, '/');
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let connector = ConnectorId::parse(parts.next()?).ok()?;
    let account = SourceAccount::parse(parts.next()?).ok()?;
    let id = SourceDeliveryId::parse(parts.next()?).ok()?;
    Some(DeliveryKey::new(
        tenant,
        connector,
        account,
        id,
        IdentityStrength::Source,
    ))
}

fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// Every ops route. Authentication and the `ops:write` scope are checked before anything else.
pub async fn handle_ops(service: &OpsService, request: OpsRequest) -> HttpResponse {
    let Some(principal) = request.principal.as_ref() else {
        return HttpResponse::error(
            401,
            "unauthorized",
            "an operator's bearer token is required",
        );
    };
    if !principal.scopes.iter().any(|s| s == OPS_SCOPE) {
        return HttpResponse::error(403, "forbidden", "the ops:write scope is required");
    }
    let path = request.path.trim_matches('/');
    let method = request.method.as_str();
    let get_only = |method: &str| method == "GET";
    let result = if let Some(rest) = path.strip_prefix("v1/deliveries/") {
        if !get_only(method) {
            return method_not_allowed("GET");
        }
        match rest.strip_suffix("/artifact") {
            // A delivery id may itself end in `/artifact`: fall back to the delivery route.
            Some(key) => match service.delivery_artifact(principal, key).await {
                Err(OpsError::NotFound(_)) => service.delivery(principal, rest).await,
                other => other,
            },
            None => service.delivery(principal, rest).await,
        }
    } else if let Some(rest) = path.strip_prefix("v1/artifacts/") {
        if !get_only(method) {
            return method_not_allowed("GET");
        }
        service.artifact(principal, rest).await
    } else {
        match (method, segments(path).as_slice()) {
            ("GET", ["v1", "runs", run]) => service.run(principal, run).await,
            ("GET", ["v1", "quarantine"]) => {
                service
                    .quarantine_list(principal, request.query.get("status").map(String::as_str))
                    .await
            }
            ("GET", ["v1", "quarantine", id]) => service.quarantine_show(principal, id).await,
            ("GET", ["v1", "quarantine", id, "artifact"]) => {
                service.quarantine_artifact(principal, id).await
            }
            ("POST", ["v1", "quarantine", id, "resolve"]) => {
                service.resolve(principal, id, &request.body).await
            }
            ("POST", ["v1", "identity-corrections"]) => {
                service.identity_correction(principal, &request.body).await
            }
            ("GET", ["v1", "identity-corrections", id]) => {
                service.correction_show(principal, id).await
            }
            ("POST", ["v1", "identity-corrections", id, "withdraw"]) => {
                service
                    .correction_withdraw(principal, id, &request.body)
                    .await
            }
            ("POST", ["v1", "source-quarantines"]) => {
                service.source_quarantine(principal, &request.body).await
            }
            ("POST", ["v1", "source-quarantines", connector, "lift"]) => {
                service
                    .source_quarantine_lift(principal, connector, &request.body)
                    .await
            }
            ("GET", ["v1", "source-quarantines", connector]) => {
                service
                    .source_quarantine_show(
                        principal,
                        connector,
                        request.query.get("source_account").map(String::as_str),
                    )
                    .await
            }
            ("POST", ["v1", "connectors", connector, "runs"]) => {
                service.start_run(principal, connector).await
            }
            ("GET", ["v1", "observations", id, "artifact"]) => {
                service.observation_artifact(principal, id).await
            }
            (
                _,
                ["v1", "runs", _]
                | ["v1", "quarantine"]
                | ["v1", "quarantine", _]
                | ["v1", "quarantine", _, "artifact"]
                | ["v1", "observations", _, "artifact"],
            ) => return method_not_allowed("GET"),
            (_, ["v1", "identity-corrections", _] | ["v1", "source-quarantines", _]) => {
                return method_not_allowed("GET")
            }
            (
                _,
                ["v1", "quarantine", _, "resolve"]
                | ["v1", "identity-corrections"]
                | ["v1", "identity-corrections", _, "withdraw"]
                | ["v1", "source-quarantines"]
                | ["v1", "source-quarantines", _, "lift"]
                | ["v1", "connectors", _, "runs"],
            ) => return method_not_allowed("POST"),
            _ => Err(OpsError::NotFound("no such route".into())),
        }
    };
    match result {
        Ok((status, body)) => HttpResponse::json(status, &body),
        Err(e) => e.into_response(),
    }
}

fn method_not_allowed(allowed: &str) -> HttpResponse {
    HttpResponse::error(
        405,
        "method_not_allowed",
        &format!("this route accepts {allowed} only"),
    )
}

// --- Payload diffs -------------------------------------------------------------------------

/// One leaf difference between two JSON documents, at a JSON pointer. A side is absent when the
/// value exists only on the other side (`change` says `added` or `removed`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonDifference {
    pub path: String,
    /// `changed`, `added` (only in the received payload) or `removed` (only in the stored one).
    pub change: &'static str,
    /// The values as `shown_value` renders them: JSON, except that a number a reader could
    /// round is `{"$number": "<literal>"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonDiff {
    /// The first `cap` differences, in document order (object keys sorted).
    pub differences: Vec<JsonDifference>,
    /// How many differences there are in all.
    pub total: usize,
    pub truncated: bool,
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

struct DiffWalk {
    cap: usize,
    differences: Vec<JsonDifference>,
    total: usize,
}

impl DiffWalk {
    fn push(&mut self, path: &str, stored: Option<&JsonValue>, received: Option<&JsonValue>) {
        self.total += 1;
        if self.differences.len() < self.cap {
            self.differences.push(JsonDifference {
                path: path.to_owned(),
                change: match (stored, received) {
                    (Some(_), Some(_)) => "changed",
                    (None, _) => "added",
                    (_, None) => "removed",
                },
                stored: stored.map(shown_value),
                received: received.map(shown_value),
            });
        }
    }

    // Recursion is bounded: both documents came from the parser, which caps nesting.
    fn walk(&mut self, path: &str, stored: &JsonValue, received: &JsonValue) {
        match (stored, received) {
            (JsonValue::Object(a), JsonValue::Object(b)) => {
                let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for key in keys {
                    let child = format!("{path}/{}", pointer_escape(key));
                    match (a.get(key), b.get(key)) {
                        (Some(x), Some(y)) => self.walk(&child, x, y),
                        (x, y) => self.push(&child, x, y),
                    }
                }
            }
            (JsonValue::Array(a), JsonValue::Array(b)) => {
                for i in 0..a.len().max(b.len()) {
                    let child = format!("{path}/{i}");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => self.walk(&child, x, y),
                        (x, y) => self.push(&child, x, y),
                    }
                }
            }
            // Numbers compare by their literal text: `1.0` and `1.00` differ, and so do two
            // values that only differ beyond f64's precision.
            (a, b) if a == b => {}
            (a, b) => self.push(path, Some(a), Some(b)),
        }
    }
}

/// Leaf differences between two JSON documents: objects by key, arrays index by index, JSON
/// pointer paths (`/offers/0/quantity`); at most `cap` listed. Numbers are compared as written.
pub fn json_diff(stored: &JsonValue, received: &JsonValue, cap: usize) -> JsonDiff {
    let mut walk = DiffWalk {
        cap,
        differences: Vec::new(),
        total: 0,
    };
    walk.walk("", stored, received);
    JsonDiff {
        truncated: walk.total > walk.differences.len(),
        differences: walk.differences,
        total: walk.total,
    }
}

/// The largest integer magnitude every JSON reader holds exactly (JavaScript's f64 included).
const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// A payload value as a diff shows it: plain JSON, except a number that a reader could round or
/// rewrite (a fraction, an exponent, `-0`, an integer beyond 2^53 - 1), which is shown as
/// `{"$number": "<literal>"}` with its text exactly as the payload wrote it.
pub fn shown_value(value: &JsonValue) -> Value {
    match value {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Number(literal) => {
            exact_integer(literal).unwrap_or_else(|| json!({ "$number": literal }))
        }
        JsonValue::String(text) => Value::String(text.clone()),
        JsonValue::Array(items) => Value::Array(items.iter().map(shown_value).collect()),
        JsonValue::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), shown_value(item)))
                .collect(),
        ),
    }
}

/// The literal as a JSON number when it is a plain integer every reader holds exactly.
fn exact_integer(literal: &str) -> Option<Value> {
    let (negative, digits) = match literal.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, literal),
    };
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && !(negative && digits == "0");
    if !plain {
        return None;
    }
    let magnitude: u64 = digits.parse().ok()?;
    if magnitude > MAX_EXACT_INTEGER {
        return None;
    }
    let magnitude = i64::try_from(magnitude).ok()?;
    Some(Value::from(if negative { -magnitude } else { magnitude }))
}

fn excerpt(bytes: &[u8], at: usize) -> String {
    let start = at.saturating_sub(32);
    let end = (at + 64).min(bytes.len());
    String::from_utf8_lossy(&bytes[start.min(end)..end]).into_owned()
}

/// What differs between two payloads that are not both JSON: sizes, the first differing byte
/// with some context and, for text, the differing lines (at most `MAX_DIFF_ENTRIES`).
pub fn byte_summary(stored: &[u8], received: &[u8]) -> Value {
    let common = stored
        .iter()
        .zip(received)
        .take_while(|(a, b)| a == b)
        .count();
    let identical = stored == received;
    let mut summary = json!({
        "format": "bytes",
        "stored_bytes": stored.len(),
        "received_bytes": received.len(),
        "identical": identical,
        "common_prefix_bytes": common,
        "first_difference_offset": if identical { Value::Null } else { json!(common) },
    });
    if !identical {
        summary["stored_excerpt"] = json!(excerpt(stored, common));
        summary["received_excerpt"] = json!(excerpt(received, common));
    }
    if let (Ok(a), Ok(b)) = (std::str::from_utf8(stored), std::str::from_utf8(received)) {
        let a: Vec<&str> = a.lines().collect();
        let b: Vec<&str> = b.lines().collect();
        let clip = |line: &str| line.chars().take(500).collect::<String>();
        let mut lines = Vec::new();
        let mut total = 0;
        for i in 0..a.len().max(b.len()) {
            let (x, y) = (a.get(i), b.get(i));
            if x == y {
                continue;
            }
            total += 1;
            if lines.len() < MAX_DIFF_ENTRIES {
                lines.push(json!({
                    "line": i + 1,
                    "stored": x.map(|l| clip(l)),
                    "received": y.map(|l| clip(l)),
                }));
            }
        }
        summary["format"] = json!("text");
        summary["line_differences"] = json!(lines);
        summary["line_difference_count"] = json!(total);
        summary["truncated"] = json!(total > lines.len());
    }
    summary
}

/// A diff of the stored payload against the received one: field-level when both are JSON,
/// a byte (and line) summary otherwise.
pub fn payload_diff(stored: &[u8], received: &[u8]) -> Value {
    // The project's strict parser keeps number literals; serde_json would read them as f64.
    match (parse_document(stored), parse_document(received)) {
        (Ok(a), Ok(b)) => {
            let diff = json_diff(&a, &b, MAX_DIFF_ENTRIES);
            let mut out = json!({
                "format": "json",
                "differences": diff.differences,
                "difference_count": diff.total,
                "truncated": diff.truncated,
            });
            if diff.total == 0 && stored != received {
                out["note"] = json!(
                    "the documents hold the same values, numbers written alike; they differ in string escaping, whitespace or key order"
                );
                out["bytes"] = byte_summary(stored, received);
            }
            out
        }
        _ => byte_summary(stored, received),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A document as the diff parses it (numbers keep their literal text).
    fn doc(value: Value) -> JsonValue {
        parse_document(&serde_json::to_vec(&value).unwrap()).unwrap()
    }

    fn page(quantity: u64) -> Value {
        json!({"export_id": "EXP-8821", "page": 2, "page_count": 3, "offers": [
            {"sku": "AX-440-R2", "quantity": quantity, "unit": "each", "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}
        ]})
    }

    #[test]
    fn a_changed_leaf_is_reported_at_its_json_pointer() {
        let diff = json_diff(&doc(page(6)), &doc(page(5)), MAX_DIFF_ENTRIES);
        assert_eq!(
            diff.differences,
            vec![JsonDifference {
                path: "/offers/0/quantity".into(),
                change: "changed",
                stored: Some(json!(6)),
                received: Some(json!(5)),
            }]
        );
        assert_eq!((diff.total, diff.truncated), (1, false));
        let serialized = serde_json::to_value(&diff.differences[0]).unwrap();
        assert_eq!(
            serialized,
            json!({"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5})
        );
    }

    #[test]
    fn identical_documents_have_no_differences_whatever_the_key_order() {
        let a = parse_document(br#"{"a": 1, "b": [1, {"c": null}]}"#).unwrap();
        let b = parse_document(br#"{"b": [1, {"c": null}], "a": 1}"#).unwrap();
        let diff = json_diff(&a, &b, 10);
        assert!(diff.differences.is_empty());
        assert_eq!(diff.total, 0);
    }

    #[test]
    fn added_and_removed_keys_and_array_elements_name_their_side() {
        let stored = json!({"keep": 1, "gone": "x", "rows": [1, 2, 3]});
        let received = json!({"keep": 1, "new": {"deep": true}, "rows": [1, 9]});
        let diff = json_diff(&doc(stored), &doc(received), 10);
        assert_eq!(
            diff.differences,
            vec![
                JsonDifference {
                    path: "/gone".into(),
                    change: "removed",
                    stored: Some(json!("x")),
                    received: None
                },
                JsonDifference {
                    path: "/new".into(),
                    change: "added",
                    stored: None,
                    received: Some(json!({"deep": true}))
                },
                JsonDifference {
                    path: "/rows/1".into(),
                    change: "changed",
                    stored: Some(json!(2)),
                    received: Some(json!(9))
                },
                JsonDifference {
                    path: "/rows/2".into(),
                    change: "removed",
                    stored: Some(json!(3)),
                    received: None
                },
            ]
        );
        // An explicit null is a value, not an absence.
        let diff = json_diff(&doc(json!({"a": null})), &doc(json!({})), 10);
        assert_eq!(diff.differences[0].stored, Some(Value::Null));
        assert_eq!(diff.differences[0].change, "removed");
    }

    #[test]
    fn type_changes_are_one_leaf_and_keys_are_pointer_escaped() {
        let diff = json_diff(
            &doc(json!({"a/b": {"m~n": [1]}})),
            &doc(json!({"a/b": {"m~n": {"0": 1}}})),
            10,
        );
        assert_eq!(diff.differences.len(), 1);
        assert_eq!(diff.differences[0].path, "/a~1b/m~0n");
        assert_eq!(diff.differences[0].stored, Some(json!([1])));
        // Different scalar documents differ at the root pointer "".
        let diff = json_diff(&doc(json!(1)), &doc(json!("1")), 10);
        assert_eq!(diff.differences[0].path, "");
    }

    #[test]
    fn the_list_is_capped_but_every_difference_is_counted() {
        let stored = Value::Array((0..500).map(|i| json!(i)).collect());
        let received = Value::Array((0..500).map(|i| json!(i + 1)).collect());
        let diff = json_diff(&doc(stored), &doc(received), MAX_DIFF_ENTRIES);
        assert_eq!(diff.differences.len(), MAX_DIFF_ENTRIES);
        assert_eq!(diff.total, 500);
        assert!(diff.truncated);
        assert_eq!(diff.differences[199].path, "/199");
    }

    #[test]
    fn non_json_payloads_get_a_byte_and_line_summary() {
        let stored = b"sku,quantity\nAX-1,6\nAX-2,1\n";
        let received = b"sku,quantity\nAX-1,5\nAX-2,1\n";
        let summary = payload_diff(stored, received);
        assert_eq!(summary["format"], "text");
        assert_eq!(summary["first_difference_offset"], 18);
        assert_eq!(
            summary["line_differences"],
            json!([{"line": 2, "stored": "AX-1,6", "received": "AX-1,5"}])
        );
        let binary = payload_diff(&[0xff, 0x00, 0x01], &[0xff, 0x00, 0x02, 0x03]);
        assert_eq!(binary["format"], "bytes");
        assert_eq!(binary["first_difference_offset"], 2);
        assert_eq!(
            (
                binary["stored_bytes"].clone(),
                binary["received_bytes"].clone()
            ),
            (json!(3), json!(4))
        );
        assert!(binary.get("line_differences").is_none());
    }

    #[test]
    fn same_values_written_differently_are_explained() {
        let diff = payload_diff(br#"{"a": 1.0}"#, br#"{"a":1.0}"#);
        assert_eq!(diff["difference_count"], 0);
        assert!(diff["note"].is_string());
        assert_eq!(diff["bytes"]["first_difference_offset"], 5);
    }

    /// The one difference of a JSON payload diff (asserting there is exactly one).
    fn only_difference(stored: &str, received: &str) -> Value {
        let diff = payload_diff(stored.as_bytes(), received.as_bytes());
        assert_eq!(diff["format"], "json", "{diff}");
        assert_eq!(diff["difference_count"], 1, "{diff}");
        diff["differences"][0].clone()
    }

    #[test]
    fn numbers_that_differ_beyond_f64_precision_are_a_difference_shown_literally() {
        let difference = only_difference(
            r#"{"price": 820.000000000000000001}"#,
            r#"{"price": 820.000000000000000002}"#,
        );
        assert_eq!(
            difference,
            json!({"path": "/price", "change": "changed",
                   "stored": {"$number": "820.000000000000000001"},
                   "received": {"$number": "820.000000000000000002"}})
        );
    }

    #[test]
    fn a_number_written_with_another_precision_is_a_difference() {
        let difference = only_difference(r#"{"a": 1.0}"#, r#"{"a": 1.00}"#);
        assert_eq!(difference["stored"], json!({"$number": "1.0"}));
        assert_eq!(difference["received"], json!({"$number": "1.00"}));
        let difference = only_difference(r#"{"a": 1e2}"#, r#"{"a": 100}"#);
        assert_eq!(
            (&difference["stored"], &difference["received"]),
            (&json!({"$number": "1e2"}), &json!(100))
        );
    }

    #[test]
    fn integers_beyond_what_every_reader_holds_exactly_are_shown_as_literals() {
        // 2^53 + 1 and 2^53 are the same f64.
        let difference = only_difference(r#"[9007199254740993]"#, r#"[9007199254740992]"#);
        assert_eq!(
            difference,
            json!({"path": "/0", "change": "changed",
                   "stored": {"$number": "9007199254740993"},
                   "received": {"$number": "9007199254740992"}})
        );
        let difference = only_difference(r#"[-0]"#, r#"[0]"#);
        assert_eq!(
            (&difference["stored"], &difference["received"]),
            (&json!({"$number": "-0"}), &json!(0))
        );
        let difference = only_difference(r#"[9007199254740991]"#, r#"[-9007199254740991]"#);
        assert_eq!(
            (&difference["stored"], &difference["received"]),
            (&json!(9007199254740991_i64), &json!(-9007199254740991_i64)),
            "the largest safe integers stay JSON numbers"
        );
    }

    #[test]
    fn small_integers_stay_json_numbers_in_the_differences() {
        let stored = serde_json::to_vec(&page(6)).unwrap();
        let received = serde_json::to_vec(&page(5)).unwrap();
        let diff = payload_diff(&stored, &received);
        assert_eq!(
            diff["differences"],
            json!([{"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5}])
        );
    }

    #[test]
    fn a_price_sent_as_a_number_instead_of_a_string_is_told_apart() {
        let difference = only_difference(r#"{"price": "820.00"}"#, r#"{"price": 820.00}"#);
        assert_eq!(difference["stored"], json!("820.00"));
        assert_eq!(difference["received"], json!({"$number": "820.00"}));
    }

    #[test]
    fn added_subtrees_keep_their_number_literals() {
        let difference = only_difference(r#"{}"#, r#"{"new": {"price": 1.50, "n": [2]}}"#);
        assert_eq!(
            difference,
            json!({"path": "/new", "change": "added",
                   "received": {"price": {"$number": "1.50"}, "n": [2]}})
        );
    }

    #[test]
    fn escaping_whitespace_and_key_order_are_not_differences() {
        let diff = payload_diff(
            br#"{"a": "A", "b": [1, 2.50]}"#,
            br#"{"b":[1,2.50],"a":"A"}"#,
        );
        assert_eq!(diff["difference_count"], 0, "{diff}");
        assert!(diff["note"].is_string());
    }

    #[test]
    fn delivery_keys_split_into_their_parts_even_when_the_id_has_slashes() {
        let key = parse_delivery_key("demo/acme-events/ACME-EVT/urn:acme:events/evt-1").unwrap();
        assert_eq!(key.source_delivery_id.as_str(), "urn:acme:events/evt-1");
        assert_eq!(
            key.as_string(),
            "demo/acme-events/ACME-EVT/urn:acme:events/evt-1"
        );
        assert!(parse_delivery_key("demo/acme-eu").is_none());
    }

    #[test]
    fn paths_are_percent_decoded_without_turning_plus_into_space() {
        assert_eq!(
            crate::protocols::http::percent_decode("/v1/deliveries/demo/acme-eu/ACC-1/EXP%2F2+x%3A", false),
            "/v1/deliveries/demo/acme-eu/ACC-1/EXP/2+x:"
        );
    }
}
