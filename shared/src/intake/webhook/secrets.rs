//! Where a connector's active signing secrets come from (`SigningSecrets`), and the local JSON
//! secrets file. The Secrets Manager adapter is `crate::aws::secrets::SecretsManagerSecrets`.

use super::signing::{SecretError, SigningSecret};
use crate::domain::ids::ConnectorId;
use crate::protocols::ports::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;

/// Where a connector's active signing secrets come from. During rotation several are active.
#[async_trait]
pub trait SigningSecrets: Send + Sync {
    /// The connector's active secrets; empty when it has none.
    async fn active_secrets(
        &self,
        connector: &ConnectorId,
    ) -> Result<Vec<SigningSecret>, StoreError>;
}

/// Which connector owns a signing secret. A Standard Webhooks signature covers the message
/// id, the timestamp and the body, not the connector: a secret configured on two connectors
/// would let a delivery signed for one be posted to the other and stored under it. The first
/// connector seen using a secret owns it; the webhook refuses the secret for any other.
#[async_trait]
pub trait SecretOwners: Send + Sync {
    /// Records `connector` as the owner of the secret named `fingerprint` unless a connector
    /// already is; returns the owner either way.
    async fn claim_secret(
        &self,
        fingerprint: &str,
        connector: &ConnectorId,
    ) -> Result<ConnectorId, StoreError>;
}

/// Why a secrets file could not be loaded. Never carries secret values.
#[derive(Debug, thiserror::Error)]
pub enum SecretsFileError {
    #[error("cannot read signing secrets file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("signing secrets file is not a JSON object of connector -> [secret, ...] (line {line}, column {column})")]
    Shape { line: usize, column: usize },
    #[error("signing secrets file names an invalid connector: {0}")]
    Connector(crate::domain::ids::IdError),
    #[error("signing secret #{index} of connector {connector} is invalid: {reason}")]
    Secret {
        connector: String,
        index: usize,
        reason: SecretError,
    },
}

/// Secrets from a local JSON file `{"<connector>": ["whsec_...", ...]}`, read once.
#[derive(Debug, Clone, Default)]
pub struct LocalSecretsFile {
    secrets: HashMap<ConnectorId, Vec<SigningSecret>>,
}

impl LocalSecretsFile {
    pub fn load(path: impl AsRef<Path>) -> Result<Self, SecretsFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SecretsFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    pub fn from_json(text: &str) -> Result<Self, SecretsFileError> {
        // serde_json's error message may quote input; only its position is reported.
        let raw: HashMap<String, Vec<String>> =
            serde_json::from_str(text).map_err(|e| SecretsFileError::Shape {
                line: e.line(),
                column: e.column(),
            })?;
        let mut secrets = HashMap::new();
        for (connector, values) in raw {
            let id = ConnectorId::parse(&connector).map_err(SecretsFileError::Connector)?;
            let parsed = values
                .iter()
                .enumerate()
                .map(|(index, value)| {
                    SigningSecret::parse(value).map_err(|reason| SecretsFileError::Secret {
                        connector: connector.clone(),
                        index,
                        reason,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            secrets.insert(id, parsed);
        }
        Ok(Self { secrets })
    }

    pub fn from_map(secrets: HashMap<ConnectorId, Vec<SigningSecret>>) -> Self {
        Self { secrets }
    }
}

#[async_trait]
impl SigningSecrets for LocalSecretsFile {
    async fn active_secrets(
        &self,
        connector: &ConnectorId,
    ) -> Result<Vec<SigningSecret>, StoreError> {
        Ok(self.secrets.get(connector).cloned().unwrap_or_default())
    }
}
