//! The raw archive in S3: write-once objects under deterministic keys, verified by SHA-256.

use crate::domain::hashing::{base64_encode, hex, sha256};
use crate::protocols::ports::{ArtifactError, ArtifactMeta, ArtifactStore, ArtifactWrite};
use async_trait::async_trait;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumMode;
use aws_sdk_s3::Client;

#[derive(Clone, Debug)]
pub struct S3ArtifactStore {
    client: Client,
    bucket: String,
}

fn unavailable<E>(what: &'static str) -> impl FnOnce(E) -> ArtifactError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| ArtifactError::Unavailable(anyhow::Error::new(e).context(what))
}

fn status_of<E>(error: &SdkError<E>) -> Option<u16> {
    error.raw_response().map(|r| r.status().as_u16())
}

impl S3ArtifactStore {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Reads an archived object back (auditors, tests).
    pub async fn read(&self, key: &str) -> Result<Vec<u8>, ArtifactError> {
        self.fetch(&self.bucket.clone(), key, None, u64::MAX).await
    }

    /// Confirms the object under `key` hashes to `expected`. Uses the checksum S3 stores with the
    /// object when it reports one, else reads the object back and hashes it (S3-compatible
    /// engines such as moto do not report stored checksums).
    async fn verify_stored(&self, key: &str, expected: &[u8; 32]) -> Result<(), ArtifactError> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .map_err(|e| match status_of(&e) {
                // Absent: e.g. a racing writer's upload that never landed.
                Some(404) => ArtifactError::NotFound {
                    key: key.to_owned(),
                },
                _ => unavailable("head raw artifact")(e),
            })?;
        let found = match head.checksum_sha256() {
            // Whole-object checksums only; multipart composites carry a `-N` suffix.
            Some(b64) if !b64.contains('-') => b64.to_owned(),
            _ => base64_encode(&sha256(&self.read(key).await?)),
        };
        let wanted = base64_encode(expected);
        if found != wanted {
            return Err(ArtifactError::Corrupt {
                key: key.to_owned(),
                expected: hex(expected),
                found,
            });
        }
        Ok(())
    }
}

#[async_trait]
impl ArtifactStore for S3ArtifactStore {
    async fn put_verified(
        &self,
        key: &str,
        body: &[u8],
        sha256_digest: &[u8; 32],
        meta: &ArtifactMeta,
    ) -> Result<ArtifactWrite, ArtifactError> {
        let checksum = base64_encode(sha256_digest);
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(body.to_vec()))
            .checksum_sha256(&checksum)
            .if_none_match("*")
            .content_type(&meta.content_type)
            .metadata("retrieved-at", meta.retrieved_at.to_rfc3339())
            .metadata("sha256", hex(sha256_digest));
        if let Some(delivery_key) = &meta.delivery_key {
            // Metadata travels as an HTTP header: keep it to printable ASCII.
            let printable: String = delivery_key
                .chars()
                .filter(|c| c.is_ascii_graphic())
                .collect();
            request = request.metadata("delivery-key", printable);
        }
        match request.send().await {
            Ok(out) => {
                match out.checksum_sha256() {
                    Some(stored) if stored == checksum => {}
                    Some(stored) => {
                        return Err(ArtifactError::Corrupt {
                            key: key.to_owned(),
                            expected: hex(sha256_digest),
                            found: stored.to_owned(),
                        })
                    }
                    None => self.verify_stored(key, sha256_digest).await?,
                }
                Ok(ArtifactWrite::Created)
            }
            // 412: an object already stands under the key; it is kept as it is.
            Err(e) if status_of(&e) == Some(412) => Ok(ArtifactWrite::AlreadyStored),
            // 409: a conditional put of the same key is in flight. S3 says to retry the upload;
            // this one need not, since the other carries the same bytes.
            Err(e)
                if status_of(&e) == Some(409)
                    && e.as_service_error().and_then(|s| s.code())
                        == Some("ConditionalRequestConflict") =>
            {
                Ok(ArtifactWrite::Racing)
            }
            Err(e) => Err(unavailable("put raw artifact")(e)),
        }
    }

    async fn verify(&self, key: &str, sha256_digest: &[u8; 32]) -> Result<(), ArtifactError> {
        self.verify_stored(key, sha256_digest).await
    }

    async fn fetch(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        limit: u64,
    ) -> Result<Vec<u8>, ArtifactError> {
        let out = self.get_within(bucket, key, version_id, limit).await?;
        let bytes = out
            .body
            .collect()
            .await
            .map_err(unavailable("read object body"))?
            .into_bytes();
        if bytes.len() as u64 > limit {
            return Err(ArtifactError::TooLarge {
                key: key.to_owned(),
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes.to_vec())
    }

    /// Hashes the body chunk by chunk as it arrives: never more than one chunk in memory.
    async fn sha256_of(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        limit: u64,
    ) -> Result<[u8; 32], ArtifactError> {
        use sha2::{Digest, Sha256};
        let mut body = self.get_within(bucket, key, version_id, limit).await?.body;
        let mut hasher = Sha256::new();
        let mut read: u64 = 0;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(unavailable("read object body"))?
        {
            read = read.saturating_add(chunk.len() as u64);
            if read > limit {
                return Err(ArtifactError::TooLarge {
                    key: key.to_owned(),
                    size: read,
                    limit,
                });
            }
            hasher.update(&chunk);
        }
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&hasher.finalize());
        Ok(digest)
    }
}

impl S3ArtifactStore {
    /// GetObject of a claim-checked body or a dropped file (that version, when given); refused
    /// as `TooLarge` when S3 reports more than `limit` bytes, before the body is read.
    async fn get_within(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        limit: u64,
    ) -> Result<GetObjectOutput, ArtifactError> {
        let out = self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_owned))
            .send()
            .await
            .map_err(|e| match e.as_service_error().and_then(|s| s.code()) {
                Some("NoSuchKey") | Some("NoSuchVersion") => ArtifactError::NotFound {
                    key: key.to_owned(),
                },
                _ => unavailable("get object")(e),
            })?;
        let size = out.content_length().unwrap_or(0).max(0) as u64;
        if size > limit {
            return Err(ArtifactError::TooLarge {
                key: key.to_owned(),
                size,
                limit,
            });
        }
        Ok(out)
    }
}

/// The raw bucket as the ops routes reach it (`crate::ops::ports::RawObjects`).
#[async_trait]
impl crate::ops::ports::RawObjects for S3ArtifactStore {
    fn bucket(&self) -> &str {
        S3ArtifactStore::bucket(self)
    }

    async fn head(&self, key: &str) -> Result<Option<crate::ops::ArchivedObject>, ArtifactError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(crate::ops::ArchivedObject {
                size: out.content_length().unwrap_or(0).max(0) as u64,
                content_type: out.content_type().map(str::to_owned),
                version_id: out.version_id().map(str::to_owned),
                retrieved_at: out
                    .metadata()
                    .and_then(|m| m.get("retrieved-at"))
                    .and_then(|t| crate::domain::timestamp::Timestamp::parse(t).ok()),
            })),
            Err(e) if e.raw_response().map(|r| r.status().as_u16()) == Some(404) => Ok(None),
            Err(e) => Err(ArtifactError::Unavailable(
                anyhow::Error::new(e).context("head raw artifact"),
            )),
        }
    }

    async fn presign_download(
        &self,
        key: &str,
        filename: &str,
        content_type: &str,
        expires: std::time::Duration,
    ) -> Result<String, anyhow::Error> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires)?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .response_content_disposition(format!("attachment; filename=\"{filename}\""))
            .response_content_type(content_type)
            .response_cache_control("no-store")
            .presigned(config)
            .await?;
        Ok(request.uri().to_owned())
    }
}
