//! The drill's check, through the HTTP routes only: every expected observation stored once,
//! current in the offers, its raw artifact downloadable with the right sha256, and each changed
//! payload quarantined.

use super::{agent, call, DrillState, Expected, OPERATOR, READER};
use anyhow::{Context, Result};
use feedsafe::domain::hashing::sha256_hex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the check found.
#[derive(Debug, Default)]
pub(super) struct Findings {
    pub(super) stored: u64,
    pub(super) duplicates: u64,
    pub(super) lost: Vec<String>,
    pub(super) wrong: Vec<String>,
    pub(super) projected: u64,
    pub(super) not_projected: Vec<String>,
    pub(super) artifacts_checked: u64,
    pub(super) artifact_mismatches: Vec<String>,
    pub(super) quarantined: u64,
    pub(super) not_quarantined: Vec<String>,
    pub(super) drain_seconds: f64,
}

impl Findings {
    pub(super) fn clean(&self) -> bool {
        self.duplicates == 0
            && self.lost.is_empty()
            && self.wrong.is_empty()
            && self.not_projected.is_empty()
            && self.artifact_mismatches.is_empty()
            && self.not_quarantined.is_empty()
    }
}

/// Waits until every expected item shows an observation (or the deadline), then checks each
/// one, its artifact, and the quarantine, through the HTTP routes.
/// `since`: when the last event was acknowledged (the drain is measured from there).
pub(super) fn check(
    api: &str,
    moto: &str,
    state: &DrillState,
    since: Instant,
    deadline: Instant,
) -> Result<Findings> {
    let agent = agent();
    let start = since;
    let mut findings = Findings::default();
    let mut histories: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut missing: Vec<&Expected> = state.expected.iter().collect();
    loop {
        let mut still = Vec::new();
        for e in missing {
            let (status, body) = call(
                &agent,
                "GET",
                &format!("{api}/v1/items/{}/observations", e.sku),
                READER,
                None,
            )?;
            let observations = body["observations"].as_array().cloned().unwrap_or_default();
            if status == 200 && !observations.is_empty() {
                histories.insert(e.sku.clone(), observations);
            } else {
                still.push(e);
            }
        }
        missing = still;
        if missing.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    findings.drain_seconds = start.elapsed().as_secs_f64();
    findings.lost = missing.iter().map(|e| e.sku.clone()).collect();
    let presigned_host = moto.trim_end_matches('/');
    for e in &state.expected {
        let Some(observations) = histories.get(&e.sku) else {
            continue;
        };
        if observations.len() > 1 {
            findings.duplicates += observations.len() as u64 - 1;
        }
        let o = &observations[0];
        if o["quantity"].as_u64() != Some(e.quantity) {
            findings.wrong.push(format!(
                "{}: quantity {} (sent {})",
                e.sku, o["quantity"], e.quantity
            ));
        }
        findings.stored += 1;
        // The current view (the projector's table, fed by the stream) shows it too, a moment
        // after the evidence at most.
        let mut current = None;
        for _ in 0..20 {
            let (_, offers) = call(
                &agent,
                "GET",
                &format!("{api}/v1/items/{}/offers", e.sku),
                READER,
                None,
            )?;
            current = offers["offers"].as_array().and_then(|o| o.first()).cloned();
            if current.as_ref().and_then(|o| o["quantity"].as_u64()) == Some(e.quantity) {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if current.as_ref().and_then(|o| o["quantity"].as_u64()) == Some(e.quantity) {
            findings.projected += 1;
        } else {
            findings
                .not_projected
                .push(format!("{}: current offer {current:?}", e.sku));
        }
        let id = o["observation_id"].as_str().unwrap_or_default();
        let (status, link) = call(
            &agent,
            "GET",
            &format!("{api}/v1/observations/{id}/artifact"),
            OPERATOR,
            None,
        )?;
        let url = link["url"].as_str().unwrap_or_default();
        if status != 200 || !url.starts_with(presigned_host) {
            findings
                .artifact_mismatches
                .push(format!("{}: artifact link {status} {link}", e.sku));
            continue;
        }
        let mut response = agent
            .get(url)
            .call()
            .with_context(|| format!("GET {url}"))?;
        let bytes = response
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_vec()?;
        let actual = sha256_hex(&bytes);
        let announced = link["sha256"].as_str().unwrap_or_default();
        findings.artifacts_checked += 1;
        if response.status() != 200
            || actual != announced
            || e.artifact_sha256
                .as_deref()
                .is_some_and(|sent| sent != actual)
        {
            findings.artifact_mismatches.push(format!(
                "{}: downloaded sha256 {actual}, announced {announced}, sent {:?}",
                e.sku, e.artifact_sha256
            ));
        }
    }
    let (_, body) = call(
        &agent,
        "GET",
        &format!("{api}/v1/quarantine"),
        OPERATOR,
        None,
    )?;
    let entries = body["entries"].as_array().cloned().unwrap_or_default();
    for key in &state.quarantined {
        if entries.iter().any(|q| {
            q["delivery_key"].as_str() == Some(key) && q["reason_code"] == "replay_payload_mismatch"
        }) {
            findings.quarantined += 1;
        } else {
            findings.not_quarantined.push(key.clone());
        }
    }
    Ok(findings)
}

pub(super) fn report(label: &str, sent: &[(&str, u64)], f: &Findings) {
    println!("\n== drill {label}");
    for (name, value) in sent {
        println!("  {name:<22} {value}");
    }
    println!("  {:<22} {}", "stored", f.stored);
    println!("  {:<22} {}", "duplicates", f.duplicates);
    println!("  {:<22} {}", "lost", f.lost.len());
    println!("  {:<22} {}", "wrong values", f.wrong.len());
    println!(
        "  {:<22} {} current, {} not",
        "offers (projection)",
        f.projected,
        f.not_projected.len()
    );
    println!(
        "  {:<22} {} checked, {} mismatched",
        "artifacts (sha256)",
        f.artifacts_checked,
        f.artifact_mismatches.len()
    );
    println!(
        "  {:<22} {} of {}",
        "quarantined",
        f.quarantined,
        f.quarantined + f.not_quarantined.len() as u64
    );
    println!("  {:<22} {:.1}", "seconds to drain", f.drain_seconds);
    for (what, list) in [
        ("lost", &f.lost),
        ("wrong", &f.wrong),
        ("not projected", &f.not_projected),
        ("artifact", &f.artifact_mismatches),
        ("not quarantined", &f.not_quarantined),
    ] {
        for line in list.iter().take(10) {
            println!("  ! {what}: {line}");
        }
    }
}
