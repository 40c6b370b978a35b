//! AWS Secrets Manager behind the webhook's `SigningSecrets` port.

use crate::domain::ids::ConnectorId;
use crate::intake::webhook::{SigningSecret, SigningSecrets};
use crate::protocols::ports::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long `SecretsManagerSecrets` reuses a connector's secrets.
pub const SECRETS_CACHE_TTL: Duration = Duration::from_secs(60);

/// Secrets in AWS Secrets Manager: the secret `{prefix}{connector}` holds a JSON array of secret
/// strings (`["whsec_...", ...]`, several during rotation). Values are reused for 60 s; a
/// missing secret means the connector has no active secret.
pub struct SecretsManagerSecrets {
    client: aws_sdk_secretsmanager::Client,
    prefix: String,
    ttl: Duration,
    cache: Mutex<HashMap<ConnectorId, (Instant, Vec<SigningSecret>)>>,
}

impl SecretsManagerSecrets {
    pub fn new(client: aws_sdk_secretsmanager::Client, prefix: impl Into<String>) -> Self {
        Self {
            client,
            prefix: prefix.into(),
            ttl: SECRETS_CACHE_TTL,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A client from the standard AWS environment (Lambda role, `AWS_ENDPOINT_URL_*`), with the
    /// same HTTP client as `AwsClients`.
    pub async fn from_env(prefix: impl Into<String>) -> Self {
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(crate::aws::http_client())
            .load()
            .await;
        Self::new(aws_sdk_secretsmanager::Client::new(&shared), prefix)
    }

    fn cached(&self, connector: &ConnectorId) -> Option<Vec<SigningSecret>> {
        let cache = self.cache.lock().ok()?;
        let (at, secrets) = cache.get(connector)?;
        (at.elapsed() < self.ttl).then(|| secrets.clone())
    }

    async fn fetch(&self, connector: &ConnectorId) -> Result<Vec<SigningSecret>, StoreError> {
        let name = format!("{}{}", self.prefix, connector);
        let output = match self.client.get_secret_value().secret_id(&name).send().await {
            Ok(output) => output,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                return Ok(Vec::new())
            }
            Err(e) => {
                return Err(StoreError::Unavailable(
                    anyhow::Error::new(e).context(format!("get secret {name}")),
                ))
            }
        };
        let text = output
            .secret_string()
            .ok_or_else(|| StoreError::Invariant(format!("secret {name} has no SecretString")))?;
        let values: Vec<String> = serde_json::from_str(text).map_err(|_| {
            StoreError::Invariant(format!(
                "secret {name} is not a JSON array of signing secret strings"
            ))
        })?;
        values
            .iter()
            .enumerate()
            .map(|(index, value)| {
                SigningSecret::parse(value).map_err(|reason| {
                    StoreError::Invariant(format!("secret {name} entry #{index}: {reason}"))
                })
            })
            .collect()
    }
}

#[async_trait]
impl SigningSecrets for SecretsManagerSecrets {
    async fn active_secrets(
        &self,
        connector: &ConnectorId,
    ) -> Result<Vec<SigningSecret>, StoreError> {
        if let Some(secrets) = self.cached(connector) {
            return Ok(secrets);
        }
        let secrets = self.fetch(connector).await?;
        // Only hits are cached: a secret created a moment ago must not be refused for 60 s.
        if !secrets.is_empty() {
            if let Ok(mut cache) = self.cache.lock() {
                cache.insert(connector.clone(), (Instant::now(), secrets.clone()));
            }
        }
        Ok(secrets)
    }
}
