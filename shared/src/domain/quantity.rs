//! Quantities: how much stock a source claims, exact, in decimal where its unit allows.
//!
//! A quantity is a JSON number in every payload and answer, as it always was. A whole one
//! stays an integer (`6`, up to 2^53 - 1); a fractional one (`2.5` metres of cable) is allowed
//! only where the connector declares decimal places for its unit, and only as far as every
//! JSON reader keeps it exact: its value read as a binary double must print back as the same
//! decimal (15 significant digits always do). Within that range a JSON number is exact for
//! every client, so no answer needs a second spelling of it
//! (docs/adr/0012-supported-ranges-of-stored-values.md).
//!
//! The value is kept as its canonical decimal text: no leading zeros, no trailing fraction
//! zeros (`6.0` is `6`, so every whole quantity stored before fractions existed reads the
//! same). Arithmetic on quantities (quotes) is exact, on that text, never in floating point.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The largest quantity accepted: 2^53 - 1, the largest integer every JSON reader keeps exact
/// (a JavaScript client reads a larger one rounded).
pub const MAX_QUANTITY: u64 = (1 << 53) - 1;

/// Most decimal places a connector may declare for a unit.
pub const MAX_DECIMAL_PLACES: u8 = 6;

/// A non-negative quantity, exact (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity(String);

impl Quantity {
    /// The quantity a JSON number literal (or a mapped decimal) states, if its unit allows
    /// `places` decimal places; why not otherwise. Digits with at most one `.`: no sign, no
    /// exponent.
    pub fn parse(literal: &str, places: u8) -> Result<Quantity, String> {
        Self::parse_as("quantity", literal, places)
    }

    /// [`Self::parse`] of a quantity named `what` in messages (`minimum_order_quantity 2.5
    /// is not a whole number ...`).
    pub fn parse_as(
        what: impl fmt::Display,
        literal: &str,
        places: u8,
    ) -> Result<Quantity, String> {
        Self::parse_quantity(literal, places).map_err(|why| {
            let shown: String = literal.chars().take(40).collect();
            format!("{what} {shown} {why}")
        })
    }

    fn parse_quantity(literal: &str, places: u8) -> Result<Quantity, String> {
        let (whole, fraction) = split_decimal(literal).ok_or_else(|| refusal(literal))?;
        let whole = match whole.trim_start_matches('0') {
            "" => "0",
            digits => digits,
        };
        let fraction = fraction.trim_end_matches('0');
        if fraction.len() > usize::from(places) {
            return Err(too_precise(fraction.len(), places));
        }
        if whole.len() > 16 || whole.parse::<u64>().map_or(true, |w| w > MAX_QUANTITY) {
            return Err(format!("is larger than {MAX_QUANTITY}"));
        }
        let text = match fraction {
            "" => whole.to_owned(),
            _ => format!("{whole}.{fraction}"),
        };
        if !fraction.is_empty() && !reads_back_exactly(&text) {
            return Err("has more significant digits than a JSON reader keeps exactly (15)".into());
        }
        Ok(Quantity(text))
    }

    /// The canonical decimal text: `6`, `2.5`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the quantity is a whole number.
    pub fn is_whole(&self) -> bool {
        !self.0.contains('.')
    }

    /// The quantity as a whole number, if it is one.
    pub fn whole(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl From<u64> for Quantity {
    /// A whole quantity (callers hold it within [`MAX_QUANTITY`]; a larger one is still kept
    /// exactly as a value, but answers it as a JSON reader may round it).
    fn from(n: u64) -> Self {
        Quantity(n.to_string())
    }
}

impl PartialEq<u64> for Quantity {
    fn eq(&self, n: &u64) -> bool {
        self.whole() == Some(*n)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The decimal places a decimal text writes, trailing zeros not counted (`2.50` has 1).
pub fn decimal_places(text: &str) -> usize {
    text.split_once('.')
        .map_or(0, |(_, fraction)| fraction.trim_end_matches('0').len())
}

/// `digits[.digits]`, split; `None` for anything else (a sign, an exponent, a lone `.`).
fn split_decimal(literal: &str) -> Option<(&str, &str)> {
    let (whole, fraction) = literal.split_once('.').unwrap_or((literal, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let shaped = !whole.is_empty()
        && digits(whole)
        && digits(fraction)
        // `1.` has a dot and no fraction digits.
        && (fraction.is_empty() != literal.contains('.'));
    shaped.then_some((whole, fraction))
}

fn refusal(literal: &str) -> String {
    let negative = literal.strip_prefix('-').is_some_and(|unsigned| {
        unsigned
            .split(['e', 'E'])
            .next()
            .is_some_and(|mantissa| mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)))
    });
    match negative {
        true => "is negative".into(),
        false => "is not a decimal number (digits with at most one '.', no exponent)".into(),
    }
}

fn too_precise(places: usize, allowed: u8) -> String {
    match allowed {
        0 => "is not a whole number (its unit counts whole units unless the connector declares \
              decimal places for it)"
            .into(),
        _ => format!("has {places} decimal places; its unit allows {allowed}"),
    }
}

/// Whether a binary double prints `text` back (Rust prints the shortest decimal that reads
/// back as the same double, as JSON writers do).
fn reads_back_exactly(text: &str) -> bool {
    text.parse::<f64>()
        .is_ok_and(|f| f.is_finite() && f.to_string() == text)
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.whole() {
            Some(n) => serializer.serialize_u64(n),
            // Exact by construction: the double prints back as this text.
            None => serializer.serialize_f64(self.0.parse().map_err(serde::ser::Error::custom)?),
        }
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative number")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Quantity, E> {
        Ok(Quantity::from(n))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Quantity, E> {
        u64::try_from(n)
            .map(Quantity::from)
            .map_err(|_| E::custom(format!("quantity {n} is negative")))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Quantity, E> {
        self.visit_str(&f.to_string())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Quantity, E> {
        Quantity::parse(text, MAX_DECIMAL_PLACES).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_quantities_read_as_they_always_did() {
        for (sent, kept) in [
            ("6", "6"),
            ("0", "0"),
            ("007", "7"),
            ("6.0", "6"),
            ("9007199254740991", "9007199254740991"),
        ] {
            assert_eq!(Quantity::parse(sent, 1).unwrap().as_str(), kept, "{sent}");
        }
        assert_eq!(serde_json::to_string(&Quantity::from(6)).unwrap(), "6");
        let read: Quantity = serde_json::from_str("6").unwrap();
        assert_eq!(read, Quantity::from(6));
    }

    #[test]
    fn a_fraction_needs_its_units_places() {
        assert_eq!(Quantity::parse("2.50", 1).unwrap().as_str(), "2.5");
        assert_eq!(Quantity::parse("0.125", 3).unwrap().as_str(), "0.125");
        let refused = Quantity::parse("6.5", 0).unwrap_err();
        assert!(
            refused.starts_with("quantity 6.5 is not a whole number"),
            "{refused}"
        );
        let refused = Quantity::parse("2.55", 1).unwrap_err();
        assert_eq!(
            refused,
            "quantity 2.55 has 2 decimal places; its unit allows 1"
        );
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        for (sent, says) in [
            ("-1", "is negative"),
            ("-0.5", "is negative"),
            ("-0", "is not a decimal number"),
            ("1e3", "is not a decimal number"),
            ("1.", "is not a decimal number"),
            (".5", "is not a decimal number"),
            ("", "is not a decimal number"),
            ("9007199254740992", "is larger than 9007199254740991"),
            ("99999999999999999999", "is larger than"),
            ("123456789012.123457", "significant digits"),
        ] {
            let refused = Quantity::parse(sent, 6).unwrap_err();
            assert!(refused.contains(says), "{sent}: {refused}");
        }
    }

    #[test]
    fn a_fraction_is_a_json_number_every_reader_keeps() {
        let q = Quantity::parse("2.5", 1).unwrap();
        assert_eq!(serde_json::to_string(&q).unwrap(), "2.5");
        let read: Quantity = serde_json::from_str("2.5").unwrap();
        assert_eq!(read, q);
    }

    proptest::proptest! {
        /// Any quantity accepted under any declared places reads back, through JSON, as the
        /// same value; anything else is a refusal, never a panic.
        #[test]
        fn accepted_quantities_round_trip_through_json(
            whole in "0|[1-9][0-9]{0,16}",
            fraction in "[0-9]{0,8}",
            places in 0..=MAX_DECIMAL_PLACES,
        ) {
            let literal = match fraction.as_str() {
                "" => whole.clone(),
                f => format!("{whole}.{f}"),
            };
            if let Ok(q) = Quantity::parse(&literal, places) {
                let json = serde_json::to_string(&q).unwrap();
                let read: Quantity = serde_json::from_str(&json).unwrap();
                proptest::prop_assert_eq!(&read, &q);
                let as_double: f64 = serde_json::from_str(&json).unwrap();
                proptest::prop_assert_eq!(as_double.to_string(), q.as_str());
            }
        }
    }
}
