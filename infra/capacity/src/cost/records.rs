//! The records the simulation writes that it does not take from a product builder as is.

use crate::workload::Delivery;
use feedsafe::domain::hashing::sha256;
use feedsafe::domain::model::{QuarantineEntry, QuarantineKind, ReplayRecord, QUARANTINE_OPEN};
use feedsafe::domain::timestamp::Timestamp;

/// The quarantine entry ingest would write for `d` (a mismatch when a record is stored, else a
/// rejection).
pub(super) fn quarantine(
    d: &Delivery,
    evidence: &str,
    sha: &str,
    stored: Option<&ReplayRecord>,
    at: Timestamp,
) -> QuarantineEntry {
    let digest = sha256(format!("{}\n{sha}", d.key).as_bytes());
    QuarantineEntry {
        quarantine_id: format!(
            "{}_{}",
            if stored.is_some() { "q" } else { "r" },
            feedsafe::domain::hashing::base32_lower(&digest[..16])
        ),
        kind: if stored.is_some() {
            QuarantineKind::Mismatch
        } else {
            QuarantineKind::Rejected
        },
        reason_code: if stored.is_some() {
            "replay_payload_mismatch".into()
        } else {
            "invalid_row".into()
        },
        message: "simulated".into(),
        tenant: d.key.tenant.to_string(),
        connector: Some(d.key.connector.to_string()),
        delivery_key: Some(d.key.as_string()),
        stored_fingerprint: stored.map(|r| r.fingerprint.clone()),
        received_fingerprint: stored.map(|r| r.fingerprint.clone()),
        stored_artifact_key: stored.map(|r| r.artifact_key.clone()),
        stored_observation_ids: stored.map(|r| r.observation_ids.clone()),
        evidence_key: evidence.to_owned(),
        evidence_sha256: sha.to_owned(),
        first_seen_at: at,
        status: QUARANTINE_OPEN.into(),
        refused_rows: None,
    }
}
