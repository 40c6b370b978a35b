//! A retry is judged by how its delivery was first read: the canonicalization rule, the format
//! and, for a defined format, the connector definition version its replay record names, even
//! when the connector has changed since (docs/connectors.md, "Versions").

use super::keys::fingerprint_of;
use super::outcome::IngestError;
use super::{Delivery, IngestService};
use crate::domain::connector::PayloadFormat;
use crate::domain::definition::Definition;
use crate::domain::fingerprint::Fingerprint;
use crate::domain::model::ReplayRecord;
use crate::domain::normalize::{NormalizedRow, Reading};
use crate::protocols::ports::StoreError;

impl IngestService {
    /// The received payload's fingerprint under the rule, format and version recorded with
    /// `record`. A payload that does not even read that way is a different payload.
    pub(super) async fn received_fingerprint(
        &self,
        d: &Delivery,
        record: &ReplayRecord,
    ) -> Result<Fingerprint, IngestError> {
        if read_as_recorded(d, record) {
            return Ok(d.fingerprint.clone());
        }
        let unreadable = || Fingerprint {
            rule: record.fingerprint.rule,
            sha256_hex: d.payload_sha256.clone(),
        };
        let fingerprint = match record.payload_format {
            PayloadFormat::Defined => {
                let definition = self.recorded_definition(d, record).await?;
                Reading::Definition(&definition).fingerprint(record.fingerprint.rule, &d.body)
            }
            format => fingerprint_of(record.fingerprint.rule, format, &d.body),
        };
        Ok(fingerprint.unwrap_or_else(|_| unreadable()))
    }

    /// Rows in the order the record's rule assigns indices, read as the record was, even if
    /// the connector changed since.
    pub(super) async fn rows_for(
        &self,
        d: &Delivery,
        record: &ReplayRecord,
    ) -> Result<Vec<NormalizedRow>, IngestError> {
        let rows = if read_as_recorded(d, record) {
            d.rows.clone()
        } else {
            let definition = match record.payload_format {
                PayloadFormat::Defined => Some(self.recorded_definition(d, record).await?),
                _ => None,
            };
            let reading = match &definition {
                Some(definition) => Reading::Definition(definition),
                None => Reading::Format(record.payload_format),
            };
            let read = reading
                .read(record.fingerprint.rule, &d.body)
                .map_err(|e| {
                    StoreError::Invariant(format!(
                        "payload no longer normalizes under its recorded rule: {e}"
                    ))
                })?;
            read.rows
        };
        if rows.len() != record.observation_ids.len() {
            return Err(StoreError::Invariant(format!(
                "record lists {} observations but the payload has {} rows",
                record.observation_ids.len(),
                rows.len()
            ))
            .into());
        }
        Ok(rows)
    }

    /// The definition version the record names, from the connector's stored versions.
    async fn recorded_definition(
        &self,
        d: &Delivery,
        record: &ReplayRecord,
    ) -> Result<Definition, IngestError> {
        let Some(version) = record.connector_version else {
            return Err(StoreError::Invariant(format!(
                "record of {} names a defined format but no definition version",
                record.delivery_key
            ))
            .into());
        };
        self.connectors
            .definition_version(&d.key.connector, version)
            .await?
            .ok_or_else(|| {
                StoreError::Invariant(format!(
                    "definition version {version} of connector {} is not stored",
                    d.key.connector
                ))
                .into()
            })
    }
}

/// The delivery was read today as its record was first: same rule, format and version.
fn read_as_recorded(d: &Delivery, record: &ReplayRecord) -> bool {
    record.fingerprint.rule == d.fingerprint.rule
        && record.payload_format == d.connector.payload_format
        && (record.payload_format != PayloadFormat::Defined
            || record.connector_version == d.connector.version)
}
