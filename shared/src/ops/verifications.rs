//! `POST /v1/verifications`, `GET /v1/verifications/{id}`, `POST /v1/verifications/{id}/withdraw`:
//! the verifiers' routes. They need the `offers:verify` scope, which is neither a reader's nor
//! an operator's: a verifier's token reaches these three routes and nothing else here, and an
//! operator's token does not reach them.

use super::{OpsError, OpsRequest, OpsResult, OpsService};
use crate::domain::definition::Problem;
use crate::domain::verification::{
    VerificationRecord, VerificationRequest, VerificationWithdrawal, VERIFY_SCOPE,
};
use crate::protocols::http::HttpResponse;
use crate::protocols::query::Principal;
use crate::protocols::verification::{self as protocol, VerificationError};
use serde::{Deserialize, Serialize};

/// The largest request: an evidence document of up to 3 MiB, base64, and the record's fields.
pub const MAX_VERIFICATION_BODY_BYTES: usize = 4 * 1024 * 1024 + 64 * 1024;

/// A record as the routes answer it: the record, and its withdrawal once withdrawn.
#[derive(Debug, Serialize)]
pub struct VerificationBody {
    #[serde(flatten)]
    pub record: VerificationRecord,
    pub withdrawal: Option<VerificationWithdrawal>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WithdrawRequest {
    reason: String,
}

/// The verifiers' routes, if `request` is one of them (`None`: another route).
pub(super) async fn route(service: &OpsService, request: &OpsRequest) -> Option<HttpResponse> {
    let path = request.path.trim_matches('/');
    let rest = match path {
        "v1/verifications" => "",
        other => other.strip_prefix("v1/verifications/")?,
    };
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let principal = match super::routes::authorized(request, VERIFY_SCOPE, "a verifier's") {
        Ok(principal) => principal,
        Err(refusal) => return Some(refusal),
    };
    let result = match (request.method.as_str(), parts.as_slice()) {
        ("POST", []) => service.record_verification(principal, &request.body).await,
        ("GET", [id]) => service.verification(principal, id).await,
        ("POST", [id, "withdraw"]) => {
            service
                .withdraw_verification(principal, id, &request.body)
                .await
        }
        (_, [] | [_] | [_, "withdraw"]) => {
            let allowed = if parts.is_empty() || parts.len() == 2 {
                "POST"
            } else {
                "GET"
            };
            return Some(super::routes::method_not_allowed(allowed));
        }
        _ => Err(OpsError::NotFound(format!("no route {}", request.path))),
    };
    Some(match result {
        Ok((status, body)) => HttpResponse::json(status, &body),
        Err(e) => e.into_response(),
    })
}

impl OpsService {
    /// `POST /v1/verifications`: 201 with the record; 200 with the stored one when the same
    /// request was recorded before.
    async fn record_verification(&self, principal: &Principal, body: &[u8]) -> OpsResult {
        if body.len() > MAX_VERIFICATION_BODY_BYTES {
            return Err(OpsError::Invalid(format!(
                "the request body is larger than {MAX_VERIFICATION_BODY_BYTES} bytes"
            )));
        }
        let body: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| OpsError::Invalid(format!("request body: {e}")))?;
        let now = self.clock.now();
        let request = VerificationRequest::read(&body, now).map_err(OpsError::Verification)?;
        let recorded = protocol::record_verification(
            self.evidence.as_ref(),
            self.evidence.as_ref(),
            self.archive.artifacts(),
            principal,
            &request,
            now,
        )
        .await
        .map_err(verification_error)?;
        let status = if recorded.created { 201 } else { 200 };
        super::reply(
            status,
            &VerificationBody {
                record: recorded.record,
                withdrawal: None,
            },
        )
    }

    /// `GET /v1/verifications/{id}`.
    async fn verification(&self, principal: &Principal, id: &str) -> OpsResult {
        let (record, withdrawal) = protocol::verification_of(self.evidence.as_ref(), principal, id)
            .await
            .map_err(verification_error)?;
        super::reply(200, &VerificationBody { record, withdrawal })
    }

    /// `POST /v1/verifications/{id}/withdraw`: 201 with the record and its withdrawal.
    async fn withdraw_verification(
        &self,
        principal: &Principal,
        id: &str,
        body: &[u8],
    ) -> OpsResult {
        let request: WithdrawRequest = super::parse_body(body)?;
        let reason = super::reason_of(&request.reason)?;
        let (record, withdrawal) = protocol::withdraw_verification(
            self.evidence.as_ref(),
            principal,
            id,
            &reason,
            self.clock.now(),
        )
        .await
        .map_err(verification_error)?;
        super::reply(201, &VerificationBody { record, withdrawal })
    }
}

fn verification_error(e: VerificationError) -> OpsError {
    match e {
        VerificationError::Invalid(problems) => OpsError::Verification(problems),
        VerificationError::NotFound(m) => OpsError::NotFound(m),
        VerificationError::Conflict(code, m) => OpsError::Conflict(code, m),
        VerificationError::Store(e) => e.into(),
        VerificationError::Archive(e) => OpsError::archive(e),
    }
}

/// The answer to a verification with problems: 422, every problem with its pointer.
pub(super) fn verification_refused(problems: Vec<Problem>) -> HttpResponse {
    let count = problems.len();
    let message = format!(
        "the verification has {count} problem{}; each is listed with its JSON pointer",
        if count == 1 { "" } else { "s" }
    );
    HttpResponse::json(
        422,
        &super::bodies::DefinitionProblems {
            error: super::bodies::DefinitionError {
                code: "invalid_verification",
                message,
            },
            problems,
        },
    )
}
