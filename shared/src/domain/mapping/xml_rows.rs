//! XML bodies: the row elements at the definition's path from the root, each field at a path
//! relative to its row (`c:price/c:amount`, `c:price/@currency`, `@id`), names matched by
//! namespace URI through the definition's prefixes (a prefix in the body is only a spelling).
//!
//! Safe by construction: a document type declaration is refused (so no entity is ever
//! declared, expanded or fetched: no XXE, no billion laughs), a reference to any entity but
//! the five predefined ones and character references is refused, and nesting deeper than the
//! definition's `max_depth` refuses the body. A row's place is the line its element starts on.

use super::{EachRow, Mapping, PageRead, Raw, RowRead, Source, TimeMemos};
use crate::domain::definition::{Encoding, Xml};
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// An element name: its namespace URI (empty: none) and local name.
type Name = (String, String);

/// The elements a row's fields read, as a tree of element paths relative to the row (node 0
/// is the row element itself), and where each field's value is kept while a row is read.
#[derive(Default)]
struct Wanted {
    nodes: Vec<WantedNode>,
    /// Each field's value by the field's slot: the text of a node, or an attribute (by its
    /// index in [`Captured::attributes`]).
    fields: Vec<Option<Slot>>,
    attributes: usize,
}

#[derive(Default)]
struct WantedNode {
    children: Vec<(Name, usize)>,
    /// The attributes fields read on this element, with their index.
    attributes: Vec<(Name, usize)>,
    /// Whether a field reads this element's text.
    text: bool,
}

#[derive(Clone, Copy)]
enum Slot {
    Text(usize),
    Attribute(usize),
}

/// What a row holds at the elements its fields read: each one's own text and the attributes
/// read on it, first occurrence only. An element, attribute or text that is absent is empty,
/// and an empty value is no value. Kept from row to row (cleared, not freed).
struct Captured {
    seen: Vec<bool>,
    texts: Vec<String>,
    attributes: Vec<String>,
}

impl Wanted {
    fn of(mapping: &Mapping) -> Self {
        let mut wanted = Wanted {
            nodes: vec![WantedNode::default()],
            fields: vec![None; mapping.slots],
            ..Wanted::default()
        };
        for field in mapping.sourced() {
            let Source::Xml(path) = &field.source else {
                continue;
            };
            let node = path
                .elements
                .iter()
                .fold(0, |parent, name| wanted.child_or_new(parent, name));
            let slot = match &path.attribute {
                Some(attribute) => Slot::Attribute(wanted.attribute(node, attribute)),
                None => {
                    if let Some(wanted) = wanted.nodes.get_mut(node) {
                        wanted.text = true;
                    }
                    Slot::Text(node)
                }
            };
            if let Some(kept) = wanted.fields.get_mut(field.slot) {
                *kept = Some(slot);
            }
        }
        wanted
    }

    fn child_or_new(&mut self, parent: usize, name: &Name) -> usize {
        if let Some(child) = self.child(parent, &name.0, &name.1) {
            return child;
        }
        let child = self.nodes.len();
        self.nodes.push(WantedNode::default());
        if let Some(parent) = self.nodes.get_mut(parent) {
            parent.children.push((name.clone(), child));
        }
        child
    }

    /// The index of `name` among the attributes read (on `node`).
    fn attribute(&mut self, node: usize, name: &Name) -> usize {
        let Some(node) = self.nodes.get_mut(node) else {
            return usize::MAX;
        };
        if let Some((_, index)) = node.attributes.iter().find(|(n, _)| n == name) {
            return *index;
        }
        let index = self.attributes;
        self.attributes += 1;
        node.attributes.push((name.clone(), index));
        index
    }

    fn child(&self, parent: usize, ns: &str, local: &str) -> Option<usize> {
        let (_, child) = self
            .nodes
            .get(parent)?
            .children
            .iter()
            .find(|((n, l), _)| n == ns && l == local)?;
        Some(*child)
    }

    fn captured(&self) -> Captured {
        Captured {
            seen: vec![false; self.nodes.len()],
            texts: vec![String::new(); self.nodes.len()],
            attributes: vec![String::new(); self.attributes],
        }
    }
}

impl Captured {
    fn clear(&mut self) {
        self.seen.fill(false);
        self.texts.iter_mut().for_each(String::clear);
        self.attributes.iter_mut().for_each(String::clear);
    }
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
    each: &mut EachRow<'_>,
) -> Result<PageRead, String> {
    let text = decode(body)?;
    let rows_path = parse_path(&xml.rows, &xml.namespaces, true)?;
    let wanted = Wanted::of(mapping);
    let mut walk = Walk {
        mapping,
        captured: wanted.captured(),
        wanted,
        rows_path: &rows_path.elements,
        max_depth: xml.max_depth as usize,
        max_rows,
        text: &text,
        stack: Vec::new(),
        row: None,
        rows: Ok(0),
        each,
        lines: (0, 1),
        memo: TimeMemos::default(),
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
    walk.rows.map(|_| PageRead::default())
}

/// The reader's state between events.
struct Walk<'m, 't, 'e> {
    mapping: &'m Mapping,
    wanted: Wanted,
    rows_path: &'m [Name],
    max_depth: usize,
    max_rows: usize,
    text: &'t str,
    /// The open elements.
    stack: Vec<Open>,
    /// The row being read: its depth and its line.
    row: Option<(usize, usize)>,
    /// What the row being read holds so far.
    captured: Captured,
    /// How many rows were handed on, or why the body is refused.
    rows: Result<usize, String>,
    each: &'e mut EachRow<'t>,
    /// The last byte offset a line was counted to, and its line.
    lines: (usize, usize),
    memo: TimeMemos,
}

/// An open element.
#[derive(Clone, Copy)]
struct Open {
    /// Whether it and its ancestors are the rows path's first elements.
    on_rows_path: bool,
    /// The wanted element it is, in the row being read.
    node: Option<usize>,
    /// Whether its text is kept: a wanted element's first occurrence in its row.
    captured: bool,
}

impl Walk<'_, '_, '_> {
    fn open(
        &mut self,
        reader: &NsReader<&[u8]>,
        e: &BytesStart<'_>,
        at: usize,
    ) -> Result<(), String> {
        let (ns, local) = reader.resolver().resolve_element(e.name());
        let (ns, local) = (namespace(ns)?, local.as_ref());
        if self.stack.len() >= self.max_depth {
            return Err(format!(
                "elements nest deeper than max_depth {}",
                self.max_depth
            ));
        }
        let depth = self.stack.len() + 1;
        let on_rows_path = self.stack.last().is_none_or(|parent| parent.on_rows_path)
            && depth
                .checked_sub(1)
                .and_then(|i| self.rows_path.get(i))
                .is_some_and(|(n, l)| n == ns && l == local);
        if self.row.is_none() && on_rows_path && depth == self.rows_path.len() {
            let line = self.line_at(at);
            self.row = Some((depth, line));
        }
        let node = match self.row {
            Some((row_depth, _)) if row_depth == depth => Some(0),
            Some(_) => self
                .stack
                .last()
                .and_then(|parent| parent.node)
                .and_then(|parent| self.wanted.child(parent, ns, local)),
            None => None,
        };
        let first = node.filter(|n| self.captured.seen.get(*n) == Some(&false));
        attributes(
            reader,
            e,
            first.and_then(|n| self.wanted.nodes.get(n)),
            &mut self.captured,
        )?;
        if let Some(seen) = first.and_then(|n| self.captured.seen.get_mut(n)) {
            *seen = true;
        }
        self.stack.push(Open {
            on_rows_path,
            node,
            captured: first.is_some(),
        });
        Ok(())
    }

    fn close(&mut self) {
        let depth = self.stack.len();
        self.stack.pop();
        if !matches!(self.row, Some((row_depth, _)) if row_depth == depth) {
            return;
        }
        let Some((_, line)) = self.row.take() else {
            return;
        };
        if let Ok(rows) = &mut self.rows {
            if *rows == self.max_rows {
                self.rows = Err(format!("more than {} rows", self.max_rows));
            } else {
                *rows += 1;
                let (wanted, captured) = (&self.wanted, &self.captured);
                let row = self.mapping.row_of(&mut self.memo, None, |field| {
                    Ok(value(wanted, field, captured))
                });
                let place = super::place("line ", line);
                (self.each)(
                    RowRead {
                        place,
                        row,
                        source: Vec::new(),
                    },
                    None,
                );
            }
        }
        self.captured.clear();
    }

    /// Text inside the innermost open element, kept when that element is captured and a field
    /// reads its text.
    fn append(&mut self, text: &str) {
        let Some(Open {
            node: Some(node),
            captured: true,
            ..
        }) = self.stack.last()
        else {
            return;
        };
        if self.wanted.nodes.get(*node).is_some_and(|n| n.text) {
            if let Some(kept) = self.captured.texts.get_mut(*node) {
                kept.push_str(text);
            }
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
fn value<'c>(
    wanted: &Wanted,
    field: &super::MappedField,
    captured: &'c Captured,
) -> Option<Raw<'c>> {
    let slot = wanted.fields.get(field.slot).copied().flatten()?;
    let text = match slot {
        Slot::Text(node) => captured.texts.get(node)?,
        Slot::Attribute(index) => captured.attributes.get(index)?,
    };
    (!text.is_empty()).then_some(Raw::Text(Cow::Borrowed(text)))
}

/// Reads every attribute of an element (namespace declarations left out), each name resolved
/// and each value unescaped; the values `wanted` reads are kept in `captured`.
fn attributes(
    reader: &NsReader<&[u8]>,
    e: &BytesStart<'_>,
    wanted: Option<&WantedNode>,
    captured: &mut Captured,
) -> Result<(), String> {
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
        let ns = namespace(ns)?;
        let slot = wanted.and_then(|w| {
            w.attributes
                .iter()
                .find(|((n, l), _)| n == ns && l == local.as_ref())
        });
        // A name given twice (two prefixes of one namespace) keeps its last value.
        if let Some(kept) = slot.and_then(|(_, index)| captured.attributes.get_mut(*index)) {
            kept.clear();
            kept.push_str(&value);
        }
    }
    Ok(())
}

/// A resolved name's namespace URI (empty: none).
fn namespace(resolved: ResolveResult<'_>) -> Result<&str, String> {
    match resolved {
        ResolveResult::Bound(ns) => Ok(ns.0),
        ResolveResult::Unbound => Ok(""),
        ResolveResult::Unknown(prefix) => Err(format!("the prefix {prefix:?} is not declared")),
    }
}

/// A character reference or one of the five predefined entities; any other entity is
/// refused (none can be declared: a DTD is refused).
fn entity(reference: &quick_xml::events::BytesRef<'_>) -> Result<Cow<'static, str>, String> {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return Ok(Cow::Owned(c.to_string()));
    }
    let name = reference.clone().into_inner();
    match name.as_ref() {
        "lt" => Ok(Cow::Borrowed("<")),
        "gt" => Ok(Cow::Borrowed(">")),
        "amp" => Ok(Cow::Borrowed("&")),
        "apos" => Ok(Cow::Borrowed("'")),
        "quot" => Ok(Cow::Borrowed("\"")),
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
