//! Property tests of the pure parts (docs/architecture.md section 13): canonicalization and
//! fingerprints, the Standard Webhooks verifier (cross-checked both ways against the
//! `standardwebhooks` crate), money and currency parsing, CSV and CloudEvents normalization. 500
//! cases each by default; `FEEDSAFE_FUZZ_CASES=10000` for a long run. No engine needed.

use feedsafe::domain::canonical_json::{canonicalize, CanonicalJsonError, MAX_DEPTH};
use feedsafe::domain::connector::PayloadFormat;
use feedsafe::domain::currency::is_iso4217_currency;
use feedsafe::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use feedsafe::domain::money::Price;
use feedsafe::domain::normalize::{normalize, normalize_and_fingerprint};
use feedsafe::intake::webhook::{sign, verify_signature, SigningSecret, Verification};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("FEEDSAFE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

// -------------------------------------------------------------------------------------------
// A JSON value and many ways of writing it
// -------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    /// The number exactly as written.
    Num(String),
    Str(String),
    Arr(Vec<J>),
    /// Keys are distinct.
    Obj(Vec<(String, J)>),
}

fn number_literal() -> impl Strategy<Value = String> {
    "-?(0|[1-9][0-9]{0,6})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,2})?"
}

fn text() -> impl Strategy<Value = String> {
    // ASCII, controls, quotes, backslashes, slashes, accents and a non-BMP character.
    proptest::collection::vec(
        prop_oneof![
            "[a-zA-Z0-9 _-]",
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("/".to_owned()),
            Just("\n".to_owned()),
            Just("\u{1}".to_owned()),
            Just("é".to_owned()),
            Just("€".to_owned()),
            Just("𝄞".to_owned()),
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

fn json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        number_literal().prop_map(J::Num),
        text().prop_map(J::Str),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(J::Arr),
            proptest::collection::btree_map(text(), inner, 0..5)
                .prop_map(|m| J::Obj(m.into_iter().collect())),
        ]
    })
}

/// A tiny deterministic generator for the writer's choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn coin(&mut self) -> bool {
        self.next().is_multiple_of(2)
    }
    fn space(&mut self) -> &'static str {
        [" ", "", "\n", "\t", "  \r\n "][(self.next() % 5) as usize]
    }
}

/// Writes `value` as JSON: keys in a shuffled order, random whitespace, characters escaped or
/// not (`\uXXXX`, surrogate pairs, `\/`), so every call with another seed is another valid
/// serialization of the same value.
fn write(value: &J, c: &mut Choices, out: &mut String) {
    match value {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => write_str(s, c, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(c.space());
                write(item, c, out);
                out.push_str(c.space());
            }
            out.push(']');
        }
        J::Obj(members) => {
            let mut order: Vec<usize> = (0..members.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (c.next() % (i as u64 + 1)) as usize);
            }
            out.push('{');
            for (n, i) in order.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(c.space());
                write_str(&members[i].0, c, out);
                out.push_str(c.space());
                out.push(':');
                out.push_str(c.space());
                write(&members[i].1, c, out);
            }
            out.push('}');
        }
    }
}

fn write_str(s: &str, c: &mut Choices, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if c.coin() => out.push_str("\\n"),
            '/' if c.coin() => out.push_str("\\/"),
            ch if (ch as u32) < 0x20 || c.coin() => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

fn written(value: &J, seed: u64) -> Vec<u8> {
    let mut out = String::new();
    write(value, &mut Choices(seed), &mut out);
    out.into_bytes()
}

fn fingerprint(rule: CanonicalizationRule, body: &[u8]) -> String {
    Fingerprint::compute(rule, body, &["offers"])
        .expect("valid JSON")
        .sha256_hex
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn any_serialization_of_one_value_has_one_json_v1_fingerprint(
        value in json(), a in any::<u64>(), b in any::<u64>()
    ) {
        let (first, second) = (written(&value, a), written(&value, b));
        prop_assert_eq!(
            canonicalize(&first).unwrap(),
            canonicalize(&second).unwrap(),
            "{} vs {}", String::from_utf8_lossy(&first), String::from_utf8_lossy(&second)
        );
        prop_assert_eq!(
            fingerprint(CanonicalizationRule::JsonV1, &first),
            fingerprint(CanonicalizationRule::JsonV1, &second)
        );
    }

    #[test]
    fn reordered_rows_keep_the_unordered_fingerprint_and_change_json_v1_unless_equal(
        rows in proptest::collection::vec(json(), 1..6),
        shuffle in any::<u64>(), a in any::<u64>(), b in any::<u64>()
    ) {
        let mut permuted = rows.clone();
        let mut c = Choices(shuffle);
        for i in (1..permuted.len()).rev() {
            permuted.swap(i, (c.next() % (i as u64 + 1)) as usize);
        }
        let doc = |rows: Vec<J>| J::Obj(vec![
            ("feed".into(), J::Str("acme".into())),
            ("offers".into(), J::Arr(rows)),
        ]);
        let (first, second) = (written(&doc(rows.clone()), a), written(&doc(permuted.clone()), b));
        prop_assert_eq!(
            fingerprint(CanonicalizationRule::JsonUnorderedRowsV1, &first),
            fingerprint(CanonicalizationRule::JsonUnorderedRowsV1, &second)
        );
        let canonical_rows = |rows: &[J]| -> Vec<Vec<u8>> {
            rows.iter().map(|r| canonicalize(&written(r, 0)).unwrap()).collect()
        };
        let same_order = canonical_rows(&rows) == canonical_rows(&permuted);
        prop_assert_eq!(
            fingerprint(CanonicalizationRule::JsonV1, &first)
                == fingerprint(CanonicalizationRule::JsonV1, &second),
            same_order
        );
    }

    #[test]
    fn different_number_literals_stay_different(x in number_literal(), y in number_literal()) {
        prop_assume!(x != y);
        let doc = |n: &str| format!("{{\"price\":{n}}}").into_bytes();
        prop_assert_ne!(
            fingerprint(CanonicalizationRule::JsonV1, &doc(&x)),
            fingerprint(CanonicalizationRule::JsonV1, &doc(&y))
        );
    }

    #[test]
    fn a_duplicate_key_anywhere_is_refused(value in json(), key in text(), seed in any::<u64>()) {
        let inner = String::from_utf8(written(&value, seed)).unwrap();
        let mut quoted = String::new();
        write_str(&key, &mut Choices(seed), &mut quoted);
        // The same key twice, the second spelled with other escapes.
        let mut again = String::new();
        write_str(&key, &mut Choices(seed.wrapping_add(1)), &mut again);
        let body = format!("{{\"wrap\":[{{{quoted}:1,\"x\":{inner},{again}:2}}]}}");
        prop_assert!(canonicalize(body.as_bytes()).is_err(), "{}", body);
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack(
        depth in (MAX_DEPTH + 1)..200_000usize, objects in any::<bool>()
    ) {
        let (open, close) = if objects { ("{\"a\":", "}") } else { ("[", "]") };
        let body = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        prop_assert_eq!(canonicalize(body.as_bytes()), Err(CanonicalJsonError::TooDeep));
    }

    #[test]
    fn the_canonicalizer_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = canonicalize(&bytes);
        for rule in [CanonicalizationRule::JsonV1, CanonicalizationRule::JsonUnorderedRowsV1] {
            let _ = Fingerprint::compute(rule, &bytes, &["offers"]);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Standard Webhooks, against the `standardwebhooks` crate
// -------------------------------------------------------------------------------------------

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn headers(id: &str, timestamp: i64, signature: &str) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    map.insert("webhook-id", id.parse().unwrap());
    map.insert("webhook-timestamp", timestamp.to_string().parse().unwrap());
    map.insert("webhook-signature", signature.parse().unwrap());
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_verifier_never_panics(
        id in ".{0,40}", timestamp in ".{0,24}", signature in ".{0,120}",
        body in proptest::collection::vec(any::<u8>(), 0..256),
        key in proptest::collection::vec(any::<u8>(), 1..64), at in any::<i64>()
    ) {
        let secrets = [SigningSecret::from_bytes(key).unwrap()];
        let _ = verify_signature(&secrets, &id, &timestamp, &signature, &body, at);
        let _ = verify_signature(&[], &id, &timestamp, &signature, &body, at);
    }

    #[test]
    fn signatures_agree_with_the_standardwebhooks_crate_both_ways(
        key in proptest::collection::vec(any::<u8>(), 1..64),
        id in "[A-Za-z0-9_.:-]{1,40}",
        body in "\\PC{0,200}",
        skew in -299i64..299,
    ) {
        let timestamp = now() - skew;
        let ours = SigningSecret::from_bytes(key.clone()).unwrap();
        let theirs = standardwebhooks::Webhook::from_bytes(key).unwrap();
        // Ours signs, theirs verifies.
        let signed = sign(&ours, &id, timestamp, body.as_bytes());
        prop_assert!(theirs.verify(body.as_bytes(), &headers(&id, timestamp, &signed)).is_ok());
        // Theirs signs, ours verifies; and both compute the same signature.
        let theirs_signed = theirs.sign(&id, timestamp, body.as_bytes()).unwrap();
        prop_assert_eq!(&theirs_signed, &signed);
        prop_assert_eq!(
            verify_signature(std::slice::from_ref(&ours), &id, &timestamp.to_string(), &theirs_signed,
                body.as_bytes(), now()),
            Verification::Valid
        );
        // Another body or id: both refuse.
        let tampered = format!("{body}x");
        prop_assert!(theirs.verify(tampered.as_bytes(), &headers(&id, timestamp, &signed)).is_err());
        prop_assert_eq!(
            verify_signature(std::slice::from_ref(&ours), &id, &timestamp.to_string(), &signed,
                tampered.as_bytes(), now()),
            Verification::InvalidSignature
        );
        let other_id = format!("{id}0");
        prop_assert_eq!(
            verify_signature(&[ours], &other_id, &timestamp.to_string(), &signed,
                body.as_bytes(), now()),
            Verification::InvalidSignature
        );
    }

    #[test]
    fn a_signature_not_computed_with_the_key_is_refused_by_both(
        key in proptest::collection::vec(any::<u8>(), 1..64),
        forged in proptest::collection::vec(any::<u8>(), 32..33),
        id in "[A-Za-z0-9_-]{1,20}", body in "[ -~]{0,100}",
    ) {
        use base64::Engine as _;
        let timestamp = now();
        let signature = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(&forged));
        let theirs = standardwebhooks::Webhook::from_bytes(key.clone()).unwrap();
        let ours = SigningSecret::from_bytes(key).unwrap();
        let expected = sign(&ours, &id, timestamp, body.as_bytes());
        prop_assume!(expected != signature);
        prop_assert!(theirs.verify(body.as_bytes(), &headers(&id, timestamp, &signature)).is_err());
        prop_assert_eq!(
            verify_signature(&[ours], &id, &timestamp.to_string(), &signature, body.as_bytes(), timestamp),
            Verification::InvalidSignature
        );
    }

    #[test]
    fn timestamps_outside_five_minutes_are_stale(skew in 301i64..1_000_000, future in any::<bool>()) {
        let key = SigningSecret::from_bytes(b"local-sample-key-not-a-secret".to_vec()).unwrap();
        let at = now();
        let timestamp = if future { at + skew } else { at - skew };
        let signed = sign(&key, "msg", timestamp, b"{}");
        prop_assert_eq!(
            verify_signature(&[key], "msg", &timestamp.to_string(), &signed, b"{}", at),
            Verification::Stale
        );
    }
}

// -------------------------------------------------------------------------------------------
// Money, currency, normalization
// -------------------------------------------------------------------------------------------

fn price_literal() -> impl Strategy<Value = String> {
    "(0|[1-9][0-9]{0,9})(\\.[0-9]{1,6})?"
}

fn csv_field(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn prices_parse_to_their_literal_or_are_refused(text in ".{0,40}", literal in price_literal()) {
        if let Ok(price) = Price::parse(&text) {
            prop_assert_eq!(price.as_str(), text.as_str());
            prop_assert!(text.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
        }
        let parsed = Price::parse(&literal).unwrap();
        prop_assert_eq!(parsed.as_str(), literal.as_str());
        // One amount has one spelling: a leading zero is refused.
        let leading_zero = format!("0{literal}");
        prop_assert!(literal.starts_with("0.") || literal == "0" || Price::parse(&leading_zero).is_err());
    }

    #[test]
    fn currency_codes_are_three_upper_case_letters(code in ".{0,6}") {
        if is_iso4217_currency(&code) {
            prop_assert!(code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()));
        }
    }

    #[test]
    fn normalization_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for format in [
            PayloadFormat::AcmeExportV1,
            PayloadFormat::CloudEventsOffersV1,
            PayloadFormat::CsvOffersV1,
        ] {
            for rule in [
                CanonicalizationRule::BytesV1,
                CanonicalizationRule::JsonV1,
                CanonicalizationRule::JsonUnorderedRowsV1,
            ] {
                let _ = normalize(format, rule, &bytes);
            }
        }
    }

    #[test]
    fn every_accepted_csv_and_cloudevents_row_keeps_its_literal_price(
        rows in proptest::collection::vec(
            ("[A-Z]{2}-[0-9]{1,4}", 0u32..100_000, price_literal(), "[a-z]{1,8}"), 1..20)
    ) {
        let mut csv = String::from("sku,quantity,unit,price,currency,observed_at\n");
        let mut offers = Vec::new();
        for (sku, quantity, price, unit) in &rows {
            csv.push_str(&format!(
                "{sku},{quantity},{},{price},EUR,2026-11-29T08:00:00Z\n",
                csv_field(unit)
            ));
            offers.push(serde_json::json!({
                "sku": sku, "quantity": quantity, "unit": unit, "price": price, "currency": "EUR"
            }));
        }
        let event = serde_json::json!({
            "specversion": "1.0", "id": "evt-1", "source": "urn:acme:events",
            "type": "offer.snapshot", "time": "2026-11-29T08:00:00Z",
            "data": {"offers": offers}
        });
        let expected: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
        for (format, body) in [
            (PayloadFormat::CsvOffersV1, csv.into_bytes()),
            (PayloadFormat::CloudEventsOffersV1, event.to_string().into_bytes()),
        ] {
            let normalized = normalize(format, CanonicalizationRule::JsonV1, &body);
            prop_assert!(normalized.is_ok(), "{:?} refused {:?}", format, normalized.err());
            let prices: Vec<String> = normalized
                .unwrap()
                .iter()
                .map(|r| r.price.as_str().to_owned())
                .collect();
            prop_assert_eq!(&prices, &expected, "{:?}", format);
        }
    }

    #[test]
    fn one_parse_gives_the_rows_and_fingerprint_of_separate_ones(
        rows in proptest::collection::vec(
            ("[A-Z]{2}-[0-9]{1,4}", 0u32..100_000, price_literal(), text(), proptest::option::of(json())),

            0..12),
        seed in any::<u64>(),
    ) {
        let offers = rows
            .iter()
            .map(|(sku, quantity, price, note, extra)| {
                let mut row = vec![
                    ("sku".to_owned(), J::Str(sku.clone())),
                    ("quantity".to_owned(), J::Num(quantity.to_string())),
                    ("unit".to_owned(), J::Str("each".into())),
                    ("note".to_owned(), J::Str(note.clone())),
                    ("price".to_owned(), J::Str(price.clone())),
                    ("currency".to_owned(), J::Str("EUR".into())),
                    ("observed_at".to_owned(), J::Str("2026-11-29T08:00:00Z".into())),
                ];
                if let Some(extra) = extra {
                    row.push(("extra".to_owned(), extra.clone()));
                }
                J::Obj(row)
            })
            .collect();
        let page = J::Obj(vec![
            ("export_id".to_owned(), J::Str("EXP-1".into())),
            ("page".to_owned(), J::Num("1".into())),
            ("offers".to_owned(), J::Arr(offers)),
        ]);
        let body = written(&page, seed);
        for rule in [
            CanonicalizationRule::BytesV1,
            CanonicalizationRule::JsonV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
        ] {
            let format = PayloadFormat::AcmeExportV1;
            let one = normalize_and_fingerprint(format, rule, &body);
            let rows = normalize(format, rule, &body);
            let fingerprint = Fingerprint::compute(rule, &body, format.rows_path());
            match (one, rows, fingerprint) {
                (Ok((one_rows, one_fp)), Ok(rows), Ok(fingerprint)) => {
                    prop_assert_eq!(one_rows, rows);
                    prop_assert_eq!(one_fp, fingerprint);
                }
                (Err(one), Err(rows), _) => prop_assert_eq!(one.code, rows.code),
                (one, rows, fingerprint) => prop_assert!(
                    false,
                    "one parse {:?}, separately {:?} and {:?}",
                    one.map(|r| r.1),
                    rows.map(|r| r.len()),
                    fingerprint
                ),
            }
        }
    }
}
