//! Canonical item identity, kept apart from any supplier's offer for it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Manufacturer part number (and the manufacturer, when the source names one) plus revision,
/// packaging unit and condition. Matching an item makes offers comparable; it never makes them
/// interchangeable and never proves stock.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CanonicalItem {
    pub part_number: String,
    /// The manufacturer as the source names it (the part number's rules apply); absent on items
    /// whose source names none, which keep the key they always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    pub revision: Option<String>,
    pub packaging_unit: String,
    pub condition: String,
}

pub const DEFAULT_PACKAGING_UNIT: &str = "each";

/// The parts of an item as a row names them, before the item's rules apply.
#[derive(Debug, Clone, Copy, Default)]
pub struct ItemParts<'a> {
    pub part_number: &'a str,
    pub manufacturer: Option<&'a str>,
    pub revision: Option<&'a str>,
    pub packaging_unit: Option<&'a str>,
    pub condition: Option<&'a str>,
}
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

/// Longest part number or revision, in characters (after NFC).
pub const MAX_PART_CHARS: usize = 128;
/// Most characters of a refused value a message quotes.
const SHOWN_CHARS: usize = 200;

fn refused(field: &'static str, reason: &'static str, text: &str) -> ItemError {
    ItemError {
        field,
        reason,
        value: Some(text.chars().take(SHOWN_CHARS).collect()),
    }
}

/// A part number, manufacturer or revision as the item holds it: trimmed, any printable
/// Unicode (inner spaces, `/`, `~`, `%` included), normalized to NFC, ASCII letters
/// upper-cased (the case rule: `lm358` and `LM358` are one part; other letters as written, as
/// upper-casing `µ` would make it a Greek capital), at most 128 characters. Control, invisible and bidirectional-format characters, other spaces than
/// U+0020 and U+FFFD (a decoding failure's mark) are refused: two part numbers that look the
/// same must be the same.
fn part_component(field: &'static str, raw: &str) -> Result<String, ItemError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(ItemError {
            field,
            reason: "empty",
            value: None,
        });
    }
    // ASCII is printable from U+0020 to U+007E: most part numbers are checked byte by byte.
    let unprintable = match text.is_ascii() {
        true => text
            .bytes()
            .find(|b| !(b' '..=b'~').contains(b))
            .map(char::from),
        false => text.chars().find(|c| !printable(*c)),
    };
    if let Some(c) = unprintable {
        let reason = match c {
            '\u{FFFD}' => "holds U+FFFD, the mark of text that could not be decoded",
            _ => "holds a control, invisible or non-U+0020 space character",
        };
        return Err(refused(field, reason, text));
    }
    // NFC first, so that every spelling of a letter is one before ASCII letters are
    // upper-cased (NFD `e` + U+0301 would otherwise become `É` and NFC `é` stay `é`); NFC
    // again, as an upper-case letter may compose where its lower-case one did not.
    let normalized = match text.is_ascii() {
        // ASCII text is its own NFC: most part numbers take this path, one allocation.
        true => text.to_ascii_uppercase(),
        false => {
            let nfc = icu_normalizer::ComposingNormalizerBorrowed::new_nfc();
            nfc.normalize(&nfc.normalize(text).to_ascii_uppercase())
                .into_owned()
        }
    };
    if normalized.chars().count() > MAX_PART_CHARS {
        return Err(refused(field, "longer than 128 characters", text));
    }
    Ok(normalized)
}

/// Whether `c` may stand in a part number: a visible character or U+0020.
fn printable(c: char) -> bool {
    let invisible = matches!(c,
        '\u{AD}' | '\u{34F}' | '\u{61C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFD}' | '\u{E0000}'..='\u{E0FFF}');
    c == ' ' || !(c.is_control() || c.is_whitespace() || invisible)
}

/// A packaging unit or condition: our vocabulary, not the supplier's part number; letters,
/// digits and `- _ . + #`, lower-cased, at most 96 characters.
fn word_component(field: &'static str, raw: &str) -> Result<String, ItemError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(ItemError {
            field,
            reason: "empty",
            value: None,
        });
    }
    if text.len() > 96 {
        return Err(refused(field, "longer than 96 characters", text));
    }
    // '~' separates components in the item key.
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+' | b'#'))
    {
        return Err(refused(
            field,
            "only letters, digits and - _ . + # are allowed",
            text,
        ));
    }
    Ok(text.to_ascii_lowercase())
}

/// A part number or revision as the key writes it: `%` as `%25` and `~` (the key's separator)
/// as `%7E`. A part number without either is written as it is, so every key stored before
/// part numbers could hold them reads the same.
fn escaped(component: &str) -> std::borrow::Cow<'_, str> {
    match component.contains(['%', '~']) {
        false => std::borrow::Cow::Borrowed(component),
        true => std::borrow::Cow::Owned(component.replace('%', "%25").replace('~', "%7E")),
    }
}

/// The inverse of [`escaped`]; any other `%` is refused (one item, one key).
fn unescaped(field: &'static str, written: &str) -> Result<String, ItemError> {
    let mut text = String::with_capacity(written.len());
    let mut rest = written;
    while let Some(at) = rest.find('%') {
        text.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3).unwrap_or("");
        match escape {
            "%25" => text.push('%'),
            "%7E" | "%7e" => text.push('~'),
            _ => {
                return Err(refused(
                    field,
                    "in a key, % is written %25 and ~ is written %7E",
                    written,
                ))
            }
        }
        rest = &rest[at + 3..];
    }
    text.push_str(rest);
    Ok(text)
}

impl CanonicalItem {
    /// An item without a manufacturer.
    pub fn new(
        part_number: &str,
        revision: Option<&str>,
        packaging_unit: Option<&str>,
        condition: Option<&str>,
    ) -> Result<Self, ItemError> {
        let parts = ItemParts {
            part_number,
            manufacturer: None,
            revision,
            packaging_unit,
            condition,
        };
        Self::of(parts)
    }

    /// The item a row's parts name.
    pub fn of(parts: ItemParts<'_>) -> Result<Self, ItemError> {
        let part = part_component;
        Ok(Self {
            part_number: part("part number", parts.part_number)?,
            manufacturer: parts
                .manufacturer
                .map(|m| part("manufacturer", m))
                .transpose()?,
            revision: parts.revision.map(|r| part("revision", r)).transpose()?,
            packaging_unit: word_component(
                "packaging unit",
                parts.packaging_unit.unwrap_or(DEFAULT_PACKAGING_UNIT),
            )?,
            condition: word_component("condition", parts.condition.unwrap_or(DEFAULT_CONDITION))?,
        })
    }

    /// The item key used in storage and URLs: `PART[~mMANUFACTURER][~rREV]~unit~condition`,
    /// e.g. `AX-440-R2~each~new`, `LM358DR/NOPB~mTI~reel~new`; `%` and `~` in the part
    /// number, manufacturer and revision are written `%25` and `%7E` (`A%7EB~each~new` for
    /// part `A~B`). An item without a manufacturer keys as it always did.
    pub fn key(&self) -> String {
        let mut key = escaped(&self.part_number).into_owned();
        if let Some(manufacturer) = &self.manufacturer {
            key.push_str("~m");
            key.push_str(&escaped(manufacturer));
        }
        if let Some(rev) = &self.revision {
            key.push_str("~r");
            key.push_str(&escaped(rev));
        }
        format!("{key}~{}~{}", self.packaging_unit, self.condition)
    }

    /// The part number as the key writes it (`%` and `~` escaped).
    pub fn keyed_part_number(&self) -> String {
        escaped(&self.part_number).into_owned()
    }

    /// Parses a key; a bare part number means the default unit (`each`) and condition (`new`).
    /// The item rules apply, so `ax-440` and an NFD spelling of a key find their item.
    pub fn parse_key(key: &str) -> Result<Self, ItemError> {
        let components: Vec<&str> = key.split('~').collect();
        let (part_number, middle, ending) = match components.as_slice() {
            [p] => (*p, &[][..], None),
            [p, middle @ .., unit, condition] if middle.len() <= 2 => {
                (*p, middle, Some((*unit, *condition)))
            }
            _ => return Err(key_shape()),
        };
        let part_number = unescaped("part number", part_number)?;
        let (manufacturer, revision) = key_middle(middle)?;
        let parts = ItemParts {
            part_number: &part_number,
            manufacturer: manufacturer.as_deref(),
            revision: revision.as_deref(),
            packaging_unit: ending.map(|(unit, _)| unit),
            condition: ending.map(|(_, condition)| condition),
        };
        Self::of(parts)
    }
}

fn key_shape() -> ItemError {
    ItemError {
        field: "key",
        reason: "expected PART[~mMANUFACTURER][~rREV]~unit~condition",
        value: None,
    }
}

/// A key's manufacturer (`mTI`) and revision (`rB`) components, in that order, each optional.
fn key_middle(middle: &[&str]) -> Result<(Option<String>, Option<String>), ItemError> {
    let (mut manufacturer, mut revision) = (None, None);
    for component in middle {
        match component.split_at_checked(1) {
            Some(("m", m)) if manufacturer.is_none() && revision.is_none() => {
                manufacturer = Some(unescaped("manufacturer", m)?)
            }
            Some(("r", r)) if revision.is_none() => revision = Some(unescaped("revision", r)?),
            _ => return Err(key_shape()),
        }
    }
    Ok((manufacturer, revision))
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
        let sku = "<script>alert(\"x\")</script>\n".to_owned() + &"A".repeat(400);
        let message = CanonicalItem::new(&sku, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(r#"invalid item part number "<script>alert(\"x\")</script>\n"#),
            "{message}"
        );
        assert!(message.ends_with(": holds a control, invisible or non-U+0020 space character"));
        assert!(
            !message.contains(&"A".repeat(200)),
            "clipped to 200 characters: {message}"
        );
        assert_eq!(
            CanonicalItem::new("", None, None, None)
                .unwrap_err()
                .to_string(),
            "invalid item part number: empty"
        );
    }

    #[test]
    fn real_part_numbers_are_items_and_their_keys_read_back() {
        for (sent, part, key) in [
            ("LM358DR/NOPB", "LM358DR/NOPB", "LM358DR/NOPB~each~new"),
            (
                " rc0603fr-07 10kl ",
                "RC0603FR-07 10KL",
                "RC0603FR-07 10KL~each~new",
            ),
            ("10µF-x7r", "10µF-X7R", "10µF-X7R~each~new"),
            ("A~B 5%", "A~B 5%", "A%7EB 5%25~each~new"),
            ("Ω-Ä", "Ω-Ä", "Ω-Ä~each~new"),
        ] {
            let item = CanonicalItem::new(sent, None, None, None).unwrap();
            assert_eq!(item.part_number, part, "{sent:?}");
            assert_eq!(item.key(), key, "{sent:?}");
            assert_eq!(CanonicalItem::parse_key(key).unwrap(), item, "{key:?}");
        }
        let revised = CanonicalItem::new("X/1", Some("b~2"), Some("reel"), None).unwrap();
        assert_eq!(revised.key(), "X/1~rB%7E2~reel~new");
        assert_eq!(CanonicalItem::parse_key(&revised.key()).unwrap(), revised);
    }

    #[test]
    fn a_manufacturer_is_a_component_of_the_key_that_reads_back() {
        let parts = ItemParts {
            part_number: "lm358dr/nopb",
            manufacturer: Some(" Texas~Instruments "),
            revision: Some("b"),
            packaging_unit: Some("reel"),
            condition: None,
        };
        let item = CanonicalItem::of(parts).unwrap();
        assert_eq!(item.manufacturer.as_deref(), Some("TEXAS~INSTRUMENTS"));
        assert_eq!(item.key(), "LM358DR/NOPB~mTEXAS%7EINSTRUMENTS~rB~reel~new");
        assert_eq!(CanonicalItem::parse_key(&item.key()).unwrap(), item);
        let without_revision = CanonicalItem::of(ItemParts {
            revision: None,
            ..parts
        })
        .unwrap();
        assert_eq!(
            without_revision.key(),
            "LM358DR/NOPB~mTEXAS%7EINSTRUMENTS~reel~new"
        );
        let read = CanonicalItem::parse_key(&without_revision.key()).unwrap();
        assert_eq!(read, without_revision);
        for key in [
            "X~rB~mTI~each~new",
            "X~mA~mB~each~new",
            "X~q~each~new",
            "X~m~r~a~b~c",
        ] {
            let refused = CanonicalItem::parse_key(key).unwrap_err().to_string();
            assert!(refused.contains("expected PART"), "{key}: {refused}");
        }
    }

    #[test]
    fn a_key_is_read_under_the_item_rules() {
        let upper = CanonicalItem::parse_key("LM358DR/NOPB~mTI~reel~new").unwrap();
        let lower = CanonicalItem::parse_key("lm358dr/nopb~mti~reel~new").unwrap();
        assert_eq!(lower, upper);
        // NFC applies to a key read: an NFD spelling finds the NFC item.
        let decomposed = CanonicalItem::parse_key("A\u{308}BC~each~new").unwrap();
        assert_eq!(decomposed.key(), "\u{C4}BC~each~new");
    }

    #[test]
    fn nfc_and_nfd_spellings_are_one_item() {
        let composed = CanonicalItem::new("\u{C4}BC-\u{E9}", None, None, None).unwrap();
        let decomposed = CanonicalItem::new("A\u{308}bc-e\u{301}", None, None, None).unwrap();
        assert_eq!(composed, decomposed);
        assert_eq!(composed.key(), "\u{C4}BC-\u{E9}~each~new");
    }

    #[test]
    fn a_part_number_of_129_characters_is_refused_with_its_literal() {
        let longest = "7".repeat(127) + "ü";
        assert!(CanonicalItem::new(&longest, None, None, None).is_ok());
        let too_long = "7".repeat(128) + "ü";
        let message = CanonicalItem::new(&too_long, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(message.contains(&format!("{too_long:?}")), "{message}");
        assert!(message.ends_with("longer than 128 characters"), "{message}");
    }

    #[test]
    fn invisible_and_control_characters_are_refused() {
        for sent in [
            "LM358\u{200B}DR",
            "LM358\tDR",
            "LM358\u{A0}DR",
            "LM\u{202E}358",
            "LM\u{FFFD}",
        ] {
            assert!(
                CanonicalItem::new(sent, None, None, None).is_err(),
                "{sent:?}"
            );
        }
        for key in ["LM%2F358~each~new", "50%~each~new", "A%7~each~new"] {
            let refused = CanonicalItem::parse_key(key).unwrap_err().to_string();
            assert!(refused.contains("%25"), "{key}: {refused}");
        }
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
    fn units_and_conditions_keep_their_narrow_alphabet() {
        assert!(CanonicalItem::new("AX-440", None, Some("re~el"), None).is_err());
        assert!(CanonicalItem::new("AX-440", None, None, Some("new/used")).is_err());
        assert!(CanonicalItem::new("  ", None, None, None).is_err());
    }

    #[test]
    fn the_ascii_check_agrees_with_the_printable_rule() {
        for byte in 0u8..=0x7F {
            let fast = (b' '..=b'~').contains(&byte);
            assert_eq!(fast, printable(char::from(byte)), "{byte:#04x}");
            let part = format!("A{}B", char::from(byte));
            assert_eq!(
                part_component("part number", &part).is_ok(),
                fast,
                "{byte:#04x}"
            );
        }
    }

    proptest::proptest! {
        /// Whatever a supplier sends as a part number is an item or a refusal, never a panic;
        /// an item's key reads back as the same item, and reading it again changes nothing.
        #[test]
        fn any_part_number_is_an_item_whose_key_reads_back_or_a_refusal(sent in "\\PC{0,140}|[ -~]{0,20}") {
            if let Ok(item) = CanonicalItem::new(&sent, None, None, None) {
                proptest::prop_assert_eq!(CanonicalItem::parse_key(&item.key()).unwrap(), item.clone());
                let again = CanonicalItem::new(&item.part_number, None, None, None).unwrap();
                proptest::prop_assert_eq!(again, item);
            }
            let parts = ItemParts { part_number: "P", manufacturer: Some(&sent), ..ItemParts::default() };
            if let Ok(item) = CanonicalItem::of(parts) {
                proptest::prop_assert_eq!(CanonicalItem::parse_key(&item.key()).unwrap(), item);
            }
        }
    }
}
