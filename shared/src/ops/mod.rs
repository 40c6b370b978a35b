//! The operators' API (docs/architecture.md sections 1, 9 and 10): delivery status, runs,
//! quarantine review and resolution, identity corrections, source quarantines, pull runs, and
//! short-lived links to the literal payloads for auditors. Every route needs the `ops:write` scope
//! and is scoped to the caller's tenant: another tenant's records answer 404, exactly like records
//! that do not exist.
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
//! | `POST /v1/identity-corrections` | `identity_corrections::CorrectionService::correct` (201; 200 when already in force) |
//! | `GET /v1/identity-corrections/{id}` | the correction, whether in force, what it re-attributed |
//! | `POST /v1/identity-corrections/{id}/withdraw` | a withdrawal: a new record (201) |
//! | `POST /v1/source-quarantines` | `source_quarantine::quarantine_source` (201; 409 `already_quarantined`) |
//! | `GET /v1/source-quarantines/{connector}` | the state and every set and lift |
//! | `POST /v1/source-quarantines/{connector}/lift` | `source_quarantine::lift_source_quarantine` (200; 409 `not_quarantined`) |
//! | `POST /v1/connectors/{id}/runs` | names the run from page 1, then starts the pull asynchronously (202) |
//! | `GET /v1/connectors` | the tenant's connectors: freshness, open quarantines, source quarantine |
//! | `GET /v1/items/{item}/timeline` | every claim about an item, current ones marked, with retrieval lag |
//! | `GET /v1/timeline?item=` | the same, the item in the query (a part number holding `/` or `%`) |
//! | `POST /v1/verifications` | a verification record (201; 200 when the same request was recorded); scope `offers:verify`, not `ops:write` |
//! | `GET /v1/verifications/{id}` | the record and its withdrawal; scope `offers:verify` |
//! | `POST /v1/verifications/{id}/withdraw` | a withdrawal: a new record (201; 409 `already_withdrawn`); scope `offers:verify` |
//! | `GET /console`, `GET /console/{asset}` | the operator console (static; no token: its data calls need one) |
//!
//! Operator records are append-only: each resolution step, each correction and each source
//! quarantine set or lift is its own record, never rewritten (`aws/operator_records.rs`).
//!
//! Resolving never rewrites evidence: a rejected entry only changes `status`; an accepted one
//! becomes a *new* delivery under the operator's stated identity (basis `operator`) whose body
//! is a claim check on the quarantined payload's own raw artifact, so the original delivery,
//! its observations and its artifact stay exactly as they were.
//!
//! Files: `routes` (the route table above, `handle_ops`), `deliveries` (deliveries, runs, pull
//! runs and raw-artifact links), `quarantine` (review and resolution), `source_actions` (identity
//! corrections and source quarantines), `archive` (the raw bucket: reads and presigned links),
//! `diff` (what differs between a stored payload and a quarantined one), `views` (the console's
//! connectors and timeline), `bodies` (every response body, as the types `docs/openapi.yaml`
//! documents), `ports` (what the routes need from the stores: `OpsStore`, `RawObjects`; the
//! adapters implement them, and nothing here names an adapter), `console` (the
//! console's page and assets). The API Gateway entry point is
//! `crate::lambda::apigw::handle_apigw_ops`.

mod archive;
pub mod bodies;
mod connectors;
pub mod console;
mod deliveries;
mod diff;
pub mod ports;
pub mod previews;
mod quarantine;
mod routes;
mod source_actions;
#[cfg(test)]
mod tests;
mod verifications;
mod views;

pub use archive::{ArchivedObject, RawArchive};
pub use diff::{byte_summary, json_diff, payload_diff, shown_value, JsonDiff, JsonDifference};
pub use routes::handle_ops;
pub use views::{ReadModel, MAX_TIMELINE_CLAIMS, MAX_TIMELINE_QUARANTINES};

use crate::domain::ids::{ConnectorId, TenantId};
use crate::domain::model::{QuarantineEntry, QUARANTINE_OPEN};
use crate::domain::timestamp::Timestamp;
use crate::intake::poller::{PullLauncher, PullService};
use crate::intake::DeliveryQueue;
use crate::protocols::http::HttpResponse;
use crate::protocols::identity_corrections::{CorrectionError, CorrectionService, CorrectionStore};
use crate::protocols::ports::{Clock, ConnectorDirectory, Reattributor, StoreError};
use crate::protocols::projection::ProjectionStore;
use crate::protocols::query::Principal;
use crate::protocols::source_quarantine::SourceQuarantineError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tracing::error;

/// The scope every ops route requires (the verifiers' routes apart) (the JWT authorizer's scope; locally the token's).
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
    /// The `If-Match` header, for the versioned writes.
    pub if_match: Option<String>,
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
    /// A precondition of a versioned write failed (412 stale `If-Match`, 428 none sent).
    Precondition(u16, &'static str, String),
    /// A connector definition with problems (HTTP 422, every problem with its pointer).
    Definition(Vec<crate::domain::definition::Problem>),
    /// A verification with problems (HTTP 422, every problem with its pointer).
    Verification(Vec<crate::domain::definition::Problem>),
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
            Self::Precondition(status, code, m) => HttpResponse::error(status, code, &m),
            Self::SupplierUnavailable(m) => HttpResponse::error(502, "supplier_unavailable", &m),
            Self::Unavailable { public, internal } => {
                error!(error = %internal, "ops request failed");
                HttpResponse::error(503, "unavailable", public)
            }
            Self::Definition(problems) => previews::definition_refused(problems),
            Self::Verification(problems) => verifications::verification_refused(problems),
        }
    }
}

/// A route's status and body: one of the types in `bodies` (or a protocol's own view), as
/// `reply` renders it.
type OpsResult = Result<(u16, Value), OpsError>;

/// What `POST /v1/connectors/{id}/runs` needs: the pull service, to read the export's page 1
/// and so name the run, and the launcher that runs the pull asynchronously (a pull of a large
/// export outlasts an HTTP request by far).
#[derive(Clone)]
pub struct PullStarter {
    pub service: Arc<PullService>,
    pub launcher: Arc<dyn PullLauncher>,
}

pub struct OpsService {
    evidence: Arc<dyn ports::OpsStore>,
    archive: RawArchive,
    queue: Arc<dyn DeliveryQueue>,
    pull: Option<PullStarter>,
    clock: Arc<dyn Clock>,
    corrections: CorrectionService,
    read_model: Option<ReadModel>,
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

/// A successful answer: `status` and `body` (one of the types in `bodies`) as JSON.
fn reply<T: Serialize>(status: u16, body: &T) -> OpsResult {
    Ok((status, to_json(body)))
}

/// An entry with its append-only resolution history. The entry's `resolution` holds the first
/// decision as it was requested; when it was carried out is in the history.
fn entry_with_history(
    entry: &QuarantineEntry,
    resolution: Option<&QuarantineResolution>,
    history: Vec<ResolutionEvent>,
) -> bodies::EntryDetail {
    let mut entry = bodies::EntryBody::new(entry, resolution);
    if let (Some(done), Some(r)) = (
        history
            .iter()
            .rev()
            .find(|e| e.action == EVENT_ACCEPTED || e.action == EVENT_REJECTED),
        entry.resolution.as_mut(),
    ) {
        r.resolved_at = Some(done.at);
    }
    bodies::EntryDetail {
        entry,
        resolutions: history,
        diff: None,
    }
}

impl OpsService {
    /// `pull` is `None` where no export source is wired; `POST /v1/connectors/{id}/runs` then
    /// answers 503.
    pub fn new<S>(
        evidence: Arc<S>,
        archive: RawArchive,
        queue: Arc<dyn DeliveryQueue>,
        pull: Option<PullStarter>,
        clock: Arc<dyn Clock>,
    ) -> Self
    where
        S: ports::OpsStore + CorrectionStore + Reattributor + 'static,
    {
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
            read_model: None,
        }
    }

    /// The same service reading the projection too: the console's connectors and timeline
    /// views (`views`). Without it those two routes answer 503.
    pub fn with_read_model(mut self, projection: Arc<dyn ProjectionStore>) -> Self {
        let query =
            crate::protocols::query::QueryService::new(self.evidence.clone(), projection.clone());
        self.read_model = Some(ReadModel { projection, query });
        self
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
    ) -> Result<Vec<bodies::EntryBody>, OpsError> {
        Ok(self
            .evidence
            .quarantine_entries(tenant)
            .await?
            .iter()
            .filter(|(e, _)| e.delivery_key.as_deref() == Some(delivery_key))
            .map(|(e, r)| bodies::EntryBody::new(e, r.as_ref()))
            .collect())
    }
}

fn operation_error(e: SourceQuarantineError) -> OpsError {
    match e {
        SourceQuarantineError::Invalid(m) => OpsError::Invalid(m),
        SourceQuarantineError::State { code, message } => OpsError::Conflict(code, message),
        SourceQuarantineError::Store(e) => e.into(),
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
