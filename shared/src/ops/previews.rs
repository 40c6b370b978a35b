//! `POST /v1/connector-previews`: a draft connector definition and a sample body, and what the
//! sample would give under it. Nothing is stored, enqueued or fetched: the answer is computed
//! from the request alone (docs/connectors.md, "Preview").

use super::{OpsError, OpsResult, OpsService};
use crate::domain::definition::preview::preview;
use crate::domain::definition::{Definition, Problem};
use crate::domain::mapping::Mapping;
use crate::protocols::query::Principal;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

/// The largest preview request: a sample of up to about 1 MiB, base64 or text, and its
/// definition.
pub const MAX_PREVIEW_BODY_BYTES: usize = 1536 * 1024;

/// `POST /v1/connector-previews`: the draft, and the sample as text or as base64 (for a file
/// in another encoding than UTF-8).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    pub definition: Value,
    #[serde(default)]
    pub sample: Option<String>,
    #[serde(default)]
    pub sample_base64: Option<String>,
}

/// `POST /v1/connectors/{id}/preview`: the sample alone, read under the stored definition.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleRequest {
    #[serde(default)]
    pub sample: Option<String>,
    #[serde(default)]
    pub sample_base64: Option<String>,
}

impl OpsService {
    /// `POST /v1/connector-previews`.
    pub(super) async fn connector_preview(&self, _principal: &Principal, body: &[u8]) -> OpsResult {
        let request = preview_request(body)?;
        let sample = sample_of(request.sample.as_ref(), request.sample_base64.as_ref())?;
        let definition = Definition::read(&request.definition).map_err(OpsError::Definition)?;
        let mapping = Mapping::compile(&definition).map_err(OpsError::Definition)?;
        super::reply(200, &preview(&definition, &mapping, &sample))
    }
}

fn preview_request(body: &[u8]) -> Result<PreviewRequest, OpsError> {
    if body.len() > MAX_PREVIEW_BODY_BYTES {
        return Err(OpsError::Invalid(format!(
            "the request body is larger than {MAX_PREVIEW_BODY_BYTES} bytes"
        )));
    }
    serde_json::from_slice(body).map_err(|e| OpsError::Invalid(format!("request body: {e}")))
}

/// The sample's bytes: exactly one of `sample` (text) and `sample_base64`.
pub(super) fn sample_of(
    text: Option<&String>,
    base64: Option<&String>,
) -> Result<Vec<u8>, OpsError> {
    match (text, base64) {
        (Some(text), None) => Ok(text.clone().into_bytes()),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| OpsError::Invalid(format!("sample_base64 is not base64: {e}"))),
        _ => Err(OpsError::Invalid(
            "give the sample as exactly one of sample (text) and sample_base64".into(),
        )),
    }
}

/// The answer to a definition with problems: 422, every problem with its pointer.
pub(super) fn definition_refused(problems: Vec<Problem>) -> crate::protocols::http::HttpResponse {
    let count = problems.len();
    let message = format!(
        "the connector definition has {count} problem{}; each is listed with its JSON pointer",
        if count == 1 { "" } else { "s" }
    );
    crate::protocols::http::HttpResponse::json(
        422,
        &super::bodies::DefinitionProblems {
            error: super::bodies::DefinitionError {
                code: "invalid_definition",
                message,
            },
            problems,
        },
    )
}
