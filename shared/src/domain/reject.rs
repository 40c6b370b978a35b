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
    /// Two rows claim different things about one item at one instant: which one the source
    /// meant cannot be told.
    AmbiguousItem,
    /// Handling the message panicked: a defect of ours, not the supplier's. The message is kept
    /// as the entry's evidence, and the other messages of its batch go on.
    InternalError,
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
            Self::AmbiguousItem => "ambiguous_item",
            Self::InternalError => "internal_error",
        }
    }
}

impl fmt::Display for RejectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest rejection message kept, in bytes. Messages quote supplier text (a price, a field, a
/// parse error's excerpt); a quote of unbounded size would make the quarantine item outgrow
/// DynamoDB's 400 KB item limit, its write fail on every receive and the poison message end in
/// the DLQ with no quarantine entry. The full literal is in the rejected artifact already.
pub const MAX_REJECTION_MESSAGE_BYTES: usize = 1024;

/// A refusal with its stable code and a message safe to show an operator: at most
/// [`MAX_REJECTION_MESSAGE_BYTES`] long (a longer one is cut at a character boundary and says
/// how long it was).
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
            message: capped(message.into()),
        }
    }
}

fn capped(mut message: String) -> String {
    if message.len() <= MAX_REJECTION_MESSAGE_BYTES {
        return message;
    }
    let total = message.len();
    let note =
        format!("… (truncated from {total} bytes; the full literal is in the rejected artifact)");
    let mut cut = MAX_REJECTION_MESSAGE_BYTES - note.len();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push_str(&note);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary_and_says_so() {
        let short = Rejection::new(RejectCode::InvalidPrice, "price \"x\": not a number");
        assert_eq!(short.message, "price \"x\": not a number");
        let exact = "a".repeat(MAX_REJECTION_MESSAGE_BYTES);
        assert_eq!(
            Rejection::new(RejectCode::InvalidRow, exact.clone()).message,
            exact
        );
        for filler in ["9", "é", "€", "𝄞"] {
            let long = format!("price {:?}", filler.repeat(200_000));
            let cut = Rejection::new(RejectCode::InvalidPrice, long.clone()).message;
            assert!(cut.len() <= MAX_REJECTION_MESSAGE_BYTES, "{}", cut.len());
            assert!(cut.starts_with("price \""), "{cut}");
            assert!(
                cut.ends_with(&format!(
                    "(truncated from {} bytes; the full literal is in the rejected artifact)",
                    long.len()
                )),
                "{cut}"
            );
        }
    }
}
