//! Webhook throughput end to end on the local stack (docs/benchmarks.md, "Webhook throughput"):
//! signed one-row deliveries are sent open-loop at `FEEDSAFE_THROUGHPUT_RATE` per second (50) for
//! `FEEDSAFE_THROUGHPUT_SECONDS` (60) to the stack's webhook route -- webhook handler, queue,
//! ingest, DynamoDB, stream, projector, projection -- and every fifth delivery's offer is polled
//! through the query service until it is readable. Prints the rate acknowledged, the
//! acknowledgement latency, acknowledgement -> readable offer p50/p99, whether every delivery
//! became readable, and the CPU seconds of this process (the whole stack and the load) beside those
//! of DynamoDB Local and moto: the profile that says which one is the limit.
//!
//! `scripts/bench` runs it with a release build on engines of its own; `--quick` (10 per
//! second for 5 s) only checks that it works.

use acceptance::load::{current_offer, post_signed_webhook, AckFeed, SAMPLE_WEBHOOK_SECRET};
use acceptance::metering::{cpu_ms, cpu_ms_of_tree};
use acceptance::*;
use feedsafe::protocols::query::QueryService;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNECTOR: &str = "acme-events";
const SAMPLE_EVERY: usize = 5;

fn env_number(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many of the `total` deliveries are still not readable after `patience` (polled).
async fn unreadable_after(query: &QueryService, total: usize, patience: Duration) -> usize {
    let deadline = Instant::now() + patience;
    let mut waiting: Vec<usize> = (0..total).collect();
    loop {
        let mut still = Vec::new();
        for n in waiting {
            if current_offer(query, CONNECTOR, &sku(n)).await.is_none() {
                still.push(n);
            }
        }
        waiting = still;
        if waiting.is_empty() || Instant::now() >= deadline {
            return waiting.len();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn sku(n: usize) -> String {
    format!("THR-{n:06}")
}

fn event(n: usize, observed_second: i64) -> Vec<u8> {
    let at = feedsafe::domain::timestamp::Timestamp::from_unix_seconds(observed_second)
        .expect("a valid second")
        .to_rfc3339();
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": format!("thr-{n}"), "source": "urn:acme:throughput",
        "type": "offer.snapshot",
        "data": {"offers": [{"sku": sku(n), "quantity": 1 + n % 50, "unit": "each",
                             "price": "9.50", "currency": "EUR", "observed_at": at}]}
    }))
    .expect("an event")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The pid an engine's pid file names, under the engines' folder the environment uses.
fn engine_pid(file: &str) -> Option<u32> {
    let home = std::env::var("ENGINES_HOME")
        .unwrap_or_else(|_| format!("{}/../.local/engines", env!("CARGO_MANIFEST_DIR")));
    std::fs::read_to_string(format!("{home}/{file}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rate = env_number("FEEDSAFE_THROUGHPUT_RATE", if quick { 10.0 } else { 50.0 });
    let seconds = env_number(
        "FEEDSAFE_THROUGHPUT_SECONDS",
        if quick { 5.0 } else { 60.0 },
    );
    let total = (rate * seconds).round() as usize;
    let env = Arc::new(spawn_heavy_env(true, "throughput").await);
    // The deployed queue's visibility is 180 s; 30 s here: nothing is meant to time out.
    let stack = spawn_stack_on(&env, env.clients.clone(), 30).await;
    let url = format!("{}/v1/webhooks/{CONNECTOR}", stack.base_url());
    let engines = [
        ("DynamoDB Local", engine_pid("dynamodb.pid")),
        ("moto", engine_pid("moto.pid")),
    ];
    let engines_cpu_before: Vec<u128> = engines
        .iter()
        .map(|(_, pid)| pid.map_or(0, cpu_ms_of_tree))
        .collect();
    let cpu_before = cpu_ms();

    println!();
    println!("throughput: {total} signed one-row webhook deliveries at {rate}/s open-loop");
    let (acks, acked) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant, f64, u16)>();
    // The sampler reads while the load runs: acknowledged -> readable, polled every 50 ms,
    // 120 s at most after the last acknowledgement.
    let query = env.query();
    let sampler = {
        let query = query.clone();
        tokio::spawn(async move {
            let (mut ack_ms, mut readable_ms, mut refused) = (Vec::new(), Vec::new(), 0usize);
            let mut pending: Vec<(usize, Instant)> = Vec::new();
            let mut feed = AckFeed::new(acked, Duration::from_secs(120));
            while feed.keep_going(!pending.is_empty()) {
                for (n, at, ms, status) in feed.arrived() {
                    if status != 202 {
                        refused += 1;
                        continue;
                    }
                    ack_ms.push(ms);
                    if n % SAMPLE_EVERY == 0 {
                        pending.push((n, at));
                    }
                }
                let mut still = Vec::new();
                for (n, at) in pending.drain(..) {
                    if current_offer(&query, CONNECTOR, &sku(n)).await.is_some() {
                        readable_ms.push(at.elapsed().as_secs_f64() * 1000.0);
                    } else {
                        still.push((n, at));
                    }
                }
                pending = still;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (ack_ms, readable_ms, refused)
        })
    };
    let started = Instant::now();
    let first_second = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    let mut senders = Vec::with_capacity(total);
    for n in 0..total {
        let due = started + Duration::from_secs_f64(n as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let (url, acks) = (url.clone(), acks.clone());
        senders.push(tokio::spawn(async move {
            let sent = Instant::now();
            let status = post_signed_webhook(
                &url,
                SAMPLE_WEBHOOK_SECRET,
                &format!("msg-thr-{n}"),
                event(n, first_second),
            )
            .await;
            let _ = acks.send((
                n,
                Instant::now(),
                sent.elapsed().as_secs_f64() * 1000.0,
                status,
            ));
        }));
    }
    drop(acks);
    for sender in senders {
        sender.await.expect("a sender");
    }
    let sending = started.elapsed().as_secs_f64();
    let (mut ack_ms, mut readable_ms, refused) = sampler.await.expect("the sampler");
    let drained = started.elapsed().as_secs_f64();
    let cpu_stack = (cpu_ms() - cpu_before) as f64 / 1000.0;
    let engines_cpu: Vec<f64> = engines
        .iter()
        .zip(&engines_cpu_before)
        .map(|((_, pid), before)| (pid.map_or(0, cpu_ms_of_tree) - before) as f64 / 1000.0)
        .collect();
    // Every acknowledged delivery must be readable, not only the sampled ones: the last ones
    // acknowledged may still be on their way when every sample is in, so they get the samples'
    // 120 s too.
    let unreadable = unreadable_after(&query, total, Duration::from_secs(120)).await;
    ack_ms.sort_by(f64::total_cmp);
    readable_ms.sort_by(f64::total_cmp);
    let lagging = total.div_ceil(SAMPLE_EVERY) - readable_ms.len();
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| offered | {rate:.0}/s for {seconds:.0} s ({total} deliveries) |");
    println!("| acknowledged (202) | {} ({:.1}/s over {sending:.1} s); refused or unanswered {refused} |", ack_ms.len(), ack_ms.len() as f64 / sending);
    println!(
        "| acknowledgement latency p50 / p99 | {:.0} ms / {:.0} ms |",
        percentile(&ack_ms, 0.5),
        percentile(&ack_ms, 0.99)
    );
    println!(
        "| acknowledgement -> readable offer p50 / p99 ({} samples) | {:.0} ms / {:.0} ms |",
        readable_ms.len(),
        percentile(&readable_ms, 0.5),
        percentile(&readable_ms, 0.99)
    );
    println!("| samples not readable within 120 s | {lagging} |");
    println!("| deliveries not readable at the end | {unreadable} of {total} |");
    println!(
        "| end to end | {:.1} deliveries/s (first send to last sample readable: {drained:.1} s) |",
        total as f64 / drained
    );
    println!(
        "| CPU s: this process (stack + load) | {cpu_stack:.1} ({:.0} % of one core) |",
        100.0 * cpu_stack / drained
    );
    for ((name, _), cpu) in engines.iter().zip(&engines_cpu) {
        println!(
            "| CPU s: {name} | {cpu:.1} ({:.0} % of one core) |",
            100.0 * cpu / drained
        );
    }
    let report = json!({
        "rate": rate, "seconds": seconds, "total": total, "acknowledged": ack_ms.len(),
        "refused": refused, "sending_s": sending, "drained_s": drained,
        "ack_ms_p50": percentile(&ack_ms, 0.5), "ack_ms_p99": percentile(&ack_ms, 0.99),
        "readable_ms_p50": percentile(&readable_ms, 0.5), "readable_ms_p99": percentile(&readable_ms, 0.99),
        "samples": readable_ms.len(), "lagging": lagging, "unreadable": unreadable,
        "cpu_s": {"stack_and_load": cpu_stack, "dynamodb_local": engines_cpu[0], "moto": engines_cpu[1]},
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench");
    std::fs::write(
        dir.join("throughput.json"),
        serde_json::to_vec_pretty(&report).unwrap(),
    )
    .expect("throughput report written");
    stack.stop().await;
    assert_eq!(
        unreadable, 0,
        "every acknowledged delivery becomes readable"
    );
    assert_eq!(refused, 0, "every delivery is acknowledged");
}
