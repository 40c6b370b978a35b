//! How a connector's bodies are read: one of the first release's formats, or its definition.
//! Ingest, replays and the ops routes read a body through here, so a body means the same rows
//! and the same fingerprint wherever it is read.

use super::mapped::{fingerprint_under, normalize_mapped, RefusedRow};
use super::{normalize_and_fingerprint, NormalizedRow};
use crate::domain::connector::{ConnectorConfig, PayloadFormat};
use crate::domain::definition::{Definition, RowPolicy};
use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use crate::domain::mapping::Mapping;
use crate::domain::reject::{RejectCode, Rejection};

/// What reads a body.
#[derive(Debug, Clone, Copy)]
pub enum Reading<'a> {
    Format(PayloadFormat),
    Definition(&'a Definition),
}

/// A body as read: the rows to store, the rows set aside (only under `quarantine_rows`; under
/// `refuse_page` a bad row refuses the body), and the fingerprint of the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub rows: Vec<NormalizedRow>,
    pub refused: Vec<RefusedRow>,
    pub fingerprint: Fingerprint,
}

impl<'a> Reading<'a> {
    /// The connector's reading today.
    pub fn of(config: &'a ConnectorConfig) -> Self {
        match config.definition.as_deref() {
            Some(definition) if config.payload_format == PayloadFormat::Defined => {
                Reading::Definition(definition)
            }
            _ => Reading::Format(config.payload_format),
        }
    }

    /// Reads `body`, fingerprinting it under `rule`.
    pub fn read(&self, rule: CanonicalizationRule, body: &[u8]) -> Result<Read, Rejection> {
        match self {
            Reading::Format(format) => {
                let (rows, fingerprint) = normalize_and_fingerprint(*format, rule, body)?;
                Ok(Read {
                    rows,
                    refused: Vec::new(),
                    fingerprint,
                })
            }
            Reading::Definition(definition) => read_defined(definition, rule, body),
        }
    }

    /// The fingerprint of `body` under `rule` alone.
    pub fn fingerprint(
        &self,
        rule: CanonicalizationRule,
        body: &[u8],
    ) -> Result<Fingerprint, Rejection> {
        match self {
            Reading::Format(format) => Fingerprint::compute(rule, body, format.rows_path())
                .map_err(|e| {
                    Rejection::new(
                        RejectCode::InvalidPayload,
                        format!("body cannot be canonicalized: {e}"),
                    )
                }),
            Reading::Definition(definition) => {
                fingerprint_under(&compiled(definition)?, rule, body)
            }
        }
    }
}

fn compiled(definition: &Definition) -> Result<Mapping, Rejection> {
    Mapping::compile(definition).map_err(|problems| {
        let first = problems
            .first()
            .map(|p| format!("{}: {}", p.pointer, p.message))
            .unwrap_or_default();
        Rejection::new(
            RejectCode::InvalidPayload,
            format!("the connector's definition does not compile ({first})"),
        )
    })
}

fn read_defined(
    definition: &Definition,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<Read, Rejection> {
    let normalized = normalize_mapped(&compiled(definition)?, rule, body)?;
    if definition.row_policy == RowPolicy::RefusePage {
        if let Some(refusal) = normalized.refusal() {
            return Err(refusal);
        }
    }
    Ok(Read {
        rows: normalized.rows,
        refused: normalized.refused,
        fingerprint: normalized.fingerprint,
    })
}
