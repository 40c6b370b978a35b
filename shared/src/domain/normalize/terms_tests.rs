//! The row rules with commercial terms: read on every format's rows, the price as the first
//! break, the packaging as the item's, and terms taking part in the ambiguity check.

use super::*;

fn page(offers: &[String]) -> Vec<u8> {
    format!(
        r#"{{"export_id":"EXP-9","page":1,"offers":[{}]}}"#,
        offers.join(",")
    )
    .into_bytes()
}

/// A distributor's row: three breaks, MOQ 1,000, multiple 500, a reel of 3,000.
fn row(extra: &str) -> String {
    format!(
        r#"{{"sku":"LM358DR","quantity":12000,"unit":"each","currency":"USD",
        "observed_at":"2026-11-29T08:00:00Z","price_breaks":[
        {{"min_quantity":1000,"unit_price":"0.412"}},{{"min_quantity":2500,"unit_price":"0.398"}},
        {{"min_quantity":10000,"unit_price":"0.35"}}],"minimum_order_quantity":1000,
        "order_multiple":500,"packaging":"reel","pack_size":3000,"lead_time_days":14,
        "valid_until":"2026-12-31T23:59:59Z"{extra}}}"#
    )
}

fn rows(offers: &[String]) -> Result<Vec<NormalizedRow>, Rejection> {
    normalize(
        PayloadFormat::AcmeExportV1,
        CanonicalizationRule::JsonV1,
        &page(offers),
    )
}

#[test]
fn a_row_with_breaks_and_no_price_is_priced_at_its_first_break() {
    let rows = rows(&[row("")]).unwrap();
    let row = &rows[0];
    assert_eq!(row.price.as_str(), "0.412");
    assert_eq!(row.terms.price_breaks.len(), 3);
    assert_eq!(
        row.item.key(),
        "LM358DR~reel~new",
        "packaging is the item's"
    );
    assert_eq!(
        row.quantity_basis, "each",
        "the quantity still counts units"
    );
    assert_eq!(row.terms.pack_size.as_ref().unwrap().as_str(), "3000");
}

#[test]
fn a_price_beside_breaks_must_be_the_first_break() {
    assert!(
        rows(&[row(r#","price":"0.4120""#)]).is_ok(),
        "equal by value"
    );
    let refused = rows(&[row(r#","price":"0.40""#)]).unwrap_err();
    assert_eq!(refused.code, RejectCode::InvalidPrice);
    assert!(
        refused
            .message
            .contains("price 0.40 is not the first price break's unit price 0.412"),
        "{}",
        refused.message
    );
}

#[test]
fn a_row_without_price_or_breaks_is_refused_as_before() {
    let refused = rows(&[row("").replace(
        r#""price_breaks":[
        {"min_quantity":1000,"unit_price":"0.412"},{"min_quantity":2500,"unit_price":"0.398"},
        {"min_quantity":10000,"unit_price":"0.35"}],"#,
        "",
    )])
    .unwrap_err();
    assert_eq!(refused.code, RejectCode::InvalidPrice);
    assert!(
        refused.message.contains("price is missing"),
        "{}",
        refused.message
    );
}

#[test]
fn bad_terms_refuse_the_row_naming_each() {
    let refused = rows(&[row(r#","incoterms":"FOBB","tax_included":"no""#)]).unwrap_err();
    assert_eq!(refused.code, RejectCode::InvalidRow);
    assert!(
        refused.message.starts_with("row 0: incoterms \"FOBB\""),
        "{}",
        refused.message
    );
    assert!(refused
        .message
        .contains("; tax_included must be true or false"));
}

#[test]
fn two_rows_of_one_item_and_instant_with_other_terms_are_ambiguous() {
    let other = row("").replace(r#""lead_time_days":14"#, r#""lead_time_days":21"#);
    let refused = rows(&[row(""), other]).unwrap_err();
    assert_eq!(refused.code, RejectCode::AmbiguousItem);
    assert!(
        refused.message.contains("commercial terms"),
        "{}",
        refused.message
    );
    assert_eq!(
        rows(&[row(""), row("")]).unwrap().len(),
        2,
        "an exact repeat is kept"
    );
}
