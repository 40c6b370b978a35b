//! How a definition's text values become the values the normalizer reads: one field's steps
//! (trim, the pattern's capture group, the value map, the default), then its kind's
//! conversion (a whole number, a decimal with a dot, an RFC 3339 time in UTC).

use crate::domain::definition::{Field, Values};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A field's steps, compiled once per definition.
#[derive(Debug, Clone)]
pub struct FieldSteps {
    pub trim: bool,
    pub pattern: Option<regex_lite::Regex>,
    pub map: BTreeMap<String, String>,
    pub default: Option<String>,
    pub constant: Option<String>,
}

impl FieldSteps {
    /// The field's steps; a pattern that does not compile was refused when the definition was
    /// read, and is refused here again rather than assumed.
    pub fn compile(field: &Field) -> Result<Self, String> {
        let pattern = field
            .pattern
            .as_deref()
            .map(regex_lite::Regex::new)
            .transpose()
            .map_err(|e| format!("pattern: {e}"))?;
        Ok(FieldSteps {
            trim: field.trim,
            pattern,
            map: field.map.clone(),
            default: field.default.clone(),
            constant: field.constant.clone(),
        })
    }

    /// Whether the steps leave a value as it is (no pattern, no value map): a JSON number or
    /// boolean is then kept as written.
    pub fn is_plain(&self) -> bool {
        self.pattern.is_none() && self.map.is_empty()
    }

    /// The value of a field whose source gave `raw` (`None`: absent). `Ok(None)`: still absent
    /// after the default (the normalizer then says whether the field was required). Borrowed
    /// from `raw` or the steps: the kind's conversion writes the one owned copy.
    pub fn apply<'a>(&'a self, raw: Option<&'a str>) -> Result<Option<Cow<'a, str>>, String> {
        let raw = match (&self.constant, raw) {
            (Some(constant), _) => Some(constant.as_str()),
            (None, raw) => raw,
        };
        let mut value = raw.map(|v| if self.trim { v.trim() } else { v });
        if let (Some(pattern), Some(text)) = (&self.pattern, value) {
            let captured = pattern
                .captures(text)
                .and_then(|c| c.get(1))
                .map(|m| m.as_str());
            match captured {
                Some(group) => value = Some(group),
                None => {
                    return Err(format!(
                        "{} does not match the pattern {:?}",
                        shown(text),
                        pattern.as_str()
                    ))
                }
            }
        }
        let value = value.map(|v| self.map.get(v).map_or(v, String::as_str));
        Ok(match value {
            Some(v) if !v.is_empty() => Some(Cow::Borrowed(v)),
            _ => self.default.as_deref().map(Cow::Borrowed),
        })
    }
}

impl FieldSteps {
    /// [`Self::apply`] to a value that may be owned: the result borrows what it can (the
    /// body, the steps) and owns the rest.
    pub(super) fn apply_kept<'a>(
        &'a self,
        raw: Option<Cow<'a, str>>,
    ) -> Result<Option<Cow<'a, str>>, String> {
        match raw {
            Some(Cow::Owned(text)) => {
                Ok(self.apply(Some(&text))?.map(|v| Cow::Owned(v.into_owned())))
            }
            Some(Cow::Borrowed(text)) => self.apply(Some(text)),
            None => self.apply(None),
        }
    }
}

/// A value quoted for a message, its first 64 characters only.
pub fn shown(text: &str) -> String {
    let head: String = text.chars().take(64).collect();
    if head.len() < text.len() {
        format!("{head:?}...")
    } else {
        format!("{head:?}")
    }
}

/// The last few time texts one body's rows gave, and their conversions (see
/// [`Conventions::time_through_memo`]); a refused text is not kept.
#[derive(Debug, Default)]
pub(super) struct TimeMemo {
    /// At most [`TimeMemo::KEPT`], the newest last.
    seen: Vec<(String, String)>,
}

impl TimeMemo {
    /// How many conversions one time field keeps.
    const KEPT: usize = 4;

    fn keep(&mut self, text: &str, converted: &str) {
        if self.seen.len() == Self::KEPT {
            self.seen.remove(0);
        }
        self.seen.push((text.to_owned(), converted.to_owned()));
    }
}

/// A [`TimeMemo`] for each time field of a row (`observed_at`, `valid_from`, `valid_until`):
/// each field keeps its own last conversion, so two times that differ do not undo each
/// other's.
#[derive(Debug, Default)]
pub(super) struct TimeMemos([TimeMemo; 3]);

impl TimeMemos {
    /// The memo of time field `index` (0 `observed_at`, 1 `valid_from`, 2 `valid_until`).
    pub(super) fn of(&mut self, index: usize) -> &mut TimeMemo {
        let last = self.0.len() - 1;
        &mut self.0[index.min(last)]
    }
}

/// The document's number and time conventions, compiled once per definition.
#[derive(Debug, Clone)]
pub struct Conventions {
    decimal: char,
    thousands: Option<char>,
    time_format: Option<String>,
    time_zone: Option<jiff::tz::TimeZone>,
}

impl Conventions {
    pub fn compile(values: &Values) -> Result<Self, String> {
        let time_zone = values
            .time_zone
            .as_deref()
            .map(|name| {
                jiff::tz::TimeZone::get(name)
                    .map_err(|_| format!("time_zone {name:?} is not an IANA time zone"))
            })
            .transpose()?;
        Ok(Conventions {
            decimal: values.decimal_separator.chars().next().unwrap_or('.'),
            thousands: values.thousands_separator.chars().next(),
            time_format: values.time_format.clone(),
            time_zone,
        })
    }

    /// A whole number as digits (`1.234` with `.` as the thousands separator is `1234`); the
    /// normalizer checks its range.
    pub fn whole_number(&self, text: &str) -> Result<String, String> {
        self.whole_number_of(text).map(Cow::into_owned)
    }

    /// [`Self::whole_number`], borrowed from `text` when it needs no change.
    pub(super) fn whole_number_of<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, String> {
        let digits = self.without_thousands(text, true)?;
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            Ok(digits)
        } else {
            Err(format!("{} is not a whole number", shown(text)))
        }
    }

    /// A quantity written with the document's separators: digits with at most one dot
    /// afterwards (`1.234,5` -> `1234.5`), a JSON number; the normalizer checks its places.
    pub(super) fn quantity_of<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, String> {
        let decimal = self.decimal_of(text)?;
        let (whole, fraction) = decimal.split_once('.').unwrap_or((&decimal, "0"));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match digits(whole) && digits(fraction) {
            true => Ok(decimal),
            false => Err(format!("{} is not a number", shown(&decimal))),
        }
    }

    /// A decimal written with the document's separators, with a dot (`1.234,50` -> `1234.50`);
    /// the normalizer checks it as a price.
    pub fn decimal(&self, text: &str) -> Result<String, String> {
        self.decimal_of(text).map(Cow::into_owned)
    }

    /// [`Self::decimal`], borrowed from `text` when it needs no change (one copy otherwise).
    pub(super) fn decimal_of<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, String> {
        let grouped = self.without_thousands(text, false)?;
        if self.decimal != '.' && grouped.contains('.') {
            return Err(format!(
                "{} has a '.', which is not this feed's decimal separator {:?}",
                shown(text),
                self.decimal
            ));
        }
        if self.decimal == '.' || !grouped.contains(self.decimal) {
            return Ok(grouped);
        }
        let mut plain = grouped.into_owned();
        while let Some(at) = plain.find(self.decimal) {
            plain.replace_range(at..at + self.decimal.len_utf8(), ".");
        }
        Ok(Cow::Owned(plain))
    }

    /// `text` without its thousands separators (`None`: it has none), each of which must stand
    /// between groups of three digits before the decimal separator (`1.2.3` is refused, not
    /// read as `123`).
    fn without_thousands<'t>(&self, text: &'t str, whole: bool) -> Result<Cow<'t, str>, String> {
        let Some(sep) = self.thousands else {
            return Ok(Cow::Borrowed(text));
        };
        if !text.contains(sep) {
            return Ok(Cow::Borrowed(text));
        }
        let integer = match (whole, text.find(self.decimal)) {
            (false, Some(at)) => &text[..at],
            _ => text,
        };
        let unsigned = integer.strip_prefix('-').unwrap_or(integer);
        let digits = |g: &str| g.bytes().all(|b| b.is_ascii_digit());
        let mut groups = unsigned.split(sep);
        let mut well_grouped = groups
            .next()
            .is_some_and(|g| (1..=3).contains(&g.len()) && digits(g));
        let mut count = 1;
        for group in groups {
            count += 1;
            well_grouped &= group.len() == 3 && digits(group);
        }
        if !well_grouped {
            return Err(format!(
                "{} does not group its digits by the thousands separator {sep:?}",
                shown(text)
            ));
        }
        Ok(Cow::Owned(text.replacen(sep, "", count - 1)))
    }

    /// A time in the document's format (RFC 3339 when it declares none) as RFC 3339 in UTC.
    /// A time without an offset is read in the declared time zone; one that zone skips or
    /// repeats (a daylight-saving change) is refused rather than guessed.
    pub fn time(&self, text: &str) -> Result<String, String> {
        match &self.time_format {
            None => Ok(text.to_owned()),
            Some(format) => self.time_in(format, text),
        }
    }

    /// [`Self::time`] through `memo`, which keeps the body's last few conversions: a feed
    /// stamps its rows with few times (its exports'), each then converted once.
    pub(super) fn time_through_memo(
        &self,
        text: &str,
        memo: &mut TimeMemo,
    ) -> Result<String, String> {
        let Some(format) = &self.time_format else {
            return Ok(text.to_owned());
        };
        if let Some((_, converted)) = memo.seen.iter().find(|(seen, _)| seen == text) {
            return Ok(converted.clone());
        }
        let converted = self.time_in(format, text)?;
        memo.keep(text, &converted);
        Ok(converted)
    }

    /// `text`, a time in `format`, as RFC 3339 in UTC.
    fn time_in(&self, format: &str, text: &str) -> Result<String, String> {
        let fail = |why: String| {
            format!(
                "{} is not a time in the format {format:?}: {why}",
                shown(text)
            )
        };
        let parsed = jiff::fmt::strtime::parse(format, text).map_err(|e| fail(e.to_string()))?;
        let timestamp = match (parsed.offset(), &self.time_zone) {
            (Some(_), _) => parsed.to_timestamp().map_err(|e| fail(e.to_string()))?,
            (None, Some(zone)) => {
                let civil = parsed.to_datetime().map_err(|e| fail(e.to_string()))?;
                zone.to_ambiguous_timestamp(civil)
                    .unambiguous()
                    .map_err(|_| {
                        format!(
                            "{} does not name one instant in {}: the clocks skip or repeat it",
                            shown(text),
                            zone.iana_name().unwrap_or("the time zone")
                        )
                    })?
            }
            (None, None) => {
                return Err(fail(
                    "it carries no offset and the definition names no time_zone".into(),
                ))
            }
        };
        // Written into a string sized once (RFC 3339 in UTC is 20 to 30 bytes); writing into
        // a `String` cannot fail.
        let mut written = String::with_capacity(32);
        let _ = write!(written, "{timestamp}");
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn german() -> Conventions {
        Conventions::compile(&Values {
            decimal_separator: ",".into(),
            thousands_separator: ".".into(),
            time_format: Some("%d.%m.%Y %H:%M".into()),
            time_zone: Some("Europe/Berlin".into()),
        })
        .unwrap()
    }

    #[test]
    fn german_numbers_become_plain_ones_and_bad_grouping_is_refused() {
        let c = german();
        assert_eq!(c.decimal("1.234,50").unwrap(), "1234.50");
        assert_eq!(c.decimal("0,5").unwrap(), "0.5");
        assert_eq!(c.decimal("12").unwrap(), "12");
        assert_eq!(c.whole_number("1.500").unwrap(), "1500");
        assert!(c.whole_number("1.5").is_err());
        assert!(c.decimal("1.2.3,0").is_err());
        assert!(
            c.decimal("12.50").is_err(),
            "a dot is a thousands separator here"
        );
        assert!(c.whole_number("5,0").is_err());
        assert!(c.whole_number("").is_err());
    }

    #[test]
    fn local_times_are_read_in_their_zone_and_a_skipped_or_repeated_one_is_refused() {
        let c = german();
        assert_eq!(c.time("29.11.2026 08:00").unwrap(), "2026-11-29T07:00:00Z");
        assert_eq!(c.time("01.07.2026 08:00").unwrap(), "2026-07-01T06:00:00Z");
        // 29 March 2026: 02:00-03:00 does not exist in Berlin; 25 October: 02:00-03:00 twice.
        assert!(c
            .time("29.03.2026 02:30")
            .unwrap_err()
            .contains("skip or repeat"));
        assert!(c
            .time("25.10.2026 02:30")
            .unwrap_err()
            .contains("skip or repeat"));
        assert!(c.time("2026-11-29T08:00:00Z").is_err());
        assert!(c.time("31.02.2026 08:00").is_err());
    }

    #[test]
    fn the_time_memo_converts_as_each_time_alone_would() {
        let c = german();
        let mut memo = TimeMemo::default();
        let texts = [
            "29.11.2026 08:00",
            "29.11.2026 08:00",
            "01.07.2026 08:00",
            "29.03.2026 02:30",
            "29.11.2026 08:00",
            "29.03.2026 02:30",
            "01.07.2026 08:00",
            // More times than the memo keeps: the oldest go, and come back converted alike.
            "01.01.2026 00:00",
            "02.01.2026 00:00",
            "03.01.2026 00:00",
            "04.01.2026 00:00",
            "29.11.2026 08:00",
            "01.01.2026 00:00",
            "25.10.2026 02:30",
        ];
        for text in texts {
            assert_eq!(c.time_through_memo(text, &mut memo), c.time(text), "{text}");
        }
        let plain = Conventions::compile(&Values::default()).unwrap();
        let text = "2026-11-29T08:00:00+01:00";
        assert_eq!(
            plain.time_through_memo(text, &mut memo).unwrap(),
            text,
            "without a time format a time is the normalizer's to read"
        );
    }

    #[test]
    fn field_steps_apply_in_order_trim_pattern_map_default() {
        let steps = FieldSteps::compile(&Field {
            path: Some("$.stock".into()),
            pattern: Some(r"^(\d+) In Stock$".into()),
            map: BTreeMap::from([("0".into(), "none".into())]),
            default: Some("unknown".into()),
            trim: true,
            ..Field::default()
        })
        .unwrap();
        assert_eq!(
            steps.apply(Some(" 500 In Stock ")).unwrap().as_deref(),
            Some("500")
        );
        assert_eq!(
            steps.apply(Some("0 In Stock")).unwrap().as_deref(),
            Some("none")
        );
        assert_eq!(steps.apply(None).unwrap().as_deref(), Some("unknown"));
        assert!(steps
            .apply(Some("call us"))
            .unwrap_err()
            .contains("does not match"));
    }
}
