//! File drops: an object created under `drops/{connector}/` in the raw bucket becomes one
//! delivery whose identity is the file name plus the sha256 of its content, so a supplier's
//! retried upload of the same bytes (a new S3 version) replays the stored delivery. The object
//! version is provenance: the envelope's claim check points at that exact version, and the body
//! is not copied. docs/adr/0026-file-drops-named-by-content.md has the rule and its limits.

use crate::domain::connector::{ConnectorConfig, IdentityRule};
use crate::domain::envelope::{BodyRef, DeliveryEnvelope};
use crate::domain::ids::{ConnectorId, DeliveryKey, IdentityStrength, SourceDeliveryId};
use crate::intake::{DeliveryQueue, QueueError};
use crate::protocols::ports::{
    ArtifactError, ArtifactStore, Clock, ConnectorDirectory, StoreError,
};
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
    /// Not a drop of a configured connector, or an object gone before it was read: nothing to
    /// ingest (logged, not retried).
    #[error("{0}")]
    Ignored(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The dropped object could not be read to name it (retried).
    #[error(transparent)]
    Object(#[from] ArtifactError),
}

#[derive(Clone)]
pub struct DropService {
    connectors: Arc<dyn ConnectorDirectory>,
    queue: Arc<dyn DeliveryQueue>,
    /// Reads the dropped object to hash it.
    objects: Arc<dyn ArtifactStore>,
    clock: Arc<dyn Clock>,
}

/// The connector and the file name of a drop key `drops/{connector}/{file}`.
fn drop_path(key: &str) -> Result<(ConnectorId, &str), DropError> {
    let rest = key
        .strip_prefix(DROPS_PREFIX)
        .ok_or_else(|| DropError::Ignored(format!("{key} is not under {DROPS_PREFIX}")))?;
    let (connector, file) = rest
        .split_once('/')
        .filter(|(c, f)| !c.is_empty() && !f.is_empty())
        .ok_or_else(|| DropError::Ignored(format!("{key} is not drops/{{connector}}/{{file}}")))?;
    let connector = ConnectorId::parse(connector).map_err(|e| DropError::Ignored(e.to_string()))?;
    Ok((connector, file))
}

impl DropService {
    pub fn new(
        connectors: Arc<dyn ConnectorDirectory>,
        queue: Arc<dyn DeliveryQueue>,
        objects: Arc<dyn ArtifactStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            connectors,
            queue,
            objects,
            clock,
        }
    }

    /// Enqueues the delivery for one dropped file; returns its delivery key.
    pub async fn handle(&self, object: &DroppedObject) -> Result<DeliveryKey, DropError> {
        let (connector, file) = drop_path(&object.key)?;
        let config = self
            .connectors
            .connector(&connector)
            .await?
            .ok_or_else(|| {
                DropError::Ignored(format!("no connector {connector} for drop {}", object.key))
            })?;
        let (id, basis) = self.identity(&config, file, object).await?;
        let key = DeliveryKey::new(
            config.tenant.clone(),
            connector,
            config.source_account.clone(),
            id,
            IdentityStrength::Source,
        );
        let mut envelope = DeliveryEnvelope::inline(
            &key,
            basis,
            self.clock.now(),
            config.content_type(),
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
        info!(
            delivery_key = %key,
            version_id = object.version_id.as_deref().unwrap_or("null"),
            "file drop enqueued"
        );
        Ok(key)
    }

    /// The file's delivery id and its basis: the name plus the sha256 of that object version
    /// (`file_content`). A file larger than the connector accepts is not read (ingest refuses
    /// it from its size): it is named by its object version instead (`file_version`).
    async fn identity(
        &self,
        config: &ConnectorConfig,
        file: &str,
        object: &DroppedObject,
    ) -> Result<(SourceDeliveryId, &'static str), DropError> {
        // S3 itself calls the version of an object in an unversioned bucket "null".
        let version = object.version_id.as_deref();
        let by_version = || {
            let id = SourceDeliveryId::file_version(file, version.unwrap_or("null"));
            (id, "file_version")
        };
        let limit = config.max_body_bytes;
        if config.identity_rule == IdentityRule::FileName {
            return Ok((SourceDeliveryId::file_name(file), "file_name"));
        }
        if object.size > limit {
            return Ok(by_version());
        }
        if let Some(id) = self.snapshot_id(config, object).await? {
            return Ok((id, "snapshot_id"));
        }
        match self
            .objects
            .sha256_of(&object.bucket, &object.key, version, limit)
            .await
        {
            Ok(digest) => Ok((
                SourceDeliveryId::file_content(file, &digest),
                "file_content",
            )),
            Err(ArtifactError::TooLarge { .. }) => Ok(by_version()),
            Err(ArtifactError::NotFound { .. }) => Err(DropError::Ignored(format!(
                "{} version {} is gone: nothing to ingest",
                object.key,
                version.unwrap_or("null")
            ))),
            Err(other) => Err(other.into()),
        }
    }
}

impl DropService {
    /// For a connector whose definition names deliveries by a snapshot id in the body: that
    /// id, read from the dropped version (`None` when the file holds none: named by content).
    async fn snapshot_id(
        &self,
        config: &ConnectorConfig,
        object: &DroppedObject,
    ) -> Result<Option<SourceDeliveryId>, DropError> {
        let Some(definition) = config.definition.as_deref() else {
            return Ok(None);
        };
        if config.identity_rule != IdentityRule::SnapshotId {
            return Ok(None);
        }
        let body = self
            .objects
            .fetch(
                &object.bucket,
                &object.key,
                object.version_id.as_deref(),
                config.max_body_bytes,
            )
            .await?;
        Ok(definition
            .identity
            .snapshot_in(&body)
            .map(|id| SourceDeliveryId::snapshot(&id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::hashing::sha256_hex;
    use crate::intake::poller::fakes::{acme_eu, Directory, FixedClock, Journal, Queue};
    use crate::protocols::ports::{ArtifactMeta, ArtifactWrite};
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// Object versions by (key, version); counts the reads.
    #[derive(Default)]
    struct Objects {
        versions: HashMap<(String, String), Vec<u8>>,
        reads: Mutex<u32>,
    }

    #[async_trait::async_trait]
    impl ArtifactStore for Objects {
        async fn put_verified(
            &self,
            key: &str,
            _: &[u8],
            _: &[u8; 32],
            _: &ArtifactMeta,
        ) -> Result<ArtifactWrite, ArtifactError> {
            Err(ArtifactError::NotFound { key: key.into() })
        }

        async fn verify(&self, key: &str, _: &[u8; 32]) -> Result<(), ArtifactError> {
            Err(ArtifactError::NotFound { key: key.into() })
        }

        async fn fetch(
            &self,
            _: &str,
            key: &str,
            version_id: Option<&str>,
            limit: u64,
        ) -> Result<Vec<u8>, ArtifactError> {
            *self.reads.lock().unwrap() += 1;
            let version = version_id.unwrap_or("null").to_owned();
            let body = self
                .versions
                .get(&(key.to_owned(), version))
                .cloned()
                .ok_or_else(|| ArtifactError::NotFound { key: key.into() })?;
            if body.len() as u64 > limit {
                return Err(ArtifactError::TooLarge {
                    key: key.into(),
                    size: body.len() as u64,
                    limit,
                });
            }
            Ok(body)
        }
    }

    /// The sample connector's drops of `file`, one per (version, body), in that order: the
    /// id and basis each was enqueued with, and how often the objects were read.
    async fn drops(
        file: &str,
        versions: &[(Option<&str>, &[u8])],
        size: impl Fn(&[u8]) -> u64,
    ) -> (Vec<Result<(String, String), DropError>>, u32) {
        drops_of(acme_eu("http://unused", 1), file, versions, size).await
    }

    /// `drops`, under `config` (its connector id must be `acme-eu`).
    async fn drops_of(
        config: ConnectorConfig,
        file: &str,
        versions: &[(Option<&str>, &[u8])],
        size: impl Fn(&[u8]) -> u64,
    ) -> (Vec<Result<(String, String), DropError>>, u32) {
        let journal = Arc::new(Journal::default());
        let key = format!("drops/acme-eu/{file}");
        let objects = Arc::new(Objects {
            versions: versions
                .iter()
                .map(|(v, body)| ((key.clone(), v.unwrap_or("null").to_owned()), body.to_vec()))
                .collect(),
            ..Objects::default()
        });
        let service = DropService::new(
            Arc::new(Directory(HashMap::from([(
                config.connector.clone(),
                config,
            )]))),
            Arc::new(Queue(journal.clone())),
            objects.clone(),
            Arc::new(FixedClock),
        );
        let mut out = Vec::new();
        for (version, body) in versions {
            let object = DroppedObject {
                bucket: "raw".into(),
                key: key.clone(),
                version_id: version.map(str::to_owned),
                size: size(body),
            };
            out.push(service.handle(&object).await.map(|_| {
                let envelope = journal.envelopes().pop().expect("enqueued");
                let BodyRef::S3 { version_id, .. } = &envelope.body else {
                    panic!("a claim check")
                };
                assert_eq!(version_id.as_deref(), *version, "the version is provenance");
                (
                    envelope.delivery.id.as_str().to_owned(),
                    envelope.delivery.basis,
                )
            }));
        }
        let reads = *objects.reads.lock().unwrap();
        (out, reads)
    }

    /// The delivery id a drop of `file` with `body` gets (version `v1`).
    async fn drop_id(file: &str, body: &[u8]) -> String {
        let (mut ids, _) = drops(file, &[(Some("v1"), body)], |b| b.len() as u64).await;
        ids.remove(0).expect("enqueued").0
    }

    /// A drop connector made from a definition whose identity is `identity`.
    fn defined(identity: serde_json::Value) -> ConnectorConfig {
        let mut document: serde_json::Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/suppliers/snapshot-webhooks/definition.json"
        ))
        .unwrap();
        document["connector"] = serde_json::json!("acme-eu");
        document["transport"] = serde_json::json!({ "kind": "drop" });
        document["identity"] = identity;
        let definition = crate::domain::definition::Definition::read(&document).unwrap();
        definition
            .to_config(crate::domain::ids::TenantId::parse("demo").unwrap(), 1)
            .unwrap()
    }

    #[tokio::test]
    async fn a_declared_snapshot_id_names_the_file_else_its_content_does() {
        let config = defined(serde_json::json!({ "kind": "body", "path": "$.snapshot_id" }));
        let with = br#"{"snapshot_id":"SNAP-8812","stock":[]}"#;
        let without = br#"{"stock":[]}"#;
        let (ids, _) = drops_of(
            config,
            "a.json",
            &[(Some("v1"), with), (Some("v2"), without)],
            |b| b.len() as u64,
        )
        .await;
        let ids: Vec<_> = ids.into_iter().map(Result::unwrap).collect();
        assert_eq!(ids[0], ("snapshot:SNAP-8812".into(), "snapshot_id".into()));
        let by_content = format!("a.json@sha256:{}", sha256_hex(without));
        assert_eq!(ids[1], (by_content, "file_content".into()));
    }

    #[tokio::test]
    async fn a_file_named_by_its_name_alone_is_not_read() {
        let config = defined(serde_json::json!({ "kind": "file_name" }));
        let (ids, reads) = drops_of(
            config,
            "prices.json",
            &[(Some("v1"), b"a"), (Some("v2"), b"b")],
            |b| b.len() as u64,
        )
        .await;
        for id in ids {
            assert_eq!(id.unwrap(), ("prices.json@name".into(), "file_name".into()));
        }
        assert_eq!(reads, 0);
    }

    #[tokio::test]
    async fn the_same_bytes_under_the_same_name_are_one_identity_whatever_the_version() {
        let (ids, reads) = drops(
            "prices.csv",
            &[(Some("v1"), b"a,b"), (Some("v2"), b"a,b"), (None, b"a,b")],
            |b| b.len() as u64,
        )
        .await;
        let expected = format!("prices.csv@sha256:{}", sha256_hex(b"a,b"));
        for id in ids {
            assert_eq!(id.unwrap(), (expected.clone(), "file_content".to_owned()));
        }
        assert_eq!(reads, 3, "each drop is read to be named");
    }

    #[tokio::test]
    async fn other_bytes_or_another_name_are_another_identity() {
        assert_ne!(
            drop_id("prices.csv", b"a,b").await,
            drop_id("prices.csv", b"a,c").await
        );
        assert_ne!(
            drop_id("prices.csv", b"a,b").await,
            drop_id("prices2.csv", b"a,b").await
        );
        // An `@` in the file name cannot move the boundary between name and content.
        let digest = sha256_hex(b"x");
        assert_eq!(drop_id("a@b", b"x").await, format!("a@b@sha256:{digest}"));
        assert_ne!(
            drop_id(&format!("a@sha256:{digest}"), b"y").await,
            drop_id("a", b"x").await
        );
    }

    #[tokio::test]
    async fn a_file_name_named_by_its_digest_cannot_collide_with_a_literal_name() {
        let spaced = drop_id("price list.csv", b"x").await;
        assert!(spaced.starts_with("file-") && SourceDeliveryId::parse(&spaced).is_ok());
        // A file literally named like the digest form of another name is a different delivery.
        let imitation = format!("file-{}", &sha256_hex(b"price list.csv")[..32]);
        assert_ne!(drop_id(&imitation, b"x").await, spaced);
        assert_ne!(drop_id("price list.csv", b"y").await, spaced);
    }

    #[tokio::test]
    async fn a_file_over_the_connector_limit_is_named_by_its_version_without_being_read() {
        let limit = acme_eu("http://unused", 1).max_body_bytes;
        let (ids, reads) = drops("big.csv", &[(Some("v1"), b"x")], |_| limit + 1).await;
        assert_eq!(
            ids.into_iter().next().unwrap().unwrap(),
            ("big.csv@version:v1".to_owned(), "file_version".to_owned())
        );
        assert_eq!(reads, 0);
        // Announced small but larger when read: named by its version too.
        let big = vec![b'x'; usize::try_from(limit).unwrap() + 1];
        let (ids, _) = drops("big.csv", &[(Some("v2"), &big)], |_| 1).await;
        assert_eq!(
            ids.into_iter().next().unwrap().unwrap().0,
            "big.csv@version:v2"
        );
    }

    #[tokio::test]
    async fn a_version_gone_before_it_is_read_is_ignored() {
        let config = acme_eu("http://unused", 1);
        let service = DropService::new(
            Arc::new(Directory(HashMap::from([(
                config.connector.clone(),
                config,
            )]))),
            Arc::new(Queue(Arc::new(Journal::default()))),
            Arc::new(Objects::default()),
            Arc::new(FixedClock),
        );
        let object = DroppedObject {
            bucket: "raw".into(),
            key: "drops/acme-eu/gone.csv".into(),
            version_id: Some("v1".into()),
            size: 1,
        };
        let outcome = service.handle(&object).await;
        assert!(
            matches!(&outcome, Err(DropError::Ignored(why)) if why.contains("gone")),
            "{outcome:?}"
        );
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
