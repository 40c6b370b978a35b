//! The three payload formats of the first release, written as definitions: how they read in
//! the definition language, and the proof (the tests below) that a body read either way gives
//! the same offers and the same fingerprint.

use crate::domain::connector::PayloadFormat;
use serde_json::{json, Value};

/// The `format` and `fields` of a definition equal to `format` (none for `defined`, which is
/// read through its own definition). Nothing is trimmed: the first release read values as sent.
pub fn reading_of(format: PayloadFormat) -> Option<Value> {
    let path = |name: &str| json!({ "path": format!("$.{name}"), "trim": false });
    let column = |name: &str| json!({ "column": name, "trim": false });
    let field: &dyn Fn(&str) -> Value = match format {
        PayloadFormat::CsvOffersV1 => &column,
        _ => &path,
    };
    let fields = json!({
        "sku": field("sku"), "quantity": field("quantity"), "unit": field("unit"),
        "price": field("price"), "currency": field("currency"),
        "observed_at": field("observed_at"), "revision": field("revision"),
        "condition": field("condition"),
    });
    let format = match format {
        PayloadFormat::AcmeExportV1 => json!({
            "kind": "json", "rows": "$.offers[*]",
            "document": {
                "export_id": { "path": "$.export_id", "required": true },
                "page": { "path": "$.page", "required": true },
                "page_count": { "path": "$.page_count" }
            }
        }),
        PayloadFormat::CloudEventsOffersV1 => json!({
            "kind": "json", "rows": "$.data.offers[*]", "envelope": "cloudevents"
        }),
        PayloadFormat::CsvOffersV1 => json!({ "kind": "csv", "encoding": "utf-8" }),
        PayloadFormat::Defined => return None,
    };
    Some(json!({ "format": format, "fields": fields }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::definition::Definition;
    use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
    use crate::domain::mapping::Mapping;
    use crate::domain::normalize::{normalize_and_fingerprint, normalize_mapped};

    fn mapping(format: PayloadFormat, rule: CanonicalizationRule) -> Mapping {
        let mut document = reading_of(format).expect("a first-release format");
        let (transport, identity) = match format {
            PayloadFormat::AcmeExportV1 => (
                json!({"kind": "pull", "url": "https://x.example/e", "pagination": {"kind": "page_number"}}),
                json!({"kind": "export_page", "path": "$.export_id"}),
            ),
            PayloadFormat::CloudEventsOffersV1 => {
                (json!({"kind": "webhook"}), json!({"kind": "cloudevents"}))
            }
            PayloadFormat::CsvOffersV1 | PayloadFormat::Defined => (
                json!({"kind": "drop"}),
                json!({"kind": "file_name_and_content"}),
            ),
        };
        document["definition_format"] = json!(1);
        document["connector"] = json!("legacy");
        document["source_account"] = json!("ACC-1");
        document["transport"] = transport;
        document["identity"] = identity;
        document["canonicalization"] = json!(rule.as_str());
        let definition = Definition::read(&document).unwrap_or_else(|p| panic!("{p:#?}"));
        Mapping::compile(&definition).unwrap()
    }

    const ROWS: &str = r#"{"sku":"AX-440-R2","quantity":6,"unit":"each","price":"820.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"},{"sku":"BX-1","quantity":0,"unit":"m","price":"0.10","currency":"USD","observed_at":"2026-11-29T08:01:00Z","revision":"B","condition":"used"}"#;

    fn bodies() -> Vec<(PayloadFormat, CanonicalizationRule, Vec<u8>)> {
        let acme = format!(r#"{{"export_id":"EXP-1","page":2,"page_count":3,"offers":[{ROWS}]}}"#);
        let event = format!(
            r#"{{"specversion":"1.0","id":"e-1","source":"s","type":"t","time":"2026-11-29T08:00:00Z","data":{{"offers":[{ROWS}]}}}}"#
        );
        let csv = "sku,quantity,unit,price,currency,observed_at,revision,condition\nAX-440-R2,6,each,820.00,EUR,2026-11-29T08:00:00Z,,\nBX-1,0,m,0.10,USD,2026-11-29T08:01:00Z,B,used\n";
        let mut all = Vec::new();
        for rule in [
            CanonicalizationRule::JsonV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
            CanonicalizationRule::BytesV1,
        ] {
            all.push((PayloadFormat::AcmeExportV1, rule, acme.clone().into_bytes()));
            all.push((
                PayloadFormat::CloudEventsOffersV1,
                rule,
                event.clone().into_bytes(),
            ));
        }
        all.push((
            PayloadFormat::CsvOffersV1,
            CanonicalizationRule::BytesV1,
            csv.as_bytes().to_vec(),
        ));
        all
    }

    #[test]
    fn each_first_release_format_reads_the_same_as_its_definition() {
        for (format, rule, body) in bodies() {
            let (legacy, fingerprint) = normalize_and_fingerprint(format, rule, &body).unwrap();
            let mapped = normalize_mapped(&mapping(format, rule), rule, &body).unwrap();
            assert!(
                mapped.refused.is_empty(),
                "{format:?}: {:?}",
                mapped.refused
            );
            let offers = |rows: &[crate::domain::normalize::NormalizedRow]| -> Vec<String> {
                rows.iter()
                    .map(|r| {
                        format!(
                            "{} {} {} {} {} {} {}",
                            r.source_record,
                            r.item.key(),
                            r.quantity,
                            r.quantity_basis,
                            r.price.as_str(),
                            r.currency,
                            r.observed_at.to_rfc3339()
                        )
                    })
                    .collect()
            };
            assert_eq!(offers(&mapped.rows), offers(&legacy), "{format:?} {rule:?}");
            assert_eq!(mapped.fingerprint, fingerprint, "{format:?} {rule:?}");
            assert_eq!(
                mapped.fingerprint,
                Fingerprint::compute(rule, &body, format.rows_path()).unwrap()
            );
        }
    }

    #[test]
    fn bad_rows_are_refused_by_both_readings_with_the_same_code() {
        let bad = [
            r#"{"sku":"A","quantity":"6","unit":"each","price":"1.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#,
            r#"{"sku":"A","quantity":-1,"unit":"each","price":"1.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#,
            r#"{"sku":"A","quantity":1,"unit":"each","price":1.00,"currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#,
            r#"{"sku":"A","quantity":1,"unit":"each","price":"1.00","currency":"XXY","observed_at":"2026-11-29T08:00:00Z"}"#,
            r#"{"sku":7,"quantity":1,"unit":"each","price":"1.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#,
            r#"{"quantity":1,"unit":"each","price":"1.00","currency":"EUR","observed_at":"2026-11-29T08:00:00Z"}"#,
        ];
        let rule = CanonicalizationRule::JsonV1;
        for row in bad {
            let body = format!(r#"{{"export_id":"EXP-1","page":1,"offers":[{row}]}}"#);
            let legacy =
                normalize_and_fingerprint(PayloadFormat::AcmeExportV1, rule, body.as_bytes())
                    .unwrap_err();
            let mapped = normalize_mapped(
                &mapping(PayloadFormat::AcmeExportV1, rule),
                rule,
                body.as_bytes(),
            )
            .unwrap();
            assert_eq!(mapped.refused.len(), 1, "{row}");
            assert_eq!(
                mapped.refused[0].code, legacy.code,
                "{row}: {} vs {}",
                mapped.refused[0].reason, legacy.message
            );
            assert_eq!(
                format!("row 0: {}", mapped.refused[0].reason),
                legacy.message,
                "{row}"
            );
        }
    }
}
