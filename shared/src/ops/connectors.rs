//! A connector's definition through the ops routes (docs/connectors.md): `PUT
//! /v1/connectors/{id}` stores a new version, `GET /v1/connectors/{id}` shows the current one
//! and every version, `POST /v1/connectors/{id}/preview` reads a sample under the stored one.
//! The tenant is always the token's; an id another tenant holds is refused without naming it.

use super::bodies::{DefinitionStored, DefinitionSummary, DefinitionView};
use super::ports::{DefinitionWrite, DefinitionWritten};
use super::previews::{sample_of, SampleRequest, MAX_PREVIEW_BODY_BYTES};
use super::{actor_of, OpsError, OpsResult, OpsService};
use crate::domain::connector::ConnectorConfig;
use crate::domain::definition::preview::preview;
use crate::domain::definition::{Definition, Problem};
use crate::domain::ids::ConnectorId;
use crate::domain::mapping::Mapping;
use crate::protocols::query::Principal;
use serde_json::Value;

/// The largest definition document accepted.
pub const MAX_DEFINITION_BYTES: usize = 256 * 1024;

/// What a `PUT` does, decided from the stored connector before anything is written.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// The stored version already is this definition: nothing to write.
    Unchanged(u64),
    Write(u64),
}

impl OpsService {
    /// `PUT /v1/connectors/{id}`.
    pub(super) async fn put_connector(
        &self,
        principal: &Principal,
        id: &str,
        if_match: Option<&str>,
        body: &[u8],
    ) -> OpsResult {
        let document = definition_document(body)?;
        let definition = read_definition(id, &document)?;
        let connector = connector_id(id)?;
        let current = self.evidence.connector(&connector).await?;
        let version = match next_version(principal, current.as_ref(), if_match, &definition)? {
            Next::Unchanged(version) => return stored_reply(200, "unchanged", id, version),
            Next::Write(version) => version,
        };
        let config = definition
            .to_config(principal.tenant.clone(), version)
            .map_err(OpsError::Definition)?;
        let actor = actor_of(principal);
        let write = DefinitionWrite {
            config: &config,
            document: &document,
            recorded_by: actor.as_deref(),
            recorded_at: self.clock.now(),
        };
        match self.evidence.put_definition(&write).await? {
            DefinitionWritten::Stored if version == 1 => stored_reply(201, "created", id, version),
            DefinitionWritten::Stored => stored_reply(200, "updated", id, version),
            DefinitionWritten::Taken => Err(taken(id)),
            DefinitionWritten::VersionMoved => Err(moved(id)),
        }
    }

    /// `GET /v1/connectors/{id}`.
    pub(super) async fn connector_definition(&self, principal: &Principal, id: &str) -> OpsResult {
        let config = self.owned_connector(principal, id).await?;
        let versions = self.evidence.definition_versions(&config.connector).await?;
        let current = versions
            .iter()
            .find(|v| Some(v.version) == config.version)
            .map(|v| v.document.clone());
        super::reply(
            200,
            &DefinitionView {
                connector: config.connector.clone(),
                source_account: config.source_account.clone(),
                transport: config.transport_kind(),
                payload_format: config.payload_format,
                version: config.version.unwrap_or(0),
                definition: current,
                versions: versions
                    .into_iter()
                    .map(|v| DefinitionSummary {
                        version: v.version,
                        recorded_at: v.recorded_at,
                        recorded_by: v.recorded_by,
                    })
                    .collect(),
            },
        )
    }

    /// `POST /v1/connectors/{id}/preview`: a sample read under the stored definition.
    pub(super) async fn stored_preview(
        &self,
        principal: &Principal,
        id: &str,
        body: &[u8],
    ) -> OpsResult {
        let config = self.owned_connector(principal, id).await?;
        let Some(definition) = config.definition.as_deref() else {
            return Err(OpsError::Conflict(
                "no_definition",
                format!(
                    "connector {id:?} was configured before definitions; preview a draft with \
                     POST /v1/connector-previews"
                ),
            ));
        };
        if body.len() > MAX_PREVIEW_BODY_BYTES {
            return Err(OpsError::Invalid(format!(
                "the request body is larger than {MAX_PREVIEW_BODY_BYTES} bytes"
            )));
        }
        let request: SampleRequest = serde_json::from_slice(body)
            .map_err(|e| OpsError::Invalid(format!("request body: {e}")))?;
        let sample = sample_of(request.sample.as_ref(), request.sample_base64.as_ref())?;
        let mapping = Mapping::compile(definition).map_err(OpsError::Definition)?;
        super::reply(200, &preview(definition, &mapping, &sample))
    }

    /// The tenant's connector `id`; another tenant's is not found, as an absent one.
    async fn owned_connector(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<ConnectorConfig, OpsError> {
        let not_found =
            || OpsError::UnknownConnector(format!("connector {id:?} is not configured"));
        let connector = ConnectorId::parse(id).map_err(|_| not_found())?;
        self.evidence
            .connector(&connector)
            .await?
            .filter(|c| c.tenant == principal.tenant)
            .ok_or_else(not_found)
    }
}

fn connector_id(id: &str) -> Result<ConnectorId, OpsError> {
    ConnectorId::parse(id).map_err(|e| OpsError::Invalid(format!("connector id {id:?}: {e}")))
}

/// The body as a JSON document, within the size limit.
fn definition_document(body: &[u8]) -> Result<Value, OpsError> {
    if body.len() > MAX_DEFINITION_BYTES {
        return Err(OpsError::Invalid(format!(
            "the definition is larger than {MAX_DEFINITION_BYTES} bytes"
        )));
    }
    serde_json::from_slice(body)
        .map_err(|e| OpsError::Invalid(format!("the definition is not JSON: {e}")))
}

/// The document read and its mapping compiled: every problem at once, and the URL's id must be
/// the document's.
fn read_definition(id: &str, document: &Value) -> Result<Definition, OpsError> {
    let mut problems = match Definition::read(document) {
        Ok(definition) => match Mapping::compile(&definition) {
            Ok(_) if definition.connector == id => return Ok(definition),
            Ok(_) => Vec::new(),
            Err(problems) => problems,
        },
        Err(problems) => problems,
    };
    if document.get("connector").and_then(Value::as_str) != Some(id) {
        problems.push(Problem::new(
            "/connector",
            format!("must be {id:?}, the connector id in the URL"),
        ));
    }
    Err(OpsError::Definition(problems))
}

/// The version to write, or why not: another tenant's id, a missing or stale `If-Match`.
fn next_version(
    principal: &Principal,
    current: Option<&ConnectorConfig>,
    if_match: Option<&str>,
    definition: &Definition,
) -> Result<Next, OpsError> {
    let expected = if_match.map(parse_if_match).transpose()?;
    let Some(current) = current else {
        return match expected {
            None | Some(0) => Ok(Next::Write(1)),
            Some(asked) => Err(stale(&definition.connector, asked, 0)),
        };
    };
    if current.tenant != principal.tenant {
        return Err(taken(&definition.connector));
    }
    let at = current.version.unwrap_or(0);
    match expected {
        Some(asked) if asked != at => Err(stale(&definition.connector, asked, at)),
        _ if current.definition.as_deref() == Some(definition) => Ok(Next::Unchanged(at)),
        None => Err(OpsError::Precondition(
            428,
            "precondition_required",
            format!(
                "connector {:?} exists at version {at}; send If-Match: {at} to store a new version",
                definition.connector
            ),
        )),
        Some(_) => Ok(Next::Write(at + 1)),
    }
}

/// `If-Match: 3` or `If-Match: "3"`.
fn parse_if_match(value: &str) -> Result<u64, OpsError> {
    value.trim().trim_matches('"').parse().map_err(|_| {
        OpsError::Invalid(format!(
            "If-Match must be the connector's version number, not {value:?}"
        ))
    })
}

fn stale(id: &str, asked: u64, at: u64) -> OpsError {
    OpsError::Precondition(
        412,
        "version_conflict",
        format!("If-Match names version {asked} of connector {id:?}, but it is at version {at}"),
    )
}

fn moved(id: &str) -> OpsError {
    OpsError::Precondition(
        412,
        "version_conflict",
        format!("another version of connector {id:?} was stored meanwhile; read it and retry"),
    )
}

fn taken(id: &str) -> OpsError {
    OpsError::Conflict(
        "connector_id_taken",
        format!("connector id {id:?} is taken by another tenant; choose another id"),
    )
}

fn stored_reply(status: u16, outcome: &'static str, id: &str, version: u64) -> OpsResult {
    super::reply(
        status,
        &DefinitionStored {
            connector: id.to_owned(),
            version,
            outcome,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_takes_the_version_bare_or_quoted() {
        assert_eq!(parse_if_match("3").ok(), Some(3));
        assert_eq!(parse_if_match("\"12\"").ok(), Some(12));
        assert!(parse_if_match("W/\"x\"").is_err());
        assert!(parse_if_match("").is_err());
    }
}
