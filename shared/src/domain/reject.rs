//! Stable reason codes for input that will never succeed, however often it is retried.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectCode {
    /// The queue message is not a valid delivery envelope (JSON shape, version, field values).
    InvalidEnvelope,
    /// The envelope names a connector that is not configured, or not for that tenant/account.
    UnknownConnector,
    /// The body is not a parseable payload of the connector's format.
    InvalidPayload,
    /// A row lacks a field or has one of the wrong type (sku, unit, observed_at...).
    InvalidRow,
    /// A quantity that is negative, fractional or not a number.
    InvalidQuantity,
    /// A price that is not a non-negative decimal string.
    InvalidPrice,
    /// A currency that is not an active ISO 4217 code.
    UnknownCurrency,
    /// The body exceeds the connector's size limit.
    PayloadTooLarge,
}

impl RejectCode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::InvalidEnvelope => "invalid_envelope",
            Self::UnknownConnector => "unknown_connector",
            Self::InvalidPayload => "invalid_payload",
            Self::InvalidRow => "invalid_row",
            Self::InvalidQuantity => "invalid_quantity",
            Self::InvalidPrice => "invalid_price",
            Self::UnknownCurrency => "unknown_currency",
            Self::PayloadTooLarge => "payload_too_large",
        }
    }
}

impl fmt::Display for RejectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal with its stable code and a message safe to show an operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Rejection {
    pub code: RejectCode,
    pub message: String,
}

impl Rejection {
    pub fn new(code: RejectCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
