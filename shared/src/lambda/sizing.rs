//! What each function takes at worst, measured by the sizing bench through the functions' own
//! handlers on the local engines (`cargo bench -p acceptance --bench sizing`; figures and
//! method in docs/benchmarks.md, "Sizing"), and the factors template.yaml's timeouts, memory
//! and visibility timeout are set with. The template test
//! `timeouts_and_visibility_follow_the_sizing_figures` asserts the relations.
//!
//! Lambda gives a function CPU in proportion to its memory (one vCPU at 1,769 MB), so a worst
//! case is its wall time on this machine plus its CPU time stretched to the function's share.
//! The wall times are the slowest seen, with the engines shared with a concurrent test suite
//! (DynamoDB Local serializes writes; a quiet engine is about twice as fast); DynamoDB itself
//! is faster still, so these figures overstate AWS, never understate it.

use std::time::Duration;

/// Timeouts are at least this many times the worst case.
pub const SAFETY_FACTOR: u64 = 3;
/// The ingest batch's reserve (`crate::lambda::sqs::MESSAGE_RESERVE`) is at least this many
/// times the worst message: the timeout's own factor covers the rest of the batch.
pub const RESERVE_FACTOR_TENTHS: u64 = 15;
/// The SQS visibility timeout is at least this many times the ingest function's timeout
/// (Lambda's guidance for SQS event sources).
pub const VISIBILITY_FACTOR: u64 = 6;
/// Memory is at least this many times the measured peak.
pub const MEMORY_FACTOR: u64 = 4;
/// Memory at which Lambda gives one full vCPU.
pub const ONE_VCPU_MB: u64 = 1_769;

/// A measured worst case: wall time and the CPU time within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worst {
    pub wall_ms: u64,
    pub cpu_ms: u64,
}

impl Worst {
    /// The worst case at `memory_mb`: the CPU part stretched to that share of a vCPU.
    pub const fn at_memory(&self, memory_mb: u64) -> Duration {
        let stretched = self.cpu_ms * ONE_VCPU_MB / memory_mb;
        let extra = stretched.saturating_sub(self.cpu_ms);
        Duration::from_millis(self.wall_ms + extra)
    }
}

/// Ingest: one 5,000-row export page (566 KiB, claim-checked), the largest delivery a
/// connector takes by default: 52 transactions. Quiet engine: 3.1 s.
pub const INGEST_MESSAGE: Worst = Worst {
    wall_ms: 6_824,
    cpu_ms: 200,
};
/// Projector: one stream event of up to 1,000 records, staged 5,000-row deliveries (1,000
/// records, 1,012 requests) or a 100-page `on_run_complete` run's completion.
pub const PROJECTOR_INVOCATION: Worst = Worst {
    wall_ms: 1_295,
    cpu_ms: 251,
};
/// Poller: one export page fetched (local supplier, no network latency), claim-checked and
/// enqueued. A real supplier adds its own latency per page; a pull cut off by the timeout
/// resumes on the retry or the next schedule (the run id is the export's).
pub const POLLER_PAGE: Worst = Worst {
    wall_ms: 8,
    cpu_ms: 1,
};
/// Peak resident memory of the whole bench process (all three functions' work in one).
pub const PEAK_MEMORY_MIB: u64 = 41;
