//! The item-history cursor (`next_cursor` of `GET /v1/items/{item}/observations`): a position
//! in one tenant's history of one item, bound to that tenant, that item and that listing.
//!
//! It is base64url (no padding) of `{"v": 1, "of": "item_history", "tenant", "item",
//! "after"}`, `after` being the last claim's history sort key (`Observation::basis`:
//! `{observed_at}#r{delivery recorded at}#{observation_id}`, or `{observed_at}#{observation_id}`
//! for a claim stored before the record time was kept).
//! Decoding checks every part against the request it comes with, and the DynamoDB start key is
//! rebuilt from the caller's own tenant and item, never taken from the cursor: whatever a client
//! sends, the query stays inside its own partition and DynamoDB never sees a key it would
//! refuse. A cursor is a position, not a credential: a hand-made one that names the caller's
//! own tenant, item and a well-formed position is a valid position in what it may read anyway.

use super::dynamo::{item_history_pk, observation_pk, Item, SK_OBSERVATION};
use crate::domain::ids::{ObservationId, TenantId};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// The listing these cursors page; a cursor naming another one is refused.
const LISTING: &str = "item_history";
const VERSION: u32 = 1;
/// Longer than any cursor issued (tenant and item are short; an issued one is ~200 characters).
const MAX_CURSOR_CHARS: usize = 4096;

const ENGINE: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Cursor {
    v: u32,
    of: String,
    tenant: String,
    item: String,
    after: String,
}

fn invalid(message: &str) -> StoreError {
    StoreError::InvalidCursor(message.to_owned())
}

/// The cursor after `last` (a DynamoDB `LastEvaluatedKey` of the item-history index).
pub fn encode(tenant: &TenantId, item: &str, last: &Item) -> Option<String> {
    let after = last.get("gsi1sk")?.as_s().ok()?;
    let cursor = Cursor {
        v: VERSION,
        of: LISTING.to_owned(),
        tenant: tenant.as_str().to_owned(),
        item: item.to_owned(),
        after: after.clone(),
    };
    serde_json::to_vec(&cursor)
        .ok()
        .map(|json| ENGINE.encode(json))
}

/// The start key of the page `cursor` points to in `tenant`'s history of `item`, or
/// `StoreError::InvalidCursor` saying why the cursor is not one for this listing.
pub fn decode(tenant: &TenantId, item: &str, cursor: &str) -> Result<Item, StoreError> {
    let cursor = parse(cursor)?;
    if cursor.v != VERSION || cursor.of != LISTING {
        return Err(invalid(
            "the cursor was issued for another listing; start again without a cursor",
        ));
    }
    if cursor.tenant != tenant.as_str() || cursor.item != item {
        return Err(invalid(
            "the cursor was issued for another item's history; start again without a cursor",
        ));
    }
    let id = position(&cursor.after)?;
    Ok(Item::from([
        (
            "pk".to_owned(),
            AttributeValue::S(observation_pk(id.as_str())),
        ),
        (
            "sk".to_owned(),
            AttributeValue::S(SK_OBSERVATION.to_owned()),
        ),
        (
            "gsi1pk".to_owned(),
            AttributeValue::S(item_history_pk(tenant.as_str(), item)),
        ),
        ("gsi1sk".to_owned(), AttributeValue::S(cursor.after)),
    ]))
}

fn parse(text: &str) -> Result<Cursor, StoreError> {
    const FOREIGN: &str =
        "the cursor is not one this API issued; pass next_cursor exactly as it was returned";
    if text.is_empty() {
        return Err(invalid(
            "the cursor is empty; leave it out to read the first page",
        ));
    }
    if text.len() > MAX_CURSOR_CHARS {
        return Err(invalid(FOREIGN));
    }
    let json = ENGINE.decode(text).map_err(|_| invalid(FOREIGN))?;
    serde_json::from_slice(&json).map_err(|_| invalid(FOREIGN))
}

/// The observation id of a history sort key (`Observation::basis`: `{observed_at}#{id}`, or
/// `{observed_at}#r{delivery_recorded_at}#{id}`), every part in the exact form stored.
fn position(after: &str) -> Result<ObservationId, StoreError> {
    let bad = || invalid("the cursor's position is not valid; start again without a cursor");
    let parts: Vec<&str> = after.split('#').collect();
    let (at, recorded, id) = match parts.as_slice() {
        [at, id] => (*at, None, *id),
        [at, recorded, id] => (*at, Some(recorded.strip_prefix('r').ok_or_else(bad)?), *id),
        _ => return Err(bad()),
    };
    if !is_sort_key(at) || !recorded.is_none_or(is_sort_key) {
        return Err(bad());
    }
    ObservationId::parse(id).map_err(|_| bad())
}

/// A timestamp in the fixed-width text form the evidence table sorts by.
fn is_sort_key(text: &str) -> bool {
    Timestamp::parse(text).is_ok_and(|t| t.sort_key() == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str = "AX-440-R2~each~new";
    const AFTER: &str = "2026-11-29T08:00:00.000000Z#obs_abc123";

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    fn last_key(tenant_name: &str, item: &str) -> Item {
        Item::from([
            ("pk".to_owned(), AttributeValue::S("OBS#obs_abc123".into())),
            ("sk".to_owned(), AttributeValue::S("OBS".into())),
            (
                "gsi1pk".to_owned(),
                AttributeValue::S(item_history_pk(tenant_name, item)),
            ),
            ("gsi1sk".to_owned(), AttributeValue::S(AFTER.into())),
        ])
    }

    fn reason(result: Result<Item, StoreError>) -> String {
        match result {
            Err(StoreError::InvalidCursor(m)) => m,
            other => panic!("not an invalid cursor: {other:?}"),
        }
    }

    fn hand_made(value: serde_json::Value) -> String {
        ENGINE.encode(value.to_string())
    }

    #[test]
    fn an_issued_cursor_decodes_to_the_key_it_was_made_from_and_is_url_safe() {
        let key = last_key("demo", ITEM);
        let cursor = encode(&tenant("demo"), ITEM, &key).unwrap();
        assert!(
            cursor
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{cursor}"
        );
        assert_eq!(decode(&tenant("demo"), ITEM, &cursor).unwrap(), key);
    }

    #[test]
    fn a_cursor_of_another_tenant_item_or_listing_is_refused() {
        let cursor = encode(&tenant("demo"), ITEM, &last_key("demo", ITEM)).unwrap();
        assert!(reason(decode(&tenant("other"), ITEM, &cursor)).contains("another item"));
        assert!(reason(decode(&tenant("demo"), "BX-1~each~new", &cursor)).contains("another item"));
        let listing = hand_made(serde_json::json!({
            "v": 1, "of": "quarantine", "tenant": "demo", "item": ITEM, "after": AFTER
        }));
        assert!(reason(decode(&tenant("demo"), ITEM, &listing)).contains("another listing"));
        let version = hand_made(serde_json::json!({
            "v": 2, "of": "item_history", "tenant": "demo", "item": ITEM, "after": AFTER
        }));
        assert!(reason(decode(&tenant("demo"), ITEM, &version)).contains("another listing"));
    }

    #[test]
    fn malformed_cursors_are_refused_with_a_reason() {
        let demo = tenant("demo");
        let raw_key = ENGINE.encode(
            serde_json::json!({"pk": "", "sk": "", "gsi1pk": "", "gsi1sk": ""}).to_string(),
        );
        let extra = hand_made(serde_json::json!({
            "v": 1, "of": "item_history", "tenant": "demo", "item": ITEM, "after": AFTER,
            "gsi1pk": "ITEM#other#x"
        }));
        for text in [
            String::new(),
            "!!!".into(),
            "e30=".into(), // padded base64 of `{}`
            ENGINE.encode("not json"),
            ENGINE.encode("[]"),
            raw_key,
            extra,
            "A".repeat(MAX_CURSOR_CHARS + 1),
        ] {
            assert!(!reason(decode(&demo, ITEM, &text)).is_empty(), "{text}");
        }
    }

    #[test]
    fn both_stored_forms_of_a_position_are_valid() {
        let demo = tenant("demo");
        for after in [
            AFTER,
            "2026-11-29T08:00:00.000000Z#r2026-11-29T08:00:05.123456Z#obs_abc123",
        ] {
            let cursor = hand_made(serde_json::json!({
                "v": 1, "of": "item_history", "tenant": "demo", "item": ITEM, "after": after
            }));
            let key = decode(&demo, ITEM, &cursor).unwrap();
            assert_eq!(key["pk"], AttributeValue::S("OBS#obs_abc123".into()));
            assert_eq!(key["gsi1sk"], AttributeValue::S(after.into()));
        }
    }

    #[test]
    fn a_position_must_be_a_stored_sort_key() {
        let demo = tenant("demo");
        for after in [
            "",
            "#",
            "2026-11-29T08:00:00.000000Z",
            "2026-11-29T08:00:00Z#obs_abc123",
            "2026-11-29T08:00:00.000000Z#obs_",
            "2026-11-29T08:00:00.000000Z#OBS_ABC",
            "2026-11-29T08:00:00.000000Z#obs_abc#x",
            "2026-11-29T08:00:00.000000Z#2026-11-29T08:00:05.000000Z#obs_abc",
            "2026-11-29T08:00:00.000000Z#r2026-11-29T08:00:05Z#obs_abc",
            "2026-11-29T08:00:00.000000Z#r#obs_abc",
            "2026-11-29T08:00:00.000000Z#r2026-11-29T08:00:05.000000Z#r2026-11-29T08:00:05.000000Z#obs_abc",
            &format!("2026-11-29T08:00:00.000000Z#obs_{}", "a".repeat(2000)),
        ] {
            let cursor = hand_made(serde_json::json!({
                "v": 1, "of": "item_history", "tenant": "demo", "item": ITEM, "after": after
            }));
            assert!(
                reason(decode(&demo, ITEM, &cursor)).contains("position"),
                "{after}"
            );
        }
    }
}
