//! Typed configuration read once from the environment at start-up; a missing key fails init.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {key} has an invalid value: {reason}")]
    Invalid { key: &'static str, reason: String },
}

/// A required, non-empty environment variable; a missing one fails the function's init.
pub fn required(key: &'static str) -> Result<String, ConfigError> {
    match std::env::var(key) {
        Ok(value) if !value.trim().is_empty() => Ok(value),
        _ => Err(ConfigError::Missing(key)),
    }
}

fn flag(key: &'static str) -> Result<bool, ConfigError> {
    match std::env::var(key).ok().as_deref() {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(ConfigError::Invalid {
            key,
            reason: format!("{other:?} is not true/false"),
        }),
    }
}

fn seconds(key: &'static str, default: u64) -> Result<Duration, ConfigError> {
    match std::env::var(key).ok() {
        None => Ok(Duration::from_secs(default)),
        Some(text) => text
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| ConfigError::Invalid {
                key,
                reason: format!("{text:?} is not a whole number of seconds"),
            }),
    }
}

pub const EVIDENCE_TABLE: &str = "EVIDENCE_TABLE";
pub const RAW_BUCKET: &str = "RAW_BUCKET";
pub const S3_FORCE_PATH_STYLE: &str = "S3_FORCE_PATH_STYLE";
pub const CONNECTOR_CACHE_SECONDS: &str = "CONNECTOR_CACHE_SECONDS";

/// Configuration of the ingest function.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub evidence_table: String,
    pub raw_bucket: String,
    pub s3_force_path_style: bool,
    /// How long a connector's configuration is reused before it is read again.
    pub connector_cache: Duration,
}

impl IngestConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            evidence_table: required(EVIDENCE_TABLE)?,
            raw_bucket: required(RAW_BUCKET)?,
            s3_force_path_style: flag(S3_FORCE_PATH_STYLE)?,
            connector_cache: seconds(CONNECTOR_CACHE_SECONDS, 30)?,
        })
    }
}
