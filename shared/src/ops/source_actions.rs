//! Identity corrections (record, show, withdraw) and source quarantines (set, show, lift).

use super::{
    actor_of, correction_error, operation_error, parse_body, reason_of, reply, OpsError, OpsResult,
    OpsService,
};
use crate::domain::item::CanonicalItem;
use crate::protocols::identity_corrections::{CorrectionError, CorrectionRequest};
use crate::protocols::query::Principal;
use crate::protocols::source_quarantine::{
    lift_source_quarantine, quarantine_source, source_quarantine_view,
};
use serde::Deserialize;

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

impl OpsService {
    /// `POST /v1/identity-corrections`: 201 when recorded, 200 when the same correction was
    /// already in force (it is run again to completion; its record is never rewritten).
    pub(super) async fn identity_correction(
        &self,
        principal: &Principal,
        body: &[u8],
    ) -> OpsResult {
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
        reply(if recorded { 201 } else { 200 }, &view)
    }

    /// The correction `id` if it belongs to the caller's tenant.
    pub(super) async fn tenant_correction(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<crate::protocols::identity_corrections::CorrectionView, OpsError> {
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
    pub(super) async fn correction_show(&self, principal: &Principal, id: &str) -> OpsResult {
        reply(200, &self.tenant_correction(principal, id).await?)
    }

    /// `POST /v1/identity-corrections/{id}/withdraw`: a new record; the part's rows belong to
    /// the part again.
    pub(super) async fn correction_withdraw(
        &self,
        principal: &Principal,
        id: &str,
        body: &[u8],
    ) -> OpsResult {
        let request: ReasonBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        self.tenant_correction(principal, id).await?;
        let (view, recorded) = self
            .corrections
            .withdraw(id, &reason, actor_of(principal))
            .await
            .map_err(correction_error)?;
        reply(if recorded { 201 } else { 200 }, &view)
    }

    /// `POST /v1/source-quarantines`.
    pub(super) async fn source_quarantine(&self, principal: &Principal, body: &[u8]) -> OpsResult {
        let request: SourceQuarantineBody = parse_body(body)?;
        let reason = reason_of(&request.reason)?;
        let config = self.tenant_connector(principal, &request.connector).await?;
        let source = Self::source_of(principal, &config, request.source_account.as_deref())?;
        let view = quarantine_source(
            self.evidence.as_ref(),
            &source,
            &reason,
            actor_of(principal),
            self.clock.now(),
        )
        .await
        .map_err(operation_error)?;
        reply(201, &view)
    }

    /// `POST /v1/source-quarantines/{connector}/lift`.
    pub(super) async fn source_quarantine_lift(
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
            self.evidence.as_ref(),
            &source,
            &reason,
            actor_of(principal),
            self.clock.now(),
        )
        .await
        .map_err(operation_error)?;
        reply(200, &view)
    }

    /// `GET /v1/source-quarantines/{connector}[?source_account=...]`: the state and every set
    /// and lift.
    pub(super) async fn source_quarantine_show(
        &self,
        principal: &Principal,
        connector: &str,
        account: Option<&str>,
    ) -> OpsResult {
        let config = self.tenant_connector(principal, connector).await?;
        let source = Self::source_of(principal, &config, account)?;
        let view = source_quarantine_view(self.evidence.as_ref(), &source)
            .await
            .map_err(operation_error)?;
        reply(200, &view)
    }
}
