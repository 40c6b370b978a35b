//! After a delivery settles, ingest notes it in its source's health record and counts it for
//! the per-connector metrics (docs/architecture.md, "Source health"). The note is a summary of
//! evidence already stored, so it never decides the message's fate: one that cannot be written
//! is logged and left to the source's next delivery.
//!
//! Notes are coalesced per instance: a note of the same outcome for the same connector within
//! [`COALESCE_SECONDS`] of the one this instance last wrote is skipped, so a busy supplier costs
//! a handful of writes a minute, not one per delivery. A different outcome is always written,
//! so the last outcome is exact up to the window.

use super::{DeliveryEnvelope, IngestOutcome, IngestService};
use crate::domain::ids::{ConnectorId, TenantId};
use crate::domain::source_health::{DeliveryNote, Settled};
use crate::domain::timestamp::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// How long this instance skips a repeat of the note it last wrote for a connector.
pub const COALESCE_SECONDS: i64 = 10;

/// The deliveries one connector settled each way since the counts were last taken.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConnectorCounts {
    pub committed: u64,
    pub replayed: u64,
    pub quarantined: u64,
    pub refused: u64,
}

impl ConnectorCounts {
    fn add(&mut self, settled: Settled) {
        let counter = match settled {
            Settled::Committed => &mut self.committed,
            Settled::Replayed => &mut self.replayed,
            Settled::Quarantined => &mut self.quarantined,
            Settled::Refused => &mut self.refused,
        };
        *counter += 1;
    }
}

/// The instance's memory of its last note per connector, and its uncollected counts.
pub(super) struct HealthNotes {
    window_seconds: i64,
    last: Mutex<HashMap<(TenantId, ConnectorId), (Settled, Timestamp)>>,
    counts: Mutex<BTreeMap<ConnectorId, ConnectorCounts>>,
}

impl HealthNotes {
    pub(super) fn new(window_seconds: i64) -> Self {
        Self {
            window_seconds,
            last: Mutex::new(HashMap::new()),
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// Counts the note, and says whether it must be written (not a repeat within the window).
    fn take(&self, note: &DeliveryNote) -> bool {
        if let Ok(mut counts) = self.counts.lock() {
            counts
                .entry(note.connector.clone())
                .or_default()
                .add(note.settled);
        }
        let Ok(mut last) = self.last.lock() else {
            return true;
        };
        let key = (note.tenant.clone(), note.connector.clone());
        let repeat = last.get(&key).is_some_and(|(settled, at)| {
            let since = note.settled_at.seconds_since(*at);
            *settled == note.settled && (0..self.window_seconds).contains(&since)
        });
        if !repeat {
            last.insert(key, (note.settled, note.settled_at));
        }
        !repeat
    }

    /// A note that could not be written is not remembered: the next one is written.
    fn forget(&self, note: &DeliveryNote) {
        if let Ok(mut last) = self.last.lock() {
            last.remove(&(note.tenant.clone(), note.connector.clone()));
        }
    }

    fn drain(&self) -> Vec<(ConnectorId, ConnectorCounts)> {
        self.counts
            .lock()
            .map(|mut counts| std::mem::take(&mut *counts).into_iter().collect())
            .unwrap_or_default()
    }
}

/// How an outcome settles for the source's health.
fn settled(outcome: &IngestOutcome) -> Settled {
    match outcome {
        IngestOutcome::Committed(_) => Settled::Committed,
        IngestOutcome::Replayed(_) => Settled::Replayed,
        IngestOutcome::Mismatch(_) => Settled::Quarantined,
        IngestOutcome::Rejected(_) => Settled::Refused,
    }
}

impl IngestService {
    /// Notes `outcome` of the delivery in `envelope` (an envelope that did not parse names no
    /// source, and is only in the quarantine).
    pub(super) async fn note_settled(&self, envelope: &DeliveryEnvelope, outcome: &IngestOutcome) {
        let note = DeliveryNote {
            tenant: envelope.tenant.clone(),
            connector: envelope.connector.clone(),
            source_account: envelope.source_account.clone(),
            settled: settled(outcome),
            delivery_key: envelope.delivery_key().as_string(),
            received_at: envelope.retrieved_at,
            settled_at: self.clock.now(),
        };
        if !self.health.take(&note) {
            return;
        }
        if let Err(e) = self.store.note_delivery(&note).await {
            self.health.forget(&note);
            tracing::warn!(error = %e, outcome = note.settled.code(), "source health not noted; the next delivery notes it");
        }
    }

    /// The deliveries each connector settled since the last call (the per-connector metrics).
    pub fn take_connector_counts(&self) -> Vec<(ConnectorId, ConnectorCounts)> {
        self.health.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(settled: Settled, at: &str) -> DeliveryNote {
        let at = Timestamp::parse(at).unwrap();
        DeliveryNote {
            tenant: crate::domain::ids::TenantId::parse("tenant-a").unwrap(),
            connector: crate::domain::ids::ConnectorId::parse("acme-eu").unwrap(),
            source_account: crate::domain::ids::SourceAccount::parse("acme-main").unwrap(),
            settled,
            delivery_key: "k".into(),
            received_at: at,
            settled_at: at,
        }
    }

    #[test]
    fn a_repeat_within_the_window_is_counted_but_not_written() {
        let notes = HealthNotes::new(10);
        assert!(notes.take(&note(Settled::Committed, "2026-12-01T10:00:00Z")));
        assert!(!notes.take(&note(Settled::Committed, "2026-12-01T10:00:09Z")));
        // Another outcome is always written, and so is the next one after it.
        assert!(notes.take(&note(Settled::Quarantined, "2026-12-01T10:00:09Z")));
        assert!(notes.take(&note(Settled::Committed, "2026-12-01T10:00:09Z")));
        assert!(notes.take(&note(Settled::Committed, "2026-12-01T10:00:19Z")));
        // A failed write is forgotten: the repeat is written.
        notes.forget(&note(Settled::Committed, "2026-12-01T10:00:19Z"));
        assert!(notes.take(&note(Settled::Committed, "2026-12-01T10:00:20Z")));
        let counts = notes.drain();
        assert_eq!(counts.len(), 1);
        assert_eq!(
            counts[0].1,
            ConnectorCounts {
                committed: 5,
                replayed: 0,
                quarantined: 1,
                refused: 0
            }
        );
        assert!(notes.drain().is_empty(), "taken once");
    }

    #[test]
    fn without_a_window_every_note_is_written() {
        let notes = HealthNotes::new(0);
        assert!(notes.take(&note(Settled::Replayed, "2026-12-01T10:00:00Z")));
        assert!(notes.take(&note(Settled::Replayed, "2026-12-01T10:00:00Z")));
    }
}
