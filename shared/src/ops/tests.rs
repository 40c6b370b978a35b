use super::routes::parse_delivery_key;
use super::*;
use crate::domain::canonical_json::{parse_document, JsonValue};

/// A document as the diff parses it (numbers keep their literal text).
fn doc(value: Value) -> JsonValue {
    parse_document(&serde_json::to_vec(&value).unwrap()).unwrap()
}

fn page(quantity: u64) -> Value {
    json!({"export_id": "EXP-8821", "page": 2, "page_count": 3, "offers": [
        {"sku": "AX-440-R2", "quantity": quantity, "unit": "each", "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}
    ]})
}

#[test]
fn a_changed_leaf_is_reported_at_its_json_pointer() {
    let diff = json_diff(&doc(page(6)), &doc(page(5)), MAX_DIFF_ENTRIES);
    assert_eq!(
        diff.differences,
        vec![JsonDifference {
            path: "/offers/0/quantity".into(),
            change: "changed",
            stored: Some(json!(6)),
            received: Some(json!(5)),
        }]
    );
    assert_eq!((diff.total, diff.truncated), (1, false));
    let serialized = serde_json::to_value(&diff.differences[0]).unwrap();
    assert_eq!(
        serialized,
        json!({"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5})
    );
}

#[test]
fn identical_documents_have_no_differences_whatever_the_key_order() {
    let a = parse_document(br#"{"a": 1, "b": [1, {"c": null}]}"#).unwrap();
    let b = parse_document(br#"{"b": [1, {"c": null}], "a": 1}"#).unwrap();
    let diff = json_diff(&a, &b, 10);
    assert!(diff.differences.is_empty());
    assert_eq!(diff.total, 0);
}

#[test]
fn added_and_removed_keys_and_array_elements_name_their_side() {
    let stored = json!({"keep": 1, "gone": "x", "rows": [1, 2, 3]});
    let received = json!({"keep": 1, "new": {"deep": true}, "rows": [1, 9]});
    let diff = json_diff(&doc(stored), &doc(received), 10);
    assert_eq!(
        diff.differences,
        vec![
            JsonDifference {
                path: "/gone".into(),
                change: "removed",
                stored: Some(json!("x")),
                received: None
            },
            JsonDifference {
                path: "/new".into(),
                change: "added",
                stored: None,
                received: Some(json!({"deep": true}))
            },
            JsonDifference {
                path: "/rows/1".into(),
                change: "changed",
                stored: Some(json!(2)),
                received: Some(json!(9))
            },
            JsonDifference {
                path: "/rows/2".into(),
                change: "removed",
                stored: Some(json!(3)),
                received: None
            },
        ]
    );
    // An explicit null is a value, not an absence.
    let diff = json_diff(&doc(json!({"a": null})), &doc(json!({})), 10);
    assert_eq!(diff.differences[0].stored, Some(Value::Null));
    assert_eq!(diff.differences[0].change, "removed");
}

#[test]
fn type_changes_are_one_leaf_and_keys_are_pointer_escaped() {
    let diff = json_diff(
        &doc(json!({"a/b": {"m~n": [1]}})),
        &doc(json!({"a/b": {"m~n": {"0": 1}}})),
        10,
    );
    assert_eq!(diff.differences.len(), 1);
    assert_eq!(diff.differences[0].path, "/a~1b/m~0n");
    assert_eq!(diff.differences[0].stored, Some(json!([1])));
    // Different scalar documents differ at the root pointer "".
    let diff = json_diff(&doc(json!(1)), &doc(json!("1")), 10);
    assert_eq!(diff.differences[0].path, "");
}

#[test]
fn the_list_is_capped_but_every_difference_is_counted() {
    let stored = Value::Array((0..500).map(|i| json!(i)).collect());
    let received = Value::Array((0..500).map(|i| json!(i + 1)).collect());
    let diff = json_diff(&doc(stored), &doc(received), MAX_DIFF_ENTRIES);
    assert_eq!(diff.differences.len(), MAX_DIFF_ENTRIES);
    assert_eq!(diff.total, 500);
    assert!(diff.truncated);
    assert_eq!(diff.differences[199].path, "/199");
}

#[test]
fn non_json_payloads_get_a_byte_and_line_summary() {
    let stored = b"sku,quantity\nAX-1,6\nAX-2,1\n";
    let received = b"sku,quantity\nAX-1,5\nAX-2,1\n";
    let summary = payload_diff(stored, received);
    assert_eq!(summary["format"], "text");
    assert_eq!(summary["first_difference_offset"], 18);
    assert_eq!(
        summary["line_differences"],
        json!([{"line": 2, "stored": "AX-1,6", "received": "AX-1,5"}])
    );
    let binary = payload_diff(&[0xff, 0x00, 0x01], &[0xff, 0x00, 0x02, 0x03]);
    assert_eq!(binary["format"], "bytes");
    assert_eq!(binary["first_difference_offset"], 2);
    assert_eq!(
        (
            binary["stored_bytes"].clone(),
            binary["received_bytes"].clone()
        ),
        (json!(3), json!(4))
    );
    assert!(binary.get("line_differences").is_none());
}

#[test]
fn same_values_written_differently_are_explained() {
    let diff = payload_diff(br#"{"a": 1.0}"#, br#"{"a":1.0}"#);
    assert_eq!(diff["difference_count"], 0);
    assert!(diff["note"].is_string());
    assert_eq!(diff["bytes"]["first_difference_offset"], 5);
}

/// The one difference of a JSON payload diff (asserting there is exactly one).
fn only_difference(stored: &str, received: &str) -> Value {
    let diff = payload_diff(stored.as_bytes(), received.as_bytes());
    assert_eq!(diff["format"], "json", "{diff}");
    assert_eq!(diff["difference_count"], 1, "{diff}");
    diff["differences"][0].clone()
}

#[test]
fn numbers_that_differ_beyond_f64_precision_are_a_difference_shown_literally() {
    let difference = only_difference(
        r#"{"price": 820.000000000000000001}"#,
        r#"{"price": 820.000000000000000002}"#,
    );
    assert_eq!(
        difference,
        json!({"path": "/price", "change": "changed",
               "stored": {"$number": "820.000000000000000001"},
               "received": {"$number": "820.000000000000000002"}})
    );
}

#[test]
fn a_number_written_with_another_precision_is_a_difference() {
    let difference = only_difference(r#"{"a": 1.0}"#, r#"{"a": 1.00}"#);
    assert_eq!(difference["stored"], json!({"$number": "1.0"}));
    assert_eq!(difference["received"], json!({"$number": "1.00"}));
    let difference = only_difference(r#"{"a": 1e2}"#, r#"{"a": 100}"#);
    assert_eq!(
        (&difference["stored"], &difference["received"]),
        (&json!({"$number": "1e2"}), &json!(100))
    );
}

#[test]
fn integers_beyond_what_every_reader_holds_exactly_are_shown_as_literals() {
    // 2^53 + 1 and 2^53 are the same f64.
    let difference = only_difference(r#"[9007199254740993]"#, r#"[9007199254740992]"#);
    assert_eq!(
        difference,
        json!({"path": "/0", "change": "changed",
               "stored": {"$number": "9007199254740993"},
               "received": {"$number": "9007199254740992"}})
    );
    let difference = only_difference(r#"[-0]"#, r#"[0]"#);
    assert_eq!(
        (&difference["stored"], &difference["received"]),
        (&json!({"$number": "-0"}), &json!(0))
    );
    let difference = only_difference(r#"[9007199254740991]"#, r#"[-9007199254740991]"#);
    assert_eq!(
        (&difference["stored"], &difference["received"]),
        (&json!(9007199254740991_i64), &json!(-9007199254740991_i64)),
        "the largest safe integers stay JSON numbers"
    );
}

#[test]
fn small_integers_stay_json_numbers_in_the_differences() {
    let stored = serde_json::to_vec(&page(6)).unwrap();
    let received = serde_json::to_vec(&page(5)).unwrap();
    let diff = payload_diff(&stored, &received);
    assert_eq!(
        diff["differences"],
        json!([{"path": "/offers/0/quantity", "change": "changed", "stored": 6, "received": 5}])
    );
}

#[test]
fn a_price_sent_as_a_number_instead_of_a_string_is_told_apart() {
    let difference = only_difference(r#"{"price": "820.00"}"#, r#"{"price": 820.00}"#);
    assert_eq!(difference["stored"], json!("820.00"));
    assert_eq!(difference["received"], json!({"$number": "820.00"}));
}

#[test]
fn added_subtrees_keep_their_number_literals() {
    let difference = only_difference(r#"{}"#, r#"{"new": {"price": 1.50, "n": [2]}}"#);
    assert_eq!(
        difference,
        json!({"path": "/new", "change": "added",
               "received": {"price": {"$number": "1.50"}, "n": [2]}})
    );
}

#[test]
fn escaping_whitespace_and_key_order_are_not_differences() {
    let diff = payload_diff(
        br#"{"a": "A", "b": [1, 2.50]}"#,
        br#"{"b":[1,2.50],"a":"A"}"#,
    );
    assert_eq!(diff["difference_count"], 0, "{diff}");
    assert!(diff["note"].is_string());
}

#[test]
fn delivery_keys_split_into_their_parts_even_when_the_id_has_slashes() {
    let key = parse_delivery_key("demo/acme-events/ACME-EVT/urn:acme:events/evt-1").unwrap();
    assert_eq!(key.source_delivery_id.as_str(), "urn:acme:events/evt-1");
    assert_eq!(
        key.as_string(),
        "demo/acme-events/ACME-EVT/urn:acme:events/evt-1"
    );
    assert!(parse_delivery_key("demo/acme-eu").is_none());
}

#[test]
fn paths_are_percent_decoded_without_turning_plus_into_space() {
    assert_eq!(
        crate::protocols::http::percent_decode(
            "/v1/deliveries/demo/acme-eu/ACC-1/EXP%2F2+x%3A",
            false
        ),
        "/v1/deliveries/demo/acme-eu/ACC-1/EXP/2+x:"
    );
}
