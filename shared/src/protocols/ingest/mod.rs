//! The ingest protocol (docs/architecture.md section 6): one delivery key yields at most one set
//! of observations, each traceable to a verified raw artifact, whatever fails in between.
//!
//! Order of work for one message:
//! 1. parse the envelope, find the connector, load and validate the body (refusals are final);
//! 2. fingerprint under the connector's rule and write the raw artifact (`If-None-Match: *`);
//! 3. a new artifact means a fresh delivery: transact the replay record with the observations;
//!    an existing one means a likely replay: count the attempt on the replay record and answer
//!    from it. A failed transaction condition carries the record that won, and is answered
//!    the same way;
//! 4. more than 98 rows are stored in chunks: the first with a `PENDING` record, the others all
//!    at once, then one transaction flips the record to `COMMITTED` if every chunk is there;
//!    any later attempt writes the chunks still missing and commits.
//!
//! Files: the service and its steps here (the message prepared, then settled step by step:
//! probe, fresh store, resume, backoff), `artifact` (the raw artifact's put and verification,
//! and the waits for a racing writer), `fresh` (the record and first chunk of a new delivery),
//! `staged` (the chunks of a large delivery and its commit), `outcome` (what one message
//! answers), `keys` (the deterministic names and chunk plans), `refusals` (mismatches
//! quarantined, unusable input rejected). The crash points between these writes are listed in
//! docs/crash-points.md.

mod artifact;
mod fresh;
mod health;
mod keys;
mod outcome;
mod recorded;
mod refusals;
mod staged;

use artifact::{RACING_WAITS, STORED_WAITS};
pub use health::{ConnectorCounts, COALESCE_SECONDS};
pub(crate) use keys::attempt_nonce;
pub use keys::{artifact_key, chunk_plan, fingerprint_of, parallel_chunks, rejected_key};
pub use outcome::{
    DeliveryResult, IngestError, IngestOutcome, MismatchReport, RejectReport, MISMATCH_CODE,
};

use crate::domain::connector::{ConnectorConfig, Publication};
use crate::domain::envelope::{BodyRef, DeliveryEnvelope};
use crate::domain::fingerprint::Fingerprint;
use crate::domain::hashing::{base64_decode, hex, sha256};
use crate::domain::ids::{DeliveryKey, ObservationId};
use crate::domain::model::{
    CorrectionRules, Derivation, Observation, ReplayRecord, ReplayState, SourceRef,
    CLAIM_SOURCE_REPORTED, VERIFICATION_UNVERIFIED,
};
use crate::domain::normalize::{NormalizedRow, Reading, RefusedRow};
use crate::domain::reject::{RejectCode, Rejection};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{
    ArtifactError, ArtifactStore, ArtifactWrite, AttemptProbe, Clock, ConnectorDirectory,
    CrashPoint, EvidenceStore, Faults, ReplayContext, ReplayHint, StoreError,
};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, field, info, warn, Instrument};

/// Bound on probe/transaction rounds for one message before it is handed back to the queue.
const MAX_ROUNDS: u32 = 40;

enum Failure {
    Refused(Rejection),
    /// Refused after the body was read from its claim: the body is the evidence to keep, since
    /// the claim object expires with the queue retention.
    RefusedClaimedBody(Rejection, Vec<u8>),
    /// Settled before the delivery was prepared (a byte-identical replay).
    Settled(IngestOutcome),
    Transient(IngestError),
}

impl From<IngestError> for Failure {
    fn from(e: IngestError) -> Self {
        Self::Transient(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::Transient(e.into())
    }
}

impl From<ArtifactError> for Failure {
    fn from(e: ArtifactError) -> Self {
        Self::Transient(e.into())
    }
}

#[derive(Clone)]
pub struct IngestService {
    store: Arc<dyn EvidenceStore>,
    artifacts: Arc<dyn ArtifactStore>,
    connectors: Arc<dyn ConnectorDirectory>,
    clock: Arc<dyn Clock>,
    faults: Arc<dyn Faults>,
    health: Arc<health::HealthNotes>,
}

/// Everything known about the message being ingested.
struct Delivery {
    envelope: DeliveryEnvelope,
    connector: ConnectorConfig,
    key: DeliveryKey,
    key_text: String,
    body: Vec<u8>,
    payload_sha256: String,
    artifact_key: String,
    /// Fingerprint and rows under the connector's current rule.
    fingerprint: Fingerprint,
    rows: Vec<NormalizedRow>,
    /// Rows the connector's definition set aside (`quarantine_rows`): one quarantine entry.
    refused: Vec<RefusedRow>,
    now: Timestamp,
    /// Per-attempt randomness for transaction tokens.
    nonce: u64,
    /// The source's identity rules, read with the replay record before the payload is parsed.
    rules: CorrectionRules,
    /// The publication policy the delivery's run recorded when it started, read with them.
    run_publication: Option<Publication>,
    /// A record under the key was seen (of another payload, pending or expired): the probe
    /// comes first, not a transaction that it would cancel.
    recorded: bool,
}

enum Step {
    Probe(Fingerprint),
    /// Store as new: over nothing, or over the given expired record (its next epoch).
    Fresh(Option<ReplayRecord>),
    /// Observation ids of this epoch are taken although no record exists: find a free epoch.
    FindEpoch(u32),
    /// Store as new in this epoch, beyond the horizon of a record TTL already deleted.
    FreshAfterDeletedRecord(u32),
    Resume(ReplayRecord),
    Backoff,
    /// The `n`-th wait (from 0) for a racing writer's record, then a probe.
    AwaitRacer(u32),
    Done(IngestOutcome),
}

impl IngestService {
    pub fn new(
        store: Arc<dyn EvidenceStore>,
        artifacts: Arc<dyn ArtifactStore>,
        connectors: Arc<dyn ConnectorDirectory>,
        clock: Arc<dyn Clock>,
        faults: Arc<dyn Faults>,
    ) -> Self {
        Self {
            store,
            artifacts,
            connectors,
            clock,
            faults,
            health: Arc::new(health::HealthNotes::new(COALESCE_SECONDS)),
        }
    }

    fn crash_point(&self, point: CrashPoint) -> Result<(), IngestError> {
        if self.faults.crash_at(point) {
            return Err(IngestError::InjectedCrash(point));
        }
        Ok(())
    }

    /// Ingests one queue message body. `Ok` means acknowledge it; `Err` means let it be retried.
    pub async fn ingest_message(&self, message: &[u8]) -> Result<IngestOutcome, IngestError> {
        let envelope = match DeliveryEnvelope::parse(message) {
            Ok(envelope) => envelope,
            Err(rejection) => return self.reject(message, None, rejection, None).await,
        };
        let span = tracing::info_span!(
            "delivery",
            tenant = %envelope.tenant,
            connector = %envelope.connector,
            delivery_key = %envelope.delivery_key(),
            run_id = field::display(envelope.run.as_ref().map(|r| r.run_id.as_str()).unwrap_or("-")),
            fingerprint = field::Empty,
        );
        async {
            let outcome = match self.ingest_envelope(&envelope).await {
                Ok(outcome) | Err(Failure::Settled(outcome)) => outcome,
                Err(Failure::Refused(rejection)) => {
                    self.reject(message, Some(&envelope), rejection, None)
                        .await?
                }
                Err(Failure::RefusedClaimedBody(rejection, body)) => {
                    self.reject(message, Some(&envelope), rejection, Some(&body))
                        .await?
                }
                Err(Failure::Transient(error)) => return Err(error),
            };
            self.note_settled(&envelope, &outcome).await;
            Ok(outcome)
        }
        .instrument(span)
        .await
    }

    /// Quarantines a message whose handling panicked (`internal_error`), with the message as
    /// its evidence, so that it is kept and acknowledged instead of failing again on every
    /// receive. The entry's id is the message's: a redelivery files the same entry.
    pub async fn quarantine_internal_error(
        &self,
        message: &[u8],
        panic: &str,
    ) -> Result<IngestOutcome, IngestError> {
        let envelope = DeliveryEnvelope::parse(message).ok();
        let rejection = Rejection::new(
            RejectCode::InternalError,
            format!("handling the message failed on a defect of ours ({panic}); kept as evidence"),
        );
        let outcome = self
            .reject(message, envelope.as_ref(), rejection, None)
            .await?;
        if let Some(envelope) = &envelope {
            self.note_settled(envelope, &outcome).await;
        }
        Ok(outcome)
    }

    async fn ingest_envelope(&self, envelope: &DeliveryEnvelope) -> Result<IngestOutcome, Failure> {
        let delivery = self.prepare(envelope).await?;
        tracing::Span::current().record("fingerprint", field::display(&delivery.fingerprint));
        self.crash_point(CrashPoint::BeforeArtifact)?;
        let written = self.put_artifact(&delivery).await?;
        self.crash_point(CrashPoint::AfterArtifact)?;
        // Before anything is committed, so that no stored delivery lacks its entry.
        self.quarantine_refused_rows(&delivery).await?;
        // A new object is a fresh delivery (or a changed payload under an old key): go straight
        // to the transaction. An existing one means this payload came before: ask the record.
        let first = match written {
            ArtifactWrite::Created if !delivery.recorded => Step::Fresh(None),
            // The racing writer is about to commit this same payload: give it a moment before
            // the first look, instead of a transaction its commit would cancel.
            ArtifactWrite::Racing => Step::AwaitRacer(0),
            ArtifactWrite::Created | ArtifactWrite::AlreadyStored => {
                Step::Probe(delivery.fingerprint.clone())
            }
        };
        Ok(self.settle(&delivery, first, written).await?)
    }

    /// Connector, body and rows: everything that can refuse the message, before anything is written.
    async fn prepare(&self, envelope: &DeliveryEnvelope) -> Result<Delivery, Failure> {
        let connector = self.owning_connector(envelope).await?;
        // After the ownership check (a refusal that holds whatever the settings say), before
        // any setting is used: the horizon and the size limit of an invalid connector are
        // never applied.
        if let Err(invalid) = connector.validate() {
            error!(error = %invalid, "stored connector configuration is invalid; delivery left for retry");
            return Err(Failure::Transient(invalid.into()));
        }
        let body = self.load_body(envelope, &connector).await?;
        // A byte-identical replay is recognized from the raw bytes before any parsing: the
        // committed record names the payload's sha256, and a payload with that sha256 is the
        // same payload under any rule.
        let payload_sha256 = hex(&sha256(&body));
        let key = envelope.delivery_key();
        let key_text = key.as_string();
        let now = self.clock.now();
        // The source's identity rules come with it: the fresh path needs them next.
        let source = SourceRef {
            tenant: key.tenant.clone(),
            connector: key.connector.clone(),
            source_account: key.source_account.clone(),
        };
        let run = envelope.run.as_ref().map(|r| &r.run_id);
        let ReplayContext {
            hint,
            rules,
            run_publication,
        } = self
            .store
            .replay_context(&key_text, &payload_sha256, &source, run, now)
            .await?;
        if hint == ReplayHint::SamePayload {
            self.settle_byte_identical_replay(&key_text, &payload_sha256, now)
                .await?;
        }
        let refused = |rejection: Rejection| match envelope.body {
            BodyRef::S3 { .. } => Failure::RefusedClaimedBody(rejection, body.clone()),
            BodyRef::Inline { .. } => Failure::Refused(rejection),
        };
        // One parse of the body gives the rows and the fingerprint.
        let read = Reading::of(&connector)
            .read(connector.canonicalization, &body)
            .map_err(refused)?;
        let artifact_key = artifact_key(&key, &payload_sha256);
        Ok(Delivery {
            envelope: envelope.clone(),
            connector,
            key,
            key_text,
            body,
            payload_sha256,
            artifact_key,
            fingerprint: read.fingerprint,
            rows: read.rows,
            refused: read.refused,
            now: self.clock.now(),
            nonce: attempt_nonce(),
            rules,
            run_publication,
            recorded: hint == ReplayHint::Recorded,
        })
    }

    /// The envelope's connector, configured for the envelope's tenant and source account.
    async fn owning_connector(
        &self,
        envelope: &DeliveryEnvelope,
    ) -> Result<ConnectorConfig, Failure> {
        let connector = self
            .connectors
            .connector(&envelope.connector)
            .await?
            .ok_or_else(|| {
                Failure::Refused(Rejection::new(
                    RejectCode::UnknownConnector,
                    format!(
                        "connector {:?} is not configured",
                        envelope.connector.as_str()
                    ),
                ))
            })?;
        if connector.tenant != envelope.tenant
            || connector.source_account != envelope.source_account
        {
            return Err(Failure::Refused(Rejection::new(
                RejectCode::UnknownConnector,
                format!(
                    "connector {:?} is not configured for tenant {:?} and source account {:?}",
                    envelope.connector.as_str(),
                    envelope.tenant.as_str(),
                    envelope.source_account.as_str()
                ),
            )));
        }
        Ok(connector)
    }

    /// A byte-identical replay of a committed delivery: counted on its record and answered from
    /// it (`Failure::Settled`). A stale read (the record no longer says so) falls through to the
    /// full path.
    async fn settle_byte_identical_replay(
        &self,
        key_text: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<(), Failure> {
        // This check stands where the artifact put stands on the full path: both crash
        // points of that step come before anything is counted.
        self.crash_point(CrashPoint::BeforeArtifact)?;
        self.crash_point(CrashPoint::AfterArtifact)?;
        if let Some(record) = self
            .store
            .count_byte_identical_replay(key_text, payload_sha256, now)
            .await?
        {
            info!(
                attempts = record.attempts,
                "byte-identical replay: stored result returned"
            );
            return Err(Failure::Settled(IngestOutcome::Replayed(
                DeliveryResult::of(&record),
            )));
        }
        Ok(())
    }

    async fn load_body(
        &self,
        envelope: &DeliveryEnvelope,
        connector: &ConnectorConfig,
    ) -> Result<Vec<u8>, Failure> {
        let limit = connector.max_body_bytes;
        let too_large = |size: u64| {
            Failure::Refused(Rejection::new(
                RejectCode::PayloadTooLarge,
                format!("body of {size} bytes exceeds the connector's limit of {limit} bytes"),
            ))
        };
        match &envelope.body {
            BodyRef::Inline { base64 } => {
                let body = base64_decode(base64).ok_or_else(|| {
                    Failure::Refused(Rejection::new(
                        RejectCode::InvalidEnvelope,
                        "body.inline.base64 is not valid base64",
                    ))
                })?;
                if body.len() as u64 > limit {
                    return Err(too_large(body.len() as u64));
                }
                Ok(body)
            }
            BodyRef::S3 {
                bucket,
                key,
                version_id,
                size,
            } => {
                if *size > limit {
                    return Err(too_large(*size));
                }
                match self
                    .artifacts
                    .fetch(bucket, key, version_id.as_deref(), limit)
                    .await
                {
                    Ok(body) => Ok(body),
                    Err(ArtifactError::TooLarge { size, .. }) => Err(too_large(size)),
                    Err(other) => Err(other.into()),
                }
            }
        }
    }

    /// Drives the delivery to a final outcome, starting from `first`.
    async fn settle(
        &self,
        d: &Delivery,
        first: Step,
        written: ArtifactWrite,
    ) -> Result<IngestOutcome, IngestError> {
        let mut progress = Progress::after(written, d.recorded);
        let mut round = 0;
        let mut step = first;
        loop {
            round += 1;
            if round > MAX_ROUNDS {
                warn!("delivery stayed contended; handing it back to the queue");
                return Err(IngestError::Contended(d.key_text.clone()));
            }
            step = match step {
                Step::Done(outcome) => return Ok(outcome),
                Step::Probe(expected) => self.probe(d, expected, &mut progress).await?,
                Step::Fresh(replacing) => self.fresh(d, replacing, None, &mut progress).await?,
                Step::FreshAfterDeletedRecord(epoch) => {
                    self.fresh(d, None, Some(epoch), &mut progress).await?
                }
                Step::FindEpoch(taken) => self.find_free_epoch(d, taken).await?,
                Step::Resume(record) => {
                    self.verify_once(d, &mut progress.verified, progress.put_raced)
                        .await?;
                    self.resume(d, record).await?
                }
                Step::Backoff => {
                    tokio::time::sleep(backoff(round, &d.key_text)).await;
                    Step::Probe(d.fingerprint.clone())
                }
                Step::AwaitRacer(n) => {
                    progress.waited_for_racer = n + 1;
                    tokio::time::sleep(backoff(n + 1, &d.key_text)).await;
                    Step::Probe(d.fingerprint.clone())
                }
            };
        }
    }

    /// Looks at the record under the key (counting this message's attempt on it, once) and
    /// answers from what stands there.
    async fn probe(
        &self,
        d: &Delivery,
        expected: Fingerprint,
        progress: &mut Progress,
    ) -> Result<Step, IngestError> {
        let probe = self
            .store
            .record_attempt(&d.key_text, &expected, !progress.counted, d.now)
            .await?;
        Ok(match probe {
            AttemptProbe::Absent if progress.waited_for_racer < progress.racer_waits => {
                Step::AwaitRacer(progress.waited_for_racer)
            }
            AttemptProbe::Absent => Step::Fresh(None),
            AttemptProbe::Contended => Step::Backoff,
            AttemptProbe::Expired(old) => Step::Fresh(Some(old)),
            // A committed record points at an artifact verified before it committed.
            AttemptProbe::Matches(record) => {
                progress.counted = true;
                matched(record)
            }
            AttemptProbe::Differs(record) => self.differs(d, &record, progress).await?,
        })
    }

    /// A record of another fingerprint: the same payload under the rule recorded with it
    /// (probed again under that rule), or a changed payload to quarantine.
    async fn differs(
        &self,
        d: &Delivery,
        record: &ReplayRecord,
        progress: &mut Progress,
    ) -> Result<Step, IngestError> {
        let received = self.received_fingerprint(d, record).await?;
        if received == record.fingerprint {
            // Same payload under the rule recorded with the original.
            return Ok(Step::Probe(received));
        }
        self.verify_once(d, &mut progress.verified, progress.put_raced)
            .await?;
        Ok(Step::Done(
            self.quarantine_mismatch(d, record, received).await?,
        ))
    }

    /// Stores the payload as new, over nothing, over the `replacing` expired record or beyond
    /// the `after_deleted_record` epoch, once its artifact is verified.
    async fn fresh(
        &self,
        d: &Delivery,
        replacing: Option<ReplayRecord>,
        after_deleted_record: Option<u32>,
        progress: &mut Progress,
    ) -> Result<Step, IngestError> {
        self.verify_once(d, &mut progress.verified, progress.put_raced)
            .await?;
        let next = self.store_fresh(d, replacing, after_deleted_record).await?;
        progress.counted |= created_the_record(&next);
        Ok(next)
    }

    /// Observation ids of epoch `taken` exist although no record does (deleted by TTL): the
    /// first later epoch whose first id is free.
    async fn find_free_epoch(&self, d: &Delivery, taken: u32) -> Result<Step, IngestError> {
        let mut epoch = taken + 1;
        while self
            .store
            .observation_exists(&ObservationId::derive(&d.key, epoch, 0))
            .await?
        {
            epoch += 1;
        }
        warn!(epoch, "observation ids of earlier epochs exist without a replay record: stored beyond the horizon");
        Ok(Step::FreshAfterDeletedRecord(epoch))
    }

    /// The observations of `rows` under `record`. Each row is attributed to the item the
    /// source's identity rules give it (the observation then carries the correction's id; the
    /// row's own item stays in `normalized_item`, its sku in `source_record`). A row observed
    /// more than the connector's clock-skew tolerance after its retrieval is flagged
    /// `future_dated` (kept, never current). Every observation carries the time its delivery
    /// was first recorded (`delivery_recorded_at`, the same for every chunk and attempt of the
    /// epoch), which orders it among claims observed at the same instant.
    fn observations(
        &self,
        record: &ReplayRecord,
        rows: &[NormalizedRow],
        d: &Delivery,
    ) -> Vec<Observation> {
        let (connector, rules, now) = (&d.connector, &d.rules, d.now);
        let latest_plausible = record
            .retrieved_at
            .plus_seconds(i64::from(connector.clock_skew_seconds));
        let attributed = |row: &NormalizedRow| match rules.rule_for(&row.item.key()) {
            Some(rule) if rule.to_item != row.item => {
                (rule.to_item.clone(), Some(rule.correction_id.clone()))
            }
            _ => (row.item.clone(), None),
        };
        rows.iter()
            .zip(&record.observation_ids)
            .enumerate()
            .map(|(index, (row, id))| (index, row, id, attributed(row)))
            .map(|(index, row, id, (item, correction_id))| Observation {
                observation_id: id.clone(),
                tenant: record.tenant.clone(),
                item: item.key(),
                canonical_item: item,
                connector: record.connector.clone(),
                source_account: record.source_account.clone(),
                source_record: row.source_record.clone(),
                delivery_key: record.delivery_key.clone(),
                identity_strength: record.identity_strength,
                epoch: record.epoch,
                row_index: index as u32,
                quantity: row.quantity.clone(),
                quantity_basis: row.quantity_basis.clone(),
                quantity_places: row.quantity_places,
                price: row.price.clone(),
                currency: row.currency.clone(),
                terms: row.terms.clone(),
                observed_at: row.observed_at,
                retrieved_at: record.retrieved_at,
                run_id: record.run.as_ref().map(|r| r.run_id.clone()),
                run_publication: record.run.as_ref().and(d.run_publication),
                derivation: Some(Derivation::now(record.connector_version)),
                artifact_key: record.artifact_key.clone(),
                artifact_sha256: record.payload_sha256.clone(),
                dedup_confidence: record.dedup_confidence,
                staged: record.chunks_total > 1,
                claim: CLAIM_SOURCE_REPORTED.to_owned(),
                verification: VERIFICATION_UNVERIFIED.to_owned(),
                superseded_by: None,
                supersedes: None,
                correction_id,
                normalized_item: Some(row.item.key()),
                recorded_at: Some(now),
                delivery_recorded_at: Some(record.first_attempt_at),
                future_dated: row.observed_at > latest_plausible,
            })
            .collect()
    }
}

/// What one message's attempt has learned on its way to a final outcome.
struct Progress {
    /// The artifact was created or verified in this attempt.
    verified: bool,
    /// The artifact put raced another writer's (S3's 409).
    put_raced: bool,
    /// The artifact is going there, or there, but no record was when we looked: most likely
    /// another worker is uploading or committing this payload right now (or one died after
    /// its put). An upload in flight gets the long wait; a stored artifact the short one.
    racer_waits: u32,
    /// While the racing writer's record is not visible yet, wait for it a few times before
    /// storing the payload ourselves: a transaction its commit would cancel is billed in
    /// full. A writer that died after its put costs its redelivery the short waits.
    waited_for_racer: u32,
    /// One attempt per message: once this message is counted on the record (by a probe, or
    /// by creating the record with `attempts: 1`), later probes only look.
    counted: bool,
}

impl Progress {
    /// Before the first step, after the artifact put answered `written`.
    fn after(written: ArtifactWrite, recorded: bool) -> Self {
        Self {
            verified: written == ArtifactWrite::Created,
            put_raced: written == ArtifactWrite::Racing,
            racer_waits: match written {
                ArtifactWrite::Racing => RACING_WAITS,
                ArtifactWrite::AlreadyStored if !recorded => STORED_WAITS,
                _ => 0,
            },
            waited_for_racer: 0,
            counted: false,
        }
    }
}

/// A record of this payload: its stored result once `COMMITTED`; while `PENDING`, the rest of
/// its chunks and the commit.
fn matched(record: ReplayRecord) -> Step {
    match record.state {
        ReplayState::Committed => {
            info!(
                attempts = record.attempts,
                "replayed: stored result returned"
            );
            Step::Done(IngestOutcome::Replayed(DeliveryResult::of(&record)))
        }
        ReplayState::Pending => Step::Resume(record),
    }
}

/// After `store_fresh`: whether this attempt's create transaction wrote the record (with
/// `attempts: 1`), which counts the message.
fn created_the_record(next: &Step) -> bool {
    matches!(
        next,
        Step::Resume(_) | Step::Done(IngestOutcome::Committed(_))
    )
}

/// Exponential backoff with jitter derived from the key and the clock, capped at ~200 ms.
pub(super) fn backoff(round: u32, key: &str) -> Duration {
    let base = 5u64 << round.min(5);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let noise = u64::from(sha256(format!("{key}{nanos}").as_bytes())[0]);
    Duration::from_millis(base + noise % (base + 1))
}
