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
//! one fresh delivery (the winner and the average loser).
//!
//! `cargo bench -p acceptance --bench bench [-- --quick]` with the engines' environment set;
//! `scripts/bench [--quick]` starts engines of its own. `--quick` (1, 40 and 400 rows, a 4-way
//! burst) is what CI runs to check that it works; its figures are not the record.

use acceptance::baseline::{baseline_python, run_baseline, BaselineCase, BaselineInput};
use acceptance::metering::{cpu_us, Meter, Metering};
use acceptance::*;
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

async fn measure(
    env: &TestEnv,
    read_side: &mut ReadSide,
    service: &IngestService,
    metering: &Metering,
    envelope: &[u8],
    rows: usize,
    kind: &'static str,
) -> Case {
    metering.take();
    let cpu = cpu_us();
    let at = Instant::now();
    let outcome = service
        .ingest_message(envelope)
        .await
        .expect("ingest settles");
    let wall_ms = at.elapsed().as_millis();
    let meter = metering.take();
    let cpu_ms = (cpu_us() - cpu) as f64 / 1000.0;
    Case {
        rows,
        kind,
        outcome: outcome.code().to_owned(),
        meter,
        cpu_ms,
        wall_ms,
        projection: read_side.project(env).await,
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
    let service = env.service_through(metering.clone());
    let projection_metering = Metering::default();
    let mut read_side = ReadSide {
        stream: env.stream().await,
        projector: env.projector_through(projection_metering.clone()),
        metering: projection_metering,
    };
    // The seeded connector's own stream record is not any case's.
    read_side.project(&env).await;
    let mut cases = Vec::new();
    // The same deliveries, in the same order, for the baseline.
    let mut baseline_inputs = Vec::new();
    for &rows in sizes {
        let export = format!("EXP-N{rows}");
        let body = export_page(&export, 1, 1, rows_of(&export, rows, 1));
        let reserialized: Value = serde_json::from_slice(&body).unwrap();
        let pretty = serde_json::to_vec_pretty(&reserialized).unwrap();
        let mutated = export_page(&export, 1, 1, rows_of(&export, rows, 2));
        let fresh = page_envelope(&acme, &export, 1, 1, &body);
        let deliveries = [
            ("fresh", fresh.clone()),
            ("byte-identical replay", fresh),
            (
                "re-serialized replay",
                page_envelope(&acme, &export, 1, 1, &pretty),
            ),
            (
                "mutated replay",
                page_envelope(&acme, &export, 1, 1, &mutated),
            ),
        ];
        for (kind, envelope) in deliveries {
            let case = measure(
                &env,
                &mut read_side,
                &service,
                &metering,
                &envelope,
                rows,
                kind,
            );
            cases.push(case.await);
            baseline_inputs.push(BaselineInput {
                rows,
                kind,
                envelope: String::from_utf8(envelope).expect("envelopes are JSON"),
            });
        }
    }

    // A burst: `workers` instances take the same fresh delivery at once.
    let burst_rows = 40;
    let export = "EXP-BURST";
    let body = export_page(export, 1, 1, rows_of(export, burst_rows, 1));
    let envelope = page_envelope(&acme, export, 1, 1, &body);
    let meters: Vec<Metering> = (0..workers).map(|_| Metering::default()).collect();
    let services: Vec<IngestService> = meters
        .iter()
        .map(|m| env.service_through(m.clone()))
        .collect();
    let outcomes =
        futures_util::future::join_all(services.iter().map(|s| s.ingest_message(&envelope))).await;
    let mut burst: Vec<(String, Meter)> = outcomes
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
    burst.sort_by_key(|(o, _)| o != "committed");
    let losers: Vec<&Meter> = burst.iter().skip(1).map(|(_, m)| m).collect();
    let loser_requests = losers.iter().map(|m| m.total_requests()).sum::<usize>() as f64
        / losers.len().max(1) as f64;

    println!();
    println!("| rows | delivery | outcome | requests | round trips | write units billed (engine said) | read units billed | refused | CPU ms | wall ms (engine-bound) |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for c in &cases {
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
    for c in &cases {
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
    println!();
    println!(
        "{workers}-way burst of one {burst_rows}-row delivery: {} (winner {} requests); losers average {loser_requests:.1} requests",
        burst.first().map_or("-", |(o, _)| o.as_str()),
        burst.first().map_or(0, |(_, m)| m.total_requests())
    );
    for c in cases.iter().filter(|c| c.kind == "fresh") {
        let per_row = c.meter.units_of("billed", ":write") / c.rows as f64;
        println!(
            "fresh {} rows: {:.2} write units billed per observation ({:?})",
            c.rows, per_row, c.meter.units
        );
    }
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
    let report = json!({
        "date": feedsafe::domain::timestamp::Timestamp::now().to_rfc3339(),
        "quick": quick,
        "cases": cases,
        "burst": {"workers": workers, "rows": burst_rows,
                  "outcomes": burst.iter().map(|(o, m)| json!({"outcome": o, "meter": m})).collect::<Vec<_>>(),
                  "loser_requests_mean": loser_requests},
        "baseline": baseline,
    });
    std::fs::create_dir_all(&dir).expect("target/bench");
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_vec_pretty(&report).unwrap(),
    )
    .expect("report written");
    println!("report: target/bench/report.json");
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
