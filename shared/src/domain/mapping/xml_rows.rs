//! XML bodies: the row elements at the definition's path from the root, each field at a path
//! relative to its row (`c:price/c:amount`, `c:price/@currency`, `@id`), names matched by
//! namespace URI through the definition's prefixes (a prefix in the body is only a spelling).
//!
//! Safe by construction: a document type declaration is refused (so no entity is ever
//! declared, expanded or fetched: no XXE, no billion laughs), a reference to any entity but
//! the five predefined ones and character references is refused, and nesting deeper than the
//! definition's `max_depth` refuses the body. A row's place is the line its element starts on.

use super::{Mapping, PageRead, Raw, RowRead, Source};
use crate::domain::definition::{Encoding, Xml};
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

/// An element name: its namespace URI (empty: none) and local name.
type Name = (String, String);

/// What a row holds, by element path relative to the row (the row itself at `[]`): each
/// element's attributes and its own text, first occurrence only.
#[derive(Default)]
struct Captured {
    elements: HashMap<Vec<Name>, Element>,
}

#[derive(Default)]
struct Element {
    attributes: BTreeMap<Name, String>,
    text: String,
}

/// A parsed XML path: element steps, and a final attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlPath {
    pub elements: Vec<Name>,
    pub attribute: Option<Name>,
}

/// `/a:x/a:y` (rows, absolute) or `a:y/@id` (a field, relative): each prefix resolved through
/// `namespaces`, an unprefixed name in no namespace.
pub fn parse_path(
    text: &str,
    namespaces: &BTreeMap<String, String>,
    absolute: bool,
) -> Result<XmlPath, String> {
    let body = match (absolute, text.strip_prefix('/')) {
        (true, Some(rest)) => rest,
        (true, None) => return Err("the rows path starts with /".into()),
        (false, Some(_)) => return Err("a field path is relative to its row (no leading /)".into()),
        (false, None) => text,
    };
    let steps: Vec<&str> = body.split('/').collect();
    let mut path = XmlPath {
        elements: Vec::new(),
        attribute: None,
    };
    for (index, step) in steps.iter().enumerate() {
        let (attribute, step) = match step.strip_prefix('@') {
            Some(name) if index + 1 == steps.len() && !absolute => (true, name),
            Some(_) => return Err(format!("@{step}: an attribute may only end a field path")),
            None => (false, *step),
        };
        let name = qualified(step, namespaces)?;
        match attribute {
            true => path.attribute = Some(name),
            false => path.elements.push(name),
        }
    }
    Ok(path)
}

fn qualified(step: &str, namespaces: &BTreeMap<String, String>) -> Result<Name, String> {
    let (prefix, local) = match step.split_once(':') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, step),
    };
    let name_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.');
    if local.is_empty() || !local.chars().all(name_char) || local.starts_with(['-', '.']) {
        return Err(format!("{step:?} is not an element or attribute name"));
    }
    let uri = match prefix {
        None => String::new(),
        Some(p) => namespaces
            .get(p)
            .cloned()
            .ok_or_else(|| format!("the prefix {p:?} is not declared in format.namespaces"))?,
    };
    Ok((uri, local.to_owned()))
}

pub(super) fn read(
    mapping: &Mapping,
    xml: &Xml,
    body: &[u8],
    max_rows: usize,
) -> Result<PageRead, String> {
    let text = decode(body)?;
    let rows_path = parse_path(&xml.rows, &xml.namespaces, true)?;
    let mut walk = Walk {
        mapping,
        rows_path: &rows_path.elements,
        max_depth: xml.max_depth as usize,
        max_rows,
        text: &text,
        stack: Vec::new(),
        row: None,
        rows: Ok(Vec::new()),
        lines: (0, 1),
    };
    let mut reader = NsReader::from_str(&text);
    loop {
        let at = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader
            .read_event()
            .map_err(|e| format!("not well-formed XML at byte {at}: {e}"))?;
        match event {
            Event::DocType(_) => {
                return Err("a document type declaration (DTD) is not accepted".into())
            }
            Event::Start(e) => walk.open(&reader, &e, at)?,
            Event::Empty(e) => {
                walk.open(&reader, &e, at)?;
                walk.close();
            }
            Event::End(_) => walk.close(),
            Event::Text(t) => walk.append(&t.xml10_content()),
            Event::CData(c) => walk.append(&c.xml10_content()),
            Event::GeneralRef(r) => walk.append(&entity(&r)?),
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
        }
    }
    walk.rows.map(|rows| PageRead {
        rows,
        ..PageRead::default()
    })
}

/// The reader's state between events.
struct Walk<'m, 't> {
    mapping: &'m Mapping,
    rows_path: &'m [Name],
    max_depth: usize,
    max_rows: usize,
    text: &'t str,
    /// The open elements, each with whether its text is captured.
    stack: Vec<(Name, bool)>,
    /// The row being read: its depth, its line and what it holds so far.
    row: Option<(usize, usize, Captured)>,
    rows: Result<Vec<RowRead>, String>,
    /// The last byte offset a line was counted to, and its line.
    lines: (usize, usize),
}

impl Walk<'_, '_> {
    fn open(
        &mut self,
        reader: &NsReader<&[u8]>,
        e: &BytesStart<'_>,
        at: usize,
    ) -> Result<(), String> {
        let (ns, local) = reader.resolver().resolve_element(e.name());
        let name = (namespace(ns)?, local.as_ref().to_owned());
        if self.stack.len() >= self.max_depth {
            return Err(format!(
                "elements nest deeper than max_depth {}",
                self.max_depth
            ));
        }
        let attributes = attributes(reader, e)?;
        self.stack.push((name, false));
        let path: Vec<Name> = self.stack.iter().map(|(n, _)| n.clone()).collect();
        if self.row.is_none() && path == self.rows_path {
            let line = self.line_at(at);
            self.row = Some((self.stack.len(), line, Captured::default()));
        }
        if let Some((depth, _, captured)) = &mut self.row {
            let relative = path[*depth..].to_vec();
            if let Entry::Vacant(slot) = captured.elements.entry(relative) {
                slot.insert(Element {
                    attributes,
                    text: String::new(),
                });
                if let Some(open) = self.stack.last_mut() {
                    open.1 = true;
                }
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        let depth = self.stack.len();
        self.stack.pop();
        let closes_row = matches!(&self.row, Some((row_depth, _, _)) if *row_depth == depth);
        let Some((_, line, captured)) = self.row.take_if(|_| closes_row) else {
            return;
        };
        let Ok(rows) = &mut self.rows else {
            return;
        };
        if rows.len() == self.max_rows {
            self.rows = Err(format!("more than {} rows", self.max_rows));
            return;
        }
        let row = self.mapping.row_of(|field| Ok(value(field, &captured)));
        rows.push(RowRead {
            place: format!("line {line}"),
            row,
            source: Vec::new(),
        });
    }

    /// Text inside the innermost open element, kept when that element is captured.
    fn append(&mut self, text: &str) {
        let innermost = self.stack.last().map(|(n, captured)| (n, *captured));
        let (Some((_, true)), Some((depth, _, captured))) = (innermost, &mut self.row) else {
            return;
        };
        let relative: Vec<Name> = self.stack[*depth..]
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        if let Some(element) = captured.elements.get_mut(&relative) {
            element.text.push_str(text);
        }
    }

    /// The 1-based line of byte offset `at`, counted on from the last offset asked for.
    fn line_at(&mut self, at: usize) -> usize {
        let (from, line) = self.lines;
        let at = at.min(self.text.len()).max(from);
        let more = self.text.as_bytes()[from..at]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        self.lines = (at, line + more);
        line + more
    }
}

/// A field's value in a captured row: its element's text, or the attribute its path ends in.
fn value(field: &super::MappedField, captured: &Captured) -> Option<Raw> {
    let Source::Xml(path) = &field.source else {
        return None;
    };
    let element = captured.elements.get(&path.elements)?;
    let text = match &path.attribute {
        Some(name) => element.attributes.get(name)?.clone(),
        None => element.text.clone(),
    };
    (!text.is_empty()).then_some(Raw::Text(text))
}

/// An element's attributes by resolved name (namespace declarations left out), unescaped.
fn attributes(
    reader: &NsReader<&[u8]>,
    e: &BytesStart<'_>,
) -> Result<BTreeMap<Name, String>, String> {
    let mut found = BTreeMap::new();
    for attribute in e.attributes() {
        let attribute = attribute.map_err(|e| format!("attribute: {e}"))?;
        let key = attribute.key;
        if key.as_namespace_binding().is_some() {
            continue;
        }
        let (ns, local) = reader.resolver().resolve_attribute(key);
        let value = attribute
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| format!("attribute {}: {e}", local.as_ref()))?;
        found.insert(
            (namespace(ns)?, local.as_ref().to_owned()),
            value.into_owned(),
        );
    }
    Ok(found)
}

fn namespace(resolved: ResolveResult<'_>) -> Result<String, String> {
    match resolved {
        ResolveResult::Bound(ns) => Ok(ns.as_ref().to_owned()),
        ResolveResult::Unbound => Ok(String::new()),
        ResolveResult::Unknown(prefix) => Err(format!("the prefix {prefix:?} is not declared")),
    }
}

/// A character reference or one of the five predefined entities; any other entity is
/// refused (none can be declared: a DTD is refused).
fn entity(reference: &quick_xml::events::BytesRef<'_>) -> Result<String, String> {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return Ok(c.to_string());
    }
    let name = reference.clone().into_inner();
    match name.as_ref() {
        "lt" => Ok("<".into()),
        "gt" => Ok(">".into()),
        "amp" => Ok("&".into()),
        "apos" => Ok("'".into()),
        "quot" => Ok("\"".into()),
        other => Err(format!(
            "the entity &{other}; is not accepted (only the five XML predefines)"
        )),
    }
}

/// The body as text: UTF-8 (a byte-order mark dropped) unless its declaration names
/// Windows-1252 or ISO-8859-1.
fn decode(body: &[u8]) -> Result<std::borrow::Cow<'_, str>, String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(100)]).to_ascii_lowercase();
    let encoding = if head.starts_with("<?xml") && head.contains("windows-1252") {
        Encoding::Windows1252
    } else if head.starts_with("<?xml") && (head.contains("iso-8859-1") || head.contains("latin1"))
    {
        Encoding::Iso8859_1
    } else {
        Encoding::Utf8
    };
    super::text::decode(encoding, body)
}
