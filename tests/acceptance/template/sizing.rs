//! Sized for the worst delivery (docs/adr/0048-sized-from-measurements.md): each function's timeout
//! and memory, the ingest batch's reserve and the queue's visibility timeout follow the sizing
//! bench's figures (`feedsafe::lambda::sizing`, docs/benchmarks.md "Sizing") with the stated
//! factors.

use super::*;
use feedsafe::lambda::sizing::{
    Worst, INGEST_MESSAGE, MEMORY_FACTOR, PEAK_MEMORY_MIB, POLLER_PAGE, PROJECTOR_INVOCATION,
    RESERVE_FACTOR_TENTHS, SAFETY_FACTOR, VISIBILITY_FACTOR,
};
use std::time::Duration;

/// A function's setting (`Timeout`, `MemorySize`): its own, else the Globals'.
fn setting(document: &serde_norway::Value, function: &str, name: &str) -> u64 {
    document["Resources"][function]["Properties"][name]
        .as_u64()
        .or_else(|| document["Globals"]["Function"][name].as_u64())
        .unwrap_or_else(|| panic!("{function} has no {name}"))
}

fn timeout(document: &serde_norway::Value, function: &str) -> Duration {
    Duration::from_secs(setting(document, function, "Timeout"))
}

fn worst(document: &serde_norway::Value, function: &str, case: Worst) -> Duration {
    case.at_memory(setting(document, function, "MemorySize"))
}

#[test]
fn timeouts_and_visibility_follow_the_sizing_figures() {
    let document = template_document();
    let factor = SAFETY_FACTOR as u32;

    // Ingest: a batch starts a message only while MESSAGE_RESERVE is left, and the reserve
    // covers the slowest message; the timeout covers it three times over.
    let ingest = worst(&document, "IngestFunction", INGEST_MESSAGE);
    let reserve = feedsafe::lambda::sqs::MESSAGE_RESERVE;
    assert!(
        reserve * 10 >= ingest * RESERVE_FACTOR_TENTHS as u32,
        "reserve {reserve:?} < {RESERVE_FACTOR_TENTHS}/10 x worst message {ingest:?}"
    );
    let ingest_timeout = timeout(&document, "IngestFunction");
    assert!(
        ingest_timeout >= ingest * factor && ingest_timeout >= reserve,
        "ingest timeout {ingest_timeout:?} < {factor} x worst message {ingest:?} (or < reserve)"
    );
    let visibility = document["Resources"]["IngestQueue"]["Properties"]["VisibilityTimeout"]
        .as_u64()
        .expect("IngestQueue VisibilityTimeout");
    assert!(
        Duration::from_secs(visibility) >= ingest_timeout * VISIBILITY_FACTOR as u32,
        "visibility {visibility} s < {VISIBILITY_FACTOR} x ingest timeout {ingest_timeout:?}"
    );

    // Projector: one stream event of up to BatchSize records.
    let batch = document["Resources"]["ProjectorFunction"]["Properties"]["Events"]
        ["EvidenceChanges"]["Properties"]["BatchSize"]
        .as_u64();
    assert_eq!(
        batch,
        Some(1000),
        "the bench measured events of 1,000 records"
    );
    let projector = worst(&document, "ProjectorFunction", PROJECTOR_INVOCATION);
    assert!(timeout(&document, "ProjectorFunction") >= projector * factor);

    // Poller: the largest export a run takes, page by page, in one invocation.
    let pages = feedsafe::intake::poller::MAX_EXPORT_PAGES;
    let pull = worst(&document, "PollerFunction", POLLER_PAGE) * pages;
    assert!(
        timeout(&document, "PollerFunction") >= pull * factor,
        "poller timeout < {factor} x {pages} pages ({pull:?})"
    );

    // Ops: POST /v1/connectors/{id}/runs reads page 1 (every attempt, with its backoff)
    // within the HTTP API's 30 s.
    use feedsafe::domain::connector::{DEFAULT_MAX_ATTEMPTS, DEFAULT_PAGE_TIMEOUT_MS};
    use feedsafe::intake::poller::{backoff_delay, INITIAL_BACKOFF, MAX_BACKOFF};
    let page_one = Duration::from_millis(DEFAULT_PAGE_TIMEOUT_MS) * DEFAULT_MAX_ATTEMPTS
        + (1..DEFAULT_MAX_ATTEMPTS)
            .map(|a| backoff_delay(a, INITIAL_BACKOFF, MAX_BACKOFF))
            .sum::<Duration>();
    let ops = timeout(&document, "OpsFunction");
    assert!(
        ops >= page_one && ops <= Duration::from_secs(30),
        "ops timeout {ops:?}: page 1 takes up to {page_one:?}, the HTTP API waits 30 s"
    );

    // Memory: every function has at least MEMORY_FACTOR x the measured peak.
    for (id, _) in serverless_functions(&document) {
        let memory = setting(&document, &id, "MemorySize");
        assert!(
            memory >= MEMORY_FACTOR * PEAK_MEMORY_MIB,
            "{id}: {memory} MB < {MEMORY_FACTOR} x {PEAK_MEMORY_MIB} MiB"
        );
    }
}
