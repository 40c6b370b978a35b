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
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(text: &str) -> Result<Self, IdError> {
                check($what, text, $max, $allowed)?;
                Ok(Self(text.to_owned()))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, IdError> {
                check($what, &text, $max, $allowed)?;
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

fn account_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Printable ASCII except space; '/' is allowed because exports name pages `EXP-8821/2`.
fn delivery_char(c: char) -> bool {
    c.is_ascii_graphic()
}

string_id!(
    /// A tenant: lower-case letters, digits, `-`, `_`.
    TenantId, "tenant", 64, slug_char
);
string_id!(
    /// A connector: lower-case letters, digits, `-`, `_`; unique across tenants.
    ConnectorId, "connector", 64, slug_char
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
        Self::derive_for(&key.as_string(), epoch, row_index)
    }

    /// `derive` from the delivery key's text (`{tenant}/{connector}/{account}/{id}`).
    pub fn derive_for(delivery_key: &str, epoch: u32, row_index: usize) -> Self {
        let digest = crate::hashing::sha256(
            format!("observation\n{delivery_key}\n{epoch}\n{row_index}").as_bytes(),
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
    fn ids_reject_bad_characters() {
        assert!(TenantId::parse("Acme").is_err());
        assert!(SourceAccount::parse("ACC/1").is_err());
        assert!(SourceDeliveryId::parse("has space").is_err());
        assert!(SourceDeliveryId::parse("").is_err());
    }
}
