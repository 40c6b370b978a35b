//! Validated identifiers. Each is parsed once at the boundary and trusted afterwards.

use serde::{Deserialize, Serialize};
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

/// How strongly the source itself names the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityStrength {
    /// A producer event id, export/snapshot token plus page, `webhook-id`, or file name plus version.
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
        let digest = crate::hashing::sha256(
            format!("observation\n{}\n{epoch}\n{row_index}", key.as_string()).as_bytes(),
        );
        Self(format!(
            "obs_{}",
            crate::hashing::base32_lower(&digest[..16])
        ))
    }

    /// The id of the observation that replaces `old` under identity correction `correction_id`.
    pub fn derive_superseding(old: &ObservationId, correction_id: &str) -> Self {
        let digest =
            crate::hashing::sha256(format!("supersede\n{old}\n{correction_id}").as_bytes());
        Self(format!(
            "obs_{}",
            crate::hashing::base32_lower(&digest[..16])
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
}
