//! Declarative mapping: a definition's format, values and fields turn a body into rows the
//! normalizer reads (the same row objects for every format: `sku`, `quantity`, `unit`,
//! `price`, `currency`, `observed_at`, `revision`, `condition`). Deterministic: the same body
//! under the same definition gives the same rows, and nothing here reads a clock or the
//! environment (the time zone database is the one compiled in).
//!
//! A row that cannot be read is reported with its place (a CSV line, a JSON pointer) and the
//! reason, beside the rows that can; what happens to the delivery then is the definition's row
//! policy. A body that cannot be read at all (not decodable, no rows where the definition says,
//! a column the header lacks) refuses the delivery.

mod csv_rows;
pub mod json_path;
mod json_rows;
#[cfg(test)]
mod tests;
pub mod text;
pub mod values;
mod xml_rows;

pub use xml_rows::parse_path as parse_xml_path;

use crate::domain::canonical_json::{CanonicalJsonError, Node};
use crate::domain::definition::{Definition, Format, Problem};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::timestamp::Timestamp;
use json_path::JsonPath;
use std::borrow::Cow;
use values::{Conventions, FieldSteps, TimeMemo};

/// A JSON document's canonical bytes under a fingerprint's rule, or why it has none.
pub(crate) type Canonical = Result<Vec<u8>, CanonicalJsonError>;

/// A definition's reading of bodies, compiled once.
#[derive(Debug, Clone)]
pub struct Mapping {
    format: Format,
    fields: Vec<MappedField>,
    conventions: Conventions,
}

#[derive(Debug, Clone)]
struct MappedField {
    name: &'static str,
    source: Source,
    steps: FieldSteps,
}

/// Where a field's value is in a row.
#[derive(Debug, Clone)]
enum Source {
    Column(String),
    /// 0-based.
    Position(usize),
    Path(JsonPath),
    Xml(xml_rows::XmlPath),
    Constant,
}

/// One row as read: its place in the body and its fields, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRead {
    /// `line 7` (CSV), `/data/items/3` (JSON).
    pub place: String,
    pub row: Result<Node<'static>, String>,
    /// The row's canonical bytes as the supplier wrote it (JSON read under a JSON rule; empty
    /// for the text formats, whose row object is its own, and under `bytes-v1`): the order
    /// `json-unordered-rows-v1` gives the rows.
    pub source: Vec<u8>,
}

/// What a body gave: its rows and the values the whole document carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRead {
    pub rows: Vec<RowRead>,
    /// The rows' `observed_at` where they carry none (a CloudEvent's `time`, a document time).
    pub default_observed_at: Option<Timestamp>,
    pub export_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub page: Option<u64>,
    pub page_count: Option<u64>,
}

impl Mapping {
    /// The mapping of a definition [`Definition::read`] accepted; a problem found here too (a
    /// pattern, a time zone) is reported the same way.
    pub fn compile(definition: &Definition) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let conventions = Conventions::compile(&definition.values)
            .map_err(|e| problems.push(Problem::new("/values/time_zone", e)))
            .ok();
        let mut fields = Vec::new();
        for (name, field) in definition.fields.declared() {
            let source = source_of(&definition.format, field);
            let steps = FieldSteps::compile(field);
            match (source, steps) {
                (Ok(source), Ok(steps)) => fields.push(MappedField {
                    name,
                    source,
                    steps,
                }),
                (Err(e), _) | (_, Err(e)) => {
                    problems.push(Problem::new(format!("/fields/{name}"), e))
                }
            }
        }
        match (conventions, problems.is_empty()) {
            (Some(conventions), true) => Ok(Mapping {
                format: definition.format.clone(),
                fields,
                conventions,
            }),
            _ => Err(problems),
        }
    }

    /// The rows of `body` (at most `max_rows`; more refuse the delivery).
    pub fn read(&self, body: &[u8], max_rows: usize) -> Result<PageRead, String> {
        self.read_canonical(body, max_rows, None)
            .map(|(page, _)| page)
    }

    /// [`Self::read`], and for a JSON body read under a JSON `rule` the canonical document its
    /// fingerprint hashes, from the same parse (`None`: a text format, or `bytes-v1`).
    pub(crate) fn read_canonical(
        &self,
        body: &[u8],
        max_rows: usize,
        rule: Option<CanonicalizationRule>,
    ) -> Result<(PageRead, Option<Canonical>), String> {
        match &self.format {
            Format::Csv(csv) => csv_rows::read(self, csv, body, max_rows).map(|p| (p, None)),
            Format::Json(json) => json_rows::read(self, json, body, max_rows, rule),
            Format::Xml(xml) => xml_rows::read(self, xml, body, max_rows).map(|p| (p, None)),
        }
    }

    /// For JSON, the member names leading to the rows' array (where `json-unordered-rows-v1`
    /// orders them); `None` for the text formats or a rows path with an index.
    pub fn json_rows_names(&self) -> Option<Vec<String>> {
        let Format::Json(json) = &self.format else {
            return None;
        };
        let path = JsonPath::parse_rows(&json.rows).ok()?;
        path.names()
            .map(|names| names.into_iter().map(str::to_owned).collect())
    }

    /// A row object from each field's raw text (`None`: absent), converted by the field's kind.
    /// `memo` is the body's, carried from row to row.
    fn row_of<'r>(
        &self,
        memo: &mut TimeMemo,
        raw: impl Fn(&MappedField) -> Result<Option<Raw<'r>>, String>,
    ) -> Result<Node<'static>, String> {
        let mut members = Vec::with_capacity(self.fields.len());
        let mut problems = Vec::new();
        for field in &self.fields {
            match raw(field).and_then(|value| self.value_of(field, value, memo)) {
                Ok(Some(node)) => members.push((Cow::Borrowed(field.name), node)),
                Ok(None) => {}
                Err(why) => problems.push(format!("{}: {why}", field.name)),
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Node::object(members).ok_or_else(|| "a field is named twice".to_owned())
    }

    /// One field's value after its steps and its kind's conversion.
    fn value_of(
        &self,
        field: &MappedField,
        raw: Option<Raw<'_>>,
        memo: &mut TimeMemo,
    ) -> Result<Option<Node<'static>>, String> {
        let text = match raw {
            Some(Raw::Kept(node)) if field.steps.is_plain() => return Ok(Some(node)),
            Some(Raw::Kept(node)) => Some(Cow::Owned(node_text(&node)?)),
            Some(Raw::Text(text)) => Some(text),
            None => None,
        };
        let Some(value) = field.steps.apply(text.as_deref())? else {
            return Ok(None);
        };
        Ok(Some(match field.name {
            "quantity" => Node::Number(Cow::Owned(self.conventions.into_whole_number(value)?)),
            "price" => Node::String(Cow::Owned(self.conventions.into_decimal(value)?)),
            "observed_at" => {
                Node::String(Cow::Owned(self.conventions.time_through_memo(value, memo)?))
            }
            _ => Node::String(Cow::Owned(value)),
        }))
    }
}

/// Where a field's value is, for the format: a path is JSONPath in JSON, an element path in XML.
fn source_of(format: &Format, field: &crate::domain::definition::Field) -> Result<Source, String> {
    Ok(match (&field.column, field.position, &field.path, format) {
        (Some(column), _, _, _) => Source::Column(column.clone()),
        (_, Some(position), _, _) => Source::Position(position.saturating_sub(1) as usize),
        (_, _, Some(path), Format::Xml(xml)) => Source::Xml(
            xml_rows::parse_path(path, &xml.namespaces, false)
                .map_err(|e| format!("{path:?}: {e}"))?,
        ),
        (_, _, Some(path), _) => {
            Source::Path(JsonPath::parse(path).map_err(|e| format!("{path:?}: {e}"))?)
        }
        _ => Source::Constant,
    })
}

/// A field's raw value: text (CSV, XML, a JSON string; borrowed from the body where it can
/// be), or a JSON value kept as it is when the field declares no step that reads text (a JSON
/// number stays the number written).
enum Raw<'r> {
    Text(Cow<'r, str>),
    Kept(Node<'static>),
}

/// The text of a JSON scalar a field's steps read; an object or array is no field value.
fn node_text(node: &Node<'_>) -> Result<String, String> {
    match node {
        Node::String(s) => Ok(s.to_string()),
        Node::Number(n) => Ok(n.to_string()),
        Node::Bool(b) => Ok(b.to_string()),
        Node::Null => Ok(String::new()),
        Node::Array(_) | Node::Object(_) => Err("is an object or array, not a value".into()),
    }
}
