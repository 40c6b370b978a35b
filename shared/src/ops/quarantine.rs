//! Quarantine review and resolution: list, show (with a payload diff for a mismatch), reject, or
//! accept as a new delivery under an operator-stated identity.

use super::bodies::{Accepted, EntryBody, MismatchDiff, QuarantineList, Rejected};
use super::diff::payload_diff;
use super::ports::QuarantineTransition;
use super::routes::parse_delivery_key;
use super::{
    actor_of, entry_with_history, parse_body, reason_of, reply, ArchivedObject, OpsError,
    OpsResult, OpsService, QuarantineResolution, ResolutionEvent, ACTION_ACCEPT, ACTION_REJECT,
    EVENT_ACCEPTED, EVENT_ACCEPT_REQUESTED, EVENT_REJECTED, MAX_DIFF_BYTES, OPERATOR_BASIS,
    STATUS_ACCEPTED, STATUS_ACCEPTING, STATUS_OPEN, STATUS_REJECTED,
};
use crate::domain::envelope::{BodyRef, DeliveryEnvelope, DeliveryIdentity, ENVELOPE_VERSION};
use crate::domain::ids::{DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId};
use crate::domain::model::{QuarantineEntry, QuarantineKind, SourceRef};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::ArtifactError;
use crate::protocols::query::Principal;
use serde::Deserialize;
use tracing::{info, warn};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    action: String,
    reason: String,
    #[serde(default)]
    delivery_id: Option<String>,
}

impl OpsService {
    /// `GET /v1/quarantine[?status=...]`: open entries unless another status (or `all`) is asked.
    pub(super) async fn quarantine_list(
        &self,
        principal: &Principal,
        status: Option<&str>,
    ) -> OpsResult {
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
        let entries: Vec<EntryBody> = self
            .evidence
            .quarantine_entries(&principal.tenant)
            .await?
            .iter()
            .filter(|(e, _)| status == "all" || e.status == status)
            .map(|(e, r)| EntryBody::new(e, r.as_ref()))
            .collect();
        reply(
            200,
            &QuarantineList {
                tenant: &principal.tenant,
                status,
                count: entries.len(),
                entries,
            },
        )
    }

    pub(super) async fn entry(
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
            .quarantine_entry(id)
            .await?
            .filter(|(e, _)| e.tenant == principal.tenant.as_str())
            .ok_or_else(not_found)
    }

    /// `GET /v1/quarantine/{id}`: the entry, its resolution and, for a mismatch, what differs
    /// between the stored payload and the quarantined one.
    pub(super) async fn quarantine_show(&self, principal: &Principal, id: &str) -> OpsResult {
        let (entry, resolution) = self.entry(principal, id).await?;
        let history = self.evidence.quarantine_resolutions(id).await?;
        let mut body = entry_with_history(&entry, resolution.as_ref(), history);
        if entry.kind == QuarantineKind::Mismatch {
            body.diff = Some(self.mismatch_diff(&entry).await);
        }
        reply(200, &body)
    }

    /// The payload the mismatch was judged against (the entry's own `stored_artifact_key`,
    /// never the key's current record, which a later epoch may have replaced) against the
    /// quarantined one. Degrades to a reason instead of failing the whole answer.
    pub(super) async fn mismatch_diff(&self, entry: &QuarantineEntry) -> MismatchDiff {
        let Some(stored_key) = entry.stored_artifact_key.clone() else {
            return MismatchDiff::unavailable(
                "the entry does not record the stored payload's artifact",
            );
        };
        let (stored, received) = match (
            self.archive.read(&stored_key, MAX_DIFF_BYTES).await,
            self.archive.read(&entry.evidence_key, MAX_DIFF_BYTES).await,
        ) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e), _) | (_, Err(e)) => return MismatchDiff::unavailable(unreadable_artifact(e)),
        };
        MismatchDiff::Available {
            available: true,
            stored_artifact_key: stored_key,
            received_artifact_key: entry.evidence_key.clone(),
            diff: Box::new(payload_diff(&stored, &received)),
        }
    }

    /// `POST /v1/quarantine/{id}/resolve`.
    pub(super) async fn resolve(&self, principal: &Principal, id: &str, body: &[u8]) -> OpsResult {
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

    pub(super) fn already_resolved(entry: &QuarantineEntry, status: &str) -> OpsError {
        OpsError::AlreadyResolved(format!(
            "quarantine entry {} is {status}, not open",
            entry.quarantine_id
        ))
    }

    pub(super) async fn current_status(&self, id: &str) -> Result<String, OpsError> {
        Ok(self
            .evidence
            .quarantine_entry(id)
            .await?
            .map(|(e, _)| e.status)
            .unwrap_or_else(|| "gone".into()))
    }

    /// Moves the entry along `transition`, or says what it is now when it was not in `from`.
    async fn transition(
        &self,
        entry: &QuarantineEntry,
        transition: QuarantineTransition<'_>,
    ) -> Result<(), OpsError> {
        if self.evidence.resolve_quarantine(&transition).await? {
            return Ok(());
        }
        let status = self.current_status(&entry.quarantine_id).await?;
        Err(Self::already_resolved(entry, &status))
    }

    pub(super) async fn reject(
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
        self.transition(
            entry,
            QuarantineTransition {
                quarantine_id: &entry.quarantine_id,
                from: STATUS_OPEN,
                to: STATUS_REJECTED,
                resolution: Some(&resolution),
                event: &event,
            },
        )
        .await?;
        info!(quarantine_id = %entry.quarantine_id, "quarantine entry rejected");
        reply(
            200,
            &Rejected {
                quarantine_id: entry.quarantine_id.clone(),
                status: STATUS_REJECTED,
                resolution,
                event,
            },
        )
    }

    /// Accepts a mismatch's payload as a new delivery under the stated `delivery_id`: claims the
    /// entry (`accepting`), puts a claim check on the payload's own raw artifact on the ingest
    /// queue, then marks the entry `accepted`. A retry with the same id resumes a stopped one.
    pub(super) async fn accept(
        &self,
        entry: &QuarantineEntry,
        existing: Option<QuarantineResolution>,
        delivery_id: &str,
        reason: String,
        actor: Option<String>,
    ) -> OpsResult {
        let plan = AcceptPlan::new(entry, delivery_id)?;
        plan.check_status(existing.as_ref())?;
        self.check_new_key_free(&plan).await?;
        let object = self.quarantined_object(entry).await?;
        let now = self.clock.now();
        let mut resolution = match (entry.status.as_str(), existing) {
            (STATUS_ACCEPTING, Some(existing)) => existing,
            _ => plan.resolution(reason, now),
        };
        if entry.status == STATUS_OPEN {
            let event = resolution_event(EVENT_ACCEPT_REQUESTED, &resolution, actor.clone(), now);
            self.transition(
                entry,
                QuarantineTransition {
                    quarantine_id: &entry.quarantine_id,
                    from: STATUS_OPEN,
                    to: STATUS_ACCEPTING,
                    resolution: Some(&resolution),
                    event: &event,
                },
            )
            .await?;
        }
        self.enqueue_accepted(&plan, object).await?;
        let accepted_at = self.finish_accept(entry, &resolution, actor).await?;
        resolution.resolved_at = Some(accepted_at);
        info!(quarantine_id = %entry.quarantine_id, new_delivery_key = %plan.new_key_text, "quarantined payload accepted as a new delivery");
        reply(
            200,
            &Accepted {
                quarantine_id: entry.quarantine_id.clone(),
                status: STATUS_ACCEPTED,
                original_delivery_key: plan.original.to_owned(),
                new_delivery_key: plan.new_key_text,
                resolution,
            },
        )
    }

    /// The stated key must be free, or hold this very payload (a previous accept of it).
    async fn check_new_key_free(&self, plan: &AcceptPlan<'_>) -> Result<(), OpsError> {
        if let Some(taken) = self.evidence.replay_record(&plan.new_key_text).await? {
            if taken.payload_sha256 != plan.entry.evidence_sha256 {
                return Err(OpsError::Invalid(format!(
                    "delivery {} already exists with another payload; state another delivery_id",
                    plan.new_key_text
                )));
            }
        }
        Ok(())
    }

    /// The quarantined payload's raw artifact, which the new delivery's claim check names.
    async fn quarantined_object(
        &self,
        entry: &QuarantineEntry,
    ) -> Result<ArchivedObject, OpsError> {
        self.archive
            .head(&entry.evidence_key)
            .await
            .map_err(OpsError::archive)?
            .ok_or_else(|| OpsError::Unavailable {
                public: "the quarantined payload's raw artifact is missing",
                internal: format!("artifact {} is missing", entry.evidence_key),
            })
    }

    /// Puts the new delivery on the ingest queue: a claim check on the quarantined payload.
    async fn enqueue_accepted(
        &self,
        plan: &AcceptPlan<'_>,
        object: ArchivedObject,
    ) -> Result<(), OpsError> {
        let envelope = plan.envelope(self.archive.bucket(), object);
        // Enqueueing the same envelope twice is harmless: ingest replays the same key.
        self.queue
            .enqueue(&envelope)
            .await
            .map_err(|e| OpsError::Unavailable {
                public: "the ingest queue is unavailable; retry the same resolve request",
                internal: e.to_string(),
            })
    }

    /// Marks the claimed entry `accepted`; returns when. A concurrent identical accept that
    /// finished first is the same outcome.
    async fn finish_accept(
        &self,
        entry: &QuarantineEntry,
        resolution: &QuarantineResolution,
        actor: Option<String>,
    ) -> Result<Timestamp, OpsError> {
        let accepted_at = self.clock.now();
        let event = resolution_event(EVENT_ACCEPTED, resolution, actor, accepted_at);
        let moved = self
            .evidence
            .resolve_quarantine(&QuarantineTransition {
                quarantine_id: &entry.quarantine_id,
                from: STATUS_ACCEPTING,
                to: STATUS_ACCEPTED,
                resolution: None,
                event: &event,
            })
            .await?;
        if !moved {
            let status = self.current_status(&entry.quarantine_id).await?;
            if status != STATUS_ACCEPTED {
                return Err(Self::already_resolved(entry, &status));
            }
        }
        Ok(accepted_at)
    }

    pub(super) fn source_of(
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
}

/// Why a payload could not be read for a review, for the operator: the size limit or the missing
/// key as they are; anything else logged here and said without its internals.
pub(super) fn unreadable_artifact(e: ArtifactError) -> String {
    match e {
        ArtifactError::TooLarge { .. } => {
            format!(
                "a payload is larger than {MAX_DIFF_BYTES} bytes; compare the artifacts directly"
            )
        }
        ArtifactError::NotFound { key } => format!("artifact {key} is missing"),
        other => {
            warn!(error = %other, "raw archive unreadable for a review");
            "the raw archive is unavailable; retry later".to_owned()
        }
    }
}

/// The step of an accept named by `action`, as the resolution requested it.
fn resolution_event(
    action: &str,
    resolution: &QuarantineResolution,
    actor: Option<String>,
    at: Timestamp,
) -> ResolutionEvent {
    ResolutionEvent {
        action: action.into(),
        reason: resolution.reason.clone(),
        delivery_id: resolution.delivery_id.clone(),
        new_delivery_key: resolution.new_delivery_key.clone(),
        actor,
        at,
    }
}

/// What an accept of `entry` under an operator-stated delivery id stores: the original key,
/// and the new key (same tenant, connector and account; the stated id).
struct AcceptPlan<'a> {
    entry: &'a QuarantineEntry,
    original: &'a str,
    delivery_id: &'a str,
    new_key: DeliveryKey,
    new_key_text: String,
}

impl<'a> AcceptPlan<'a> {
    /// Refuses an entry that holds no acceptable payload and a stated id that is the original's.
    fn new(entry: &'a QuarantineEntry, delivery_id: &'a str) -> Result<Self, OpsError> {
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
        Ok(Self {
            entry,
            original,
            delivery_id,
            new_key,
            new_key_text,
        })
    }

    /// An open entry may be accepted; an `accepting` one only by the same identity (a previous
    /// accept that stopped before it finished: this resumes it).
    fn check_status(&self, existing: Option<&QuarantineResolution>) -> Result<(), OpsError> {
        match self.entry.status.as_str() {
            STATUS_OPEN => Ok(()),
            STATUS_ACCEPTING
                if existing.and_then(|r| r.new_delivery_key.as_deref())
                    == Some(self.new_key_text.as_str()) =>
            {
                Ok(())
            }
            other => Err(OpsService::already_resolved(self.entry, other)),
        }
    }

    /// The resolution a new accept requests.
    fn resolution(&self, reason: String, now: Timestamp) -> QuarantineResolution {
        QuarantineResolution {
            action: ACTION_ACCEPT.into(),
            reason,
            delivery_id: Some(self.delivery_id.to_owned()),
            new_delivery_key: Some(self.new_key_text.clone()),
            requested_at: now,
            resolved_at: None,
        }
    }

    /// The new delivery: basis `operator`, its body a claim check on the quarantined payload's
    /// own raw artifact in `bucket`.
    fn envelope(&self, bucket: &str, object: ArchivedObject) -> DeliveryEnvelope {
        let content_type = object
            .content_type
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .unwrap_or_else(|| "application/json".into());
        DeliveryEnvelope {
            envelope_version: ENVELOPE_VERSION,
            tenant: self.new_key.tenant.clone(),
            connector: self.new_key.connector.clone(),
            source_account: self.new_key.source_account.clone(),
            delivery: DeliveryIdentity {
                id: self.new_key.source_delivery_id.clone(),
                strength: IdentityStrength::Source,
                basis: OPERATOR_BASIS.into(),
            },
            retrieved_at: object.retrieved_at.unwrap_or(self.entry.first_seen_at),
            content_type,
            run: None,
            body: BodyRef::S3 {
                bucket: bucket.to_owned(),
                key: self.entry.evidence_key.clone(),
                version_id: object.version_id,
                size: object.size,
            },
        }
    }
}
