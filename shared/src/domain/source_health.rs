//! A source's delivery health, as plain values: when its last delivery was received and how it
//! settled (committed, replayed, quarantined, refused), when it last committed, the cadence its
//! connector expects, and from that whether the source is overdue and since when
//! (docs/architecture.md, "Source health").
//!
//! The record is a summary kept beside the evidence, never evidence itself: every time in it is
//! also in a replay record, a quarantine entry or a run. A note that could not be written makes
//! the source look older than it is until its next delivery: health errs towards "overdue",
//! never towards "fresh".

use crate::domain::connector::ConnectorConfig;
use crate::domain::definition::Transport;
use crate::domain::ids::{ConnectorId, SourceAccount, TenantId};
use crate::domain::timestamp::Timestamp;
use serde::Serialize;

/// A pull connector's cadence when its definition names neither `expected_cadence_minutes`
/// nor `every_minutes`: the dispatcher's default schedule.
pub const DEFAULT_PULL_CADENCE_MINUTES: u32 = 60;

/// How one delivery settled, as the source's health records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Settled {
    /// Stored (or its storing finished) by this attempt.
    Committed,
    /// Already stored with the same payload: a retry.
    Replayed,
    /// A changed payload under a stored identity: quarantined, nothing stored changed.
    Quarantined,
    /// Input that can never be stored: quarantined with its reason code.
    Refused,
}

impl Settled {
    pub const ALL: [Settled; 4] = [
        Self::Committed,
        Self::Replayed,
        Self::Quarantined,
        Self::Refused,
    ];

    pub fn code(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Replayed => "replayed",
            Self::Quarantined => "quarantined",
            Self::Refused => "refused",
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }
}

/// One settled delivery of a known source, as ingest notes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryNote {
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub settled: Settled,
    pub delivery_key: String,
    /// When our system received the payload (the envelope's `retrieved_at`).
    pub received_at: Timestamp,
    /// When this attempt settled it.
    pub settled_at: Timestamp,
}

/// What the health record of one connector holds (`null`s: never happened).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceHealth {
    pub tenant: TenantId,
    pub connector: ConnectorId,
    /// Known once a delivery or the definition was noted (a run note does not name it).
    pub source_account: Option<SourceAccount>,
    /// When the last delivery was received (its `retrieved_at`), whatever became of it.
    pub last_received_at: Option<Timestamp>,
    /// How the last received delivery settled, and its key.
    pub last_outcome: Option<Settled>,
    pub last_delivery_key: Option<String>,
    /// When a delivery last settled each way (the settling attempt's time).
    pub last_committed_at: Option<Timestamp>,
    pub last_replayed_at: Option<Timestamp>,
    pub last_quarantined_at: Option<Timestamp>,
    pub last_refused_at: Option<Timestamp>,
    /// The last pull run started for the connector.
    pub last_run_id: Option<String>,
    pub last_run_started_at: Option<Timestamp>,
    /// When the connector's first definition was stored (`null` for a connector configured
    /// before definitions): the start of its first cadence.
    pub registered_at: Option<Timestamp>,
    /// The cadence and transport of the connector's current definition, as its last
    /// definition write noted them (`null` for a connector configured before definitions).
    pub expected_cadence_minutes: Option<u32>,
    pub transport: Option<String>,
}

impl SourceHealth {
    /// A connector nothing was ever noted for.
    pub fn empty(tenant: TenantId, connector: ConnectorId) -> Self {
        Self {
            tenant,
            connector,
            source_account: None,
            last_received_at: None,
            last_outcome: None,
            last_delivery_key: None,
            last_committed_at: None,
            last_replayed_at: None,
            last_quarantined_at: None,
            last_refused_at: None,
            last_run_id: None,
            last_run_started_at: None,
            registered_at: None,
            expected_cadence_minutes: None,
            transport: None,
        }
    }
}

/// The cadence a connector's deliveries are expected at, in minutes: its definition's
/// `expected_cadence_minutes`; for a pull without one, its schedule (`every_minutes`, default
/// 60). `None`: nothing is expected (a push connector that names no cadence is never overdue).
pub fn expected_cadence_minutes(config: &ConnectorConfig) -> Option<u32> {
    let definition = config.definition.as_deref()?;
    if let Some(minutes) = definition.expected_cadence_minutes {
        return Some(minutes.max(1));
    }
    match &definition.transport {
        Transport::Pull(pull) => Some(pull.every_minutes.unwrap_or(DEFAULT_PULL_CADENCE_MINUTES)),
        _ => None,
    }
}

/// Whether a source is overdue at `now`, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Overdue {
    pub overdue: bool,
    /// When the next delivery was due and did not commit; `null` when it is not overdue.
    pub overdue_since: Option<Timestamp>,
}

impl SourceHealth {
    /// Whether the source is overdue at `now` under `cadence_minutes`: past its last commit
    /// plus the cadence; one that never committed counts from its registration. A source
    /// without a cadence, or without either instant, is never overdue.
    pub fn overdue(&self, cadence_minutes: Option<u32>, now: Timestamp) -> Overdue {
        overdue(
            self.last_committed_at.or(self.registered_at),
            cadence_minutes,
            now,
        )
    }
}

/// Overdue once `now` is past `since` plus the cadence.
pub fn overdue(since: Option<Timestamp>, cadence_minutes: Option<u32>, now: Timestamp) -> Overdue {
    let (Some(since), Some(cadence)) = (since, cadence_minutes) else {
        return Overdue {
            overdue: false,
            overdue_since: None,
        };
    };
    let due = since.plus_seconds(i64::from(cadence) * 60);
    let late = now.seconds_since(due) > 0;
    Overdue {
        overdue: late,
        overdue_since: late.then_some(due),
    }
}

/// The share of a source's current claims observed within its cadence of `now`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RefreshedShare {
    pub items: usize,
    pub refreshed: usize,
    /// `refreshed / items`, rounded to 4 decimal places; `null` without items or cadence.
    pub share: Option<f64>,
}

/// Of claims observed at `observed`, how many lie within `cadence_minutes` of `now`.
pub fn refreshed_share(
    observed: impl IntoIterator<Item = Timestamp>,
    cadence_minutes: Option<u32>,
    now: Timestamp,
) -> RefreshedShare {
    let (mut items, mut refreshed) = (0usize, 0usize);
    for at in observed {
        items += 1;
        let within = cadence_minutes.is_some_and(|c| now.seconds_since(at) <= i64::from(c) * 60);
        refreshed += usize::from(within);
    }
    let share = match (items, cadence_minutes) {
        (0, _) | (_, None) => None,
        _ => Some((refreshed as f64 / items as f64 * 10_000.0).round() / 10_000.0),
    };
    RefreshedShare {
        items,
        refreshed,
        share,
    }
}

/// A pull connector's schedule as the dispatcher keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullSlot {
    pub every_minutes: u32,
    /// The start of the last slot whose run was launched (unix seconds).
    pub last_slot: Option<i64>,
}

impl PullSlot {
    pub fn next_pull(&self, now: Timestamp) -> Option<Timestamp> {
        next_scheduled_pull(self.every_minutes, self.last_slot, now)
    }
}

/// When the dispatcher launches a connector's next scheduled pull, from its schedule
/// (`every_minutes`) and the slot last launched: the next slot once this one was launched,
/// otherwise this slot's (the dispatcher's next tick, within a minute).
pub fn next_scheduled_pull(
    every_minutes: u32,
    last_slot: Option<i64>,
    now: Timestamp,
) -> Option<Timestamp> {
    let every = i64::from(every_minutes.max(1)) * 60;
    let slot = now.unix_seconds().div_euclid(every) * every;
    let next = match last_slot {
        Some(last) if last >= slot => slot.checked_add(every)?,
        _ => slot,
    };
    Timestamp::from_unix_seconds(next)
}

#[cfg(test)]
#[path = "source_health_tests.rs"]
mod tests;
