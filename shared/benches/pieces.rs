//! In-process CPU of ingest's pieces on one 400-row export page (docs/benchmarks.md, "Ingest CPU
//! per page"), against a plain `serde_json` parse plus sha256 of the same bytes, and of the
//! byte-identical replay's recognition (envelope parse, body decode, sha256: all it does before its
//! one read).
//!
//! `cargo bench -p feedsafe --bench pieces` (release). Each piece runs for about a second
//! after a warm-up; the median of 15 batches is printed in microseconds per call.

use feedsafe::domain::connector::PayloadFormat;
use feedsafe::domain::envelope::DeliveryEnvelope;
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::hashing::{hex, sha256};
use feedsafe::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use feedsafe::domain::normalize::{normalize, normalize_and_fingerprint};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ingest::fingerprint_of;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn page(rows: usize) -> Vec<u8> {
    let offers: Vec<serde_json::Value> = (0..rows)
        .map(|i| {
            serde_json::json!({"sku": format!("AX-{i:05}"), "quantity": i % 40, "unit": "each",
                "price": format!("{}.{:02}", 10 + i % 900, i % 100), "currency": "EUR",
                "observed_at": "2026-11-29T08:00:00Z"})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "export_id": "EXP-8821", "page": 1, "page_count": 1, "offers": offers
    }))
    .unwrap()
}

/// Median microseconds per call of `f`, over 15 batches sized to take ~70 ms each.
fn time(name: &str, mut f: impl FnMut()) -> f64 {
    for _ in 0..20 {
        f();
    }
    let probe = Instant::now();
    let mut calls = 0u32;
    while probe.elapsed() < Duration::from_millis(70) {
        f();
        calls += 1;
    }
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let at = Instant::now();
            for _ in 0..calls {
                f();
            }
            at.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    let median = batches[batches.len() / 2];
    println!("| {name} | {median:.1} |");
    median
}

fn main() {
    let rows = 400;
    let body = page(rows);
    let format = PayloadFormat::AcmeExportV1;
    let rule = CanonicalizationRule::JsonV1;
    let key = DeliveryKey::new(
        TenantId::parse("acme").unwrap(),
        ConnectorId::parse("acme-eu").unwrap(),
        SourceAccount::parse("ACC-1").unwrap(),
        SourceDeliveryId::parse("EXP-8821/1").unwrap(),
        IdentityStrength::Source,
    );
    let envelope = DeliveryEnvelope::inline(
        &key,
        "export_page",
        Timestamp::now(),
        "application/json",
        None,
        &body,
    )
    .to_json();
    println!(
        "{rows}-row page, {} bytes ({} bytes as an envelope)",
        body.len(),
        envelope.len()
    );
    println!();
    println!("| piece | µs per call (median) |");
    println!("|---|---:|");
    let baseline = time("baseline: serde_json parse to Value + sha256", || {
        let v: serde_json::Value = serde_json::from_slice(black_box(&body)).unwrap();
        black_box(v);
        black_box(sha256(&body));
    });
    let fingerprint = time("canonicalize + fingerprint (json-v1)", || {
        black_box(fingerprint_of(rule, format, black_box(&body)).unwrap());
    });
    let normalized = time("normalize (parse, validate, canonical order)", || {
        black_box(normalize(format, rule, black_box(&body)).unwrap());
    });
    let one_pass = time(
        "one parse: normalize + fingerprint (what ingest runs)",
        || {
            black_box(normalize_and_fingerprint(format, rule, black_box(&body)).unwrap());
        },
    );
    let recognize = time(
        "byte-identical replay: envelope parse + body decode + sha256",
        || {
            let parsed = DeliveryEnvelope::parse(black_box(envelope.as_bytes())).unwrap();
            let feedsafe::domain::envelope::BodyRef::Inline { base64 } = &parsed.body else {
                unreachable!()
            };
            let bytes = feedsafe::domain::hashing::base64_decode(base64).unwrap();
            black_box(hex(&sha256(&bytes)));
        },
    );
    let full = fingerprint + normalized;
    println!();
    println!(
        "canonicalize + fingerprint + normalize, one parse (what ingest runs) = {one_pass:.1} µs = {:.2} x the baseline ({baseline:.1} µs); target <= 1.5 x",
        one_pass / baseline
    );
    println!(
        "the two pieces run apart (each parses the page) = {full:.1} µs = {:.2} x the baseline",
        full / baseline
    );
    println!(
        "byte-identical replay recognition = {recognize:.1} µs (target <= 200 µs); before, a replay also ran the {full:.1} µs above"
    );
}
