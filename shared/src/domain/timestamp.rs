//! UTC instants with microsecond precision and one fixed text form, so that stored
//! timestamps compare correctly both as values and as DynamoDB sort-key strings.
//!
//! The supported range is the years 0000 to 9999 *in UTC*
//! (docs/adr/0012-supported-ranges-of-stored-values.md): every stored text form has a four-digit
//! year, sorts like the instant and parses back. RFC 3339 text whose offset moves it outside that
//! range (`9999-12-31T23:59:59-01:00` is year 10000 in UTC, `0000-01-01T00:00:00+00:01` is year -1)
//! is refused, never stored.

use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

/// Why a text is not a supported timestamp; each variant quotes (the first 64 characters of) it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    #[error("not an RFC 3339 timestamp with offset: {0:?}")]
    NotRfc3339(String),
    #[error(
        "{0:?} is outside the supported range {EARLIEST}..{LATEST} (years 0000 to 9999 in UTC)"
    )]
    OutOfRange(String),
}

/// The earliest supported instant.
pub const EARLIEST: &str = "0000-01-01T00:00:00Z";
/// The latest supported instant (microseconds are the finest precision kept).
pub const LATEST: &str = "9999-12-31T23:59:59.999999Z";

/// [`EARLIEST`] and [`LATEST`] in microseconds since the Unix epoch.
const EARLIEST_UNIX_MICROS: i128 = -62_167_219_200_000_000;
const LATEST_UNIX_MICROS: i128 = 253_402_300_799_999_999;

fn excerpt(text: &str) -> String {
    text.chars().take(64).collect()
}

impl Timestamp {
    pub fn now() -> Self {
        Self::in_range(OffsetDateTime::now_utc()).unwrap_or_else(Self::latest)
    }

    /// Accepts RFC 3339 with any offset whose instant lies within the supported range; stores
    /// UTC truncated to microseconds (a leap second `:60` is the last microsecond of its minute,
    /// as the `time` crate reads it).
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|_| TimestampError::NotRfc3339(excerpt(text)))?;
        Self::in_range(parsed).ok_or_else(|| TimestampError::OutOfRange(excerpt(text)))
    }

    /// The instant `seconds` after the Unix epoch, when it lies within the supported range.
    pub fn from_unix_seconds(seconds: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp(seconds)
            .ok()
            .and_then(Self::in_range)
    }

    /// The earliest supported instant, [`EARLIEST`].
    pub fn earliest() -> Self {
        Self::at_unix_micros(EARLIEST_UNIX_MICROS)
    }

    /// The latest supported instant, [`LATEST`].
    pub fn latest() -> Self {
        Self::at_unix_micros(LATEST_UNIX_MICROS)
    }

    pub fn unix_seconds(&self) -> i64 {
        self.0.unix_timestamp()
    }

    pub fn unix_millis(&self) -> i64 {
        (self.0.unix_timestamp_nanos() / 1_000_000) as i64
    }

    /// An instant within the supported range, given in microseconds since the Unix epoch.
    fn at_unix_micros(micros: i128) -> Self {
        let micros = micros.clamp(EARLIEST_UNIX_MICROS, LATEST_UNIX_MICROS);
        // Within the range, the conversion cannot fail; the epoch is only the type's fallback.
        Self(
            OffsetDateTime::from_unix_timestamp_nanos(micros * 1_000)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH),
        )
    }

    /// `self` moved by `seconds`, held within the supported range (a horizon or a clock-skew
    /// allowance added to an instant near year 9999 stays a storable instant).
    pub fn plus_seconds(&self, seconds: i64) -> Self {
        let moved = self.0.saturating_add(time::Duration::seconds(seconds));
        Self::in_range(moved).unwrap_or_else(|| {
            if seconds < 0 {
                Self::earliest()
            } else {
                Self::latest()
            }
        })
    }

    /// Seconds from `earlier` to `self`, negative when `earlier` is later.
    pub fn seconds_since(&self, earlier: Timestamp) -> i64 {
        (self.0 - earlier.0).whole_seconds()
    }

    /// `t` in UTC truncated to microseconds, when its UTC year is 0000 to 9999. Never panics:
    /// the conversion to UTC is checked (an offset can carry a date past the calendar's end).
    fn in_range(t: OffsetDateTime) -> Option<Self> {
        let utc = t.checked_to_offset(time::UtcOffset::UTC)?;
        if !(0..=9999).contains(&utc.year()) {
            return None;
        }
        utc.replace_microsecond(utc.microsecond()).ok().map(Self)
    }

    /// Fixed-width form (`2026-11-29T08:00:00.000000Z`): sorts lexically like the instant.
    pub fn sort_key(&self) -> String {
        let t = self.0;
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.microsecond()
        )
    }

    /// Display form: `2026-11-29T08:00:00Z`, with microseconds only when present.
    pub fn to_rfc3339(&self) -> String {
        let t = self.0;
        let base = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        if t.microsecond() == 0 {
            format!("{base}Z")
        } else {
            format!("{base}.{:06}Z", t.microsecond())
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_normalised_to_utc() {
        let a = Timestamp::parse("2026-11-29T09:00:00+01:00").unwrap();
        let b = Timestamp::parse("2026-11-29T08:00:00Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_rfc3339(), "2026-11-29T08:00:00Z");
    }

    #[test]
    fn sort_keys_order_like_instants() {
        let whole = Timestamp::parse("2026-11-29T08:00:00Z").unwrap();
        let half = Timestamp::parse("2026-11-29T08:00:00.5Z").unwrap();
        assert!(whole < half);
        assert!(whole.sort_key() < half.sort_key());
        assert_eq!(half.to_rfc3339(), "2026-11-29T08:00:00.500000Z");
    }

    #[test]
    fn offsets_that_leave_the_calendar_are_refused_not_panicked_on() {
        for text in [
            "9999-12-31T23:59:59-01:00",
            "9999-12-31T23:30:00-00:31",
            "0000-01-01T00:00:00+00:01",
            "0000-01-01T23:58:59+23:59",
        ] {
            assert!(
                matches!(Timestamp::parse(text), Err(TimestampError::OutOfRange(_))),
                "{text}"
            );
        }
        let first = Timestamp::parse("0000-01-01T00:00:00Z").unwrap();
        let last = Timestamp::parse("9999-12-31T23:59:59.9999999Z").unwrap();
        assert_eq!((first, last), (Timestamp::earliest(), Timestamp::latest()));
        assert_eq!(first.sort_key(), "0000-01-01T00:00:00.000000Z");
        assert_eq!(last.to_rfc3339(), LATEST);
        assert_eq!(Timestamp::parse(&last.sort_key()), Ok(last));
        assert_eq!(
            Timestamp::parse("9999-12-31T23:59:59+23:59").map(|t| t.to_rfc3339()),
            Ok("9999-12-31T00:00:59Z".to_owned())
        );
    }

    #[test]
    fn moving_an_instant_stays_within_the_range() {
        assert_eq!(
            Timestamp::latest().plus_seconds(86_400),
            Timestamp::latest()
        );
        assert_eq!(
            Timestamp::earliest().plus_seconds(-1),
            Timestamp::earliest()
        );
        assert_eq!(
            Timestamp::latest().plus_seconds(i64::MAX),
            Timestamp::latest()
        );
        assert_eq!(
            Timestamp::earliest().plus_seconds(i64::MIN),
            Timestamp::earliest()
        );
        assert_eq!(Timestamp::from_unix_seconds(253_402_300_800), None);
        assert_eq!(Timestamp::from_unix_seconds(-62_167_219_201), None);
        assert_eq!(
            Timestamp::from_unix_seconds(-62_167_219_200),
            Some(Timestamp::earliest())
        );
    }

    #[test]
    fn a_leap_second_is_the_last_microsecond_of_its_minute() {
        let leap = Timestamp::parse("2016-12-31T23:59:60Z").unwrap();
        assert_eq!(leap.to_rfc3339(), "2016-12-31T23:59:59.999999Z");
        assert_eq!(Timestamp::parse(&leap.to_rfc3339()), Ok(leap));
    }

    #[test]
    fn rejects_text_without_offset() {
        assert!(Timestamp::parse("2026-11-29T08:00:00").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
    }
}
