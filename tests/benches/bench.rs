//! `scripts/bench` (docs/benchmarks.md, "Cost per delivery"): what a delivery costs in the units
//! AWS bills and schedules, per row count and kind of delivery, through the ingest function's
//! service on the local engines: requests by operation, sequential round trips on the critical path
//! (from the requests' timestamps), DynamoDB read and write units by table and index
//! (`ReturnConsumedCapacity: INDEXES` on every call), this process's CPU time, and wall time
//! (engine-bound: DynamoDB Local serializes writes). Prints a table and writes
//! `target/bench/report.json`.
//!
//! Kinds: fresh; byte-identical replay; re-serialized replay (same rows, other bytes);
//! mutated replay (a changed quantity under the same identity: quarantined); a 16-way burst of
//! one fresh delivery (the winner and the average loser). Beside them, in the same run, the same
//! 400 rows fresh without and with a distributor's commercial terms: the stored observation
//! items' bytes (`item_size`) and the write units billed per observation ("Commercial terms:
//! bytes and write units per observation").
//!
//! `cargo bench -p acceptance --bench bench [-- --quick]` with the engines' environment set;
//! `scripts/bench [--quick]` starts engines of its own. `--quick` (1, 40 and 400 rows, a 4-way
//! burst) is what CI runs to check that it works; its figures are not the record.

use acceptance::baseline::{baseline_python, run_baseline, BaselineCase, BaselineInput};
use acceptance::metering::{cpu_us, item_size, Meter, Metering};
use acceptance::*;
use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::aws::dynamo::{Item, SK_OBSERVATION};
use feedsafe::aws::item_keys::observation_pk;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::protocols::ingest::{IngestOutcome, IngestService};
use serde_json::{json, Value};
use std::time::Instant;

fn rows_of(export: &str, rows: usize, quantity: i64) -> Vec<Value> {
    (0..rows)
        .map(|i| {
            offer(
                &format!("{export}-{i:05}"),
                quantity,
                "10.00",
                "2026-11-29T08:00:00Z",
            )
        })
        .collect()
}

/// One row of the report.
#[derive(serde::Serialize)]
struct Case {
    rows: usize,
    kind: &'static str,
    outcome: String,
    meter: Meter,
    cpu_ms: f64,
    wall_ms: u128,
    /// The projector's work on the stream records this delivery wrote.
    projection: Projection,
}

#[derive(serde::Serialize)]
struct Projection {
    stream_records: usize,
    meter: Meter,
    /// Stream polling included (small beside the projector's).
    cpu_ms: f64,
}

/// The read side's share: what the projector does with the stream records the delivery just
/// wrote, through its own metered client.
struct ReadSide {
    stream: local_stack::events::StreamReader,
    projector: feedsafe::protocols::projection::Projector,
    metering: Metering,
}

impl ReadSide {
    async fn project(&mut self, env: &TestEnv) -> Projection {
        self.metering.take();
        let cpu = cpu_us();
        let records = env.drain(&mut self.stream, &self.projector).await.len();
        Projection {
            stream_records: records,
            cpu_ms: (cpu_us() - cpu) as f64 / 1000.0,
            meter: self.metering.take(),
        }
    }
}

/// The metered ingest service and read side every measured delivery goes through.
struct Bench<'a> {
    env: &'a TestEnv,
    acme: &'a ConnectorConfig,
    service: IngestService,
    metering: Metering,
    read_side: ReadSide,
}

impl Bench<'_> {
    /// Ingests one message through the metered service and projects what it wrote.
    async fn measure(
        &mut self,
        envelope: &[u8],
        rows: usize,
        kind: &'static str,
    ) -> (Case, IngestOutcome) {
        self.metering.take();
        let cpu = cpu_us();
        let at = Instant::now();
        let outcome = self
            .service
            .ingest_message(envelope)
            .await
            .expect("ingest settles");
        let wall_ms = at.elapsed().as_millis();
        let meter = self.metering.take();
        let cpu_ms = (cpu_us() - cpu) as f64 / 1000.0;
        let case = Case {
            rows,
            kind,
            outcome: outcome.code().to_owned(),
            meter,
            cpu_ms,
            wall_ms,
            projection: self.read_side.project(self.env).await,
        };
        (case, outcome)
    }

    /// Each size fresh, replayed byte for byte, re-serialized and mutated; the same
    /// deliveries, in the same order, for the baseline.
    async fn by_size(&mut self, sizes: &[usize]) -> (Vec<Case>, Vec<BaselineInput>) {
        let mut cases = Vec::new();
        let mut baseline_inputs = Vec::new();
        for &rows in sizes {
            let export = format!("EXP-N{rows}");
            let body = export_page(&export, 1, 1, rows_of(&export, rows, 1));
            let reserialized: Value = serde_json::from_slice(&body).unwrap();
            let pretty = serde_json::to_vec_pretty(&reserialized).unwrap();
            let mutated = export_page(&export, 1, 1, rows_of(&export, rows, 2));
            let fresh = page_envelope(self.acme, &export, 1, 1, &body);
            let deliveries = [
                ("fresh", fresh.clone()),
                ("byte-identical replay", fresh),
                (
                    "re-serialized replay",
                    page_envelope(self.acme, &export, 1, 1, &pretty),
                ),
                (
                    "mutated replay",
                    page_envelope(self.acme, &export, 1, 1, &mutated),
                ),
            ];
            for (kind, envelope) in deliveries {
                cases.push(self.measure(&envelope, rows, kind).await.0);
                baseline_inputs.push(BaselineInput {
                    rows,
                    kind,
                    envelope: String::from_utf8(envelope).expect("envelopes are JSON"),
                });
            }
        }
        (cases, baseline_inputs)
    }

    /// The same 400 rows fresh without and with the distributor's terms, side by side.
    async fn terms(&mut self) -> Vec<TermsCase> {
        let mut cases = Vec::new();
        for (export, terms) in [("EXP-P400", false), ("EXP-T400", true)] {
            let body = export_page(export, 1, 1, terms_rows(export, terms));
            let envelope = page_envelope(self.acme, export, 1, 1, &body);
            let kind = if terms {
                "fresh, with terms"
            } else {
                "fresh, no terms"
            };
            let (case, outcome) = self.measure(&envelope, TERMS_ROWS, kind).await;
            let ids = &outcome
                .result()
                .expect("the delivery commits")
                .observation_ids;
            let items = stored_observations(self.env, ids).await;
            assert!(
                items.iter().all(|i| i.contains_key("terms") == terms),
                "the terms attribute is stored exactly when the rows state terms"
            );
            cases.push(TermsCase::of(case, terms, &items));
        }
        cases
    }
}

/// Rows of each side of the terms comparison: the cost table's 400-row case.
const TERMS_ROWS: usize = 400;

/// The commercial terms of the first row of
/// `tests/fixtures/suppliers/distributor-terms/snapshot-7731.json`, as its connector definition
/// maps them (tests/acceptance/terms.rs reads them back): three price breaks, MOQ 1,000,
/// multiple 500, lead time 14 days, a reel of 3,000, valid until the end of 2026, FCA, tax not
/// included. Stated here as row members of the native format.
fn distributor_terms() -> serde_json::Map<String, Value> {
    let terms = json!({
        "price_breaks": [
            {"min_quantity": 1000, "unit_price": "0.412"},
            {"min_quantity": 2500, "unit_price": "0.398"},
            {"min_quantity": 10000, "unit_price": "0.351"}
        ],
        "minimum_order_quantity": 1000,
        "order_multiple": 500,
        "lead_time_days": 14,
        "lead_time": "14 days",
        "packaging": "reel",
        "pack_size": 3000,
        "valid_until": "2026-12-31T23:59:59Z",
        "incoterms": "FCA",
        "tax_included": false
    });
    match terms {
        Value::Object(members) => members,
        _ => unreachable!("an object literal"),
    }
}

/// Distributor-style rows (sku, quantity, unit, price, currency, observed_at), the snapshot's
/// quantity and first-break price, with or without its terms. The export ids are as long as
/// the cost table's (`EXP-N400`), and so are the skus and keys: only the terms differ in size
/// (the packaging `reel` is the item's, in place of the unit `each`: as long).
fn terms_rows(export: &str, terms: bool) -> Vec<Value> {
    (0..TERMS_ROWS)
        .map(|i| {
            let mut row = offer(
                &format!("{export}-{i:05}"),
                12_000,
                "0.412",
                "2026-11-29T08:00:00Z",
            );
            if terms {
                row.as_object_mut()
                    .expect("a row object")
                    .extend(distributor_terms());
            }
            row
        })
        .collect()
}

/// The observation items the delivery stored, as DynamoDB holds them (a plain client, not
/// metered).
async fn stored_observations(
    env: &TestEnv,
    ids: &[feedsafe::domain::ids::ObservationId],
) -> Vec<Item> {
    let mut items = Vec::with_capacity(ids.len());
    for id in ids {
        let item = env
            .clients
            .dynamodb
            .get_item()
            .table_name(&env.table)
            .key("pk", AttributeValue::S(observation_pk(id.as_str())))
            .key("sk", AttributeValue::S(SK_OBSERVATION.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get an observation")
            .item
            .unwrap_or_else(|| panic!("observation {} is stored", id.as_str()));
        items.push(item);
    }
    items
}

/// One side of "Commercial terms: bytes and write units per observation".
#[derive(serde::Serialize)]
struct TermsCase {
    terms: bool,
    case: Case,
    /// DynamoDB's size of each stored observation item (`item_size`): least, mean, most.
    item_bytes: (usize, f64, usize),
    /// Write units AWS bills for the observation items alone, per observation: ceil(size /
    /// 1 KB) twice on the table (a transactional put) and once on `gsi1`.
    observation_write_units: f64,
}

impl TermsCase {
    fn of(case: Case, terms: bool, items: &[Item]) -> TermsCase {
        let sizes: Vec<usize> = items.iter().map(item_size).collect();
        let units: usize = sizes.iter().map(|s| 3 * s.div_ceil(1024).max(1)).sum();
        let n = sizes.len().max(1) as f64;
        TermsCase {
            terms,
            item_bytes: (
                sizes.iter().copied().min().unwrap_or(0),
                sizes.iter().sum::<usize>() as f64 / n,
                sizes.iter().copied().max().unwrap_or(0),
            ),
            observation_write_units: units as f64 / n,
            case,
        }
    }
}

/// `workers` instances take the same fresh delivery at once.
#[derive(serde::Serialize)]
struct Burst {
    workers: usize,
    rows: usize,
    /// Each instance's outcome and meter, the winner first.
    outcomes: Vec<(String, Meter)>,
    loser_requests_mean: f64,
}

async fn burst(env: &TestEnv, acme: &ConnectorConfig, workers: usize) -> Burst {
    let rows = 40;
    let export = "EXP-BURST";
    let body = export_page(export, 1, 1, rows_of(export, rows, 1));
    let envelope = page_envelope(acme, export, 1, 1, &body);
    let meters: Vec<Metering> = (0..workers).map(|_| Metering::default()).collect();
    let services: Vec<IngestService> = meters
        .iter()
        .map(|m| env.service_through(m.clone()))
        .collect();
    let outcomes =
        futures_util::future::join_all(services.iter().map(|s| s.ingest_message(&envelope))).await;
    let mut outcomes: Vec<(String, Meter)> = outcomes
        .into_iter()
        .zip(&meters)
        .map(|(o, m)| {
            (
                o.map(|o: IngestOutcome| o.code().to_owned())
                    .unwrap_or_else(|e| format!("error: {e}")),
                m.take(),
            )
        })
        .collect();
    outcomes.sort_by_key(|(o, _)| o != "committed");
    let losers: Vec<&Meter> = outcomes.iter().skip(1).map(|(_, m)| m).collect();
    let loser_requests_mean = losers.iter().map(|m| m.total_requests()).sum::<usize>() as f64
        / losers.len().max(1) as f64;
    Burst {
        workers,
        rows,
        outcomes,
        loser_requests_mean,
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[1, 40, 400]
    } else {
        &[1, 40, 400, 5_000]
    };
    let workers = if quick { 4 } else { 16 };
    let env = spawn_heavy_env(true, "bench").await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let metering = Metering::default();
    let projection_metering = Metering::default();
    let mut bench = Bench {
        env: &env,
        acme: &acme,
        service: env.service_through(metering.clone()),
        metering,
        read_side: ReadSide {
            stream: env.stream().await,
            projector: env.projector_through(projection_metering.clone()),
            metering: projection_metering,
        },
    };
    // The seeded connector's own stream record is not any case's.
    bench.read_side.project(&env).await;
    let (cases, baseline_inputs) = bench.by_size(sizes).await;
    let terms = bench.terms().await;
    let burst = burst(&env, &acme, workers).await;
    let reads = bench
        .reads(if quick {
            &[10, 400]
        } else {
            &[10, 1_000, 10_000]
        })
        .await;

    print_cases(&cases);
    println!();
    println!(
        "{workers}-way burst of one {}-row delivery: {} (winner {} requests); losers average {:.1} requests",
        burst.rows,
        burst.outcomes.first().map_or("-", |(o, _)| o.as_str()),
        burst.outcomes.first().map_or(0, |(_, m)| m.total_requests()),
        burst.loser_requests_mean
    );
    for c in cases.iter().filter(|c| c.kind == "fresh") {
        let per_row = c.meter.units_of("billed", ":write") / c.rows as f64;
        println!(
            "fresh {} rows: {:.2} write units billed per observation ({:?})",
            c.rows, per_row, c.meter.units
        );
    }
    print_terms(&terms);
    print_reads(&reads);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let baseline = match baseline_python() {
        Some(python) => {
            let measured = run_baseline(&python, &baseline_inputs, &dir)
                .unwrap_or_else(|e| panic!("the Powertools baseline did not run: {e:#}"));
            print_baseline(&cases, &measured);
            Some(measured)
        }
        None => {
            println!(
                "baseline not run: FEEDSAFE_BASELINE_PYTHON is not set (scripts/bench sets it)"
            );
            None
        }
    };
    write_report(&dir, quick, &cases, &terms, &burst, baseline);
}

/// What one offers read of an item costs, now and as of an instant.
#[derive(serde::Serialize)]
struct ReadCase {
    observations: usize,
    kind: &'static str,
    meter: Meter,
    cpu_ms: f64,
}

impl Bench<'_> {
    /// For each count, an item with that many observations (one source, each observed a
    /// second apart, in deliveries of up to 5,000 rows), projected; then its offers read now and
    /// as of the instant after its last delivery, through a metered read path.
    async fn reads(&mut self, counts: &[usize]) -> Vec<ReadCase> {
        let metering = Metering::default();
        let query = self.env.query_through(metering.clone());
        let reader = self.env.reader();
        let mut cases = Vec::new();
        for &count in counts {
            let item = format!("ASOF-{count}");
            for (chunk, start) in (0..count).step_by(5_000).enumerate() {
                let rows: Vec<Value> = (start..count.min(start + 5_000))
                    .map(|i| {
                        let at =
                            feedsafe::domain::timestamp::Timestamp::parse("2026-01-01T00:00:00Z")
                                .unwrap()
                                .plus_seconds(i as i64);
                        offer(&item, 1 + i as i64, "10.00", &at.to_rfc3339())
                    })
                    .collect();
                let export = format!("EXP-{item}-{chunk}");
                let body = export_page(&export, 1, 1, rows);
                let envelope = page_envelope(self.acme, &export, 1, 1, &body);
                self.service
                    .ingest_message(&envelope)
                    .await
                    .expect("ingested");
                self.read_side.project(self.env).await;
            }
            let at = feedsafe::domain::timestamp::Timestamp::now();
            for kind in ["current", "as_of"] {
                let asked = feedsafe::protocols::query::OffersAsked {
                    as_of: (kind == "as_of").then_some(at),
                    ..Default::default()
                };
                metering.take();
                let cpu = cpu_us();
                let answer = query
                    .offers_as_asked(
                        &reader,
                        &item,
                        &asked,
                        feedsafe::domain::timestamp::Timestamp::now(),
                    )
                    .await
                    .expect("read");
                assert_eq!(
                    answer.offers[0].observation.quantity,
                    feedsafe::domain::quantity::Quantity::from(count as u64),
                    "{kind} of {count}"
                );
                cases.push(ReadCase {
                    observations: count,
                    kind,
                    cpu_ms: (cpu_us() - cpu) as f64 / 1000.0,
                    meter: metering.take(),
                });
            }
        }
        cases
    }
}

fn print_reads(reads: &[ReadCase]) {
    println!();
    println!("| observations of the item | offers read | requests | round trips | read units billed | CPU ms |");
    println!("|---:|---|---:|---:|---:|---:|");
    for r in reads {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} |",
            r.observations,
            r.kind,
            r.meter.total_requests(),
            r.meter.round_trips,
            r.meter.units_of("billed", ":read"),
            r.cpu_ms
        );
    }
}

/// `target/bench/report.json`.
fn write_report(
    dir: &std::path::Path,
    quick: bool,
    cases: &[Case],
    terms: &[TermsCase],
    burst: &Burst,
    baseline: Option<Vec<BaselineCase>>,
) {
    let report = json!({
        "date": feedsafe::domain::timestamp::Timestamp::now().to_rfc3339(),
        "quick": quick,
        "cases": cases,
        "terms": terms,
        "burst": {"workers": burst.workers, "rows": burst.rows,
                  "outcomes": burst.outcomes.iter().map(|(o, m)| json!({"outcome": o, "meter": m})).collect::<Vec<_>>(),
                  "loser_requests_mean": burst.loser_requests_mean},
        "baseline": baseline,
    });
    std::fs::create_dir_all(dir).expect("target/bench");
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_vec_pretty(&report).unwrap(),
    )
    .expect("report written");
    println!("report: target/bench/report.json");
}

/// The ingest table and the projection table of each case.
fn print_cases(cases: &[Case]) {
    println!();
    println!("| rows | delivery | outcome | requests | round trips | write units billed (engine said) | read units billed | refused | CPU ms | wall ms (engine-bound) |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for c in cases {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} ({:.1}) | {:.1} | {} | {:.1} | {} |",
            c.rows,
            c.kind,
            c.outcome,
            c.meter.total_requests(),
            c.meter.round_trips,
            c.meter.units_of("billed", ":write"),
            c.meter.units_of("table", ":write") + c.meter.units_of("index", ":write"),
            c.meter.units_of("billed", ":read"),
            c.meter.refused,
            c.cpu_ms,
            c.wall_ms
        );
    }
    println!();
    println!("Projection of each case (the projector on the stream records the delivery wrote):");
    println!("| rows | delivery | stream records | requests | round trips | write units billed | read units billed | CPU ms |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for c in cases {
        let p = &c.projection;
        println!(
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |",
            c.rows,
            c.kind,
            p.stream_records,
            p.meter.total_requests(),
            p.meter.round_trips,
            p.meter.units_of("billed", ":write"),
            p.meter.units_of("billed", ":read"),
            p.cpu_ms
        );
    }
}

/// "Commercial terms: bytes and write units per observation", one line per side.
fn print_terms(terms: &[TermsCase]) {
    println!();
    println!(
        "Commercial terms, {TERMS_ROWS} rows (the distributor's first row's terms on every row):"
    );
    println!("| rows | delivery | outcome | requests | round trips | observation item bytes (min / mean / max) | observation item write units per observation | delivery write units billed per observation | projector write units billed per observation |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for t in terms {
        let c = &t.case;
        let (least, mean, most) = t.item_bytes;
        let rows = c.rows as f64;
        println!(
            "| {} | {} | {} | {} | {} | {least} / {mean:.1} / {most} | {:.2} | {:.3} | {:.3} |",
            c.rows,
            c.kind,
            c.outcome,
            c.meter.total_requests(),
            c.meter.round_trips,
            t.observation_write_units,
            c.meter.units_of("billed", ":write") / rows,
            c.projection.meter.units_of("billed", ":write") / rows,
        );
    }
}

/// The baseline's figures beside feedsafe's, case by case, with feedsafe / baseline ratios.
fn print_baseline(cases: &[Case], baseline: &[BaselineCase]) {
    println!();
    println!("Baseline: Python + Powertools idempotency, one item per row (tests/baseline/powertools_baseline.py); ratios are feedsafe / baseline");
    println!("| rows | delivery | baseline outcome | requests | write units | read units | CPU ms | wall ms | requests x | write units x | CPU x | wall x |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let ratio = |ours: f64, theirs: f64| {
        if theirs > 0.0 {
            format!("{:.2}", ours / theirs)
        } else {
            "-".to_owned()
        }
    };
    for (ours, theirs) in cases.iter().zip(baseline) {
        assert_eq!(
            (ours.rows, ours.kind),
            (theirs.rows, theirs.kind.as_str()),
            "the baseline answers the same cases in the same order"
        );
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} |",
            theirs.rows,
            theirs.kind,
            theirs.outcome,
            theirs.total_requests(),
            theirs.write_units,
            theirs.read_units,
            theirs.cpu_ms,
            theirs.wall_ms,
            ratio(
                ours.meter.total_requests() as f64,
                theirs.total_requests() as f64
            ),
            ratio(ours.meter.units_of("billed", ":write"), theirs.write_units),
            ratio(ours.cpu_ms, theirs.cpu_ms),
            ratio(ours.wall_ms as f64, theirs.wall_ms),
        );
    }
}
