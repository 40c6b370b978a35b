//! The commercial terms as each format maps them into the row object.

use crate::domain::canonical_json::canonical_bytes;
use crate::domain::definition::Definition;
use crate::domain::mapping::{Mapping, PageRead};
use serde_json::{json, Value};

fn fixture_definition(supplier: &str) -> Value {
    let path = format!(
        "{}/../tests/fixtures/suppliers/{supplier}/definition.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn mapping(document: &Value) -> Mapping {
    let definition = Definition::read(document).unwrap_or_else(|p| panic!("{p:#?}"));
    Mapping::compile(&definition).unwrap_or_else(|p| panic!("{p:#?}"))
}

/// Each row as its place and canonical JSON, or its refusal.
fn rows(page: &PageRead) -> Vec<(String, Result<Value, String>)> {
    page.rows
        .iter()
        .map(|r| {
            let row = r.row.as_ref().map_err(Clone::clone).map(|n| {
                let text = String::from_utf8(canonical_bytes(n)).unwrap();
                serde_json::from_str(&text).unwrap()
            });
            (r.place.clone(), row)
        })
        .collect()
}

/// The canonical bytes of a row the test expects: the mapped row must be exactly these.
fn canonical(row: &Result<Value, String>) -> String {
    let node = row.as_ref().unwrap_or_else(|e| panic!("{e}"));
    let bytes = serde_json::to_vec(node).unwrap();
    let parsed = crate::domain::canonical_json::parse_node(&bytes).unwrap();
    String::from_utf8(canonical_bytes(&parsed)).unwrap()
}

fn json_terms() -> Value {
    json!({
        "definition_format": 1,
        "connector": "terms-api",
        "source_account": "ACC-1",
        "transport": { "kind": "webhook" },
        "format": { "kind": "json", "rows": "$.offers[*]" },
        "fields": {
            "sku": { "path": "$.mpn" },
            "quantity": { "path": "$.stock" },
            "unit": { "constant": "each" },
            "price": { "path": "$.price" },
            "currency": { "constant": "EUR" },
            "observed_at": { "path": "$.at" },
            "minimum_order_quantity": { "path": "$.moq" },
            "order_multiple": { "path": "$.multiple" },
            "pack_size": { "path": "$.pack.size" },
            "price_basis": { "path": "$.per" },
            "lead_time_days": { "path": "$.lead.days" },
            "lead_time": { "path": "$.lead.text" },
            "packaging": { "path": "$.pack.kind", "map": { "TR": "reel", "CT": "cut-tape" } },
            "valid_from": { "path": "$.valid.from" },
            "valid_until": { "path": "$.valid.until" },
            "incoterms": { "path": "$.incoterms" },
            "tax_included": { "path": "$.tax" },
            "price_breaks": {
                "each": "$.prices",
                "min_quantity": { "path": "$.qty" },
                "unit_price": { "path": "$['unit price']" }
            }
        },
        "identity": { "kind": "webhook_id" }
    })
}

#[test]
fn a_json_row_gives_every_term_and_its_breaks_from_an_array() {
    let body = json!({ "offers": [
        {
            "mpn": "LM358DR", "stock": 12000, "price": "0.45", "at": "2026-11-29T08:00:00Z",
            "moq": 1000, "multiple": "250", "per": 1,
            "pack": { "size": 3000, "kind": "TR" },
            "lead": { "days": 14, "text": " 14 days " },
            "valid": { "from": "2026-12-01T00:00:00Z", "until": "2026-12-31T23:59:59Z" },
            "incoterms": "FCA", "tax": false,
            "prices": [
                { "qty": 1, "unit price": "0.45" },
                { "qty": 1000, "unit price": 0.412 },
                { "qty": "5000", "unit price": "0.39", "note": "ignored" }
            ]
        },
        {
            "mpn": "NE555P", "stock": 40, "price": "0.21", "at": "2026-11-29T08:00:00Z",
            "tax": "TRUE", "prices": [], "lead": { "days": null }
        }
    ]});
    let page = mapping(&json_terms())
        .read(body.to_string().as_bytes(), 5_000)
        .unwrap();
    let read = rows(&page);
    let first = json!({
        "currency": "EUR", "incoterms": "FCA", "lead_time": "14 days", "lead_time_days": 14,
        "minimum_order_quantity": "1000", "observed_at": "2026-11-29T08:00:00Z",
        "order_multiple": "250", "pack_size": "3000", "packaging": "reel", "price": "0.45",
        "price_basis": "1",
        "price_breaks": [
            { "min_quantity": "1", "unit_price": "0.45" },
            { "min_quantity": "1000", "unit_price": "0.412" },
            { "min_quantity": "5000", "unit_price": "0.39" }
        ],
        "quantity": 12000, "sku": "LM358DR", "tax_included": false, "unit": "each",
        "valid_from": "2026-12-01T00:00:00Z", "valid_until": "2026-12-31T23:59:59Z"
    });
    let second = json!({
        "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z", "price": "0.21",
        "quantity": 40, "sku": "NE555P", "tax_included": true, "unit": "each"
    });
    assert_eq!(read[0], ("/offers/0".to_owned(), Ok(first.clone())));
    assert_eq!(read[1], ("/offers/1".to_owned(), Ok(second)));
    // Exactly these bytes, numbers as written: 14 a number, "1000" a string.
    let bytes = page.rows[0].row.as_ref().map(canonical_bytes).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), canonical(&Ok(first)));
}

#[test]
fn bad_json_terms_are_each_named_in_their_row() {
    let body = json!({ "offers": [
        {
            "mpn": "A", "stock": 1, "price": "1.00", "at": "2026-11-29T08:00:00Z",
            "moq": 1e3, "lead": { "days": 14.5 }, "tax": "ja", "per": true,
            "prices": [{ "qty": 1, "unit price": "1.00" }, "x", { "qty": 5 }]
        },
        {
            "mpn": "B", "stock": 1, "price": "1.00", "at": "2026-11-29T08:00:00Z",
            "prices": "cheap"
        },
        {
            "mpn": "C", "stock": 1, "price": "1.00", "at": "2026-11-29T08:00:00Z",
            "prices": [{ "qty": [1], "unit price": "1.00" }, {}]
        }
    ]});
    // serde_json writes 1e3 as 1000.0: the exponent is spelled out in the body by hand.
    let text = body.to_string().replace("1000.0", "1e3");
    let page = mapping(&json_terms()).read(text.as_bytes(), 5_000).unwrap();
    let read = rows(&page);
    let why = read[0].1.as_ref().unwrap_err();
    for part in [
        "minimum_order_quantity: \"1e3\" is written with an exponent",
        "price_basis: true is not a decimal",
        "lead_time_days: \"14.5\" is not a whole number",
        "tax_included: \"ja\" is not true or false",
        "price_breaks: $.prices[1] is not an object; $.prices[2]: a min_quantity without a unit_price",
    ] {
        assert!(why.contains(part), "{part} in {why}");
    }
    assert_eq!(
        read[1].1,
        Err("price_breaks: $.prices is not an array".to_owned())
    );
    assert_eq!(
        read[2].1,
        Err("price_breaks: $.prices[0]: min_quantity: an array is not a decimal".to_owned()),
        "an empty element is no break"
    );
}

/// The German supplier with three price breaks in column pairs, validity and tax.
fn german_terms() -> Value {
    let mut document = fixture_definition("lieferant-de");
    let fields = &mut document["fields"];
    fields["valid_until"] = json!({ "column": "Gültig bis" });
    fields["tax_included"] =
        json!({ "column": "inkl. MwSt", "map": { "ja": "true", "nein": "false" } });
    fields["minimum_order_quantity"] = json!({ "column": "Mindestmenge" });
    let pair = |n: u32| {
        json!({
            "min_quantity": { "column": format!("Staffel {n} Menge") },
            "unit_price": { "column": format!("Staffel {n} Preis") }
        })
    };
    fields["price_breaks"] = json!({ "pairs": [pair(1), pair(2), pair(3)] });
    document
}

fn windows_1252(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}

#[test]
fn csv_column_pairs_read_with_german_decimals_and_skip_the_empty_ones() {
    let header = "Artikelnummer;Bestand;Einheit;Preis;Währung;Stand;Gültig bis;inkl. MwSt;\
                  Mindestmenge;Staffel 1 Menge;Staffel 1 Preis;Staffel 2 Menge;Staffel 2 Preis;\
                  Staffel 3 Menge;Staffel 3 Preis\r\n";
    let body = format!(
        "{header}\
         LM358DR;1.500;Stk;0,45;EUR;29.11.2026 08:00;31.12.2026 23:59;ja;1.000;1;0,45;1.000;0,412;10.000;0,39\r\n\
         NE555P;40;Stk;0,21;EUR;29.11.2026 08:00;;nein;;1;0,21;;;;\r\n\
         AX-440-R2;6;Stk;820,00;EUR;29.11.2026 08:00;;;;1;820,00;10;;;\r\n\
         NYM-J;250;m;1,89;EUR;29.11.2026 08:00;;vielleicht;;;;;;;\r\n"
    );
    let page = mapping(&german_terms())
        .read(&windows_1252(&body), 5_000)
        .unwrap();
    let read = rows(&page);
    let base = |sku: &str, quantity: u64, price: &str| {
        json!({
            "currency": "EUR", "observed_at": "2026-11-29T07:00:00Z", "price": price,
            "quantity": quantity, "sku": sku, "unit": "each"
        })
    };
    let mut first = base("LM358DR", 1500, "0.45");
    first["valid_until"] = json!("2026-12-31T22:59:00Z");
    first["tax_included"] = json!(true);
    first["minimum_order_quantity"] = json!("1000");
    first["price_breaks"] = json!([
        { "min_quantity": "1", "unit_price": "0.45" },
        { "min_quantity": "1000", "unit_price": "0.412" },
        { "min_quantity": "10000", "unit_price": "0.39" }
    ]);
    let mut second = base("NE555P", 40, "0.21");
    second["tax_included"] = json!(false);
    second["price_breaks"] = json!([{ "min_quantity": "1", "unit_price": "0.21" }]);
    assert_eq!(read[0], ("line 2".to_owned(), Ok(first.clone())));
    assert_eq!(read[1], ("line 3".to_owned(), Ok(second)));
    assert_eq!(
        read[2],
        (
            "line 4".to_owned(),
            Err("price_breaks: pair 2: a min_quantity without a unit_price".to_owned())
        )
    );
    assert_eq!(
        read[3].1,
        Err("tax_included: \"vielleicht\" is not true or false".to_owned())
    );
    let bytes = page.rows[0].row.as_ref().map(canonical_bytes).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), canonical(&Ok(first)));
}

#[test]
fn a_pair_column_the_header_lacks_is_named_with_the_others() {
    let body = "Artikelnummer;Bestand;Einheit;Preis;Währung;Stand;Gültig bis;inkl. MwSt;\
                Mindestmenge;Staffel 1 Menge;Staffel 1 Preis;Staffel 2 Menge;Staffel 3 Preis\r\n\
                A-1;5;Stk;1,00;EUR;29.11.2026 08:00;;;;;;;\r\n";
    let why = mapping(&german_terms())
        .read(&windows_1252(body), 5_000)
        .unwrap_err();
    assert!(
        why.starts_with("the header lacks the columns \"Staffel 2 Preis\", \"Staffel 3 Menge\""),
        "{why}"
    );
}

#[test]
fn csv_pairs_by_position_and_a_constant_quantity() {
    let mut document = german_terms();
    document["format"]["header"] = json!(false);
    let fields = document["fields"].as_object_mut().unwrap();
    let position = |n: u32| json!({ "position": n });
    for (name, at) in [
        ("sku", 1),
        ("quantity", 2),
        ("unit", 3),
        ("price", 4),
        ("currency", 5),
        ("observed_at", 6),
    ] {
        let map = fields[name].get("map").cloned();
        fields[name] = position(at);
        if let Some(map) = map {
            fields[name]["map"] = map;
        }
    }
    for name in ["valid_until", "tax_included", "minimum_order_quantity"] {
        fields.remove(name);
    }
    fields["price_breaks"] = json!({ "pairs": [
        { "min_quantity": { "constant": "1" }, "unit_price": { "position": 4 } },
        { "min_quantity": { "position": 7 }, "unit_price": { "position": 8 } }
    ]});
    let body =
        "A-1;5;Stk;1,00;EUR;29.11.2026 08:00;100;0,90\r\nA-2;5;Stk;2,00;EUR;29.11.2026 08:00\r\n";
    let page = mapping(&document).read(body.as_bytes(), 5_000).unwrap();
    let breaks: Vec<Value> = rows(&page)
        .into_iter()
        .map(|(_, row)| row.unwrap()["price_breaks"].clone())
        .collect();
    assert_eq!(
        breaks,
        [
            json!([{ "min_quantity": "1", "unit_price": "1.00" }, { "min_quantity": "100", "unit_price": "0.90" }]),
            json!([{ "min_quantity": "1", "unit_price": "2.00" }]),
        ]
    );
}

#[test]
fn xml_pairs_read_by_element_and_attribute_paths() {
    let mut document = fixture_definition("xml-catalog");
    let pair = |n: u32| {
        json!({
            "min_quantity": { "path": format!("p:breaks/p:b{n}/@from") },
            "unit_price": { "path": format!("p:breaks/p:b{n}") }
        })
    };
    document["fields"]["price_breaks"] = json!({ "pairs": [pair(1), pair(2)] });
    document["fields"]["packaging"] = json!({ "path": "c:packaging", "map": { "Gurt": "tape" } });
    document["fields"]["lead_time_days"] = json!({ "path": "c:lead/@days" });
    let body = r#"<catalog xmlns="urn:example:catalog:2" xmlns:pr="urn:example:pricing:1"><articles>
<article supplierPartId="A-1"><stock unit="PCE">5</stock><pr:price currency="EUR"><pr:amount>1.00</pr:amount></pr:price><updated>2026-11-29T07:00:00Z</updated>
  <packaging>Gurt</packaging><lead days="21"/>
  <pr:breaks><pr:b1 from="1">1.00</pr:b1><pr:b2 from="100">0.85</pr:b2></pr:breaks></article>
<article supplierPartId="A-2"><stock unit="PCE">5</stock><pr:price currency="EUR"><pr:amount>2.00</pr:amount></pr:price><updated>2026-11-29T07:00:00Z</updated>
  <pr:breaks><pr:b1 from="1">2.00</pr:b1><pr:b2>1.80</pr:b2></pr:breaks></article>
<article supplierPartId="A-3"><stock unit="PCE">5</stock><pr:price currency="EUR"><pr:amount>3.00</pr:amount></pr:price><updated>2026-11-29T07:00:00Z</updated></article>
</articles></catalog>"#;
    let page = mapping(&document).read(body.as_bytes(), 5_000).unwrap();
    let read = rows(&page);
    let first = json!({
        "currency": "EUR", "lead_time_days": 21, "observed_at": "2026-11-29T07:00:00Z",
        "packaging": "tape", "price": "1.00",
        "price_breaks": [
            { "min_quantity": "1", "unit_price": "1.00" },
            { "min_quantity": "100", "unit_price": "0.85" }
        ],
        "quantity": 5, "sku": "A-1", "unit": "each"
    });
    assert_eq!(read[0], ("line 2".to_owned(), Ok(first)));
    assert_eq!(
        read[1].1,
        Err("price_breaks: pair 2: a unit_price without a min_quantity".to_owned())
    );
    let third = read[2].1.as_ref().unwrap();
    assert!(third.get("price_breaks").is_none(), "{third}");
}

#[test]
fn a_definition_built_without_read_is_still_refused_each_outside_json() {
    let mut document = fixture_definition("lieferant-de");
    document["fields"]["price_breaks"] = json!({
        "each": "$.prices",
        "min_quantity": { "column": "Menge" },
        "unit_price": { "column": "Preis" }
    });
    let definition: Definition = serde_json::from_value(document).unwrap();
    let problems = Mapping::compile(&definition).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].pointer, "/fields/price_breaks/each");
    assert_eq!(
        problems[0].message,
        "each is read in JSON bodies; list the breaks as pairs"
    );
}

#[test]
fn a_definition_built_without_read_is_still_refused_no_pairs_or_a_bad_pair() {
    let mut document = fixture_definition("lieferant-de");
    document["fields"]["price_breaks"] = json!({ "pairs": [] });
    let definition: Definition = serde_json::from_value(document.clone()).unwrap();
    let problems = Mapping::compile(&definition).unwrap_err();
    let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(pointers, ["/fields/price_breaks/pairs"]);
    document["fields"]["price_breaks"] = json!({ "pairs": [
        { "min_quantity": { "column": "M" }, "unit_price": { "column": "P", "pattern": "(" } }
    ]});
    let definition: Definition = serde_json::from_value(document).unwrap();
    let problems = Mapping::compile(&definition).unwrap_err();
    let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(pointers, ["/fields/price_breaks/pairs/0/unit_price"]);
}
