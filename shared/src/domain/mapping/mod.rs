//! Declarative mapping: a definition's format, values and fields turn a body into rows the
//! normalizer reads (the same row objects for every format: `sku`, `quantity`, `unit`,
//! `price`, `currency`, `observed_at`, `revision`, `condition`, and the commercial terms of
//! [`terms`], `price_breaks` among them). Deterministic: the same body under the same
//! definition gives the same rows, and nothing here reads a clock or the environment (the
//! time zone database is the one compiled in).
//!
//! A row that cannot be read is reported with its place (a CSV line, a JSON pointer) and the
//! reason, beside the rows that can; what happens to the delivery then is the definition's row
//! policy. A body that cannot be read at all (not decodable, no rows where the definition says,
//! a column the header lacks) refuses the delivery.

mod csv_rows;
pub mod json_path;
mod json_rows;
mod terms;
#[cfg(test)]
mod tests;
pub mod text;
pub mod values;
mod xml_rows;

pub use xml_rows::parse_path as parse_xml_path;

use crate::domain::canonical_json::{CanonicalJsonError, Node};
use crate::domain::definition::{Definition, Field, Format, Problem};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::normalize::{MappedRow, Member, RowRules};
use crate::domain::timestamp::Timestamp;
use json_path::JsonPath;
use std::borrow::Cow;
use terms::{Breaks, Kept, Kind};
use values::{Conventions, FieldSteps, TimeMemos};

/// A JSON document's canonical bytes under a fingerprint's rule, or why it has none.
pub type Canonical = Result<Vec<u8>, CanonicalJsonError>;

/// A definition's reading of bodies, compiled once.
#[derive(Debug, Clone)]
pub struct Mapping {
    format: Format,
    fields: Vec<MappedField>,
    /// Where the rows' price breaks come from, if the definition reads any.
    breaks: Option<Breaks>,
    /// How many fields have a slot (the plain ones, then the price breaks').
    slots: usize,
    conventions: Conventions,
    /// What the definition declares about its rows (case rule, units' decimal places).
    rules: RowRules,
}

#[derive(Debug, Clone)]
struct MappedField {
    /// The row member (`min_quantity`, `unit_price` for a price break's values).
    name: &'static str,
    /// The member's slot in a mapped row (a price break's values are the `price_breaks`
    /// member's).
    member: Member,
    /// The field's index among every field of the mapping (the price breaks' after the plain
    /// ones): where a reader keeps what it found of the field.
    slot: usize,
    kind: Kind,
    /// A commercial term: a JSON value kept as written is converted by its kind too.
    term: bool,
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

/// One row as read: its place in the body and its fields (its row object, or the mapped row
/// a reader hands on), or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRead<R = Node<'static>> {
    /// `line 7` (CSV), `/data/items/3` (JSON).
    pub place: String,
    pub row: Result<R, String>,
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

/// What a reader hands each row to, as soon as the row is read: the row (its fields borrowed
/// from the body or the reader's buffers for the call) and the rows' default `observed_at`.
/// Nothing of a row outlives the call but what the receiver keeps.
pub type EachRow<'e> = dyn FnMut(RowRead<MappedRow<'_>>, Option<Timestamp>) + 'e;

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
            match MappedField::compile(&definition.format, name, field, fields.len()) {
                Ok(mapped) => fields.push(mapped),
                Err(e) => problems.push(Problem::new(format!("/fields/{name}"), e)),
            }
        }
        let mut slots = fields.len();
        let breaks = definition.fields.price_breaks.as_ref().and_then(|breaks| {
            Breaks::compile(&definition.format, breaks, &mut slots)
                .map_err(|p| problems.extend(p))
                .ok()
        });
        match (conventions, problems.is_empty()) {
            (Some(conventions), true) => Ok(Mapping {
                format: definition.format.clone(),
                fields,
                breaks,
                slots,
                conventions,
                rules: definition.row_rules(),
            }),
            _ => Err(problems),
        }
    }

    /// The rules the rows read through this mapping follow.
    pub fn rules(&self) -> &RowRules {
        &self.rules
    }

    /// The rows of `body` (at most `max_rows`; more refuse the delivery), each as its row
    /// object.
    pub fn read(&self, body: &[u8], max_rows: usize) -> Result<PageRead, String> {
        let mut rows = Vec::new();
        let mut keep = |read: RowRead<MappedRow<'_>>, _: Option<Timestamp>| {
            rows.push(RowRead {
                place: read.place,
                row: read.row.map(|row| row.to_node()),
                source: read.source,
            })
        };
        let (page, _) = self.read_each(body, max_rows, None, &mut keep)?;
        Ok(PageRead { rows, ..page })
    }

    /// Hands each row of `body` to `each` as it is read, and returns the document's own values
    /// (no rows) and, for a JSON body read under a JSON `rule`, the canonical document its
    /// fingerprint hashes, from the same parse (`None`: a text format, or `bytes-v1`).
    pub fn read_each(
        &self,
        body: &[u8],
        max_rows: usize,
        rule: Option<CanonicalizationRule>,
        each: &mut EachRow<'_>,
    ) -> Result<(PageRead, Option<Canonical>), String> {
        match &self.format {
            Format::Csv(csv) => csv_rows::read(self, csv, body, max_rows, each).map(|p| (p, None)),
            Format::Json(json) => json_rows::read(self, json, body, max_rows, rule, each),
            Format::Xml(xml) => xml_rows::read(self, xml, body, max_rows, each).map(|p| (p, None)),
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

    /// Every field a reader finds in a row by its source: the plain ones, then the price
    /// breaks' pairs (the `each` form's fields are read inside the row's array instead).
    fn sourced(&self) -> impl Iterator<Item = &MappedField> {
        let pairs = match &self.breaks {
            Some(Breaks::Pairs(pairs)) => pairs.as_slice(),
            _ => &[],
        };
        self.fields.iter().chain(
            pairs
                .iter()
                .flat_map(|pair| [&pair.min_quantity, &pair.unit_price]),
        )
    }

    /// A row object from each field's raw text (`None`: absent), converted by the field's kind.
    /// `memo` is the body's, carried from row to row; `row` is a JSON row (where the `each`
    /// form of the price breaks reads them).
    fn row_of<'r>(
        &'r self,
        memo: &mut TimeMemos,
        row: Option<&'r Node<'r>>,
        raw: impl Fn(&'r MappedField) -> Result<Option<Raw<'r>>, String>,
    ) -> Result<MappedRow<'r>, String> {
        let mut mapped = MappedRow::default();
        let mut problems = Vec::new();
        for field in &self.fields {
            match raw(field).and_then(|value| self.value_of(field, value, memo)) {
                Ok(Some(node)) => mapped.set(field.member, node),
                Ok(None) => {}
                Err(why) => problems.push(format!("{}: {why}", field.name)),
            }
        }
        match self.breaks_of(memo, row, &raw) {
            Ok(Some(node)) => mapped.set(Member::PriceBreaks, node),
            Ok(None) => {}
            Err(why) => problems.push(format!("price_breaks: {why}")),
        }
        match problems.is_empty() {
            true => Ok(mapped),
            false => Err(problems.join("; ")),
        }
    }

    /// One field's value after its steps and its kind's conversion. A JSON value kept as
    /// written (plain steps) stays as it is for the offer's fields; a term's is converted by
    /// its kind ([`terms::kept`]).
    fn value_of<'r>(
        &'r self,
        field: &'r MappedField,
        raw: Option<Raw<'r>>,
        memo: &mut TimeMemos,
    ) -> Result<Option<Node<'r>>, String> {
        let text = match raw {
            Some(Raw::Kept(node)) if field.steps.is_plain() && !field.term => {
                return Ok(Some(node))
            }
            Some(Raw::Kept(node)) if field.steps.is_plain() => match terms::kept(field.kind, node)?
            {
                Kept::Value(node) => return Ok(Some(node)),
                Kept::Text(text) => Some(Cow::Owned(text)),
            },
            Some(Raw::Kept(node)) => Some(Cow::Owned(node_text(&node)?)),
            Some(Raw::Text(text)) => Some(text),
            None => None,
        };
        let Some(value) = field.steps.apply_kept(text)? else {
            return Ok(None);
        };
        let conventions = &self.conventions;
        Ok(Some(match field.kind {
            Kind::Whole => Node::Number(converted(value, |v| conventions.whole_number_of(v))?),
            // Digits with a dot: a JSON number literal, whose places the row rules check.
            Kind::Quantity => Node::Number(converted(value, |v| conventions.quantity_of(v))?),
            Kind::Decimal => Node::String(converted(value, |v| conventions.decimal_of(v))?),
            Kind::Time(index) => Node::String(Cow::Owned(
                conventions.time_through_memo(&value, memo.of(index))?,
            )),
            Kind::Bool => Node::Bool(terms::true_or_false(&value)?),
            Kind::Text => Node::String(value),
        }))
    }
}

impl MappedField {
    /// The field `name` of a definition in `format`, at `slot`.
    fn compile(
        format: &Format,
        name: &'static str,
        field: &Field,
        slot: usize,
    ) -> Result<Self, String> {
        let source = source_of(format, field)?;
        let steps = FieldSteps::compile(field)?;
        let (kind, term) = terms::kind_of(name);
        // A field a definition could map but no slot holds fails here, loudly, rather than
        // landing in another member's slot.
        let member = match (Member::named(name), name) {
            (Some(member), _) => member,
            (None, "min_quantity" | "unit_price") => Member::PriceBreaks,
            (None, other) => return Err(format!("{other} is no member a row holds")),
        };
        Ok(MappedField {
            name,
            member,
            slot,
            kind,
            term,
            source,
            steps,
        })
    }
}

/// Where a field's value is, for the format: a path is JSONPath in JSON, an element path in XML.
fn source_of(format: &Format, field: &Field) -> Result<Source, String> {
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
    Kept(Node<'r>),
}

/// `value` through a conversion that borrows what it does not change: still borrowed from the
/// body where it was, one owned copy where the conversion wrote one or the value was owned.
fn converted<'r>(
    value: Cow<'r, str>,
    convert: impl for<'t> Fn(&'t str) -> Result<Cow<'t, str>, String>,
) -> Result<Cow<'r, str>, String> {
    match value {
        Cow::Borrowed(text) => convert(text),
        Cow::Owned(text) => convert(&text).map(|c| Cow::Owned(c.into_owned())),
    }
}

/// A row's place: `prefix` and the row's number (`line 7`, `/data/items/3`), written for every
/// row without the formatting machinery.
fn place(prefix: &str, number: impl itoa::Integer) -> String {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(number);
    let mut place = String::with_capacity(prefix.len() + digits.len());
    place.push_str(prefix);
    place.push_str(digits);
    place
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
