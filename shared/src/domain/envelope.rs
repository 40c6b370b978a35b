//! The versioned delivery envelope every producer (webhook, poller, file drop) puts on the ingest
//! queue. It is part of the external contract: see docs/envelope.md.

use crate::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, RunId, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::domain::reject::{RejectCode, Rejection};
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};

pub const ENVELOPE_VERSION: u32 = 1;
/// Bodies up to this size travel inline (base64 inflates them by a third; SQS takes 256 KiB).
pub const MAX_INLINE_BODY_BYTES: usize = 160 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryEnvelope {
    pub envelope_version: u32,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub delivery: DeliveryIdentity,
    /// When our system received the payload from the source.
    pub retrieved_at: Timestamp,
    pub content_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunPage>,
    pub body: BodyRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryIdentity {
    /// The source's name for the delivery, e.g. `EXP-8821/2` or `urn:acme:events/evt-1`.
    pub id: SourceDeliveryId,
    pub strength: IdentityStrength,
    /// Where the id came from: `export_page`, `cloudevents`, `webhook_id`, `file_content`,
    /// `file_version`, `fallback`.
    pub basis: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPage {
    pub run_id: RunId,
    pub page: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BodyRef {
    Inline {
        base64: String,
    },
    /// Claim check: the producer stored the body in S3 because it was over the inline limit.
    S3 {
        bucket: String,
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version_id: Option<String>,
        size: u64,
    },
}

/// A page of a pull named by its schedule slot (`RunId::for_slot`): the run must be this
/// connector's slot run, and a cursor delivery (`cursor:{slot}/{cursor}`) must name its slot.
/// Digest ids (`fb-…`, `cur-…`) carry no slot; the run's own check binds it to the connector.
fn slot_page_is_own(connector: &ConnectorId, run: &RunId, id: &str) -> bool {
    let Some(slot) = RunId::slot_of(connector, run) else {
        return false;
    };
    match id
        .strip_prefix("cursor:")
        .and_then(|rest| rest.split_once('/'))
    {
        Some((named, _)) => named == slot.to_rfc3339(),
        None => id.starts_with("fb-") || id.starts_with("cur-"),
    }
}

impl DeliveryEnvelope {
    pub fn parse(bytes: &[u8]) -> Result<Self, Rejection> {
        let envelope: Self = serde_json::from_slice(bytes).map_err(|e| {
            Rejection::new(
                RejectCode::InvalidEnvelope,
                format!("not a delivery envelope: {e}"),
            )
        })?;
        if envelope.envelope_version != ENVELOPE_VERSION {
            return Err(Rejection::new(
                RejectCode::InvalidEnvelope,
                format!(
                    "envelope_version {} is not supported (expected {ENVELOPE_VERSION})",
                    envelope.envelope_version
                ),
            ));
        }
        if envelope.delivery.basis.is_empty() || envelope.delivery.basis.len() > 64 {
            return Err(Rejection::new(
                RejectCode::InvalidEnvelope,
                "delivery.basis must be 1-64 characters",
            ));
        }
        if envelope.content_type.is_empty() || envelope.content_type.len() > 128 {
            return Err(Rejection::new(
                RejectCode::InvalidEnvelope,
                "content_type must be 1-128 characters",
            ));
        }
        if let Some(run) = &envelope.run {
            if run.page == 0 || run.page_count.is_some_and(|count| count < run.page) {
                return Err(Rejection::new(
                    RejectCode::InvalidEnvelope,
                    "run.page must be 1..=page_count",
                ));
            }
            // A page counts only for the run of its own connector's export: the run id is
            // derived from (connector, export id), the delivery is `{export id}/{page}`. A
            // message naming another connector's run (forged, or built wrongly) could
            // otherwise complete or corrupt that run, possibly another tenant's.
            let id = envelope.delivery.id.as_str();
            let own = id.rsplit_once('/').is_some_and(|(export, page)| {
                page == run.page.to_string()
                    && RunId::for_export(&envelope.connector, export) == run.run_id
            }) || slot_page_is_own(&envelope.connector, &run.run_id, id);
            if !own {
                return Err(Rejection::new(
                    RejectCode::InvalidEnvelope,
                    format!(
                        "run {} is not the run of delivery {id:?} of connector {}",
                        run.run_id, envelope.connector
                    ),
                ));
            }
        }
        Ok(envelope)
    }

    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn delivery_key(&self) -> DeliveryKey {
        DeliveryKey::new(
            self.tenant.clone(),
            self.connector.clone(),
            self.source_account.clone(),
            self.delivery.id.clone(),
            self.delivery.strength,
        )
    }

    pub fn inline(
        key: &DeliveryKey,
        basis: &str,
        retrieved_at: Timestamp,
        content_type: &str,
        run: Option<RunPage>,
        body: &[u8],
    ) -> Self {
        Self {
            envelope_version: ENVELOPE_VERSION,
            tenant: key.tenant.clone(),
            connector: key.connector.clone(),
            source_account: key.source_account.clone(),
            delivery: DeliveryIdentity {
                id: key.source_delivery_id.clone(),
                strength: key.strength,
                basis: basis.to_owned(),
            },
            retrieved_at,
            content_type: content_type.to_owned(),
            run,
            body: BodyRef::Inline {
                base64: crate::domain::hashing::base64_encode(body),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{
      "envelope_version": 1,
      "tenant": "demo",
      "connector": "acme-eu",
      "source_account": "ACC-1",
      "delivery": {"id": "EXP-8821/2", "strength": "source", "basis": "export_page"},
      "retrieved_at": "2026-11-29T08:00:05Z",
      "content_type": "application/json",
      "run": {"run_id": "run-acme-eu.EXP-8821", "page": 2, "page_count": 3},
      "body": {"inline": {"base64": "e30="}}
    }"#;

    #[test]
    fn the_documented_example_parses() {
        let envelope = DeliveryEnvelope::parse(EXAMPLE.as_bytes()).unwrap();
        assert_eq!(
            envelope.delivery_key().as_string(),
            "demo/acme-eu/ACC-1/EXP-8821/2"
        );
        assert_eq!(
            DeliveryEnvelope::parse(envelope.to_json().as_bytes()).unwrap(),
            envelope
        );
    }

    #[test]
    fn malformed_envelopes_are_rejected_with_one_code() {
        for bad in [
            "not json",
            "{}",
            &EXAMPLE.replace("\"envelope_version\": 1", "\"envelope_version\": 9"),
            &EXAMPLE.replace("\"page\": 2", "\"page\": 0"),
            &EXAMPLE.replace("ACC-1", "ACC/1"),
            &EXAMPLE.replace("\"tenant\"", "\"extra\": 1, \"tenant\""),
        ] {
            let err = DeliveryEnvelope::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(err.code, RejectCode::InvalidEnvelope, "{bad}");
        }
    }

    #[test]
    fn a_slot_run_takes_only_its_own_connectors_slot_pages() {
        let slot_page = |connector: &str, id: &str, run: &str| {
            EXAMPLE
                .replace(
                    "\"connector\": \"acme-eu\"",
                    &format!("\"connector\": \"{connector}\""),
                )
                .replace("EXP-8821/2", id)
                .replace("run-acme-eu.EXP-8821", run)
        };
        let run = "run-acme-eu.slot_20261129T080000Z";
        for id in [
            "cursor:2026-11-29T08:00:00Z/c2",
            &format!("fb-{}", "0".repeat(64)),
        ] {
            let text = slot_page("acme-eu", id, run);
            assert!(DeliveryEnvelope::parse(text.as_bytes()).is_ok(), "{id}");
            // Another connector's slot run, or a cursor page of another slot, is refused.
            let other = slot_page("acme-us", id, run);
            assert!(DeliveryEnvelope::parse(other.as_bytes()).is_err(), "{id}");
        }
        let other_slot = slot_page("acme-eu", "cursor:2026-11-29T09:00:00Z/c2", run);
        assert!(DeliveryEnvelope::parse(other_slot.as_bytes()).is_err());
        let not_a_slot_page = slot_page("acme-eu", "snapshot:S-1", run);
        assert!(DeliveryEnvelope::parse(not_a_slot_page.as_bytes()).is_err());
    }
}
