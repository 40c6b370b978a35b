//! The fault-injected soak (docs/benchmarks.md), opt-in: `scripts/soak` (or
//! `cargo test -p acceptance --test acceptance soak -- --ignored --nocapture`).
//!
//! The local stack takes `FEEDSAFE_SOAK_DELIVERIES` (2,000) deliveries from six webhook senders
//! (fresh events, exact duplicates, changed payloads under an acknowledged event id, late
//! backfills), a pull scheduler (paginated exports, some runs repeated at once) and a file
//! dropper (new files, new versions, repeated notifications), while `FEEDSAFE_SOAK_FAULT_RATE`
//! (5 %) of its DynamoDB and S3 calls time out, half before the request is sent and half after
//! it ran. At the end: every acknowledged delivery is stored once with exactly one acknowledged
//! version's rows, each other version is quarantined once, the current offer of every item per
//! connector is the one the model says, the dead-letter queue is empty (no permanent fault was
//! injected); it prints throughput, acknowledgement-to-readable latency and counts.

use acceptance::load::{post_signed_webhook, AckFeed, SAMPLE_WEBHOOK_SECRET};
use acceptance::*;
use feedsafe::protocols::query::QueryService;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod check;
use check::*;

const SECRET: &str = SAMPLE_WEBHOOK_SECRET;
/// Webhook senders; one pull scheduler and one file dropper run beside them.
const WEBHOOK_SENDERS: usize = 6;
const ITEMS: u64 = 40;
const SOURCE: &str = "urn:acme:soak";

fn env_number(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Fresh,
    Duplicate,
    Mutated,
    Late,
}

/// A delivery's rows as the supplier means them: (item, quantity, observed second).
type Rows = Vec<(u64, u64, i64)>;

/// One webhook event: its id and rows.
#[derive(Debug, Clone)]
struct Event {
    id: String,
    rows: Rows,
}

fn offer_row(item: u64, quantity: u64, second: i64) -> Value {
    json!({
        "sku": format!("SOAK-{item:03}"), "quantity": quantity, "unit": "each",
        "price": "9.50", "currency": "EUR",
        "observed_at": feedsafe::domain::timestamp::Timestamp::from_unix_seconds(second).expect("a valid second").to_rfc3339(),
    })
}

fn body(event: &Event) -> Vec<u8> {
    let offers: Vec<Value> = event
        .rows
        .iter()
        .map(|&(item, quantity, second)| offer_row(item, quantity, second))
        .collect();
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": event.id, "source": SOURCE, "type": "offer.snapshot",
        "data": {"offers": offers}
    }))
    .unwrap()
}

fn csv_file(rows: &Rows) -> Vec<u8> {
    let mut out = String::from("sku,quantity,unit,price,currency,observed_at\n");
    for &(item, quantity, second) in rows {
        let at = feedsafe::domain::timestamp::Timestamp::from_unix_seconds(second)
            .expect("a valid second")
            .to_rfc3339();
        out.push_str(&format!("SOAK-{item:03},{quantity},each,9.50,EUR,{at}\n"));
    }
    out.into_bytes()
}

const WEBHOOKS: &str = "acme-events";
const PULLS: &str = "acme-eu";
const DROPS: &str = "acme-files";

fn webhook_key(event_id: &str) -> String {
    format!("demo/{WEBHOOKS}/ACME-EVT/{SOURCE}/{event_id}")
}

fn page_key(export_id: &str, page: usize) -> String {
    format!("demo/{PULLS}/ACC-1/{export_id}/{page}")
}

/// A drop is named by its file name and the sha256 of its bytes.
fn drop_key(file: &str, body: &[u8]) -> String {
    let digest = feedsafe::domain::hashing::sha256_hex(body);
    format!("demo/{DROPS}/ACC-FILES/{file}@sha256:{digest}")
}

/// What the senders did, for the model.
#[derive(Default)]
struct Sent {
    /// Per delivery key: its connector and every distinct version acknowledged, in order.
    versions: BTreeMap<String, (&'static str, Vec<Rows>)>,
    /// Acknowledged webhook events (for duplicates and mutations to pick from).
    acked: Vec<Event>,
    /// Dropped object versions (file, version, size), for repeated notifications.
    dropped: Vec<(String, String, u64)>,
    /// Webhook attempts answered with something other than 202 (the sender retried).
    rejected_attempts: u64,
    /// Pull runs started (each export is run until every page is enqueued, some twice).
    pull_runs: u64,
    /// Drop notifications handled again (S3 delivers at least once) or retried after a fault.
    renotified: u64,
}

impl Sent {
    fn acknowledged(&mut self, key: String, connector: &'static str, rows: &Rows) {
        let (_, versions) = self
            .versions
            .entry(key)
            .or_insert_with(|| (connector, Vec::new()));
        if !versions.contains(rows) {
            versions.push(rows.clone());
        }
    }
}

async fn post(url: &str, event: &Event, webhook_id: &str) -> u16 {
    post_signed_webhook(url, SECRET, webhook_id, body(event)).await
}

async fn current_offer(query: &QueryService, connector: &str, item: u64) -> Option<(i64, u64)> {
    acceptance::load::current_offer(query, connector, &format!("SOAK-{item:03}")).await
}

fn pick(rng: &mut TestRng, below: u64) -> u64 {
    rng.below(below as usize) as u64
}

/// The number of the next `count` deliveries of the `deliveries` sent in all, if any are left.
fn take_slot(
    next: &std::sync::atomic::AtomicUsize,
    count: usize,
    deliveries: usize,
) -> Option<usize> {
    let n = next.fetch_add(count, std::sync::atomic::Ordering::SeqCst);
    (n < deliveries).then_some(n)
}

/// One of `earlier`, chosen by `rng`, if there is any.
fn any_of<T: Clone>(rng: &mut TestRng, earlier: &[T]) -> Option<T> {
    (!earlier.is_empty()).then(|| earlier[pick(rng, earlier.len() as u64) as usize].clone())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Observed seconds: fresh rows move forward from here, late backfills go back before it.
const BASE: i64 = 1_795_000_000;

/// `n`'s rows: up to `most` rows, fresh (after `BASE`, later for a later `n`) or late.
fn rows(rng: &mut TestRng, n: usize, most: u64, late: bool) -> Rows {
    (0..1 + pick(rng, most))
        .map(|r| {
            let second = if late {
                BASE - 100_000 - (n as i64) * 10 - r as i64
            } else {
                BASE + (n as i64) * 10 + r as i64
            };
            (pick(rng, ITEMS), pick(rng, 500), second)
        })
        .collect()
}

/// A supplier's webhook sender: fresh events, exact duplicates, changed payloads under an
/// acknowledged event id and late backfills, each retried until acknowledged.
async fn webhook_sender(
    mut rng: TestRng,
    url: String,
    deliveries: usize,
    next: Arc<std::sync::atomic::AtomicUsize>,
    sent: Arc<Mutex<Sent>>,
    acks: tokio::sync::mpsc::UnboundedSender<(Instant, u64, i64)>,
) {
    while let Some(n) = take_slot(&next, 1, deliveries) {
        let roll = pick(&mut rng, 100);
        let earlier = any_of(&mut rng, &sent.lock().unwrap().acked);
        let (kind, event) = match (roll, earlier) {
            (0..=14, Some(e)) => (Kind::Duplicate, e),
            (15..=19, Some(mut e)) => {
                // Another quantity under the same event id.
                e.rows[0].1 += 1 + pick(&mut rng, 1000);
                (Kind::Mutated, e)
            }
            (20..=29, _) => (
                Kind::Late,
                Event {
                    id: format!("late-{n}"),
                    rows: rows(&mut rng, n, 3, true),
                },
            ),
            _ => (
                Kind::Fresh,
                Event {
                    id: format!("evt-{n}"),
                    rows: rows(&mut rng, n, 5, false),
                },
            ),
        };
        // A supplier retries until it is acknowledged.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let status = post(&url, &event, &format!("msg-{n}-{attempt}")).await;
            if status == 202 {
                break;
            }
            sent.lock().unwrap().rejected_attempts += 1;
            assert!(
                attempt < 50,
                "delivery {n} never acknowledged (last {status})"
            );
            tokio::time::sleep(Duration::from_millis(50 * attempt.min(10))).await;
        }
        if n.is_multiple_of(200) {
            println!("soak: delivery {n} acknowledged after {attempt} attempt(s)");
        }
        let mut s = sent.lock().unwrap();
        s.acknowledged(webhook_key(&event.id), WEBHOOKS, &event.rows);
        if kind == Kind::Fresh || kind == Kind::Late {
            if kind == Kind::Fresh && n.is_multiple_of(10) {
                let (item, _, second) = event.rows[0];
                let _ = acks.send((Instant::now(), item, second));
            }
            s.acked.push(event);
        }
    }
}

/// The scheduler's part: one export after another from the supplier's paginated API, each
/// run (through the faulty adapters) until every page is enqueued; one run in five is
/// started again at once, while its pages are still uncommitted, which re-enqueues them.
async fn pull_sender(
    mut rng: TestRng,
    supplier: &local_stack::fake_supplier::FakeSupplierHandle,
    pull: &feedsafe::intake::poller::PullService,
    deliveries: usize,
    next: Arc<std::sync::atomic::AtomicUsize>,
    sent: Arc<Mutex<Sent>>,
) {
    let connector = feedsafe::domain::ids::ConnectorId::parse(PULLS).unwrap();
    for export in 0.. {
        let pages = 1 + pick(&mut rng, 3) as usize;
        let Some(n) = take_slot(&next, pages, deliveries) else {
            return;
        };
        let late = pick(&mut rng, 10) == 0;
        let export_id = format!("EXP-SOAK-{export}");
        let page_rows: Vec<Rows> = (0..pages).map(|p| rows(&mut rng, n + p, 3, late)).collect();
        supplier.set_export(
            PULLS,
            &export_id,
            page_rows
                .iter()
                .map(|r| r.iter().map(|&(i, q, s)| offer_row(i, q, s)).collect())
                .collect(),
        );
        let runs = 1 + usize::from(pick(&mut rng, 5) == 0);
        for _ in 0..runs {
            for attempt in 1.. {
                sent.lock().unwrap().pull_runs += 1;
                match pull.run_connector(&connector).await {
                    Ok(report) if report.failed.is_empty() => break,
                    _ => {
                        assert!(attempt < 50, "{export_id} never fully enqueued");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
        let mut s = sent.lock().unwrap();
        for (p, r) in page_rows.iter().enumerate() {
            s.acknowledged(page_key(&export_id, p + 1), PULLS, r);
        }
    }
}

/// Files dropped into the bucket (the supplier's side, not faulty): new files, new versions
/// of a file already dropped, and notifications S3 delivers again for a version already seen.
async fn drop_sender(
    mut rng: TestRng,
    env: Arc<TestEnv>,
    drops: feedsafe::intake::drops::DropService,
    deliveries: usize,
    next: Arc<std::sync::atomic::AtomicUsize>,
    sent: Arc<Mutex<Sent>>,
) {
    while let Some(n) = take_slot(&next, 1, deliveries) {
        let roll = pick(&mut rng, 100);
        let earlier = any_of(&mut rng, &sent.lock().unwrap().dropped);
        if let (0..=14, Some((file, version, size))) = (roll, &earlier) {
            let object = feedsafe::intake::drops::DroppedObject {
                bucket: env.bucket.clone(),
                key: format!("drops/{DROPS}/{file}"),
                version_id: Some(version.clone()),
                size: *size,
            };
            for attempt in 1.. {
                sent.lock().unwrap().renotified += 1;
                if drops.handle(&object).await.is_ok() {
                    break;
                }
                assert!(attempt < 50, "{file}@{version} never enqueued again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        }
        // A new version of an earlier file, or a new file.
        let file = match (roll, earlier) {
            (15..=24, Some((file, _, _))) => file,
            _ => format!("soak-{n}.csv"),
        };
        let rows = rows(&mut rng, n, 3, roll >= 90);
        let body = csv_file(&rows);
        let size = body.len() as u64;
        let key = drop_key(&file, &body);
        let version = env.drop_file(DROPS, &file, body).await;
        let mut s = sent.lock().unwrap();
        s.acknowledged(key, DROPS, &rows);
        s.dropped.push((file, version, size));
    }
}

/// What sending left: the senders' record, when sending started, how long it took, and the
/// latency sampler, still running.
struct Sending {
    sent: Sent,
    started: Instant,
    sending: Duration,
    sampler: tokio::task::JoinHandle<Vec<f64>>,
}

/// Every delivery sent at once by the webhook senders, the pull scheduler and the file
/// dropper, with the latency sampler beside them; returns once all are acknowledged.
async fn send_all_deliveries(
    seed: u64,
    deliveries: usize,
    env: &Arc<TestEnv>,
    stack: &local_stack::Stack,
) -> Sending {
    let url = format!("{}/v1/webhooks/{WEBHOOKS}", stack.base_url());
    let sent = Arc::new(Mutex::new(Sent::default()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // (acknowledged at, item, observed second) of every tenth fresh event, for the latency.
    let (acks, acked_rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, u64, i64)>();
    let started = Instant::now();
    let mut senders = Vec::new();
    for sender in 0..WEBHOOK_SENDERS {
        senders.push(tokio::spawn(webhook_sender(
            TestRng::seeded(seed.wrapping_add(sender as u64 * 7919)),
            url.clone(),
            deliveries,
            next.clone(),
            sent.clone(),
            acks.clone(),
        )));
    }
    // The pull scheduler runs on this task (the supplier's handle stays with the stack).
    let pulls = pull_sender(
        TestRng::seeded(seed ^ 0x5011),
        &stack.supplier,
        &stack.services.pull,
        deliveries,
        next.clone(),
        sent.clone(),
    );
    senders.push(tokio::spawn(drop_sender(
        TestRng::seeded(seed ^ 0xD209),
        env.clone(),
        stack.services.drops.clone(),
        deliveries,
        next.clone(),
        sent.clone(),
    )));
    let sampler = spawn_latency_sampler(env.query(), acked_rx);
    drop(acks);
    let others = async {
        for sender in senders {
            sender.await.unwrap();
        }
    };
    tokio::join!(pulls, others);
    let sending = started.elapsed();
    println!(
        "soak: all {deliveries} deliveries acknowledged in {:.1} s; checking the state",
        sending.as_secs_f64()
    );
    let sent = std::mem::take(&mut *sent.lock().unwrap());
    Sending {
        sent,
        started,
        sending,
        sampler,
    }
}

/// Latency sample: acknowledgement -> the claim (or a newer one) is the item's current offer.
fn spawn_latency_sampler(
    query: QueryService,
    acked_rx: tokio::sync::mpsc::UnboundedReceiver<(Instant, u64, i64)>,
) -> tokio::task::JoinHandle<Vec<f64>> {
    tokio::spawn(async move {
        let mut pending: Vec<(Instant, u64, i64)> = Vec::new();
        let mut latencies = Vec::new();
        // After the last acknowledgement, samples get 120 s to become readable.
        let mut feed = AckFeed::new(acked_rx, Duration::from_secs(120));
        while feed.keep_going(!pending.is_empty()) {
            pending.extend(feed.arrived());
            let mut still = Vec::new();
            for (acked, item, second) in pending.drain(..) {
                if current_offer(&query, WEBHOOKS, item)
                    .await
                    .is_some_and(|(at, _)| at >= second)
                {
                    latencies.push(acked.elapsed().as_secs_f64() * 1000.0);
                } else {
                    still.push((acked, item, second));
                }
            }
            pending = still;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        latencies
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "opt-in soak: scripts/soak"]
async fn soak_under_injected_faults() {
    let deliveries = env_number("FEEDSAFE_SOAK_DELIVERIES", 2000.0) as usize;
    let rate = env_number("FEEDSAFE_SOAK_FAULT_RATE", 0.05);
    let seed = test_seed();
    println!(
        "soak: {deliveries} deliveries, {:.1} % faults, FEEDSAFE_SEED={seed}",
        rate * 100.0
    );
    let env = Arc::new(spawn_heavy_env(true, "soak").await);
    let faults = FaultInjector::new(seed, rate);
    // A batch of ten under injected timeouts takes seconds on the local engines; a shorter
    // visibility would have the other pollers redo the work in flight (stress that the model
    // and the crash matrix cover), a longer one would delay each failed message's retry.
    let stack = spawn_stack_on(&env, faults.wrap(&env.clients), 10).await;
    faults.arm();
    let Sending {
        sent,
        started,
        sending,
        sampler,
    } = send_all_deliveries(seed, deliveries, &env, &stack).await;

    // The model: per delivery key, one stored version with exactly its rows, every other
    // acknowledged version quarantined once; per connector and item, the newest observed claim
    // among stored versions is the current offer.
    let quiet = Instant::now();
    let records = committed_records(&env, &sent).await;
    let stored = check_stored_rows(&env, &sent, &records).await;
    let entries = env.quarantine().await;
    let quarantine_errors = quarantine_mismatches(&sent, &entries);
    let newest = newest_claims(&stored.versions);
    let offer_errors = offer_mismatches(&env, &newest).await;
    let settled = started.elapsed();
    let mut latencies = sampler.await.unwrap();
    latencies.sort_by(f64::total_cmp);
    let dead = dead_letters(&env).await;
    let replays: u32 = records
        .values()
        .flatten()
        .map(|r| r.attempts.saturating_sub(1))
        .sum();
    let calls = faults.calls();
    stack.stop().await;

    let findings = Findings {
        duplicates: stored.duplicates,
        lost: stored.lost,
        unexpected: stored.unexpected,
        quarantine_errors,
        offer_errors,
        dead,
    };
    let figures = Figures {
        deliveries,
        sent: &sent,
        sending,
        settled,
        quiet,
        latencies,
        faults: &faults,
        calls,
        replays,
        quarantined: entries.len(),
    };
    print_figures(&figures, &findings);
    assert_state_equals_the_model(findings);
}
