//! The Lambda glue: each function's entry point, from its event shape (API Gateway, SQS, the
//! DynamoDB stream, S3, EventBridge schedules) to the service that handles it, and what every
//! function wires once at start (JSON tracing, typed config, a connector cache, EMF metrics).
//! The same handlers run under `lambda_runtime`, in the local stack and in tests.

pub mod apigw;
pub mod config;
pub mod isolation;
pub mod logging;
pub mod metrics;
pub mod s3;
pub mod schedule;
pub mod sizing;
pub mod source_metrics;
pub mod sqs;
pub mod stream;

use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::ConnectorId;
use crate::protocols::ports::{ConnectorDirectory, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// JSON log lines for CloudWatch in the shape Powertools users expect (`logging`: level from
/// `POWERTOOLS_LOG_LEVEL`, `AWS_LAMBDA_LOG_LEVEL`, `RUST_LOG`; default `info`). Secrets are
/// never logged.
pub fn init_tracing() {
    logging::init();
}

/// How long the webhook function's `CachedConnectors` remembers that a connector does not
/// exist. Only there: a webhook refused for it is retried by the supplier, while ingest would
/// quarantine a delivery for a connector created a moment ago for good.
pub const NEGATIVE_CACHE_TTL: Duration = Duration::from_secs(5);
/// Unknown names remembered at most; past that the list starts again (junk cannot grow it).
const MAX_REMEMBERED_MISSES: usize = 4096;

/// Keeps connector configurations for a short time so that a batch does not read them per
/// message. Unknown connectors are not remembered unless `with_negative_ttl` says so (the
/// webhook function: junk posted to `/v1/webhooks/{anything}` then costs one read per name per
/// few seconds, not one per request, and a connector created meanwhile is found after them).
pub struct CachedConnectors {
    inner: Arc<dyn ConnectorDirectory>,
    ttl: Duration,
    negative_ttl: Duration,
    entries: Mutex<HashMap<ConnectorId, (Instant, ConnectorConfig)>>,
    misses: Mutex<HashMap<ConnectorId, Instant>>,
}

impl CachedConnectors {
    pub fn new(inner: Arc<dyn ConnectorDirectory>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            negative_ttl: Duration::ZERO,
            entries: Mutex::new(HashMap::new()),
            misses: Mutex::new(HashMap::new()),
        }
    }

    /// Another time to remember unknown connectors (tests use milliseconds).
    pub fn with_negative_ttl(mut self, ttl: Duration) -> Self {
        self.negative_ttl = ttl;
        self
    }
}

#[async_trait]
impl ConnectorDirectory for CachedConnectors {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        if let Ok(entries) = self.entries.lock() {
            if let Some((at, config)) = entries.get(id) {
                if at.elapsed() < self.ttl {
                    return Ok(Some(config.clone()));
                }
            }
        }
        if let Ok(misses) = self.misses.lock() {
            if misses
                .get(id)
                .is_some_and(|at| at.elapsed() < self.negative_ttl)
            {
                return Ok(None);
            }
        }
        let config = self.inner.connector(id).await?;
        match &config {
            Some(found) => {
                if let Ok(mut entries) = self.entries.lock() {
                    entries.insert(id.clone(), (Instant::now(), found.clone()));
                }
                if let Ok(mut misses) = self.misses.lock() {
                    misses.remove(id);
                }
            }
            None => {
                if let Ok(mut misses) = self.misses.lock() {
                    if misses.len() >= MAX_REMEMBERED_MISSES {
                        misses.clear();
                    }
                    misses.insert(id.clone(), Instant::now());
                }
            }
        }
        Ok(config)
    }

    /// Versions never change: asked of the store each time (a replay under an old version is rare).
    async fn definition_version(
        &self,
        id: &ConnectorId,
        version: u64,
    ) -> Result<Option<crate::domain::definition::Definition>, StoreError> {
        self.inner.definition_version(id, version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Knows no connector until `appear` is set; counts lookups.
    #[derive(Default)]
    struct Counting {
        lookups: AtomicUsize,
        known: Mutex<Option<ConnectorConfig>>,
    }

    #[async_trait]
    impl ConnectorDirectory for Counting {
        async fn connector(&self, _: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            Ok(self.known.lock().unwrap().clone())
        }
    }

    /// Junk on `POST /v1/webhooks/{anything}` costs one read per connector name per few
    /// seconds, not one per request; a connector created meanwhile is found once that passes.
    #[tokio::test]
    async fn unknown_connectors_are_remembered_for_a_short_while() {
        let inner = Arc::new(Counting::default());
        let cache = CachedConnectors::new(inner.clone(), Duration::from_secs(30))
            .with_negative_ttl(Duration::from_millis(200));
        let id = ConnectorId::parse("nobody").unwrap();
        for _ in 0..5 {
            assert_eq!(cache.connector(&id).await.unwrap(), None);
        }
        assert_eq!(
            inner.lookups.load(Ordering::SeqCst),
            1,
            "one read for five misses"
        );
        *inner.known.lock().unwrap() = Some(crate::intake::poller::fakes::acme_eu(
            "https://x.example",
            1,
        ));
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(
            cache.connector(&id).await.unwrap().is_some(),
            "found after the short ttl"
        );
        assert_eq!(inner.lookups.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn by_default_a_miss_is_not_remembered() {
        let inner = Arc::new(Counting::default());
        let cache = CachedConnectors::new(inner.clone(), Duration::from_secs(30));
        let id = ConnectorId::parse("nobody").unwrap();
        cache.connector(&id).await.unwrap();
        cache.connector(&id).await.unwrap();
        assert_eq!(inner.lookups.load(Ordering::SeqCst), 2);
    }
}
