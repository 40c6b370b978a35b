use super::*;
use base64::Engine;
use serde_json::json;

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn obs(n: u8) -> ObservationId {
    ObservationId::parse(&format!(
        "obs_{}",
        format!("{n}")
            .repeat(26)
            .chars()
            .take(26)
            .collect::<String>()
    ))
    .unwrap()
}

fn claim() -> ClaimRef {
    ClaimRef {
        tenant: TenantId::parse("demo").unwrap(),
        item: "AX-440-R2~each~new".into(),
        connector: ConnectorId::parse("acme-eu").unwrap(),
        source_account: SourceAccount::parse("ACC-1").unwrap(),
    }
}

fn request(observation: &ObservationId, expires_at: &str) -> Value {
    json!({
        "observation_id": observation.as_str(),
        "scope": {"kind": "stock_at_least", "quantity": 1000},
        "method": "reservation",
        "reference": "R-17",
        "evidence": {"reference": "reservation R-17 in the supplier portal"},
        "expires_at": expires_at,
    })
}

fn recorded(observation: &ObservationId, now: &str, expires_at: &str) -> VerificationRecord {
    let request = VerificationRequest::read(&request(observation, expires_at), at(now)).unwrap();
    let evidence = match &request.evidence {
        StatedEvidence::Reference(r) => VerificationEvidence::Reference {
            reference: r.clone(),
        },
        StatedEvidence::Document(_) => unreachable!(),
    };
    request.record(&claim(), evidence, Some("verifier".into()), at(now))
}

#[test]
fn a_claim_is_verified_until_it_expires_and_only_that_claim() {
    let record = recorded(&obs(2), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z");
    let events = vec![VerificationEvent::Verified(Box::new(record.clone()))];
    let before = VerificationView::at(&events, &obs(2), at("2026-12-01T09:59:59Z"));
    assert_eq!(
        before.state,
        VerificationState::Unverified,
        "not recorded yet"
    );
    let during = VerificationView::at(&events, &obs(2), at("2026-12-01T10:30:00Z"));
    assert_eq!(during.state, VerificationState::Verified);
    assert_eq!(
        during.record.as_deref(),
        Some(record.verification_id.as_str())
    );
    assert_eq!(
        during.scope,
        Some(VerifiedScope::StockAtLeast {
            quantity: Decimal::parse("1000").unwrap()
        })
    );
    let after = VerificationView::at(&events, &obs(2), at("2026-12-01T11:00:00Z"));
    assert_eq!(after.state, VerificationState::Expired);
    let other = VerificationView::at(&events, &obs(3), at("2026-12-01T10:30:00Z"));
    assert_eq!(other, VerificationView::unverified());
}

#[test]
fn a_withdrawal_counts_from_when_it_was_recorded() {
    let record = recorded(&obs(2), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z");
    let withdrawal = withdrawal_of(&record, "wrong bin", None, at("2026-12-01T10:20:00Z"));
    let events = vec![
        VerificationEvent::Withdrawn(withdrawal),
        VerificationEvent::Verified(Box::new(record)),
    ];
    let view = |t| VerificationView::at(&events, &obs(2), at(t)).state;
    assert_eq!(view("2026-12-01T10:10:00Z"), VerificationState::Verified);
    assert_eq!(view("2026-12-01T10:20:00Z"), VerificationState::Withdrawn);
    assert_eq!(view("2026-12-01T12:00:00Z"), VerificationState::Withdrawn);
}

#[test]
fn a_record_in_force_wins_over_a_later_withdrawn_one() {
    let first = recorded(&obs(2), "2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z");
    let mut second = recorded(&obs(2), "2026-12-01T10:05:00Z", "2026-12-01T12:30:00Z");
    second.verification_id = "ver_second".into();
    let withdrawal = withdrawal_of(&second, "typo", None, at("2026-12-01T10:06:00Z"));
    let events = vec![
        VerificationEvent::Verified(Box::new(first.clone())),
        VerificationEvent::Verified(Box::new(second)),
        VerificationEvent::Withdrawn(withdrawal),
    ];
    let view = VerificationView::at(&events, &obs(2), at("2026-12-01T10:10:00Z"));
    assert_eq!(view.state, VerificationState::Verified);
    assert_eq!(view.record, Some(first.verification_id));
}

#[test]
fn a_retried_request_names_the_same_record() {
    let a = recorded(&obs(2), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z");
    let b = recorded(&obs(2), "2026-12-01T10:00:09Z", "2026-12-01T11:00:00Z");
    assert_eq!(a.verification_id, b.verification_id);
    let c = recorded(&obs(3), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z");
    assert_ne!(a.verification_id, c.verification_id);
}

#[test]
fn every_problem_of_a_request_is_listed_with_its_pointer() {
    let body = json!({
        "observation_id": "nope",
        "scope": {"kind": "stock_at_least", "quantity": "-1"},
        "method": "telepathy",
        "evidence": {"reference": "", "document": {}},
        "expires_at": "2026-12-01T09:00:00Z",
        "colour": "red",
    });
    let problems = VerificationRequest::read(&body, at("2026-12-01T10:00:00Z")).unwrap_err();
    let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/colour",
            "/observation_id",
            "/scope",
            "/method",
            "/evidence",
            "/expires_at"
        ],
        "{problems:?}"
    );
    let missing = VerificationRequest::read(&json!({}), at("2026-12-01T10:00:00Z")).unwrap_err();
    let pointers: Vec<&str> = missing.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/observation_id",
            "/scope",
            "/method",
            "/evidence",
            "/expires_at"
        ]
    );
}

#[test]
fn a_document_must_match_its_stated_sha256() {
    let pdf = b"%PDF-1.4 reservation R-17".to_vec();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let mut body = request(&obs(2), "2026-12-01T11:00:00Z");
    body["evidence"] = json!({"document": {
        "content_type": "application/pdf",
        "file_name": "R-17.pdf",
        "content_base64": encoded,
        "sha256": crate::domain::hashing::sha256_hex(&pdf),
    }});
    let read = VerificationRequest::read(&body, at("2026-12-01T10:00:00Z")).unwrap();
    let StatedEvidence::Document(document) = read.evidence else {
        panic!("a document");
    };
    assert_eq!(document.bytes, pdf);
    body["evidence"]["document"]["sha256"] = json!("00".repeat(32));
    let problems = VerificationRequest::read(&body, at("2026-12-01T10:00:00Z")).unwrap_err();
    assert_eq!(problems[0].pointer, "/evidence");
    assert!(
        problems[0].message.contains("is not the sha256"),
        "{problems:?}"
    );
}

#[test]
fn the_named_item_and_source_must_be_the_claims() {
    let mut body = request(&obs(2), "2026-12-01T11:00:00Z");
    body["item"] = json!("ax-440-r2");
    body["connector"] = json!("acme-eu");
    let read = VerificationRequest::read(&body, at("2026-12-01T10:00:00Z")).unwrap();
    assert!(read.mismatches(&claim()).is_empty());
    body["connector"] = json!("other");
    body["source_account"] = json!("ACC-2");
    let read = VerificationRequest::read(&body, at("2026-12-01T10:00:00Z")).unwrap();
    let pointers: Vec<String> = read
        .mismatches(&claim())
        .into_iter()
        .map(|p| p.pointer)
        .collect();
    assert_eq!(pointers, ["/connector", "/source_account"]);
}

#[test]
fn the_edges_of_what_a_verifier_controls() {
    let now = at("2026-12-01T10:00:00Z");
    let with = |pointer: &str, value: Value| {
        let mut body = request(&obs(2), "2026-12-01T11:00:00Z");
        *body.pointer_mut(pointer).unwrap_or(&mut Value::Null) = value.clone();
        if body.pointer(pointer).is_none() {
            body[pointer.trim_start_matches('/')] = value;
        }
        VerificationRequest::read(&body, now)
    };
    // Texts: 500 bytes pass, 501 do not; control characters and blanks never.
    assert!(with("/reference", json!("R".repeat(MAX_TEXT_BYTES))).is_ok());
    for bad in [
        json!("R".repeat(MAX_TEXT_BYTES + 1)),
        json!("R-17\u{0}"),
        json!("  "),
        json!(17),
    ] {
        let problems = with("/reference", bad.clone()).unwrap_err();
        assert_eq!(problems[0].pointer, "/reference", "{bad}");
    }
    // Times at the calendar's edges: accepted only within a year from now, never panicking.
    for (expires, ok) in [
        ("0000-01-01T00:00:00Z", false),
        ("9999-12-31T23:59:59Z", false),
        ("9999-12-31T23:59:59-23:59", false),
        ("2026-12-01T10:00:00Z", false),
        ("2026-12-01T10:00:01Z", true),
        ("2027-12-02T10:00:00Z", true),
        ("2027-12-02T10:00:01Z", false),
    ] {
        assert_eq!(with("/expires_at", json!(expires)).is_ok(), ok, "{expires}");
    }
    assert!(with("/verified_at", json!("0000-01-01T00:00:00Z")).is_ok());
    assert!(with("/verified_at", json!("2026-12-01T10:00:01Z")).is_err());
    // Quantities at the decimal grammar's edges.
    for (quantity, ok) in [
        (json!("0"), false),
        (json!("0.000000000000000001"), true),
        (json!(u64::MAX), true),
        (json!("1e3"), false),
        (json!(-1), false),
        (json!("9".repeat(31)), false),
    ] {
        let scope = json!({"kind": "stock_at_least", "quantity": quantity});
        assert_eq!(with("/scope", scope).is_ok(), ok, "{quantity}");
    }
}

#[test]
fn a_record_round_trips_through_its_stored_form() {
    let record = recorded(&obs(2), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z");
    let event = VerificationEvent::Verified(Box::new(record));
    let stored = serde_json::to_value(&event).unwrap();
    let back: VerificationEvent = serde_json::from_value(stored).unwrap();
    assert_eq!(back, event);
}
