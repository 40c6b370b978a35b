use super::*;
use serde_json::{json, Value};

const SUPPLIERS: [(&str, &str); 3] = [
    (
        "lieferant-de",
        include_str!("../../../../tests/fixtures/suppliers/lieferant-de/definition.json"),
    ),
    (
        "distributor-api",
        include_str!("../../../../tests/fixtures/suppliers/distributor-api/definition.json"),
    ),
    (
        "snapshot-webhooks",
        include_str!("../../../../tests/fixtures/suppliers/snapshot-webhooks/definition.json"),
    ),
];

fn german_csv() -> Value {
    serde_json::from_str(SUPPLIERS[0].1).unwrap()
}

fn pointers(document: &Value) -> Vec<String> {
    Definition::read(document)
        .unwrap_err()
        .into_iter()
        .map(|p| p.pointer)
        .collect()
}

#[test]
fn the_supplier_definitions_are_read_and_written_back_as_they_mean() {
    for (name, text) in SUPPLIERS {
        let document: Value = serde_json::from_str(text).unwrap();
        let definition =
            Definition::read(&document).unwrap_or_else(|problems| panic!("{name}: {problems:#?}"));
        // Written back (defaults filled in) it reads as the same definition.
        let again = Definition::read(&serde_json::to_value(&definition).unwrap()).unwrap();
        assert_eq!(again, definition, "{name}");
    }
}

#[test]
fn a_definition_with_five_mistakes_gets_five_pointers() {
    let mut document = german_csv();
    document["connector"] = json!("lieferant de");
    document["horizon_days"] = json!(0);
    document["fields"]["unit"] = json!({ "map": { "Stk": "each" } });
    document["fields"]["quantity"]["pattern"] = json!("(\\d+) (\\w+)");
    document["identity"] = json!({ "kind": "webhook_id" });
    assert_eq!(
        pointers(&document),
        [
            "/connector",
            "/fields/quantity/pattern",
            "/fields/unit",
            "/horizon_days",
            "/identity/kind"
        ]
    );
}

/// A change to the German supplier's definition, and the pointer its problem must have.
type Mistake = (fn(&mut Value), &'static str);

#[test]
fn every_rule_names_its_place() {
    let cases: Vec<Mistake> = vec![
        (
            |d| d["fields"]["sku"] = json!({"path": "$.sku"}),
            "/fields/sku/path",
        ),
        (
            |d| d["fields"]["sku"] = json!({"column": "A", "position": 1}),
            "/fields/sku",
        ),
        (
            |d| d["format"]["header"] = json!(false),
            "/fields/currency/column",
        ),
        (|d| d["format"]["quote"] = json!(";"), "/format/quote"),
        (
            |d| d["format"]["delimiter"] = json!("§"),
            "/format/delimiter",
        ),
        (
            |d| d["canonicalization"] = json!("json-v1"),
            "/canonicalization",
        ),
        (
            |d| d["values"]["thousands_separator"] = json!(","),
            "/values/thousands_separator",
        ),
        (
            |d| d["values"]["time_zone"] = json!("Europe/Berlinn"),
            "/values/time_zone",
        ),
        (
            |d| d["values"]["time_format"] = json!("%d.%m.%Y %"),
            "/values/time_format",
        ),
        (
            |d| d["publication"] = json!("on_run_complete"),
            "/publication",
        ),
        (|d| d["source_account"] = json!(""), "/source_account"),
        (
            |d| d["format"]["encoding"] = json!("utf-16"),
            "/format/encoding",
        ),
        (|d| d["surprise"] = json!(1), ""),
        (
            |d| d["identity"] = json!({"kind": "body", "path": "$.id"}),
            "/identity/kind",
        ),
    ];
    for (mistake, pointer) in cases {
        let mut document = german_csv();
        mistake(&mut document);
        let found = pointers(&document);
        assert!(
            found.contains(&pointer.to_owned()),
            "{pointer}: {found:?} for {document}"
        );
    }
}

#[test]
fn a_pull_definition_is_checked_for_its_url_paging_and_identity() {
    let mut document: Value = serde_json::from_str(SUPPLIERS[1].1).unwrap();
    document["transport"]["url"] = json!("https://user:pw@api.example/v2");
    document["transport"]["pagination"] = json!({"kind": "next_url", "path": "$.links..next"});
    let found = pointers(&document);
    assert_eq!(
        found,
        [
            "/identity/kind",
            "/transport/pagination/path",
            "/transport/url"
        ],
        "cursor identity without cursor paging, a bad path, credentials in the URL"
    );
}

#[test]
fn the_default_fingerprint_rule_follows_the_format() {
    let csv = Definition::read(&german_csv()).unwrap();
    assert_eq!(csv.canonicalization(), CanonicalizationRule::BytesV1);
    let document: Value = serde_json::from_str(SUPPLIERS[1].1).unwrap();
    let json = Definition::read(&document).unwrap();
    assert_eq!(json.canonicalization(), CanonicalizationRule::JsonV1);
}

#[test]
fn a_problem_quoting_a_long_value_is_capped() {
    let mut document = german_csv();
    document["source_account"] = json!("ä".repeat(100_000));
    let problems = Definition::read(&document).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].pointer, "/source_account");
    assert!(
        problems[0].message.chars().count() <= 503,
        "{}",
        problems[0].message.len()
    );
}

/// A JSON definition reading every term, the breaks from an array in each row.
fn json_terms() -> Value {
    let mut document: Value = serde_json::from_str(SUPPLIERS[1].1).unwrap();
    let fields = &mut document["fields"];
    for (name, path) in [
        ("minimum_order_quantity", "$.moq"),
        ("order_multiple", "$.multiple"),
        ("pack_size", "$.pack.size"),
        ("price_basis", "$.per"),
        ("lead_time_days", "$.lead.days"),
        ("lead_time", "$.lead.text"),
        ("packaging", "$.pack.kind"),
        ("valid_from", "$.valid.from"),
        ("valid_until", "$.valid.until"),
        ("incoterms", "$.incoterms"),
        ("tax_included", "$.tax"),
    ] {
        fields[name] = json!({ "path": path });
    }
    fields["price_breaks"] = json!({
        "each": "$.prices",
        "min_quantity": { "path": "$.qty" },
        "unit_price": { "path": "$.price", "pattern": "^([0-9.]+)" }
    });
    document
}

/// The German CSV with two price breaks in column pairs.
fn csv_pairs() -> Value {
    let mut document = german_csv();
    document["fields"]["price_breaks"] = json!({ "pairs": [
        { "min_quantity": { "column": "Staffel 1 Menge" }, "unit_price": { "column": "Staffel 1 Preis" } },
        { "min_quantity": { "column": "Staffel 2 Menge" }, "unit_price": { "column": "Staffel 2 Preis" } }
    ]});
    document["fields"]["tax_included"] = json!({ "column": "MwSt", "map": { "ja": "true" } });
    document
}

#[test]
fn definitions_with_terms_are_read_and_written_back_as_they_mean() {
    for document in [json_terms(), csv_pairs()] {
        let definition = Definition::read(&document).unwrap_or_else(|p| panic!("{p:#?}"));
        assert!(definition.fields.price_breaks.is_some());
        let written = serde_json::to_value(&definition).unwrap();
        let form = |d: &Value| {
            let mut keys: Vec<String> = d["fields"]["price_breaks"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            keys.sort();
            keys
        };
        assert_eq!(
            form(&written),
            form(&document),
            "the same form, written back"
        );
        assert_eq!(Definition::read(&written).unwrap(), definition);
    }
    let json = Definition::read(&json_terms()).unwrap();
    let names: Vec<&str> = json.fields.declared().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names[..6],
        [
            "sku",
            "quantity",
            "unit",
            "price",
            "currency",
            "observed_at"
        ]
    );
    assert_eq!(
        names[6..],
        TERM_FIELDS,
        "the terms follow in their fixed order"
    );
}

#[test]
fn every_terms_mistake_names_its_place() {
    let pairs = |n: usize| {
        let pair = json!({ "min_quantity": { "column": "M" }, "unit_price": { "column": "P" } });
        json!({ "pairs": vec![pair; n] })
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({ "each": "$.prices", "min_quantity": { "column": "M" }, "unit_price": { "column": "P" } }),
            "/fields/price_breaks/each",
        ),
        (pairs(0), "/fields/price_breaks/pairs"),
        (
            pairs(MAX_PRICE_BREAK_PAIRS + 1),
            "/fields/price_breaks/pairs",
        ),
        (
            json!({ "pairs": [
                { "min_quantity": { "column": "M" }, "unit_price": { "column": "P" } },
                { "min_quantity": { "column": "M2" }, "unit_price": { "column": "P2", "pattern": "([0-9" } }
            ]}),
            "/fields/price_breaks/pairs/1/unit_price/pattern",
        ),
        (
            json!({ "pairs": [{ "min_quantity": { "path": "$.m" }, "unit_price": { "column": "P" } }] }),
            "/fields/price_breaks/pairs/0/min_quantity/path",
        ),
        (
            json!({ "pairs": [{ "min_quantity": { "column": "M", "constant": "1" }, "unit_price": { "column": "P" } }] }),
            "/fields/price_breaks/pairs/0/min_quantity",
        ),
        (
            json!({ "pairs": [{ "min_quantity": { "column": "M" } }] }),
            "/fields/price_breaks/pairs/0",
        ),
        (
            json!({ "each": "$.prices", "min_quantity": { "column": "M" }, "unit_price": { "column": "P" }, "pairs": [] }),
            "/fields/price_breaks",
        ),
        (json!({}), "/fields/price_breaks"),
    ];
    let mut most = german_csv();
    most["fields"]["price_breaks"] = pairs(MAX_PRICE_BREAK_PAIRS);
    assert!(
        Definition::read(&most).is_ok(),
        "the schema's limit is the mapping's"
    );
    for (breaks, pointer) in cases {
        let mut document = german_csv();
        document["fields"]["price_breaks"] = breaks;
        let found = pointers(&document);
        assert!(
            found.contains(&pointer.to_owned()),
            "{pointer}: {found:?} for {}",
            document["fields"]["price_breaks"]
        );
    }
}

#[test]
fn every_json_terms_mistake_names_its_place() {
    let cases: Vec<Mistake> = vec![
        (
            |d| d["fields"]["price_breaks"]["each"] = json!("$.prices[*]"),
            "/fields/price_breaks/each",
        ),
        (
            |d| d["fields"]["price_breaks"]["unit_price"]["pattern"] = json!("(a)(b)"),
            "/fields/price_breaks/unit_price/pattern",
        ),
        (
            |d| d["fields"]["price_breaks"]["min_quantity"] = json!({ "column": "Menge" }),
            "/fields/price_breaks/min_quantity/column",
        ),
        (
            |d| {
                let breaks = d["fields"]["price_breaks"].as_object_mut().unwrap();
                breaks.remove("unit_price");
            },
            "/fields/price_breaks",
        ),
        (
            |d| d["fields"]["lead_time_days"]["pattern"] = json!("[0-9]+"),
            "/fields/lead_time_days/pattern",
        ),
        (
            |d| d["fields"]["tax_included"] = json!({ "path": "tax" }),
            "/fields/tax_included/path",
        ),
        (
            |d| d["fields"]["incoterm"] = json!({ "path": "$.incoterms" }),
            "/fields",
        ),
    ];
    for (mistake, pointer) in cases {
        let mut document = json_terms();
        mistake(&mut document);
        let found = pointers(&document);
        assert!(
            found.contains(&pointer.to_owned()),
            "{pointer}: {found:?} for {}",
            document["fields"]
        );
    }
}

/// The German file's cable, 2,5 m of it, and a bolt, through `document`.
fn cable_and_bolt(document: &Value) -> crate::domain::normalize::Normalized {
    let body = "Artikelnummer;Bestand;Einheit;Preis;W\u{e4}hrung;Stand\r\n\
                NYM-J-3X1.5;2,5;m;1,89;EUR;29.11.2026 08:15\r\n\
                M6-bolt;7;Stk;0,10;EUR;29.11.2026 08:15\r\n";
    let body: Vec<u8> = body.chars().map(|c| c as u32 as u8).collect();
    let definition = Definition::read(document).unwrap();
    let mapping = crate::domain::mapping::Mapping::compile(&definition).unwrap();
    crate::domain::normalize::normalize_mapped(
        &mapping,
        crate::domain::fingerprint::CanonicalizationRule::BytesV1,
        &body,
    )
    .unwrap()
}

#[test]
fn a_unit_with_declared_places_takes_a_decimal_quantity_and_the_others_stay_whole() {
    let mut document = german_csv();
    let whole = cable_and_bolt(&document);
    assert_eq!(
        whole.rows.len(),
        1,
        "only the bolt: metres count whole units"
    );
    assert!(whole.refused[0]
        .reason
        .contains("quantity 2.5 is not a whole number"));
    document["unit_decimal_places"] = json!({ "Metre": 1 });
    let cable = cable_and_bolt(&document);
    assert!(cable.refused.is_empty(), "{:?}", cable.refused);
    let quantities: Vec<(&str, &str)> = cable
        .rows
        .iter()
        .map(|r| (r.quantity_basis.as_str(), r.quantity.as_str()))
        .collect();
    assert_eq!(quantities, [("metre", "2.5"), ("each", "7")]);
}

#[test]
fn the_manufacturer_and_its_part_number_are_mapped_beside_the_sku() {
    let mut document = german_csv();
    document["fields"]["mpn"] =
        json!({ "column": "Artikelnummer", "map": { "M6-bolt": "iso4017-m6x20" } });
    document["fields"]["manufacturer"] = json!({ "constant": "Würth" });
    document["unit_decimal_places"] = json!({ "metre": 1 });
    let read = cable_and_bolt(&document);
    assert_eq!(read.rows[1].item.key(), "ISO4017-M6X20~mWüRTH~each~new");
    assert_eq!(read.rows[1].source_record, "M6-bolt");
    let written = serde_json::to_value(Definition::read(&document).unwrap()).unwrap();
    assert_eq!(written["fields"]["manufacturer"]["constant"], "Würth");
    assert_eq!(written["unit_decimal_places"], json!({ "metre": 1 }));
}

#[test]
fn bad_places_get_their_pointers() {
    let mut document = german_csv();
    document["unit_decimal_places"] = json!({ "metre": 7, "two words": 1 });
    document["fields"]["manufacturer"] = json!({ "column": "Hersteller", "constant": "X" });
    assert_eq!(
        pointers(&document),
        [
            "/fields/manufacturer",
            "/unit_decimal_places",
            "/unit_decimal_places/metre"
        ]
    );
}
