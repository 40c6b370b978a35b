//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, a
//! space-separated list of which any entry may match any active secret, and the timestamp window.

use crate::domain::hashing::{base64_decode, base64_encode};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;

/// Accepted distance between `webhook-timestamp` and our clock, either way.
pub const TIMESTAMP_TOLERANCE_SECONDS: i64 = 300;
const WHSEC_PREFIX: &str = "whsec_";

type HmacSha256 = Hmac<Sha256>;

/// One signing key. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

/// Why a secret string was refused. Never carries the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("signing secret is empty")]
    Empty,
    #[error("signing secret has the whsec_ prefix but is not valid base64")]
    InvalidBase64,
}

impl SigningSecret {
    /// `whsec_<base64 key>` (Standard Webhooks), otherwise the string's own bytes.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let key = match text.strip_prefix(WHSEC_PREFIX) {
            Some(encoded) => base64_decode(encoded).ok_or(SecretError::InvalidBase64)?,
            None => text.as_bytes().to_vec(),
        };
        Self::from_bytes(key)
    }

    pub fn from_bytes(key: Vec<u8>) -> Result<Self, SecretError> {
        if key.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Self(key))
    }

    /// A name for the secret that reveals nothing of it: 32 hex characters of sha256 over a
    /// domain tag and the key (the key is random and long; the digest cannot be inverted).
    /// Used to record which connector owns a secret.
    pub fn fingerprint(&self) -> String {
        let digest = crate::domain::hashing::sha256_fields(&[b"feedsafe-signing-secret", &self.0]);
        crate::domain::hashing::hex(&digest[..16])
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length; the key is never empty.
        HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length")
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(redacted)")
    }
}

/// The HMAC input of Standard Webhooks: `{id}.{timestamp}.{body}`.
fn signed_mac(secret: &SigningSecret, id: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut mac = secret.mac();
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` entry for this request: `v1,<base64 HMAC-SHA256>`. For tests, the
/// local demo and suppliers' sample code.
pub fn sign(secret: &SigningSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = signed_mac(secret, id, &timestamp.to_string(), body)
        .finalize()
        .into_bytes();
    format!("v1,{}", base64_encode(&tag))
}

/// `webhook-timestamp` is unix seconds within `TIMESTAMP_TOLERANCE_SECONDS` of `now`.
pub fn timestamp_is_fresh(timestamp: &str, now: i64) -> bool {
    timestamp
        .parse::<i64>()
        .ok()
        .and_then(|sent_at| now.checked_sub(sent_at))
        .map(i64::unsigned_abs)
        .is_some_and(|skew| skew <= TIMESTAMP_TOLERANCE_SECONDS.unsigned_abs())
}

/// What the Standard Webhooks check says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    Valid,
    Stale,
    InvalidSignature,
}

/// The Standard Webhooks check of one request, as the webhook function applies it: the
/// timestamp within tolerance of `now` (unix seconds), then any `v1` entry of `signature` valid
/// under any of `secrets` for `{id}.{timestamp}.{body}`. Never panics, whatever the headers
/// and bytes.
pub fn verify_signature(
    secrets: &[SigningSecret],
    id: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: i64,
) -> Verification {
    if !timestamp_is_fresh(timestamp, now) {
        return Verification::Stale;
    }
    if signature_matches(secrets, signature, id, timestamp, body) {
        Verification::Valid
    } else {
        Verification::InvalidSignature
    }
}

/// True when any `v1,` entry of `header` is a valid signature under any of `secrets`.
/// Comparison is constant-time (`verify_slice`); other versions are ignored.
fn signature_matches(
    secrets: &[SigningSecret],
    header: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
) -> bool {
    let candidates: Vec<Vec<u8>> = header
        .split_ascii_whitespace()
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, encoded)| base64_decode(encoded))
        .collect();
    if candidates.is_empty() {
        return false;
    }
    let mut matched = false;
    for secret in secrets {
        let mac = signed_mac(secret, id, timestamp, body);
        for candidate in &candidates {
            // No early exit: the work done does not depend on which entry matched.
            matched |= mac.clone().verify_slice(candidate).is_ok();
        }
    }
    matched
}
