use super::*;
use crate::domain::canonical_json::canonical_bytes;
use serde_json::{json, Value};

fn fixture(supplier: &str, file: &str) -> Vec<u8> {
    let path = format!(
        "{}/../tests/fixtures/suppliers/{supplier}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn definition(supplier: &str) -> Value {
    serde_json::from_slice(&fixture(supplier, "definition.json")).unwrap()
}

fn mapping(document: &Value) -> Mapping {
    let definition = Definition::read(document).unwrap_or_else(|p| panic!("{p:#?}"));
    Mapping::compile(&definition).unwrap_or_else(|p| panic!("{p:#?}"))
}

/// Each row as its place and canonical JSON (or its refusal).
fn shown(page: &PageRead) -> Vec<(String, Result<String, String>)> {
    page.rows
        .iter()
        .map(|r| {
            let row = r
                .row
                .as_ref()
                .map(|n| String::from_utf8(canonical_bytes(n)).unwrap())
                .map_err(Clone::clone);
            (r.place.clone(), row)
        })
        .collect()
}

fn ok(place: &str, row: Value) -> (String, Result<String, String>) {
    (place.to_owned(), Ok(row.to_string()))
}

#[test]
fn a_german_windows_1252_csv_becomes_plain_rows() {
    let page = mapping(&definition("lieferant-de"))
        .read(&fixture("lieferant-de", "bestand-2026-11-29.csv"), 5_000)
        .unwrap();
    let at = |t: &str| json!(t);
    assert_eq!(
        shown(&page),
        [
            ok(
                "line 2",
                json!({"currency":"EUR","observed_at":at("2026-11-29T07:00:00Z"),"price":"0.42","quantity":1500,"sku":"LM358DR","unit":"each"})
            ),
            ok(
                "line 3",
                json!({"currency":"EUR","observed_at":at("2026-11-29T07:00:00Z"),"price":"1234.50","quantity":6,"sku":"AX-440-R2","unit":"each"})
            ),
            ok(
                "line 4",
                json!({"currency":"EUR","observed_at":at("2026-11-29T07:15:00Z"),"price":"1.89","quantity":250,"sku":"NYM-J-3X1.5","unit":"metre"})
            ),
        ]
    );
}

#[test]
fn lines_are_counted_alike_with_crlf_lf_and_skipped_preamble_lines() {
    let crlf = fixture("lieferant-de", "bestand-2026-11-29.csv");
    let lf: Vec<u8> = crlf.iter().copied().filter(|b| *b != b'\r').collect();
    let mut preamble = b"Bestandsliste\r\nExport vom 29.11.2026\r\n".to_vec();
    preamble.extend_from_slice(&crlf);
    let mut skipping = definition("lieferant-de");
    skipping["format"]["skip_rows"] = json!(2);
    for (body, document, first) in [
        (crlf, definition("lieferant-de"), "line 2"),
        (lf, definition("lieferant-de"), "line 2"),
        (preamble, skipping, "line 4"),
    ] {
        let page = mapping(&document).read(&body, 5_000).unwrap();
        assert_eq!(page.rows[0].place, first);
        assert!(page.rows.iter().all(|r| r.row.is_ok()), "{:?}", page.rows);
    }
}

#[test]
fn every_bad_row_is_named_by_its_line_beside_the_good_ones() {
    let body = "Artikelnummer;Bestand;Einheit;Preis;Währung;Stand\r\n\
                A-1;viele;Stk;1,00;EUR;29.11.2026 08:00\r\n\
                A-2;5;Stk;1,00;EUR;29.11.2026 08:00\r\n\
                A-3;5;Stk;1.0.0;EUR;29.11.2026 08:00\r\n\
                A-4;5;Stk;1,00;EUR;29.03.2026 02:30\r\n";
    let body: Vec<u8> = body.chars().map(|c| c as u32 as u8).collect();
    let page = mapping(&definition("lieferant-de"))
        .read(&body, 5_000)
        .unwrap();
    let places: Vec<(String, bool)> = shown(&page)
        .into_iter()
        .map(|(place, row)| (place, row.is_ok()))
        .collect();
    assert_eq!(
        places,
        [
            ("line 2".to_owned(), false),
            ("line 3".to_owned(), true),
            ("line 4".to_owned(), false),
            ("line 5".to_owned(), false)
        ]
    );
    let why = page.rows[0].row.as_ref().unwrap_err();
    assert!(
        why.starts_with("quantity: \"viele\" is not a number"),
        "{why}"
    );
    let why = page.rows[3].row.as_ref().unwrap_err();
    assert!(why.contains("skip or repeat"), "{why}");
}

#[test]
fn columns_the_header_lacks_are_all_named_in_one_refusal() {
    let body = b"Artikelnummer;Menge;Einheit;Preis;Waehrung;Stand\r\nA-1;5;Stk;1,00;EUR;29.11.2026 08:00\r\n";
    let why = mapping(&definition("lieferant-de"))
        .read(body, 5_000)
        .unwrap_err();
    assert!(
        why.starts_with("the header lacks the columns \"Bestand\", \"Währung\""),
        "{why}"
    );
}

#[test]
fn a_nested_json_api_page_is_read_with_its_patterns_maps_and_document_time() {
    let page = mapping(&definition("distributor-api"))
        .read(&fixture("distributor-api", "page-1.json"), 5_000)
        .unwrap();
    assert_eq!(
        shown(&page),
        [
            ok(
                "/data/items/0",
                json!({"currency":"USD","price":"0.41","quantity":500,"sku":"LM358DR","unit":"each"})
            ),
            ok(
                "/data/items/1",
                json!({"currency":"USD","observed_at":"2026-11-29T07:55:00Z","price":"7.85","quantity":12,"sku":"TPS7A4701RGWR","unit":"each"})
            ),
        ]
    );
    assert_eq!(
        page.default_observed_at.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-11-29T08:00:00Z")
    );
}

#[test]
fn a_snapshot_webhook_gives_its_snapshot_id_and_field_defaults() {
    let page = mapping(&definition("snapshot-webhooks"))
        .read(&fixture("snapshot-webhooks", "snapshot-8812.json"), 5_000)
        .unwrap();
    assert_eq!(page.snapshot_id.as_deref(), Some("SNAP-8812"));
    assert_eq!(
        shown(&page),
        [
            ok(
                "/stock/0",
                json!({"currency":"EUR","price":"0.39","quantity":1200,"sku":"LM358DR","unit":"each"})
            ),
            ok(
                "/stock/1",
                json!({"currency":"USD","price":"0.21","quantity":40,"sku":"NE555P","unit":"each"})
            ),
        ]
    );
    let missing = br#"{"stock":[]}"#;
    let why = mapping(&definition("snapshot-webhooks"))
        .read(missing, 5_000)
        .unwrap_err();
    assert_eq!(why, "snapshot_id is missing at $.snapshot_id");
}

#[test]
fn more_rows_than_the_limit_refuse_the_body() {
    let body = br#"{"snapshot_id":"S","stock":[{},{},{}]}"#;
    let why = mapping(&definition("snapshot-webhooks"))
        .read(body, 2)
        .unwrap_err();
    assert_eq!(why, "3 rows exceed the limit of 2 per delivery");
}

#[test]
fn an_xml_catalog_is_read_by_namespace_not_by_prefix() {
    let page = mapping(&definition("xml-catalog"))
        .read(&fixture("xml-catalog", "catalog-2026-11-29.xml"), 5_000)
        .unwrap();
    assert_eq!(
        shown(&page),
        [
            ok(
                "line 5",
                json!({"currency":"EUR","observed_at":"2026-11-29T07:00:00Z","price":"0.42","quantity":1500,"sku":"LM358DR","unit":"each"})
            ),
            ok(
                "line 11",
                json!({"currency":"EUR","observed_at":"2026-11-29T07:00:00Z","price":"1234.50","quantity":6,"sku":"AX-440-R2","unit":"each"})
            ),
        ]
    );
}

#[test]
fn xml_with_a_dtd_an_unknown_entity_or_too_deep_nesting_is_refused() {
    let xml = mapping(&definition("xml-catalog"));
    let refused = |body: &str| xml.read(body.as_bytes(), 5_000).unwrap_err();
    let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><catalog xmlns="urn:example:catalog:2">&lol2;</catalog>"#;
    assert!(refused(laughs).contains("(DTD) is not accepted"));
    let xxe = r#"<!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><c>&x;</c>"#;
    assert!(refused(xxe).contains("(DTD) is not accepted"));
    let unknown = r#"<catalog xmlns="urn:example:catalog:2"><articles><article supplierPartId="A">&nbsp;</article></articles></catalog>"#;
    assert!(refused(unknown).contains("&nbsp;"), "{}", refused(unknown));
    let deep = format!("{}{}", "<a>".repeat(65), "</a>".repeat(65));
    assert!(refused(&deep).contains("max_depth 64"));
    assert!(refused("<catalog><unclosed></catalog>").contains("not well-formed"));
}

#[test]
fn a_bad_article_is_named_by_its_line_and_the_others_are_read() {
    let body = r#"<catalog xmlns="urn:example:catalog:2" xmlns:p="urn:example:pricing:1"><articles>
<article supplierPartId="A-1"><stock unit="PCE">viele</stock><p:price currency="EUR"><p:amount>1.00</p:amount></p:price><updated>2026-11-29T07:00:00Z</updated></article>
<article supplierPartId="A-2"><stock unit="PCE">5</stock><p:price currency="EUR"><p:amount>1.00</p:amount></p:price><updated>2026-11-29T07:00:00Z</updated></article>
</articles></catalog>"#;
    let page = mapping(&definition("xml-catalog"))
        .read(body.as_bytes(), 5_000)
        .unwrap();
    let rows: Vec<(String, bool)> = shown(&page)
        .into_iter()
        .map(|(p, r)| (p, r.is_ok()))
        .collect();
    assert_eq!(
        rows,
        [("line 2".to_owned(), false), ("line 3".to_owned(), true)]
    );
}

/// A JSON body's fingerprint comes from the read's own parse: the same as
/// `Fingerprint::compute` under every rule, with rows at member names, at an index, or at
/// the root, and the unordered rule's refusal where no names lead to the rows.
#[test]
fn a_mapped_fingerprint_is_the_one_computed_from_the_body() {
    use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
    use crate::domain::normalize::normalize_mapped;
    let rules = [
        CanonicalizationRule::BytesV1,
        CanonicalizationRule::JsonV1,
        CanonicalizationRule::JsonUnorderedRowsV1,
    ];
    let nested = br#"{"meta":{"generated_at":"2026-11-29T08:00:00Z"},"data":{"items":[[{"mpn":"B\"\\\u00e9","stock":"3 In Stock","uom":"EA","price":{"amount":"1.00","currency":"USD"}}],{"mpn":"A","stock":"5 In Stock","uom":"EA","price":{"amount":"2.00","currency":"USD"}},{"mpn":"C"}]}}"#;
    let root = br#"[{"mpn":"B","stock":"3 In Stock","uom":"EA","price":{"amount":"1.00","currency":"USD"}},{"mpn":"A","stock":"5 In Stock","uom":"EA","price":{"amount":"2.00","currency":"USD"}}]"#;
    let mut cases = vec![
        (
            definition("distributor-api"),
            fixture("distributor-api", "page-1.json"),
            vec!["data", "items"],
        ),
        (
            definition("snapshot-webhooks"),
            fixture("snapshot-webhooks", "snapshot-8812.json"),
            vec!["stock"],
        ),
        (
            definition("distributor-api"),
            nested.to_vec(),
            vec!["data", "items"],
        ),
    ];
    let mut indexed = definition("distributor-api");
    indexed["format"]["rows"] = json!("$.data.items[0][*]");
    indexed["format"]["document"] = json!({});
    indexed["fields"]["observed_at"] = json!({ "constant": "2026-11-29T08:00:00Z" });
    cases.push((indexed.clone(), nested.to_vec(), vec![]));
    let mut at_root = indexed;
    at_root["format"]["rows"] = json!("$[*]");
    cases.push((at_root, root.to_vec(), vec![]));
    for (document, body, names) in cases {
        let mapping = mapping(&document);
        for rule in rules {
            let mapped = normalize_mapped(&mapping, rule, &body).map(|n| n.fingerprint);
            let computed = Fingerprint::compute(rule, &body, &names).map_err(|e| e.to_string());
            match (&mapped, &computed) {
                (Ok(m), Ok(c)) => assert_eq!(m, c, "{rule:?} {}", document["format"]),
                (Err(m), Err(c)) => assert!(m.message.contains(c.as_str()), "{m:?} {c}"),
                _ => panic!(
                    "{rule:?} {}: {mapped:?} vs {computed:?}",
                    document["format"]
                ),
            }
        }
    }
}
