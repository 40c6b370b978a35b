use super::*;
use crate::domain::definition::Definition;
use proptest::prelude::*;
use serde_json::Value;

const WEBHOOK: &str =
    include_str!("../../../tests/fixtures/suppliers/snapshot-webhooks/definition.json");
const PULL: &str =
    include_str!("../../../tests/fixtures/suppliers/distributor-api/definition.json");

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("a timestamp")
}

fn config_of(document: Value) -> ConnectorConfig {
    let definition = Definition::read(&document).expect("a definition");
    definition
        .to_config(crate::domain::ids::TenantId::parse("tenant-a").unwrap(), 1)
        .expect("a configuration")
}

fn webhook_with(cadence: Option<u32>) -> ConnectorConfig {
    let mut document: Value = serde_json::from_str(WEBHOOK).unwrap();
    if let Some(minutes) = cadence {
        document["expected_cadence_minutes"] = minutes.into();
    }
    config_of(document)
}

#[test]
fn a_source_is_overdue_only_past_its_last_commit_plus_the_cadence() {
    let last = Some(at("2026-12-01T10:00:00Z"));
    let on_time = overdue(last, Some(60), at("2026-12-01T11:00:00Z"));
    assert!(!on_time.overdue);
    assert_eq!(on_time.overdue_since, None);
    let late = overdue(last, Some(60), at("2026-12-01T11:00:01Z"));
    assert!(late.overdue);
    assert_eq!(late.overdue_since, Some(at("2026-12-01T11:00:00Z")));
    // Nothing expected, or nothing to count from: never overdue.
    assert!(!overdue(last, None, at("9999-12-31T23:59:59Z")).overdue);
    assert!(!overdue(None, Some(1), at("9999-12-31T23:59:59Z")).overdue);
}

#[test]
fn a_source_that_never_committed_counts_from_its_registration() {
    let mut health = SourceHealth::empty(
        crate::domain::ids::TenantId::parse("tenant-a").unwrap(),
        crate::domain::ids::ConnectorId::parse("acme-eu").unwrap(),
    );
    assert!(!health.overdue(Some(5), at("2026-12-01T10:00:00Z")).overdue);
    health.registered_at = Some(at("2026-12-01T10:00:00Z"));
    let state = health.overdue(Some(5), at("2026-12-01T10:06:00Z"));
    assert_eq!(state.overdue_since, Some(at("2026-12-01T10:05:00Z")));
    health.last_committed_at = Some(at("2026-12-01T10:04:00Z"));
    assert!(!health.overdue(Some(5), at("2026-12-01T10:06:00Z")).overdue);
}

#[test]
fn the_cadence_comes_from_the_definition_or_a_pull_schedule() {
    assert_eq!(expected_cadence_minutes(&webhook_with(None)), None);
    assert_eq!(expected_cadence_minutes(&webhook_with(Some(15))), Some(15));
    let mut pull: Value = serde_json::from_str(PULL).unwrap();
    pull["transport"]["every_minutes"] = 30.into();
    assert_eq!(expected_cadence_minutes(&config_of(pull.clone())), Some(30));
    pull["transport"]
        .as_object_mut()
        .unwrap()
        .remove("every_minutes");
    assert_eq!(
        expected_cadence_minutes(&config_of(pull.clone())),
        Some(DEFAULT_PULL_CADENCE_MINUTES)
    );
    pull["expected_cadence_minutes"] = 240.into();
    assert_eq!(expected_cadence_minutes(&config_of(pull)), Some(240));
}

#[test]
fn the_share_counts_claims_observed_within_the_cadence() {
    let now = at("2026-12-01T12:00:00Z");
    let observed = [
        at("2026-12-01T11:30:00Z"),
        at("2026-12-01T11:00:00Z"),
        at("2026-12-01T10:59:59Z"),
    ];
    let share = refreshed_share(observed, Some(60), now);
    assert_eq!((share.items, share.refreshed), (3, 2));
    assert_eq!(share.share, Some(0.6667));
    assert_eq!(refreshed_share(observed, None, now).share, None);
    assert_eq!(refreshed_share([], Some(60), now).share, None);
}

#[test]
fn the_next_pull_is_this_slot_until_it_is_launched_then_the_next() {
    let now = at("2026-12-01T10:17:00Z");
    let slot = at("2026-12-01T10:15:00Z").unix_seconds();
    assert_eq!(
        next_scheduled_pull(15, None, now),
        Some(at("2026-12-01T10:15:00Z"))
    );
    assert_eq!(
        next_scheduled_pull(15, Some(slot - 900), now),
        Some(at("2026-12-01T10:15:00Z"))
    );
    assert_eq!(
        next_scheduled_pull(15, Some(slot), now),
        Some(at("2026-12-01T10:30:00Z"))
    );
}

#[test]
fn every_settled_code_parses_back() {
    for settled in Settled::ALL {
        assert_eq!(Settled::parse(settled.code()), Some(settled));
    }
    assert_eq!(Settled::parse("COMMITTED"), None);
}

fn any_instant() -> impl Strategy<Value = Timestamp> {
    (0i64..=253_402_300_799).prop_map(|s| Timestamp::from_unix_seconds(s).expect("in range"))
}

proptest! {
    /// At the calendar's edges (years 0000 and 9999, the longest cadence) nothing panics, and
    /// an overdue source is overdue from an instant at or before now.
    #[test]
    fn overdue_and_the_next_pull_hold_over_the_whole_calendar(
        since in any_instant(),
        now in any_instant(),
        cadence in prop_oneof![Just(u32::MAX), Just(1u32), 1u32..100_000],
        last_slot in proptest::option::of(any::<i64>()),
    ) {
        let state = overdue(Some(since), Some(cadence), now);
        if let Some(from) = state.overdue_since {
            prop_assert!(state.overdue);
            prop_assert!(now.seconds_since(from) > 0);
            prop_assert!(from.seconds_since(since) >= 0);
        }
        if let Some(next) = next_scheduled_pull(cadence, last_slot, now) {
            prop_assert!(next.seconds_since(now) <= i64::from(cadence.max(1)) * 60);
        }
        let share = refreshed_share([since], Some(cadence), now);
        prop_assert!(share.share.is_some_and(|s| (0.0..=1.0).contains(&s)));
    }
}
