//! The commercial terms a definition maps (docs/connectors.md, "Commercial terms"): each plain
//! term's kind (the conversion its value goes through), and the price breaks in their two
//! forms: an array in a JSON row (`each`), or fixed pairs of fields in any format (`pairs`).
//! Both give the row member `price_breaks`, an array of `{"min_quantity", "unit_price"}`
//! objects (both decimal strings) in the order read; a row with no break has no such member.
//! Whether the terms make sense (a positive quantity, breaks that rise) is the row rules' to
//! say.

use super::json_rows;
use super::{MappedField, Mapping, Raw, TimeMemos};
use crate::domain::canonical_json::Node;
use crate::domain::definition::{Field, Format, PriceBreaks, Problem, MAX_PRICE_BREAK_PAIRS};
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::mapping::values::shown;
use std::borrow::Cow;

/// How a field's text becomes its row value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A whole number (`lead_time_days`): a JSON number.
    Whole,
    /// The offer's quantity: a decimal written with a dot afterwards, as a JSON number.
    Quantity,
    /// A decimal written with a dot afterwards: a string.
    Decimal,
    /// A time, RFC 3339 in UTC afterwards, through the memo of its index in [`TimeMemos`].
    Time(usize),
    /// `true` or `false` (ASCII, any case): a JSON boolean.
    Bool,
    /// The text as it is.
    Text,
}

/// A field's kind by its name, and whether it is a commercial term (whose JSON values kept as
/// written are converted by their kind too, where the offer's stay as they are).
pub(super) fn kind_of(name: &str) -> (Kind, bool) {
    match name {
        "quantity" => (Kind::Quantity, false),
        "price" => (Kind::Decimal, false),
        "observed_at" => (Kind::Time(0), false),
        "lead_time_days" => (Kind::Whole, true),
        "minimum_order_quantity"
        | "order_multiple"
        | "pack_size"
        | "price_basis"
        | "min_quantity"
        | "unit_price" => (Kind::Decimal, true),
        "valid_from" => (Kind::Time(1), true),
        "valid_until" => (Kind::Time(2), true),
        "tax_included" => (Kind::Bool, true),
        "lead_time" | "packaging" | "incoterms" => (Kind::Text, true),
        _ => (Kind::Text, false),
    }
}

/// What a term's JSON value kept as written gives.
pub(super) enum Kept<'r> {
    /// Its row value.
    Value(Node<'r>),
    /// The text its kind's conversion reads.
    Text(String),
}

/// A term's JSON value kept as written (its field has no pattern and no map). A decimal number
/// is kept as the string of its digits (`1000` is `"1000"`; one with an exponent is refused),
/// a whole number stays a number, a boolean stays a boolean; a time's or a text's value is
/// read as its text.
pub(super) fn kept(kind: Kind, node: Node<'_>) -> Result<Kept<'_>, String> {
    match (kind, node) {
        (Kind::Decimal, Node::Number(n)) if n.contains(['e', 'E']) => Err(format!(
            "{} is written with an exponent; a decimal is digits with at most one '.'",
            shown(&n)
        )),
        (Kind::Decimal, Node::Number(n)) => Ok(Kept::Value(Node::String(n))),
        (Kind::Decimal, other) => Err(format!("{} is not a decimal", kept_text(&other))),
        (Kind::Whole, Node::Number(n)) if n.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Kept::Value(Node::Number(n)))
        }
        (Kind::Whole, other) => Err(format!("{} is not a whole number", kept_text(&other))),
        (Kind::Quantity, Node::Number(n)) => Ok(Kept::Value(Node::Number(n))),
        (Kind::Quantity, other) => Err(format!("{} is not a number", kept_text(&other))),
        (Kind::Bool, Node::Bool(b)) => Ok(Kept::Value(Node::Bool(b))),
        (Kind::Bool, other) => Err(format!("{} is not true or false", kept_text(&other))),
        (Kind::Time(_) | Kind::Text, other) => super::node_text(&other).map(Kept::Text),
    }
}

/// A kept value quoted for a message.
fn kept_text(node: &Node<'_>) -> String {
    match node {
        Node::String(s) | Node::Number(s) => shown(s),
        Node::Bool(b) => b.to_string(),
        Node::Null => "null".into(),
        Node::Array(_) => "an array".into(),
        Node::Object(_) => "an object".into(),
    }
}

/// `tax_included`'s value after its steps: `true` or `false`, in any ASCII case.
pub(super) fn true_or_false(value: &str) -> Result<bool, String> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(format!("{} is not true or false", shown(value)))
    }
}

/// A definition's price breaks, compiled.
#[derive(Debug, Clone)]
pub(super) enum Breaks {
    /// JSON: an array in each row.
    Each(Box<Each>),
    /// Fixed pairs of fields, read from the row as every other field is.
    Pairs(Vec<Pair>),
}

/// The array at `each` relative to the row (`text` as written, for messages), each element's
/// values at `pair`'s paths relative to the element.
#[derive(Debug, Clone)]
pub(super) struct Each {
    each: JsonPath,
    text: String,
    pair: Pair,
}

/// One break's two fields.
#[derive(Debug, Clone)]
pub(super) struct Pair {
    pub(super) min_quantity: MappedField,
    pub(super) unit_price: MappedField,
}

impl Breaks {
    /// The breaks of a definition in `format`; their fields take the slots from `slots` on
    /// (advanced past them). Every problem is named with its pointer.
    pub(super) fn compile(
        format: &Format,
        breaks: &PriceBreaks,
        slots: &mut usize,
    ) -> Result<Self, Vec<Problem>> {
        const AT: &str = "/fields/price_breaks";
        let mut problems = Vec::new();
        let compiled = match breaks {
            PriceBreaks::Each(_) if !matches!(format, Format::Json(_)) => {
                problems.push(Problem::new(
                    format!("{AT}/each"),
                    "each is read in JSON bodies; list the breaks as pairs",
                ));
                None
            }
            PriceBreaks::Each(each) => {
                let path = JsonPath::parse(&each.each)
                    .map_err(|e| {
                        let why = format!("{:?}: {e}", each.each);
                        problems.push(Problem::new(format!("{AT}/each"), why))
                    })
                    .ok();
                let fields = [&each.min_quantity, &each.unit_price];
                let pair = Pair::compile(format, AT, fields, slots, &mut problems);
                path.zip(pair).map(|(path, pair)| {
                    Breaks::Each(Box::new(Each {
                        each: path,
                        text: each.each.clone(),
                        pair,
                    }))
                })
            }
            PriceBreaks::Pairs { pairs } => {
                if pairs.is_empty() || pairs.len() > MAX_PRICE_BREAK_PAIRS {
                    problems.push(Problem::new(
                        format!("{AT}/pairs"),
                        format!(
                            "lists {} pairs; a definition lists 1 to {MAX_PRICE_BREAK_PAIRS}",
                            pairs.len()
                        ),
                    ));
                }
                let mut compiled = Vec::with_capacity(pairs.len());
                for (index, pair) in pairs.iter().enumerate() {
                    let at = format!("{AT}/pairs/{index}");
                    let fields = [&pair.min_quantity, &pair.unit_price];
                    compiled.extend(Pair::compile(format, &at, fields, slots, &mut problems));
                }
                Some(Breaks::Pairs(compiled))
            }
        };
        match (compiled, problems.is_empty()) {
            (Some(breaks), true) => Ok(breaks),
            _ => Err(problems),
        }
    }
}

impl Pair {
    /// A break's two fields (`min_quantity`, `unit_price`) at `at`, in the next two slots.
    fn compile(
        format: &Format,
        at: &str,
        [min_quantity, unit_price]: [&Field; 2],
        slots: &mut usize,
        problems: &mut Vec<Problem>,
    ) -> Option<Pair> {
        let mut field = |part: &'static str, field: &Field| {
            let slot = *slots;
            *slots += 1;
            MappedField::compile(format, part, field, slot)
                .map_err(|e| problems.push(Problem::new(format!("{at}/{part}"), e)))
                .ok()
        };
        let min_quantity = field("min_quantity", min_quantity);
        let unit_price = field("unit_price", unit_price);
        Some(Pair {
            min_quantity: min_quantity?,
            unit_price: unit_price?,
        })
    }
}

impl Mapping {
    /// A row's `price_breaks` member (`None`: no break), every problem of it named: a pair by
    /// its number (from 1), an element of the `each` array by its path and index.
    pub(super) fn breaks_of<'r>(
        &'r self,
        memo: &mut TimeMemos,
        row: Option<&'r Node<'r>>,
        raw: &impl Fn(&'r MappedField) -> Result<Option<Raw<'r>>, String>,
    ) -> Result<Option<Node<'r>>, String> {
        let mut breaks = Vec::new();
        let mut problems = Vec::new();
        match (&self.breaks, row) {
            (None, _) | (Some(Breaks::Each(_)), None) => return Ok(None),
            (Some(Breaks::Pairs(pairs)), _) => {
                for (index, pair) in pairs.iter().enumerate() {
                    let values = [raw(&pair.min_quantity), raw(&pair.unit_price)];
                    match self.break_of(pair, values, memo) {
                        Ok(found) => breaks.extend(found),
                        Err(why) => problems.push(format!("pair {}: {why}", index + 1)),
                    }
                }
            }
            (Some(Breaks::Each(each)), Some(row)) => {
                let Each { each, text, pair } = each.as_ref();
                let items = match each.select(row) {
                    None | Some(Node::Null) => return Ok(None),
                    Some(Node::Array(items)) => items,
                    Some(_) => return Err(format!("{text} is not an array")),
                };
                for (index, item) in items.iter().enumerate() {
                    if !item.is_object() {
                        problems.push(format!("{text}[{index}] is not an object"));
                        continue;
                    }
                    let value = |field| Ok(json_rows::value(field, item));
                    let values = [value(&pair.min_quantity), value(&pair.unit_price)];
                    match self.break_of(pair, values, memo) {
                        Ok(found) => breaks.extend(found),
                        Err(why) => problems.push(format!("{text}[{index}]: {why}")),
                    }
                }
            }
        }
        match (problems.is_empty(), breaks.is_empty()) {
            (false, _) => Err(problems.join("; ")),
            (true, true) => Ok(None),
            (true, false) => Ok(Some(Node::Array(breaks))),
        }
    }

    /// One break from its two raw values: `None` when both are absent or empty (a row with
    /// fewer breaks), a problem when only one is.
    fn break_of<'r>(
        &'r self,
        pair: &'r Pair,
        [min_quantity, unit_price]: [Result<Option<Raw<'r>>, String>; 2],
        memo: &mut TimeMemos,
    ) -> Result<Option<Node<'r>>, String> {
        let mut read = |field: &'r MappedField, raw: Result<Option<Raw<'r>>, String>| {
            raw.and_then(|raw| self.value_of(field, raw, memo))
                .map_err(|why| format!("{}: {why}", field.name))
        };
        let min_quantity = read(&pair.min_quantity, min_quantity);
        let unit_price = read(&pair.unit_price, unit_price);
        match (min_quantity, unit_price) {
            (Ok(Some(min_quantity)), Ok(Some(unit_price))) => Ok(Some(Node::Object(vec![
                (Cow::Borrowed("min_quantity"), min_quantity),
                (Cow::Borrowed("unit_price"), unit_price),
            ]))),
            (Ok(None), Ok(None)) => Ok(None),
            (Ok(Some(_)), Ok(None)) => Err("a min_quantity without a unit_price".into()),
            (Ok(None), Ok(Some(_))) => Err("a unit_price without a min_quantity".into()),
            (Err(a), Err(b)) => Err(format!("{a}; {b}")),
            (Err(why), _) | (_, Err(why)) => Err(why),
        }
    }
}

#[cfg(test)]
mod tests;
