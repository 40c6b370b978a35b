//! A body read through a connector definition's mapping: its rows validated by the same row
//! rules as every format, each refused row kept with its place and reason beside the rows
//! that pass, and the payload's fingerprint, which covers the whole body whatever was refused.

use super::{
    normalize_row, refuse_ambiguous, MappedRow, NormalizedRow, RowRules, TimeSeen, MAX_ROWS,
};
use crate::domain::canonical_json::canonical_bytes;
use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use crate::domain::hashing::sha256_hex;
use crate::domain::mapping::{Mapping, PageRead, RowRead};
use crate::domain::reject::{RejectCode, Rejection};
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};

/// A row the definition's rules refused: where it is in the body, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedRow {
    /// `line 7` (CSV, XML), `/data/items/3` (JSON).
    pub place: String,
    pub code: RejectCode,
    pub reason: String,
}

/// What a body gave under its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The rows that passed, in canonical index order for the rule.
    pub rows: Vec<NormalizedRow>,
    /// Every refused row, in body order.
    pub refused: Vec<RefusedRow>,
    pub fingerprint: Fingerprint,
    /// The document's own values (export id, snapshot id, page, page count).
    pub page: PageRead,
}

impl Normalized {
    /// The refusal of the whole delivery under `refuse_page`: every refused row named (the
    /// message is capped; `refused` keeps them all), with their code when they share one.
    pub fn refusal(&self) -> Option<Rejection> {
        super::refusal_of(
            self.refused
                .iter()
                .map(|r| Rejection::new(r.code, format!("{}: {}", r.place, r.reason)))
                .collect(),
        )
    }
}

/// Reads `body` through `mapping` and fingerprints it under `rule`. A body that cannot be
/// read at all, or more than `MAX_ROWS` rows, refuses the delivery; a bad row does not. Each
/// row goes through the row rules as soon as it is read, so only what an offer keeps is
/// copied out of the body.
pub fn normalize_mapped(
    mapping: &Mapping,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<Normalized, Rejection> {
    let mut checked = Checked {
        rows: Vec::new(),
        refused: Vec::new(),
        ordered: rule.orders_rows_canonically(),
        rules: mapping.rules(),
        seen: TimeSeen::default(),
    };
    let mut each = |read: RowRead<MappedRow<'_>>, default_observed_at: Option<Timestamp>| {
        checked.check(read, default_observed_at)
    };
    let (page, document) = mapping
        .read_each(body, MAX_ROWS, Some(rule), &mut each)
        .map_err(|why| {
            let code = if why.contains("rows exceed") || why.starts_with("more than") {
                RejectCode::PayloadTooLarge
            } else {
                RejectCode::InvalidPayload
            };
            Rejection::new(code, why)
        })?;
    // A JSON body's canonical document comes from the read's own parse.
    let fingerprint = match document {
        Some(Ok(document)) => Fingerprint {
            rule,
            sha256_hex: sha256_hex(&document),
        },
        Some(Err(e)) => {
            return Err(Rejection::new(
                RejectCode::InvalidPayload,
                format!("body cannot be canonicalized: {e}"),
            ))
        }
        None => fingerprint_under(mapping, rule, body)?,
    };
    let Checked {
        mut rows, refused, ..
    } = checked;
    refuse_ambiguous(&rows)?;
    if rule.orders_rows_canonically() {
        rows.sort_by(|a, b| a.canonical.cmp(&b.canonical));
    }
    Ok(Normalized {
        rows,
        refused,
        fingerprint,
        page,
    })
}

/// The rows that passed the row rules so far, and every refusal with its place.
struct Checked<'m> {
    rows: Vec<NormalizedRow>,
    refused: Vec<RefusedRow>,
    /// Whether the rows are ordered by their canonical bytes: a text row's are written only
    /// then.
    ordered: bool,
    rules: &'m RowRules,
    seen: TimeSeen,
}

impl Checked<'_> {
    /// One read row through the row rules.
    fn check(&mut self, read: RowRead<MappedRow<'_>>, default_observed_at: Option<Timestamp>) {
        let checked = match &read.row {
            Ok(row) => {
                let canonical = match (read.source.is_empty(), self.ordered) {
                    (false, _) => read.source,
                    (true, true) => canonical_bytes(&row.to_node()),
                    (true, false) => Vec::new(),
                };
                let rules = self.rules;
                normalize_row(
                    &read.place,
                    row,
                    default_observed_at,
                    canonical,
                    rules,
                    &mut self.seen,
                )
            }
            Err(why) => Err(Rejection::new(
                RejectCode::InvalidRow,
                format!("{}: {why}", read.place),
            )),
        };
        match checked {
            Ok(row) => self.rows.push(row),
            Err(rejection) => self.refused.push(RefusedRow {
                reason: rejection
                    .message
                    .strip_prefix(&format!("{}: ", read.place))
                    .unwrap_or(&rejection.message)
                    .to_owned(),
                place: read.place,
                code: rejection.code,
            }),
        }
    }
}

/// The payload's fingerprint: the bytes for `bytes-v1`, the canonical JSON (rows ordered at
/// the rows path for the unordered rule) otherwise.
pub(super) fn fingerprint_under(
    mapping: &Mapping,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<Fingerprint, Rejection> {
    let names = mapping.json_rows_names().unwrap_or_default();
    let rows_path: Vec<&str> = names.iter().map(String::as_str).collect();
    Fingerprint::compute(rule, body, &rows_path).map_err(|e| {
        Rejection::new(
            RejectCode::InvalidPayload,
            format!("body cannot be canonicalized: {e}"),
        )
    })
}
