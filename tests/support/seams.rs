//! Fault and timing seams: a crash at one point once, a contended commit or a lost chunk once, a clock
//! the test sets, and the fault injector on the AWS clients.

use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::domain::model::QuarantineEntry;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ports::{Clock, CrashPoint, Faults};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// An evidence store that fails one staged write once, or every source-health note, as the
/// engine or the network would; everything else is the real store. A test seam through the `EvidenceStore` port.
pub struct ChunkSeam {
    pub inner: Arc<DynamoEvidenceStore>,
    fault: ChunkFault,
    fired: AtomicBool,
    /// Staged chunks (written without the record) the real store has answered.
    staged_answered: AtomicUsize,
}

enum ChunkFault {
    /// The first commit of a staged delivery answers `Contended`, unwritten, as a transaction
    /// conflict with another worker would: the caller backs off and probes again.
    ContendedCommit,
    /// The staged chunk starting with this observation fails `Unavailable`, unwritten, once
    /// `others` staged chunks written at the same time have been answered.
    LostChunk {
        first: feedsafe::domain::ids::ObservationId,
        others: usize,
    },
    /// Every source-health note fails `Unavailable`, as the engine or the network would.
    HealthNotesFail,
}

impl ChunkSeam {
    pub fn contended_commit_once(inner: Arc<DynamoEvidenceStore>) -> Arc<Self> {
        Self::new(inner, ChunkFault::ContendedCommit)
    }

    pub fn lose_chunk_once(
        inner: Arc<DynamoEvidenceStore>,
        first: feedsafe::domain::ids::ObservationId,
        others: usize,
    ) -> Arc<Self> {
        Self::new(inner, ChunkFault::LostChunk { first, others })
    }

    pub fn failing_health_notes(inner: Arc<DynamoEvidenceStore>) -> Arc<Self> {
        Self::new(inner, ChunkFault::HealthNotesFail)
    }

    fn new(inner: Arc<DynamoEvidenceStore>, fault: ChunkFault) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fault,
            fired: AtomicBool::new(false),
            staged_answered: AtomicUsize::new(0),
        })
    }
}

#[async_trait::async_trait]
impl feedsafe::protocols::ports::EvidenceStore for ChunkSeam {
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
        use feedsafe::protocols::ports::{ChunkOutcome, ReplayAction, StoreError};
        match &self.fault {
            ChunkFault::ContendedCommit
                if matches!(chunk.replay, Some(ReplayAction::Commit { .. }))
                    && !self.fired.swap(true, Ordering::SeqCst) =>
            {
                return Ok(ChunkOutcome::Contended);
            }
            ChunkFault::LostChunk { first, others }
                if chunk.replay.is_none()
                    && chunk.observations.first().map(|o| &o.observation_id) == Some(first)
                    && !self.fired.swap(true, Ordering::SeqCst) =>
            {
                while self.staged_answered.load(Ordering::SeqCst) < *others {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                return Err(StoreError::Unavailable(anyhow::anyhow!(
                    "injected: the chunk's transaction never reached the engine"
                )));
            }
            _ => {}
        }
        let answer = self.inner.write_chunk(chunk, now).await;
        if chunk.replay.is_none() {
            self.staged_answered.fetch_add(1, Ordering::SeqCst);
        }
        answer
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

    async fn replay_context(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        source: &feedsafe::domain::model::SourceRef,
        run: Option<&feedsafe::domain::ids::RunId>,
        now: Timestamp,
    ) -> Result<feedsafe::protocols::ports::ReplayContext, feedsafe::protocols::ports::StoreError>
    {
        self.inner
            .replay_context(delivery_key, payload_sha256, source, run, now)
            .await
    }

    async fn correction_rules(
        &self,
        source: &feedsafe::domain::model::SourceRef,
    ) -> Result<feedsafe::domain::model::CorrectionRules, feedsafe::protocols::ports::StoreError>
    {
        feedsafe::protocols::ports::EvidenceStore::correction_rules(self.inner.as_ref(), source)
            .await
    }

    async fn note_delivery(
        &self,
        note: &feedsafe::domain::source_health::DeliveryNote,
    ) -> Result<(), feedsafe::protocols::ports::StoreError> {
        if let ChunkFault::HealthNotesFail = self.fault {
            return Err(feedsafe::protocols::ports::StoreError::Unavailable(
                anyhow::anyhow!("injected: the health note's request failed"),
            ));
        }
        feedsafe::protocols::ports::EvidenceStore::note_delivery(self.inner.as_ref(), note).await
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
