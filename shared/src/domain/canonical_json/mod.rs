//! Strict JSON parser and canonical serializer for payload fingerprints.
//!
//! Two payloads that mean the same JSON document must hash the same, so the
//! canonical form removes every free choice a producer has: whitespace, key
//! order and string escaping. Numbers are the exception on purpose: they are
//! kept as their literal source text (`820.00` stays `820.00`), because a
//! supplier changing how it writes a price is a change we want to see, and
//! going through `f64` would silently merge or corrupt large/precise values.
//!
//! Rules:
//! - `json-v1` ([`canonicalize`]): objects sorted by the decoded UTF-8 bytes
//!   of their keys, arrays in source order, no whitespace, strings re-escaped
//!   minimally (only `"`, `\` and control characters below U+0020).
//! - `json-unordered-rows-v1` ([`canonicalize_unordered_rows`]): as
//!   `json-v1`, but the one array found at a given object-key path is sorted
//!   by each element's canonical bytes, so a supplier reordering its rows
//!   does not change the fingerprint.
//!
//! The document is parsed once into a [`Node`] tree that borrows from the input (a string
//! without escapes and every number literal are slices of it), and everything ingest needs
//! is taken from that one tree: the fingerprint's canonical bytes, each row's canonical
//! bytes ([`canonical_page`]) and the rows' fields.
//!
//! The parser is strict RFC 8259 (one value, UTF-8, no BOM, no trailing
//! bytes, no duplicate keys) and never panics: nesting is capped at
//! [`MAX_DEPTH`], so hostile input cannot overflow the stack.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// Rule name of [`canonicalize`].
pub const RULE_JSON_V1: &str = "json-v1";
/// Rule name of [`canonicalize_unordered_rows`].
pub const RULE_JSON_UNORDERED_ROWS_V1: &str = "json-unordered-rows-v1";

/// Maximum number of nested arrays/objects. 128 nested containers are
/// accepted; the 129th is rejected with [`CanonicalJsonError::TooDeep`].
pub const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalJsonError {
    /// Malformed input; `offset` is the byte offset where parsing failed.
    Syntax { offset: usize, reason: &'static str },
    /// An object holds the same key twice (compared after unescaping).
    DuplicateKey(String),
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The rows path (joined with '/') does not lead to a value.
    RowsPathMissing(String),
    /// The rows path (joined with '/') leads to a value that is not an array.
    RowsNotArray(String),
}

impl fmt::Display for CanonicalJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax { offset, reason } => {
                write!(f, "invalid JSON at byte {offset}: {reason}")
            }
            Self::DuplicateKey(key) => write!(f, "duplicate JSON object key {key:?}"),
            Self::TooDeep => write!(f, "JSON nested deeper than {MAX_DEPTH} levels"),
            Self::RowsPathMissing(path) => write!(f, "rows path {path:?} not found"),
            Self::RowsNotArray(path) => write!(f, "value at rows path {path:?} is not an array"),
        }
    }
}

impl std::error::Error for CanonicalJsonError {}

/// Canonical bytes of `input` under rule `json-v1`.
pub fn canonicalize(input: &[u8]) -> Result<Vec<u8>, CanonicalJsonError> {
    Ok(to_canonical_bytes(&parse(input)?))
}

/// Canonical bytes of `input` under rule `json-unordered-rows-v1`: the array
/// reached by following the object keys `rows_path` from the root (the root
/// itself when the path is empty) is sorted by its elements' canonical bytes.
/// Only that array is reordered; arrays nested inside rows keep their order.
pub fn canonicalize_unordered_rows(
    input: &[u8],
    rows_path: &[&str],
) -> Result<Vec<u8>, CanonicalJsonError> {
    let root = parse(input)?;
    Ok(canonical_page(&root, rows_path, true)?.document)
}

/// Canonical bytes (`json-v1`) of each element of the array at `rows_path`,
/// in source order.
pub fn canonical_rows(
    input: &[u8],
    rows_path: &[&str],
) -> Result<Vec<Vec<u8>>, CanonicalJsonError> {
    let root = parse(input)?;
    Ok(rows_at(&root, rows_path)?
        .iter()
        .map(to_canonical_bytes)
        .collect())
}

/// A document's canonical bytes and its rows', from one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalPage {
    /// `json-v1` of the document, or `json-unordered-rows-v1` when asked for sorted rows.
    pub document: Vec<u8>,
    /// `json-v1` of each element of the rows array, in source order.
    pub rows: Vec<Vec<u8>>,
}

/// The canonical bytes of `root` and of each row at `rows_path`; with `sort_rows`, the
/// document's rows array is written in the order of the rows' canonical bytes. Each row is
/// written once: the document reuses the rows' bytes.
pub fn canonical_page(
    root: &Node<'_>,
    rows_path: &[&str],
    sort_rows: bool,
) -> Result<CanonicalPage, CanonicalJsonError> {
    let rows: Vec<Vec<u8>> = rows_at(root, rows_path)?
        .iter()
        .map(to_canonical_bytes)
        .collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    if sort_rows {
        // Plain byte-wise order of the canonical form: independent of any
        // notion of numeric or locale ordering, so it is stable forever.
        order.sort_by(|&a, &b| rows[a].cmp(&rows[b]));
    }
    let mut document = Vec::with_capacity(rows.iter().map(|r| r.len() + 1).sum::<usize>() + 64);
    write_with_rows(root, rows_path, &rows, &order, &mut document);
    Ok(CanonicalPage { document, rows })
}

/// Parses `input` with the strict rules above into a tree borrowing from it.
pub fn parse_node(input: &[u8]) -> Result<Node<'_>, CanonicalJsonError> {
    parse(input)
}

/// Parsed document, owning its text. Numbers keep their literal text; strings are decoded;
/// objects are ordered by key bytes (`String`'s `Ord` is byte-wise), which is
/// exactly the canonical key order. Public for comparisons that must not go
/// through `f64` (the quarantine diff): two numbers are equal only when they
/// are written the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonValue {
    Null,
    Bool(bool),
    /// The number exactly as written (RFC 8259 grammar, ASCII), e.g.
    /// `820.000000000000000001`, `1.00` or `-0`.
    Number(String),
    String(String),
    Array(Vec<JsonValue>),
    Object(BTreeMap<String, JsonValue>),
}

/// Parses `input` with the strict rules above, keeping number literals.
pub fn parse_document(input: &[u8]) -> Result<JsonValue, CanonicalJsonError> {
    Ok(parse(input)?.to_value())
}

/// A parsed value borrowing from the input. Object members are sorted by the bytes of their
/// keys (the canonical order) and unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    /// The number exactly as written (RFC 8259 grammar, ASCII).
    Number(Cow<'a, str>),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// An object from members in any order; `None` if a key repeats.
    pub fn object(mut members: Vec<(Cow<'a, str>, Node<'a>)>) -> Option<Self> {
        members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let unique = members.windows(2).all(|w| w[0].0 != w[1].0);
        unique.then_some(Node::Object(members))
    }

    /// The node owning its text.
    pub fn to_static(&self) -> Node<'static> {
        let owned = |text: &Cow<'_, str>| Cow::Owned(text.to_string());
        match self {
            Node::Null => Node::Null,
            Node::Bool(b) => Node::Bool(*b),
            Node::Number(n) => Node::Number(owned(n)),
            Node::String(s) => Node::String(owned(s)),
            Node::Array(items) => Node::Array(items.iter().map(Node::to_static).collect()),
            Node::Object(members) => Node::Object(
                members
                    .iter()
                    .map(|(k, v)| (owned(k), v.to_static()))
                    .collect(),
            ),
        }
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match self {
            Node::Object(members) => members
                .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
                .ok()
                .map(|i| &members[i].1),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    /// The same value, owning its text.
    pub fn to_value(&self) -> JsonValue {
        match self {
            Node::Null => JsonValue::Null,
            Node::Bool(b) => JsonValue::Bool(*b),
            Node::Number(n) => JsonValue::Number(n.to_string()),
            Node::String(s) => JsonValue::String(s.to_string()),
            Node::Array(items) => JsonValue::Array(items.iter().map(Node::to_value).collect()),
            Node::Object(members) => JsonValue::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

fn rows_at<'n, 'a>(
    root: &'n Node<'a>,
    rows_path: &[&str],
) -> Result<&'n [Node<'a>], CanonicalJsonError> {
    let joined = || rows_path.join("/");
    let mut current = root;
    for key in rows_path {
        // A path step through a non-object cannot exist.
        current = current
            .get(key)
            .ok_or_else(|| CanonicalJsonError::RowsPathMissing(joined()))?;
    }
    current
        .as_array()
        .ok_or_else(|| CanonicalJsonError::RowsNotArray(joined()))
}

fn parse(input: &[u8]) -> Result<Node<'_>, CanonicalJsonError> {
    // A BOM is not JSON (RFC 8259 §8.1 forbids emitting one); name it
    // explicitly because it is the most common way "valid" files fail.
    if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(syntax(0, "byte order mark is not allowed"));
    }
    // Validating UTF-8 once up front means every later slice that is
    // split only at ASCII delimiters is itself valid UTF-8.
    let text = match std::str::from_utf8(input) {
        Ok(text) => text,
        Err(e) => return Err(syntax(e.valid_up_to(), "invalid UTF-8")),
    };
    let mut parser = Parser {
        text,
        bytes: input,
        pos: 0,
    };
    parser.skip_ws();
    let value = parser.parse_value(0)?;
    parser.skip_ws();
    if parser.pos != input.len() {
        return Err(syntax(parser.pos, "trailing characters after JSON value"));
    }
    Ok(value)
}

fn syntax(offset: usize, reason: &'static str) -> CanonicalJsonError {
    CanonicalJsonError::Syntax { offset, reason }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

/// Above this many members, an object's keys are checked for repeats through a set.
const LINEAR_KEY_CHECK: usize = 16;

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn rest(&self) -> &[u8] {
        self.bytes.get(self.pos..).unwrap_or(&[])
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, reason: &'static str) -> Result<(), CanonicalJsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(syntax(self.pos, reason))
        }
    }

    /// `depth` is the number of containers enclosing this value.
    fn parse_value(&mut self, depth: usize) -> Result<Node<'a>, CanonicalJsonError> {
        match self.peek() {
            None => Err(syntax(self.pos, "unexpected end of input")),
            Some(b'{') => self.parse_object(enter(depth)?),
            Some(b'[') => self.parse_array(enter(depth)?),
            Some(b'"') => self.parse_string().map(Node::String),
            Some(b'-' | b'0'..=b'9') => self.parse_number().map(Node::Number),
            Some(b't') => self.parse_literal(b"true", Node::Bool(true)),
            Some(b'f') => self.parse_literal(b"false", Node::Bool(false)),
            Some(b'n') => self.parse_literal(b"null", Node::Null),
            Some(_) => Err(syntax(self.pos, "expected a JSON value")),
        }
    }

    fn parse_literal(
        &mut self,
        word: &[u8],
        value: Node<'a>,
    ) -> Result<Node<'a>, CanonicalJsonError> {
        if self.rest().starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(syntax(self.pos, "invalid literal"))
        }
    }

    /// `depth` already counts this object.
    fn parse_object(&mut self, depth: usize) -> Result<Node<'a>, CanonicalJsonError> {
        self.pos += 1; // '{'
        let mut members: Vec<(Cow<'a, str>, Node<'a>)> = Vec::new();
        // Keys seen so far, once the object is too large to scan them.
        let mut seen: Option<HashSet<Cow<'a, str>>> = None;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Node::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(syntax(self.pos, "expected string key"));
            }
            let key = self.parse_string()?;
            self.skip_ws();
            self.expect(b':', "expected ':' after object key")?;
            self.skip_ws();
            let value = self.parse_value(depth)?;
            // Duplicate keys make the meaning parser-dependent (first wins,
            // last wins, error); refuse rather than guess.
            let repeated = match &mut seen {
                Some(set) => !set.insert(key.clone()),
                None => members.iter().any(|(k, _)| *k == key),
            };
            if repeated {
                return Err(CanonicalJsonError::DuplicateKey(key.into_owned()));
            }
            members.push((key, value));
            if seen.is_none() && members.len() == LINEAR_KEY_CHECK {
                seen = Some(members.iter().map(|(k, _)| k.clone()).collect());
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    // Canonical key order: the bytes of the decoded keys.
                    members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                    return Ok(Node::Object(members));
                }
                _ => return Err(syntax(self.pos, "expected ',' or '}' in object")),
            }
        }
    }

    /// `depth` already counts this array.
    fn parse_array(&mut self, depth: usize) -> Result<Node<'a>, CanonicalJsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Node::Array(items));
        }
        loop {
            items.push(self.parse_value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(syntax(self.pos, "expected ',' or ']' in array")),
            }
        }
    }

    /// RFC 8259 number grammar; returns the literal text untouched.
    fn parse_number(&mut self) -> Result<Cow<'a, str>, CanonicalJsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            // A leading zero must stand alone ("01" is not JSON).
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(syntax(self.pos, "expected digit in number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.require_digits("expected digit after decimal point")?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.require_digits("expected digit in exponent")?;
        }
        // Only ASCII digits, signs, '.', 'e' and 'E' were accepted above.
        self.slice(start, self.pos)
            .map(Cow::Borrowed)
            .ok_or_else(|| syntax(start, "invalid number"))
    }

    fn skip_digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn require_digits(&mut self, reason: &'static str) -> Result<(), CanonicalJsonError> {
        let before = self.pos;
        self.skip_digits();
        if self.pos == before {
            Err(syntax(self.pos, reason))
        } else {
            Ok(())
        }
    }

    /// The input between two byte offsets that fall on ASCII bytes (or its ends).
    fn slice(&self, from: usize, to: usize) -> Option<&'a str> {
        self.text.get(from..to)
    }

    /// Parses a string starting at its opening quote and returns it decoded: a slice of the
    /// input when it holds no escape.
    fn parse_string(&mut self) -> Result<Cow<'a, str>, CanonicalJsonError> {
        let open = self.pos;
        self.pos += 1; // '"'
        let mut out: Option<Vec<u8>> = None;
        loop {
            // Take the run of bytes that need no attention in one go.
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = self.bytes.get(run_start..self.pos).unwrap_or(&[]);
            match self.peek() {
                None => return Err(syntax(open, "unterminated string")),
                Some(b'"') => {
                    let Some(mut decoded) = out else {
                        self.pos += 1;
                        return self
                            .slice(run_start, self.pos - 1)
                            .map(Cow::Borrowed)
                            .ok_or_else(|| syntax(open, "invalid UTF-8 in string"));
                    };
                    decoded.extend_from_slice(run);
                    self.pos += 1;
                    // Cannot fail: the input was valid UTF-8, we only split it at ASCII
                    // bytes, and escapes append whole encoded chars. Still no unwrap.
                    return String::from_utf8(decoded)
                        .map(Cow::Owned)
                        .map_err(|_| syntax(open, "invalid UTF-8 in string"));
                }
                Some(b'\\') => {
                    let decoded = out.get_or_insert_with(Vec::new);
                    decoded.extend_from_slice(run);
                    self.parse_escape(decoded)?;
                }
                Some(_) => return Err(syntax(self.pos, "control character in string")),
            }
        }
    }

    fn parse_escape(&mut self, out: &mut Vec<u8>) -> Result<(), CanonicalJsonError> {
        let at = self.pos;
        self.pos += 1; // '\'
        let simple = match self.peek() {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0C,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                self.pos += 1;
                let ch = self.parse_unicode_escape(at)?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                return Ok(());
            }
            _ => return Err(syntax(at, "invalid escape sequence")),
        };
        self.pos += 1;
        out.push(simple);
        Ok(())
    }

    /// After `\u`: four hex digits, plus a second `\uXXXX` for a surrogate
    /// pair. Lone surrogates are rejected: they cannot be encoded in UTF-8.
    fn parse_unicode_escape(&mut self, at: usize) -> Result<char, CanonicalJsonError> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.rest().starts_with(b"\\u") {
                    return Err(syntax(at, "lone high surrogate escape"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(syntax(at, "high surrogate not followed by low surrogate"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(syntax(at, "lone low surrogate escape")),
            other => other,
        };
        char::from_u32(code).ok_or_else(|| syntax(at, "invalid unicode escape"))
    }

    fn hex4(&mut self) -> Result<u32, CanonicalJsonError> {
        let mut code = 0u32;
        for _ in 0..4 {
            let digit = self
                .peek()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or_else(|| syntax(self.pos, "expected 4 hex digits in \\u escape"))?;
            code = (code << 4) | digit;
            self.pos += 1;
        }
        Ok(code)
    }
}

/// Depth of a container opened at `depth`, or `TooDeep`. Checked before
/// recursing, so recursion is bounded by `MAX_DEPTH` whatever the input.
fn enter(depth: usize) -> Result<usize, CanonicalJsonError> {
    let inner = depth + 1;
    if inner > MAX_DEPTH {
        Err(CanonicalJsonError::TooDeep)
    } else {
        Ok(inner)
    }
}

/// The `json-v1` bytes of a value.
pub fn canonical_bytes(value: &Node<'_>) -> Vec<u8> {
    to_canonical_bytes(value)
}

fn to_canonical_bytes(value: &Node<'_>) -> Vec<u8> {
    // Sized once: growing from empty cost a reallocation per doubling, per row.
    let mut out = Vec::with_capacity(canonical_len(value));
    write_value(value, &mut out);
    out
}

/// The length of a value's `json-v1` bytes, short only by the escapes its strings need.
fn canonical_len(value: &Node<'_>) -> usize {
    match value {
        Node::Null | Node::Bool(true) => 4,
        Node::Bool(false) => 5,
        Node::Number(literal) => literal.len(),
        Node::String(s) => s.len().saturating_add(2),
        Node::Array(items) => items
            .iter()
            .map(|item| canonical_len(item).saturating_add(1))
            .fold(2, usize::saturating_add),
        Node::Object(members) => members
            .iter()
            .map(|(key, item)| canonical_len(item).saturating_add(key.len().saturating_add(4)))
            .fold(2, usize::saturating_add),
    }
}

// Recursion here is bounded because every `Node` came from the parser (or from rows a
// caller built, which are shallow).
fn write_value(value: &Node<'_>, out: &mut Vec<u8>) {
    match value {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Bool(true) => out.extend_from_slice(b"true"),
        Node::Bool(false) => out.extend_from_slice(b"false"),
        Node::Number(literal) => out.extend_from_slice(literal.as_bytes()),
        Node::String(s) => write_string(s, out),
        Node::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Node::Object(members) => write_object(members, out, |_, item, out| write_value(item, out)),
    }
}

/// `{"key":value,...}`, each value written by `write_item`.
fn write_object<'n, 'a: 'n>(
    members: &'n [(Cow<'a, str>, Node<'a>)],
    out: &mut Vec<u8>,
    mut write_item: impl FnMut(&str, &'n Node<'a>, &mut Vec<u8>),
) {
    out.push(b'{');
    for (i, (key, item)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_item(key, item, out);
    }
    out.push(b'}');
}

/// `write_value`, but the array at `rows_path` is written from the rows' canonical bytes, in
/// `order`. The path was followed once already, so every step of it is an object member.
fn write_with_rows(
    value: &Node<'_>,
    rows_path: &[&str],
    rows: &[Vec<u8>],
    order: &[usize],
    out: &mut Vec<u8>,
) {
    match (rows_path.split_first(), value) {
        (None, _) => {
            out.push(b'[');
            for (i, &row) in order.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&rows[row]);
            }
            out.push(b']');
        }
        (Some((step, below)), Node::Object(members)) => {
            write_object(members, out, |key, item, out| {
                if key == *step {
                    write_with_rows(item, below, rows, order, out);
                } else {
                    write_value(item, out);
                }
            })
        }
        (Some(_), other) => write_value(other, out),
    }
}

/// Minimal escaping: only what JSON requires. Working byte-wise is safe
/// because every byte of a multi-byte UTF-8 sequence is >= 0x80; the bytes
/// between two escapes are copied as one run.
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.push(b'"');
    let mut run = 0;
    for (at, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0C => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(bytes.get(run..at).unwrap_or_default());
        run = at + 1;
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0F)]);
        } else {
            out.extend_from_slice(escape);
        }
    }
    out.extend_from_slice(bytes.get(run..).unwrap_or_default());
    out.push(b'"');
}

#[cfg(test)]
mod tests;
