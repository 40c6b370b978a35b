//! UTC instants with microsecond precision and one fixed text form, so that stored
//! timestamps compare correctly both as values and as DynamoDB sort-key strings.

use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp with offset: {0:?}")]
pub struct TimestampError(pub String);

impl Timestamp {
    pub fn now() -> Self {
        Self::truncated(OffsetDateTime::now_utc())
    }

    /// Accepts RFC 3339 with any offset; stores UTC truncated to microseconds.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        OffsetDateTime::parse(text, &Rfc3339)
            .map(Self::truncated)
            .map_err(|_| TimestampError(text.chars().take(64).collect()))
    }

    pub fn from_unix_seconds(seconds: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp(seconds).ok().map(Self)
    }

    pub fn unix_seconds(&self) -> i64 {
        self.0.unix_timestamp()
    }

    pub fn unix_millis(&self) -> i64 {
        (self.0.unix_timestamp_nanos() / 1_000_000) as i64
    }

    pub fn plus_seconds(&self, seconds: i64) -> Self {
        Self(self.0.saturating_add(time::Duration::seconds(seconds)))
    }

    /// Seconds from `earlier` to `self`, negative when `earlier` is later.
    pub fn seconds_since(&self, earlier: Timestamp) -> i64 {
        (self.0 - earlier.0).whole_seconds()
    }

    fn truncated(t: OffsetDateTime) -> Self {
        let t = t.to_offset(time::UtcOffset::UTC);
        let micros = t.microsecond();
        Self(t.replace_microsecond(micros).unwrap_or(t))
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
    fn rejects_text_without_offset() {
        assert!(Timestamp::parse("2026-11-29T08:00:00").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
    }
}
