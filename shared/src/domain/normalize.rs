//! Supplier payloads -> normalized rows. Every row must be valid or the whole delivery is refused:
//! a page is evidence as a unit, and storing part of it would misstate what the source said. The
//! refusal names every bad row, not the first one only. (A connector definition may instead keep
//! the valid rows and set the bad ones aside: `mapped`.)

use crate::domain::canonical_json::{self, Node};
use crate::domain::connector::PayloadFormat;
use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use crate::domain::hashing::sha256_hex;
use crate::domain::item::CanonicalItem;
use crate::domain::money::Price;
use crate::domain::quantity::Quantity;
use crate::domain::reject::{RejectCode, Rejection};
use crate::domain::terms::Terms;
use crate::domain::timestamp::Timestamp;
use foldhash::fast::RandomState;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

mod mapped;
mod members;
mod reading;
mod row;
#[cfg(test)]
mod row_tests;
#[cfg(test)]
mod terms_tests;
pub use mapped::{normalize_mapped, Normalized, RefusedRow};
pub use members::{MappedRow, Member, RowView, MEMBER_COUNT};
pub use reading::{Read, Reading};
pub use row::RowRules;
use row::{normalize_row, TimeSeen, LEGACY_RULES};

/// One source claim about one item, before it gets its delivery-scoped identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedRow {
    /// The source's own record name (the sku as sent).
    pub source_record: String,
    pub item: CanonicalItem,
    /// How much the source claims, in its unit's declared decimal places.
    pub quantity: Quantity,
    /// What the quantity counts (the source's unit).
    pub quantity_basis: String,
    /// The decimal places the unit allows (its connector's declaration; 0: whole units).
    pub quantity_places: u8,
    pub price: Price,
    pub currency: String,
    pub observed_at: Timestamp,
    /// The commercial terms the row stated (none for most feeds).
    pub terms: Terms,
    /// Canonical JSON bytes of the row, the order of the rows under the unordered rule. A CSV
    /// or mapped text row (whose bytes would be written only for this) leaves it empty under
    /// the other rules; a JSON row has them from its parse.
    pub canonical: Vec<u8>,
}

/// Upper bound on rows in one delivery, so that a mismatch's quarantine entry (which lists the
/// stored observation ids, ~31 bytes each) stays far below DynamoDB's 400 KB item limit, and a
/// staged delivery stays within 52 chunk transactions.
pub const MAX_ROWS: usize = 5_000;

/// The version of the rules that read a payload into rows (this module and the declarative
/// mapping), recorded on every observation with its connector's definition version
/// (`Derivation`). It changes when a payload read today would give other rows than before.
pub const NORMALIZER_VERSION: &str = "normalize-v1";

/// Parses and validates `body` as `format`; rows come back in canonical index order for `rule`.
pub fn normalize(
    format: PayloadFormat,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<Vec<NormalizedRow>, Rejection> {
    if format == PayloadFormat::CsvOffersV1 {
        return normalize_csv(rule, body);
    }
    Ok(read_json_page(format, rule, body)?.0)
}

/// `normalize` and the payload's fingerprint under `rule`, from one parse of the body: the
/// fingerprint is the one `Fingerprint::compute` gives (a property test holds them together).
pub fn normalize_and_fingerprint(
    format: PayloadFormat,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<(Vec<NormalizedRow>, Fingerprint), Rejection> {
    if format == PayloadFormat::CsvOffersV1 {
        let rows = normalize_csv(rule, body)?;
        let fingerprint = Fingerprint::compute(rule, body, format.rows_path()).map_err(|e| {
            Rejection::new(
                RejectCode::InvalidPayload,
                format!("body cannot be canonicalized: {e}"),
            )
        })?;
        return Ok((rows, fingerprint));
    }
    let (rows, document) = read_json_page(format, rule, body)?;
    let sha256_hex = match rule {
        CanonicalizationRule::BytesV1 => sha256_hex(body),
        CanonicalizationRule::JsonV1 | CanonicalizationRule::JsonUnorderedRowsV1 => {
            sha256_hex(&document)
        }
    };
    Ok((rows, Fingerprint { rule, sha256_hex }))
}

/// The rows of a JSON page and the page's canonical bytes under `rule` (`json-v1` for
/// `bytes-v1`), from one strict parse.
fn read_json_page(
    format: PayloadFormat,
    rule: CanonicalizationRule,
    body: &[u8],
) -> Result<(Vec<NormalizedRow>, Vec<u8>), Rejection> {
    let root = canonical_json::parse_node(body).map_err(|e| {
        Rejection::new(RejectCode::InvalidPayload, format!("body is not JSON: {e}"))
    })?;
    if !root.is_object() {
        return Err(Rejection::new(
            RejectCode::InvalidPayload,
            "body must be a JSON object",
        ));
    }
    let (rows, default_observed_at) = match format {
        PayloadFormat::AcmeExportV1 => (acme_export_rows(&root)?, None),
        PayloadFormat::CloudEventsOffersV1 => cloudevents_rows(&root)?,
        PayloadFormat::CsvOffersV1 => unreachable_format()?,
        PayloadFormat::Defined => Err(Rejection::new(
            RejectCode::InvalidPayload,
            "a defined format is read through its connector definition",
        ))?,
    };
    if rows.len() > MAX_ROWS {
        return Err(Rejection::new(
            RejectCode::PayloadTooLarge,
            format!(
                "{} rows exceed the limit of {MAX_ROWS} per delivery",
                rows.len()
            ),
        ));
    }
    let page =
        canonical_json::canonical_page(&root, format.rows_path(), rule.orders_rows_canonically())
            .map_err(|e| {
            Rejection::new(
                RejectCode::InvalidPayload,
                format!("body is not canonicalizable JSON: {e}"),
            )
        })?;
    let mut seen = TimeSeen::default();
    let mut normalized = every_row(rows.iter().zip(page.rows).enumerate().map(
        |(i, (row, bytes))| {
            normalize_row(
                &format!("row {i}"),
                row,
                default_observed_at,
                bytes,
                &LEGACY_RULES,
                &mut seen,
            )
        },
    ))?;
    refuse_ambiguous(&normalized)?;
    if rule.orders_rows_canonically() {
        // Stable sort: identical rows keep their relative order, and are identical anyway.
        normalized.sort_by(|a, b| a.canonical.cmp(&b.canonical));
    }
    Ok((normalized, page.document))
}

/// The callers send CSV to `normalize_csv`; should one not, the body is refused for what it is.
fn unreachable_format<T>() -> Result<T, Rejection> {
    Err(Rejection::new(
        RejectCode::InvalidPayload,
        "a CSV payload is not a JSON page",
    ))
}

/// CSV rows become the same row objects as JSON rows (numbers for integer quantities, strings
/// otherwise), so one set of row rules applies to every format.
fn normalize_csv(rule: CanonicalizationRule, body: &[u8]) -> Result<Vec<NormalizedRow>, Rejection> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(body);
    let headers = reader
        .headers()
        .map_err(|e| Rejection::new(RejectCode::InvalidPayload, format!("CSV header: {e}")))?
        .clone();
    let mut results = Vec::new();
    let mut seen = TimeSeen::default();
    for (index, record) in reader.records().enumerate() {
        let record = record.map_err(|e| {
            Rejection::new(RejectCode::InvalidPayload, format!("CSV row {index}: {e}"))
        })?;
        if index >= MAX_ROWS {
            return Err(Rejection::new(
                RejectCode::PayloadTooLarge,
                format!("more than {MAX_ROWS} rows"),
            ));
        }
        // Last header wins, as before: a repeated column name is the file's own ambiguity.
        let mut fields = BTreeMap::new();
        for (name, value) in headers.iter().zip(record.iter()) {
            if value.is_empty() {
                continue;
            }
            let value = match (name, value.parse::<i64>()) {
                ("quantity", Ok(n)) => Node::Number(Cow::Owned(n.to_string())),
                _ => Node::String(Cow::Owned(value.to_owned())),
            };
            fields.insert(name.to_owned(), value);
        }
        let row = Node::Object(
            fields
                .into_iter()
                .map(|(name, value)| (Cow::Owned(name), value))
                .collect(),
        );
        let canonical = match rule.orders_rows_canonically() {
            true => canonical_json::canonical_bytes(&row),
            false => Vec::new(),
        };
        results.push(normalize_row(
            &format!("row {index}"),
            &row,
            None,
            canonical,
            &LEGACY_RULES,
            &mut seen,
        ));
    }
    let mut normalized = every_row(results.into_iter())?;
    refuse_ambiguous(&normalized)?;
    if rule.orders_rows_canonically() {
        normalized.sort_by(|a, b| a.canonical.cmp(&b.canonical));
    }
    Ok(normalized)
}

/// Every row's offer, or the delivery's refusal naming every bad row, not the first only.
fn every_row(
    results: impl Iterator<Item = Result<NormalizedRow, Rejection>>,
) -> Result<Vec<NormalizedRow>, Rejection> {
    let mut rows = Vec::new();
    let mut refused = Vec::new();
    for result in results {
        match result {
            Ok(row) => rows.push(row),
            Err(rejection) => refused.push(rejection),
        }
    }
    match refusal_of(refused) {
        None => Ok(rows),
        Some(rejection) => Err(rejection),
    }
}

/// One refusal for a delivery's bad rows: a single row's own (`row 3: quantity ...`), or
/// `N rows refused: row 0: ...; row 3: ...` with the rows' code when they share one and
/// `invalid_row` otherwise. The message is capped (`Rejection::new`); the rows' own list is
/// where a caller needs every one in full.
pub(crate) fn refusal_of(mut refused: Vec<Rejection>) -> Option<Rejection> {
    let first = refused.first()?.code;
    if refused.len() == 1 {
        return refused.pop();
    }
    let code = match refused.iter().all(|r| r.code == first) {
        true => first,
        false => RejectCode::InvalidRow,
    };
    let listed: Vec<&str> = refused.iter().map(|r| r.message.as_str()).collect();
    Some(Rejection::new(
        code,
        format!("{} rows refused: {}", refused.len(), listed.join("; ")),
    ))
}

/// Refuses a delivery in which two rows (`rows` in payload order) claim different things
/// (quantity, unit, price as written, currency, commercial terms) about one canonical item at one instant: the
/// projection could serve either, so neither is stored (`ambiguous_item`, naming both rows).
/// One item at several instants is a history, and a row repeated exactly claims one thing:
/// both are stored as sent.
fn refuse_ambiguous(rows: &[NormalizedRow]) -> Result<(), Rejection> {
    // Keyed by the rows' own items (borrowed): no key is built per row.
    // At most `MAX_ROWS` keys, seeded per process: a supplier cannot make the map slow.
    let mut first: HashMap<(&CanonicalItem, Timestamp), (usize, &NormalizedRow), RandomState> =
        HashMap::with_capacity_and_hasher(rows.len(), RandomState::default());
    for (index, row) in rows.iter().enumerate() {
        match first.entry((&row.item, row.observed_at)) {
            Entry::Vacant(slot) => {
                slot.insert((index, row));
            }
            Entry::Occupied(seen) if !same_claim(seen.get().1, row) => {
                let (earlier, claim) = *seen.get();
                return Err(Rejection::new(
                    RejectCode::AmbiguousItem,
                    format!(
                        "rows {earlier} and {index} both describe item {} observed at {} but \
                         claim different offers ({}); refused as ambiguous",
                        row.item.key(),
                        row.observed_at.to_rfc3339(),
                        describe_difference(claim, row)
                    ),
                ));
            }
            Entry::Occupied(_) => {}
        }
    }
    Ok(())
}

fn same_claim(a: &NormalizedRow, b: &NormalizedRow) -> bool {
    (
        &a.quantity,
        &a.quantity_basis,
        &a.price,
        &a.currency,
        &a.terms,
    ) == (
        &b.quantity,
        &b.quantity_basis,
        &b.price,
        &b.currency,
        &b.terms,
    )
}

/// `quantity 5 vs 7, price 10.00 vs 11.00`: the fields that differ (each short: a number, a
/// validated price of at most 30 characters, a currency code).
fn describe_difference(a: &NormalizedRow, b: &NormalizedRow) -> String {
    let mut parts = Vec::new();
    if a.quantity != b.quantity {
        parts.push(format!("quantity {} vs {}", a.quantity, b.quantity));
    }
    if a.price != b.price {
        parts.push(format!(
            "price {} vs {}",
            a.price.as_str(),
            b.price.as_str()
        ));
    }
    if a.currency != b.currency {
        parts.push(format!("currency {} vs {}", a.currency, b.currency));
    }
    if a.quantity_basis != b.quantity_basis {
        parts.push(format!("unit {} vs {}", a.quantity_basis, b.quantity_basis));
    }
    if a.terms != b.terms {
        parts.push("commercial terms".into());
    }
    parts.join(", ")
}

fn acme_export_rows<'n, 'a>(root: &'n Node<'a>) -> Result<&'n [Node<'a>], Rejection> {
    let export_id = root
        .get("export_id")
        .and_then(Node::as_str)
        .unwrap_or_default();
    if export_id.is_empty() {
        return Err(Rejection::new(
            RejectCode::InvalidPayload,
            "export page lacks a string export_id",
        ));
    }
    if root.get("page").and_then(whole_number).is_none() {
        return Err(Rejection::new(
            RejectCode::InvalidPayload,
            "export page lacks a whole-number page",
        ));
    }
    root.get("offers").and_then(Node::as_array).ok_or_else(|| {
        Rejection::new(
            RejectCode::InvalidPayload,
            "export page lacks an offers array",
        )
    })
}

fn cloudevents_rows<'n, 'a>(
    root: &'n Node<'a>,
) -> Result<(&'n [Node<'a>], Option<Timestamp>), Rejection> {
    if root.get("specversion").and_then(Node::as_str) != Some("1.0") {
        return Err(Rejection::new(
            RejectCode::InvalidPayload,
            "CloudEvent must have specversion \"1.0\"",
        ));
    }
    for attribute in ["id", "source", "type"] {
        if root
            .get(attribute)
            .and_then(Node::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(Rejection::new(
                RejectCode::InvalidPayload,
                format!("CloudEvent lacks {attribute}"),
            ));
        }
    }
    let time = match root.get("time") {
        None => None,
        Some(value) => Some(
            value
                .as_str()
                .ok_or_else(|| "not a string".to_owned())
                .and_then(|t| Timestamp::parse(t).map_err(|e| e.to_string()))
                .map_err(|why| {
                    Rejection::new(
                        RejectCode::InvalidPayload,
                        format!("CloudEvent time: {why}"),
                    )
                })?,
        ),
    };
    let rows = root
        .get("data")
        .and_then(|d| d.get("offers"))
        .and_then(Node::as_array)
        .ok_or_else(|| {
            Rejection::new(
                RejectCode::InvalidPayload,
                "CloudEvent data lacks an offers array",
            )
        })?;
    Ok((rows, time))
}

/// The largest quantity accepted (docs/adr/0012-supported-ranges-of-stored-values.md).
pub use crate::domain::quantity::MAX_QUANTITY;

/// A number written as digits only, as `u64`.
fn whole_number(value: &Node<'_>) -> Option<u64> {
    match value {
        Node::Number(literal) if literal.bytes().all(|b| b.is_ascii_digit()) => {
            literal.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(offers: &str) -> Vec<u8> {
        format!(r#"{{"export_id":"EXP-8821","page":2,"page_count":3,"offers":[{offers}]}}"#)
            .into_bytes()
    }

    const ROW: &str = r#"{"sku":"AX-440-R2","quantity":6,"unit":"each","price":"820.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#;

    fn code_of(body: &[u8]) -> RejectCode {
        normalize(
            PayloadFormat::AcmeExportV1,
            CanonicalizationRule::JsonV1,
            body,
        )
        .unwrap_err()
        .code
    }

    #[test]
    fn the_essay_row_normalizes() {
        let rows = normalize(
            PayloadFormat::AcmeExportV1,
            CanonicalizationRule::JsonV1,
            &page(ROW),
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.item.key(), "AX-440-R2~each~new");
        assert_eq!(row.quantity, 6);
        assert_eq!(row.price.as_str(), "820.00");
        assert_eq!(row.currency, "EUR");
        assert_eq!(row.observed_at.to_rfc3339(), "2026-11-29T08:00:00Z");
    }

    #[test]
    fn each_bad_row_has_its_own_code() {
        assert_eq!(
            code_of(&page(&ROW.replace("\"quantity\":6", "\"quantity\":-1"))),
            RejectCode::InvalidQuantity
        );
        assert_eq!(
            code_of(&page(&ROW.replace("\"quantity\":6", "\"quantity\":6.5"))),
            RejectCode::InvalidQuantity
        );
        assert_eq!(
            code_of(&page(&ROW.replace("\"820.00\"", "\"8,20\""))),
            RejectCode::InvalidPrice
        );
        assert_eq!(
            code_of(&page(&ROW.replace("\"820.00\"", "820.0"))),
            RejectCode::InvalidPrice
        );
        assert_eq!(
            code_of(&page(&ROW.replace("EUR", "EUX"))),
            RejectCode::UnknownCurrency
        );
        assert_eq!(
            code_of(&page(&ROW.replace("\"sku\":\"AX-440-R2\",", ""))),
            RejectCode::InvalidRow
        );
        assert_eq!(code_of(b"not json"), RejectCode::InvalidPayload);
        assert_eq!(code_of(br#"{"offers":[]}"#), RejectCode::InvalidPayload);
    }

    #[test]
    fn a_refusal_names_every_bad_row_not_the_first_only() {
        let refused = |rows: &[String]| {
            normalize(
                PayloadFormat::AcmeExportV1,
                CanonicalizationRule::JsonV1,
                &page(&rows.join(",")),
            )
            .unwrap_err()
        };
        let negative = ROW.replace("\"quantity\":6", "\"quantity\":-1");
        let fraction = ROW.replace("\"quantity\":6", "\"quantity\":6.5");
        let currency = ROW.replace("EUR", "EUX");
        // One bad row: its own message, as the first release gave it.
        let one = refused(&[ROW.to_owned(), negative.clone()]);
        assert_eq!(one.message, "row 1: quantity -1 is negative");
        // Several: every one, with their code when they share it.
        let two = refused(&[negative.clone(), ROW.to_owned(), fraction]);
        assert_eq!(two.code, RejectCode::InvalidQuantity);
        assert_eq!(
            two.message,
            "2 rows refused: row 0: quantity -1 is negative; row 2: quantity 6.5 is not a \
             whole number (its unit counts whole units unless the connector declares decimal \
             places for it)"
        );
        let mixed = refused(&[currency, negative]);
        assert_eq!(mixed.code, RejectCode::InvalidRow);
        assert!(
            mixed.message.starts_with("2 rows refused: row 0: currency"),
            "{}",
            mixed.message
        );
        let csv = normalize(
            PayloadFormat::CsvOffersV1,
            CanonicalizationRule::BytesV1,
            b"sku,quantity,unit,price,currency,observed_at\nA,x,each,1.00,EUR,2026-11-29T08:00:00Z\nB,1,each,1.00,EUR,2026-11-29T08:00:00Z\nC,2,each,1.0.0,EUR,2026-11-29T08:00:00Z\n",
        )
        .unwrap_err();
        assert!(
            csv.message.starts_with("2 rows refused: row 0: quantity"),
            "{}",
            csv.message
        );
        assert!(csv.message.contains("; row 2: price"), "{}", csv.message);
    }

    #[test]
    fn cloudevents_rows_fall_back_to_the_event_time() {
        let body = br#"{"specversion":"1.0","id":"evt-1","source":"urn:acme:events","type":"offer.snapshot","time":"2026-11-29T08:00:00Z","data":{"offers":[{"sku":"AX-440-R2","quantity":6,"unit":"each","price":"820.00","currency":"EUR"}]}}"#;
        let rows = normalize(
            PayloadFormat::CloudEventsOffersV1,
            CanonicalizationRule::JsonV1,
            body,
        )
        .unwrap();
        assert_eq!(rows[0].observed_at.to_rfc3339(), "2026-11-29T08:00:00Z");
    }

    #[test]
    fn csv_rows_follow_the_same_rules() {
        let csv = b"sku,quantity,unit,price,currency,observed_at\nAX-440-R2,6,each,820.00,EUR,2026-11-29T08:00:00Z\n";
        let rows = normalize(
            PayloadFormat::CsvOffersV1,
            CanonicalizationRule::BytesV1,
            csv,
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].quantity.whole(), rows[0].price.as_str()),
            (Some(6), "820.00")
        );
        let negative = b"sku,quantity,unit,price,currency,observed_at\nAX-1,-2,each,1.00,EUR,2026-11-29T08:00:00Z\n";
        let err = normalize(
            PayloadFormat::CsvOffersV1,
            CanonicalizationRule::BytesV1,
            negative,
        )
        .unwrap_err();
        assert_eq!(err.code, RejectCode::InvalidQuantity);
    }

    #[test]
    fn two_different_claims_about_one_item_at_one_instant_are_ambiguous() {
        let other = ROW.replace("AX-440-R2", "BX-1");
        let more = ROW.replace("\"quantity\":6", "\"quantity\":7");
        for rule in [
            CanonicalizationRule::JsonV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
        ] {
            let err = normalize(
                PayloadFormat::AcmeExportV1,
                rule,
                &page(&format!("{more},{other},{ROW}")),
            )
            .unwrap_err();
            assert_eq!(err.code, RejectCode::AmbiguousItem);
            // Rows as the payload numbers them, whatever the rule's order.
            assert_eq!(
                err.message,
                "rows 0 and 2 both describe item AX-440-R2~each~new observed at \
                 2026-11-29T08:00:00Z but claim different offers (quantity 7 vs 6); refused as \
                 ambiguous"
            );
        }
        let pricier = ROW.replace("820.00", "820.0");
        assert_eq!(
            code_of(&page(&format!("{ROW},{pricier}"))),
            RejectCode::AmbiguousItem,
            "a price written differently is another claim"
        );
        let csv = b"sku,quantity,unit,price,currency,observed_at\nAX-1,2,each,1.00,EUR,2026-11-29T08:00:00Z\nax-1,2,each,1.00,USD,2026-11-29T08:00:00Z\n";
        let err = normalize(
            PayloadFormat::CsvOffersV1,
            CanonicalizationRule::BytesV1,
            csv,
        )
        .unwrap_err();
        assert_eq!(err.code, RejectCode::AmbiguousItem);
        assert!(
            err.message.contains("currency EUR vs USD"),
            "{}",
            err.message
        );
    }

    #[test]
    fn repeated_rows_and_one_item_at_several_instants_are_not_ambiguous() {
        let later = ROW
            .replace("08:00:00Z", "08:00:01Z")
            .replace("\"quantity\":6", "\"quantity\":7");
        let reel = ROW
            .replace("\"each\"", "\"reel\"")
            .replace("\"quantity\":6", "\"quantity\":7");
        for rows in [
            format!("{ROW},{ROW}"),
            format!("{ROW},{later}"),
            format!("{ROW},{reel}"),
        ] {
            let normalized = normalize(
                PayloadFormat::AcmeExportV1,
                CanonicalizationRule::JsonV1,
                &page(&rows),
            )
            .unwrap();
            assert_eq!(normalized.len(), 2, "{rows}");
        }
    }

    #[test]
    fn unordered_rule_orders_rows_by_canonical_bytes() {
        let a = ROW;
        let b = ROW.replace("AX-440-R2", "BX-1");
        let forward = normalize(
            PayloadFormat::AcmeExportV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
            &page(&format!("{a},{b}")),
        )
        .unwrap();
        let reverse = normalize(
            PayloadFormat::AcmeExportV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
            &page(&format!("{b},{a}")),
        )
        .unwrap();
        assert_eq!(forward, reverse);
        let literal = normalize(
            PayloadFormat::AcmeExportV1,
            CanonicalizationRule::JsonV1,
            &page(&format!("{b},{a}")),
        )
        .unwrap();
        assert_eq!(literal[0].source_record, "BX-1");
    }
}
