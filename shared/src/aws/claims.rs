//! Claim checks in the raw bucket: an envelope too large for an SQS message is stored here
//! and the message carries its key.

use crate::intake::{ClaimStore, QueueError, StoredClaim};
use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;

/// Claim checks in the raw bucket under `claims/`.
#[derive(Clone, Debug)]
pub struct S3ClaimStore {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3ClaimStore {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }
}

#[async_trait]
impl ClaimStore for S3ClaimStore {
    async fn put_claim(
        &self,
        key: &str,
        body: &[u8],
        content_type: &str,
    ) -> Result<StoredClaim, QueueError> {
        let out = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(body.to_vec()))
            .content_type(content_type)
            .checksum_sha256(crate::domain::hashing::base64_encode(
                &crate::domain::hashing::sha256(body),
            ))
            .send()
            .await
            .map_err(|e| QueueError(anyhow::Error::new(e).context("put claim check")))?;
        Ok(StoredClaim {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            version_id: out.version_id,
        })
    }
}
