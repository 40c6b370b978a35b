//! The whole range of what an integration engineer writes and a supplier sends under a
//! connector definition (docs/connectors.md): any JSON as a definition, any text as a path,
//! any bytes as a body under each sample supplier's definition, numbers with every separator
//! convention, times of every year 0000-9999 in a zone with daylight saving. For each: nothing
//! panics, and an accepted value reads back as what was written. 500 cases each by default;
//! `FEEDSAFE_FUZZ_CASES=100000` for a long run. No engine needed.

use feedsafe::domain::definition::{Definition, Values};
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::mapping::json_path::JsonPath;
use feedsafe::domain::mapping::values::Conventions;
use feedsafe::domain::mapping::Mapping;
use feedsafe::domain::normalize::normalize_mapped;
use proptest::prelude::*;
use serde_json::{json, Value};

fn cases() -> u32 {
    std::env::var("FEEDSAFE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

const SUPPLIERS: [&str; 4] = [
    "lieferant-de",
    "distributor-api",
    "xml-catalog",
    "snapshot-webhooks",
];

fn definition(supplier: &str) -> Value {
    let path = format!(
        "{}/../tests/fixtures/suppliers/{supplier}/definition.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn mapping(supplier: &str) -> Mapping {
    Mapping::compile(&Definition::read(&definition(supplier)).unwrap()).unwrap()
}

/// Any JSON value, a few levels deep, with the keys a definition uses among others.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("kind".to_owned()),
        Just("path".to_owned()),
        Just("column".to_owned()),
        Just("rows".to_owned()),
        "[a-z_]{1,12}",
        any::<String>(),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[$.\\[\\]'*@:/a-z0-9 -]{0,20}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A sample definition with one value replaced (or added) anywhere in it.
fn mutated_definition() -> impl Strategy<Value = Value> {
    (0..SUPPLIERS.len(), any::<prop::sample::Index>(), any_json()).prop_map(
        |(supplier, at, value)| {
            let mut document = definition(SUPPLIERS[supplier]);
            let mut pointers = Vec::new();
            collect_pointers(&document, String::new(), &mut pointers);
            let pointer = at.get(&pointers).clone();
            if let Some(slot) = document.pointer_mut(&pointer) {
                *slot = value;
            }
            document
        },
    )
}

fn collect_pointers(value: &Value, at: String, into: &mut Vec<String>) {
    into.push(at.clone());
    if let Value::Object(map) = value {
        for (key, member) in map {
            let escaped = key.replace('~', "~0").replace('/', "~1");
            collect_pointers(member, format!("{at}/{escaped}"), into);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any document: read without panicking; accepted, it compiles, and written back it reads
    /// as the same definition. Every problem's pointer names a place in the document (or the
    /// document itself).
    #[test]
    fn any_definition_is_read_or_refused_with_pointers_into_it(document in prop_oneof![any_json(), mutated_definition()]) {
        match Definition::read(&document) {
            Ok(definition) => {
                prop_assert!(Mapping::compile(&definition).is_ok());
                let again = Definition::read(&serde_json::to_value(&definition).unwrap());
                prop_assert_eq!(again.as_ref().ok(), Some(&definition));
            }
            Err(problems) => {
                prop_assert!(!problems.is_empty());
                for problem in problems {
                    let parent = problem.pointer.rsplit_once('/').map_or("", |(p, _)| p);
                    prop_assert!(
                        document.pointer(&problem.pointer).is_some() || document.pointer(parent).is_some(),
                        "{} is not in {}", problem.pointer, document
                    );
                }
            }
        }
    }

    /// Any text as a path: parsed or refused with an offset inside it, and a parsed path
    /// selects in any document without panicking.
    #[test]
    fn any_text_is_a_path_or_refused_at_an_offset_in_it(text in prop_oneof!["[$.\\[\\]'\"*a-z0-9\\\\-]{0,24}", any::<String>()], document in any_json()) {
        for parsed in [JsonPath::parse(&text), JsonPath::parse_rows(&text)] {
            match parsed {
                Ok(path) => {
                    let body = document.to_string();
                    let root = feedsafe::domain::canonical_json::parse_node(body.as_bytes()).unwrap();
                    let _ = path.select(&root);
                    let _ = path.pointer();
                }
                Err(e) => prop_assert!(e.offset <= text.chars().count(), "{}: {}", text, e),
            }
        }
    }

    /// Any bytes under each supplier's definition: rows or a refusal, never a panic.
    #[test]
    fn any_body_under_any_supplier_is_read_or_refused(supplier in 0..SUPPLIERS.len(), body in prop_oneof![
        any::<Vec<u8>>(),
        "[a-zA-Z0-9;,.\"\r\n<>/=:@&# -]{0,200}".prop_map(String::into_bytes),
    ]) {
        let mapping = mapping(SUPPLIERS[supplier]);
        let read = mapping.read(&body, 50);
        // The row rules are handed the same rows as they are read: each one an offer or a
        // refusal, under every rule.
        for rule in [CanonicalizationRule::BytesV1, CanonicalizationRule::JsonV1, CanonicalizationRule::JsonUnorderedRowsV1] {
            if let (Ok(page), Ok(normalized)) = (&read, normalize_mapped(&mapping, rule, &body)) {
                prop_assert_eq!(normalized.rows.len() + normalized.refused.len(), page.rows.len());
            }
        }
    }

    /// A CSV cell written back is the value read: any sku of the accepted characters, any
    /// whole number with German grouping, any price with a decimal comma.
    #[test]
    fn csv_values_with_german_conventions_read_back_as_written(
        sku in "[A-Z0-9][A-Z0-9._-]{0,30}",
        quantity in 0u64..(1 << 53),
        cents in 0u64..10_000_000_000,
    ) {
        let grouped = group(quantity, '.');
        let price = format!("{},{:02}", group(cents / 100, '.'), cents % 100);
        let body = format!(
            "Artikelnummer;Bestand;Einheit;Preis;Währung;Stand\r\n{sku};{grouped};Stk;{price};EUR;29.11.2026 08:00\r\n"
        );
        let body: Vec<u8> = body.chars().map(|c| c as u32 as u8).collect();
        let page = mapping("lieferant-de").read(&body, 10).unwrap();
        let row = page.rows[0].row.as_ref().unwrap();
        let text = String::from_utf8(feedsafe::domain::canonical_json::canonical_bytes(row)).unwrap();
        let read: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(read["sku"].as_str(), Some(sku.as_str()));
        prop_assert_eq!(read["quantity"].as_u64(), Some(quantity));
        prop_assert_eq!(read["price"].as_str().map(str::to_owned), Some(format!("{}.{:02}", cents / 100, cents % 100)));
        // And as the observation keeps them, through the row rules the rows are handed to.
        let stored = normalize_mapped(&mapping("lieferant-de"), CanonicalizationRule::BytesV1, &body).unwrap();
        prop_assert!(stored.refused.is_empty(), "{:?}", stored.refused);
        prop_assert_eq!(&stored.rows[0].source_record, &sku);
        prop_assert_eq!(stored.rows[0].quantity.as_str(), quantity.to_string());
        prop_assert_eq!(stored.rows[0].price.as_str().to_owned(), format!("{}.{:02}", cents / 100, cents % 100));
    }

    /// Any instant of years 0000-9999, written as Berlin's wall-clock time, reads back as that
    /// instant, or is refused because the wall clock shows it twice (a daylight-saving fold).
    #[test]
    fn local_times_of_any_year_read_back_or_are_refused_as_ambiguous(second in -62_167_219_200i64..253_402_300_799) {
        let conventions = Conventions::compile(&Values {
            decimal_separator: ",".into(),
            thousands_separator: ".".into(),
            time_format: Some("%Y-%m-%d %H:%M:%S".into()),
            time_zone: Some("Europe/Berlin".into()),
        }).unwrap();
        let zone = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        let Ok(instant) = jiff::Timestamp::from_second(second) else {
            return Ok(());
        };
        let zoned = instant.to_zoned_datetime(zone);
        let wall = zoned.strftime("%Y-%m-%d %H:%M:%S").to_string();
        match conventions.time(&wall) {
            Ok(read) => prop_assert_eq!(read, instant.to_string()),
            Err(why) => prop_assert!(
                why.contains("skip or repeat") || !(0..=9999).contains(&zoned.year()),
                "{}: {}", wall, why
            ),
        }
    }
}

/// `n` with `sep` between groups of three digits.
fn group(n: u64, sep: char) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}
