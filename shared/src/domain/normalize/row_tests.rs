//! The row rules: the manufacturer's part number beside the supplier's SKU, and decimal
//! quantities in the places a connector declares for a unit.

use super::*;

const ROW: &str = r#"{"sku":"TI-LM358-R","quantity":2500,"unit":"each","price":"0.41","currency":"USD","observed_at":"2026-11-29T08:00:00Z"}"#;

/// `ROW` with `members` (a JSON object's members) merged over it, through `rules`.
fn read(members: &str, rules: &RowRules) -> Result<NormalizedRow, Rejection> {
    let mut row: serde_json::Map<String, serde_json::Value> = serde_json::from_str(ROW).unwrap();
    let extra: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&format!("{{{members}}}")).unwrap();
    row.extend(extra);
    let text = serde_json::to_string(&row).unwrap();
    let node = canonical_json::parse_node(text.as_bytes()).unwrap();
    normalize_row(
        "row 0",
        &node,
        None,
        Vec::new(),
        rules,
        &mut TimeSeen::default(),
    )
}

fn metres(places: u8) -> RowRules {
    RowRules {
        unit_decimal_places: [("m".to_owned(), places)].into(),
    }
}

#[test]
fn the_manufacturers_part_number_is_the_item_and_the_sku_stays_the_source_record() {
    let row = read(
        r#""mpn":"lm358dr/nopb","manufacturer":"Texas Instruments""#,
        &LEGACY_RULES,
    )
    .unwrap();
    assert_eq!(row.source_record, "TI-LM358-R");
    assert_eq!(row.item.key(), "LM358DR/NOPB~mTEXAS INSTRUMENTS~each~new");
    let without = read("", &LEGACY_RULES).unwrap();
    assert_eq!(
        without.item.key(),
        "TI-LM358-R~each~new",
        "the sku, as before"
    );
    let refused = read(r#""manufacturer":"TI\u200b""#, &LEGACY_RULES).unwrap_err();
    assert_eq!(refused.code, RejectCode::InvalidRow);
    assert!(
        refused
            .message
            .starts_with("row 0: invalid item manufacturer"),
        "{}",
        refused.message
    );
}

#[test]
fn a_decimal_quantity_is_read_in_the_places_its_unit_allows() {
    let cable = read(r#""unit":"M","quantity":2.50"#, &metres(2)).unwrap();
    assert_eq!(cable.quantity.as_str(), "2.5");
    assert_eq!(cable.quantity_basis, "m");
    let too_fine = read(r#""unit":"m","quantity":2.505"#, &metres(2)).unwrap_err();
    assert_eq!(too_fine.code, RejectCode::InvalidQuantity);
    assert_eq!(
        too_fine.message,
        "row 0: quantity 2.505 has 3 decimal places; its unit allows 2"
    );
    // Another unit of the same source still counts whole units.
    let each = read(r#""quantity":2.5"#, &metres(2)).unwrap_err();
    assert!(
        each.message.contains("quantity 2.5 is not a whole number"),
        "{}",
        each.message
    );
    // A whole quantity written with a zero fraction is the whole quantity.
    assert_eq!(
        read(r#""quantity":6.0"#, &LEGACY_RULES).unwrap().quantity,
        6
    );
}

#[test]
fn the_quantity_terms_follow_the_units_places_and_every_one_is_named() {
    let row = read(
        r#""unit":"m","quantity":100.5,"minimum_order_quantity":"0.5","order_multiple":"0.25",
        "price_breaks":[{"min_quantity":"0.5","unit_price":"0.41"},{"min_quantity":"10","unit_price":"0.39"}]"#,
        &metres(2),
    )
    .unwrap();
    assert_eq!(row.quantity.as_str(), "100.5");
    let refused = read(
        r#""minimum_order_quantity":"0.5","pack_size":"2.5",
        "price_breaks":[{"min_quantity":"1","unit_price":"0.41"},{"min_quantity":"2.5","unit_price":"0.39"}]"#,
        &LEGACY_RULES,
    )
    .unwrap_err();
    assert_eq!(refused.code, RejectCode::InvalidQuantity);
    for named in [
        "minimum_order_quantity 0.5",
        "pack_size 2.5",
        "price_breaks[1].min_quantity 2.5",
    ] {
        assert!(
            refused.message.contains(named),
            "{named}: {}",
            refused.message
        );
    }
}

#[test]
fn a_time_seen_before_reads_as_a_fresh_parse_would() {
    let mut seen = TimeSeen::default();
    let texts = [
        "2026-11-29T08:00:00Z",
        "2026-11-29T08:00:00Z",
        "2026-11-29T09:00:00+01:00",
        "not a time",
        "2026-11-29T08:00:00Z",
        "9999-12-31T23:59:59-01:00",
        "2026-11-29T09:00:00+01:00",
    ];
    for text in texts {
        assert_eq!(seen.parse(text), Timestamp::parse(text), "{text}");
    }
}
