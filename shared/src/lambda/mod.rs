//! The Lambda glue: each function's entry point, from its event shape (API Gateway, SQS, the
//! DynamoDB stream, S3, EventBridge schedules) to the service that handles it, and what every
//! function wires once at start (JSON tracing, typed config, a connector cache, EMF metrics).
//! The same handlers run under `lambda_runtime`, in the local stack and in tests.

pub mod apigw;
pub mod config;
pub mod metrics;
pub mod s3;
pub mod schedule;
pub mod sqs;
pub mod stream;

use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::ConnectorId;
use crate::protocols::ports::{ConnectorDirectory, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// JSON logs for CloudWatch (`RUST_LOG` filters; default `info`). Secrets are never logged.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Err only when a subscriber is already installed, which is fine.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Keeps connector configurations for a short time so that a batch does not read them per message.
pub struct CachedConnectors {
    inner: Arc<dyn ConnectorDirectory>,
    ttl: Duration,
    entries: Mutex<HashMap<ConnectorId, (Instant, Option<ConnectorConfig>)>>,
}

impl CachedConnectors {
    pub fn new(inner: Arc<dyn ConnectorDirectory>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl ConnectorDirectory for CachedConnectors {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        if let Ok(entries) = self.entries.lock() {
            if let Some((at, config)) = entries.get(id) {
                if at.elapsed() < self.ttl {
                    return Ok(config.clone());
                }
            }
        }
        let config = self.inner.connector(id).await?;
        // Only hits are cached: a connector created a moment ago must not be refused for 30 s.
        if let (Some(_), Ok(mut entries)) = (&config, self.entries.lock()) {
            entries.insert(id.clone(), (Instant::now(), config.clone()));
        }
        Ok(config)
    }
}
