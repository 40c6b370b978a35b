//! What the protocols need from the outside world: the error every store answers with, the
//! clock, the connector directory, and the ingest algorithm's evidence and artifact stores and
//! fault points; the evidence reads, projection table and projector writes the projection and
//! the read path share (`evidence`); and re-attribution, shared by the projector and the
//! identity corrections (`reattribution`). Adapters in `crate::aws` implement these against
//! DynamoDB and S3; the contract each method MUST keep is in its doc comment.

mod evidence;
mod reattribution;
pub use evidence::*;
pub use reattribution::{Reattribution, Reattributor};

use crate::domain::connector::ConnectorConfig;
use crate::domain::connector::Publication;
use crate::domain::fingerprint::Fingerprint;
use crate::domain::ids::{ConnectorId, ObservationId, RunId};
use crate::domain::model::{
    CommitMarker, CorrectionRules, Observation, QuarantineEntry, ReplayRecord, RunPageUpdate,
    SourceRef,
};
use crate::domain::timestamp::Timestamp;
use async_trait::async_trait;

/// A failure of a dependency that may succeed if the message is delivered again.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("evidence store unavailable: {0:#}")]
    Unavailable(anyhow::Error),
    /// Stored data contradicts an invariant (for example an observation id already taken by a
    /// write the replay record does not account for). Never resolved by guessing.
    #[error("evidence store invariant violated: {0}")]
    Invariant(String),
    /// A page cursor a caller sent that is not one issued for the listing it asks for (its
    /// tenant, item and listing); the message says why, with no internals.
    #[error("invalid cursor: {0}")]
    InvalidCursor(String),
}

/// What the fresh path reads before it parses a payload: the replay hint, the source's identity
/// rules, and the publication policy of the delivery's run as the run recorded it when it
/// started (`None`: not a run's page, a run nobody started, or one started before runs
/// recorded it).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayContext {
    pub hint: ReplayHint,
    pub rules: CorrectionRules,
    pub run_publication: Option<Publication>,
}

/// What a possibly stale read says about a delivery's replay record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayHint {
    /// No record was seen.
    None,
    /// A committed, unexpired record of this very payload (byte-identical).
    SamePayload,
    /// A record of another payload, a pending one, or an expired one.
    Recorded,
}

#[derive(Debug)]
pub enum AttemptProbe {
    /// A live record with the expected fingerprint; one more attempt was counted on it when the
    /// probe asked to count.
    Matches(ReplayRecord),
    /// A live record whose fingerprint differs from the one expected; nothing was changed.
    Differs(ReplayRecord),
    /// A record whose `expires_at` has passed (still present because TTL deletion lags).
    Expired(ReplayRecord),
    /// No record under this key.
    Absent,
    /// Another writer holds the record right now; back off and look again.
    Contended,
}

/// The replay-record action of one transaction.
#[derive(Debug, Clone)]
pub enum ReplayAction {
    /// Put a new record. MUST fail with `ReplayConditionFailed` unless there is no record, or
    /// (when `replacing` is given) the record is exactly that expired epoch.
    Create {
        record: Box<ReplayRecord>,
        replacing: Option<ReplacedRecord>,
    },
    /// Flip a `PENDING` record to `COMMITTED` (all `chunks_total` chunks done, committed at
    /// `commit_at`). MUST fail with `ReplayConditionFailed` unless the record is `PENDING` with
    /// this fingerprint and epoch.
    Commit {
        delivery_key: String,
        fingerprint: Fingerprint,
        epoch: u32,
        chunks_total: u32,
        commit_at: Timestamp,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplacedRecord {
    pub epoch: u32,
    pub expires_at: i64,
}

/// One all-or-nothing write: the replay action (none for a staged chunk written beside the
/// others), up to 98 observations, the observations it requires to exist, maybe the run page.
#[derive(Debug, Clone)]
pub struct ChunkWrite {
    /// Idempotency token for the transaction (at most 36 characters).
    pub token: String,
    pub replay: Option<ReplayAction>,
    pub observations: Vec<Observation>,
    /// Observations that MUST already exist for the write to happen: on a staged delivery's
    /// commit, one of each chunk written before it (a chunk is written whole or not at all).
    pub witnesses: Vec<ObservationId>,
    pub run_page: Option<RunPageUpdate>,
    /// On the commit of a staged delivery.
    pub commit_marker: Option<CommitMarker>,
}

#[derive(Debug)]
pub enum ChunkOutcome {
    Written,
    /// The replay record was not in the expected state; carries the record as it was, if any.
    ReplayConditionFailed(Option<Box<ReplayRecord>>),
    /// Another writer holds the same items right now; back off and look again.
    Contended,
    /// The replay record allowed the write but an observation id is already taken: the key was
    /// stored before under this epoch and its record is gone (deleted by TTL after expiry). On
    /// a staged chunk written without the record: another attempt wrote that chunk.
    ObservationIdTaken,
    /// A witness observation does not exist: a chunk the commit relies on is not stored.
    WitnessMissing,
}

#[async_trait]
pub trait EvidenceStore: Send + Sync {
    /// Looks at the record under `delivery_key`: `Matches` if it is unexpired at `now` and has
    /// fingerprint `expected`, else says why not (`Differs`, `Expired`, `Absent`). With `count`,
    /// a match also counts one attempt (attempts + 1, last_attempt_at = now) in the same
    /// conditional write; without it, nothing is written (a consistent read). Nothing is ever
    /// changed on a record that does not match.
    async fn record_attempt(
        &self,
        delivery_key: &str,
        expected: &Fingerprint,
        count: bool,
        now: Timestamp,
    ) -> Result<AttemptProbe, StoreError>;

    /// What the record under `delivery_key` looks like, from a read that may be stale
    /// (eventually consistent): only a hint for the path to take. `SamePayload` when it is
    /// COMMITTED, unexpired at `now` and stored from a payload whose sha256 (hex) is
    /// `payload_sha256` (a byte-identical replay); `Recorded` when there is another record.
    async fn replay_hint(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<ReplayHint, StoreError>;

    /// `replay_hint`, the source's `correction_rules`, and for a page of a run the publication
    /// policy the run recorded when it started, which the fresh path needs next, read
    /// together; the store may do it in one round trip.
    async fn replay_context(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        source: &SourceRef,
        run: Option<&RunId>,
        now: Timestamp,
    ) -> Result<ReplayContext, StoreError>;

    /// Counts one attempt on the record under `delivery_key` if it is still what
    /// `replay_hint` saw as `SamePayload` (a conditional write under those same
    /// conditions) and returns it; `None`, with nothing written, if it no longer is.
    async fn count_byte_identical_replay(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<Option<ReplayRecord>, StoreError>;

    /// Writes the chunk atomically, or nothing.
    async fn write_chunk(
        &self,
        chunk: &ChunkWrite,
        now: Timestamp,
    ) -> Result<ChunkOutcome, StoreError>;

    /// Whether an observation with this id exists.
    async fn observation_exists(&self, id: &ObservationId) -> Result<bool, StoreError>;

    /// Stores a quarantine entry. MUST be idempotent: an entry with the same id is left as is.
    async fn put_quarantine(&self, entry: &QuarantineEntry) -> Result<(), StoreError>;

    /// The identity rules in force for a source (a consistent read; empty when none): new rows
    /// are attributed by them.
    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError>;

    /// Notes how a delivery settled in its source's health record. Times only move forward:
    /// an older note never replaces a newer one.
    async fn note_delivery(
        &self,
        note: &crate::domain::source_health::DeliveryNote,
    ) -> Result<(), StoreError>;
}

#[async_trait]
pub trait ConnectorDirectory: Send + Sync {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError>;

    /// Version `version` of connector `id`'s definition (versions never change once stored).
    /// This default knows the current version only; the evidence table answers for every one.
    async fn definition_version(
        &self,
        id: &ConnectorId,
        version: u64,
    ) -> Result<Option<crate::domain::definition::Definition>, StoreError> {
        Ok(self
            .connector(id)
            .await?
            .filter(|c| c.version == Some(version))
            .and_then(|c| c.definition.map(|d| *d)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactWrite {
    /// A new object was written and its checksum verified.
    Created,
    /// An object already stood under the key and was kept. It is not verified yet: call
    /// `verify` before publishing anything against it.
    AlreadyStored,
    /// Another writer's conditional put of this key was in flight (S3's 409
    /// `ConditionalRequestConflict`). The key names the payload's sha256, so that writer is
    /// putting these same bytes; whether its upload lands is not known yet: `verify` before
    /// publishing anything against it.
    Racing,
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The stored bytes do not hash to the expected sha256: never publish against them.
    #[error("raw artifact {key} failed verification: expected sha256 {expected}, found {found}")]
    Corrupt {
        key: String,
        expected: String,
        found: String,
    },
    #[error("object {key} is {size} bytes, over the limit of {limit}")]
    TooLarge { key: String, size: u64, limit: u64 },
    #[error("object {key} not found")]
    NotFound { key: String },
    #[error("raw archive unavailable: {0:#}")]
    Unavailable(anyhow::Error),
}

#[derive(Debug, Clone)]
pub struct ArtifactMeta {
    pub content_type: String,
    pub delivery_key: Option<String>,
    pub retrieved_at: Timestamp,
}

#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores `body` under `key` unless an object is already there (`If-None-Match: *`), with a
    /// SHA-256 checksum, and verifies a new object (`Created`). An existing object is kept
    /// untouched (`AlreadyStored`).
    async fn put_verified(
        &self,
        key: &str,
        body: &[u8],
        sha256: &[u8; 32],
        meta: &ArtifactMeta,
    ) -> Result<ArtifactWrite, ArtifactError>;

    /// Confirms the object under `key` hashes to `sha256`, else `Corrupt`.
    async fn verify(&self, key: &str, sha256: &[u8; 32]) -> Result<(), ArtifactError>;

    /// Reads a claim-checked body, refusing objects larger than `limit` before downloading them.
    async fn fetch(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        limit: u64,
    ) -> Result<Vec<u8>, ArtifactError>;

    /// The sha256 of an object (that version, when given), refusing objects larger than
    /// `limit` (`TooLarge`). The S3 adapter hashes the body as it streams in; this default
    /// reads it whole.
    async fn sha256_of(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        limit: u64,
    ) -> Result<[u8; 32], ArtifactError> {
        let body = self.fetch(bucket, key, version_id, limit).await?;
        Ok(crate::domain::hashing::sha256(&body))
    }
}

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock shifted by a fixed offset: replays "a month later" without waiting a month.
pub struct OffsetClock(pub i64);

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        Timestamp::now().plus_seconds(self.0)
    }
}

/// Crash points in the ingest protocol (docs/crash-points.md). Tests arm them through the
/// `Faults` port to prove each recovery path; production uses `NoFaults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// The message is parsed and validated; nothing is durable yet.
    BeforeArtifact,
    /// The raw artifact is stored and verified; no transaction has run.
    AfterArtifact,
    /// Chunk `n` (1-based: 1 is the first, written with the `PENDING` record) of a staged
    /// delivery is written; chunks after the first are written all at once, so any subset of
    /// the others may be written too, or in flight.
    AfterChunk(u32),
    /// The delivery is committed; the queue has not been told.
    AfterCommit,
    /// A mismatch's payload artifact is stored; its quarantine entry is not.
    BeforeQuarantineEntry,
    /// The quarantine entry (mismatch or rejection) is stored; the queue has not been told.
    AfterQuarantineEntry,
    /// An identity correction's sweep re-attributed its `n`th group of observations (the ops
    /// function timing out half way through a large correction).
    AfterReattributionGroup(u32),
}

pub trait Faults: Send + Sync {
    /// True when the protocol must stop at `point` as if the process had died there.
    fn crash_at(&self, point: CrashPoint) -> bool;
}

pub struct NoFaults;

impl Faults for NoFaults {
    fn crash_at(&self, _: CrashPoint) -> bool {
        false
    }
}
