//! Signed webhook intake: `POST /v1/webhooks/{connector}` with Standard Webhooks signatures.
//!
//! The request is checked in a fixed order (connector: it exists and takes webhooks, size,
//! headers, timestamp, signature, content type, JSON), its delivery identity is taken from the
//! strongest id the source gives (CloudEvents `source` + `id`, else the `webhook-id` header,
//! else a documented fallback), and the envelope is put on the ingest queue. The caller gets
//! `202` only once the queue accepted it; deduplication happens at ingest, so a redelivery is
//! enqueued again under the same key.
//!
//! Secrets, signatures and bodies are never logged.
//!
//! - `signing`: Standard Webhooks signatures (signing secrets, `sign`, `verify_signature`);
//! - `secrets`: where a connector's active secrets come from (`SigningSecrets`; the local
//!   secrets file here, Secrets Manager in `crate::aws::secrets`);
//! - `service`: `WebhookService`, the checks in order, the delivery identity and the enqueue.
//!
//! The API Gateway entry point is `crate::lambda::apigw::handle_apigw_webhook`.

mod secrets;
mod service;
mod signing;
#[cfg(test)]
pub(crate) mod tests;

pub use secrets::{LocalSecretsFile, SecretOwners, SecretsFileError, SigningSecrets};
pub use service::{WebhookRequest, WebhookService};
pub use signing::{
    sign, timestamp_is_fresh, verify_signature, SecretError, SigningSecret, Verification,
    TIMESTAMP_TOLERANCE_SECONDS,
};
