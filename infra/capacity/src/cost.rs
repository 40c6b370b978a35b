//! What each delivery, stream batch and read costs, and where it lands. Keys come from the
//! product's own key functions and item sizes from its own item builders
//! (`observation_item`, `replay_item`, `run_page_item`, `quarantine_item`, the projection
//! `row_item`), measured with DynamoDB's size rules.

use crate::tally::{hash_key, Limit, Tally};
use crate::workload::{item_key, Delivery, Kind, Outcome, World};
use feedsafe::aws::dynamo::{
    commit_marker_pk, correction_pk, item_history_pk, observation_item, observation_pk,
    open_runs_pk, projection_work_pk, quarantine_item, quarantine_list_pk, quarantine_pk,
    replay_item, replay_pk, run_page_item, run_pk, source_quarantine_pk,
};
use feedsafe::aws::operator_records::{rules_pk, supersession_sk, SETTLING_PK};
use feedsafe::aws::projection_table::{row_item, row_pk};
use feedsafe::domain::connector::PayloadFormat;
use feedsafe::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use feedsafe::domain::hashing::sha256_hex;
use feedsafe::domain::ids::{IdentityStrength, ObservationId, RunId};
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::model::{
    CorrectionKind, DedupConfidence, Observation, QuarantineEntry, ReplayRecord, ReplayState,
    RunPageRecord, CLAIM_SOURCE_REPORTED, VERIFICATION_UNVERIFIED,
};
use feedsafe::domain::money::Price;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::intake::claim_key;
use feedsafe::intake::drops::DROPS_PREFIX;
use feedsafe::protocols::ingest::{artifact_key, chunk_plan, parallel_chunks, rejected_key};
use feedsafe::protocols::projection::{ProjectedOffer, INLINE_BUDGET, WORK_SLICE};
use projector::RowKeys;
use std::collections::{BTreeSet, HashMap, HashSet};

mod fresh;
mod operator;
mod partitions;
mod projector;
mod records;
mod units;
pub use partitions::{source_partition, source_partitions};
use records::quarantine;
pub use units::{item_size, rcu, wcu};

pub mod patterns;
use patterns as pat;

/// How the `by_source` partition key reads in the report.
pub const SOURCE_KEY_PATTERN: &str = "SRC#{tenant}#{connector}#{account}#{shard}";

const DB: Limit = Limit::DynamoPartition;
const S3: Limit = Limit::S3Prefix;

pub mod latency;

/// Sizes of the small records the simulation does not build (bytes; each is under 1 KB).
const RULES_BYTES: usize = 3_500;
const RUN_ITEM_BYTES: usize = 500;
const SMALL_RECORD_BYTES: usize = 300;
const HISTORY_PAGE: usize = 50;

/// The part of an S3 key before its first content-derived component: S3 cannot spread one
/// supplier's requests below it until it has split the keyspace under it.
fn s3_stem(key: &str, components: usize) -> String {
    let mut out = String::new();
    for part in key.split('/').take(components) {
        out.push_str(part);
        out.push('/');
    }
    out
}

/// A payload digest that differs for a mismatch (another payload under the same key).
fn payload_digest(key_text: &str, outcome: Outcome) -> String {
    sha256_hex(
        format!(
            "{key_text}\n{}",
            if outcome == Outcome::Mismatch {
                "changed"
            } else {
                "original"
            }
        )
        .as_bytes(),
    )
}

fn price() -> Price {
    Price::parse("820.00").unwrap_or_else(|e| panic!("a literal price parses: {e}"))
}

/// The stream record of an evidence-table write the projector's filter lets through.
#[derive(Debug, Clone)]
pub struct StreamRecord {
    pub at: f64,
    /// Hash of the record's table partition key: its stream shard and its concurrent batch.
    pub partition: u64,
    pub change: Change,
}

#[derive(Debug, Clone)]
pub enum Change {
    /// An observation's INSERT (unstaged: a candidate; staged: not committed yet).
    Observation {
        delivery: u32,
        row: u32,
    },
    /// A replay record written or counted that means nothing to the projection.
    Replay,
    /// A staged delivery's record reached COMMITTED.
    Committed {
        delivery: u32,
    },
    /// A projection work record (a slice of a committed delivery).
    Work {
        delivery: u32,
        start: u32,
        end: u32,
        deferrals: u32,
    },
    RunPage {
        run: RunId,
    },
}

/// What the projector needs to know about a stored delivery.
struct Stored {
    supplier: usize,
    key: String,
    rows: Vec<usize>,
    staged: bool,
    run: Option<RunId>,
}

#[derive(Default, Debug, Clone)]
pub struct LambdaLoad {
    /// Seconds of ingest work started in the window (Little's law: over the window's length,
    /// the mean concurrency).
    pub ingest_busy: f64,
    pub ingest_longest: f64,
    pub ingest_messages: usize,
    pub webhooks: usize,
    pub reads: usize,
    pub projector_busy: f64,
    pub projector_batches: usize,
    pub projector_records: usize,
    pub projector_processors: usize,
    /// The busiest concurrent batch processor's share of the window spent working.
    pub projector_busiest_utilisation: f64,
    pub projector_lag_seconds: f64,
    pub lost_races: usize,
    pub largest_replay_record: usize,
    /// Sizes (bytes) of the observation and projection row items of supplier 0.
    pub hot_supplier_items: (usize, usize),
}

pub struct Sim<'w> {
    pub world: &'w World,
    pub tally: Tally,
    pub load: LambdaLoad,
    pub stream: Vec<StreamRecord>,
    stored: Vec<Stored>,
    /// Per supplier: the size of one of its observation items and of one of its rows.
    sizes: HashMap<usize, (usize, usize)>,
    rows: HashMap<u64, u32>,
    row_keys: Vec<RowKeys>,
    epoch_time: Timestamp,
    seen_runs: HashSet<RunId>,
}

impl<'w> Sim<'w> {
    pub fn new(world: &'w World) -> Self {
        Self {
            world,
            tally: Tally::default(),
            load: LambdaLoad::default(),
            stream: Vec::new(),
            stored: Vec::new(),
            sizes: HashMap::new(),
            rows: HashMap::new(),
            row_keys: Vec::new(),
            epoch_time: Timestamp::parse("2026-12-01T08:00:00Z")
                .unwrap_or_else(|e| panic!("a literal timestamp parses: {e}")),
            seen_runs: HashSet::new(),
        }
    }

    fn observation(
        &self,
        d: &Delivery,
        row: usize,
        staged: bool,
        artifact: &str,
        sha: &str,
    ) -> Observation {
        let supplier = &self.world.suppliers[d.supplier];
        let item = item_key(supplier.tenant_index, d.rows[row]);
        let canonical = CanonicalItem::parse_key(&item)
            .unwrap_or_else(|e| panic!("a generated item key parses: {e}"));
        Observation {
            observation_id: ObservationId::derive(&d.key, 0, row),
            tenant: supplier.tenant.clone(),
            canonical_item: canonical.clone(),
            connector: supplier.connector.clone(),
            source_account: supplier.account.clone(),
            source_record: canonical.part_number.clone(),
            delivery_key: d.key.as_string(),
            identity_strength: IdentityStrength::Source,
            epoch: 0,
            row_index: row as u32,
            quantity: 6.into(),
            quantity_basis: "each".into(),
            quantity_places: 0,
            price: price(),
            currency: "EUR".into(),
            terms: Default::default(),
            observed_at: self.epoch_time,
            retrieved_at: self.epoch_time,
            run_id: match &d.kind {
                Kind::Page { run, .. } => Some(run.clone()),
                _ => None,
            },
            run_publication: None,
            derivation: None,
            artifact_key: artifact.to_owned(),
            artifact_sha256: sha.to_owned(),
            dedup_confidence: DedupConfidence::WithinHorizon,
            staged,
            claim: CLAIM_SOURCE_REPORTED.into(),
            verification: VERIFICATION_UNVERIFIED.into(),
            superseded_by: None,
            supersedes: None,
            correction_id: None,
            normalized_item: Some(item.clone()),
            recorded_at: Some(self.epoch_time),
            delivery_recorded_at: Some(self.epoch_time),
            future_dated: false,
            item,
        }
    }

    fn record(&self, d: &Delivery, artifact: &str, sha: &str) -> ReplayRecord {
        let supplier = &self.world.suppliers[d.supplier];
        let chunks = chunk_plan(d.rows.len()).len() as u32;
        let fingerprint = Fingerprint {
            rule: CanonicalizationRule::JsonV1,
            sha256_hex: sha.to_owned(),
        };
        ReplayRecord {
            delivery_key: d.key.as_string(),
            tenant: supplier.tenant.clone(),
            connector: supplier.connector.clone(),
            source_account: supplier.account.clone(),
            source_delivery_id: d.key.source_delivery_id.clone(),
            identity_strength: IdentityStrength::Source,
            identity_basis: "cloud_event".into(),
            state: if chunks > 1 {
                ReplayState::Pending
            } else {
                ReplayState::Committed
            },
            fingerprint,
            payload_format: PayloadFormat::AcmeExportV1,
            payload_sha256: sha.to_owned(),
            artifact_key: artifact.to_owned(),
            content_type: "application/json".into(),
            observation_ids: (0..d.rows.len())
                .map(|i| ObservationId::derive(&d.key, 0, i))
                .collect(),
            chunks_total: chunks,
            chunks_done: 1,
            epoch: 0,
            attempts: 1,
            first_attempt_at: self.epoch_time,
            last_attempt_at: self.epoch_time,
            retrieved_at: self.epoch_time,
            committed_at: (chunks == 1).then_some(self.epoch_time),
            expires_at: self.epoch_time.unix_seconds() + 30 * 86_400,
            run: match &d.kind {
                Kind::Page {
                    run,
                    page,
                    page_count,
                } => Some(feedsafe::domain::envelope::RunPage {
                    run_id: run.clone(),
                    page: *page,
                    page_count: Some(*page_count),
                }),
                _ => None,
            },
            dedup_confidence: DedupConfidence::WithinHorizon,
            previous_epoch: None,
            connector_version: None,
        }
    }

    fn replay_bytes(&mut self, record: &ReplayRecord) -> usize {
        let bytes = item_size(
            &replay_item(record).unwrap_or_else(|e| panic!("a replay record encodes: {e}")),
        );
        self.load.largest_replay_record = self.load.largest_replay_record.max(bytes);
        bytes
    }

    /// One delivery through the ingest function: every request, in order, at the time it is
    /// sent.
    pub fn ingest(&mut self, d: &Delivery) {
        use latency::*;
        let body = d.body_bytes(&self.world.params);
        let kib = body as f64 / 1024.0;
        let t = d.at + (CPU_BASE + CPU_PER_KIB * kib) / 1000.0;
        let key_text = d.key.as_string();
        self.load.ingest_messages += 1;
        if matches!(d.kind, Kind::Webhook) {
            self.load.webhooks += 1;
        }
        self.record_run(d);
        let mut t = self.read_body(d, body, &key_text, t);
        let sha = payload_digest(&key_text, d.outcome);
        if d.outcome == Outcome::Rejected {
            let t = self.reject(d, &key_text, kib, t);
            self.finish_ingest(d, t);
            return;
        }
        let artifact = artifact_key(&d.key, &sha);
        self.tally
            .write(pat::RAW, S3, &s3_stem(&artifact, 3), t, 1.0);
        t += (S3_PUT + S3_PER_KIB * kib) / 1000.0;
        let t = match d.outcome {
            Outcome::Replay => self.count_replay(d, &artifact, &sha, t),
            Outcome::Mismatch => self.refuse_mismatch(d, &artifact, &sha, t),
            Outcome::Fresh => self.store_fresh(d, &artifact, &sha, t),
            Outcome::Rejected => unreachable!("handled above"),
        };
        self.finish_ingest(d, t);
    }

    /// The poller recorded the run before enqueuing its first page.
    fn record_run(&mut self, d: &Delivery) {
        if let Kind::Page { run, .. } = &d.kind {
            if d.outcome == Outcome::Fresh && self.seen_runs.insert(run.clone()) {
                let at = (d.at - 0.5).max(0.0);
                self.tally
                    .write(pat::RUN, DB, &run_pk(run.as_str()), at, wcu(RUN_ITEM_BYTES));
                self.tally.write(
                    pat::OPEN_RUNS,
                    DB,
                    &open_runs_pk(run.as_str()),
                    at,
                    wcu(RUN_ITEM_BYTES),
                );
            }
        }
    }

    /// The body: inline, claim-checked by its producer, or a dropped file. Returns when ingest
    /// has it.
    fn read_body(&mut self, d: &Delivery, body: usize, key_text: &str, mut t: f64) -> f64 {
        use latency::*;
        let kib = body as f64 / 1024.0;
        match &d.kind {
            Kind::Drop { file } => {
                let connector = &self.world.suppliers[d.supplier].connector;
                let key = format!("{DROPS_PREFIX}{connector}/{file}");
                // The supplier's own upload, then ingest's read.
                self.tally
                    .write(pat::DROPS, S3, &s3_stem(&key, 2), d.at, 1.0);
                self.tally.read(pat::DROPS, S3, &s3_stem(&key, 2), t, 1.0);
                t += (S3_GET + S3_PER_KIB * kib) / 1000.0;
            }
            _ if body > feedsafe::domain::envelope::MAX_INLINE_BODY_BYTES => {
                let key = claim_key(&d.key, &sha256_hex(key_text.as_bytes()));
                self.tally
                    .write(pat::CLAIMS, S3, &s3_stem(&key, 3), d.at, 1.0);
                self.tally.read(pat::CLAIMS, S3, &s3_stem(&key, 3), t, 1.0);
                t += (S3_GET + S3_PER_KIB * kib) / 1000.0;
            }
            _ => {}
        }
        t
    }

    /// A rejected delivery: its evidence, then its quarantine entry.
    fn reject(&mut self, d: &Delivery, key_text: &str, kib: f64, mut t: f64) -> f64 {
        use latency::*;
        let tenant = self.world.suppliers[d.supplier].tenant.as_str();
        let message = sha256_hex(format!("message\n{key_text}").as_bytes());
        let evidence = rejected_key(tenant, &message);
        self.tally
            .write(pat::REJECTED, S3, &s3_stem(&evidence, 2), t, 1.0);
        t += (S3_PUT + S3_PER_KIB * kib) / 1000.0;
        let entry = quarantine(d, &evidence, &message, None, self.epoch_time);
        self.put_quarantine(&entry, t);
        t + WRITE_ITEM / 1000.0
    }

    /// A replay: 412 on the artifact, then one conditional UpdateItem counts the attempt.
    fn count_replay(&mut self, d: &Delivery, artifact: &str, sha: &str, mut t: f64) -> f64 {
        use latency::*;
        let replay = replay_pk(&d.key.as_string());
        let record = self.record(d, artifact, sha);
        let bytes = self.replay_bytes(&record);
        self.tally.write(pat::REPLAY, DB, &replay, t, wcu(bytes));
        t += WRITE_ITEM / 1000.0;
        self.stream.push(StreamRecord {
            at: t,
            partition: hash_key(&replay),
            change: Change::Replay,
        });
        t
    }

    /// Another payload under a stored key: the create transaction is refused by the record's
    /// condition (a refused write still costs its units), then the quarantine entry.
    fn refuse_mismatch(&mut self, d: &Delivery, artifact: &str, sha: &str, mut t: f64) -> f64 {
        use latency::*;
        let source = &self.world.suppliers[d.supplier].source;
        self.tally.read(pat::RULES, DB, &rules_pk(source), t, 1.0);
        t += GET_ITEM / 1000.0;
        let record = self.record(d, artifact, sha);
        let bytes = self.replay_bytes(&record);
        let replay = replay_pk(&d.key.as_string());
        self.tally
            .write(pat::REPLAY, DB, &replay, t, 2.0 * wcu(bytes));
        t += TRANSACTION / 1000.0;
        let entry = quarantine(d, artifact, sha, Some(&record), self.epoch_time);
        self.put_quarantine(&entry, t);
        t + WRITE_ITEM / 1000.0
    }

    fn finish_ingest(&mut self, d: &Delivery, t: f64) {
        let duration = t - d.at;
        self.load.ingest_busy += duration;
        self.load.ingest_longest = self.load.ingest_longest.max(duration);
    }

    fn put_quarantine(&mut self, entry: &QuarantineEntry, t: f64) {
        let bytes =
            item_size(&quarantine_item(entry).unwrap_or_else(|e| panic!("an entry encodes: {e}")));
        self.tally.write(
            pat::QUARANTINE,
            DB,
            &quarantine_pk(&entry.quarantine_id),
            t,
            wcu(bytes),
        );
        self.tally.write(
            pat::QUARANTINE_LIST,
            DB,
            &quarantine_list_pk(&entry.tenant),
            t,
            wcu(bytes),
        );
    }

    /// Readers: offers, history and single observations of popular items, at `scale` times the
    /// peak reader rates.
    pub fn reads_scaled(&mut self, rng: &mut crate::rng::Rng, seconds: f64, scale: f64) {
        let world = self.world;
        let p = &world.params;
        let sample_obs = 1_100;
        let sample_row = 1_800;
        let per_second =
            p.offers_reads_per_second + p.history_reads_per_second + p.observation_reads_per_second;
        for _ in 0..(per_second * seconds * scale).round() as usize {
            let at = rng.unit() * seconds;
            let s = world.pick_supplier(rng);
            let supplier = &world.suppliers[s];
            let index = supplier.popular_item(rng);
            let item = item_key(supplier.tenant_index, index);
            let tenant = supplier.tenant.as_str();
            let sources: Vec<usize> = world.sources_of(supplier.tenant_index, index).collect();
            let kind = rng.unit() * per_second;
            if kind < p.offers_reads_per_second {
                self.tally.read(
                    pat::ROWS,
                    DB,
                    &row_pk(tenant, &item),
                    at,
                    rcu(sources.len() * sample_row, true),
                );
            } else if kind < p.offers_reads_per_second + p.history_reads_per_second {
                self.tally.read(
                    pat::ITEM_HISTORY,
                    DB,
                    &item_history_pk(tenant, &item),
                    at,
                    rcu(HISTORY_PAGE * sample_obs, false),
                );
            } else {
                let id = ObservationId::derive_for(&format!("{tenant}/{item}"), 0, 0);
                self.tally
                    .read(pat::OBSERVATION, DB, &observation_pk(id.as_str()), at, 1.0);
            }
            // Every route checks the live quarantine and rules of each source it shows.
            for source in sources {
                let source = &world.suppliers[source].source;
                self.tally.read(
                    pat::SOURCE_QUARANTINE,
                    DB,
                    &source_quarantine_pk(source),
                    at,
                    1.0,
                );
                self.tally.read(pat::RULES, DB, &rules_pk(source), at, 1.0);
            }
            self.load.reads += 1;
        }
    }
}

/// Size of a keys-only index entry: the table's key, the index's key (attribute names `pk`,
/// `sk`, `source_key`, `item` and their values) and DynamoDB's 100 bytes of index overhead.
fn keys_only_bytes(values: &[&str; 4]) -> usize {
    let names = "pk".len() + "sk".len() + "source_key".len() + "item".len();
    names + values.iter().map(|v| v.len()).sum::<usize>() + 100
}

/// The projector's DynamoDB stream event source settings (read from `template.yaml`).
#[derive(Debug, Clone)]
pub struct StreamSettings {
    pub batch_size: usize,
    pub batching_window: f64,
    pub parallelization_factor: usize,
}
