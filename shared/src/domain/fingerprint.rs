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

#[cfg(test)]
mod pinned {
    //! Fingerprints are stored with every delivery and compared with every retry for 30 days
    //! and more: the canonical bytes of a payload must never change with the code that computes
    //! them. These were computed by the canonicalizer of 2026-12-01 (before the single-parse
    //! rewrite) and must stay as they are.
    use super::*;

    const BODIES: [&str; 4] = [
        r#"{"export_id":"EXP-8821","page":2,"page_count":3,"offers":[{"sku":"AX-440-R2","quantity":6,"unit":"each","price":"820.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}]}"#,
        "{ \"page\" : 1,\n \"offers\": [ {\"sku\":\"B\\u00e9\\\"q\\\\\",\"quantity\":1e3,\"z\":[3,1,{\"y\":null,\"x\":true}],\"price\":\"1.50\"},\n {\"sku\":\"A\\ud83d\\ude00\\t\",\"quantity\":-0.0,\"price\":\"0.10\",\"\\u0007\":false} ],\n \"export_id\": \"EXP-\u{ff61}\", \"\":12345678901234567890.1 }",
        r#"{"specversion":"1.0","id":"evt-1","source":"urn:acme:events","type":"offer.snapshot","time":"2026-11-29T08:00:00Z","data":{"offers":[{"sku":"C","quantity":2,"unit":"each","price":"1.00","currency":"EUR"},{"sku":"A","quantity":1,"unit":"each","price":"2.00","currency":"EUR"}]}}"#,
        r#"{"offers":[{"sku":"C"},{"sku":"A"},{"sku":"B"},{"sku":"A"}],"export_id":"E","page":1}"#,
    ];

    fn rows_path(body: &str) -> &'static [&'static str] {
        if body.contains("specversion") {
            &["data", "offers"]
        } else {
            &["offers"]
        }
    }

    /// (json-v1, json-unordered-rows-v1, sha256 of the rows' canonical bytes joined by '\n').
    const PINNED: [(&str, &str, &str); 4] = [
        (
            "99fe3e189325be839e4ccdd24fed7f936bd770c262c4c7596668cb554f13127e",
            "99fe3e189325be839e4ccdd24fed7f936bd770c262c4c7596668cb554f13127e",
            "5a058989952914db8280dec885a584a7e50b70abbba58d7f37fa6b0ce6df24ee",
        ),
        (
            "3c6b858a800e8e46e694f5f7d997c34db07a3292a7bf04bcf7606d6de187b08d",
            "844b63ff7b26cbbfc9b29e796ed8db3a4d7cb22666c04e7f453298abff48d32e",
            "8ee0671328b3605ed76d947738709ba0f14bf644bcac33c2f562a926b2351880",
        ),
        (
            "f359de9800da4bbb910f1da09410236d40cc4da413e1ae00605c33076de4cd24",
            "f359de9800da4bbb910f1da09410236d40cc4da413e1ae00605c33076de4cd24",
            "b30533561d93e5fc44e7b521b1b002e3bf0d1305b7eb73dd34543d9718036ee7",
        ),
        (
            "3f8a1da7f038939eea41430d26b88689e6941e62df09dcd40e0eee9f81932407",
            "98efea6bd832084619cc0611e80ef6518dbcccf378ad107f5bfcb52ae4ec7c9b",
            "21c1771bd4a97161ad0779e999e90a7490ce2de4e27474e4d2676a839402bffa",
        ),
    ];

    #[test]
    fn fingerprints_and_row_bytes_of_stored_payloads_never_change() {
        for (body, (json_v1, unordered, rows)) in BODIES.iter().zip(PINNED) {
            let of = |rule| {
                Fingerprint::compute(rule, body.as_bytes(), rows_path(body))
                    .unwrap()
                    .sha256_hex
            };
            assert_eq!(of(CanonicalizationRule::JsonV1), json_v1, "{body}");
            assert_eq!(
                of(CanonicalizationRule::JsonUnorderedRowsV1),
                unordered,
                "{body}"
            );
            let canonical =
                crate::domain::canonical_json::canonical_rows(body.as_bytes(), rows_path(body))
                    .unwrap();
            assert_eq!(
                crate::domain::hashing::sha256_hex(&canonical.join(&b'\n')),
                rows,
                "{body}"
            );
        }
    }
}
