use super::*;
use crate::domain::canonical_json::parse_node;
use proptest::prelude::*;

fn read(row: &str) -> Result<Terms, Vec<TermProblem>> {
    Terms::read(&parse_node(row.as_bytes()).unwrap())
}

fn messages(row: &str) -> Vec<String> {
    read(row).unwrap_err().into_iter().map(|(_, m)| m).collect()
}

fn decimal(text: &str) -> Decimal {
    Decimal::parse(text).unwrap()
}

#[test]
fn every_term_of_a_distributor_row_is_read_exactly() {
    let terms = read(
        r#"{"price_breaks":[{"min_quantity":1000,"unit_price":"0.4120"},
            {"min_quantity":"2500","unit_price":"0.398"},{"min_quantity":10000,"unit_price":"0.35"}],
            "price_basis":"1","minimum_order_quantity":1000,"order_multiple":"500",
            "lead_time_days":14,"lead_time":" 14 days ","packaging":"reel","pack_size":3000,
            "valid_from":"2026-12-01T00:00:00Z","valid_until":"2026-12-31T23:59:59+01:00",
            "incoterms":"FCA","tax_included":false}"#,
    )
    .unwrap();
    let breaks: Vec<(&str, &str)> = terms
        .price_breaks
        .iter()
        .map(|b| (b.min_quantity.as_str(), b.unit_price.as_str()))
        .collect();
    assert_eq!(
        breaks,
        [("1000", "0.4120"), ("2500", "0.398"), ("10000", "0.35")]
    );
    assert_eq!(terms.minimum_order_quantity, Some(decimal("1000")));
    assert_eq!(terms.order_multiple, Some(decimal("500")));
    assert_eq!(terms.pack_size, Some(decimal("3000")));
    assert_eq!(terms.price_basis, Some(decimal("1")));
    assert_eq!(terms.lead_time_days, Some(14));
    assert_eq!(terms.lead_time.as_deref(), Some("14 days"));
    assert_eq!(terms.packaging.as_deref(), Some("reel"));
    assert_eq!(terms.incoterms.as_deref(), Some("FCA"));
    assert_eq!(terms.tax_included, Some(false));
    assert_eq!(
        terms.valid_until.unwrap().to_rfc3339(),
        "2026-12-31T22:59:59Z"
    );
    assert!(!terms.is_empty());
}

#[test]
fn a_row_without_terms_has_none() {
    let terms = read(r#"{"sku":"AX-440","price":"1.00","lead_time":"  "}"#).unwrap();
    assert!(terms.is_empty(), "{terms:?}");
}

#[test]
fn every_bad_term_of_a_row_is_named() {
    let problems = messages(
        r#"{"price_breaks":[{"min_quantity":100,"unit_price":"1.00"},{"min_quantity":"0","unit_price":0.9}],
            "minimum_order_quantity":"-5","order_multiple":1e3,"lead_time_days":4000,
            "valid_from":"2026-12-31T00:00:00Z","valid_until":"2026-12-01T00:00:00Z",
            "incoterms":"fob","tax_included":"yes","packaging":7}"#,
    );
    let expected = [
        "price_breaks[1]:",
        "minimum_order_quantity \"-5\"",
        "order_multiple \"1e3\"",
        "lead_time_days \"4000\"",
        "packaging must be a string",
        "incoterms \"fob\"",
        "tax_included must be true or false",
        "valid_until is earlier than valid_from",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, start) in problems.iter().zip(expected) {
        assert!(problem.contains(start), "{problem:?} lacks {start:?}");
    }
}

#[test]
fn breaks_must_rise_and_be_few_and_whole() {
    let falling = messages(
        r#"{"price_breaks":[{"min_quantity":"10","unit_price":"1"},{"min_quantity":"10.0","unit_price":"0.9"}]}"#,
    );
    assert!(
        falling[0].contains("price_breaks[1]: min_quantity 10.0 does not rise"),
        "{falling:?}"
    );
    assert!(messages(r#"{"price_breaks":[]}"#)[0].contains("1 to 50 breaks"));
    let many: Vec<String> = (1..=51)
        .map(|n| format!(r#"{{"min_quantity":{n},"unit_price":"1"}}"#))
        .collect();
    assert!(messages(&format!(r#"{{"price_breaks":[{}]}}"#, many.join(",")))[0].contains("not 51"));
    assert!(
        messages(r#"{"price_breaks":[{"unit_price":"1"}]}"#)[0].contains("min_quantity is missing")
    );
    assert!(messages(r#"{"price_breaks":[7]}"#)[0].contains("must be an object"));
}

#[test]
fn the_unit_price_of_a_quantity_is_the_last_break_it_reaches() {
    let terms = read(
        r#"{"price_breaks":[{"min_quantity":"1000","unit_price":"0.412"},
            {"min_quantity":"2500","unit_price":"0.398"},{"min_quantity":"10000","unit_price":"0.35"}]}"#,
    )
    .unwrap();
    let at = |q: &str| terms.unit_price_for(&decimal(q)).map(Price::as_str);
    assert_eq!(at("999.99"), None);
    assert_eq!(at("1000"), Some("0.412"));
    assert_eq!(at("2499"), Some("0.412"));
    assert_eq!(at("2500.000"), Some("0.398"));
    assert_eq!(at("9999.5"), Some("0.398"));
    assert_eq!(at("10000"), Some("0.35"));
    assert_eq!(at("123456789"), Some("0.35"));
}

#[test]
fn decimals_compare_by_value_whatever_their_trailing_zeros() {
    let pairs = [
        ("0", "0.0", Ordering::Equal),
        ("2.5", "2.50", Ordering::Equal),
        ("10", "9.999", Ordering::Greater),
        ("0.05", "0.5", Ordering::Less),
        ("100", "99", Ordering::Greater),
        ("1.10", "1.1", Ordering::Equal),
    ];
    for (a, b, expected) in pairs {
        assert_eq!(compare_decimals(a, b), expected, "{a} vs {b}");
    }
}

#[test]
fn stored_terms_read_back_as_they_were_and_refuse_what_read_refuses() {
    let terms = read(
        r#"{"price_breaks":[{"min_quantity":"1","unit_price":"0.10"}],"pack_size":"2.5",
            "valid_until":"9999-12-31T23:59:59Z","tax_included":true}"#,
    )
    .unwrap();
    let json = serde_json::to_string(&terms).unwrap();
    assert_eq!(serde_json::from_str::<Terms>(&json).unwrap(), terms);
    assert_eq!(serde_json::to_string(&Terms::default()).unwrap(), "{}");
    assert!(serde_json::from_str::<Terms>(r#"{"pack_size":"1e3"}"#).is_err());
}

proptest! {
    /// The value order agrees with exact rational arithmetic: scaled to 18 fraction digits,
    /// both are integers that `u128` holds.
    #[test]
    fn value_order_is_the_order_of_the_numbers(a in decimal_text(), b in decimal_text()) {
        let scaled = |t: &str| {
            let (int, frac) = t.split_once('.').unwrap_or((t, ""));
            let digits = format!("{int}{frac:0<18}");
            digits.parse::<u128>().unwrap()
        };
        prop_assert_eq!(compare_decimals(&a, &b), scaled(&a).cmp(&scaled(&b)));
    }

    /// Any text in a term's place is read or refused with a message; never a panic, and what
    /// is read keeps the text as written.
    #[test]
    fn any_text_in_a_decimal_term_is_read_as_written_or_refused(text in "\\PC{0,40}") {
        let row = serde_json::json!({ "order_multiple": text, "lead_time": text });
        let row = serde_json::to_vec(&row).unwrap();
        match Terms::read(&parse_node(&row).unwrap()) {
            Ok(terms) => {
                let multiple = terms.order_multiple.unwrap();
                prop_assert_eq!(multiple.as_str(), text.as_str());
            }
            Err(problems) => prop_assert!(!problems.is_empty()),
        }
    }
}

/// A valid_until at the calendar's edges, with offsets: read, or refused with a message.
fn edge_time() -> impl Strategy<Value = String> {
    let offset = (-1439i32..=1439).prop_map(|m| {
        let sign = if m < 0 { '-' } else { '+' };
        format!("{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
    });
    prop_oneof![
        (0u32..=23, offset.clone()).prop_map(|(h, o)| format!("0000-01-01T{h:02}:00:00{o}")),
        (0u32..=23, offset).prop_map(|(h, o)| format!("9999-12-31T{h:02}:59:59{o}")),
        Just("2026-12-31T23:59:59.999999999Z".to_owned()),
    ]
}

proptest! {
    /// Terms from every range a supplier controls: whatever is read is stored (the item
    /// `serde_dynamo` writes for DynamoDB) and read back as the same terms, never a panic.
    #[test]
    fn terms_read_are_stored_and_read_back_unchanged(
        quantity in decimal_text(),
        price in decimal_text(),
        days in 0u64..=4000,
        words in "\\PC{0,110}",
        until in edge_time(),
        tax in proptest::bool::ANY,
    ) {
        let row = serde_json::json!({
            "price_breaks": [{"min_quantity": quantity, "unit_price": price}],
            "minimum_order_quantity": quantity, "pack_size": quantity, "price_basis": quantity,
            "lead_time_days": days, "lead_time": words, "packaging": words,
            "valid_until": until, "incoterms": "DDP", "tax_included": tax,
        });
        let row = serde_json::to_vec(&row).unwrap();
        if let Ok(terms) = Terms::read(&parse_node(&row).unwrap()) {
            prop_assert_eq!(terms.price_breaks[0].min_quantity.as_str(), quantity.as_str());
            let item: serde_dynamo::Item = serde_dynamo::to_item(&terms).unwrap();
            let back: Terms = serde_dynamo::from_item(item).unwrap();
            prop_assert_eq!(back, terms);
        }
    }
}

#[test]
fn every_term_member_is_read_alone() {
    for name in Member::TERMS.map(Member::name) {
        // An object is no term's value: a member that is read is refused, naming itself.
        let refused = messages(&format!(r#"{{"sku":"A","{name}":{{"x":1}}}}"#));
        assert!(
            refused.iter().any(|m| m.contains(name)),
            "{name}: {refused:?}"
        );
    }
    assert_eq!(
        read(r#"{"sku":"A","quantity":1}"#).unwrap(),
        Terms::default()
    );
}
