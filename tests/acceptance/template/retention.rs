//! Configuration guards: retention of the raw evidence and of intake objects.

use super::*;

// ---------------------------------------------------------------------------------------------
// Configuration guards: retention of the raw evidence, the dedup horizon
// ---------------------------------------------------------------------------------------------

/// Prefixes of the raw bucket that hold evidence records point at forever: the delivery
/// payloads (`raw/`, referenced by observations and replay records) and refused messages
/// (`rejected/`, referenced by quarantine entries).
const EVIDENCE_PREFIXES: [&str; 2] = ["raw/", "rejected/"];

/// Storage classes an artifact may move to: readable in milliseconds without a restore, so
/// ingest's verification, quarantine diffs and presigned links keep working.
const INSTANT_RETRIEVAL_CLASSES: [&str; 2] = ["GLACIER_IR", "STANDARD_IA"];

/// S3 refuses a transition to STANDARD_IA earlier than 30 days after creation.
const MIN_TRANSITION_DAYS: i64 = 30;

/// Lifecycle properties that delete object versions. `ExpiredObjectDeleteMarker` is not one:
/// it removes only delete markers with no version left behind them.
const EXPIRING_PROPERTIES: [&str; 4] = [
    "ExpirationInDays",
    "ExpirationDate",
    "NoncurrentVersionExpiration",
    "NoncurrentVersionExpirationInDays",
];

/// Whether a rule can act on some object under `prefix`: a rule without a prefix acts on every
/// object; tag and size filters only narrow it, so they do not make it safe.
fn rule_reaches(rule: &serde_norway::Value, prefix: &str) -> bool {
    let own = rule["Prefix"].as_str().unwrap_or("");
    prefix.starts_with(own) || own.starts_with(prefix)
}

fn rule_name(rule: &serde_norway::Value) -> String {
    format!(
        "{} (prefix {:?})",
        rule["Id"].as_str().unwrap_or("<no Id>"),
        rule["Prefix"].as_str().unwrap_or("")
    )
}

/// The least value a number property can take: a literal, or the `MinValue` of the parameter
/// it references (`None` when the parameter has none).
fn least_number(document: &serde_norway::Value, value: &serde_norway::Value) -> Option<i64> {
    let as_number = |v: &serde_norway::Value| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    match ref_target(value) {
        Some(name) => as_number(&document["Parameters"][name]["MinValue"]),
        None => as_number(value),
    }
}

/// The values a string property can take: a literal, or the `AllowedValues` of the parameter
/// it references (`None` when the parameter allows anything).
fn possible_strings(
    document: &serde_norway::Value,
    value: &serde_norway::Value,
) -> Option<Vec<String>> {
    match ref_target(value) {
        Some(name) => document["Parameters"][name]["AllowedValues"]
            .as_sequence()
            .map(|values| {
                values
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            }),
        None => value.as_str().map(|s| vec![s.to_owned()]),
    }
}

/// The longest time (seconds) a message can stay in the ingest queue or its dead-letter queue.
fn longest_queue_retention_seconds(document: &serde_norway::Value) -> i64 {
    ["IngestQueue", "IngestDLQ"]
        .iter()
        .map(|id| {
            resource(document, id)["Properties"]["MessageRetentionPeriod"]
                .as_i64()
                .unwrap_or(345_600) // the SQS default, 4 days
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn no_lifecycle_rule_expires_raw_evidence_current_or_noncurrent() {
    let document = template_document();
    for rule in raw_bucket_lifecycle_rules(&document) {
        for prefix in EVIDENCE_PREFIXES {
            if !rule_reaches(rule, prefix) {
                continue;
            }
            for property in EXPIRING_PROPERTIES {
                assert!(
                    rule.get(property).is_none(),
                    "lifecycle rule {} reaches {prefix} and has {property}: it would delete \
                     evidence an observation or a quarantine entry still points at",
                    rule_name(rule)
                );
            }
        }
    }
}

#[test]
fn raw_evidence_moves_to_a_cheaper_instant_retrieval_class_instead_of_expiring() {
    let document = template_document();
    let rules = raw_bucket_lifecycle_rules(&document);
    for prefix in EVIDENCE_PREFIXES {
        let reaching: Vec<_> = rules.iter().filter(|r| rule_reaches(r, prefix)).collect();
        // Every transition that can touch evidence keeps it readable without a restore.
        for rule in &reaching {
            for list in [
                "Transitions",
                "Transition",
                "NoncurrentVersionTransitions",
                "NoncurrentVersionTransition",
            ] {
                for transition in one_or_many(&rule[list]) {
                    let classes = possible_strings(&document, &transition["StorageClass"])
                        .unwrap_or_else(|| {
                            panic!("{}: {list} storage class is unconstrained", rule_name(rule))
                        });
                    assert!(
                        classes
                            .iter()
                            .all(|c| INSTANT_RETRIEVAL_CLASSES.contains(&c.as_str())),
                        "{}: {list} may move evidence to {classes:?}; only {INSTANT_RETRIEVAL_CLASSES:?} \
                         are read without a restore",
                        rule_name(rule)
                    );
                    let days = transition
                        .get("TransitionInDays")
                        .or_else(|| transition.get("NoncurrentDays"))
                        .and_then(|d| least_number(&document, d));
                    assert!(
                        days.is_some_and(|d| d >= MIN_TRANSITION_DAYS),
                        "{}: {list} may transition before {MIN_TRANSITION_DAYS} days ({days:?})",
                        rule_name(rule)
                    );
                }
            }
        }
        assert!(
            reaching
                .iter()
                .any(|r| !one_or_many(&r["Transitions"]).is_empty()),
            "no lifecycle rule moves {prefix} objects to a cheaper storage class"
        );
    }
}

#[test]
fn claim_checked_bodies_still_expire_but_only_after_the_queue_is_done_with_them() {
    let document = template_document();
    let retention_days = (longest_queue_retention_seconds(&document) + 86_399) / 86_400;
    for prefix in ["claims/", "drops/"] {
        let expiring: Vec<_> = raw_bucket_lifecycle_rules(&document)
            .into_iter()
            .filter(|r| rule_reaches(r, prefix))
            .filter(|r| !r["ExpirationInDays"].is_null())
            .collect();
        assert!(!expiring.is_empty(), "nothing expires {prefix} objects");
        for rule in expiring {
            // A queued envelope (or one redriven from the dead-letter queue) points at them.
            let days = least_number(&document, &rule["ExpirationInDays"]);
            assert!(
                days.is_some_and(|d| d > retention_days),
                "{}: {prefix} objects may expire after {days:?} days, before a message that \
                 points at them leaves the queues ({retention_days} days)",
                rule_name(rule)
            );
        }
    }
}
