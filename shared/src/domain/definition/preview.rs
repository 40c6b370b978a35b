//! What a sample body would give under a definition, computed without storing, enqueueing or
//! calling anything: the rows as the read routes would show them, every refused row with its
//! place and reason, the delivery's identity and its strength, and the fingerprint.

use super::{Definition, Identity, RowPolicy};
use crate::domain::canonical_json::parse_node;
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::mapping::Mapping;
use crate::domain::normalize::{normalize_mapped, RefusedRow};
use crate::domain::quantity::Quantity;
use serde::Serialize;

/// The answer of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preview {
    pub connector: String,
    /// `stored` (every row passed), `stored_with_quarantined_rows` (`quarantine_rows`: the
    /// refused rows would go into one quarantine entry), `refused` (the delivery would be
    /// refused: a body-level problem, or a bad row under `refuse_page`).
    pub outcome: &'static str,
    /// Why the whole body would be refused, when it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    pub rows: Vec<PreviewRow>,
    pub refused_rows: Vec<RefusedRow>,
    /// `rule:sha256`, over the whole body whatever rows are refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    pub identity: PreviewIdentity,
}

/// One row as an offer would show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewRow {
    pub item: String,
    pub sku: String,
    pub quantity: Quantity,
    pub unit: String,
    pub price: String,
    pub currency: String,
    pub observed_at: String,
    /// The commercial terms, each left out when the sample states none.
    #[serde(flatten)]
    pub terms: crate::domain::terms::Terms,
}

/// How the delivery would be named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewIdentity {
    pub kind: &'static str,
    /// `source`, or `fallback` for an identity computed from the payload.
    pub strength: &'static str,
    /// The id the sample gives, where the body holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the id comes from when the body does not hold it (a header, the file name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The preview of `sample` under `definition` (already read and compiled into `mapping`).
pub fn preview(definition: &Definition, mapping: &Mapping, sample: &[u8]) -> Preview {
    let rule = definition.canonicalization();
    let identity = identity_of(definition, sample);
    let mut answer = Preview {
        connector: definition.connector.clone(),
        outcome: "refused",
        refusal: None,
        rows: Vec::new(),
        refused_rows: Vec::new(),
        fingerprint: None,
        identity,
    };
    let normalized = match normalize_mapped(mapping, rule, sample) {
        Ok(normalized) => normalized,
        Err(rejection) => {
            answer.refusal = Some(format!(
                "{}: {}",
                rejection.code.as_str(),
                rejection.message
            ));
            return answer;
        }
    };
    answer.fingerprint = Some(format!(
        "{}:{}",
        rule.as_str(),
        normalized.fingerprint.sha256_hex
    ));
    answer.rows = normalized.rows.iter().map(row_of).collect();
    answer.outcome = match (normalized.refused.is_empty(), definition.row_policy) {
        (true, _) => "stored",
        (false, RowPolicy::QuarantineRows) => "stored_with_quarantined_rows",
        (false, RowPolicy::RefusePage) => "refused",
    };
    if answer.outcome == "refused" {
        answer.refusal = normalized.refusal().map(|r| r.message);
    }
    answer.refused_rows = normalized.refused;
    answer
}

fn row_of(row: &crate::domain::normalize::NormalizedRow) -> PreviewRow {
    PreviewRow {
        item: row.item.key(),
        sku: row.source_record.clone(),
        quantity: row.quantity.clone(),
        unit: row.quantity_basis.clone(),
        price: row.price.as_str().to_owned(),
        currency: row.currency.clone(),
        observed_at: row.observed_at.to_rfc3339(),
        terms: row.terms.clone(),
    }
}

/// The identity the definition declares, with the value when the sample holds it.
fn identity_of(definition: &Definition, sample: &[u8]) -> PreviewIdentity {
    let at = |path: &str| -> Option<String> {
        let root = parse_node(sample).ok()?;
        let node = JsonPath::parse(path).ok()?.select(&root)?.clone();
        node.as_str().map(str::to_owned)
    };
    let (value, from) = match &definition.identity {
        Identity::Body { path } => (at(path), None),
        Identity::Cloudevents => (
            at("$.source")
                .zip(at("$.id"))
                .map(|(s, i)| format!("{s} {i}")),
            None,
        ),
        Identity::ExportPage {
            path: Some(path), ..
        } => (at(path), None),
        Identity::ExportPage {
            header: Some(h), ..
        } => (
            None,
            Some(format!("the {h} response header, with the page")),
        ),
        Identity::ExportPage { .. } => (None, None),
        Identity::WebhookId => (None, Some("the webhook-id header".into())),
        Identity::Cursor => (None, Some("the cursor the page was asked for".into())),
        Identity::Fallback => (
            None,
            Some("endpoint, request parameters, source timestamp and payload sha256".into()),
        ),
        Identity::FileName => (None, Some("the file's name".into())),
        Identity::FileNameAndContent => (
            None,
            Some("the file's name and the sha256 of its content".into()),
        ),
    };
    PreviewIdentity {
        kind: definition.identity.kind(),
        strength: if definition.identity == Identity::Fallback {
            "fallback"
        } else {
            "source"
        },
        value,
        from,
    }
}
