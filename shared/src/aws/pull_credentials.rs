//! AWS Secrets Manager behind the poller's `PullCredentials` port: a definition's
//! `auth.secret_ref` is the name of a secret whose `SecretString` is the credential itself (a
//! token, an API key, or `user:password` for basic). A tenant's references must lie under
//! `{prefix}{tenant}/` (`feedsafe/pull/demo/distri-api`): a pull sends the value to a URL its
//! tenant's operator chooses, so no tenant may name another's secret (and the functions' role
//! grants `GetSecretValue` under the prefix only). Values are reused for
//! [`PULL_CREDENTIALS_TTL`], so a rotated secret is in use within that long, without a deploy.
//! The value is never logged and never in an error; errors name the reference only.

use crate::domain::ids::TenantId;
use crate::intake::poller::credentials::{CredentialError, PullCredentials, Secret};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::warn;

/// How long a credential read from Secrets Manager is reused.
pub const PULL_CREDENTIALS_TTL: Duration = Duration::from_secs(300);
/// The name prefix of pull credentials when `PULL_SECRET_PREFIX` is not set.
pub const DEFAULT_PULL_SECRET_PREFIX: &str = "feedsafe/pull/";

pub struct SecretsManagerPullCredentials {
    client: aws_sdk_secretsmanager::Client,
    prefix: String,
    ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, Secret)>>,
}

impl SecretsManagerPullCredentials {
    pub fn new(client: aws_sdk_secretsmanager::Client, prefix: impl Into<String>) -> Self {
        Self {
            client,
            prefix: prefix.into(),
            ttl: PULL_CREDENTIALS_TTL,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A client from the standard AWS environment (Lambda role, `AWS_ENDPOINT_URL_*`), with the
    /// same HTTP client as `AwsClients`; the prefix from `PULL_SECRET_PREFIX`.
    pub async fn from_env() -> Self {
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(crate::aws::http_client())
            .load()
            .await;
        let prefix = std::env::var("PULL_SECRET_PREFIX")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_PULL_SECRET_PREFIX.to_owned());
        Self::new(aws_sdk_secretsmanager::Client::new(&shared), prefix)
    }

    fn cached(&self, reference: &str) -> Option<Secret> {
        let cache = self.cache.lock().ok()?;
        let (at, secret) = cache.get(reference)?;
        (at.elapsed() < self.ttl).then(|| secret.clone())
    }

    async fn fetch(&self, reference: &str) -> Result<Secret, CredentialError> {
        let output = match self
            .client
            .get_secret_value()
            .secret_id(reference)
            .send()
            .await
        {
            Ok(output) => output,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                return Err(CredentialError::NotFound(reference.to_owned()))
            }
            Err(e) => {
                // The SDK's error describes the call, never the secret's value.
                let detail = aws_sdk_secretsmanager::error::DisplayErrorContext(&e);
                warn!(secret_ref = reference, error = %detail, "get secret value failed");
                return Err(CredentialError::Unavailable(reference.to_owned()));
            }
        };
        let value = output
            .secret_string()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| CredentialError::Unusable {
                reference: reference.to_owned(),
                reason: "it has no SecretString",
            })?;
        Ok(Secret::new(value))
    }
}

/// Whether `reference` names one of `tenant`'s secrets under `prefix`: `{prefix}{tenant}/…`,
/// with no `..`-like trickery possible (Secrets Manager names are plain strings, compared as
/// such).
pub fn is_tenants_reference(prefix: &str, tenant: &TenantId, reference: &str) -> bool {
    reference
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(tenant.as_str()))
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|name| !name.is_empty())
}

#[async_trait]
impl PullCredentials for SecretsManagerPullCredentials {
    async fn credential(
        &self,
        tenant: &TenantId,
        secret_ref: &str,
    ) -> Result<Secret, CredentialError> {
        if !is_tenants_reference(&self.prefix, tenant, secret_ref) {
            return Err(CredentialError::Unusable {
                reference: secret_ref.to_owned(),
                reason: "it is not under this tenant's pull secret prefix ({prefix}{tenant}/)",
            });
        }
        if let Some(secret) = self.cached(secret_ref) {
            return Ok(secret);
        }
        let secret = self.fetch(secret_ref).await?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(secret_ref.to_owned(), (Instant::now(), secret.clone()));
        }
        Ok(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_names_only_its_own_secrets() {
        let demo = TenantId::parse("demo").unwrap();
        let prefix = DEFAULT_PULL_SECRET_PREFIX;
        assert!(is_tenants_reference(
            prefix,
            &demo,
            "feedsafe/pull/demo/distri-api"
        ));
        for other in [
            "feedsafe/pull/demo",
            "feedsafe/pull/demo/",
            "feedsafe/pull/demo2/distri-api",
            "feedsafe/pull/other/distri-api",
            "feedsafe/webhook-secrets/demo-hooks",
            "arn:aws:secretsmanager:eu-west-1:1:secret:feedsafe/pull/demo/x",
        ] {
            assert!(!is_tenants_reference(prefix, &demo, other), "{other}");
        }
    }
}
