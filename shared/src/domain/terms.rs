//! The commercial terms a supplier states beside a price and a quantity: price breaks by
//! quantity, the price basis, minimum order quantity and order multiple, lead time, packaging
//! and pack size, the price's validity, incoterms and whether tax is included. Each is
//! optional and exact: decimals are kept as written (never a float), as prices are.
//!
//! A row states them as members of its row object (docs/item-schema.md, "Commercial terms");
//! [`Terms::read`] checks them all and names every problem of the row.

use crate::domain::canonical_json::Node;
use crate::domain::money::{check_decimal, Price};
use crate::domain::normalize::{Member, RowView};
use crate::domain::reject::RejectCode;
use crate::domain::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Most price breaks one row may state.
pub const MAX_PRICE_BREAKS: usize = 50;
/// Longest lead time one row may state, in days (ten years).
pub const MAX_LEAD_TIME_DAYS: u64 = 3_650;
/// Longest free text (the supplier's lead time, packaging), in characters.
pub const MAX_TERM_TEXT_CHARS: usize = 100;

/// The Incoterms 2020 rules.
pub const INCOTERMS: [&str; 11] = [
    "CFR", "CIF", "CIP", "CPT", "DAP", "DDP", "DPU", "EXW", "FAS", "FCA", "FOB",
];

/// A non-negative decimal kept as written (`1000`, `2.5`, `0.412`): the grammar of [`Price`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Decimal(String);

impl Decimal {
    pub fn parse(text: &str) -> Result<Self, String> {
        check_decimal(text)
            .map(|()| Decimal(text.to_owned()))
            .map_err(|e| e.to_string().replacen("price", "value", 1))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_zero(&self) -> bool {
        self.0.bytes().all(|b| b == b'0' || b == b'.')
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Decimal::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Decimal {
    /// By value: `2.50` and `2.5` are equal here (and only here: `==` compares the text as
    /// written, which the fingerprint and mismatch checks see).
    pub fn cmp_value(&self, other: &Decimal) -> Ordering {
        compare_decimals(&self.0, &other.0)
    }
}

/// Two texts of the decimal grammar (no sign, no leading zeros) compared by value.
pub fn compare_decimals(a: &str, b: &str) -> Ordering {
    let (a_int, a_frac) = a.split_once('.').unwrap_or((a, ""));
    let (b_int, b_frac) = b.split_once('.').unwrap_or((b, ""));
    a_int
        .len()
        .cmp(&b_int.len())
        .then_with(|| a_int.cmp(b_int))
        .then_with(|| {
            a_frac
                .trim_end_matches('0')
                .cmp(b_frac.trim_end_matches('0'))
        })
}

/// The unit price from a quantity on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PriceBreak {
    pub min_quantity: Decimal,
    pub unit_price: Price,
}

/// Every term a row stated; an absent one is `None` (or no break).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Terms {
    /// Ascending by `min_quantity`; the row's price is the first break's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub price_breaks: Vec<PriceBreak>,
    /// The price is per this many units of the quantity basis (`100`: a price per hundred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_basis: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_order_quantity: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_multiple: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_time_days: Option<u64>,
    /// The supplier's own words for the lead time (`3-4 weeks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_time: Option<String>,
    /// How the goods come (reel, cut-tape, tray): part of the item, apart from the quantity
    /// basis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packaging: Option<String>,
    /// Units in one package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_size: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incoterms: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tax_included: Option<bool>,
}

/// One problem of a row's terms: its code and what is wrong (naming the member).
pub type TermProblem = (RejectCode, String);

impl Terms {
    /// Whether the row stated no term at all.
    pub fn is_empty(&self) -> bool {
        *self == Terms::default()
    }

    /// The terms of a row object; every problem is named, not the first only.
    pub fn read(row: &impl RowView) -> Result<Terms, Vec<TermProblem>> {
        use RejectCode::{InvalidPrice, InvalidQuantity, InvalidRow};
        if !row.states_a_term() {
            return Ok(Terms::default());
        }
        let mut problems = Problems(Vec::new());
        let decimal = |m: Member| positive_decimal(row.member(m), m.name());
        let text = |m: Member| text(row.member(m), m.name());
        let time = |m: Member| time(row.member(m), m.name());
        let terms = Terms {
            price_breaks: problems
                .keep(
                    InvalidPrice,
                    price_breaks(row.member(Member::PriceBreaks)).map(Some),
                )
                .unwrap_or_default(),
            price_basis: problems.keep(InvalidRow, decimal(Member::PriceBasis)),
            minimum_order_quantity: problems
                .keep(InvalidQuantity, decimal(Member::MinimumOrderQuantity)),
            order_multiple: problems.keep(InvalidQuantity, decimal(Member::OrderMultiple)),
            pack_size: problems.keep(InvalidQuantity, decimal(Member::PackSize)),
            lead_time_days: problems
                .keep(InvalidRow, lead_time_days(row.member(Member::LeadTimeDays))),
            lead_time: problems.keep(InvalidRow, text(Member::LeadTime)),
            packaging: problems.keep(InvalidRow, text(Member::Packaging)),
            valid_from: problems.keep(InvalidRow, time(Member::ValidFrom)),
            valid_until: problems.keep(InvalidRow, time(Member::ValidUntil)),
            incoterms: problems.keep(InvalidRow, incoterms(row.member(Member::Incoterms))),
            tax_included: problems.keep(InvalidRow, tax_included(row.member(Member::TaxIncluded))),
        };
        if let (Some(from), Some(until)) = (terms.valid_from, terms.valid_until) {
            if until < from {
                problems
                    .0
                    .push((InvalidRow, "valid_until is earlier than valid_from".into()));
            }
        }
        match problems.0.is_empty() {
            true => Ok(terms),
            false => Err(problems.0),
        }
    }

    /// The unit price `quantity` units cost: the last break whose `min_quantity` it reaches;
    /// `None` below the first break or without breaks.
    pub fn unit_price_for(&self, quantity: &Decimal) -> Option<&Price> {
        self.price_breaks
            .iter()
            .rev()
            .find(|b| b.min_quantity.cmp_value(quantity).is_le())
            .map(|b| &b.unit_price)
    }
}

/// The problems of one row's terms, in the order the terms are read.
struct Problems(Vec<TermProblem>);

impl Problems {
    /// The term's value, or `None` with its problem noted under `code`.
    fn keep<T>(&mut self, code: RejectCode, read: Result<Option<T>, String>) -> Option<T> {
        read.unwrap_or_else(|why| {
            self.0.push((code, why));
            None
        })
    }
}

fn tax_included(value: Option<&Node<'_>>) -> Result<Option<bool>, String> {
    match value {
        None | Some(Node::Null) => Ok(None),
        Some(Node::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err("tax_included must be true or false".into()),
    }
}

/// A decimal member written as a JSON number or a string (the literal either way), above zero.
fn positive_decimal(value: Option<&Node<'_>>, name: &str) -> Result<Option<Decimal>, String> {
    let literal = match value {
        None | Some(Node::Null) => return Ok(None),
        Some(Node::Number(n) | Node::String(n)) => n.as_ref(),
        Some(_) => return Err(format!("{name} must be a decimal number or string")),
    };
    let decimal = Decimal::parse(literal).map_err(|e| format!("{name} {}: {e}", shown(literal)))?;
    match decimal.is_zero() {
        true => Err(format!("{name} must be more than 0")),
        false => Ok(Some(decimal)),
    }
}

/// The breaks, ascending by quantity, each a positive quantity and a price string.
fn price_breaks(value: Option<&Node<'_>>) -> Result<Vec<PriceBreak>, String> {
    let items = match value {
        None | Some(Node::Null) => return Ok(Vec::new()),
        Some(Node::Array(items)) => items,
        Some(_) => return Err("price_breaks must be an array".into()),
    };
    if items.is_empty() || items.len() > MAX_PRICE_BREAKS {
        return Err(format!(
            "price_breaks must hold 1 to {MAX_PRICE_BREAKS} breaks, not {}",
            items.len()
        ));
    }
    let mut breaks = Vec::with_capacity(items.len());
    let mut problems = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match price_break(item) {
            Ok(b) => breaks.push(b),
            Err(why) => problems.push(format!("price_breaks[{index}]: {why}")),
        }
    }
    if problems.is_empty() {
        if let Some(at) = breaks
            .windows(2)
            .position(|w| w[1].min_quantity.cmp_value(&w[0].min_quantity).is_le())
        {
            problems.push(format!(
                "price_breaks[{}]: min_quantity {} does not rise above the break before ({})",
                at + 1,
                breaks[at + 1].min_quantity.as_str(),
                breaks[at].min_quantity.as_str()
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(breaks),
        false => Err(problems.join("; ")),
    }
}

fn price_break(item: &Node<'_>) -> Result<PriceBreak, String> {
    if !item.is_object() {
        return Err("must be an object with min_quantity and unit_price".into());
    }
    let min_quantity = positive_decimal(item.get("min_quantity"), "min_quantity")?
        .ok_or("min_quantity is missing")?;
    let unit_price = match item.get("unit_price") {
        Some(Node::String(s)) => {
            Price::parse(s).map_err(|e| format!("unit_price {}: {e}", shown(s)))?
        }
        Some(Node::Number(_)) => {
            return Err(
                "unit_price must be a decimal string such as \"0.412\", not a JSON number".into(),
            )
        }
        _ => return Err("unit_price is missing or not a string".into()),
    };
    Ok(PriceBreak {
        min_quantity,
        unit_price,
    })
}

fn lead_time_days(value: Option<&Node<'_>>) -> Result<Option<u64>, String> {
    let literal = match value {
        None | Some(Node::Null) => return Ok(None),
        Some(Node::Number(n)) => n.as_ref(),
        Some(_) => return Err("lead_time_days must be a whole JSON number".into()),
    };
    match literal.parse::<u64>() {
        Ok(days) if days <= MAX_LEAD_TIME_DAYS && literal.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Some(days))
        }
        _ => Err(format!(
            "lead_time_days {} is not a whole number of days from 0 to {MAX_LEAD_TIME_DAYS}",
            shown(literal)
        )),
    }
}

/// A short text term, trimmed; empty is absent.
fn text(value: Option<&Node<'_>>, name: &str) -> Result<Option<String>, String> {
    let text = match value {
        None | Some(Node::Null) => return Ok(None),
        Some(Node::String(s)) => s.trim(),
        Some(_) => return Err(format!("{name} must be a string")),
    };
    if text.chars().count() > MAX_TERM_TEXT_CHARS {
        return Err(format!(
            "{name} is longer than {MAX_TERM_TEXT_CHARS} characters"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{name} {} holds a control character", shown(text)));
    }
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

fn time(value: Option<&Node<'_>>, name: &str) -> Result<Option<Timestamp>, String> {
    match value {
        None | Some(Node::Null) => Ok(None),
        Some(Node::String(s)) => Timestamp::parse(s)
            .map(Some)
            .map_err(|e| format!("{name}: {e}")),
        Some(_) => Err(format!("{name} must be an RFC 3339 string")),
    }
}

fn incoterms(value: Option<&Node<'_>>) -> Result<Option<String>, String> {
    match value {
        None | Some(Node::Null) => Ok(None),
        Some(Node::String(s)) if INCOTERMS.contains(&s.as_ref()) => Ok(Some(s.to_string())),
        Some(Node::String(s)) => Err(format!(
            "incoterms {} is not an Incoterms 2020 rule ({})",
            shown(s),
            INCOTERMS.join(", ")
        )),
        Some(_) => Err("incoterms must be a string".into()),
    }
}

/// A supplier's value quoted for a message, its first 64 characters only.
fn shown(text: &str) -> String {
    crate::domain::mapping::values::shown(text)
}

/// Test data: texts of the decimal grammar, up to its 30 bytes.
#[cfg(test)]
pub(crate) fn decimal_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::strategy::Strategy;
    ("(0|[1-9][0-9]{0,11})", proptest::option::of("[0-9]{1,18}"))
        .prop_map(|(int, frac)| match frac {
            Some(frac) => format!("{int}.{frac}"),
            None => int,
        })
        .prop_filter("at most 30 bytes", |t| t.len() <= 30)
}

#[cfg(test)]
mod tests;
