//! The sample connectors and the deliveries and envelopes tests send.

use crate::{ACCOUNT, TENANT};
use feedsafe::domain::connector::{
    ConnectorConfig, IdentityRule, PayloadFormat, Publication, DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_BODY_BYTES,
};
use feedsafe::domain::envelope::{DeliveryEnvelope, RunPage};
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use feedsafe::domain::timestamp::Timestamp;
use serde_json::{json, Value};

/// The pull connector of the essay: `acme-eu`, export pages, json-v1.
pub fn acme_eu() -> ConnectorConfig {
    ConnectorConfig {
        connector: ConnectorId::parse("acme-eu").unwrap(),
        tenant: TenantId::parse(TENANT).unwrap(),
        source_account: SourceAccount::parse(ACCOUNT).unwrap(),
        payload_format: PayloadFormat::AcmeExportV1,
        identity_rule: IdentityRule::ExportPage,
        canonicalization: CanonicalizationRule::JsonV1,
        horizon_days: DEFAULT_HORIZON_DAYS,
        publication: Publication::PerPage,
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        clock_skew_seconds: feedsafe::domain::connector::DEFAULT_CLOCK_SKEW_SECONDS,
        pull: None,
        version: None,
        definition: None,
    }
}

pub fn offer(sku: &str, quantity: i64, price: &str, observed_at: &str) -> Value {
    json!({"sku": sku, "quantity": quantity, "unit": "each", "price": price, "currency": "EUR", "observed_at": observed_at})
}

pub fn export_page(export_id: &str, page: u32, page_count: u32, offers: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"export_id": export_id, "page": page, "page_count": page_count, "offers": offers}),
    )
    .unwrap()
}

pub fn delivery_key(config: &ConnectorConfig, source_delivery_id: &str) -> DeliveryKey {
    DeliveryKey::new(
        config.tenant.clone(),
        config.connector.clone(),
        config.source_account.clone(),
        SourceDeliveryId::parse(source_delivery_id).unwrap(),
        IdentityStrength::Source,
    )
}

/// The envelope the poller would enqueue for page `page` of `export_id`.
pub fn page_envelope(
    config: &ConnectorConfig,
    export_id: &str,
    page: u32,
    page_count: u32,
    body: &[u8],
) -> Vec<u8> {
    let key = delivery_key(config, &format!("{export_id}/{page}"));
    let run = RunPage {
        run_id: feedsafe::intake::poller::run_id_for(&config.connector, export_id),
        page,
        page_count: Some(page_count),
    };
    DeliveryEnvelope::inline(
        &key,
        "export_page",
        Timestamp::now(),
        "application/json",
        Some(run),
        body,
    )
    .to_json()
    .into_bytes()
}

/// An envelope without run information, for a delivery named `source_delivery_id`.
pub fn plain_envelope(config: &ConnectorConfig, source_delivery_id: &str, body: &[u8]) -> Vec<u8> {
    let key = delivery_key(config, source_delivery_id);
    DeliveryEnvelope::inline(
        &key,
        "export_page",
        Timestamp::now(),
        "application/json",
        None,
        body,
    )
    .to_json()
    .into_bytes()
}

/// A connector like `acme_eu` for another supplier or policy.
pub fn connector(id: &str, account: &str, publication: Publication) -> ConnectorConfig {
    ConnectorConfig {
        connector: ConnectorId::parse(id).unwrap(),
        source_account: SourceAccount::parse(account).unwrap(),
        publication,
        ..acme_eu()
    }
}

/// A file of a supplier's fixtures: `tests/fixtures/suppliers/{supplier}/{file}`.
pub fn supplier_file(supplier: &str, file: &str) -> Vec<u8> {
    let path = format!(
        "{}/fixtures/suppliers/{supplier}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A supplier's connector definition (`definition.json` beside its samples).
pub fn supplier_definition(supplier: &str) -> serde_json::Value {
    serde_json::from_slice(&supplier_file(supplier, "definition.json"))
        .expect("a definition fixture is JSON")
}

/// The German supplier's file with three bad rows (lines 3, 5 and 6) among two good ones, in
/// Windows-1252.
pub fn german_file_with_three_bad_rows() -> Vec<u8> {
    let text = "Artikelnummer;Bestand;Einheit;Preis;Währung;Stand\r\n\
                LM358DR;1.500;Stk;0,42;EUR;29.11.2026 08:00\r\n\
                AX-440-R2;viele;Stk;1,00;EUR;29.11.2026 08:00\r\n\
                NE555P;40;Stk;0,21;EUR;29.11.2026 08:00\r\n\
                TL072;5;Stk;1,0,0;EUR;29.11.2026 08:00\r\n\
                LM317;5;Stk;0,80;XEU;29.11.2026 08:00\r\n";
    text.chars().map(|c| c as u32 as u8).collect()
}
