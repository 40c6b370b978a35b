//! The soak's checks of the stored state against its model, and the figures it prints.

use super::*;

/// Every acknowledged delivery's replay record once committed, under one deadline for all;
/// `None` for a delivery not committed by then.
pub(super) async fn committed_records(
    env: &TestEnv,
    sent: &Sent,
) -> BTreeMap<String, Option<feedsafe::domain::model::ReplayRecord>> {
    // One deadline for everything acknowledged to be committed.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut records = BTreeMap::new();
    for key in sent.versions.keys() {
        let record = loop {
            match env.replay(key).await {
                Some(r) if r.state == feedsafe::domain::model::ReplayState::Committed => {
                    break Some(r)
                }
                _ if Instant::now() > deadline => break None,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        records.insert(key.clone(), record);
    }
    records
}

/// The stored observations, per delivery key.
pub(super) async fn stored_rows_by_delivery(
    env: &TestEnv,
) -> BTreeMap<String, Vec<feedsafe::domain::model::Observation>> {
    let mut stored_rows: BTreeMap<String, Vec<feedsafe::domain::model::Observation>> =
        BTreeMap::new();
    for o in env.observations().await {
        stored_rows
            .entry(o.delivery_key.clone())
            .or_default()
            .push(o);
    }
    stored_rows
}

/// The stored rows held against the acknowledged versions.
pub(super) struct StoredCheck {
    /// Per delivery stored as one acknowledged version: its connector and that version's rows.
    pub(super) versions: Vec<(&'static str, Rows)>,
    pub(super) lost: Vec<String>,
    pub(super) duplicates: Vec<String>,
    /// Delivery keys stored but never sent.
    pub(super) unexpected: Vec<String>,
}

/// Each acknowledged delivery stored once, with exactly one acknowledged version's rows.
pub(super) async fn check_stored_rows(
    env: &TestEnv,
    sent: &Sent,
    records: &BTreeMap<String, Option<feedsafe::domain::model::ReplayRecord>>,
) -> StoredCheck {
    let mut stored_rows = stored_rows_by_delivery(env).await;
    let mut lost = Vec::new();
    let mut duplicates = Vec::new();
    let mut stored_versions: Vec<(&'static str, Rows)> = Vec::new();
    for (key, (connector, versions)) in &sent.versions {
        let mut observations = stored_rows.remove(key).unwrap_or_default();
        let Some(record) = &records[key] else {
            lost.push(format!("{key}: not committed"));
            continue;
        };
        observations.sort_by_key(|o| o.row_index);
        let distinct: BTreeSet<String> = observations
            .iter()
            .map(|o| o.observation_id.to_string())
            .collect();
        if distinct.len() != observations.len()
            || observations.len() != record.observation_ids.len()
        {
            duplicates.push(key.clone());
        }
        let quantities: Vec<u64> = observations
            .iter()
            .map(|o| o.quantity.whole().expect("the soak sends whole quantities"))
            .collect();
        match versions
            .iter()
            .find(|v| v.iter().map(|r| r.1).collect::<Vec<_>>() == quantities)
        {
            Some(version) => stored_versions.push((connector, version.clone())),
            None => lost.push(format!("{key}: stored rows match no acknowledged version")),
        }
    }
    let unexpected: Vec<String> = stored_rows.into_keys().collect();
    println!(
        "soak: {} deliveries stored, {} lost, {} with duplicates, {} stored but never sent",
        stored_versions.len(),
        lost.len(),
        duplicates.len(),
        unexpected.len()
    );
    StoredCheck {
        versions: stored_versions,
        lost,
        duplicates,
        unexpected,
    }
}

/// Each other version quarantined exactly once: the deliveries where that does not hold.
pub(super) fn quarantine_mismatches(
    sent: &Sent,
    entries: &[feedsafe::domain::model::QuarantineEntry],
) -> Vec<String> {
    let mut quarantine_errors = Vec::new();
    for (key, (_, versions)) in &sent.versions {
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
    quarantine_errors
}

/// The model's current offers: the newest observed claim per connector and item among stored
/// versions, as (observed second, quantity).
pub(super) fn newest_claims(
    stored_versions: &[(&'static str, Rows)],
) -> BTreeMap<(&'static str, u64), (i64, u64)> {
    let mut newest: BTreeMap<(&str, u64), (i64, u64)> = BTreeMap::new();
    for (connector, rows) in stored_versions {
        for &(item, quantity, second) in rows {
            let slot = newest
                .entry((connector, item))
                .or_insert((second, quantity));
            if second > slot.0 {
                *slot = (second, quantity);
            }
        }
    }
    newest
}

/// Each item's current offer, waited for under one deadline: those that differ from the model.
pub(super) async fn offer_mismatches(
    env: &TestEnv,
    newest: &BTreeMap<(&str, u64), (i64, u64)>,
) -> Vec<String> {
    let query = env.query();
    let mut offer_errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    for ((connector, item), (second, quantity)) in newest {
        loop {
            let got = current_offer(&query, connector, *item).await;
            if got == Some((*second, *quantity)) {
                break;
            }
            if Instant::now() > deadline {
                offer_errors.push(format!(
                    "{connector} SOAK-{item:03}: current {got:?}, model ({second}, {quantity})"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    offer_errors
}

/// The dead-letter queue's approximate number of messages.
pub(super) async fn dead_letters(env: &TestEnv) -> String {
    let dlq = env.resources.queue("IngestDLQ").unwrap().url.clone();
    env.clients
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
        .unwrap_or_default()
}

/// What the checks found against the model; every list must be empty and the DLQ at "0".
pub(super) struct Findings {
    pub(super) duplicates: Vec<String>,
    pub(super) lost: Vec<String>,
    pub(super) unexpected: Vec<String>,
    pub(super) quarantine_errors: Vec<String>,
    pub(super) offer_errors: Vec<String>,
    /// The dead-letter queue's approximate number of messages.
    pub(super) dead: String,
}

/// The run's figures for the printed table.
pub(super) struct Figures<'a> {
    pub(super) deliveries: usize,
    pub(super) sent: &'a Sent,
    pub(super) sending: Duration,
    pub(super) settled: Duration,
    /// When the checks began.
    pub(super) quiet: Instant,
    /// Sorted latency samples, in milliseconds.
    pub(super) latencies: Vec<f64>,
    pub(super) faults: &'a FaultInjector,
    pub(super) calls: u64,
    pub(super) replays: u32,
    /// Quarantine entries (mismatches).
    pub(super) quarantined: usize,
}

/// The figures table (docs/benchmarks.md).
pub(super) fn print_figures(figures: &Figures, findings: &Findings) {
    let Figures {
        deliveries,
        sent,
        sending,
        settled,
        quiet,
        latencies,
        faults,
        calls,
        replays,
        quarantined,
    } = figures;
    let by = |connector: &str| {
        sent.versions
            .values()
            .filter(|(c, _)| *c == connector)
            .count()
    };
    println!("| figure | value |");
    println!("|---|---:|");
    println!("| deliveries sent and acknowledged | {deliveries} |");
    println!(
        "| distinct deliveries (webhook events / export pages / file versions) | {} ({} / {} / {}) |",
        sent.versions.len(),
        by(WEBHOOKS),
        by(PULLS),
        by(DROPS)
    );
    println!(
        "| sending time | {:.1} s ({:.1} deliveries/s) |",
        sending.as_secs_f64(),
        *deliveries as f64 / sending.as_secs_f64()
    );
    println!(
        "| until the state equals the model | {:.1} s ({:.1} deliveries/s end to end; checks took {:.1} s) |",
        settled.as_secs_f64(),
        *deliveries as f64 / settled.as_secs_f64(),
        quiet.elapsed().as_secs_f64()
    );
    println!(
        "| webhook acknowledgement -> readable offer, p50 / p99 ({} samples) | {:.0} ms / {:.0} ms |",
        latencies.len(),
        percentile(latencies, 0.5),
        percentile(latencies, 0.99)
    );
    println!(
        "| DynamoDB and S3 calls / injected timeouts (before sending / after the request ran) | {calls} / {} / {} |",
        faults.injected().0,
        faults.injected().1
    );
    println!(
        "| retries: webhook attempts refused / pull runs started / drop notifications handled again | {} / {} / {} |",
        sent.rejected_attempts, sent.pull_runs, sent.renotified
    );
    println!("| replays counted on replay records | {replays} |");
    println!("| mismatches quarantined (changed payloads under an old identity) | {quarantined} |");
    println!("| dead-letter queue | {} |", findings.dead);
    println!(
        "| duplicates / lost / stored-never-sent / quarantine mismatches / offer mismatches | {} / {} / {} / {} / {} |",
        findings.duplicates.len(),
        findings.lost.len(),
        findings.unexpected.len(),
        findings.quarantine_errors.len(),
        findings.offer_errors.len()
    );
}

/// The state equals the model: nothing duplicated, lost or stored unsent, quarantine and
/// current offers as the model says, the dead-letter queue empty.
pub(super) fn assert_state_equals_the_model(findings: Findings) {
    let Findings {
        duplicates,
        lost,
        unexpected,
        quarantine_errors,
        offer_errors,
        dead,
    } = findings;
    assert!(duplicates.is_empty(), "duplicates: {duplicates:?}");
    assert!(lost.is_empty(), "lost acknowledged deliveries: {lost:?}");
    assert!(
        unexpected.is_empty(),
        "stored but never sent: {unexpected:?}"
    );
    assert!(quarantine_errors.is_empty(), "{quarantine_errors:?}");
    assert!(offer_errors.is_empty(), "{offer_errors:?}");
    assert_eq!(
        dead, "0",
        "no permanent fault was injected: the DLQ must be empty"
    );
}
