//! The printed plan: a Markdown table per window, then the Lambda and SQS settings.

use crate::cost::LambdaLoad;
use crate::tally::{Busiest, Limit};

fn redact(key: &str) -> String {
    const MAX: usize = 44;
    if key.len() <= MAX {
        key.to_owned()
    } else {
        format!("{}…{}", &key[..28], &key[key.len() - 12..])
    }
}

fn limit_text(limit: Limit) -> &'static str {
    match limit {
        Limit::DynamoPartition => "1,000 WCU / 3,000 RCU",
        Limit::S3Prefix => "3,500 PUT / 5,500 GET",
    }
}

/// Thousands separators for a rounded number.
pub fn num(value: f64) -> String {
    if value > 0.0 && value < 10.0 {
        return format!("{value:.1}");
    }
    let text = format!("{:.0}", value.round());
    let (sign, digits) = text.split_at(usize::from(text.starts_with('-')));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// One row per table / index / prefix pattern: its busiest key in its busiest second.
pub fn table(title: &str, rows: &[Busiest]) -> usize {
    println!("\n### {title}\n");
    println!(
        "| store | key pattern | keys | busiest key | write/s | read/s | limit | load | headroom |"
    );
    println!("|---|---|---:|---|---:|---:|---|---:|---:|");
    let mut over = 0;
    for b in rows {
        let load = b.units.load(b.limit);
        let verdict = if load > 1.0 {
            over += 1;
            "**OVER**".to_owned()
        } else {
            format!("{:.0} %", (1.0 - load) * 100.0)
        };
        println!(
            "| {} | `{}` | {} | `{}` | {} | {} | {} | {:.0} % | {} |",
            b.pattern.store,
            b.pattern.key,
            num(b.distinct_keys as f64),
            redact(&b.key),
            num(b.units.write),
            num(b.units.read),
            limit_text(b.limit),
            load * 100.0,
            verdict
        );
    }
    over
}

pub struct Settings {
    pub window: f64,
    pub deliveries_per_second: f64,
    pub shards: usize,
    pub factor: usize,
    pub batch_size: usize,
    pub ingest_timeout: f64,
}

/// Lambda concurrency and SQS settings from the window's measured work.
pub fn lambda(load: &LambdaLoad, s: &Settings) {
    let ingest_concurrency = load.ingest_busy / s.window;
    let mean = load.ingest_busy / load.ingest_messages.max(1) as f64;
    // Messages of a batch are ingested one after another.
    let longest_batch = load.ingest_longest + (s.batch_size - 1) as f64 * mean;
    let reserved = (ingest_concurrency * 1.5 / 10.0).ceil() * 10.0;
    println!("\n### Lambda and SQS\n");
    println!("| what | value | from |");
    println!("|---|---:|---|");
    println!(
        "| deliveries per second | {} | the window's messages over its length |",
        num(s.deliveries_per_second)
    );
    println!(
        "| ingest: mean time per delivery | {:.0} ms | sum of its requests' latencies |",
        mean * 1000.0
    );
    println!(
        "| ingest: longest delivery | {:.2} s | a 5,000-row drop: 3 transactions in a row, the 50 chunks between them at once |",
        load.ingest_longest
    );
    println!(
        "| ingest: concurrency (mean) | {} | deliveries/s x mean time (Little's law) |",
        num(ingest_concurrency)
    );
    println!(
        "| ingest: reserved concurrency and SQS MaximumConcurrency | {} | 1.5 x mean, rounded up |",
        num(reserved)
    );
    println!(
        "| ingest: longest batch of {} | {:.1} s | longest delivery + {} mean ones; timeout {} s |",
        s.batch_size,
        longest_batch,
        s.batch_size - 1,
        s.ingest_timeout
    );
    println!(
        "| ingest queue: visibility timeout | {} s | 6 x the function timeout |",
        num(6.0 * s.ingest_timeout)
    );
    println!(
        "| webhook: concurrency | {} | {} webhooks/s x {} ms |",
        num(load.webhooks as f64 / s.window * crate::cost::latency::WEBHOOK / 1000.0),
        num(load.webhooks as f64 / s.window),
        crate::cost::latency::WEBHOOK
    );
    println!(
        "| query: concurrency | {} | {} reads/s x {} ms |",
        num(load.reads as f64 / s.window * crate::cost::latency::QUERY_ROUTE / 1000.0),
        num(load.reads as f64 / s.window),
        crate::cost::latency::QUERY_ROUTE
    );
    println!(
        "| projector: stream shards x parallelization factor | {} x {} = {} | shards ~ the evidence table's partitions at this load |",
        s.shards, s.factor, load.projector_processors
    );
    println!(
        "| projector: records, batches | {} / {} | {:.0} records a batch |",
        num(load.projector_records as f64),
        num(load.projector_batches as f64),
        load.projector_records as f64 / load.projector_batches.max(1) as f64
    );
    println!(
        "| projector: concurrency (mean) | {} | batch time / window |",
        num(load.projector_busy / s.window)
    );
    println!(
        "| projector: busiest batch processor | {:.0} % busy | over 100 %: its shard falls behind |",
        load.projector_busiest_utilisation * 100.0
    );
    println!(
        "| projector: longest wait of a record | {:.2} s | from its write to its batch |",
        load.projector_lag_seconds
    );
    println!(
        "| projector: lost row races | {} | conditional puts another batch beat (row read again) |",
        num(load.lost_races as f64)
    );
    println!(
        "| largest replay record | {} bytes | what a staged delivery writes twice (created, then committed) |",
        num(load.largest_replay_record as f64)
    );
    println!(
        "| supplier 0's observation, projection row | {} / {} bytes | one write unit per started KB |",
        num(load.hot_supplier_items.0 as f64),
        num(load.hot_supplier_items.1 as f64)
    );
}
