//! Connector definitions in the evidence table (docs/connectors.md, "Versions"): every version
//! an append-only item `CONNECTOR#{id}` / `VERSION#{n:010}` holding the document as sent, and
//! the connector's item (`CONFIG`) the configuration of the newest one. Both are written in one
//! transaction, so the connector never names a version that is not stored.

use super::dynamo::{
    connector_item, connector_pk, decode, key, n, s, with_keys, DynamoEvidenceStore, Item,
    SK_CONNECTOR,
};
use super::operator_records::put;
use crate::domain::definition::Definition;
use crate::domain::ids::ConnectorId;
use crate::domain::timestamp::Timestamp;
use crate::ops::ports::{DefinitionVersion, DefinitionWrite, DefinitionWritten};
use crate::protocols::ports::StoreError;

const VERSION_SK_PREFIX: &str = "VERSION#";

fn version_sk(version: u64) -> String {
    format!("{VERSION_SK_PREFIX}{version:010}")
}

/// The stored form of a version: the document as JSON text.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredVersion {
    connector: String,
    tenant: String,
    version: u64,
    recorded_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recorded_by: Option<String>,
    document: String,
}

fn version_item(write: &DefinitionWrite<'_>, version: u64) -> Result<Item, StoreError> {
    let stored = StoredVersion {
        connector: write.config.connector.to_string(),
        tenant: write.config.tenant.to_string(),
        version,
        recorded_at: write.recorded_at,
        recorded_by: write.recorded_by.map(str::to_owned),
        document: write.document.to_string(),
    };
    Ok(with_keys(
        super::dynamo::encode(&stored)?,
        connector_pk(write.config.connector.as_str()),
        &version_sk(version),
        "connector_version",
    ))
}

/// The condition on the connector's item: absent, or the tenant's at the previous version (a
/// connector configured before definitions counts as version 0).
fn head_condition(version: u64) -> &'static str {
    if version == 1 {
        "attribute_not_exists(pk) OR (tenant = :tenant AND attribute_not_exists(version))"
    } else {
        "tenant = :tenant AND version = :previous"
    }
}

impl DynamoEvidenceStore {
    /// `OpsStore::put_definition`.
    pub async fn put_definition(
        &self,
        write: &DefinitionWrite<'_>,
    ) -> Result<DefinitionWritten, StoreError> {
        let version =
            write.config.version.filter(|v| *v >= 1).ok_or_else(|| {
                StoreError::Invariant("a definition write names no version".into())
            })?;
        let head = head_put(self.table(), write, version)?;
        let entry = put(
            version_item(write, version)?,
            self.table(),
            Some("attribute_not_exists(pk)"),
        )?;
        let schedule = super::pull_schedule::schedule_action(self.table(), write.config)?;
        let health =
            super::source_health::register_action(self.table(), write.config, write.recorded_at)?;
        match self
            .transact(
                vec![head, entry, schedule, health],
                "put connector definition",
            )
            .await?
        {
            None => Ok(DefinitionWritten::Stored),
            // Another transaction on these items was in flight: nothing was decided.
            Some(reasons) if reasons.iter().any(|r| r == "TransactionConflict") => {
                Err(StoreError::Unavailable(anyhow::anyhow!(
                    "put connector definition: a concurrent transaction; retry"
                )))
            }
            Some(_) => self.why_not_written(&write.config.connector, write).await,
        }
    }

    /// A cancelled write: the id is another tenant's, or another version came first.
    async fn why_not_written(
        &self,
        id: &ConnectorId,
        write: &DefinitionWrite<'_>,
    ) -> Result<DefinitionWritten, StoreError> {
        let stored: Option<crate::domain::connector::ConnectorConfig> =
            self.get(connector_pk(id.as_str()), SK_CONNECTOR).await?;
        Ok(match stored {
            Some(stored) if stored.tenant != write.config.tenant => DefinitionWritten::Taken,
            _ => DefinitionWritten::VersionMoved,
        })
    }

    /// `OpsStore::definition_versions`.
    pub async fn definition_versions(
        &self,
        id: &ConnectorId,
    ) -> Result<Vec<DefinitionVersion>, StoreError> {
        let stored: Vec<StoredVersion> = self
            .query_prefix(connector_pk(id.as_str()), VERSION_SK_PREFIX)
            .await?;
        stored.into_iter().map(version_of).collect()
    }

    /// The definition of version `version` of a connector, as it was stored.
    pub async fn definition_version(
        &self,
        id: &ConnectorId,
        version: u64,
    ) -> Result<Option<Definition>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(connector_pk(id.as_str()), &version_sk(version))))
            .consistent_read(true)
            .send()
            .await
            .map_err(super::dynamo::unavailable("get connector version"))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let stored: StoredVersion = decode(item)?;
        serde_json::from_str(&stored.document)
            .map(Some)
            .map_err(|e| StoreError::Invariant(format!("stored definition does not read: {e}")))
    }
}

fn head_put(
    table: &str,
    write: &DefinitionWrite<'_>,
    version: u64,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
    let mut item = connector_item(write.config)?;
    item.insert("updated_at".to_owned(), s(write.recorded_at.to_rfc3339()));
    let condition = head_condition(version);
    let mut values = vec![(":tenant", s(write.config.tenant.as_str()))];
    if version > 1 {
        values.push((":previous", n(version - 1)));
    }
    let put = aws_sdk_dynamodb::types::Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(condition)
        .set_expression_attribute_values(Some(
            values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        ))
        .build()
        .map_err(super::dynamo::build_error)?;
    Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .put(put)
        .build())
}

fn version_of(stored: StoredVersion) -> Result<DefinitionVersion, StoreError> {
    let document = serde_json::from_str(&stored.document)
        .map_err(|e| StoreError::Invariant(format!("stored definition is not JSON: {e}")))?;
    Ok(DefinitionVersion {
        version: stored.version,
        recorded_at: stored.recorded_at,
        recorded_by: stored.recorded_by,
        document,
    })
}
