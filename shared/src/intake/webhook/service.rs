//! The webhook service: one request checked in a fixed order, its delivery identity, and the
//! envelope on the ingest queue.

use super::secrets::{SecretOwners, SigningSecrets};
use super::signing::SigningSecret;
use super::signing::{timestamp_is_fresh, verify_signature, Verification};
use crate::domain::connector::{ConnectorConfig, IdentityRule, PayloadFormat};
use crate::domain::hashing::sha256_hex;
use crate::domain::ids::{
    ConnectorId, DeliveryKey, FallbackFields, IdentityStrength, SourceDeliveryId,
};
use crate::domain::timestamp::Timestamp;
use crate::intake::{envelope_for, ClaimStore, DeliveryQueue};
use crate::protocols::http::HttpResponse;
use crate::protocols::ports::{Clock, ConnectorDirectory};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use tracing::{error, info, warn};

/// The answer to an accepted webhook (`WebhookAccepted` in docs/openapi.yaml).
#[derive(serde::Serialize)]
struct WebhookAccepted {
    delivery_key: String,
    status: &'static str,
}

/// Longest `content-type` header carried into the envelope (the envelope's own limit).
const MAX_CONTENT_TYPE_LEN: usize = 128;

/// One webhook request, independent of the transport.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// The `{connector}` path segment, unvalidated.
    pub connector: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl fmt::Debug for WebhookRequest {
    // Headers carry the signature and the body is supplier data: neither is printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookRequest")
            .field("connector", &self.connector)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// A refusal: HTTP status, stable code and a message with no internals.
struct Refusal {
    status: u16,
    code: &'static str,
    message: &'static str,
}

const fn refuse(status: u16, code: &'static str, message: &'static str) -> Refusal {
    Refusal {
        status,
        code,
        message,
    }
}

const UNAVAILABLE: Refusal = refuse(
    503,
    "unavailable",
    "the delivery could not be accepted right now; retry later",
);
const INVALID_SIGNATURE: Refusal = refuse(
    401,
    "invalid_signature",
    "webhook-id, webhook-timestamp and a valid v1 webhook-signature are required",
);
const STALE: Refusal = refuse(
    401,
    "stale_timestamp",
    "webhook-timestamp must be unix seconds within 5 minutes of now",
);
const UNKNOWN_CONNECTOR: Refusal = refuse(404, "unknown_connector", "no such webhook connector");
const PAYLOAD_TOO_LARGE: Refusal = refuse(
    413,
    "payload_too_large",
    "the body exceeds the connector's size limit",
);

pub struct WebhookService {
    connectors: Arc<dyn ConnectorDirectory>,
    secrets: Arc<dyn SigningSecrets>,
    owners: Arc<dyn SecretOwners>,
    /// Secret fingerprint -> owning connector, as recorded; ownership never changes.
    known_owners: std::sync::Mutex<HashMap<String, ConnectorId>>,
    queue: Arc<dyn DeliveryQueue>,
    claims: Arc<dyn ClaimStore>,
    clock: Arc<dyn Clock>,
}

/// The delivery identity chosen for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    id: SourceDeliveryId,
    strength: IdentityStrength,
    basis: &'static str,
}

impl WebhookService {
    pub fn new(
        connectors: Arc<dyn ConnectorDirectory>,
        secrets: Arc<dyn SigningSecrets>,
        owners: Arc<dyn SecretOwners>,
        queue: Arc<dyn DeliveryQueue>,
        claims: Arc<dyn ClaimStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            connectors,
            secrets,
            owners,
            known_owners: std::sync::Mutex::new(HashMap::new()),
            queue,
            claims,
            clock,
        }
    }

    /// Verifies, identifies and enqueues one delivery. `202 {"delivery_key", "status":
    /// "accepted"}` once the queue accepted it; otherwise `{"error": {"code", "message"}}`.
    pub async fn handle(&self, request: WebhookRequest) -> HttpResponse {
        let connector_label = ConnectorId::parse(&request.connector)
            .map(|c| c.to_string())
            .unwrap_or_else(|_| "<invalid>".to_owned());
        match self.accept(&request).await {
            Ok(key) => {
                info!(connector = %connector_label, delivery_key = %key, outcome = "accepted", "webhook accepted");
                HttpResponse::json(
                    202,
                    &WebhookAccepted {
                        delivery_key: key.as_string(),
                        status: "accepted",
                    },
                )
            }
            Err(refusal) => {
                if refusal.status >= 500 {
                    warn!(connector = %connector_label, outcome = refusal.code, "webhook not accepted");
                } else {
                    info!(connector = %connector_label, outcome = refusal.code, "webhook refused");
                }
                HttpResponse::error(refusal.status, refusal.code, refusal.message)
            }
        }
    }

    /// The connector's secrets that no other connector owns. A secret another connector owns
    /// is left out (a signature made with it may have been made for that connector), and the
    /// operator is told, by fingerprint, in the log.
    async fn owned_secrets(
        &self,
        connector: &ConnectorId,
        secrets: Vec<SigningSecret>,
    ) -> Result<Vec<SigningSecret>, Refusal> {
        let mut owned = Vec::with_capacity(secrets.len());
        for secret in secrets {
            let fingerprint = secret.fingerprint();
            let known = self
                .known_owners
                .lock()
                .ok()
                .and_then(|m| m.get(&fingerprint).cloned());
            let owner = match known {
                Some(owner) => owner,
                None => {
                    let owner = self
                        .owners
                        .claim_secret(&fingerprint, connector)
                        .await
                        .map_err(|e| {
                            error!(connector = %connector, error = %e, "signing secret ownership unavailable");
                            UNAVAILABLE
                        })?;
                    if let Ok(mut m) = self.known_owners.lock() {
                        m.insert(fingerprint.clone(), owner.clone());
                    }
                    owner
                }
            };
            if &owner == connector {
                owned.push(secret);
            } else {
                error!(
                    connector = %connector,
                    owner = %owner,
                    secret_fingerprint = %fingerprint,
                    "signing secret is already the secret of another connector; it is refused here (a signature does not name its connector): give this connector its own secret"
                );
            }
        }
        Ok(owned)
    }

    /// The webhook protocol in its fixed order: the connector, the body's size, the signed
    /// headers and their timestamp, the signature, the payload, the delivery's identity, and
    /// the envelope on the ingest queue.
    async fn accept(&self, request: &WebhookRequest) -> Result<DeliveryKey, Refusal> {
        let (connector_id, config) = self.webhook_connector(&request.connector).await?;
        if request.body.len() as u64 > config.max_body_bytes {
            return Err(PAYLOAD_TOO_LARGE);
        }
        let signed = signed_headers(request)?;
        let now = self.clock.now();
        let sent_at = sent_at(signed.timestamp, now)?;
        self.authenticate(&connector_id, &signed, &request.body, now)
            .await?;
        let content_type = header(request, "content-type").unwrap_or_default();
        let document = parse_payload(&config, content_type, &request.body)?;
        let identity = identify(
            &config,
            signed.webhook_id,
            sent_at,
            document.as_ref(),
            &request.body,
        );
        let key = DeliveryKey::new(
            config.tenant.clone(),
            config.connector.clone(),
            config.source_account.clone(),
            identity.id,
            identity.strength,
        );
        let envelope = Envelope {
            basis: identity.basis,
            retrieved_at: now,
            content_type,
            body: &request.body,
        };
        self.enqueue(&connector_id, &key, envelope).await?;
        Ok(key)
    }

    /// The connector the path names, if it takes webhooks and its stored configuration is
    /// valid.
    async fn webhook_connector(
        &self,
        connector: &str,
    ) -> Result<(ConnectorId, ConnectorConfig), Refusal> {
        let connector_id = ConnectorId::parse(connector).map_err(|_| UNKNOWN_CONNECTOR)?;
        let config = match self.connectors.connector(&connector_id).await {
            // A pull or drop connector answers as one that does not exist: nothing leaks.
            Ok(Some(config)) if takes_webhooks(&config) => config,
            Ok(_) => return Err(UNKNOWN_CONNECTOR),
            Err(e) => {
                error!(connector = %connector_id, error = %e, "connector lookup failed");
                return Err(UNAVAILABLE);
            }
        };
        // A stored configuration that `validate` refuses (e.g. max_body_bytes 0) would turn
        // every delivery into a final 4xx; a 503 keeps the supplier retrying until it is fixed.
        if let Err(invalid) = config.validate() {
            error!(connector = %connector_id, error = %invalid, "stored connector configuration is invalid");
            return Err(UNAVAILABLE);
        }
        Ok((connector_id, config))
    }

    /// Checks the signature against the connector's active secrets that it owns.
    async fn authenticate(
        &self,
        connector_id: &ConnectorId,
        signed: &SignedHeaders<'_>,
        body: &[u8],
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let secrets = self
            .secrets
            .active_secrets(connector_id)
            .await
            .map_err(|e| {
                // StoreError messages name the secret, never its value.
                error!(connector = %connector_id, error = %e, "signing secrets unavailable");
                UNAVAILABLE
            })?;
        let secrets = self.owned_secrets(connector_id, secrets).await?;
        if secrets.is_empty() {
            warn!(connector = %connector_id, "connector has no active signing secret");
        }
        match verify_signature(
            &secrets,
            signed.webhook_id,
            signed.timestamp,
            signed.signature,
            body,
            now.unix_seconds(),
        ) {
            Verification::Valid => Ok(()),
            Verification::Stale => Err(STALE),
            Verification::InvalidSignature => Err(INVALID_SIGNATURE),
        }
    }

    /// Puts the delivery's envelope on the ingest queue, its body claim-checked when large.
    async fn enqueue(
        &self,
        connector_id: &ConnectorId,
        key: &DeliveryKey,
        delivery: Envelope<'_>,
    ) -> Result<(), Refusal> {
        let envelope = envelope_for(
            key,
            delivery.basis,
            delivery.retrieved_at,
            delivery.content_type,
            None,
            delivery.body,
            self.claims.as_ref(),
        )
        .await
        .map_err(|e| {
            error!(connector = %connector_id, delivery_key = %key, error = %e, "claim check failed");
            UNAVAILABLE
        })?;
        self.queue.enqueue(&envelope).await.map_err(|e| {
            error!(connector = %connector_id, delivery_key = %key, error = %e, "enqueue failed");
            UNAVAILABLE
        })?;
        Ok(())
    }
}

/// What the envelope carries besides the delivery key.
struct Envelope<'a> {
    /// Which identity named the delivery (`cloudevents`, `webhook_id`, `fallback`).
    basis: &'static str,
    retrieved_at: Timestamp,
    content_type: &'a str,
    body: &'a [u8],
}

/// The signed Standard Webhooks headers, each present and not blank.
struct SignedHeaders<'a> {
    webhook_id: &'a str,
    timestamp: &'a str,
    signature: &'a str,
}

fn signed_headers(request: &WebhookRequest) -> Result<SignedHeaders<'_>, Refusal> {
    let (Some(webhook_id), Some(timestamp), Some(signature)) = (
        header(request, "webhook-id"),
        header(request, "webhook-timestamp"),
        header(request, "webhook-signature"),
    ) else {
        return Err(INVALID_SIGNATURE);
    };
    Ok(SignedHeaders {
        webhook_id,
        timestamp,
        signature,
    })
}

/// A header's value, trimmed; `None` when absent or blank.
fn header<'a>(request: &'a WebhookRequest, name: &str) -> Option<&'a str> {
    request
        .headers
        .get(name)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// `webhook-timestamp` as unix seconds, refused unless within 5 minutes of `now`.
fn sent_at(timestamp: &str, now: Timestamp) -> Result<i64, Refusal> {
    if !timestamp_is_fresh(timestamp, now.unix_seconds()) {
        return Err(STALE);
    }
    timestamp.parse().map_err(|_| STALE)
}

/// The body of a JSON format as its document (refused unless the content-type says JSON and
/// the body parses); for other formats no document, and a content-type fit for the envelope.
fn parse_payload(
    config: &ConnectorConfig,
    content_type: &str,
    body: &[u8],
) -> Result<Option<Value>, Refusal> {
    if is_json_format(config) {
        if !is_json_content_type(content_type) {
            return Err(refuse(
                400,
                "invalid_payload",
                "content-type must be application/json or application/*+json",
            ));
        }
        let document: Value = serde_json::from_slice(body)
            .map_err(|_| refuse(400, "invalid_payload", "the body is not valid JSON"))?;
        Ok(Some(document))
    } else {
        if !is_envelope_content_type(content_type) {
            return Err(refuse(
                400,
                "invalid_payload",
                "a content-type header of at most 128 printable characters is required",
            ));
        }
        Ok(None)
    }
}

/// Only a webhook connector takes webhooks: a pull connector (export pages) or a drop
/// connector (file versions) does not.
fn takes_webhooks(config: &ConnectorConfig) -> bool {
    config.transport_kind() == "webhook"
}

/// Formats whose bodies must be JSON (checked here, so a malformed one is refused at the door).
fn is_json_format(config: &ConnectorConfig) -> bool {
    match config.payload_format {
        PayloadFormat::AcmeExportV1 | PayloadFormat::CloudEventsOffersV1 => true,
        PayloadFormat::CsvOffersV1 => false,
        PayloadFormat::Defined => config.content_type() == "application/json",
    }
}

/// Printable ASCII and short enough to travel in the envelope.
fn is_envelope_content_type(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_CONTENT_TYPE_LEN
        && value.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

/// `application/json` or `application/*+json`, parameters allowed.
fn is_json_content_type(value: &str) -> bool {
    if !is_envelope_content_type(value) {
        return false;
    }
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.strip_prefix("application/") {
        Some("json") => true,
        Some(subtype) => subtype
            .strip_suffix("+json")
            .is_some_and(|name| !name.is_empty() && !name.contains('/')),
        None => false,
    }
}

/// The strongest identity the request gives: the snapshot id in the body (for a connector whose
/// definition names deliveries by it), CloudEvents `source` + `id` (unless the connector
/// names deliveries by `webhook-id` only), then the `webhook-id` header, then the fallback over
/// (source account, endpoint, no page cursor, `webhook-timestamp`, payload sha256).
fn identify(
    config: &ConnectorConfig,
    webhook_id: &str,
    sent_at: i64,
    document: Option<&Value>,
    body: &[u8],
) -> Identity {
    if let Some(snapshot) = snapshot_id(config, body) {
        return Identity {
            id: SourceDeliveryId::snapshot(&snapshot),
            strength: IdentityStrength::Source,
            basis: "snapshot_id",
        };
    }
    if config.identity_rule != IdentityRule::WebhookId {
        if let Some((source, id)) = document.and_then(cloud_event_id) {
            return Identity {
                id: SourceDeliveryId::cloud_event(source, id),
                strength: IdentityStrength::Source,
                basis: "cloudevents",
            };
        }
    }
    if let Ok(id) = SourceDeliveryId::parse(webhook_id) {
        return Identity {
            id,
            strength: IdentityStrength::Source,
            basis: "webhook_id",
        };
    }
    let endpoint = format!("/v1/webhooks/{}", config.connector);
    Identity {
        id: SourceDeliveryId::fallback(&FallbackFields {
            source_account: config.source_account.as_str(),
            endpoint: &endpoint,
            page_cursor: "",
            // The parsed value, so `+1796025600` and `1796025600` name the same instant.
            source_timestamp: &sent_at.to_string(),
            payload_sha256: &sha256_hex(body),
        }),
        strength: IdentityStrength::Fallback,
        basis: "fallback",
    }
}

/// The snapshot id the body holds, for a connector whose definition names deliveries by it:
/// the same snapshot sent again under a new `webhook-id` is then the same delivery.
fn snapshot_id(config: &ConnectorConfig, body: &[u8]) -> Option<String> {
    if config.identity_rule != IdentityRule::SnapshotId {
        return None;
    }
    config.definition.as_deref()?.identity.snapshot_in(body)
}

/// `source` and `id` of a CloudEvents structured-mode document (`specversion` present).
fn cloud_event_id(document: &Value) -> Option<(&str, &str)> {
    let object = document.as_object()?;
    object.get("specversion")?;
    let source = object.get("source")?.as_str().filter(|s| !s.is_empty())?;
    let id = object.get("id")?.as_str().filter(|s| !s.is_empty())?;
    Some((source, id))
}
