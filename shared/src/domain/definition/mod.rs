//! Connector definitions: a supplier feed as a document an integration engineer writes
//! (docs/connectors.md; its JSON Schema is docs/connector.schema.json). A definition says how
//! deliveries arrive (transport), how their bytes become rows (format, values, fields), what
//! names a delivery (identity) and the rules it is judged by. The tenant is never in it: it
//! comes from the operator's token.
//!
//! [`Definition::read`] is the one way in: the schema first, then the rules a schema cannot
//! state ([`check`]); every problem is reported with its JSON pointer, all of them at once.

pub mod builtin;
mod check;
mod config;
pub mod preview;
#[cfg(test)]
mod tests;

pub use check::Problem;

use crate::domain::connector::{
    Publication, DEFAULT_CLOCK_SKEW_SECONDS, DEFAULT_HORIZON_DAYS, DEFAULT_MAX_BODY_BYTES,
};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::normalize::RowRules;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of the document's format this code reads.
pub const DEFINITION_FORMAT: u32 = 1;

/// A connector definition as written (after [`Definition::read`] accepted it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    pub definition_format: u32,
    pub connector: String,
    pub source_account: String,
    pub transport: Transport,
    pub format: Format,
    #[serde(default)]
    pub values: Values,
    pub fields: Fields,
    pub identity: Identity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonicalization: Option<CanonicalizationRule>,
    #[serde(default = "default_horizon_days")]
    pub horizon_days: u32,
    #[serde(default = "default_publication")]
    pub publication: Publication,
    #[serde(default)]
    pub row_policy: RowPolicy,
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: u64,
    #[serde(default = "default_clock_skew_seconds")]
    pub clock_skew_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cadence_minutes: Option<u32>,
    /// The decimal places a quantity may have, by unit (any case); others count whole units.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unit_decimal_places: BTreeMap<String, u8>,
}

impl Definition {
    /// The row rules this definition declares (units lower-cased, as the rows' units are).
    pub fn row_rules(&self) -> RowRules {
        RowRules {
            unit_decimal_places: self
                .unit_decimal_places
                .iter()
                .map(|(unit, places)| (unit.to_ascii_lowercase(), *places))
                .collect(),
        }
    }
}

fn default_horizon_days() -> u32 {
    DEFAULT_HORIZON_DAYS
}
fn default_publication() -> Publication {
    Publication::PerPage
}
fn default_max_body_bytes() -> u64 {
    DEFAULT_MAX_BODY_BYTES
}
fn default_clock_skew_seconds() -> u32 {
    DEFAULT_CLOCK_SKEW_SECONDS
}

/// How deliveries arrive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    /// Signed webhooks to `/v1/webhooks/{connector}`.
    Webhook,
    /// Files dropped under `drops/{connector}/`.
    Drop,
    /// Pages pulled from the supplier's API.
    Pull(Box<Pull>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pull {
    pub url: String,
    #[serde(default)]
    pub auth: Auth,
    pub pagination: Pagination,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_minutes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_deadline_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

/// The credential a pull sends, by reference to a Secrets Manager secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Auth {
    #[default]
    None,
    Bearer {
        secret_ref: String,
    },
    ApiKeyHeader {
        header: String,
        secret_ref: String,
    },
    Basic {
        secret_ref: String,
    },
}

/// How a pull finds its next page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pagination {
    PageNumber {
        #[serde(default = "default_page_param")]
        param: String,
        #[serde(default = "default_first_page")]
        first: u32,
    },
    OffsetLimit {
        #[serde(default = "default_offset_param")]
        offset_param: String,
        #[serde(default = "default_limit_param")]
        limit_param: String,
        limit: u32,
    },
    Cursor {
        path: String,
        #[serde(default = "default_cursor_param")]
        param: String,
    },
    LinkHeader,
    NextUrl {
        path: String,
    },
}

fn default_page_param() -> String {
    "page".into()
}
fn default_first_page() -> u32 {
    1
}
fn default_offset_param() -> String {
    "offset".into()
}
fn default_limit_param() -> String {
    "limit".into()
}
fn default_cursor_param() -> String {
    "cursor".into()
}

/// How a body's bytes are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Format {
    Csv(Csv),
    Json(Json),
    Xml(Xml),
}

impl Format {
    pub fn kind(&self) -> &'static str {
        match self {
            Format::Csv(_) => "csv",
            Format::Json(_) => "json",
            Format::Xml(_) => "xml",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Csv {
    #[serde(default)]
    pub encoding: Encoding,
    #[serde(default = "default_delimiter")]
    pub delimiter: String,
    #[serde(default = "default_quote")]
    pub quote: String,
    #[serde(default = "default_true")]
    pub header: bool,
    #[serde(default)]
    pub skip_rows: u32,
}

fn default_delimiter() -> String {
    ",".into()
}
fn default_quote() -> String {
    "\"".into()
}
fn default_true() -> bool {
    true
}

/// The text encodings a CSV may be written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    /// UTF-8, with or without a byte-order mark.
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "windows-1252")]
    Windows1252,
    #[serde(rename = "iso-8859-1")]
    Iso8859_1,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Json {
    /// A singular path to the rows' array, then `[*]`.
    pub rows: String,
    #[serde(default)]
    pub envelope: Envelope,
    #[serde(default)]
    pub document: DocumentFields,
}

/// A body shape the JSON format checks before its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Envelope {
    #[default]
    None,
    /// A CloudEvents 1.0 structured event: `specversion` "1.0", `id`, `source` and `type`
    /// required; its `time` is the rows' default `observed_at`.
    Cloudevents,
}

/// Values the whole document carries, by path from its root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_id: Option<DocumentField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<DocumentField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<DocumentField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<DocumentField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<DocumentField>,
}

impl DocumentFields {
    /// Each declared field with its name.
    pub fn declared(&self) -> impl Iterator<Item = (&'static str, &DocumentField)> {
        [
            ("export_id", &self.export_id),
            ("snapshot_id", &self.snapshot_id),
            ("page", &self.page),
            ("page_count", &self.page_count),
            ("observed_at", &self.observed_at),
        ]
        .into_iter()
        .filter_map(|(name, field)| field.as_ref().map(|f| (name, f)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentField {
    pub path: String,
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xml {
    /// The row elements from the root, `/`-separated, prefixed names declared in `namespaces`.
    pub rows: String,
    #[serde(default)]
    pub namespaces: BTreeMap<String, String>,
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
}

fn default_max_depth() -> u32 {
    64
}

/// How text values are written: decimal and thousands separators, and times without an offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Values {
    #[serde(default = "default_decimal_separator")]
    pub decimal_separator: String,
    #[serde(default)]
    pub thousands_separator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl Default for Values {
    fn default() -> Self {
        Values {
            decimal_separator: default_decimal_separator(),
            thousands_separator: String::new(),
            time_format: None,
            time_zone: None,
        }
    }
}

fn default_decimal_separator() -> String {
    ".".into()
}

/// Where each row field comes from. The six required ones make an offer; revision and
/// condition refine the canonical item; the rest are the offer's commercial terms
/// (docs/connectors.md, "Commercial terms"), each optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fields {
    pub sku: Field,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpn: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<Field>,
    pub quantity: Field,
    pub unit: Field,
    pub price: Field,
    pub currency: Field,
    pub observed_at: Field,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_order_quantity: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_multiple: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_size: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_basis: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_time_days: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_time: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packaging: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incoterms: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tax_included: Option<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_breaks: Option<PriceBreaks>,
}

impl Fields {
    /// Each declared field with its name, in a fixed order: the six required ones, mpn,
    /// manufacturer, revision and condition, then the plain terms in the order of [`TERM_FIELDS`]. The price breaks
    /// are not among them (see [`Fields::price_breaks`]).
    pub fn declared(&self) -> Vec<(&'static str, &Field)> {
        let mut fields = vec![
            ("sku", &self.sku),
            ("quantity", &self.quantity),
            ("unit", &self.unit),
            ("price", &self.price),
            ("currency", &self.currency),
            ("observed_at", &self.observed_at),
        ];
        fields.extend(self.mpn.as_ref().map(|f| ("mpn", f)));
        fields.extend(self.manufacturer.as_ref().map(|f| ("manufacturer", f)));
        fields.extend(self.revision.as_ref().map(|f| ("revision", f)));
        fields.extend(self.condition.as_ref().map(|f| ("condition", f)));
        let terms = [
            &self.minimum_order_quantity,
            &self.order_multiple,
            &self.pack_size,
            &self.price_basis,
            &self.lead_time_days,
            &self.lead_time,
            &self.packaging,
            &self.valid_from,
            &self.valid_until,
            &self.incoterms,
            &self.tax_included,
        ];
        fields.extend(
            TERM_FIELDS
                .into_iter()
                .zip(terms)
                .filter_map(|(name, field)| field.as_ref().map(|f| (name, f))),
        );
        fields
    }
}

/// The plain term fields, in the order [`Fields::declared`] gives them.
pub const TERM_FIELDS: [&str; 11] = [
    "minimum_order_quantity",
    "order_multiple",
    "pack_size",
    "price_basis",
    "lead_time_days",
    "lead_time",
    "packaging",
    "valid_from",
    "valid_until",
    "incoterms",
    "tax_included",
];

/// Most price-break pairs a definition may list.
pub const MAX_PRICE_BREAK_PAIRS: usize = 20;

/// Where a row's price breaks come from: an array in a JSON row, or fixed pairs of fields
/// (any format). Both give the row member `price_breaks`, in the order read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PriceBreaks {
    /// JSON only: `{"each": ..., "min_quantity": ..., "unit_price": ...}`.
    Each(Box<EachBreak>),
    /// 1 to [`MAX_PRICE_BREAK_PAIRS`] pairs of ordinary fields; a pair with neither value is
    /// skipped (a row with fewer breaks than pairs).
    Pairs { pairs: Vec<PriceBreakPair> },
}

/// The breaks of a JSON row as an array: `each` selects it relative to the row; each
/// element's two values are at their fields' paths relative to the element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EachBreak {
    pub each: String,
    pub min_quantity: Field,
    pub unit_price: Field,
}

/// One price break as two ordinary fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceBreakPair {
    pub min_quantity: Field,
    pub unit_price: Field,
}

/// One field: exactly one source (column, position, path or constant), then, in this order:
/// trim, the pattern's capture group, the value map, the default for an absent or empty value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub map: BTreeMap<String, String>,
    #[serde(default = "default_true")]
    pub trim: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// What names a delivery, strongest first within each transport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    /// Webhooks: the Standard Webhooks `webhook-id` header.
    WebhookId,
    /// Webhooks: CloudEvents `source` + `id`.
    Cloudevents,
    /// Webhooks and drops: a snapshot id at a path in the body; the same snapshot sent again
    /// under a new message id is the same delivery.
    Body { path: String },
    /// Pulls: an export id (at a body path or in a response header) plus the page.
    ExportPage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header: Option<String>,
    },
    /// Pulls: the cursor the page was asked for.
    Cursor,
    /// Pulls from an API with neither: endpoint, request parameters, a source timestamp and
    /// the payload hash; flagged `fallback`.
    Fallback,
    /// Drops: the file name alone (changed content under the name is a mismatch).
    FileName,
    /// Drops: the file name and the sha256 of its content (the default for drops).
    FileNameAndContent,
}

impl Identity {
    pub fn kind(&self) -> &'static str {
        match self {
            Identity::WebhookId => "webhook_id",
            Identity::Cloudevents => "cloudevents",
            Identity::Body { .. } => "body",
            Identity::ExportPage { .. } => "export_page",
            Identity::Cursor => "cursor",
            Identity::Fallback => "fallback",
            Identity::FileName => "file_name",
            Identity::FileNameAndContent => "file_name_and_content",
        }
    }
}

/// What one bad row does to its delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowPolicy {
    /// The delivery is refused, every bad row listed.
    #[default]
    RefusePage,
    /// The valid rows are the delivery's observations; the refused ones go into one
    /// quarantine entry with their places and reasons.
    QuarantineRows,
}

impl Definition {
    /// Reads a definition document: its schema, then every rule the schema cannot state. All
    /// problems come back together, each with the JSON pointer of the value it concerns.
    pub fn read(document: &serde_json::Value) -> Result<Definition, Vec<Problem>> {
        check::schema_problems(document)?;
        let definition: Definition = serde_json::from_value(document.clone())
            .map_err(|e| vec![Problem::new("", format!("does not match the schema: {e}"))])?;
        let mut problems = check::rule_problems(document);
        problems.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        if problems.is_empty() {
            Ok(definition)
        } else {
            Err(problems)
        }
    }

    /// The fingerprint rule: the declared one, else `json-v1` for JSON and `bytes-v1` for
    /// the text formats.
    pub fn canonicalization(&self) -> CanonicalizationRule {
        self.canonicalization.unwrap_or(match self.format {
            Format::Json(_) => CanonicalizationRule::JsonV1,
            Format::Csv(_) | Format::Xml(_) => CanonicalizationRule::BytesV1,
        })
    }
}
