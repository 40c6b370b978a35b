//! The row rules: one row object (the same for every format) becomes one offer, or a refusal
//! naming what is wrong with it. A connector definition declares the rules a source's rows
//! follow ([`RowRules`]); the built-in formats follow the defaults.

use super::members::{Member, RowView};
use super::NormalizedRow;
use crate::domain::canonical_json::Node;
use crate::domain::currency::is_iso4217_currency;
use crate::domain::item::{CanonicalItem, ItemParts};
use crate::domain::money::Price;
use crate::domain::quantity::Quantity;
use crate::domain::reject::{RejectCode, Rejection};
use crate::domain::terms::{compare_decimals, Terms};
use crate::domain::timestamp::{Timestamp, TimestampError};
use std::collections::BTreeMap;

/// What a source declares about its rows (a connector definition's `unit_decimal_places`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowRules {
    /// The decimal places a quantity may have, by unit (lower-cased); a unit not listed counts
    /// whole units.
    pub unit_decimal_places: BTreeMap<String, u8>,
}

/// The rules of the built-in formats: whole quantities.
pub(super) const LEGACY_RULES: RowRules = RowRules {
    unit_decimal_places: BTreeMap::new(),
};

impl RowRules {
    /// The decimal places a quantity in `unit` (lower-cased) may have.
    pub fn places_of(&self, unit: &str) -> u8 {
        self.unit_decimal_places.get(unit).copied().unwrap_or(0)
    }
}

/// The last `observed_at` text the row rules read, and its instant: one body's rows mostly
/// share a time (their export's), which is then parsed once. The text's buffer is reused.
#[derive(Debug, Default)]
pub(super) struct TimeSeen {
    text: String,
    at: Option<Timestamp>,
}

impl TimeSeen {
    /// `text` as [`Timestamp::parse`] reads it.
    pub(super) fn parse(&mut self, text: &str) -> Result<Timestamp, TimestampError> {
        if let Some(at) = self.at.filter(|_| self.text == text) {
            return Ok(at);
        }
        let at = Timestamp::parse(text)?;
        self.text.clear();
        self.text.push_str(text);
        self.at = Some(at);
        Ok(at)
    }
}

/// One row object's offer, or why it is refused (the message starts with `place`). `seen`
/// is the body's, carried from row to row.
pub(super) fn normalize_row(
    place: &str,
    row: &impl RowView,
    default_observed_at: Option<Timestamp>,
    canonical: Vec<u8>,
    rules: &RowRules,
    seen: &mut TimeSeen,
) -> Result<NormalizedRow, Rejection> {
    let at = |code: RejectCode, what: String| Rejection::new(code, format!("{place}: {what}"));
    if !row.is_object() {
        return Err(at(RejectCode::InvalidRow, "must be an object".into()));
    }
    let text = |member: Member| -> Result<Option<&str>, Rejection> {
        match row.member(member) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::String(s)) => Ok(Some(s.as_ref())),
            Some(_) => Err(at(
                RejectCode::InvalidRow,
                format!("{} must be a string", member.name()),
            )),
        }
    };
    let terms = Terms::read(row).map_err(|problems| terms_refusal(place, problems))?;
    let sku =
        text(Member::Sku)?.ok_or_else(|| at(RejectCode::InvalidRow, "sku is missing".into()))?;
    let unit =
        text(Member::Unit)?.ok_or_else(|| at(RejectCode::InvalidRow, "unit is missing".into()))?;
    let parts = ItemParts {
        // The manufacturer's part number where the row names one; the supplier's SKU, which
        // stays the observation's source record, where it does not.
        part_number: text(Member::Mpn)?.unwrap_or(sku),
        manufacturer: text(Member::Manufacturer)?,
        revision: text(Member::Revision)?,
        // The packaging the row names (reel, cut-tape) is the item's; without one, its unit is.
        packaging_unit: Some(terms.packaging.as_deref().unwrap_or(unit)),
        condition: text(Member::Condition)?,
    };
    let item = CanonicalItem::of(parts).map_err(|e| at(RejectCode::InvalidRow, e.to_string()))?;
    let quantity_basis = unit.trim().to_ascii_lowercase();
    let quantity_places = rules.places_of(&quantity_basis);
    let quantity = parse_quantity(row.member(Member::Quantity), quantity_places)
        .map_err(|why| at(RejectCode::InvalidQuantity, why))?;
    let places = term_places(&terms, quantity_places);
    if !places.is_empty() {
        return Err(at(RejectCode::InvalidQuantity, places.join("; ")));
    }
    let price = row_price(row.member(Member::Price), &terms)
        .map_err(|why| at(RejectCode::InvalidPrice, why))?;
    let currency = text(Member::Currency)?.unwrap_or_default();
    if !is_iso4217_currency(currency) {
        let shown: String = currency.chars().take(8).collect();
        return Err(at(
            RejectCode::UnknownCurrency,
            format!("currency {shown:?} is not an active ISO 4217 code"),
        ));
    }
    let observed_at = match text(Member::ObservedAt)? {
        Some(t) => seen
            .parse(t)
            .map_err(|e| at(RejectCode::InvalidRow, format!("observed_at: {e}")))?,
        None => default_observed_at
            .ok_or_else(|| at(RejectCode::InvalidRow, "observed_at is missing".into()))?,
    };
    Ok(NormalizedRow {
        source_record: sku.to_owned(),
        item,
        quantity,
        quantity_basis,
        quantity_places,
        price,
        currency: currency.to_owned(),
        observed_at,
        terms,
        canonical,
    })
}

/// The row's price: as written, or the first price break's when the row names none; a price
/// beside breaks must be the first break's (by value), or the row contradicts itself.
fn row_price(value: Option<&Node<'_>>, terms: &Terms) -> Result<Price, String> {
    let first_break = terms.price_breaks.first().map(|b| &b.unit_price);
    let price = match (value, first_break) {
        (Some(Node::String(s)), _) => Price::parse(s).map_err(|e| format!("price {s:?}: {e}"))?,
        (Some(Node::Number(_)), _) => {
            return Err(
                "price must be a decimal string such as \"820.00\", not a JSON number".into(),
            )
        }
        (None | Some(Node::Null), Some(first)) => return Ok(first.clone()),
        _ => return Err("price is missing or not a string".into()),
    };
    match first_break {
        Some(first) if compare_decimals(price.as_str(), first.as_str()).is_ne() => Err(format!(
            "price {} is not the first price break's unit price {}",
            price.as_str(),
            first.as_str()
        )),
        _ => Ok(price),
    }
}

/// A refusal naming every problem of a row's terms, with their code when they share one.
fn terms_refusal(place: &str, problems: Vec<(RejectCode, String)>) -> Rejection {
    let code = match problems.iter().all(|(c, _)| *c == problems[0].0) {
        true => problems[0].0,
        false => RejectCode::InvalidRow,
    };
    let listed: Vec<String> = problems.into_iter().map(|(_, m)| m).collect();
    Rejection::new(code, format!("{place}: {}", listed.join("; ")))
}

/// The row's quantity, as its unit's declared places allow.
fn parse_quantity(value: Option<&Node<'_>>, places: u8) -> Result<Quantity, String> {
    match value {
        Some(Node::Number(literal)) => Quantity::parse(literal, places),
        Some(_) => Err("quantity must be a JSON number".into()),
        None => Err("quantity is missing".into()),
    }
}

/// Every quantity term the unit's places do not allow (the minimum order quantity, order
/// multiple, pack size, price basis and break quantities count the row's unit too).
fn term_places(terms: &Terms, places: u8) -> Vec<String> {
    let plain = [
        ("minimum_order_quantity", &terms.minimum_order_quantity),
        ("order_multiple", &terms.order_multiple),
        ("pack_size", &terms.pack_size),
        ("price_basis", &terms.price_basis),
    ];
    // Names are written only for a refusal: most rows state none of these terms.
    let mut problems: Vec<String> = plain
        .into_iter()
        .filter_map(|(name, value)| {
            Quantity::parse_as(name, value.as_ref()?.as_str(), places).err()
        })
        .collect();
    for (i, b) in terms.price_breaks.iter().enumerate() {
        let name = format_args!("price_breaks[{i}].min_quantity");
        if let Err(why) = Quantity::parse_as(name, b.min_quantity.as_str(), places) {
            problems.push(why);
        }
    }
    problems
}
