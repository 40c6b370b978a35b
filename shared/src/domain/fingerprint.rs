//! Payload fingerprints under declared, versioned canonicalization rules.

use crate::domain::canonical_json::{self, CanonicalJsonError};
use crate::domain::hashing::sha256_hex;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CanonicalizationRule {
    /// The literal bytes.
    #[serde(rename = "bytes-v1")]
    BytesV1,
    /// Parsed JSON, object keys sorted, values (numbers included) untouched, array order kept.
    #[serde(rename = "json-v1")]
    JsonV1,
    /// `json-v1`, and the rows array sorted by canonical row bytes: a reordered page is the same page.
    #[serde(rename = "json-unordered-rows-v1")]
    JsonUnorderedRowsV1,
}

impl CanonicalizationRule {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::BytesV1 => "bytes-v1",
            Self::JsonV1 => "json-v1",
            Self::JsonUnorderedRowsV1 => "json-unordered-rows-v1",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "bytes-v1" => Some(Self::BytesV1),
            "json-v1" => Some(Self::JsonV1),
            "json-unordered-rows-v1" => Some(Self::JsonUnorderedRowsV1),
            _ => None,
        }
    }

    /// Whether rows keep their literal order when observation indices are assigned.
    pub fn orders_rows_canonically(&self) -> bool {
        matches!(self, Self::JsonUnorderedRowsV1)
    }
}

/// `{rule}:{sha256 hex}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub rule: CanonicalizationRule,
    pub sha256_hex: String,
}

impl Fingerprint {
    /// Computes the fingerprint of `body`; `rows_path` names the rows array for the unordered rule.
    pub fn compute(
        rule: CanonicalizationRule,
        body: &[u8],
        rows_path: &[&str],
    ) -> Result<Self, CanonicalJsonError> {
        let digest = match rule {
            CanonicalizationRule::BytesV1 => sha256_hex(body),
            CanonicalizationRule::JsonV1 => sha256_hex(&canonical_json::canonicalize(body)?),
            CanonicalizationRule::JsonUnorderedRowsV1 => sha256_hex(
                &canonical_json::canonicalize_unordered_rows(body, rows_path)?,
            ),
        };
        Ok(Self {
            rule,
            sha256_hex: digest,
        })
    }

    pub fn parse(text: &str) -> Option<Self> {
        let (rule, hex) = text.rsplit_once(':')?;
        let rule = CanonicalizationRule::parse(rule)?;
        let valid = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| Self {
            rule,
            sha256_hex: hex.to_owned(),
        })
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.rule.as_str(), self.sha256_hex)
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Fingerprint::parse(&text).ok_or_else(|| serde::de::Error::custom("invalid fingerprint"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str =
        r#"{"export_id":"EXP-8821","offers":[{"sku":"A","quantity":1},{"sku":"B","quantity":2}]}"#;
    const REORDERED: &str = r#"{ "offers":[{"quantity":2,"sku":"B"},{"sku":"A","quantity":1}], "export_id":"EXP-8821"}"#;

    #[test]
    fn reordered_rows_match_only_under_the_unordered_rule() {
        let rows = ["offers"];
        let unordered = CanonicalizationRule::JsonUnorderedRowsV1;
        let ordered = CanonicalizationRule::JsonV1;
        assert_eq!(
            Fingerprint::compute(unordered, PAGE.as_bytes(), &rows).unwrap(),
            Fingerprint::compute(unordered, REORDERED.as_bytes(), &rows).unwrap()
        );
        assert_ne!(
            Fingerprint::compute(ordered, PAGE.as_bytes(), &rows).unwrap(),
            Fingerprint::compute(ordered, REORDERED.as_bytes(), &rows).unwrap()
        );
    }

    #[test]
    fn text_form_round_trips() {
        let fp = Fingerprint::compute(CanonicalizationRule::BytesV1, b"x", &[]).unwrap();
        let text = fp.to_string();
        assert!(text.starts_with("bytes-v1:"));
        assert_eq!(Fingerprint::parse(&text), Some(fp));
        assert_eq!(Fingerprint::parse("md5:abc"), None);
    }
}
