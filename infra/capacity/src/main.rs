//! Capacity plan by simulation (`docs/scale.md`).
//!
//! Draws a seeded synthetic workload (10,000 suppliers in 1,000 tenants, 2,000,000 items, one
//! supplier sending 30 % of the deliveries), runs every delivery, stream batch and read of a
//! peak window and of an average-day window through the product's own key functions, and
//! prints, for every table, index and S3 prefix, the busiest key's units in its busiest second
//! against DynamoDB's per-partition and S3's per-prefix limits; then the Lambda concurrency and
//! SQS settings that hold the load.
//!
//! `cargo run -p capacity -- [--seed N] [--peak-seconds S] [--average-seconds S]
//! [--parallelization F] [--stream-batch-size N] [--batching-window S] [--batch-size N]
//! [--peak-rate R] [--item-zipf S]`

mod cost;
mod report;
mod rng;
mod tally;
mod workload;

use cost::{patterns, Sim, StreamSettings};
use rng::Rng;
use std::time::Instant;
use workload::{deliveries, Cursor, Params, World};

struct Args {
    params: Params,
    peak_seconds: f64,
    average_seconds: f64,
    stream: StreamSettings,
    batch_size: usize,
    ingest_timeout: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        params: Params::default(),
        peak_seconds: 3.0,
        average_seconds: 60.0,
        stream: template_stream_settings()?,
        batch_size: 10,
        ingest_timeout: 30.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<f64>()
                .map_err(|_| format!("{flag}: {text:?} is not a number"))
        };
        match flag.as_str() {
            "--seed" => args.params.seed = number(value()?)? as u64,
            "--peak-seconds" => args.peak_seconds = number(value()?)?.max(1.0),
            "--average-seconds" => args.average_seconds = number(value()?)?.max(1.0),
            "--parallelization" => {
                args.stream.parallelization_factor = (number(value()?)? as usize).clamp(1, 10)
            }
            "--stream-batch-size" => {
                args.stream.batch_size = (number(value()?)? as usize).clamp(1, 10_000)
            }
            "--batching-window" => {
                args.stream.batching_window = number(value()?)?.clamp(0.0, 300.0)
            }
            "--batch-size" => args.batch_size = (number(value()?)? as usize).clamp(1, 10),
            "--peak-rate" => args.params.peak_deliveries_per_second = number(value()?)?,
            "--item-zipf" => args.params.item_zipf_s = number(value()?)?.clamp(0.0, 3.0),
            "--help" | "-h" => {
                return Err(
                    "usage: capacity [--seed N] [--peak-seconds S] [--average-seconds S] \
                     [--parallelization F] [--stream-batch-size N] [--batching-window S] \
                     [--batch-size N] [--peak-rate R] [--item-zipf S]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// The projector's stream event settings as `template.yaml` declares them, so that the plan is
/// the deployed configuration (defaults as AWS applies them when a setting is absent).
fn template_stream_settings() -> Result<StreamSettings, String> {
    let path = template_spec::template_path();
    let spec =
        template_spec::read_template(&path).map_err(|e| format!("{}: {e:#}", path.display()))?;
    let event = &spec.document["Resources"]["ProjectorFunction"]["Properties"]["Events"]
        ["EvidenceChanges"]["Properties"];
    let number = |name: &str, default: f64| event[name].as_f64().unwrap_or(default);
    Ok(StreamSettings {
        batch_size: number("BatchSize", 100.0) as usize,
        batching_window: number("MaximumBatchingWindowInSeconds", 0.0),
        parallelization_factor: number("ParallelizationFactor", 1.0) as usize,
    })
}

/// One window: deliveries, reads and (at peak) the rare operator events, then the projector.
fn simulate<'w>(
    world: &'w World,
    rng: &mut Rng,
    cursor: &mut Cursor,
    rate: f64,
    seconds: f64,
    stream: &StreamSettings,
    rare_events: bool,
) -> (Sim<'w>, usize) {
    let window = deliveries(world, rng, cursor, rate, seconds);
    let mut sim = Sim::new(world);
    for delivery in &window {
        sim.ingest(delivery);
    }
    let read_scale = rate / world.params.peak_deliveries_per_second;
    let mut reads_rng = Rng::new(world.params.seed ^ 0xA5A5);
    sim.reads_scaled(&mut reads_rng, seconds, read_scale);
    if rare_events {
        sim.correction(seconds / 2.0);
        sim.quarantine_lift(seconds / 2.0);
    }
    // A stream shard per partition of the evidence table at this load (at least 4).
    let base = sim.tally.store_total(patterns::EVIDENCE, seconds);
    let shards = ((base.write / 1_000.0 + base.read / 3_000.0).ceil() as usize).max(4);
    sim.project(shards, stream, seconds);
    (sim, shards)
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let params = args.params.clone();
    let world = World::new(params.clone());
    let mut rng = Rng::new(params.seed);
    let mut cursor = Cursor::default();

    println!("## Capacity simulation (seed {})\n", params.seed);
    println!(
        "{} tenants, {} suppliers, {} items; supplier 0 sends {:.0} % of deliveries and offers {} \
         items (Zipf s={} over its catalogue: its top item is {:.1} % of its webhook rows).",
        report::num(params.tenants as f64),
        report::num(params.suppliers as f64),
        report::num(params.items as f64),
        params.big_supplier_share * 100.0,
        report::num(params.big_catalogue as f64),
        params.item_zipf_s,
        world.suppliers[0].top_item_share() * 100.0,
    );
    println!(
        "Mix by count: {:.2} % webhooks ({}-{} rows), {:.2} % export pages ({}-{} rows), {:.2} % \
         drops ({} rows): {:.1} rows a delivery; {:.0} % replays, {:.2} % mismatches, {:.1} % \
         refusals.",
        (1.0 - params.page_share - params.drop_share) * 100.0,
        params.webhook_rows.0,
        params.webhook_rows.1,
        params.page_share * 100.0,
        params.page_rows.0,
        params.page_rows.1,
        params.drop_share * 100.0,
        params.drop_rows,
        params.mean_rows(),
        params.replay_share * 100.0,
        params.mismatch_share * 100.0,
        params.reject_share * 100.0,
    );

    let peak_rate = params.peak_deliveries_per_second;
    let (peak, shards) = simulate(
        &world,
        &mut rng,
        &mut cursor,
        peak_rate,
        args.peak_seconds,
        &args.stream,
        true,
    );
    let over = report::table(
        &format!(
            "Peak: {} deliveries/s for {} s (plus one identity correction of a 10,000-observation \
             item and one source-quarantine lift of supplier 0)",
            report::num(peak_rate),
            args.peak_seconds
        ),
        &peak.tally.busiest(),
    );
    totals(&peak, args.peak_seconds);
    report::lambda(
        &peak.load,
        &report::Settings {
            window: args.peak_seconds,
            deliveries_per_second: peak_rate,
            shards,
            factor: args.stream.parallelization_factor,
            batch_size: args.batch_size,
            ingest_timeout: args.ingest_timeout,
        },
    );

    let average_rate = params.average_deliveries_per_second();
    let (average, _) = simulate(
        &world,
        &mut rng,
        &mut cursor,
        average_rate,
        args.average_seconds,
        &args.stream,
        false,
    );
    report::table(
        &format!(
            "Average day: {} observations/day = {:.1} deliveries/s, {} s simulated",
            report::num(params.observations_per_day),
            average_rate,
            args.average_seconds
        ),
        &average.tally.busiest(),
    );
    totals(&average, args.average_seconds);
    println!(
        "\n{over} key pattern(s) over their limit at peak. Simulated in {:.1} s.",
        started.elapsed().as_secs_f64()
    );
}

fn totals(sim: &Sim<'_>, seconds: f64) {
    println!("\n| store | write units/s | read units/s |");
    println!("|---|---:|---:|");
    for store in [
        patterns::EVIDENCE,
        patterns::GSI1,
        patterns::GSI2,
        patterns::PROJECTION,
        patterns::BY_SOURCE,
        patterns::BUCKET,
    ] {
        let total = sim.tally.store_total(store, seconds);
        println!(
            "| {store}{} | {} | {} |",
            if store == patterns::BUCKET {
                " (requests)"
            } else {
                ""
            },
            report::num(total.write),
            report::num(total.read)
        );
    }
}
