//! The raw bucket as operators and auditors reach it: reads and short-lived presigned links.

use super::ports::RawObjects;
use super::PRESIGN_SECONDS;
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::ArtifactError;
use std::sync::Arc;
use std::time::Duration;

/// Reads and presigned links on the raw bucket. The ops function's role may read objects;
/// links are signed with its credentials and expire after `PRESIGN_SECONDS`.
#[derive(Clone)]
pub struct RawArchive {
    store: Arc<dyn RawObjects>,
}

impl std::fmt::Debug for RawArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawArchive")
            .field("bucket", &self.store.bucket())
            .finish()
    }
}

/// The parts of an archived object's metadata a new delivery envelope needs.
#[derive(Debug, Clone)]
pub struct ArchivedObject {
    pub size: u64,
    pub content_type: Option<String>,
    pub version_id: Option<String>,
    pub retrieved_at: Option<Timestamp>,
}

impl RawArchive {
    pub fn new(store: Arc<dyn RawObjects>) -> Self {
        Self { store }
    }

    pub fn bucket(&self) -> &str {
        self.store.bucket()
    }

    /// The bucket as the protocols write evidence to it (verification documents).
    pub fn artifacts(&self) -> &dyn crate::protocols::ports::ArtifactStore {
        self.store.as_ref()
    }

    /// Reads an object, refusing objects larger than `limit`.
    pub async fn read(&self, key: &str, limit: u64) -> Result<Vec<u8>, ArtifactError> {
        self.store.fetch(self.bucket(), key, None, limit).await
    }

    /// Size, content type, version and `retrieved-at` metadata of an object; `None` if absent.
    pub async fn head(&self, key: &str) -> Result<Option<ArchivedObject>, ArtifactError> {
        self.store.head(key).await
    }

    /// A presigned `GET` for `key`, valid for `PRESIGN_SECONDS`, that downloads as an
    /// attachment (`Content-Disposition: attachment`) with `content_type` if it is one of
    /// [`DOWNLOAD_CONTENT_TYPES`], else `application/octet-stream`, and `no-store`: a supplier's
    /// literal bytes never render in the browser of whoever clicks the link, whatever type
    /// the supplier declared.
    pub async fn presign(
        &self,
        key: &str,
        content_type: Option<&str>,
    ) -> Result<String, anyhow::Error> {
        let name = key.rsplit('/').next().unwrap_or("artifact");
        self.store
            .presign_download(
                key,
                name,
                download_content_type(content_type),
                Duration::from_secs(PRESIGN_SECONDS),
            )
            .await
    }
}

/// The content types an artifact link may declare; anything else downloads as
/// `application/octet-stream`.
pub const DOWNLOAD_CONTENT_TYPES: [&str; 5] = [
    "application/json",
    "application/cloudevents+json",
    "application/x-ndjson",
    "text/csv",
    "text/plain",
];

/// `declared` without parameters, if allowlisted; else `application/octet-stream`.
pub fn download_content_type(declared: Option<&str>) -> &'static str {
    let essence = declared
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase());
    DOWNLOAD_CONTENT_TYPES
        .into_iter()
        .find(|allowed| essence.as_deref() == Some(*allowed))
        .unwrap_or("application/octet-stream")
}

#[cfg(test)]
mod tests {
    use super::download_content_type;

    #[test]
    fn only_allowlisted_content_types_reach_a_download() {
        assert_eq!(
            download_content_type(Some("application/json")),
            "application/json"
        );
        assert_eq!(
            download_content_type(Some("Text/CSV; charset=utf-8")),
            "text/csv"
        );
        for declared in [Some("text/html"), Some("image/svg+xml"), Some(""), None] {
            assert_eq!(
                download_content_type(declared),
                "application/octet-stream",
                "{declared:?}"
            );
        }
    }
}
