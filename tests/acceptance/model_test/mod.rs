//! The model-based test (docs/crash-points.md, "The rest of the proof"): random histories of
//! deliveries (fresh, exact and re-serialized replays, mutations, reordered rows under each rule,
//! the same content under a new id, late backfills and claims from the future, staged deliveries),
//! crashes at every declared crash point, concurrent duplicates (2-16 workers, including resumes of
//! a pending staged delivery racing each other), the dedup horizon passing, identity corrections
//! and withdrawals, source quarantines set and lifted, quarantine resolutions, verifications of
//! current claims (expiring after 30 of the model's days), stream redelivery and rebuilds. Each
//! history runs against the real adapters on DynamoDB Local and moto (tables of its own); after
//! every step what the system shows through its own read paths (offers with their verification
//! state, history, the delivery's record, the quarantine list) must equal what the reference
//! model (`tests/model`) says; and at an as-of step, the offers and history as of the end of an
//! earlier step must equal what the model said then.
//!
//! `FEEDSAFE_MODEL_CASES=N` runs N histories in all, spread over the lanes below (16 under a
//! plain `cargo test`, 300 under `scripts/test`).
//! On a failure proptest shrinks the history (`PROPTEST_MAX_SHRINK_ITERS`, default 64 here: each
//! try replays against the engines), prints the minimal failing history and appends its seed
//! (`cc <hex>`) to `tests/proptest-regressions/model_test/mod.txt`, which is re-run first on every
//! later run; commit it. A failure that is a product defect also becomes a plain test replaying
//! the minimal history.

use acceptance::model::{delivery_key, Ids, Layout, Model, Outcome, Payload, Row, Source};
use acceptance::*;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::envelope::DeliveryEnvelope;
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::ids::{ConnectorId, SourceAccount};
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::model::{CorrectionKind, SourceRef};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::ops::{handle_ops, OpsRequest, OpsService, RawArchive};
use feedsafe::protocols::identity_corrections::{
    CorrectionError, CorrectionRequest, CorrectionService,
};
use feedsafe::protocols::ingest::{IngestOutcome, IngestService};
use feedsafe::protocols::ports::{Clock, CrashPoint, Faults, NoFaults};
use feedsafe::protocols::projection::{ProjectionKey, ProjectionStore, Projector};
use feedsafe::protocols::query::{Principal, QueryService};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

mod checks;
use checks::ExpectedView;
mod histories;
mod steps;
use histories::*;

/// The parts the histories talk about (filler rows of staged deliveries use others). The last
/// is the longest part number accepted (96 characters), with every mark a part number may carry
/// (docs/adr/0012-supported-ranges-of-stored-values.md).
const PARTS: [&str; 3] = ["MX-1", "MX-2", "MX.3_+#-9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999"];
/// The model's minute 0.
const BASE: &str = "2026-11-29T12:00:00Z";

fn base() -> Timestamp {
    Timestamp::parse(BASE).expect("base time")
}

/// The system's pure id functions, which the model uses to name observations.
struct SystemIds;

impl Ids for SystemIds {
    fn observation_id(&self, delivery_key: &str, epoch: u32, index: usize) -> String {
        feedsafe::domain::ids::ObservationId::derive_for(delivery_key, epoch, index).to_string()
    }
    fn superseding_id(&self, old: &str, correction: &str) -> String {
        feedsafe::domain::ids::ObservationId::derive_superseding(
            &feedsafe::domain::ids::ObservationId::parse(old).expect("observation id"),
            correction,
        )
        .to_string()
    }
    fn correction_id(
        &self,
        source: Source,
        from: &str,
        to: &str,
        replaces: Option<&str>,
    ) -> String {
        let kind = if from == to {
            CorrectionKind::Withdraw
        } else {
            CorrectionKind::Correct
        };
        feedsafe::protocols::identity_corrections::correction_id(
            &source_ref(source),
            &item_key(from),
            &CanonicalItem::parse_key(to).expect("item"),
            kind,
            replaces,
        )
    }
    fn observed_at(&self, minute: i64) -> String {
        base().plus_seconds(minute * 60).to_rfc3339()
    }
}

/// The projection keys of the pool parts, every source.
fn pool_keys() -> Vec<ProjectionKey> {
    PARTS
        .iter()
        .flat_map(|part| {
            Source::ALL.into_iter().map(move |source| ProjectionKey {
                item: item_key(part),
                source: source_ref(source),
            })
        })
        .collect()
}

fn item_key(part: &str) -> String {
    CanonicalItem::parse_key(part).expect("item").key()
}

fn source_ref(source: Source) -> SourceRef {
    SourceRef {
        tenant: feedsafe::domain::ids::TenantId::parse(TENANT).unwrap(),
        connector: ConnectorId::parse(source.connector()).unwrap(),
        source_account: SourceAccount::parse(source.account()).unwrap(),
    }
}

fn connector_of(source: Source) -> ConnectorConfig {
    ConnectorConfig {
        canonicalization: if source.unordered() {
            CanonicalizationRule::JsonUnorderedRowsV1
        } else {
            CanonicalizationRule::JsonV1
        },
        ..connector(
            source.connector(),
            source.account(),
            feedsafe::domain::connector::Publication::PerPage,
        )
    }
}

/// A clock that starts at the real now and can be moved forward by whole days.
struct DayClock(AtomicI64);

impl Clock for DayClock {
    fn now(&self) -> Timestamp {
        Timestamp::now().plus_seconds(self.0.load(Ordering::SeqCst) * 86_400)
    }
}

/// The system under test: a runtime of its own and the adapters of one history.
struct Harness {
    rt: tokio::runtime::Runtime,
    system: System,
}

/// Histories and steps run so far in this process (all lanes), reported every 50 histories.
static HISTORIES: AtomicUsize = AtomicUsize::new(0);
static STEPS: AtomicUsize = AtomicUsize::new(0);

impl Drop for Harness {
    fn drop(&mut self) {
        // Each history has a DynamoDB Local database of its own; its tables go with it (a
        // failing one keeps them, and nothing here may panic while it unwinds).
        if !std::thread::panicking() {
            self.rt.block_on(self.system.env.delete_tables());
        }
        let histories = HISTORIES.fetch_add(1, Ordering::SeqCst) + 1;
        if histories.is_multiple_of(50) {
            let steps = STEPS.load(Ordering::SeqCst);
            eprintln!("model test: {histories} histories, {steps} steps so far");
        }
        if std::thread::panicking() {
            eprintln!(
                "model test: this history failed; once shrunk, proptest prints the minimal \
                 history and appends its seed to tests/proptest-regressions/model_test/mod.txt"
            );
        }
    }
}

struct System {
    env: TestEnv,
    /// The connectors as the deployed functions look them up (kept 30 s, one cache per
    /// history as a warm instance keeps it); the histories never change a connector.
    connectors: Arc<feedsafe::lambda::CachedConnectors>,
    clock: Arc<DayClock>,
    projector: Projector,
    query: QueryService,
    corrections: CorrectionService,
    ops: OpsService,
    stream: local_stack::events::StreamReader,
    seen: Vec<local_stack::events::StreamRecordImages>,
    last_key: Option<String>,
    /// Each part's view as last compared with the read routes.
    compared: BTreeMap<&'static str, ExpectedView>,
    /// After each step, the instant (the system's clock) and every part's view in the model.
    snapshots: Vec<(Timestamp, BTreeMap<&'static str, ExpectedView>)>,
    rebuilt: Option<Arc<feedsafe::aws::projection_table::DynamoProjectionStore>>,
}

impl System {
    fn service(&self, faults: Arc<dyn Faults>) -> IngestService {
        IngestService::new(
            self.env.store.clone(),
            self.env.artifacts.clone(),
            self.connectors.clone(),
            self.clock.clone(),
            faults,
        )
    }

    fn operator(&self) -> Principal {
        Principal {
            tenant: feedsafe::domain::ids::TenantId::parse(TENANT).unwrap(),
            scopes: vec!["ops:write".into(), "offers:read".into()],
            subject: Some("model-test".into()),
        }
    }

    /// An empty projection table beside the live one (created once per history, emptied before
    /// each rebuild).
    async fn rebuilt_projection(
        &mut self,
    ) -> Arc<feedsafe::aws::projection_table::DynamoProjectionStore> {
        if self.rebuilt.is_none() {
            self.rebuilt = Some(self.env.extra_projection_table().await);
        }
        let rebuilt = self.rebuilt.clone().expect("created");
        for (key, row) in rebuilt.current_many(&pool_keys()).await.unwrap() {
            assert!(rebuilt.remove(&key, &row.basis).await.unwrap());
        }
        rebuilt
    }

    /// Reads the stream until a poll finds nothing new (DynamoDB Local writes a change's stream
    /// record with the change) and projects it in batches of 100, as the event source would.
    async fn project(&mut self) {
        loop {
            let records = self.stream.poll().await.expect("poll stream");
            if records.is_empty() {
                return;
            }
            for batch in records.chunks(100) {
                self.apply_records(batch).await;
            }
            self.seen.extend(records);
        }
    }

    /// Stream records projected in one batch, as one projector invocation would.
    async fn apply_records(&self, batch: &[local_stack::events::StreamRecordImages]) {
        let changes: Vec<_> = batch
            .iter()
            .map(|(n, o, i, _)| {
                feedsafe::aws::stream_records::classify(n, o.clone(), i.clone()).unwrap()
            })
            .collect();
        self.projector.apply_batch(&changes).await.unwrap();
    }

    async fn deliver(
        &mut self,
        source: Source,
        id: &str,
        payload: &Payload,
        mode: &Mode,
        today: i64,
    ) {
        let key = feedsafe::domain::ids::DeliveryKey::new(
            feedsafe::domain::ids::TenantId::parse(TENANT).unwrap(),
            ConnectorId::parse(source.connector()).unwrap(),
            SourceAccount::parse(source.account()).unwrap(),
            feedsafe::domain::ids::SourceDeliveryId::parse(id).unwrap(),
            feedsafe::domain::ids::IdentityStrength::Source,
        );
        let retrieved_at = base().plus_seconds(today * 86_400);
        let envelope = DeliveryEnvelope::inline(
            &key,
            "export_page",
            retrieved_at,
            "application/json",
            None,
            &body(payload),
        )
        .to_json()
        .into_bytes();
        let settled = |o: Result<IngestOutcome, feedsafe::protocols::ingest::IngestError>| match o {
            Ok(IngestOutcome::Rejected(r)) => panic!("rejected: {r:?}"),
            Ok(_) => {}
            Err(e) => panic!("delivery failed: {e}"),
        };
        match mode {
            Mode::Once => settled(
                self.service(Arc::new(NoFaults))
                    .ingest_message(&envelope)
                    .await,
            ),
            Mode::Crash(point) => {
                let _ = self
                    .service(CrashOnce::at(point.crash_point()))
                    .ingest_message(&envelope)
                    .await;
                settled(
                    self.service(Arc::new(NoFaults))
                        .ingest_message(&envelope)
                        .await,
                );
            }
            Mode::Concurrent(n) | Mode::CrashThenRace(n) => {
                if matches!(mode, Mode::CrashThenRace(_)) {
                    // A staged delivery left PENDING, then resumed by racing workers.
                    let _ = self
                        .service(CrashOnce::at(CrashPoint::AfterChunk(1)))
                        .ingest_message(&envelope)
                        .await;
                }
                let mut workers = Vec::new();
                for _ in 0..*n {
                    let service = self.service(Arc::new(NoFaults));
                    let envelope = envelope.clone();
                    workers.push(tokio::spawn(async move {
                        service.ingest_message(&envelope).await
                    }));
                }
                for worker in workers {
                    settled(worker.await.unwrap());
                }
            }
        }
        self.last_key = Some(key.as_string());
    }

    async fn ops(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let response = handle_ops(
            &self.ops,
            OpsRequest {
                method: method.into(),
                path: path.into(),
                query: BTreeMap::from([("status".to_owned(), "all".to_owned())])
                    .into_iter()
                    .collect(),
                principal: Some(self.operator()),
                if_match: None,
                body: if body.is_null() {
                    Vec::new()
                } else {
                    body.to_string().into_bytes()
                },
            },
        )
        .await;
        (
            response.status,
            serde_json::from_str(&response.body).unwrap_or(Value::Null),
        )
    }

    /// The quarantine entries, oldest first: (delivery key, status).
    async fn quarantine(&self) -> Vec<(String, String, String)> {
        let (status, list) = self.ops("GET", "/v1/quarantine", Value::Null).await;
        assert_eq!(status, 200, "{list}");
        list["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["delivery_key"].as_str().unwrap_or_default().to_owned(),
                    e["status"].as_str().unwrap().to_owned(),
                    e["quarantine_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

/// A source quarantine set or lift: done, or refused because it was set (or lifted) already,
/// which a generated history may ask for; anything else (a store failure) fails the history.
fn settled_operation<T>(
    result: Result<T, feedsafe::protocols::source_quarantine::SourceQuarantineError>,
) {
    match result {
        Ok(_)
        | Err(feedsafe::protocols::source_quarantine::SourceQuarantineError::State { .. }) => {}
        Err(e) => panic!("source quarantine operation failed: {e}"),
    }
}

struct ModelTest;

impl StateMachineTest for ModelTest {
    type SystemUnderTest = Harness;
    type Reference = Reference;

    fn init_test(_: &Model) -> Harness {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let system = rt.block_on(async {
            let env = spawn_heavy_env(false, "model").await;
            for source in Source::ALL {
                env.seed(&connector_of(source)).await;
            }
            let clock = Arc::new(DayClock(AtomicI64::new(0)));
            let stream = env.stream().await;
            let projector = env.projector();
            let query = env.query();
            let corrections = CorrectionService::new(
                env.store.clone(),
                env.store.clone(),
                env.store.clone(),
                clock.clone(),
                Arc::new(NoFaults),
            );
            let queue = Arc::new(feedsafe::aws::sqs::SqsDeliveryQueue::new(
                env.clients.sqs.clone(),
                &env.resources.queue("IngestQueue").unwrap().url,
            ));
            let ops = OpsService::new(
                env.store.clone(),
                RawArchive::new(std::sync::Arc::new(
                    feedsafe::aws::s3::S3ArtifactStore::new(env.clients.s3.clone(), &env.bucket),
                )),
                queue,
                None,
                clock.clone(),
            )
            .with_corrections(corrections.clone());
            let connectors = Arc::new(feedsafe::lambda::CachedConnectors::new(
                env.store.clone(),
                std::time::Duration::from_secs(30),
            ));
            System {
                env,
                connectors,
                clock,
                projector,
                query,
                corrections,
                ops,
                stream,
                seen: Vec::new(),
                last_key: None,
                compared: BTreeMap::new(),
                snapshots: Vec::new(),
                rebuilt: None,
            }
        });
        Harness { rt, system }
    }

    fn apply(mut harness: Harness, model: &Model, step: Step) -> Harness {
        STEPS.fetch_add(1, Ordering::SeqCst);
        let Harness { rt, system } = &mut harness;
        rt.block_on(async {
            system.last_key = None;
            match &step {
                Step::Deliver {
                    source,
                    id,
                    payload,
                    mode,
                } => {
                    system
                        .deliver(*source, id, payload, mode, model.today)
                        .await
                }
                Step::AdvanceDays(days) => {
                    system.clock.0.fetch_add(*days, Ordering::SeqCst);
                }
                Step::Correct { source, from, to } => system.correct(*source, *from, *to).await,
                Step::Quarantine(source) => system.set_source_quarantine(*source, true).await,
                Step::Lift(source) => system.set_source_quarantine(*source, false).await,
                Step::Reject(index) => system.resolve(model, *index, false).await,
                Step::Accept(index) => system.resolve(model, *index, true).await,
                Step::RedeliverStream(seed) => system.redeliver_stream(*seed).await,
                Step::Rebuild => system.rebuild().await,
                Step::Verify { source, part } => system.verify(*source, PARTS[*part]).await,
                Step::AsOf(index) => system.check_as_of(*index).await,
            }
            system.project().await;
            system.check(model, &step).await;
            system.snapshot(model);
        });
        harness
    }

    /// Every part compared once more at the end of the history: a view a step left out of its
    /// comparison cannot have drifted unseen.
    fn teardown(mut harness: Harness, model: Model) {
        let Harness { rt, system } = &mut harness;
        rt.block_on(async {
            for part in PARTS {
                system
                    .check_part(&model, part, "at the end of the history")
                    .await;
            }
        });
    }
}

/// Histories in all (`FEEDSAFE_MODEL_CASES`), spread over the lanes. A plain `cargo test` runs a
/// short model test; `scripts/test` sets 300, the number CI runs.
fn cases_per_lane() -> u32 {
    let total: u32 = std::env::var("FEEDSAFE_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    total.div_ceil(LANES)
}

/// A multiple of the usual `--test-threads 4`, so that no thread idles while two lanes finish.
const LANES: u32 = 8;

/// Shrinking replays the history against the engines each time: bounded by default,
/// `PROPTEST_MAX_SHRINK_ITERS` for more.
fn shrink_iters() -> u32 {
    std::env::var("PROPTEST_MAX_SHRINK_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// The kept seeds of `tests/proptest-regressions/model_test/mod.txt`, dealt out over the lanes:
/// proptest hands every test of a source file all of that file's seeds, so without this each
/// of the eight lanes replayed all of them (8 seeds: 64 histories a run, most of them long ones).
/// A new failure in any lane is still appended to the one file.
#[derive(Debug, Clone, PartialEq)]
struct LaneSeeds {
    lane: usize,
    file: proptest::test_runner::FileFailurePersistence,
}

impl LaneSeeds {
    fn of(lane: usize) -> Self {
        LaneSeeds {
            lane,
            file: proptest::test_runner::FileFailurePersistence::SourceParallel(
                "proptest-regressions",
            ),
        }
    }

    fn config(lane: usize) -> ProptestConfig {
        ProptestConfig {
            cases: cases_per_lane(),
            max_shrink_iters: shrink_iters(),
            failure_persistence: Some(Box::new(LaneSeeds::of(lane))),
            ..ProptestConfig::default()
        }
    }
}

impl proptest::test_runner::FailurePersistence for LaneSeeds {
    fn load_persisted_failures2(
        &self,
        source_file: Option<&'static str>,
    ) -> Vec<proptest::test_runner::PersistedSeed> {
        self.file
            .load_persisted_failures2(source_file)
            .into_iter()
            .enumerate()
            .filter(|(index, _)| index % LANES as usize == self.lane - 1)
            .map(|(_, seed)| seed)
            .collect()
    }

    fn save_persisted_failure2(
        &mut self,
        source_file: Option<&'static str>,
        seed: proptest::test_runner::PersistedSeed,
        shrunken_value: &dyn std::fmt::Debug,
    ) {
        self.file
            .save_persisted_failure2(source_file, seed, shrunken_value);
    }

    fn box_clone(&self) -> Box<dyn proptest::test_runner::FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn proptest::test_runner::FailurePersistence) -> bool {
        other.as_any().downcast_ref::<Self>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn every_kept_seed_is_dealt_to_exactly_one_lane() {
    use proptest::test_runner::FailurePersistence;
    let source = Some(file!());
    let all = LaneSeeds::of(1).file.load_persisted_failures2(source);
    assert!(!all.is_empty(), "the kept seeds are found");
    let mut dealt = Vec::new();
    for lane in 1..=LANES as usize {
        let seeds = LaneSeeds::of(lane).load_persisted_failures2(source);
        assert!(seeds.len() <= all.len().div_ceil(LANES as usize));
        dealt.extend(seeds.into_iter().map(|seed| seed.to_string()));
    }
    let mut expected: Vec<String> = all.iter().map(ToString::to_string).collect();
    expected.sort();
    dealt.sort();
    assert_eq!(dealt, expected);
}

/// One lane: a test of its own, with its share of the histories and of the kept seeds.
macro_rules! lane {
    ($name:ident, $lane:expr) => {
        prop_state_machine! {
            #![proptest_config(LaneSeeds::config($lane))]
            #[test]
            fn $name(sequential 1..=40 => ModelTest);
        }
    };
}

lane!(histories_lane_1, 1);
lane!(histories_lane_2, 2);
lane!(histories_lane_3, 3);
lane!(histories_lane_4, 4);
lane!(histories_lane_5, 5);
lane!(histories_lane_6, 6);
lane!(histories_lane_7, 7);
lane!(histories_lane_8, 8);
