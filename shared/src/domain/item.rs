//! Canonical item identity, kept apart from any supplier's offer for it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Manufacturer part number plus revision, packaging unit and condition. Matching an item makes
/// offers comparable; it never makes them interchangeable and never proves stock.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CanonicalItem {
    pub part_number: String,
    pub revision: Option<String>,
    pub packaging_unit: String,
    pub condition: String,
}

pub const DEFAULT_PACKAGING_UNIT: &str = "each";
pub const DEFAULT_CONDITION: &str = "new";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid item {field}{}: {reason}", .value.as_deref().map(|v| format!(" {v:?}")).unwrap_or_default())]
pub struct ItemError {
    pub field: &'static str,
    pub reason: &'static str,
    /// The refused text (its first 64 characters), when showing it helps the operator find the
    /// row: it is the supplier's, untrusted, and quoted (escaped) in the message.
    pub value: Option<String>,
}

fn component(field: &'static str, raw: &str, upper: bool) -> Result<String, ItemError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(ItemError {
            field,
            reason: "empty",
            value: None,
        });
    }
    if text.len() > 96 {
        return Err(ItemError {
            field,
            reason: "longer than 96 characters",
            value: None,
        });
    }
    // '~' separates components in the item key; '/' would break the URL path.
    if !text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '#'))
    {
        return Err(ItemError {
            field,
            reason: "only letters, digits and - _ . + # are allowed",
            value: Some(text.chars().take(64).collect()),
        });
    }
    Ok(if upper {
        text.to_ascii_uppercase()
    } else {
        text.to_ascii_lowercase()
    })
}

impl CanonicalItem {
    pub fn new(
        part_number: &str,
        revision: Option<&str>,
        packaging_unit: Option<&str>,
        condition: Option<&str>,
    ) -> Result<Self, ItemError> {
        Ok(Self {
            part_number: component("part number", part_number, true)?,
            revision: revision
                .map(|r| component("revision", r, true))
                .transpose()?,
            packaging_unit: component(
                "packaging unit",
                packaging_unit.unwrap_or(DEFAULT_PACKAGING_UNIT),
                false,
            )?,
            condition: component("condition", condition.unwrap_or(DEFAULT_CONDITION), false)?,
        })
    }

    /// The item key used in storage and URLs: `PART[~rREV]~unit~condition`,
    /// e.g. `AX-440-R2~each~new`.
    pub fn key(&self) -> String {
        match &self.revision {
            Some(rev) => format!(
                "{}~r{}~{}~{}",
                self.part_number, rev, self.packaging_unit, self.condition
            ),
            None => format!(
                "{}~{}~{}",
                self.part_number, self.packaging_unit, self.condition
            ),
        }
    }

    /// Parses a key; a bare part number means the default unit (`each`) and condition (`new`).
    pub fn parse_key(key: &str) -> Result<Self, ItemError> {
        let parts: Vec<&str> = key.split('~').collect();
        match parts.as_slice() {
            [part] => Self::new(part, None, None, None),
            [part, unit, condition] => Self::new(part, None, Some(unit), Some(condition)),
            [part, rev, unit, condition] => {
                let rev = rev.strip_prefix('r').ok_or(ItemError {
                    field: "revision",
                    reason: "must start with r",
                    value: None,
                })?;
                Self::new(part, Some(rev), Some(unit), Some(condition))
            }
            _ => Err(ItemError {
                field: "key",
                reason: "expected PART[~rREV]~unit~condition",
                value: None,
            }),
        }
    }
}

impl fmt::Display for CanonicalItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_part_number_is_quoted_escaped_and_clipped_in_the_message() {
        let sku = "<script>alert(\"x\")</script>\n".to_owned() + &"A".repeat(40);
        let message = CanonicalItem::new(&sku, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(r#"invalid item part number "<script>alert(\"x\")</script>\n"#),
            "{message}"
        );
        assert!(message.ends_with(": only letters, digits and - _ . + # are allowed"));
        assert!(
            !message.contains(&"A".repeat(40)),
            "clipped to 64 characters: {message}"
        );
        assert_eq!(
            CanonicalItem::new("", None, None, None)
                .unwrap_err()
                .to_string(),
            "invalid item part number: empty"
        );
    }

    #[test]
    fn key_round_trips_and_defaults_apply() {
        let item = CanonicalItem::new("ax-440-r2", None, None, None).unwrap();
        assert_eq!(item.key(), "AX-440-R2~each~new");
        assert_eq!(CanonicalItem::parse_key("AX-440-R2").unwrap(), item);
        assert_eq!(CanonicalItem::parse_key(&item.key()).unwrap(), item);
        let revised =
            CanonicalItem::new("AX-440", Some("B"), Some("reel"), Some("refurbished")).unwrap();
        assert_eq!(CanonicalItem::parse_key(&revised.key()).unwrap(), revised);
    }

    #[test]
    fn rejects_separators_in_components() {
        assert!(CanonicalItem::new("AX~440", None, None, None).is_err());
        assert!(CanonicalItem::new("AX/440", None, None, None).is_err());
        assert!(CanonicalItem::new("  ", None, None, None).is_err());
    }
}
