//! Fault and timing seams: a crash at one point once, a contended chunk advance once, a clock
//! the test sets, and the fault injector on the AWS clients.

use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::domain::model::QuarantineEntry;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ports::{Clock, CrashPoint, Faults};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Fires at `point` the first time only, as a process dying there once would.
pub struct CrashOnce {
    point: CrashPoint,
    fired: AtomicBool,
}

impl CrashOnce {
    pub fn at(point: CrashPoint) -> Arc<Self> {
        Arc::new(Self {
            point,
            fired: AtomicBool::new(false),
        })
    }
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Faults for CrashOnce {
    fn crash_at(&self, point: CrashPoint) -> bool {
        point == self.point && !self.fired.swap(true, Ordering::SeqCst)
    }
}

/// An evidence store that answers the first staged-chunk advance with `Contended` without
/// writing it, as a transaction conflict with another worker would: the caller backs off and
/// probes again. A test seam through the `EvidenceStore` port; everything else is the real store.
pub struct ContendedAdvanceOnce {
    pub inner: Arc<DynamoEvidenceStore>,
    fired: AtomicBool,
}

impl ContendedAdvanceOnce {
    pub fn new(inner: Arc<DynamoEvidenceStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fired: AtomicBool::new(false),
        })
    }
}

#[async_trait::async_trait]
impl feedsafe::protocols::ports::EvidenceStore for ContendedAdvanceOnce {
    async fn record_attempt(
        &self,
        delivery_key: &str,
        expected: &feedsafe::domain::fingerprint::Fingerprint,
        count: bool,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::AttemptProbe, feedsafe::protocols::ports::StoreError>
    {
        self.inner
            .record_attempt(delivery_key, expected, count, now)
            .await
    }

    async fn replay_hint(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::ReplayHint, feedsafe::protocols::ports::StoreError>
    {
        self.inner
            .replay_hint(delivery_key, payload_sha256, now)
            .await
    }

    async fn count_byte_identical_replay(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<Option<feedsafe::domain::model::ReplayRecord>, feedsafe::protocols::ports::StoreError>
    {
        self.inner
            .count_byte_identical_replay(delivery_key, payload_sha256, now)
            .await
    }

    async fn write_chunk(
        &self,
        chunk: &feedsafe::protocols::ports::ChunkWrite,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::ChunkOutcome, feedsafe::protocols::ports::StoreError>
    {
        if matches!(
            chunk.replay,
            feedsafe::protocols::ports::ReplayAction::Advance { .. }
        ) && !self.fired.swap(true, Ordering::SeqCst)
        {
            return Ok(feedsafe::protocols::ports::ChunkOutcome::Contended);
        }
        self.inner.write_chunk(chunk, now).await
    }

    async fn observation_exists(
        &self,
        id: &feedsafe::domain::ids::ObservationId,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        self.inner.observation_exists(id).await
    }

    async fn put_quarantine(
        &self,
        entry: &QuarantineEntry,
    ) -> Result<(), feedsafe::protocols::ports::StoreError> {
        self.inner.put_quarantine(entry).await
    }

    async fn correction_rules(
        &self,
        source: &feedsafe::domain::model::SourceRef,
    ) -> Result<feedsafe::domain::model::CorrectionRules, feedsafe::protocols::ports::StoreError>
    {
        feedsafe::protocols::ports::EvidenceStore::correction_rules(self.inner.as_ref(), source)
            .await
    }
}

/// A clock the test sets: frozen at an instant until moved.
pub struct SettableClock(std::sync::Mutex<Timestamp>);

impl SettableClock {
    pub fn at(at: Timestamp) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(at)))
    }
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap() = at;
    }
}

impl Clock for SettableClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

pub use local_stack::faults::FaultInjector;
