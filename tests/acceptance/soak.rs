//! The fault-injected soak (issue 9), opt-in: `scripts/soak` (or
//! `cargo test -p acceptance --test acceptance soak -- --ignored --nocapture`).
//!
//! The local stack takes `FEEDSAFE_SOAK_DELIVERIES` (2,000) signed webhooks from 8 concurrent
//! senders -- fresh events, exact duplicates, changed payloads under an acknowledged event id,
//! late backfills -- while `FEEDSAFE_SOAK_FAULT_RATE` (5 %) of its DynamoDB and S3 calls fail,
//! half before the request is sent and half after it ran. At the end: every acknowledged event
//! is stored once with exactly its rows, each changed payload is quarantined once, the current
//! offer of every item is the one the model says, the dead-letter queue is empty (no permanent
//! fault was injected); it prints throughput, acknowledgement-to-readable latency and counts.

use acceptance::*;
use feedsafe::webhook::{sign, SigningSecret};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The sample secret of the local `acme-events` connector (not a production secret).
const SECRET: &str = "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1ub3QtZm9yLXByb2R1Y3Rpb24=";
const SENDERS: usize = 8;
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

/// One event as the supplier means it: its id, rows (item, quantity, observed second).
#[derive(Debug, Clone)]
struct Event {
    id: String,
    rows: Vec<(u64, u64, i64)>,
}

fn body(event: &Event) -> Vec<u8> {
    let offers: Vec<Value> = event
        .rows
        .iter()
        .map(|(item, quantity, second)| {
            json!({
                "sku": format!("SOAK-{item:03}"), "quantity": quantity, "unit": "each",
                "price": "9.50", "currency": "EUR",
                "observed_at": feedsafe::timestamp::Timestamp::from_unix_seconds(*second).expect("a valid second").to_rfc3339(),
            })
        })
        .collect();
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": event.id, "source": SOURCE, "type": "offer.snapshot",
        "data": {"offers": offers}
    }))
    .unwrap()
}

fn delivery_key(event_id: &str) -> String {
    format!("demo/acme-events/ACME-EVT/{SOURCE}/{event_id}")
}

/// What the senders did, for the model.
#[derive(Default)]
struct Sent {
    /// Acknowledged events, every version acknowledged, in acknowledgement order.
    versions: BTreeMap<String, Vec<Event>>,
    /// Acknowledged events in order (for duplicates and mutations to pick from).
    acked: Vec<String>,
    rejected_attempts: u64,
}

async fn post(url: &str, event: &Event, webhook_id: &str) -> u16 {
    let body = body(event);
    let now = feedsafe::timestamp::Timestamp::now().unix_seconds();
    let secret = SigningSecret::parse(SECRET).unwrap();
    let signature = sign(&secret, webhook_id, now, &body);
    let url = url.to_owned();
    let webhook_id = webhook_id.to_owned();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        agent
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", &webhook_id)
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", &signature)
            .send(&body[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(599)
    })
    .await
    .unwrap()
}

/// The item's current offer from the soak's source, read through the query service (the
/// readers' route): (observed second, quantity).
async fn current_offer(query: &feedsafe::query::QueryService, item: u64) -> Option<(i64, u64)> {
    let reader = feedsafe::query::Principal {
        tenant: feedsafe::ids::TenantId::parse("demo").unwrap(),
        scopes: vec!["offers:read".into()],
        subject: None,
    };
    let now = feedsafe::timestamp::Timestamp::now();
    let offers = query
        .offers(&reader, &format!("SOAK-{item:03}"), None, now)
        .await
        .ok()?;
    offers["offers"].as_array()?.iter().find_map(|o| {
        (o["connector"] == "acme-events").then(|| {
            let at = feedsafe::timestamp::Timestamp::parse(o["observed_at"].as_str()?).ok()?;
            Some((at.unix_seconds(), o["quantity"].as_u64()?))
        })?
    })
}

fn pick(rng: &mut TestRng, below: u64) -> u64 {
    rng.below(below as usize) as u64
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    let env = spawn_heavy_env(true, "soak").await;
    let faults = FaultInjector::new(seed, rate);
    let stack = spawn_stack_on(&env, faults.wrap(&env.clients)).await;
    faults.arm();
    let url = format!("{}/v1/webhooks/acme-events", stack.base_url());

    // Observed seconds: fresh events move forward, late backfills go back before the start.
    let base: i64 = 1_795_000_000;
    let sent = Arc::new(Mutex::new(Sent::default()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // (acknowledged at, item, observed second) of every tenth fresh event, for the latency.
    let (acks, mut acked_rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, u64, i64)>();
    let started = Instant::now();
    let mut senders = Vec::new();
    for sender in 0..SENDERS {
        let (sent, next, url, acks) = (sent.clone(), next.clone(), url.clone(), acks.clone());
        senders.push(tokio::spawn(async move {
            let mut rng = TestRng::seeded(seed.wrapping_add(sender as u64 * 7919));
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n >= deliveries {
                    return;
                }
                let roll = pick(&mut rng, 100);
                let earlier = {
                    let s = sent.lock().unwrap();
                    (!s.acked.is_empty()).then(|| {
                        let id = s.acked[pick(&mut rng, s.acked.len() as u64) as usize].clone();
                        s.versions[&id][0].clone()
                    })
                };
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
                            rows: (0..1 + pick(&mut rng, 3))
                                .map(|r| {
                                    (
                                        pick(&mut rng, ITEMS),
                                        pick(&mut rng, 500),
                                        base - 100_000 - (n as i64) * 10 - r as i64,
                                    )
                                })
                                .collect(),
                        },
                    ),
                    _ => (
                        Kind::Fresh,
                        Event {
                            id: format!("evt-{n}"),
                            rows: (0..1 + pick(&mut rng, 5))
                                .map(|r| {
                                    (
                                        pick(&mut rng, ITEMS),
                                        pick(&mut rng, 500),
                                        base + (n as i64) * 10 + r as i64,
                                    )
                                })
                                .collect(),
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
                if n % 100 == 0 {
                    println!("soak: delivery {n} acknowledged after {attempt} attempt(s)");
                }
                let mut s = sent.lock().unwrap();
                let versions = s.versions.entry(event.id.clone()).or_default();
                let new_version = !versions.iter().any(|v| v.rows == event.rows);
                if new_version {
                    versions.push(event.clone());
                }
                if kind != Kind::Duplicate && kind != Kind::Mutated {
                    s.acked.push(event.id.clone());
                    if kind == Kind::Fresh && n % 10 == 0 {
                        let (item, _, second) = event.rows[0];
                        let _ = acks.send((Instant::now(), item, second));
                    }
                }
            }
        }));
    }

    // Latency sample: acknowledgement -> the claim (or a newer one) is the item's current offer.
    let sampler = {
        let query = env.query();
        tokio::spawn(async move {
            let mut pending: Vec<(Instant, u64, i64)> = Vec::new();
            let mut latencies = Vec::new();
            let mut open = true;
            // After the last acknowledgement, samples get 120 s to become readable.
            let mut deadline = Instant::now() + Duration::from_secs(3600);
            while (open || !pending.is_empty()) && Instant::now() < deadline {
                loop {
                    match acked_rx.try_recv() {
                        Ok(ack) => pending.push(ack),
                        Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                            if open {
                                deadline = Instant::now() + Duration::from_secs(120);
                            }
                            open = false;
                            break;
                        }
                    }
                }
                let mut still = Vec::new();
                for (acked, item, second) in pending.drain(..) {
                    if current_offer(&query, item)
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
    };
    drop(acks);
    for sender in senders {
        sender.await.unwrap();
    }
    let sending = started.elapsed();
    println!(
        "soak: all {deliveries} acknowledged in {:.1} s; checking the state",
        sending.as_secs_f64()
    );
    let sent = std::mem::take(&mut *sent.lock().unwrap());

    // The model: per event, one stored version with exactly its rows, every other acknowledged
    // version quarantined once; per item, the newest observed claim among stored versions.
    let mut lost = Vec::new();
    let mut duplicates = Vec::new();
    let mut stored_versions: HashMap<String, Event> = HashMap::new();
    let quiet = Instant::now();
    // One deadline for everything acknowledged to be stored.
    let deadline = Instant::now() + Duration::from_secs(300);
    for (id, versions) in &sent.versions {
        let key = delivery_key(id);
        let record = loop {
            match env.replay(&key).await {
                Some(r) if r.state == feedsafe::model::ReplayState::Committed => break Some(r),
                _ if Instant::now() > deadline => break None,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let Some(record) = record else {
            lost.push(key);
            continue;
        };
        let observations = env.observations_of(&key).await;
        let distinct: BTreeSet<String> = observations
            .iter()
            .map(|o| o.observation_id.to_string())
            .collect();
        if distinct.len() != observations.len()
            || observations.len() != record.observation_ids.len()
        {
            duplicates.push(key.clone());
        }
        let quantities: Vec<u64> = {
            let mut o = observations.clone();
            o.sort_by_key(|o| o.row_index);
            o.iter().map(|o| o.quantity).collect()
        };
        match versions
            .iter()
            .find(|v| v.rows.iter().map(|r| r.1).collect::<Vec<_>>() == quantities)
        {
            Some(version) => {
                stored_versions.insert(id.clone(), version.clone());
            }
            None => lost.push(format!("{key}: stored rows match no acknowledged version")),
        }
    }
    println!(
        "soak: {} events stored, {} lost, {} with duplicates",
        stored_versions.len(),
        lost.len(),
        duplicates.len()
    );
    // Each other version quarantined exactly once.
    let mut quarantine_errors = Vec::new();
    let entries = env.quarantine().await;
    for (id, versions) in &sent.versions {
        let key = delivery_key(id);
        let found = entries
            .iter()
            .filter(|e| e.delivery_key.as_deref() == Some(key.as_str()))
            .count();
        if found != versions.len() - 1 {
            quarantine_errors.push(format!(
                "{key}: {found} quarantine entries, {} versions",
                versions.len()
            ));
        }
    }
    // Current offers: the newest observed claim per item among stored versions.
    let mut newest: BTreeMap<u64, (i64, u64)> = BTreeMap::new();
    for event in stored_versions.values() {
        for &(item, quantity, second) in &event.rows {
            let slot = newest.entry(item).or_insert((second, quantity));
            if second > slot.0 {
                *slot = (second, quantity);
            }
        }
    }
    let query = env.query();
    let mut offer_errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for (item, (second, quantity)) in &newest {
        loop {
            let got = current_offer(&query, *item).await;
            if got == Some((*second, *quantity)) {
                break;
            }
            if Instant::now() > deadline {
                offer_errors.push(format!(
                    "SOAK-{item:03}: current {got:?}, model ({second}, {quantity})"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let settled = started.elapsed();
    let mut latencies = sampler.await.unwrap();
    latencies.sort_by(f64::total_cmp);
    let dlq = env.resources.queue("IngestDLQ").unwrap().url.clone();
    let dead = env
        .clients
        .sqs
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .unwrap()
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
                .cloned()
        })
        .unwrap_or_default();
    let keys: Vec<String> = sent.versions.keys().map(|id| delivery_key(id)).collect();
    let records: Vec<_> = futures_util::future::join_all(keys.iter().map(|k| env.replay(k))).await;
    let replays: u32 = records
        .iter()
        .flatten()
        .map(|r| r.attempts.saturating_sub(1))
        .sum();
    stack.stop().await;

    println!("| figure | value |");
    println!("|---|---:|");
    println!("| deliveries sent (acknowledged) | {deliveries} |");
    println!("| distinct events stored | {} |", stored_versions.len());
    println!(
        "| sending time | {:.1} s ({:.1} deliveries/s) |",
        sending.as_secs_f64(),
        deliveries as f64 / sending.as_secs_f64()
    );
    println!(
        "| until the state equals the model | {:.1} s (checks took {:.1} s) |",
        settled.as_secs_f64(),
        quiet.elapsed().as_secs_f64()
    );
    println!(
        "| acknowledgement -> readable offer, p50 / p99 ({} samples) | {:.0} ms / {:.0} ms |",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    println!(
        "| injected faults (before sending / after the request ran) | {} / {} |",
        faults.injected.0.load(std::sync::atomic::Ordering::Relaxed),
        faults.injected.1.load(std::sync::atomic::Ordering::Relaxed)
    );
    println!(
        "| webhook attempts refused (5xx, retried by the sender) | {} |",
        sent.rejected_attempts
    );
    println!("| replays counted on records | {replays} |");
    println!(
        "| quarantine entries (changed payloads) | {} |",
        entries.len()
    );
    println!("| dead-letter queue | {dead} |");
    println!(
        "| duplicates / lost / quarantine mismatches / offer mismatches | {} / {} / {} / {} |",
        duplicates.len(),
        lost.len(),
        quarantine_errors.len(),
        offer_errors.len()
    );

    assert!(duplicates.is_empty(), "duplicates: {duplicates:?}");
    assert!(lost.is_empty(), "lost acknowledged deliveries: {lost:?}");
    assert!(quarantine_errors.is_empty(), "{quarantine_errors:?}");
    assert!(offer_errors.is_empty(), "{offer_errors:?}");
    assert_eq!(
        dead, "0",
        "no permanent fault was injected: the DLQ must be empty"
    );
}
