//! What the ops routes need from the stores, as ports: the evidence table (`OpsStore`, on top of
//! the protocol ports `EvidenceReads`, `SourceQuarantineStore` and `ConnectorDirectory`) and the
//! raw bucket (`RawObjects`, on top of `ArtifactStore`). `DynamoEvidenceStore` and
//! `S3ArtifactStore` implement them in the adapters layer; the ops layer never names them.

use super::{ArchivedObject, QuarantineResolution, ResolutionEvent};
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::{ConnectorId, TenantId};
use crate::domain::model::{Observation, QuarantineEntry};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{ArtifactError, ArtifactStore, ConnectorDirectory, StoreError};
use crate::protocols::source_quarantine::SourceQuarantineStore;
use crate::protocols::verification::VerificationStore;
use async_trait::async_trait;
use std::time::Duration;

/// A quarantine entry with the resolution stored beside it, if an operator acted on it.
pub type ResolvedEntry = (QuarantineEntry, Option<QuarantineResolution>);

/// One conditional status change of a quarantine entry, with the append-only event that
/// explains it (`QUAR#{id}` / `RES#{at}#{action}`), written in one transaction.
#[derive(Debug, Clone, Copy)]
pub struct QuarantineTransition<'a> {
    pub quarantine_id: &'a str,
    /// The status the entry must still have; nothing is written otherwise.
    pub from: &'a str,
    pub to: &'a str,
    /// Stored beside the entry when given; the stored one is kept otherwise.
    pub resolution: Option<&'a QuarantineResolution>,
    pub event: &'a ResolutionEvent,
}

impl QuarantineTransition<'_> {
    /// When the event happened (its sort key).
    pub fn at(&self) -> Timestamp {
        self.event.at
    }
}

/// A connector definition to store as the connector's version `config.version`: the
/// configuration made from it, and the document as the operator sent it.
#[derive(Debug, Clone, Copy)]
pub struct DefinitionWrite<'a> {
    /// Made by `Definition::to_config`, its `version` the one to write.
    pub config: &'a ConnectorConfig,
    pub document: &'a serde_json::Value,
    /// Who stored it (the token's subject) and when.
    pub recorded_by: Option<&'a str>,
    pub recorded_at: Timestamp,
}

/// How a definition write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionWritten {
    Stored,
    /// The id belongs to another tenant: nothing written.
    Taken,
    /// Another version was stored first: nothing written.
    VersionMoved,
}

/// One stored version of a connector definition (append-only).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DefinitionVersion {
    pub version: u64,
    pub recorded_at: Timestamp,
    pub recorded_by: Option<String>,
    /// The document as it was sent.
    pub document: serde_json::Value,
}

/// The evidence-table reads and writes of the ops routes beyond the protocol ports.
#[async_trait]
pub trait OpsStore: SourceQuarantineStore + ConnectorDirectory + VerificationStore {
    /// The entry `id` and its resolution (consistent).
    async fn quarantine_entry(&self, id: &str) -> Result<Option<ResolvedEntry>, StoreError>;
    /// Every quarantine entry of a tenant, with its resolution.
    async fn quarantine_entries(&self, tenant: &TenantId)
        -> Result<Vec<ResolvedEntry>, StoreError>;
    /// Every quarantine entry of a tenant, whatever its resolution holds.
    async fn quarantine_list(&self, tenant: &TenantId) -> Result<Vec<QuarantineEntry>, StoreError>;
    /// The append-only resolution history of an entry, oldest first.
    async fn quarantine_resolutions(&self, id: &str) -> Result<Vec<ResolutionEvent>, StoreError>;
    /// Applies `transition`; `false`, writing nothing, when the entry is not in `from`.
    async fn resolve_quarantine(
        &self,
        transition: &QuarantineTransition<'_>,
    ) -> Result<bool, StoreError>;
    /// Stores a definition as the connector's next version and its configuration as the
    /// connector's, in one transaction: written only while the connector is absent or the
    /// tenant's at version `config.version - 1`.
    async fn put_definition(
        &self,
        write: &DefinitionWrite<'_>,
    ) -> Result<DefinitionWritten, StoreError>;
    /// Every stored definition version of a connector, oldest first.
    async fn definition_versions(
        &self,
        connector: &ConnectorId,
    ) -> Result<Vec<DefinitionVersion>, StoreError>;
    /// A tenant's connectors, by id.
    async fn connectors_of(&self, tenant: &TenantId) -> Result<Vec<ConnectorConfig>, StoreError>;
    /// The stored observation `id`; a record that does not decode is an error (unlike
    /// `EvidenceReads::observation`, which skips it).
    async fn observation_record(&self, id: &str) -> Result<Option<Observation>, StoreError>;
}

/// The raw bucket as operators reach it: metadata and presigned download links.
#[async_trait]
pub trait RawObjects: ArtifactStore {
    fn bucket(&self) -> &str;
    /// Size, content type, version and `retrieved-at` metadata of an object; `None` if absent.
    async fn head(&self, key: &str) -> Result<Option<ArchivedObject>, ArtifactError>;
    /// A presigned `GET` of `key` valid for `expires`, downloading as an attachment named
    /// `filename` with `content_type` and `Cache-Control: no-store`.
    async fn presign_download(
        &self,
        key: &str,
        filename: &str,
        content_type: &str,
        expires: Duration,
    ) -> Result<String, anyhow::Error>;
}
