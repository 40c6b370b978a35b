//! The credential a defined pull sends, by reference: a definition names a secret
//! (`auth.secret_ref`), never its value. [`PullCredentials`] resolves the reference (Secrets
//! Manager in AWS, `crate::aws::pull_credentials`; a local file of sample secrets for the local
//! stack, [`LocalPullCredentials`]); [`auth_header`] turns it into the request header.
//!
//! The value travels as a [`Secret`], whose `Debug` and `Display` print `[redacted]`: it is
//! never logged, never in an error message, never stored (a run records the reference only).

use crate::domain::definition::Auth;
use crate::domain::ids::TenantId;
use async_trait::async_trait;
use base64::Engine;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// A credential's value. Printing it shows `[redacted]`; [`Secret::expose`] is the one way
/// to the text, used where a header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself: only for building the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why a credential could not be had. Names the reference, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("credential {0:?} does not exist")]
    NotFound(String),
    #[error("credential {0:?} could not be read (the store did not answer)")]
    Unavailable(String),
    #[error("credential {reference:?} is not usable: {reason}")]
    Unusable {
        reference: String,
        reason: &'static str,
    },
    #[error("no credential store is wired here")]
    NoStore,
}

/// Resolves a `secret_ref` to its current value, for a connector of `tenant`. A store shared by
/// tenants MUST refuse a reference outside the tenant's own secrets: the pull sends the value
/// to the URL its definition names, which the tenant's operator chooses.
#[async_trait]
pub trait PullCredentials: Send + Sync {
    async fn credential(
        &self,
        tenant: &TenantId,
        secret_ref: &str,
    ) -> Result<Secret, CredentialError>;
}

/// No credential store: every reference fails (`NoStore`); pulls with `auth: none` still run.
pub struct NoPullCredentials;

#[async_trait]
impl PullCredentials for NoPullCredentials {
    async fn credential(&self, _: &TenantId, _: &str) -> Result<Secret, CredentialError> {
        Err(CredentialError::NoStore)
    }
}

/// The local stack's credentials: a JSON object `{"secret_ref": "value", ...}` of local sample
/// values (`infra/local/pull-secrets.json`), read once.
pub struct LocalPullCredentials {
    values: HashMap<String, Secret>,
}

impl LocalPullCredentials {
    pub fn load(path: impl AsRef<Path>) -> anyhow::Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Keys starting with `_` are comments. A parse error reports its position only (serde's
    /// message may quote the input).
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        let raw: HashMap<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("not a JSON object at {}:{}", e.line(), e.column()))?;
        let mut values = HashMap::new();
        for (reference, value) in raw {
            if reference.starts_with('_') {
                continue;
            }
            let serde_json::Value::String(value) = value else {
                anyhow::bail!("the value of {reference:?} is not a string");
            };
            values.insert(reference, Secret::new(value));
        }
        Ok(Self { values })
    }
}

#[async_trait]
impl PullCredentials for LocalPullCredentials {
    async fn credential(&self, _: &TenantId, secret_ref: &str) -> Result<Secret, CredentialError> {
        self.values
            .get(secret_ref)
            .cloned()
            .ok_or_else(|| CredentialError::NotFound(secret_ref.to_owned()))
    }
}

/// The header `auth` sends: `Authorization: Bearer {secret}` (bearer), `{header}: {secret}`
/// (api_key_header), `Authorization: Basic base64(user:password)` (basic, the secret being
/// `user:password`); `None` for `auth: none`.
pub async fn auth_header(
    auth: &Auth,
    tenant: &TenantId,
    credentials: &dyn PullCredentials,
) -> Result<Option<(String, Secret)>, CredentialError> {
    let (name, reference) = match auth {
        Auth::None => return Ok(None),
        Auth::Bearer { secret_ref } | Auth::Basic { secret_ref } => {
            ("authorization".to_owned(), secret_ref)
        }
        Auth::ApiKeyHeader { header, secret_ref } => (header.to_ascii_lowercase(), secret_ref),
    };
    let secret = credentials.credential(tenant, reference).await?;
    let unusable = |reason| CredentialError::Unusable {
        reference: reference.clone(),
        reason,
    };
    let value = match auth {
        Auth::Bearer { .. } => format!("Bearer {}", secret.expose()),
        Auth::Basic { .. } => {
            if !secret.expose().contains(':') {
                return Err(unusable("a basic credential is `user:password`"));
            }
            let encoded = base64::engine::general_purpose::STANDARD.encode(secret.expose());
            format!("Basic {encoded}")
        }
        _ => secret.expose().to_owned(),
    };
    if value.is_empty() || value.chars().any(|c| c.is_control()) {
        return Err(unusable("empty, or holds a control character"));
    }
    Ok(Some((name, Secret::new(value))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> TenantId {
        TenantId::parse("demo").unwrap()
    }

    const LOCAL: &str = r#"{"_comment": "local samples", "distri/token": "s3cr3t-value", "basic/pair": "user:pa55"}"#;

    #[test]
    fn a_secret_never_prints_its_value() {
        let secret = Secret::new("s3cr3t-value");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(
            format!("{:?}", Some(("authorization", secret.clone()))),
            r#"Some(("authorization", [redacted]))"#
        );
        assert_eq!(secret.expose(), "s3cr3t-value");
    }

    #[tokio::test]
    async fn each_auth_kind_builds_its_header() {
        let store = LocalPullCredentials::from_json(LOCAL).unwrap();
        let bearer = Auth::Bearer {
            secret_ref: "distri/token".into(),
        };
        let (name, value) = auth_header(&bearer, &demo(), &store)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (name.as_str(), value.expose()),
            ("authorization", "Bearer s3cr3t-value")
        );
        assert!(!format!("{value:?} {value}").contains("s3cr3t"));
        let key = Auth::ApiKeyHeader {
            header: "X-Api-Key".into(),
            secret_ref: "distri/token".into(),
        };
        let (name, value) = auth_header(&key, &demo(), &store).await.unwrap().unwrap();
        assert_eq!(
            (name.as_str(), value.expose()),
            ("x-api-key", "s3cr3t-value")
        );
        let basic = Auth::Basic {
            secret_ref: "basic/pair".into(),
        };
        let (_, value) = auth_header(&basic, &demo(), &store).await.unwrap().unwrap();
        assert_eq!(value.expose(), "Basic dXNlcjpwYTU1");
        assert_eq!(
            auth_header(&Auth::None, &demo(), &store).await.unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn errors_name_the_reference_never_the_value() {
        let store = LocalPullCredentials::from_json(LOCAL).unwrap();
        let missing = Auth::Bearer {
            secret_ref: "nope".into(),
        };
        let error = auth_header(&missing, &demo(), &store).await.unwrap_err();
        assert_eq!(error, CredentialError::NotFound("nope".into()));
        let not_a_pair = Auth::Basic {
            secret_ref: "distri/token".into(),
        };
        let error = auth_header(&not_a_pair, &demo(), &store).await.unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(
            shown.contains("distri/token") && !shown.contains("s3cr3t"),
            "{shown}"
        );
        assert!(LocalPullCredentials::from_json(r#"{"a": 1}"#).is_err());
        let bad = LocalPullCredentials::from_json("{\"a\": \"s3cr3t")
            .err()
            .unwrap();
        assert!(!bad.to_string().contains("s3cr3t"), "{bad}");
    }
}
