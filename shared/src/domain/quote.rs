//! An offer's answer to a buyer's quantity: whether that many can be ordered (minimum order
//! quantity, order multiple, stock, the first price break), the unit price its breaks give,
//! the extended price, whether the price is valid now, and its rank among the offers of its
//! currency. Exact: decimals are multiplied and compared as integers at a common scale, never
//! as floats. Offers in different currencies are never compared (no conversion).

use crate::domain::money::Price;
use crate::domain::quantity::{decimal_places, Quantity};
use crate::domain::terms::{Decimal, Terms};
use crate::domain::timestamp::Timestamp;
use num_bigint::BigUint;
use serde::Serialize;
use std::cmp::Ordering;

/// Fraction digits kept when a price basis does not divide the extended price exactly.
const DIVISION_SCALE: u32 = 18;

/// What ordering a quantity from one offer means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    /// The quantity asked about, as the caller wrote it.
    pub quantity: String,
    pub orderable: bool,
    /// Why not, each reason on its own (empty when orderable).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_orderable_because: Vec<String>,
    /// The unit price the breaks give for the quantity (the offer's price without breaks), per
    /// `price_basis` units; `null` below the first break.
    pub unit_price: Option<String>,
    /// `quantity x unit_price / price_basis`; `null` without a unit price.
    pub extended_price: Option<String>,
    /// Present and true when the price basis did not divide the extended price within 18
    /// fraction digits (it is then rounded half up there).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub extended_price_rounded: bool,
    /// `current`, `expired` (past `valid_until`) or `not_yet_valid` (before `valid_from`).
    pub price_status: &'static str,
    /// 1 for the lowest price per unit among the orderable offers of its currency whose price
    /// is current (equal prices share a rank); `null` for any other offer.
    pub rank: Option<u32>,
}

/// The offer's side of a quote: its stock, price and terms.
pub struct Offered<'a> {
    pub stock: &'a Quantity,
    /// The decimal places the offer's unit allows (0: whole units).
    pub places: u8,
    pub price: &'a Price,
    pub currency: &'a str,
    pub terms: &'a Terms,
}

impl Quote {
    /// The quote of `quantity` from `offered` at `now`, not yet ranked.
    pub fn of(quantity: &Decimal, offered: &Offered<'_>, now: Timestamp) -> Quote {
        let q = Exact::of(quantity.as_str());
        let terms = offered.terms;
        let unit_price = match terms.price_breaks.is_empty() {
            true => Some(offered.price),
            false => terms.unit_price_for(quantity),
        };
        let mut why = Vec::new();
        if let Some(first) = terms.price_breaks.first().filter(|_| unit_price.is_none()) {
            why.push(format!(
                "below the first price break ({})",
                first.min_quantity.as_str()
            ));
        }
        if let Some(moq) = &terms.minimum_order_quantity {
            if q.cmp(&Exact::of(moq.as_str())).is_lt() {
                why.push(format!("below the minimum order quantity {}", moq.as_str()));
            }
        }
        if let Some(multiple) = &terms.order_multiple {
            if !q.is_multiple_of(&Exact::of(multiple.as_str())) {
                why.push(format!("not a multiple of {}", multiple.as_str()));
            }
        }
        if decimal_places(quantity.as_str()) > usize::from(offered.places) {
            why.push(match offered.places {
                0 => "not a whole number of the offer's unit".to_owned(),
                p => format!("finer than the offer's unit allows ({p} decimal places)"),
            });
        }
        if q.cmp(&Exact::of(offered.stock.as_str())).is_gt() {
            why.push(format!("more than the {} in stock", offered.stock));
        }
        let extended = unit_price.map(|p| extended_price(&q, p, terms.price_basis.as_ref()));
        Quote {
            quantity: quantity.as_str().to_owned(),
            orderable: why.is_empty(),
            not_orderable_because: why,
            unit_price: unit_price.map(|p| p.as_str().to_owned()),
            extended_price: extended.as_ref().map(|(e, _)| e.to_text()),
            extended_price_rounded: extended.is_some_and(|(_, exact)| !exact),
            price_status: price_status(terms, now),
            rank: None,
        }
    }

    /// Whether this quote takes part in its currency's ranking.
    fn rankable(&self) -> bool {
        self.orderable && self.price_status == "current" && self.unit_price.is_some()
    }
}

fn price_status(terms: &Terms, now: Timestamp) -> &'static str {
    match (terms.valid_from, terms.valid_until) {
        (_, Some(until)) if until < now => "expired",
        (Some(from), _) if from > now => "not_yet_valid",
        _ => "current",
    }
}

/// `quantity x price / basis`, and whether that is exact.
fn extended_price(quantity: &Exact, price: &Price, basis: Option<&Decimal>) -> (Exact, bool) {
    let gross = quantity.mul(&Exact::of(price.as_str()));
    match basis {
        None => (gross, true),
        Some(basis) => gross.div(&Exact::of(basis.as_str())),
    }
}

/// Ranks the rankable quotes of each currency by their price per unit (`unit_price /
/// price_basis`), lowest first; `quotes` pairs each quote with its offer's currency and basis.
pub fn rank(quotes: &mut [(&mut Quote, &str, Option<&Decimal>)]) {
    let per_unit = |q: &Quote, basis: Option<&Decimal>| -> (Exact, Exact) {
        let price = Exact::of(q.unit_price.as_deref().unwrap_or("0"));
        (price, Exact::of(basis.map_or("1", Decimal::as_str)))
    };
    for i in 0..quotes.len() {
        if !quotes[i].0.rankable() {
            continue;
        }
        let (price, basis) = per_unit(quotes[i].0, quotes[i].2);
        let cheaper = quotes
            .iter()
            .filter(|(other, currency, _)| other.rankable() && *currency == quotes[i].1)
            .filter(|(other, _, other_basis)| {
                let (p, b) = per_unit(other, *other_basis);
                // p / b < price / basis, exactly: p x basis < price x b.
                p.mul(&basis).cmp(&price.mul(&b)).is_lt()
            })
            .count();
        quotes[i].0.rank = Some(cheaper as u32 + 1);
    }
}

/// A non-negative decimal as an integer and the power of ten it is divided by.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exact {
    digits: BigUint,
    scale: u32,
}

impl Exact {
    /// A text of the decimal grammar (digits, an optional fraction); anything else is zero,
    /// which the callers never pass (their texts were checked when they were read).
    fn of(text: &str) -> Exact {
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        let digits = format!("{int}{frac}");
        Exact {
            digits: BigUint::parse_bytes(digits.as_bytes(), 10).unwrap_or_default(),
            scale: frac.len() as u32,
        }
    }

    /// Both at the larger scale.
    fn aligned(&self, other: &Exact) -> (BigUint, BigUint) {
        let ten = BigUint::from(10u32);
        let scale = self.scale.max(other.scale);
        (
            &self.digits * ten.pow(scale - self.scale),
            &other.digits * ten.pow(scale - other.scale),
        )
    }

    fn cmp(&self, other: &Exact) -> Ordering {
        let (a, b) = self.aligned(other);
        a.cmp(&b)
    }

    fn is_multiple_of(&self, other: &Exact) -> bool {
        let (a, b) = self.aligned(other);
        b != BigUint::default() && (a % b) == BigUint::default()
    }

    fn mul(&self, other: &Exact) -> Exact {
        Exact {
            digits: &self.digits * &other.digits,
            scale: self.scale + other.scale,
        }
    }

    /// `self / other` at this value's scale if that is exact, else rounded half up at the
    /// larger of that scale and 18 fraction digits; and whether it was exact.
    fn div(&self, other: &Exact) -> (Exact, bool) {
        let ten = BigUint::from(10u32);
        let scale = self.scale.max(DIVISION_SCALE);
        // self / other = (d1 / 10^s1) / (d2 / 10^s2) = d1 x 10^(scale - s1 + s2) / d2 / 10^scale
        let numerator = &self.digits * ten.pow(scale - self.scale + other.scale);
        if other.digits == BigUint::default() {
            return (self.clone(), false);
        }
        let (quotient, remainder) = (&numerator / &other.digits, &numerator % &other.digits);
        let exact = remainder == BigUint::default();
        let rounded = match &remainder * 2u32 >= other.digits {
            true => quotient + 1u32,
            false => quotient,
        };
        let value = Exact {
            digits: rounded,
            scale,
        };
        match exact {
            true => (value.at_scale(self.scale), true),
            false => (value, false),
        }
    }

    /// The same value written with `scale` fraction digits, if no digit is lost; else as is.
    fn at_scale(self, scale: u32) -> Exact {
        let factor = BigUint::from(10u32).pow(self.scale.saturating_sub(scale));
        match (&self.digits % &factor) == BigUint::default() && scale <= self.scale {
            true => Exact {
                digits: &self.digits / factor,
                scale,
            },
            false => self,
        }
    }

    /// The decimal text: at least one integer digit, `scale` fraction digits.
    fn to_text(&self) -> String {
        let digits = self.digits.to_str_radix(10);
        let scale = self.scale as usize;
        if scale == 0 {
            return digits;
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{int}.{frac}")
    }
}

#[cfg(test)]
mod tests;
