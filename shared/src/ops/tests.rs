use super::routes::parse_delivery_key;
use super::*;
use crate::domain::canonical_json::{parse_document, JsonValue};
use serde_json::json;

/// A payload diff as the quarantine detail shows it.
fn diff_json(stored: &[u8], received: &[u8]) -> Value {
    serde_json::to_value(payload_diff(stored, received)).unwrap()
}

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
    let summary = diff_json(stored, received);
    assert_eq!(summary["format"], "text");
    assert_eq!(summary["first_difference_offset"], 18);
    assert_eq!(
        summary["line_differences"],
        json!([{"line": 2, "stored": "AX-1,6", "received": "AX-1,5"}])
    );
    let binary = diff_json(&[0xff, 0x00, 0x01], &[0xff, 0x00, 0x02, 0x03]);
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
    let diff = diff_json(br#"{"a": 1.0}"#, br#"{"a":1.0}"#);
    assert_eq!(diff["difference_count"], 0);
    assert!(diff["note"].is_string());
    assert_eq!(diff["bytes"]["first_difference_offset"], 5);
}

/// The one difference of a JSON payload diff (asserting there is exactly one).
fn only_difference(stored: &str, received: &str) -> Value {
    let diff = diff_json(stored.as_bytes(), received.as_bytes());
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
    let diff = diff_json(&stored, &received);
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
    let diff = diff_json(
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

// The response bodies are types (`bodies`); these pin their JSON to the shapes the routes
// answered when they were assembled by hand: same keys, `null` where a key was `null`, absent
// where it was absent.

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn mismatch_entry() -> QuarantineEntry {
    QuarantineEntry {
        quarantine_id: "q_1".into(),
        kind: crate::domain::model::QuarantineKind::Mismatch,
        reason_code: "replay_payload_mismatch".into(),
        message: "changed".into(),
        tenant: "demo".into(),
        connector: Some("acme-eu".into()),
        delivery_key: Some("demo/acme-eu/ACC-1/EXP-1".into()),
        stored_fingerprint: None,
        received_fingerprint: None,
        stored_artifact_key: None,
        stored_observation_ids: None,
        evidence_key: "raw/k".into(),
        evidence_sha256: "ab".into(),
        first_seen_at: at("2026-11-29T08:00:00Z"),
        status: STATUS_ACCEPTED.into(),
        refused_rows: None,
    }
}

/// What `to_json(entry)` plus the `resolution` key answered.
fn entry_value(resolution: Value) -> Value {
    let mut value = serde_json::to_value(mismatch_entry()).unwrap();
    value["resolution"] = resolution;
    value
}

#[test]
fn an_entry_without_a_resolution_says_null() {
    let body = bodies::EntryBody::new(&mismatch_entry(), None);
    let value = serde_json::to_value(&body).unwrap();
    assert_eq!(value, entry_value(Value::Null));
    assert!(value.get("resolutions").is_none());
}

#[test]
fn an_entry_detail_carries_its_history_and_when_the_decision_was_carried_out() {
    let requested = QuarantineResolution {
        action: ACTION_ACCEPT.into(),
        reason: "ok".into(),
        delivery_id: Some("EXP-1-corrected".into()),
        new_delivery_key: Some("demo/acme-eu/ACC-1/EXP-1-corrected".into()),
        requested_at: at("2026-11-29T09:00:00Z"),
        resolved_at: None,
    };
    let event = |action: &str, time: &str| ResolutionEvent {
        action: action.into(),
        reason: "ok".into(),
        delivery_id: None,
        new_delivery_key: None,
        actor: None,
        at: at(time),
    };
    let history = vec![
        event(EVENT_ACCEPT_REQUESTED, "2026-11-29T09:00:00Z"),
        event(EVENT_ACCEPTED, "2026-11-29T09:00:05Z"),
    ];
    let detail = entry_with_history(&mismatch_entry(), Some(&requested), history.clone());
    let mut expected = entry_value(serde_json::to_value(&requested).unwrap());
    expected["resolution"]["resolved_at"] = json!("2026-11-29T09:00:05Z");
    expected["resolutions"] = serde_json::to_value(&history).unwrap();
    assert_eq!(serde_json::to_value(&detail).unwrap(), expected);

    let unresolved = entry_with_history(&mismatch_entry(), None, Vec::new());
    let mut expected = entry_value(Value::Null);
    expected["resolutions"] = json!([]);
    assert_eq!(serde_json::to_value(&unresolved).unwrap(), expected);
}

#[test]
fn a_mismatch_diff_is_the_payload_diff_with_where_both_payloads_are() {
    let diff = bodies::MismatchDiff::Available {
        available: true,
        stored_artifact_key: "raw/a".into(),
        received_artifact_key: "raw/b".into(),
        diff: Box::new(payload_diff(b"x\n", b"y\n")),
    };
    let mut expected = diff_json(b"x\n", b"y\n");
    expected["available"] = json!(true);
    expected["stored_artifact_key"] = json!("raw/a");
    expected["received_artifact_key"] = json!("raw/b");
    assert_eq!(serde_json::to_value(&diff).unwrap(), expected);
    assert_eq!(
        serde_json::to_value(bodies::MismatchDiff::unavailable("gone")).unwrap(),
        json!({"available": false, "reason": "gone"})
    );
}

#[test]
fn identical_payloads_have_a_null_offset_and_no_excerpts() {
    assert_eq!(
        diff_json(&[0xff], &[0xff]),
        json!({"format": "bytes", "stored_bytes": 1, "received_bytes": 1, "identical": true,
               "common_prefix_bytes": 1, "first_difference_offset": null})
    );
    assert_eq!(
        diff_json(b"a\nb", b"a"),
        json!({"format": "text", "stored_bytes": 3, "received_bytes": 1, "identical": false,
               "common_prefix_bytes": 1, "first_difference_offset": 1,
               "stored_excerpt": "a\nb", "received_excerpt": "a",
               "line_differences": [{"line": 2, "stored": "b", "received": null}],
               "line_difference_count": 1, "truncated": false})
    );
}

#[test]
fn a_delivery_without_a_record_says_so_with_a_null_state() {
    let body = bodies::DeliveryStatus::Unrecorded {
        delivery_key: "demo/acme-eu/ACC-1/EXP-1".into(),
        state: None,
        note: "no replay record",
        quarantine: vec![bodies::EntryBody::new(&mismatch_entry(), None)],
    };
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({"delivery_key": "demo/acme-eu/ACC-1/EXP-1", "state": null,
               "note": "no replay record", "quarantine": [entry_value(Value::Null)]})
    );
}

#[test]
fn an_artifact_link_names_only_what_it_belongs_to() {
    let of = bodies::ArtifactOf {
        quarantine_id: Some("q_1".into()),
        ..bodies::ArtifactOf::default()
    };
    let link = bodies::ArtifactLink::new("raw/k", "ab", "https://x".into(), of);
    assert_eq!(
        serde_json::to_value(&link).unwrap(),
        json!({"artifact_key": "raw/k", "sha256": "ab", "url": "https://x", "method": "GET",
               "expires_in_seconds": PRESIGN_SECONDS, "of": {"quarantine_id": "q_1"}})
    );
}

#[test]
fn a_source_without_claims_has_null_freshness_and_an_unreadable_payload_no_claim() {
    let freshness = bodies::Freshness {
        items: 0,
        newest_observed_at: None,
        age_seconds: None,
        last_delivery: None,
    };
    assert_eq!(
        serde_json::to_value(&freshness).unwrap(),
        json!({"items": 0, "newest_observed_at": null, "age_seconds": null, "last_delivery": null})
    );
    let base = bodies::QuarantinedClaim {
        quarantine_id: "q_1".into(),
        status: "open".into(),
        reason_code: "replay_payload_mismatch".into(),
        delivery_key: None,
        first_seen_at: "2026-11-29T08:00:00Z".into(),
        readable: false,
        reason: Some("gone".into()),
        row: None,
        read_under: None,
    };
    assert_eq!(
        serde_json::to_value(&base).unwrap(),
        json!({"quarantine_id": "q_1", "status": "open", "reason_code": "replay_payload_mismatch",
               "delivery_key": null, "first_seen_at": "2026-11-29T08:00:00Z",
               "readable": false, "reason": "gone"})
    );
    let readable = bodies::QuarantinedClaim {
        readable: true,
        reason: None,
        row: Some(bodies::QuarantinedRow {
            source_record: "r1".into(),
            quantity: 5.into(),
            price: "820.00".into(),
            currency: "EUR".into(),
            observed_at: "2026-11-29T08:00:00Z".into(),
        }),
        ..base
    };
    assert_eq!(
        serde_json::to_value(&readable).unwrap(),
        json!({"quarantine_id": "q_1", "status": "open", "reason_code": "replay_payload_mismatch",
               "delivery_key": null, "first_seen_at": "2026-11-29T08:00:00Z", "readable": true,
               "source_record": "r1", "quantity": 5, "price": "820.00", "currency": "EUR",
               "observed_at": "2026-11-29T08:00:00Z"})
    );
}

#[test]
fn a_new_pull_run_has_a_null_run_status() {
    let export = crate::intake::poller::ExportRun {
        run_id: crate::domain::ids::RunId::parse("run_abc").unwrap(),
        export_id: "EXP-1".into(),
        page_count: 3,
    };
    let mut expected = serde_json::to_value(&export).unwrap();
    let body = bodies::PullStarted {
        export,
        status: "started",
        run_status: None,
        pages_to_compare: 0,
        pages_to_commit: 3,
        run: "/v1/runs/run_abc".into(),
    };
    expected["status"] = json!("started");
    expected["run_status"] = Value::Null;
    expected["pages_to_compare"] = json!(0);
    expected["pages_to_commit"] = json!(3);
    expected["run"] = json!("/v1/runs/run_abc");
    assert_eq!(serde_json::to_value(&body).unwrap(), expected);
}

/// The ops layer reaches the stores through its ports (`ports`), never the adapters.
#[test]
fn the_ops_layer_names_no_adapter() {
    let sources = [
        ("archive.rs", include_str!("archive.rs")),
        ("bodies.rs", include_str!("bodies.rs")),
        ("deliveries.rs", include_str!("deliveries.rs")),
        ("diff.rs", include_str!("diff.rs")),
        ("mod.rs", include_str!("mod.rs")),
        ("ports.rs", include_str!("ports.rs")),
        ("quarantine.rs", include_str!("quarantine.rs")),
        ("routes.rs", include_str!("routes.rs")),
        ("source_actions.rs", include_str!("source_actions.rs")),
        ("views.rs", include_str!("views.rs")),
    ];
    let adapter = ["crate", "::aws"].concat();
    for (name, text) in sources {
        assert!(!text.contains(&adapter), "ops/{name} names {adapter}");
        assert!(!text.contains("aws_sdk_"), "ops/{name} names an AWS SDK");
    }
}
