//! Prices kept exactly as the supplier wrote them.
//!
//! A price never goes through `f64`: binary floating point cannot represent
//! most decimal fractions, and re-formatting would change `820.00` into
//! `820`, which would change payload fingerprints. We only validate the text
//! and carry it along unchanged.

use std::fmt;

/// Longest accepted price text, in bytes (all accepted text is ASCII).
const MAX_LEN: usize = 30;
/// Most digits accepted after the decimal point.
const MAX_FRACTION_DIGITS: usize = 18;

/// A non-negative decimal amount, e.g. `820.00`, kept verbatim.
///
/// Grammar: `int ("." frac)?` where `int` is `0` or a non-zero digit followed
/// by digits, `frac` is 1..=18 digits, and the whole text is at most 30
/// bytes. No sign, exponent, whitespace or other notation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Price(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceError {
    /// The text is empty.
    Empty,
    /// The text is not a plain non-negative decimal (see [`Price`]).
    NotDecimal,
    /// The text is a decimal but longer than 30 characters.
    TooLong,
}

impl fmt::Display for PriceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "price is empty"),
            Self::NotDecimal => write!(
                f,
                "price is not a plain non-negative decimal (digits, optional '.' and 1-{MAX_FRACTION_DIGITS} digits)"
            ),
            Self::TooLong => write!(f, "price is longer than {MAX_LEN} characters"),
        }
    }
}

impl std::error::Error for PriceError {}

impl Price {
    pub fn parse(s: &str) -> Result<Price, PriceError> {
        check_decimal(s).map(|()| Price(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `s` is of the price grammar (see [`Price`]); quantities of the commercial terms use
/// it too (`terms::Decimal`).
pub(crate) fn check_decimal(s: &str) -> Result<(), PriceError> {
    if s.is_empty() {
        return Err(PriceError::Empty);
    }
    // Grammar first so that garbage is reported as garbage; only a
    // well-formed but oversized number is `TooLong`.
    let (int, frac) = match s.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (s, None),
    };
    let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    // Leading zeros would give one amount several spellings ("007").
    let int_ok = all_digits(int) && (int == "0" || !int.starts_with('0'));
    let frac_ok = match frac {
        None => true,
        // A second '.' lands in `frac` and fails the digit check.
        Some(frac) => all_digits(frac) && frac.len() <= MAX_FRACTION_DIGITS,
    };
    if !(int_ok && frac_ok) {
        return Err(PriceError::NotDecimal);
    }
    if s.len() > MAX_LEN {
        return Err(PriceError::TooLong);
    }
    Ok(())
}

/// Deserializing re-validates, so a stored or received value can never hold
/// a price that `parse` would have rejected.
impl<'de> serde::Deserialize<'de> for Price {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Price::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_decimals_verbatim() {
        for ok in [
            "0",
            "0.50",
            "820",
            "820.00",
            "820.0",
            "1",
            "10",
            "0.0",
            "0.000000000000000001",
        ] {
            let p = Price::parse(ok).unwrap_or_else(|e| panic!("{ok:?} rejected: {e}"));
            assert_eq!(p.as_str(), ok);
            assert_eq!(p.to_string(), ok);
        }
        // Different spellings stay different.
        assert_ne!(
            Price::parse("820.00").unwrap(),
            Price::parse("820").unwrap()
        );
    }

    #[test]
    fn rejects_non_decimals() {
        for bad in [
            "00.5", "00", "01", "-1", "+1", "1e3", "1E3", ".5", "5.", "NaN", "inf", " 1", "1 ",
            "1,5", "1.2.3", "0x1", "1_000", "١", "１", "-0", "..", ".",
        ] {
            assert_eq!(Price::parse(bad), Err(PriceError::NotDecimal), "{bad:?}");
        }
        assert_eq!(Price::parse(""), Err(PriceError::Empty));
    }

    #[test]
    fn fraction_digit_limit() {
        let eighteen = format!("1.{}", "5".repeat(18));
        assert!(Price::parse(&eighteen).is_ok());
        let nineteen = format!("1.{}", "5".repeat(19));
        assert_eq!(Price::parse(&nineteen), Err(PriceError::NotDecimal));
    }

    #[test]
    fn length_limit() {
        let thirty = "9".repeat(30);
        assert_eq!(Price::parse(&thirty).map(|p| p.as_str().len()), Ok(30));
        assert_eq!(Price::parse(&"9".repeat(31)), Err(PriceError::TooLong));
        let long_fraction = format!("{}.{}", "1".repeat(12), "0".repeat(18)); // 31 chars
        assert_eq!(Price::parse(&long_fraction), Err(PriceError::TooLong));
        // Garbage is reported as garbage even when long.
        assert_eq!(Price::parse(&"x".repeat(40)), Err(PriceError::NotDecimal));
    }

    #[test]
    fn serializes_as_plain_string() {
        let p = Price::parse("820.00").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"820.00\"");
    }

    #[test]
    fn deserializes_with_validation() {
        let p: Price = serde_json::from_str("\"820.00\"").unwrap();
        assert_eq!(p.as_str(), "820.00");
        assert!(serde_json::from_str::<Price>("\"00.5\"").is_err());
        assert!(
            serde_json::from_str::<Price>("820.00").is_err(),
            "numbers are not prices"
        );
        let err = serde_json::from_str::<Price>("\"\"").unwrap_err();
        assert!(err.to_string().contains("price is empty"), "{err}");
    }

    #[test]
    fn error_display() {
        assert_eq!(PriceError::Empty.to_string(), "price is empty");
        assert_eq!(
            PriceError::TooLong.to_string(),
            "price is longer than 30 characters"
        );
        let _: &dyn std::error::Error = &PriceError::NotDecimal;
    }
}
