//! JSON bodies: one strict parse (the canonical parser the fingerprint uses), the rows at the
//! definition's rows path, each field at its path relative to the row, and the document's own
//! values (export id, snapshot id, page, page count, observed time) at theirs. A row's place is
//! its JSON pointer.

use super::{Canonical, EachRow, Mapping, PageRead, Raw, RowRead, Source, TimeMemos};
use crate::domain::canonical_json::{canonical_bytes, canonical_page, parse_node, Node};
use crate::domain::definition::{DocumentField, Envelope, Json};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::timestamp::Timestamp;
use std::borrow::Cow;

pub(super) fn read(
    mapping: &Mapping,
    json: &Json,
    body: &[u8],
    max_rows: usize,
    rule: Option<CanonicalizationRule>,
    each: &mut EachRow<'_>,
) -> Result<(PageRead, Option<Canonical>), String> {
    let root = parse_node(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let rows_path = JsonPath::parse_rows(&json.rows).map_err(|e| format!("rows path: {e}"))?;
    let mut page = PageRead::default();
    if json.envelope == Envelope::Cloudevents {
        page.default_observed_at = cloud_event_time(&root)?;
    }
    read_document(&root, json, &mut page)?;
    let items = rows_path
        .select(&root)
        .and_then(Node::as_array)
        .ok_or_else(|| {
            format!(
                "no array of rows at {} ({})",
                json.rows,
                rows_path.pointer()
            )
        })?;
    if items.len() > max_rows {
        return Err(format!(
            "{} rows exceed the limit of {max_rows} per delivery",
            items.len()
        ));
    }
    let (sources, document) = canonical(&root, items, rows_path.names().as_deref(), rule);
    let prefix = format!("{}/", rows_path.pointer());
    let mut memo = TimeMemos::default();
    for (index, (item, source)) in items.iter().zip(sources).enumerate() {
        let row = match item {
            Node::Object(_) => {
                mapping.row_of(&mut memo, Some(item), |field| Ok(value(field, item)))
            }
            _ => Err("a row must be an object".into()),
        };
        let place = super::place(&prefix, index);
        each(RowRead { place, row, source }, page.default_observed_at);
    }
    Ok((page, document))
}

/// Each row's canonical bytes (in body order), and the document's under `rule` when asked for
/// a JSON rule: what `Fingerprint::compute` hashes, from this parse rather than another, each
/// row written once where the rows path is member names only. Under `bytes-v1` (or no rule)
/// nothing needs them, and each row's are left empty.
fn canonical(
    root: &Node<'_>,
    items: &[Node<'_>],
    names: Option<&[&str]>,
    rule: Option<CanonicalizationRule>,
) -> (Vec<Vec<u8>>, Option<Canonical>) {
    let each = || items.iter().map(canonical_bytes).collect();
    let sort = match rule {
        Some(CanonicalizationRule::JsonV1) => false,
        Some(CanonicalizationRule::JsonUnorderedRowsV1) => true,
        Some(CanonicalizationRule::BytesV1) | None => return (vec![Vec::new(); items.len()], None),
    };
    // The unordered rule sorts the array the path's names lead to (no names: the root, which
    // must then be the array), as `canonicalize_unordered_rows` does.
    match names {
        Some(names) => match canonical_page(root, names, sort) {
            Ok(page) => (page.rows, Some(Ok(page.document))),
            Err(e) if sort => (each(), Some(Err(e))),
            Err(_) => (each(), Some(Ok(canonical_bytes(root)))),
        },
        None if sort => (
            each(),
            Some(canonical_page(root, &[], true).map(|p| p.document)),
        ),
        None => (each(), Some(Ok(canonical_bytes(root)))),
    }
}

/// A field's value in a row: a string as text for its steps, any other value kept as written;
/// `null` and a missing member are absent.
pub(super) fn value<'n>(field: &super::MappedField, row: &'n Node<'_>) -> Option<Raw<'n>> {
    let Source::Path(path) = &field.source else {
        return None;
    };
    match path.select(row)? {
        Node::Null => None,
        // A JSON quantity is a number; a string is read only through a declared pattern or
        // map, and is otherwise left for the normalizer to refuse as what it is.
        node @ Node::String(_) if field.name == "quantity" && field.steps.is_plain() => {
            Some(Raw::Kept(node.clone()))
        }
        Node::String(s) => Some(Raw::Text(Cow::Borrowed(s))),
        other => Some(Raw::Kept(other.clone())),
    }
}

/// The document-level values; a required one that is missing (or of the wrong type) refuses
/// the body.
fn read_document(root: &Node<'_>, json: &Json, page: &mut PageRead) -> Result<(), String> {
    let mut problems = Vec::new();
    for (name, field) in json.document.declared() {
        match document_value(root, name, field, page) {
            Ok(true) => {}
            Ok(false) if field.required => {
                problems.push(format!("{name} is missing at {}", field.path))
            }
            Ok(false) => {}
            Err(why) => problems.push(format!("{name} at {}: {why}", field.path)),
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

/// Reads one document value into `page`; `Ok(false)` when it is absent.
fn document_value(
    root: &Node<'_>,
    name: &str,
    field: &DocumentField,
    page: &mut PageRead,
) -> Result<bool, String> {
    let path = JsonPath::parse(&field.path).map_err(|e| e.to_string())?;
    let Some(node) = path.select(root).filter(|n| !matches!(n, Node::Null)) else {
        return Ok(false);
    };
    match name {
        "page" | "page_count" => {
            let n = whole_number(node).ok_or("must be a whole number")?;
            *(if name == "page" {
                &mut page.page
            } else {
                &mut page.page_count
            }) = Some(n);
        }
        "observed_at" => {
            let text = node.as_str().ok_or("must be a string")?;
            page.default_observed_at = Some(Timestamp::parse(text).map_err(|e| e.to_string())?);
        }
        _ => {
            let text = node
                .as_str()
                .filter(|s| !s.is_empty())
                .ok_or("must be a non-empty string")?;
            *(if name == "export_id" {
                &mut page.export_id
            } else {
                &mut page.snapshot_id
            }) = Some(text.to_owned());
        }
    }
    Ok(true)
}

/// A number written as digits only.
fn whole_number(node: &Node<'_>) -> Option<u64> {
    match node {
        Node::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => n.parse().ok(),
        _ => None,
    }
}

/// A CloudEvents 1.0 structured event's checks, and its `time` (the rows' default
/// `observed_at`).
fn cloud_event_time(root: &Node<'_>) -> Result<Option<Timestamp>, String> {
    if root.get("specversion").and_then(Node::as_str) != Some("1.0") {
        return Err("CloudEvent must have specversion \"1.0\"".into());
    }
    for attribute in ["id", "source", "type"] {
        if root
            .get(attribute)
            .and_then(Node::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!("CloudEvent lacks {attribute}"));
        }
    }
    match root.get("time") {
        None => Ok(None),
        Some(value) => value
            .as_str()
            .ok_or_else(|| "CloudEvent time: not a string".to_owned())
            .and_then(|t| Timestamp::parse(t).map_err(|e| format!("CloudEvent time: {e}")))
            .map(Some),
    }
}
