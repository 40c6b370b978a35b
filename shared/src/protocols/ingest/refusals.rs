//! What ingest records instead of observations: a replay with another fingerprint becomes a
//! quarantine entry (nothing stored changes), input that can never be stored a rejection with
//! the whole message as evidence.

use super::outcome::{IngestError, IngestOutcome, MismatchReport, RejectReport, MISMATCH_CODE};
use super::{rejected_key, Delivery, IngestService};
use crate::domain::envelope::DeliveryEnvelope;
use crate::domain::fingerprint::Fingerprint;
use crate::domain::hashing::{base32_lower, hex, sha256};
use crate::domain::ids::UNREADABLE_ENVELOPE_TENANT;
use crate::domain::model::{QuarantineEntry, QuarantineKind, ReplayRecord, QUARANTINE_OPEN};
use crate::domain::normalize::{refusal_of, RefusedRow};
use crate::domain::reject::{RejectCode, Rejection};
use crate::protocols::ports::{ArtifactMeta, CrashPoint};
use tracing::warn;

/// The refused rows a quarantine entry lists, each reason capped: the entry stays far below
/// DynamoDB's 400 KB item limit whatever the payload (up to `MAX_ROWS` rows).
const MAX_LISTED_ROWS: usize = 500;
const MAX_REASON_CHARS: usize = 300;

fn listed_rows(refused: &[RefusedRow]) -> Vec<RefusedRow> {
    refused
        .iter()
        .take(MAX_LISTED_ROWS)
        .map(|row| RefusedRow {
            reason: row.reason.chars().take(MAX_REASON_CHARS).collect(),
            place: row.place.chars().take(MAX_REASON_CHARS).collect(),
            code: row.code,
        })
        .collect()
}

impl IngestService {
    pub(super) async fn quarantine_mismatch(
        &self,
        d: &Delivery,
        stored: &ReplayRecord,
        received: Fingerprint,
    ) -> Result<IngestOutcome, IngestError> {
        self.crash_point(CrashPoint::BeforeQuarantineEntry)?;
        let quarantine_id = format!(
            "q_{}",
            base32_lower(
                &sha256(
                    format!(
                        "mismatch\n{}\n{}\n{}",
                        d.key_text, stored.epoch, d.payload_sha256
                    )
                    .as_bytes()
                )[..16]
            )
        );
        let entry = QuarantineEntry {
            quarantine_id: quarantine_id.clone(),
            kind: QuarantineKind::Mismatch,
            reason_code: MISMATCH_CODE.to_owned(),
            message: format!(
                "delivery {} was stored with fingerprint {} but was delivered again with fingerprint {}; \
                 the stored observations are unchanged",
                d.key_text, stored.fingerprint, received
            ),
            tenant: d.key.tenant.to_string(),
            connector: Some(d.key.connector.to_string()),
            delivery_key: Some(d.key_text.clone()),
            stored_fingerprint: Some(stored.fingerprint.clone()),
            received_fingerprint: Some(received.clone()),
            stored_artifact_key: Some(stored.artifact_key.clone()),
            stored_observation_ids: Some(stored.observation_ids.clone()),
            evidence_key: d.artifact_key.clone(),
            evidence_sha256: d.payload_sha256.clone(),
            first_seen_at: d.now,
            status: QUARANTINE_OPEN.to_owned(),
            refused_rows: None,
        };
        self.store.put_quarantine(&entry).await?;
        self.crash_point(CrashPoint::AfterQuarantineEntry)?;
        warn!(quarantine_id = %quarantine_id, stored = %stored.fingerprint, received = %received, "replay_payload_mismatch: quarantined");
        Ok(IngestOutcome::Mismatch(MismatchReport {
            delivery_key: d.key_text.clone(),
            quarantine_id,
            stored_fingerprint: stored.fingerprint.clone(),
            received_fingerprint: received,
            evidence_key: d.artifact_key.clone(),
        }))
    }

    /// The rows a `quarantine_rows` definition set aside, in one entry beside the delivery that
    /// stores the other rows: each row's place and reason, the payload's raw artifact as the
    /// evidence. Written before the delivery commits; its id is the payload's under its key,
    /// so every attempt files the same entry.
    pub(super) async fn quarantine_refused_rows(&self, d: &Delivery) -> Result<(), IngestError> {
        if d.refused.is_empty() {
            return Ok(());
        }
        let quarantine_id = format!(
            "r_{}",
            base32_lower(
                &sha256(format!("refused_rows\n{}\n{}", d.key_text, d.payload_sha256).as_bytes())
                    [..16]
            )
        );
        let summary = refusal_of(
            d.refused
                .iter()
                .map(|r| Rejection::new(r.code, format!("{}: {}", r.place, r.reason)))
                .collect(),
        );
        let (code, listed) = summary.map_or((RejectCode::InvalidRow, String::new()), |r| {
            (r.code, r.message)
        });
        let entry = QuarantineEntry {
            quarantine_id: quarantine_id.clone(),
            kind: QuarantineKind::Rejected,
            reason_code: code.as_str().to_owned(),
            message: format!(
                "{} of {} rows set aside by the connector's row policy (quarantine_rows); the \
                 other rows are the delivery's observations (the first {MAX_LISTED_ROWS} are \
                 listed; the evidence holds them all). {listed}",
                d.refused.len(),
                d.refused.len() + d.rows.len()
            ),
            tenant: d.key.tenant.to_string(),
            connector: Some(d.key.connector.to_string()),
            delivery_key: Some(d.key_text.clone()),
            stored_fingerprint: None,
            received_fingerprint: None,
            stored_artifact_key: None,
            stored_observation_ids: None,
            evidence_key: d.artifact_key.clone(),
            evidence_sha256: d.payload_sha256.clone(),
            first_seen_at: d.now,
            status: QUARANTINE_OPEN.to_owned(),
            refused_rows: Some(listed_rows(&d.refused)),
        };
        self.store.put_quarantine(&entry).await?;
        warn!(quarantine_id = %quarantine_id, rows = d.refused.len(), "rows set aside by the row policy");
        Ok(())
    }

    /// Records a refusal with the whole message as evidence; the message is then acknowledged.
    /// When the body was claim-checked and read (`claimed_body`), the body literal is the
    /// evidence instead: the message only points at the claim object, which expires with the
    /// queue retention. The quarantine id is the message's either way, so a redelivery of the
    /// message files the same entry.
    pub(super) async fn reject(
        &self,
        message: &[u8],
        envelope: Option<&DeliveryEnvelope>,
        rejection: Rejection,
        claimed_body: Option<&[u8]>,
    ) -> Result<IngestOutcome, IngestError> {
        let message_digest = sha256(message);
        let evidence = claimed_body.unwrap_or(message);
        let digest = sha256(evidence);
        let digest_hex = hex(&digest);
        let tenant = envelope.map_or_else(
            || UNREADABLE_ENVELOPE_TENANT.to_owned(),
            |e| e.tenant.to_string(),
        );
        let evidence_key = rejected_key(&tenant, &digest_hex);
        let now = self.clock.now();
        let content_type = match (claimed_body, envelope) {
            (Some(_), Some(e)) => e.content_type.clone(),
            _ => "application/json".to_owned(),
        };
        let meta = ArtifactMeta {
            content_type,
            delivery_key: envelope.map(|e| e.delivery_key().as_string()),
            retrieved_at: envelope.map_or(now, |e| e.retrieved_at),
        };
        self.artifacts
            .put_verified(&evidence_key, evidence, &digest, &meta)
            .await?;
        let quarantine_id = format!("r_{}", base32_lower(&message_digest[..16]));
        let entry = QuarantineEntry {
            quarantine_id: quarantine_id.clone(),
            kind: QuarantineKind::Rejected,
            reason_code: rejection.code.as_str().to_owned(),
            message: rejection.message.clone(),
            tenant,
            connector: envelope.map(|e| e.connector.to_string()),
            delivery_key: envelope.map(|e| e.delivery_key().as_string()),
            stored_fingerprint: None,
            received_fingerprint: None,
            stored_artifact_key: None,
            stored_observation_ids: None,
            evidence_key,
            evidence_sha256: digest_hex,
            first_seen_at: now,
            status: QUARANTINE_OPEN.to_owned(),
            refused_rows: None,
        };
        self.store.put_quarantine(&entry).await?;
        self.crash_point(CrashPoint::AfterQuarantineEntry)?;
        warn!(code = rejection.code.as_str(), quarantine_id = %quarantine_id, reason = %rejection.message, "rejected");
        Ok(IngestOutcome::Rejected(RejectReport {
            quarantine_id,
            code: rejection.code,
            message: rejection.message,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_rows_of_a_page_of_bad_rows_fit_in_one_item() {
        let refused: Vec<RefusedRow> = (0..crate::domain::normalize::MAX_ROWS)
            .map(|n| RefusedRow {
                place: format!("line {n}"),
                code: RejectCode::InvalidRow,
                reason: "x".repeat(10_000),
            })
            .collect();
        let listed = listed_rows(&refused);
        assert_eq!(listed.len(), MAX_LISTED_ROWS);
        assert_eq!(listed[0].place, "line 0");
        let size = serde_json::to_vec(&listed).unwrap().len();
        assert!(size < 250_000, "{size} bytes");
    }
}
