//! File drops: an object created under `drops/{connector}/` in the raw bucket becomes one
//! delivery whose identity is the file name plus the object version. The body is not copied:
//! the envelope's claim check points at that exact object version.

use crate::domain::envelope::{BodyRef, DeliveryEnvelope};
use crate::domain::ids::{ConnectorId, DeliveryKey, IdentityStrength, SourceDeliveryId};
use crate::intake::{DeliveryQueue, QueueError};
use crate::protocols::ports::{Clock, ConnectorDirectory, StoreError};
use std::sync::Arc;
use tracing::info;

pub const DROPS_PREFIX: &str = "drops/";

/// One created object, as an S3 event notification (or the local watcher) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedObject {
    pub bucket: String,
    /// URL-decoded object key.
    pub key: String,
    pub version_id: Option<String>,
    pub size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DropError {
    /// Not a drop of a configured connector: nothing to ingest (logged, not retried).
    #[error("{0}")]
    Ignored(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

#[derive(Clone)]
pub struct DropService {
    connectors: Arc<dyn ConnectorDirectory>,
    queue: Arc<dyn DeliveryQueue>,
    clock: Arc<dyn Clock>,
}

impl DropService {
    pub fn new(
        connectors: Arc<dyn ConnectorDirectory>,
        queue: Arc<dyn DeliveryQueue>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            connectors,
            queue,
            clock,
        }
    }

    /// Enqueues the delivery for one dropped file; returns its delivery key.
    pub async fn handle(&self, object: &DroppedObject) -> Result<DeliveryKey, DropError> {
        let rest = object.key.strip_prefix(DROPS_PREFIX).ok_or_else(|| {
            DropError::Ignored(format!("{} is not under {DROPS_PREFIX}", object.key))
        })?;
        let (connector, file) = rest
            .split_once('/')
            .filter(|(c, f)| !c.is_empty() && !f.is_empty())
            .ok_or_else(|| {
                DropError::Ignored(format!(
                    "{} is not drops/{{connector}}/{{file}}",
                    object.key
                ))
            })?;
        let connector =
            ConnectorId::parse(connector).map_err(|e| DropError::Ignored(e.to_string()))?;
        let config = self
            .connectors
            .connector(&connector)
            .await?
            .ok_or_else(|| {
                DropError::Ignored(format!("no connector {connector} for drop {}", object.key))
            })?;
        // S3 itself calls the version of an object in an unversioned bucket "null".
        let version = object.version_id.as_deref().unwrap_or("null");
        let id = SourceDeliveryId::file_version(file, version);
        let key = DeliveryKey::new(
            config.tenant.clone(),
            connector,
            config.source_account.clone(),
            id,
            IdentityStrength::Source,
        );
        let mut envelope = DeliveryEnvelope::inline(
            &key,
            "file_version",
            self.clock.now(),
            config.payload_format.content_type(),
            None,
            &[],
        );
        envelope.body = BodyRef::S3 {
            bucket: object.bucket.clone(),
            key: object.key.clone(),
            version_id: object.version_id.clone(),
            size: object.size,
        };
        self.queue.enqueue(&envelope).await?;
        info!(delivery_key = %key, "file drop enqueued");
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::hashing::sha256_hex;
    use crate::intake::poller::fakes::{acme_eu, Directory, FixedClock, Journal, Queue};
    use std::collections::HashMap;

    /// The delivery id a drop of `file` (under the sample connector) with `version` gets.
    async fn drop_id(file: &str, version: Option<&str>) -> String {
        let config = acme_eu("http://unused", 1);
        let journal = Arc::new(Journal::default());
        let service = DropService::new(
            Arc::new(Directory(HashMap::from([(
                config.connector.clone(),
                config,
            )]))),
            Arc::new(Queue(journal.clone())),
            Arc::new(FixedClock),
        );
        let object = DroppedObject {
            bucket: "raw".into(),
            key: format!("drops/acme-eu/{file}"),
            version_id: version.map(str::to_owned),
            size: 1,
        };
        service.handle(&object).await.expect("enqueued");
        journal.envelopes()[0].delivery.id.as_str().to_owned()
    }

    #[tokio::test]
    async fn file_and_version_are_readable_and_split_unambiguously() {
        assert_eq!(drop_id("prices.csv", Some("v1")).await, "prices.csv@v1");
        assert_eq!(drop_id("prices.csv", None).await, "prices.csv@null");
        // An `@` in the file name or the version cannot move the boundary between them.
        assert_ne!(
            drop_id("a@b", Some("c")).await,
            drop_id("a", Some("b@c")).await
        );
        assert_ne!(
            drop_id("a", Some("b%40c")).await,
            drop_id("a", Some("b@c")).await
        );
    }

    #[tokio::test]
    async fn a_file_name_named_by_its_digest_cannot_collide_with_a_literal_name() {
        let spaced = drop_id("price list.csv", Some("v1")).await;
        assert!(SourceDeliveryId::parse(&spaced).is_ok());
        // A file literally named like the digest form of another name is a different delivery.
        let imitation = format!("file-{}", &sha256_hex(b"price list.csv")[..32]);
        assert_ne!(drop_id(&imitation, Some("v1")).await, spaced);
        assert_ne!(drop_id("price list.csv", Some("v2")).await, spaced);
    }

    /// S3 event keys are URL-encoded with `+` for spaces.
    fn url_decode(text: &str) -> String {
        crate::protocols::http::percent_decode(text, true)
    }

    #[test]
    fn decodes_s3_event_keys() {
        assert_eq!(
            url_decode("drops/acme-eu/price+list%202026.csv"),
            "drops/acme-eu/price list 2026.csv"
        );
        assert_eq!(url_decode("100%"), "100%");
        assert_eq!(url_decode("%zz"), "%zz");
    }
}
