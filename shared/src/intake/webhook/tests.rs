use super::*;
use crate::domain::connector::{
    ConnectorConfig, IdentityRule, PayloadFormat, Publication, DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_BODY_BYTES,
};
use crate::domain::envelope::{BodyRef, DeliveryEnvelope};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::hashing::{base64_encode, sha256_hex};
use crate::domain::ids::{
    ConnectorId, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::domain::timestamp::Timestamp;
use crate::intake::{ClaimStore, DeliveryQueue, QueueError, StoredClaim};
use crate::protocols::http::HttpResponse;
use crate::protocols::ports::{Clock, ConnectorDirectory, StoreError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(crate) const NOW: i64 = 1_796_025_600; // 2026-11-30T08:00:00Z
pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_c2Vjb25kLXNlY3JldC1rZXktZm9yLXJvdGF0aW9u";

#[derive(Default)]
struct VecQueue {
    sent: Mutex<Vec<DeliveryEnvelope>>,
    fail: bool,
}

#[async_trait]
impl DeliveryQueue for VecQueue {
    async fn enqueue(&self, envelope: &DeliveryEnvelope) -> Result<(), QueueError> {
        if self.fail {
            return Err(QueueError(anyhow::anyhow!(
                "https://sqs.internal/123456789012/ingest: throttled"
            )));
        }
        self.sent.lock().unwrap().push(envelope.clone());
        Ok(())
    }
}

#[derive(Default)]
struct MemoryClaims {
    stored: Mutex<HashMap<String, Vec<u8>>>,
}

#[async_trait]
impl ClaimStore for MemoryClaims {
    async fn put_claim(
        &self,
        key: &str,
        body: &[u8],
        _content_type: &str,
    ) -> Result<StoredClaim, QueueError> {
        self.stored
            .lock()
            .unwrap()
            .insert(key.to_owned(), body.to_vec());
        Ok(StoredClaim {
            bucket: "raw".to_owned(),
            key: key.to_owned(),
            version_id: None,
        })
    }
}

/// Secret owners in memory, first claim wins, as in the evidence table.
#[derive(Default)]
pub(crate) struct MemoryOwners(Mutex<HashMap<String, ConnectorId>>);

#[async_trait]
impl SecretOwners for MemoryOwners {
    async fn claim_secret(
        &self,
        fingerprint: &str,
        connector: &ConnectorId,
    ) -> Result<ConnectorId, StoreError> {
        let mut owners = self.0.lock().unwrap();
        Ok(owners
            .entry(fingerprint.to_owned())
            .or_insert_with(|| connector.clone())
            .clone())
    }
}

struct FixedClock(i64);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_seconds(self.0).unwrap()
    }
}

struct MapConnectors(HashMap<ConnectorId, ConnectorConfig>);

#[async_trait]
impl ConnectorDirectory for MapConnectors {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        Ok(self.0.get(id).cloned())
    }
}

fn acme_events() -> ConnectorConfig {
    ConnectorConfig {
        connector: ConnectorId::parse("acme-events").unwrap(),
        tenant: TenantId::parse("demo").unwrap(),
        source_account: SourceAccount::parse("ACC-1").unwrap(),
        payload_format: PayloadFormat::CloudEventsOffersV1,
        identity_rule: IdentityRule::CloudEventsSourceId,
        canonicalization: CanonicalizationRule::JsonV1,
        horizon_days: DEFAULT_HORIZON_DAYS,
        publication: Publication::PerPage,
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        clock_skew_seconds: crate::domain::connector::DEFAULT_CLOCK_SKEW_SECONDS,
        pull: None,
        version: None,
        definition: None,
    }
}

pub(crate) struct Harness {
    pub(crate) service: WebhookService,
    queue: Arc<VecQueue>,
    claims: Arc<MemoryClaims>,
}

fn harness_with(config: ConnectorConfig, secrets: &[&str], queue: VecQueue) -> Harness {
    let id = config.connector.clone();
    let connectors = MapConnectors(HashMap::from([(id.clone(), config)]));
    let secrets = LocalSecretsFile::from_map(HashMap::from([(
        id,
        secrets
            .iter()
            .map(|s| SigningSecret::parse(s).unwrap())
            .collect(),
    )]));
    let queue = Arc::new(queue);
    let claims = Arc::new(MemoryClaims::default());
    Harness {
        service: WebhookService::new(
            Arc::new(connectors),
            Arc::new(secrets),
            Arc::new(MemoryOwners::default()),
            queue.clone(),
            claims.clone(),
            Arc::new(FixedClock(NOW)),
        ),
        queue,
        claims,
    }
}

pub(crate) fn harness(secrets: &[&str]) -> Harness {
    harness_with(acme_events(), secrets, VecQueue::default())
}

pub(crate) fn cloud_event(id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0",
        "type": "com.acme.offers.updated",
        "source": "urn:acme:events",
        "id": id,
        "time": "2026-11-29T08:00:00Z",
        "datacontenttype": "application/json",
        "data": {"offers": [{"sku": "AX-440-R2", "quantity": 6, "unit": "each",
            "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}]}
    }))
    .unwrap()
}

fn request_with(
    body: &[u8],
    webhook_id: &str,
    timestamp: i64,
    signature: &str,
    content_type: &str,
) -> WebhookRequest {
    WebhookRequest {
        connector: "acme-events".to_owned(),
        headers: HashMap::from([
            ("webhook-id".to_owned(), webhook_id.to_owned()),
            ("webhook-timestamp".to_owned(), timestamp.to_string()),
            ("webhook-signature".to_owned(), signature.to_owned()),
            ("content-type".to_owned(), content_type.to_owned()),
        ]),
        body: body.to_vec(),
    }
}

fn signed(secret: &str, body: &[u8]) -> WebhookRequest {
    let signature = sign(&SigningSecret::parse(secret).unwrap(), "msg_1", NOW, body);
    request_with(body, "msg_1", NOW, &signature, "application/json")
}

fn error_code(response: &HttpResponse) -> String {
    let body: Value = serde_json::from_str(&response.body).unwrap();
    body["error"]["code"].as_str().unwrap().to_owned()
}

pub(crate) fn sent(h: &Harness) -> Vec<DeliveryEnvelope> {
    h.queue.sent.lock().unwrap().clone()
}

#[tokio::test]
async fn a_valid_signature_enqueues_one_envelope_with_the_cloudevents_identity() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-1");
    let response = h.service.handle(signed(SECRET, &body)).await;
    assert_eq!(response.status, 202, "{}", response.body);
    let reply: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(
        reply,
        json!({"delivery_key": "demo/acme-events/ACC-1/urn:acme:events/evt-1", "status": "accepted"})
    );
    let sent = sent(&h);
    assert_eq!(sent.len(), 1);
    let envelope = &sent[0];
    assert_eq!(envelope.delivery.id.as_str(), "urn:acme:events/evt-1");
    assert_eq!(envelope.delivery.strength, IdentityStrength::Source);
    assert_eq!(envelope.delivery.basis, "cloudevents");
    assert_eq!(envelope.tenant.as_str(), "demo");
    assert_eq!(envelope.source_account.as_str(), "ACC-1");
    assert_eq!(envelope.content_type, "application/json");
    assert_eq!(envelope.retrieved_at.unix_seconds(), NOW);
    assert_eq!(
        envelope.body,
        BodyRef::Inline {
            base64: base64_encode(&body)
        }
    );
    // The envelope is one ingest accepts.
    assert_eq!(
        DeliveryEnvelope::parse(envelope.to_json().as_bytes()).unwrap(),
        *envelope
    );
}

#[tokio::test]
async fn a_bad_signature_is_refused() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-1");
    let mut request = signed(SECRET, &body);
    request.body = cloud_event("evt-2");
    let response = h.service.handle(request).await;
    assert_eq!(response.status, 401);
    assert_eq!(error_code(&response), "invalid_signature");

    let response = h.service.handle(signed(OTHER_SECRET, &body)).await;
    assert_eq!(response.status, 401);
    assert_eq!(error_code(&response), "invalid_signature");
    assert!(sent(&h).is_empty());
}

#[tokio::test]
async fn missing_headers_are_an_invalid_signature() {
    let h = harness(&[SECRET]);
    for header in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        let mut request = signed(SECRET, &cloud_event("evt-1"));
        request.headers.remove(header);
        let response = h.service.handle(request).await;
        assert_eq!(response.status, 401, "{header}");
        assert_eq!(error_code(&response), "invalid_signature", "{header}");
    }
    assert!(sent(&h).is_empty());
}

#[tokio::test]
async fn a_timestamp_six_minutes_old_or_ahead_is_stale() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-1");
    let secret = SigningSecret::parse(SECRET).unwrap();
    for sent_at in [NOW - 360, NOW + 360] {
        let signature = sign(&secret, "msg_1", sent_at, &body);
        let request = request_with(&body, "msg_1", sent_at, &signature, "application/json");
        let response = h.service.handle(request).await;
        assert_eq!(response.status, 401);
        assert_eq!(error_code(&response), "stale_timestamp");
    }
    let mut request = signed(SECRET, &body);
    request
        .headers
        .insert("webhook-timestamp".to_owned(), "yesterday".to_owned());
    assert_eq!(
        error_code(&h.service.handle(request).await),
        "stale_timestamp"
    );
    // Just inside the tolerance passes.
    let signature = sign(&secret, "msg_1", NOW - 299, &body);
    let request = request_with(&body, "msg_1", NOW - 299, &signature, "application/json");
    assert_eq!(h.service.handle(request).await.status, 202);
}

#[tokio::test]
async fn during_rotation_either_active_secret_passes() {
    let h = harness(&[SECRET, OTHER_SECRET]);
    for (n, secret) in [SECRET, OTHER_SECRET].into_iter().enumerate() {
        let response = h
            .service
            .handle(signed(secret, &cloud_event(&format!("evt-{n}"))))
            .await;
        assert_eq!(response.status, 202, "{}", response.body);
    }
    assert_eq!(sent(&h).len(), 2);
}

#[tokio::test]
async fn a_wrong_v1_entry_before_the_right_one_passes() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-1");
    let right = sign(&SigningSecret::parse(SECRET).unwrap(), "msg_1", NOW, &body);
    let wrong = sign(
        &SigningSecret::parse(OTHER_SECRET).unwrap(),
        "msg_1",
        NOW,
        &body,
    );
    let header = format!("v2,{} {wrong} v1,not-base64!! {right}", &right[3..]);
    let request = request_with(&body, "msg_1", NOW, &header, "application/json");
    let response = h.service.handle(request).await;
    assert_eq!(response.status, 202, "{}", response.body);

    // The right tag under another version label is ignored.
    let header = format!("v2,{}", &right[3..]);
    let request = request_with(&body, "msg_1", NOW, &header, "application/json");
    assert_eq!(
        error_code(&h.service.handle(request).await),
        "invalid_signature"
    );
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_anything_else() {
    let mut config = acme_events();
    config.max_body_bytes = 64;
    let h = harness_with(config, &[SECRET], VecQueue::default());
    let mut request = signed(SECRET, &cloud_event("evt-1"));
    request.headers.clear();
    let response = h.service.handle(request).await;
    assert_eq!(response.status, 413);
    assert_eq!(error_code(&response), "payload_too_large");
    assert!(sent(&h).is_empty());
}

#[tokio::test]
async fn an_unknown_connector_is_404() {
    let h = harness(&[SECRET]);
    for name in ["nope", "Not A Connector"] {
        let mut request = signed(SECRET, &cloud_event("evt-1"));
        request.connector = name.to_owned();
        let response = h.service.handle(request).await;
        assert_eq!(response.status, 404);
        assert_eq!(error_code(&response), "unknown_connector");
    }
}

#[tokio::test]
async fn content_type_must_be_json() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-1");
    let signature = sign(&SigningSecret::parse(SECRET).unwrap(), "msg_1", NOW, &body);
    for bad in ["text/plain", "application/xml", "application/+json", ""] {
        let request = request_with(&body, "msg_1", NOW, &signature, bad);
        let response = h.service.handle(request).await;
        assert_eq!(response.status, 400, "{bad}");
        assert_eq!(error_code(&response), "invalid_payload", "{bad}");
    }
    assert!(sent(&h).is_empty());
    for good in [
        "application/json; charset=utf-8",
        "application/cloudevents+json",
        "Application/JSON",
    ] {
        let request = request_with(&body, "msg_1", NOW, &signature, good);
        assert_eq!(h.service.handle(request).await.status, 202, "{good}");
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_is_invalid_payload() {
    let h = harness(&[SECRET]);
    let response = h.service.handle(signed(SECRET, b"{not json")).await;
    assert_eq!(response.status, 400);
    assert_eq!(error_code(&response), "invalid_payload");
}

#[tokio::test]
async fn the_same_event_three_times_is_enqueued_three_times_under_one_key() {
    let h = harness(&[SECRET]);
    let body = cloud_event("evt-7");
    for attempt in 0..3 {
        // Suppliers re-sign each attempt with a fresh timestamp.
        let at = NOW - attempt * 60;
        let signature = sign(&SigningSecret::parse(SECRET).unwrap(), "msg_7", at, &body);
        let request = request_with(&body, "msg_7", at, &signature, "application/json");
        assert_eq!(h.service.handle(request).await.status, 202);
    }
    let keys: Vec<String> = sent(&h)
        .iter()
        .map(|e| e.delivery_key().as_string())
        .collect();
    assert_eq!(keys.len(), 3);
    assert!(keys
        .iter()
        .all(|k| k == "demo/acme-events/ACC-1/urn:acme:events/evt-7"));
}

#[tokio::test]
async fn identity_falls_back_from_cloudevents_to_webhook_id_to_fallback() {
    let h = harness(&[SECRET]);
    let secret = SigningSecret::parse(SECRET).unwrap();
    let send = |body: Vec<u8>, webhook_id: &str| {
        let signature = sign(&secret, webhook_id, NOW, &body);
        request_with(&body, webhook_id, NOW, &signature, "application/json")
    };

    // A CloudEvent whose source/id is not a valid delivery id: a ce- digest.
    let odd = serde_json::to_vec(
        &json!({"specversion": "1.0", "source": "urn:acme events", "id": "e 1", "data": {}}),
    )
    .unwrap();
    assert_eq!(h.service.handle(send(odd, "msg_1")).await.status, 202);
    // Not a CloudEvent: the webhook-id header.
    let plain = br#"{"offers": []}"#.to_vec();
    assert_eq!(
        h.service.handle(send(plain.clone(), "msg_2")).await.status,
        202
    );
    // No usable webhook-id either: the fallback.
    assert_eq!(
        h.service.handle(send(plain.clone(), "msg 3")).await.status,
        202
    );

    let sent = sent(&h);
    // The documented derivation: netstrings of (tag, source, id).
    let expected_ce = format!(
        "ce-{}",
        sha256_hex(b"11:cloudevents,15:urn:acme events,3:e 1,")
    );
    assert_eq!(sent[0].delivery.id.as_str(), expected_ce);
    assert_eq!(sent[0].delivery.basis, "cloudevents");
    assert_eq!(sent[0].delivery.strength, IdentityStrength::Source);
    assert_eq!(sent[1].delivery.id.as_str(), "msg_2");
    assert_eq!(sent[1].delivery.basis, "webhook_id");
    assert_eq!(sent[1].delivery.strength, IdentityStrength::Source);
    // Netstrings of (tag, account, endpoint, page cursor (none), webhook-timestamp, payload).
    let expected_fb = format!(
        "fb-{}",
        sha256_hex(
            format!(
                "8:fallback,5:ACC-1,24:/v1/webhooks/acme-events,0:,10:{NOW},64:{},",
                sha256_hex(&plain)
            )
            .as_bytes()
        )
    );
    assert_eq!(sent[2].delivery.id.as_str(), expected_fb);
    assert_eq!(sent[2].delivery.basis, "fallback");
    assert_eq!(sent[2].delivery.strength, IdentityStrength::Fallback);
}

/// The delivery id the service gives a signed CloudEvent with this `source` and `id`.
async fn cloud_event_delivery_id(h: &Harness, source: &str, id: &str) -> String {
    let body = serde_json::to_vec(&json!({
        "specversion": "1.0", "source": source, "id": id, "data": {"offers": []}
    }))
    .unwrap();
    let response = h.service.handle(signed(SECRET, &body)).await;
    assert_eq!(response.status, 202, "{}", response.body);
    let envelope = sent(h).pop().unwrap();
    assert_eq!(envelope.delivery.basis, "cloudevents");
    envelope.delivery.id.as_str().to_owned()
}

#[tokio::test]
async fn cloudevents_whose_source_and_id_split_differently_get_different_keys() {
    let h = harness(&[SECRET]);
    let a = cloud_event_delivery_id(&h, "/x", "y/z").await;
    let b = cloud_event_delivery_id(&h, "/x/y", "z").await;
    assert_ne!(
        a, b,
        "(\"/x\", \"y/z\") and (\"/x/y\", \"z\") must not share a key"
    );
    // A URL-style source stays readable; only the id's own `/` is escaped.
    assert_eq!(a, "/x/y%2Fz");
    assert_eq!(b, "/x/y/z");
}

#[tokio::test]
async fn the_same_cloudevent_always_gets_the_same_readable_key() {
    let h = harness(&[SECRET]);
    let first = cloud_event_delivery_id(&h, "urn:acme:events", "evt-1").await;
    assert_eq!(first, "urn:acme:events/evt-1");
    assert_eq!(
        cloud_event_delivery_id(&h, "urn:acme:events", "evt-1").await,
        first
    );
    let odd = cloud_event_delivery_id(&h, "/x", "y/z%2F").await;
    assert_eq!(cloud_event_delivery_id(&h, "/x", "y/z%2F").await, odd);
}

#[tokio::test]
async fn a_percent_in_a_cloudevent_id_cannot_imitate_an_escaped_slash() {
    let h = harness(&[SECRET]);
    let escaped_by_us = cloud_event_delivery_id(&h, "/x", "y/z").await;
    let literal = cloud_event_delivery_id(&h, "/x", "y%2Fz").await;
    assert_ne!(escaped_by_us, literal);
    assert_eq!(literal, "/x/y%252Fz");
}

#[tokio::test]
async fn a_newline_in_a_cloudevent_field_cannot_move_the_boundary_of_its_digest() {
    let h = harness(&[SECRET]);
    // Not printable ASCII, so both are named by a digest; the digest input must keep the
    // two fields apart.
    let a = cloud_event_delivery_id(&h, "s\na", "b").await;
    let b = cloud_event_delivery_id(&h, "s", "a\nb").await;
    assert!(a.starts_with("ce-") && b.starts_with("ce-"), "{a} {b}");
    assert_ne!(a, b);
}

#[tokio::test]
async fn an_overlong_cloudevent_identity_is_an_unambiguous_valid_digest() {
    let h = harness(&[SECRET]);
    let long = "s".repeat(600);
    let a = cloud_event_delivery_id(&h, &long, "evt-1").await;
    let b = cloud_event_delivery_id(&h, &long, "evt-2").await;
    let c = cloud_event_delivery_id(&h, &format!("{long}/evt"), "1").await;
    assert!(a.starts_with("ce-"), "{a}");
    assert!(SourceDeliveryId::parse(&a).is_ok());
    assert_ne!(a, b);
    assert_ne!(a, c);
    // Never mistaken for a readable identity: that one always holds a `/`.
    assert!(!a.contains('/'));
}

/// The delivery id of a signed non-CloudEvents body without a usable `webhook-id`.
async fn fallback_id(h: &Harness, body: &[u8], sent_at: i64) -> String {
    let secret = SigningSecret::parse(SECRET).unwrap();
    let signature = sign(&secret, "no id", sent_at, body);
    let request = request_with(body, "no id", sent_at, &signature, "application/json");
    let response = h.service.handle(request).await;
    assert_eq!(response.status, 202, "{}", response.body);
    let envelope = sent(h).pop().unwrap();
    assert_eq!(envelope.delivery.basis, "fallback");
    assert_eq!(envelope.delivery.strength, IdentityStrength::Fallback);
    envelope.delivery.id.as_str().to_owned()
}

#[tokio::test]
async fn the_fallback_identity_changes_when_any_listed_field_changes() {
    let body = br#"{"offers": []}"#;
    let h = harness(&[SECRET]);
    let base = fallback_id(&h, body, NOW).await;
    assert_eq!(fallback_id(&h, body, NOW).await, base, "deterministic");
    // Source timestamp.
    assert_ne!(
        fallback_id(&h, body, NOW - 1).await,
        base,
        "source timestamp"
    );
    // Payload hash.
    assert_ne!(
        fallback_id(&h, br#"{"offers": [] }"#, NOW).await,
        base,
        "payload"
    );
    // Endpoint (another connector's route) and source account.
    let mut other = acme_events();
    other.connector = ConnectorId::parse("acme-events-2").unwrap();
    let h2 = harness_with(other, &[SECRET], VecQueue::default());
    let secret = SigningSecret::parse(SECRET).unwrap();
    let mut request = request_with(
        body,
        "no id",
        NOW,
        &sign(&secret, "no id", NOW, body),
        "application/json",
    );
    request.connector = "acme-events-2".to_owned();
    assert_eq!(h2.service.handle(request).await.status, 202);
    assert_ne!(sent(&h2)[0].delivery.id.as_str(), base, "endpoint");
    let mut moved = acme_events();
    moved.source_account = SourceAccount::parse("ACC-2").unwrap();
    let h3 = harness_with(moved, &[SECRET], VecQueue::default());
    assert_ne!(fallback_id(&h3, body, NOW).await, base, "source account");
}

#[tokio::test]
async fn a_webhook_id_connector_ignores_cloudevents_fields() {
    let mut config = acme_events();
    config.identity_rule = IdentityRule::WebhookId;
    let h = harness_with(config, &[SECRET], VecQueue::default());
    assert_eq!(
        h.service
            .handle(signed(SECRET, &cloud_event("evt-1")))
            .await
            .status,
        202
    );
    assert_eq!(sent(&h)[0].delivery.id.as_str(), "msg_1");
    assert_eq!(sent(&h)[0].delivery.basis, "webhook_id");
}

#[tokio::test]
async fn a_csv_connector_takes_any_content_type_and_names_deliveries_by_webhook_id() {
    let mut config = acme_events();
    config.payload_format = PayloadFormat::CsvOffersV1;
    config.canonicalization = crate::domain::fingerprint::CanonicalizationRule::BytesV1;
    let h = harness_with(config, &[SECRET], VecQueue::default());
    let body = b"sku,quantity,unit,price,currency,observed_at\nAX-440-R2,6,each,820.00,EUR,2026-11-29T08:00:00Z\n";
    let signature = sign(&SigningSecret::parse(SECRET).unwrap(), "msg_c", NOW, body);
    let request = request_with(body, "msg_c", NOW, &signature, "text/csv");
    let response = h.service.handle(request).await;
    assert_eq!(response.status, 202, "{}", response.body);
    assert_eq!(sent(&h)[0].delivery.id.as_str(), "msg_c");
    assert_eq!(sent(&h)[0].content_type, "text/csv");
    let request = request_with(body, "msg_c", NOW, &signature, "");
    assert_eq!(
        error_code(&h.service.handle(request).await),
        "invalid_payload"
    );
}

#[tokio::test]
async fn an_invalid_stored_connector_is_503_not_a_final_refusal() {
    // Stored past put_connector: with max_body_bytes 0 every body would be a final 413.
    let mut config = acme_events();
    config.max_body_bytes = 0;
    let h = harness_with(config, &[SECRET], VecQueue::default());
    let response = h
        .service
        .handle(signed(SECRET, &cloud_event("evt-1")))
        .await;
    assert_eq!(response.status, 503, "{}", response.body);
    assert_eq!(error_code(&response), "unavailable");
    assert!(!response.body.contains("max_body_bytes"), "no internals");
    assert!(sent(&h).is_empty());
}

#[tokio::test]
async fn a_queue_failure_is_503_without_internals() {
    let queue = VecQueue {
        fail: true,
        ..VecQueue::default()
    };
    let h = harness_with(acme_events(), &[SECRET], queue);
    let response = h
        .service
        .handle(signed(SECRET, &cloud_event("evt-1")))
        .await;
    assert_eq!(response.status, 503);
    assert_eq!(error_code(&response), "unavailable");
    assert!(!response.body.contains("sqs"), "{}", response.body);
}

#[tokio::test]
async fn a_large_body_travels_as_a_claim_check() {
    let h = harness(&[SECRET]);
    let padding = "x".repeat(crate::domain::envelope::MAX_INLINE_BODY_BYTES);
    let body = serde_json::to_vec(&json!({
        "specversion": "1.0", "source": "urn:acme:events", "id": "big", "data": {"pad": padding}
    }))
    .unwrap();
    assert_eq!(h.service.handle(signed(SECRET, &body)).await.status, 202);
    let sent = sent(&h);
    let BodyRef::S3 { key, size, .. } = &sent[0].body else {
        panic!("expected a claim check, got {:?}", sent[0].body);
    };
    assert_eq!(*size, body.len() as u64);
    assert_eq!(h.claims.stored.lock().unwrap()[key], body);
}

#[test]
fn secret_debug_does_not_show_the_key() {
    let secret = SigningSecret::parse("whsec_c2VjcmV0LWtleS1ieXRlcw==").unwrap();
    let shown = format!("{secret:?}");
    assert_eq!(shown, "SigningSecret(redacted)");
    assert!(!shown.contains("c2Vj") && !shown.contains("secret-key"));
    let raw = SigningSecret::parse("plain-secret").unwrap();
    assert!(!format!("{raw:?}").contains("plain"));
}

#[test]
fn secrets_parse_whsec_base64_or_raw_bytes_and_reject_empty() {
    assert_eq!(
        SigningSecret::parse("whsec_aGVsbG8=").unwrap(),
        SigningSecret::from_bytes(b"hello".to_vec()).unwrap()
    );
    assert_eq!(
        SigningSecret::parse("hello").unwrap(),
        SigningSecret::from_bytes(b"hello".to_vec()).unwrap()
    );
    assert_eq!(SigningSecret::parse(""), Err(SecretError::Empty));
    assert_eq!(SigningSecret::parse("whsec_"), Err(SecretError::Empty));
    assert_eq!(
        SigningSecret::parse("whsec_!!!"),
        Err(SecretError::InvalidBase64)
    );
}

#[test]
fn sign_matches_the_standard_webhooks_reference_vector() {
    // From the Standard Webhooks specification's reference libraries.
    let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let signature = sign(
        &secret,
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1_614_265_330,
        br#"{"test": 2432232314}"#,
    );
    assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

#[tokio::test]
async fn a_local_secrets_file_loads_connectors_and_keeps_values_out_of_errors() {
    let file = LocalSecretsFile::from_json(
        r#"{"acme-events": ["whsec_aGVsbG8=", "raw-secret"], "acme-eu": []}"#,
    )
    .unwrap();
    let secrets = file
        .active_secrets(&ConnectorId::parse("acme-events").unwrap())
        .await
        .unwrap();
    assert_eq!(secrets.len(), 2);
    assert!(file
        .active_secrets(&ConnectorId::parse("other").unwrap())
        .await
        .unwrap()
        .is_empty());

    let err = LocalSecretsFile::from_json(r#"{"acme-events": ["whsec_!!hidden!!"]}"#)
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hidden"), "{err}");
    let err = LocalSecretsFile::from_json(r#"{"acme-events": "whsec_hidden"}"#)
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hidden"), "{err}");
}

/// A pull connector (export pages) or a drop connector (files) takes no webhooks: a delivery
/// signed even with its own secret gets exactly the unknown connector's answer, and nothing
/// is enqueued.
#[tokio::test]
async fn a_pull_or_a_drop_connector_is_an_unknown_webhook_connector() {
    let unknown = {
        let h = harness(&[SECRET]);
        let mut request = signed(SECRET, &cloud_event("evt-1"));
        request.connector = "nobody".to_owned();
        h.service.handle(request).await
    };
    assert_eq!(
        (unknown.status, error_code(&unknown)),
        (404, "unknown_connector".to_owned())
    );
    let mut pull = acme_events();
    pull.payload_format = PayloadFormat::AcmeExportV1;
    pull.identity_rule = IdentityRule::ExportPage;
    let mut drop = acme_events();
    drop.payload_format = PayloadFormat::CsvOffersV1;
    drop.canonicalization = crate::domain::fingerprint::CanonicalizationRule::BytesV1;
    drop.identity_rule = IdentityRule::FileVersion;
    for (what, config) in [("pull", pull), ("drop", drop)] {
        let h = harness_with(config, &[SECRET], VecQueue::default());
        let response = h
            .service
            .handle(signed(SECRET, &cloud_event("evt-1")))
            .await;
        assert_eq!(response, unknown, "{what} connector: {}", response.body);
        assert!(sent(&h).is_empty(), "{what} connector: nothing enqueued");
    }
}
