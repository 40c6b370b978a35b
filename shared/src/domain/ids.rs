//! Validated identifiers. Each is parsed once at the boundary and trusted afterwards.

use percent_encoding::{utf8_percent_encode, AsciiSet};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {reason}")]
pub struct IdError {
    pub what: &'static str,
    pub reason: &'static str,
}

fn check(
    what: &'static str,
    text: &str,
    max: usize,
    allowed: impl Fn(char) -> bool,
) -> Result<(), IdError> {
    if text.is_empty() {
        return Err(IdError {
            what,
            reason: "empty",
        });
    }
    if text.len() > max {
        return Err(IdError {
            what,
            reason: "too long",
        });
    }
    if !text.chars().all(allowed) {
        return Err(IdError {
            what,
            reason: "contains characters outside the allowed set",
        });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:expr, $allowed:expr) => {
        string_id!($(#[$doc])* $name, $what, |text: &str| check($what, text, $max, $allowed));
    };
    ($(#[$doc:meta])* $name:ident, $what:literal, $validate:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(text: &str) -> Result<Self, IdError> {
                ($validate)(text)?;
                Ok(Self(text.to_owned()))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, IdError> {
                ($validate)(&text)?;
                Ok(Self(text))
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

fn slug_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
}

/// Ids that start with this character are the system's own (for example
/// [`UNREADABLE_ENVELOPE_TENANT`]). `TenantId` and `ConnectorId` refuse them, so connector
/// items, envelopes, local tokens and JWT claims can never name one.
pub const RESERVED_ID_PREFIX: char = '_';

/// The tenant under which refusals of unreadable envelopes are filed (S3 `rejected/_unknown/…`,
/// quarantine `tenant`, GSI `QUARANTINE#_unknown`). Reserved: no `TenantId` equals it, so no
/// configured tenant shares its records and no caller's principal can read them.
pub const UNREADABLE_ENVELOPE_TENANT: &str = "_unknown";

/// A tenant or connector id: a slug of at most 64 characters that is not reserved.
fn configured_slug(what: &'static str, text: &str) -> Result<(), IdError> {
    check(what, text, 64, slug_char)?;
    if text.starts_with(RESERVED_ID_PREFIX) {
        return Err(IdError {
            what,
            reason: "ids starting with `_` are reserved for the system",
        });
    }
    Ok(())
}

fn account_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Printable ASCII except space; '/' is allowed because exports name pages `EXP-8821/2`.
fn delivery_char(c: char) -> bool {
    c.is_ascii_graphic()
}

string_id!(
    /// A tenant: lower-case letters, digits, `-`, `_`; never starting with `_` (reserved).
    TenantId, "tenant", |text: &str| configured_slug("tenant", text)
);
string_id!(
    /// A connector: lower-case letters, digits, `-`, `_`; never starting with `_` (reserved);
    /// unique across tenants.
    ConnectorId, "connector", |text: &str| configured_slug("connector", text)
);
string_id!(
    /// The supplier-side account a connector reads; never contains `/`.
    SourceAccount, "source account", 64, account_char
);
string_id!(
    /// The source's own name for one delivery (event id, export page, file version, fallback digest).
    SourceDeliveryId, "source delivery id", 512, delivery_char
);
string_id!(
    /// Run identifier (ULID or another opaque token).
    RunId, "run id", 64, account_char
);

impl RunId {
    /// The run id of an export: `run-{connector}.{export_id}`, e.g. `run-acme-eu.EXP-8821`. A
    /// connector id never holds `.`, so the first `.` ends it (with `-` there, `acme` + `eu-X` and
    /// `acme-eu` + `X` named one run, and `start_run` would have handed it to the other connector).
    /// An export id that is empty, holds anything but ASCII letters, digits, `-` and `.`, or makes
    /// the id longer than 64 characters is named `{readable prefix}_{20 hex}` instead, the hex
    /// being sha256 over (connector, export id) as netstrings. A readable id has every `_` (from
    /// the connector) before a `.`; a digest id has none after its last `_`: the two never meet.
    pub fn for_export(connector: &ConnectorId, export_id: &str) -> RunId {
        const DIGEST_HEX: usize = 20;
        let readable = format!("run-{connector}.{export_id}");
        let plain = !export_id.is_empty()
            && export_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'));
        if plain && readable.len() <= 64 {
            if let Ok(id) = RunId::parse(&readable) {
                return id;
            }
        }
        use crate::domain::hashing::{hex, sha256_fields};
        let digest = hex(&sha256_fields(&[
            b"run",
            connector.as_str().as_bytes(),
            export_id.as_bytes(),
        ]));
        let kept: String = readable
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '-'
                }
            })
            .take(64 - 1 - DIGEST_HEX)
            .collect();
        // ASCII letters, digits and `-_.` only, at most 64 of them: always a valid run id.
        RunId::parse(&format!("{kept}_{}", &digest[..DIGEST_HEX]))
            .unwrap_or_else(|_| unreachable!("a sanitized run id is valid"))
    }
}

impl RunId {
    /// The run of a pull named by its schedule slot rather than by an export (a definition's
    /// `cursor` and `fallback` identities): `run-{connector}.slot_{stamp}`, `stamp` being the
    /// slot's start as `YYYYMMDDTHHMMSSZ` (`run-distri-api.slot_20261207T060000Z`); for a
    /// connector id too long for that, `run-{20 hex of sha256(connector)}.slot_{stamp}`. The `_`
    /// after the `.` never occurs in a readable export run (those hold only letters, digits, `-`
    /// and `.` after it), and what follows it holds `T` and `Z`, never only the lower-case hex
    /// of a digest export run's tail. [`RunId::slot_of`] reads the slot back.
    pub fn for_slot(
        connector: &ConnectorId,
        slot_start: crate::domain::timestamp::Timestamp,
    ) -> RunId {
        let stamp: String = slot_start
            .to_rfc3339()
            .chars()
            .take_while(|c| *c != '.')
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let readable = format!("run-{connector}.slot_{stamp}");
        if let Ok(id) = RunId::parse(&readable) {
            return id;
        }
        use crate::domain::hashing::{hex, sha256};
        let digest = hex(&sha256(connector.as_str().as_bytes()));
        let short = digest.get(..20).unwrap_or(&digest);
        // 4 + 20 + 6 + 16 characters of `account_char`: always a valid run id.
        RunId::parse(&format!("run-{short}.slot_{stamp}"))
            .unwrap_or_else(|_| unreachable!("a slot run id is valid"))
    }

    /// The slot start of `run`, if it is `connector`'s slot run ([`RunId::for_slot`]).
    pub fn slot_of(
        connector: &ConnectorId,
        run: &RunId,
    ) -> Option<crate::domain::timestamp::Timestamp> {
        let (_, stamp) = run.as_str().rsplit_once(".slot_")?;
        let digits = |range: std::ops::Range<usize>| {
            stamp
                .get(range)
                .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
        };
        if stamp.len() != 16 || stamp.get(8..9) != Some("T") || stamp.get(15..) != Some("Z") {
            return None;
        }
        let text = format!(
            "{}-{}-{}T{}:{}:{}Z",
            digits(0..4)?,
            digits(4..6)?,
            digits(6..8)?,
            digits(9..11)?,
            digits(11..13)?,
            digits(13..15)?
        );
        let slot = crate::domain::timestamp::Timestamp::parse(&text).ok()?;
        (RunId::for_slot(connector, slot) == *run).then_some(slot)
    }
}

/// The stable fields a fallback identity is derived from (docs/architecture.md section 5) when the
/// source names the delivery with nothing usable. A field the source does not have is passed empty,
/// never left out, so that the digest input keeps one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackFields<'a> {
    pub source_account: &'a str,
    /// Where the payload was received or fetched, e.g. `/v1/webhooks/acme-events`.
    pub endpoint: &'a str,
    /// Empty for a webhook (a push has no page cursor).
    pub page_cursor: &'a str,
    /// The source's own time for the delivery, e.g. the `webhook-timestamp` in unix seconds.
    pub source_timestamp: &'a str,
    /// sha256 hex of the literal payload.
    pub payload_sha256: &'a str,
}

/// What `escape_component` encodes in a CloudEvents id: `%` and `/`.
const CLOUD_EVENT_ID_ESCAPES: &AsciiSet = &AsciiSet::EMPTY.add(b'%').add(b'/');
/// What `escape_component` encodes in a file version: `%` and `@`.
const FILE_VERSION_ESCAPES: &AsciiSet = &AsciiSet::EMPTY.add(b'%').add(b'@');

/// Percent-encodes `%` and the separator (the set's other member) in `text`, so that the
/// separator occurs nowhere in the result and decoding is unique (`%` itself is escaped, so a
/// literal `%2F` stays `%252F`). Text holding anything but ASCII is returned as it is:
/// `percent-encoding` would escape those bytes too, and an id holding them is not a readable one
/// anyway (`delivery_char`), so the caller names it by its digest.
fn escape_component<'a>(text: &'a str, escapes: &'static AsciiSet) -> Cow<'a, str> {
    if text.is_ascii() {
        utf8_percent_encode(text, escapes).into()
    } else {
        Cow::Borrowed(text)
    }
}

impl SourceDeliveryId {
    /// A CloudEvents identity: `{source}/{id}` with `%` and `/` percent-encoded inside `id` only.
    /// The id then holds no `/`, so the last `/` separates the two and distinct (source, id)
    /// pairs never share a key: `("/x", "y/z")` is `/x/y%2Fz`, `("/x/y", "z")` is `/x/y/z`.
    /// The common case stays as the source wrote it (`urn:acme:events/evt-1`). When that is not
    /// a valid id (spaces, non-ASCII, over 512 characters): `ce-{sha256 hex}` over both fields
    /// as netstrings; it holds no `/`, so it never equals a readable one.
    pub fn cloud_event(source: &str, id: &str) -> Self {
        Self::parse(&format!(
            "{source}/{}",
            escape_component(id, CLOUD_EVENT_ID_ESCAPES)
        ))
        .unwrap_or_else(|_| Self::digest("ce-", &["cloudevents", source, id]))
    }

    /// A page of a supplier export: `{export_id}/{page}`, e.g. `EXP-8821/2`. Unambiguous as it
    /// stands: the page is a decimal number (no `/`, no leading zero), so the last `/` always
    /// separates it from an export id that may hold `/` of its own.
    pub fn export_page(export_id: &str, page: u32) -> Result<Self, IdError> {
        Self::parse(&format!("{export_id}/{page}"))
    }

    /// A dropped file by its content: `{file}@sha256:{hex}` (`prices.csv@sha256:9f86…`). The
    /// hex holds no `@`, so the last `@` separates the two, whatever `@` the name holds. When
    /// that is not a valid id: `file-{sha256 hex}` over (`file_content`, file, hex) as
    /// netstrings; it holds no `@`, so it never equals a readable one.
    pub fn file_content(file: &str, content_sha256: &[u8; 32]) -> Self {
        let content = crate::domain::hashing::hex(content_sha256);
        Self::parse(&format!("{file}@sha256:{content}"))
            .unwrap_or_else(|_| Self::digest("file-", &["file_content", file, &content]))
    }

    /// A dropped file by its object version, for a file that is not read (larger than its
    /// connector accepts): `{file}@version:{version}` with `%` and `@` percent-encoded inside
    /// the version only, so the last `@` separates the two (`prices.csv@version:v1`). After
    /// that `@` it says `version:` where [`Self::file_content`] says `sha256:`, so the two never
    /// meet. When that is not a valid id: `file-{sha256 hex}` over (`file_version`, file,
    /// version) as netstrings; it holds no `@`.
    pub fn file_version(file: &str, version: &str) -> Self {
        Self::parse(&format!(
            "{file}@version:{}",
            escape_component(version, FILE_VERSION_ESCAPES)
        ))
        .unwrap_or_else(|_| Self::digest("file-", &["file_version", file, version]))
    }

    /// A snapshot id the body holds (a connector's `body` identity): `snapshot:{id}`, so it
    /// never equals a `webhook-id` or a file's name under the same connector. When that is not
    /// a valid id: `snap-{sha256 hex}` over (`snapshot`, id) as netstrings.
    pub fn snapshot(id: &str) -> Self {
        Self::parse(&format!("snapshot:{id}"))
            .unwrap_or_else(|_| Self::digest("snap-", &["snapshot", id]))
    }

    /// A dropped file by its name alone (a connector's `file_name` identity): `{file}@name`;
    /// after the last `@` it says `name`, never `sha256:` or `version:`. When that is not a
    /// valid id: `file-{sha256 hex}` over (`file_name`, file) as netstrings.
    pub fn file_name(file: &str) -> Self {
        Self::parse(&format!("{file}@name"))
            .unwrap_or_else(|_| Self::digest("file-", &["file_name", file]))
    }

    /// A page of a cursor-paginated pull (a definition's `cursor` identity): the run's slot and
    /// the cursor the page was asked with, `cursor:{slot}/{cursor}` (`cursor:2026-12-07T06:00:00Z/c2`;
    /// page 1, asked without a cursor, ends in `/`). The slot is an RFC 3339 time, which holds no
    /// `/`, so the first `/` after the prefix separates the two. When that is not a valid id
    /// (non-ASCII, spaces, over 512 characters): `cur-{sha256 hex}` over (`cursor`, slot,
    /// cursor) as netstrings; it holds no `:`, so it never equals a readable one.
    pub fn pull_cursor(slot: &str, cursor: &str) -> Self {
        Self::parse(&format!("cursor:{slot}/{cursor}"))
            .unwrap_or_else(|_| Self::digest("cur-", &["cursor", slot, cursor]))
    }

    /// The fallback identity: `fb-{sha256 hex}` over every field of [`FallbackFields`] as
    /// netstrings.
    pub fn fallback(fields: &FallbackFields<'_>) -> Self {
        Self::digest(
            "fb-",
            &[
                "fallback",
                fields.source_account,
                fields.endpoint,
                fields.page_cursor,
                fields.source_timestamp,
                fields.payload_sha256,
            ],
        )
    }

    fn digest(prefix: &str, fields: &[&str]) -> Self {
        let bytes: Vec<&[u8]> = fields.iter().map(|f| f.as_bytes()).collect();
        let text = format!(
            "{prefix}{}",
            crate::domain::hashing::hex(&crate::domain::hashing::sha256_fields(&bytes))
        );
        // A short ASCII prefix plus 64 hex digits always passes `delivery_char` and the length.
        Self(text)
    }
}

/// How strongly the source itself names the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityStrength {
    /// A producer event id, export/snapshot token plus page, `webhook-id`, or file name plus
    /// content (or version, for a file too large to read).
    Source,
    /// Derived from stable fields because the source gave no id: weaker evidence.
    Fallback,
}

impl IdentityStrength {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Fallback => "fallback",
        }
    }
}

/// The replay key `{tenant}/{connector}/{source_account}/{source_delivery_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeliveryKey {
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub source_delivery_id: SourceDeliveryId,
    pub strength: IdentityStrength,
}

impl DeliveryKey {
    pub fn new(
        tenant: TenantId,
        connector: ConnectorId,
        source_account: SourceAccount,
        source_delivery_id: SourceDeliveryId,
        strength: IdentityStrength,
    ) -> Self {
        Self {
            tenant,
            connector,
            source_account,
            source_delivery_id,
            strength,
        }
    }

    pub fn as_string(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.tenant, self.connector, self.source_account, self.source_delivery_id
        )
    }
}

impl fmt::Display for DeliveryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_string())
    }
}

/// Deterministic id of one observation: `obs_` + 26 base32 characters of
/// sha256(delivery key, epoch, canonical row index).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ObservationId(String);

impl ObservationId {
    pub fn derive(key: &DeliveryKey, epoch: u32, row_index: usize) -> Self {
        Self::derive_for(&key.as_string(), epoch, row_index)
    }

    /// `derive` from the delivery key's text (`{tenant}/{connector}/{account}/{id}`).
    pub fn derive_for(delivery_key: &str, epoch: u32, row_index: usize) -> Self {
        let digest = crate::domain::hashing::sha256(
            format!("observation\n{delivery_key}\n{epoch}\n{row_index}").as_bytes(),
        );
        Self(format!(
            "obs_{}",
            crate::domain::hashing::base32_lower(&digest[..16])
        ))
    }

    /// The id of the observation that replaces `old` under identity correction `correction_id`.
    pub fn derive_superseding(old: &ObservationId, correction_id: &str) -> Self {
        let digest =
            crate::domain::hashing::sha256(format!("supersede\n{old}\n{correction_id}").as_bytes());
        Self(format!(
            "obs_{}",
            crate::domain::hashing::base32_lower(&digest[..16])
        ))
    }

    pub fn parse(text: &str) -> Result<Self, IdError> {
        let body = text.strip_prefix("obs_").ok_or(IdError {
            what: "observation id",
            reason: "must start with obs_",
        })?;
        check("observation id", body, 32, |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit()
        })?;
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> DeliveryKey {
        DeliveryKey::new(
            TenantId::parse("acme").unwrap(),
            ConnectorId::parse("acme-eu").unwrap(),
            SourceAccount::parse("ACC-1").unwrap(),
            SourceDeliveryId::parse(id).unwrap(),
            IdentityStrength::Source,
        )
    }

    #[test]
    fn delivery_key_has_the_documented_shape() {
        assert_eq!(
            key("EXP-8821/2").as_string(),
            "acme/acme-eu/ACC-1/EXP-8821/2"
        );
    }

    #[test]
    fn observation_ids_are_deterministic_and_distinct() {
        let a = ObservationId::derive(&key("EXP-8821/2"), 0, 0);
        assert_eq!(a, ObservationId::derive(&key("EXP-8821/2"), 0, 0));
        assert_ne!(a, ObservationId::derive(&key("EXP-8821/2"), 0, 1));
        assert_ne!(a, ObservationId::derive(&key("EXP-8821/2"), 1, 0));
        assert_ne!(a, ObservationId::derive(&key("EXP-8822/2"), 0, 0));
        assert_eq!(ObservationId::parse(a.as_str()).unwrap(), a);
    }

    #[test]
    fn cloudevents_identities_are_readable_and_unambiguous() {
        let ce = |source: &str, id: &str| SourceDeliveryId::cloud_event(source, id);
        assert_eq!(
            ce("urn:acme:events", "evt-1").as_str(),
            "urn:acme:events/evt-1"
        );
        assert_eq!(
            ce("urn:acme:events", "evt-1"),
            ce("urn:acme:events", "evt-1")
        );
        assert_eq!(ce("/x", "y/z").as_str(), "/x/y%2Fz");
        assert_eq!(ce("/x/y", "z").as_str(), "/x/y/z");
        assert_eq!(ce("/x", "y%2Fz").as_str(), "/x/y%252Fz");
        assert_eq!(ce("a%", "b").as_str(), "a%/b");
        // Digest forms: fields kept apart, never equal to a readable id (no `/`).
        let newline = ce("s\na", "b");
        assert!(newline.as_str().starts_with("ce-") && !newline.as_str().contains('/'));
        assert_ne!(newline, ce("s", "a\nb"));
        let long = "s".repeat(600);
        assert_ne!(ce(&long, "1"), ce(&format!("{long}/1"), ""));
        assert!(SourceDeliveryId::parse(ce(&long, "1").as_str()).is_ok());
        // Exactly at the limit stays readable; one more character is a digest.
        assert_eq!(ce(&"s".repeat(510), "1").as_str().len(), 512);
        assert!(ce(&"s".repeat(511), "1").as_str().starts_with("ce-"));
    }

    #[test]
    fn file_identities_are_readable_and_unambiguous() {
        let file = |name: &str, version: &str| SourceDeliveryId::file_version(name, version);
        assert_eq!(file("prices.csv", "v1").as_str(), "prices.csv@version:v1");
        assert_eq!(file("a@b", "c").as_str(), "a@b@version:c");
        assert_eq!(file("a", "b@c").as_str(), "a@version:b%40c");
        assert_ne!(file("a", "b%40c"), file("a", "b@c"));
        let spaced = file("price list.csv", "v1");
        assert!(spaced.as_str().starts_with("file-") && !spaced.as_str().contains('@'));
        assert_ne!(spaced, file("price list.csv", "v2"));
    }

    #[test]
    fn snapshot_and_file_name_identities_are_readable_and_unambiguous() {
        use crate::domain::hashing::{hex, sha256};
        let snapshot = SourceDeliveryId::snapshot;
        assert_eq!(snapshot("SNAP-8812").as_str(), "snapshot:SNAP-8812");
        assert_ne!(snapshot("a"), snapshot("b"));
        let spaced = snapshot("snap 1");
        assert!(spaced.as_str().starts_with("snap-") && !spaced.as_str().contains(':'));
        assert_ne!(spaced, snapshot("snap 2"));
        assert!(snapshot(&"s".repeat(600)).as_str().starts_with("snap-"));
        let name = SourceDeliveryId::file_name;
        assert_eq!(name("catalog.xml").as_str(), "catalog.xml@name");
        assert_eq!(name("a@b").as_str(), "a@b@name");
        // After the last `@`: `name`, never `sha256:…` or `version:…`.
        let digest = hex(&sha256(b"x"));
        for file in ["a", "a@name", "a@sha256", "name"] {
            assert_ne!(
                name(file),
                SourceDeliveryId::file_content("a", &sha256(b"x"))
            );
            assert_ne!(name(file), SourceDeliveryId::file_version("a", "name"));
            assert_ne!(name(file), SourceDeliveryId::file_version("a", &digest));
        }
        let spaced = name("price list.csv");
        assert!(spaced.as_str().starts_with("file-") && !spaced.as_str().contains('@'));
        assert_ne!(spaced, name("price list2.csv"));
    }

    #[test]
    fn content_identities_are_readable_and_unambiguous() {
        use crate::domain::hashing::{hex, sha256};
        let content = |name: &str, body: &[u8]| SourceDeliveryId::file_content(name, &sha256(body));
        let digest = hex(&sha256(b"x"));
        assert_eq!(
            content("prices.csv", b"x").as_str(),
            format!("prices.csv@sha256:{digest}")
        );
        // Same name and bytes: the same id; other bytes or another name: another one.
        assert_eq!(content("prices.csv", b"x"), content("prices.csv", b"x"));
        assert_ne!(content("prices.csv", b"x"), content("prices.csv", b"y"));
        assert_ne!(content("prices.csv", b"x"), content("prices2.csv", b"x"));
        // An `@` in the name cannot move the boundary: the hex after the last `@` holds none.
        assert_eq!(
            content("a@b", b"x").as_str(),
            format!("a@b@sha256:{digest}")
        );
        let named_like_an_id = format!("a@sha256:{digest}");
        assert_ne!(content(&named_like_an_id, b"y"), content("a", b"x"));
        // Never equal to the version form, readable or not.
        assert_ne!(
            content("a", b"x"),
            SourceDeliveryId::file_version("a", &format!("sha256:{digest}"))
        );
        let spaced = content("price list.csv", b"x");
        assert!(spaced.as_str().starts_with("file-") && !spaced.as_str().contains('@'));
        assert_ne!(spaced, content("price list.csv", b"y"));
        assert_ne!(
            spaced,
            SourceDeliveryId::digest("file-", &["file_version", "price list.csv", &digest])
        );
        // A name too long for the readable form is named by its digest.
        let long = "f".repeat(512 - 72);
        assert!(content(&long, b"x").as_str().ends_with(&digest));
        assert!(content(&format!("{long}f"), b"x")
            .as_str()
            .starts_with("file-"));
    }

    /// The encoder `ids` had before it used `percent-encoding`, and the ids it made.
    fn hand_written_escape(text: &str, separator: char) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if c == '%' || c == separator {
                out.push_str(&format!("%{:02X}", c as u32));
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn composite_ids_are_exactly_the_ones_the_hand_written_encoder_made() {
        let before_cloud_event = |source: &str, id: &str| {
            SourceDeliveryId::parse(&format!("{source}/{}", hand_written_escape(id, '/')))
                .unwrap_or_else(|_| SourceDeliveryId::digest("ce-", &["cloudevents", source, id]))
        };
        // The version form now says `version:` after its `@`; the escaping is unchanged.
        let before_file_version = |file: &str, version: &str| {
            SourceDeliveryId::parse(&format!(
                "{file}@version:{}",
                hand_written_escape(version, '@')
            ))
            .unwrap_or_else(|_| SourceDeliveryId::digest("file-", &["file_version", file, version]))
        };
        // Every string of up to 4 characters over separators, escapes, hex digits, a space, a
        // control character and non-ASCII ones, as the second field.
        let alphabet = ["%", "/", "@", "2", "F", "4", "0", "a", " ", "\n", "é", "€"];
        let mut texts = vec![String::new()];
        let mut all = texts.clone();
        for _ in 0..4 {
            texts = texts
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            all.extend(texts.iter().cloned());
        }
        for text in &all {
            for first in ["urn:acme:events", "prices.csv", "a%", "x y"] {
                assert_eq!(
                    SourceDeliveryId::cloud_event(first, text),
                    before_cloud_event(first, text),
                    "cloud_event({first:?}, {text:?})"
                );
                assert_eq!(
                    SourceDeliveryId::file_version(first, text),
                    before_file_version(first, text),
                    "file_version({first:?}, {text:?})"
                );
            }
        }
        assert_eq!(all.len(), 1 + 12 + 144 + 1728 + 20736);
    }

    #[test]
    fn the_fallback_identity_covers_every_listed_field() {
        let base = FallbackFields {
            source_account: "ACC-1",
            endpoint: "/v1/webhooks/acme-events",
            page_cursor: "",
            source_timestamp: "1796025600",
            payload_sha256: "ab",
        };
        let id = SourceDeliveryId::fallback(&base);
        assert_eq!(id, SourceDeliveryId::fallback(&base));
        assert!(id.as_str().starts_with("fb-") && id.as_str().len() == 67);
        let changed = [
            FallbackFields {
                source_account: "ACC-2",
                ..base
            },
            FallbackFields {
                endpoint: "/v1/webhooks/acme-eu",
                ..base
            },
            FallbackFields {
                page_cursor: "c2",
                ..base
            },
            FallbackFields {
                source_timestamp: "1796025601",
                ..base
            },
            FallbackFields {
                payload_sha256: "cd",
                ..base
            },
            // A boundary moved between two fields is another identity too.
            FallbackFields {
                endpoint: "/v1/webhooks/acme-events1",
                source_timestamp: "796025600",
                ..base
            },
        ];
        for fields in changed {
            assert_ne!(SourceDeliveryId::fallback(&fields), id, "{fields:?}");
        }
    }

    #[test]
    fn tenant_and_connector_ids_starting_with_an_underscore_are_reserved() {
        for reserved in ["_unknown", "_", "_system"] {
            let tenant = TenantId::parse(reserved).unwrap_err();
            assert!(tenant.reason.contains("reserved"), "{tenant}");
            let connector = ConnectorId::parse(reserved).unwrap_err();
            assert!(connector.reason.contains("reserved"), "{connector}");
            // The serde path (connector items, envelopes, local config) refuses them too.
            assert!(serde_json::from_value::<TenantId>(serde_json::json!(reserved)).is_err());
            assert!(serde_json::from_value::<ConnectorId>(serde_json::json!(reserved)).is_err());
        }
        assert!(TenantId::parse(UNREADABLE_ENVELOPE_TENANT).is_err());
        // An underscore elsewhere is still an ordinary id.
        assert!(TenantId::parse("acme_eu").is_ok());
        assert!(ConnectorId::parse("acme-eu_2").is_ok());
    }

    #[test]
    fn ids_reject_bad_characters() {
        assert!(TenantId::parse("Acme").is_err());
        assert!(SourceAccount::parse("ACC/1").is_err());
        assert!(SourceDeliveryId::parse("has space").is_err());
        assert!(SourceDeliveryId::parse("").is_err());
    }

    #[test]
    fn slot_runs_and_cursor_pages_have_their_own_names() {
        let connector = ConnectorId::parse("distri-api").unwrap();
        let slot = crate::domain::timestamp::Timestamp::parse("2026-12-07T06:00:00Z").unwrap();
        let run = RunId::for_slot(&connector, slot);
        assert_eq!(run.as_str(), "run-distri-api.slot_20261207T060000Z");
        assert_ne!(run, RunId::for_export(&connector, "slot-20261207T060000Z"));
        assert_eq!(RunId::slot_of(&connector, &run), Some(slot));
        let other = ConnectorId::parse("distri-ap").unwrap();
        assert_eq!(RunId::slot_of(&other, &run), None);
        assert_eq!(
            RunId::slot_of(&connector, &RunId::for_export(&connector, "X")),
            None
        );
        let long = ConnectorId::parse(&"c".repeat(60)).unwrap();
        let long_run = RunId::for_slot(&long, slot);
        assert_eq!(long_run.as_str().len(), 46, "{long_run}");
        assert_eq!(RunId::slot_of(&long, &long_run), Some(slot));
        assert_eq!(RunId::slot_of(&connector, &long_run), None);
        assert_eq!(
            SourceDeliveryId::pull_cursor("2026-12-07T06:00:00Z", "c2").as_str(),
            "cursor:2026-12-07T06:00:00Z/c2"
        );
        assert_eq!(
            SourceDeliveryId::pull_cursor("2026-12-07T06:00:00Z", "").as_str(),
            "cursor:2026-12-07T06:00:00Z/"
        );
        let odd = SourceDeliveryId::pull_cursor("2026-12-07T06:00:00Z", "a b");
        assert!(odd.as_str().starts_with("cur-") && !odd.as_str().contains(':'));
    }
}
