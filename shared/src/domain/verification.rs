//! Verification records: the separate authority that may say a source's claim was confirmed,
//! by whom, how, within what scope and until when (docs/architecture.md section 3). A
//! verification never changes the claim it names and never makes a claim anything but
//! `source_reported`; it applies to that one observation only, so a newer observation of the
//! same source starts unverified. Records are append-only: a withdrawal is a record of its own.
//!
//! What a reader sees is computed from the records at an instant ([`VerificationView::at`]):
//! `verified` while a record is in force, `expired` once its `expires_at` has passed,
//! `withdrawn` once withdrawn, `unverified` with no record at all.

use crate::domain::definition::Problem;
use crate::domain::hashing::{base32_lower, sha256_fields};
use crate::domain::ids::{ConnectorId, ObservationId, SourceAccount, TenantId};
use crate::domain::terms::Decimal;
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The scope a verifier's token holds: never a reader's, never enough to ingest or operate.
pub const VERIFY_SCOPE: &str = "offers:verify";
/// The longest free text of a record (reference, note, reason, file name).
pub const MAX_TEXT_BYTES: usize = 500;
/// The largest evidence document, decoded.
pub const MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;
/// The longest a verification may stay in force.
pub const MAX_VALIDITY_SECONDS: i64 = 366 * 24 * 3600;

/// What a verification confirms about the claim it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VerifiedScope {
    /// The source holds at least this much stock (in the claim's quantity basis).
    StockAtLeast { quantity: Decimal },
    /// The claim's price (and currency) as stated.
    Price,
    /// The claim's commercial terms as stated.
    Terms,
}

/// How the verifier confirmed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationMethod {
    SupplierApiConfirmation,
    Reservation,
    Call,
    Document,
}

const METHODS: [(&str, VerificationMethod); 4] = [
    (
        "supplier_api_confirmation",
        VerificationMethod::SupplierApiConfirmation,
    ),
    ("reservation", VerificationMethod::Reservation),
    ("call", VerificationMethod::Call),
    ("document", VerificationMethod::Document),
];

/// What the verification rests on: a document stored like a raw artifact, or a reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VerificationEvidence {
    Document {
        /// Under `raw/verifications/`, named by the tenant and the document's sha256.
        artifact_key: String,
        sha256: String,
        content_type: String,
        size_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_name: Option<String>,
    },
    Reference {
        reference: String,
    },
}

/// One verification, as recorded (entity `verification`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationRecord {
    pub verification_id: String,
    pub tenant: TenantId,
    /// The claim it names.
    pub observation_id: ObservationId,
    /// The claim's item key and source, copied from the observation.
    pub item: String,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub scope: VerifiedScope,
    pub method: VerificationMethod,
    /// The verifier's own reference (a reservation number, a ticket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    pub evidence: VerificationEvidence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The token's subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    pub verified_at: Timestamp,
    pub expires_at: Timestamp,
    /// When it was stored: what an as-of read compares.
    pub recorded_at: Timestamp,
}

/// The withdrawal of a verification: a record of its own (entity `verification_withdrawal`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationWithdrawal {
    pub withdrawal_id: String,
    pub verification_id: String,
    pub tenant: TenantId,
    pub observation_id: ObservationId,
    pub item: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_by: Option<String>,
    pub recorded_at: Timestamp,
}

/// One record about a claim, as a read finds it beside the item's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum VerificationEvent {
    Verified(Box<VerificationRecord>),
    Withdrawn(VerificationWithdrawal),
}

impl VerificationEvent {
    pub fn observation_id(&self) -> &ObservationId {
        match self {
            Self::Verified(r) => &r.observation_id,
            Self::Withdrawn(w) => &w.observation_id,
        }
    }

    pub fn recorded_at(&self) -> Timestamp {
        match self {
            Self::Verified(r) => r.recorded_at,
            Self::Withdrawn(w) => w.recorded_at,
        }
    }
}

/// Where a claim stands with its verifications at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationState {
    Verified,
    Expired,
    Withdrawn,
    Unverified,
}

/// What every offer and observation in a response carries as `verification`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationView {
    pub state: VerificationState,
    /// The record the state comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<VerifiedScope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<VerificationMethod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_at: Option<Timestamp>,
}

impl VerificationView {
    pub fn unverified() -> Self {
        Self {
            state: VerificationState::Unverified,
            record: None,
            scope: None,
            method: None,
            verified_at: None,
            expires_at: None,
            withdrawn_at: None,
        }
    }

    /// The verification of `observation` at `at` from `events` (any claims'; only what was
    /// recorded by `at` counts): a record in force wins (the latest recorded); otherwise the
    /// latest recorded one, expired or withdrawn; none: unverified.
    pub fn at(events: &[VerificationEvent], observation: &ObservationId, at: Timestamp) -> Self {
        let known = || {
            events
                .iter()
                .filter(move |e| e.observation_id() == observation && e.recorded_at() <= at)
        };
        let withdrawn_at = |id: &str| {
            known().find_map(|e| match e {
                VerificationEvent::Withdrawn(w) if w.verification_id == id => Some(w.recorded_at),
                _ => None,
            })
        };
        let mut records: Vec<&VerificationRecord> = known()
            .filter_map(|e| match e {
                VerificationEvent::Verified(r) => Some(r.as_ref()),
                VerificationEvent::Withdrawn(_) => None,
            })
            .collect();
        records.sort_by(|a, b| {
            (a.recorded_at, &a.verification_id).cmp(&(b.recorded_at, &b.verification_id))
        });
        let state_of = |r: &VerificationRecord| match withdrawn_at(&r.verification_id) {
            Some(when) => (VerificationState::Withdrawn, Some(when)),
            None if r.expires_at <= at => (VerificationState::Expired, None),
            None => (VerificationState::Verified, None),
        };
        let chosen = records
            .iter()
            .rev()
            .find(|r| state_of(r).0 == VerificationState::Verified)
            .or(records.last());
        match chosen {
            None => Self::unverified(),
            Some(r) => {
                let (state, withdrawn_at) = state_of(r);
                Self {
                    state,
                    record: Some(r.verification_id.clone()),
                    scope: Some(r.scope.clone()),
                    method: Some(r.method),
                    verified_at: Some(r.verified_at),
                    expires_at: Some(r.expires_at),
                    withdrawn_at,
                }
            }
        }
    }
}

impl std::fmt::Display for VerificationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Verified => "verified",
            Self::Expired => "expired",
            Self::Withdrawn => "withdrawn",
            Self::Unverified => "unverified",
        })
    }
}

/// `unverified`, or the state with what was verified and until when: `verified (stock at
/// least 1000 by reservation, record ver_..., until 2026-12-01T11:00:00Z)`.
impl std::fmt::Display for VerificationView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Some(scope), Some(method), Some(record), Some(until)) =
            (&self.scope, self.method, &self.record, self.expires_at)
        else {
            return write!(f, "{}", self.state);
        };
        let scope = match scope {
            VerifiedScope::StockAtLeast { quantity } => {
                format!("stock at least {}", quantity.as_str())
            }
            VerifiedScope::Price => "price".to_owned(),
            VerifiedScope::Terms => "terms".to_owned(),
        };
        let method = METHODS
            .iter()
            .find(|(_, m)| *m == method)
            .map_or("", |(name, _)| *name);
        write!(
            f,
            "{} ({scope} by {method}, record {record}, until {})",
            self.state,
            until.to_rfc3339()
        )
    }
}

/// A document sent as evidence, decoded and checked against the sha256 the verifier stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceDocument {
    pub bytes: Vec<u8>,
    pub sha256: [u8; 32],
    pub content_type: String,
    pub file_name: Option<String>,
}

/// The evidence a request states, before a document is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatedEvidence {
    Document(EvidenceDocument),
    Reference(String),
}

/// `POST /v1/verifications`, read and checked: every problem is listed with its JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerificationRequest {
    pub observation_id: ObservationId,
    /// When the verifier also names the claim's item and source, they must be the claim's.
    pub item: Option<String>,
    pub connector: Option<String>,
    pub source_account: Option<String>,
    pub scope: VerifiedScope,
    pub method: VerificationMethod,
    pub reference: Option<String>,
    pub evidence: StatedEvidence,
    pub note: Option<String>,
    /// When it was verified (defaults to when it is recorded).
    pub verified_at: Option<Timestamp>,
    pub expires_at: Timestamp,
}

const FIELDS: [&str; 11] = [
    "observation_id",
    "item",
    "connector",
    "source_account",
    "scope",
    "method",
    "reference",
    "evidence",
    "note",
    "verified_at",
    "expires_at",
];

impl VerificationRequest {
    /// Reads the request body; `now` bounds the times (`verified_at` not in the future,
    /// `expires_at` after both, within [`MAX_VALIDITY_SECONDS`]).
    pub fn read(body: &Value, now: Timestamp) -> Result<Self, Vec<Problem>> {
        let Some(object) = body.as_object() else {
            return Err(vec![Problem::new("", "the request must be a JSON object")]);
        };
        let mut problems = Vec::new();
        for name in object.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            problems.push(Problem::new(
                format!("/{name}"),
                "is not a field of a verification",
            ));
        }
        let mut p = Reader {
            body,
            problems: &mut problems,
        };
        let observation_id = p.required("/observation_id", |v| {
            ObservationId::parse(text(v)?).map_err(|e| e.to_string())
        });
        let item = p.optional("/item", short_text);
        let connector = p.optional("/connector", short_text);
        let source_account = p.optional("/source_account", short_text);
        let scope = p.required("/scope", scope_of);
        let method = p.required("/method", method_of);
        let reference = p.optional("/reference", short_text);
        let evidence = p.required("/evidence", evidence_of);
        let note = p.optional("/note", short_text);
        let verified_at = p.optional("/verified_at", time_of);
        let expires_at = p.required("/expires_at", time_of);
        check_times(verified_at, expires_at, now, &mut problems);
        match (observation_id, scope, method, evidence, expires_at) {
            (Some(observation_id), Some(scope), Some(method), Some(evidence), Some(expires_at))
                if problems.is_empty() =>
            {
                Ok(Self {
                    observation_id,
                    item,
                    connector,
                    source_account,
                    scope,
                    method,
                    reference,
                    evidence,
                    note,
                    verified_at,
                    expires_at,
                })
            }
            _ => Err(problems),
        }
    }

    /// The record of this request about `claim`, stored at `now` by `verified_by`. Its id is a
    /// digest of what the request states (not of when it arrived), so a retried request names
    /// the record the first one stored.
    pub fn record(
        &self,
        claim: &ClaimRef,
        evidence: VerificationEvidence,
        verified_by: Option<String>,
        now: Timestamp,
    ) -> VerificationRecord {
        VerificationRecord {
            verification_id: self.id(&claim.tenant, &evidence, verified_by.as_deref()),
            tenant: claim.tenant.clone(),
            observation_id: self.observation_id.clone(),
            item: claim.item.clone(),
            connector: claim.connector.clone(),
            source_account: claim.source_account.clone(),
            scope: self.scope.clone(),
            method: self.method,
            reference: self.reference.clone(),
            evidence,
            note: self.note.clone(),
            verified_by,
            verified_at: self.verified_at.unwrap_or(now),
            expires_at: self.expires_at,
            recorded_at: now,
        }
    }

    fn id(
        &self,
        tenant: &TenantId,
        evidence: &VerificationEvidence,
        verified_by: Option<&str>,
    ) -> String {
        let stated = serde_json::json!({
            "scope": self.scope,
            "method": self.method,
            "reference": self.reference,
            "evidence": evidence,
            "note": self.note,
            "verified_at": self.verified_at,
            "expires_at": self.expires_at,
        })
        .to_string();
        let digest = sha256_fields(&[
            tenant.as_str().as_bytes(),
            self.observation_id.as_str().as_bytes(),
            verified_by.unwrap_or("").as_bytes(),
            stated.as_bytes(),
        ]);
        format!("ver_{}", base32_lower(&digest[..16]))
    }

    /// Every way the item and source the request names differ from the claim's.
    pub fn mismatches(&self, claim: &ClaimRef) -> Vec<Problem> {
        let named = [
            ("/item", self.item.as_deref(), claim.item.as_str()),
            (
                "/connector",
                self.connector.as_deref(),
                claim.connector.as_str(),
            ),
            (
                "/source_account",
                self.source_account.as_deref(),
                claim.source_account.as_str(),
            ),
        ];
        named
            .into_iter()
            .filter_map(|(pointer, asked, actual)| match asked {
                Some(asked) if !names_same(pointer, asked, actual) => Some(Problem::new(
                    pointer,
                    format!("the observation is of {actual:?}, not {:?}", shown(asked)),
                )),
                _ => None,
            })
            .collect()
    }
}

/// The claim a verification names, as the observation holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub tenant: TenantId,
    pub item: String,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
}

/// An item is compared by its key under the item rules (`ax-440` names `AX-440~each~new`).
fn names_same(pointer: &str, asked: &str, actual: &str) -> bool {
    match pointer {
        "/item" => crate::domain::item::CanonicalItem::parse_key(asked)
            .is_ok_and(|item| item.key() == actual),
        _ => asked == actual,
    }
}

/// The withdrawal of `verification` by `withdrawn_by` at `now`, for `reason`.
pub fn withdrawal_of(
    verification: &VerificationRecord,
    reason: &str,
    withdrawn_by: Option<String>,
    now: Timestamp,
) -> VerificationWithdrawal {
    let digest = sha256_fields(&[
        verification.verification_id.as_bytes(),
        b"withdrawn",
        now.to_rfc3339().as_bytes(),
    ]);
    VerificationWithdrawal {
        withdrawal_id: format!("vwd_{}", base32_lower(&digest[..16])),
        verification_id: verification.verification_id.clone(),
        tenant: verification.tenant.clone(),
        observation_id: verification.observation_id.clone(),
        item: verification.item.clone(),
        reason: reason.to_owned(),
        withdrawn_by,
        recorded_at: now,
    }
}

/// Reads the members of a request, collecting every problem.
struct Reader<'a> {
    body: &'a Value,
    problems: &'a mut Vec<Problem>,
}

impl Reader<'_> {
    fn optional<T>(
        &mut self,
        pointer: &str,
        read: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        match self.body.pointer(pointer) {
            None | Some(Value::Null) => None,
            Some(value) => read(value)
                .map_err(|e| self.problems.push(Problem::new(pointer, e)))
                .ok(),
        }
    }

    fn required<T>(
        &mut self,
        pointer: &str,
        read: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        if matches!(self.body.pointer(pointer), None | Some(Value::Null)) {
            self.problems.push(Problem::new(pointer, "is required"));
            return None;
        }
        self.optional(pointer, read)
    }
}

fn text(value: &Value) -> Result<&str, String> {
    value.as_str().ok_or_else(|| "must be a string".to_owned())
}

/// Trimmed, not empty, at most [`MAX_TEXT_BYTES`], no control character.
fn short_text(value: &Value) -> Result<String, String> {
    let text = text(value)?.trim();
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!("is longer than {MAX_TEXT_BYTES} bytes"));
    }
    if text.chars().any(char::is_control) {
        return Err("must not hold control characters".into());
    }
    Ok(text.to_owned())
}

fn time_of(value: &Value) -> Result<Timestamp, String> {
    Timestamp::parse(text(value)?).map_err(|e| format!("must be an RFC 3339 time: {e}"))
}

fn scope_of(value: &Value) -> Result<VerifiedScope, String> {
    let kind = value.get("kind").and_then(Value::as_str);
    let extra = |allowed: &[&str]| {
        value
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .find(|k| !allowed.contains(&k.as_str()))
            .map(|k| format!("{k:?} is not a member of this scope"))
    };
    match kind {
        Some("stock_at_least") => {
            if let Some(e) = extra(&["kind", "quantity"]) {
                return Err(e);
            }
            let quantity = match value.get("quantity") {
                Some(Value::String(s)) => Decimal::parse(s),
                Some(Value::Number(n)) => Decimal::parse(&n.to_string()),
                _ => Err("quantity is required: a decimal above 0".into()),
            }
            .map_err(|e| format!("quantity: {e}"))?;
            if quantity.is_zero() {
                return Err("quantity: must be above 0".into());
            }
            Ok(VerifiedScope::StockAtLeast { quantity })
        }
        Some("price") => extra(&["kind"]).map_or(Ok(VerifiedScope::Price), Err),
        Some("terms") => extra(&["kind"]).map_or(Ok(VerifiedScope::Terms), Err),
        _ => Err("kind must be one of stock_at_least, price, terms".into()),
    }
}

fn method_of(value: &Value) -> Result<VerificationMethod, String> {
    let asked = text(value)?;
    METHODS
        .iter()
        .find(|(name, _)| *name == asked)
        .map(|(_, method)| *method)
        .ok_or_else(|| {
            let names: Vec<&str> = METHODS.iter().map(|(n, _)| *n).collect();
            format!("must be one of {}", names.join(", "))
        })
}

/// `{"reference": "..."}` or `{"document": {content_type, file_name?, content_base64, sha256}}`.
fn evidence_of(value: &Value) -> Result<StatedEvidence, String> {
    match (value.get("reference"), value.get("document")) {
        (Some(reference), None) if value.as_object().is_some_and(|o| o.len() == 1) => {
            short_text(reference)
                .map(StatedEvidence::Reference)
                .map_err(|e| format!("reference {e}"))
        }
        (None, Some(document)) if value.as_object().is_some_and(|o| o.len() == 1) => {
            document_of(document).map(StatedEvidence::Document)
        }
        _ => Err("must be exactly one of {\"reference\": text} and {\"document\": {content_type, file_name, content_base64, sha256}}".into()),
    }
}

fn document_of(value: &Value) -> Result<EvidenceDocument, String> {
    use base64::Engine;
    let member = |name: &str| value.get(name).and_then(Value::as_str);
    let content_type = member("content_type")
        .filter(|t| is_media_type(t))
        .ok_or("document.content_type must be a media type such as application/pdf")?;
    let encoded = member("content_base64").ok_or("document.content_base64 is required")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("document.content_base64 is not base64: {e}"))?;
    if bytes.is_empty() || bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "document must hold 1 to {MAX_DOCUMENT_BYTES} bytes (it holds {})",
            bytes.len()
        ));
    }
    let stated =
        member("sha256").ok_or("document.sha256 is required: the hex sha256 of the document")?;
    let sha256 = crate::domain::hashing::sha256(&bytes);
    if !stated.eq_ignore_ascii_case(&crate::domain::hashing::hex(&sha256)) {
        return Err(format!(
            "document.sha256 {:?} is not the sha256 of the document sent",
            shown(stated)
        ));
    }
    let file_name = match value.get("file_name") {
        None | Some(Value::Null) => None,
        Some(name) => Some(short_text(name).map_err(|e| format!("document.file_name {e}"))?),
    };
    Ok(EvidenceDocument {
        bytes,
        sha256,
        content_type: content_type.to_owned(),
        file_name,
    })
}

/// `type/subtype`, printable ASCII without spaces, at most 100 bytes.
fn is_media_type(text: &str) -> bool {
    text.len() <= 100
        && text
            .split_once('/')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
        && text.bytes().all(|b| b.is_ascii_graphic())
}

fn check_times(
    verified_at: Option<Timestamp>,
    expires_at: Option<Timestamp>,
    now: Timestamp,
    problems: &mut Vec<Problem>,
) {
    if verified_at.is_some_and(|v| v > now) {
        problems.push(Problem::new("/verified_at", "must not be in the future"));
    }
    let Some(expires_at) = expires_at else {
        return;
    };
    let since = verified_at.unwrap_or(now).max(now);
    if expires_at <= since {
        problems.push(Problem::new(
            "/expires_at",
            "must be later than now and than verified_at",
        ));
    } else if expires_at.seconds_since(now) > MAX_VALIDITY_SECONDS {
        problems.push(Problem::new(
            "/expires_at",
            format!("must be at most {MAX_VALIDITY_SECONDS} seconds from now"),
        ));
    }
}

/// A caller's text in a message: its first 64 characters.
fn shown(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
#[path = "verification_tests.rs"]
mod tests;
