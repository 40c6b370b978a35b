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
//! The parser is strict RFC 8259 (one value, UTF-8, no BOM, no trailing
//! bytes, no duplicate keys) and never panics: nesting is capped at
//! [`MAX_DEPTH`], so hostile input cannot overflow the stack.

use std::collections::BTreeMap;
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
    let value = parse(input)?;
    Ok(to_canonical_bytes(&value))
}

/// Canonical bytes of `input` under rule `json-unordered-rows-v1`: the array
/// reached by following the object keys `rows_path` from the root (the root
/// itself when the path is empty) is sorted by its elements' canonical bytes.
/// Only that array is reordered; arrays nested inside rows keep their order.
pub fn canonicalize_unordered_rows(
    input: &[u8],
    rows_path: &[&str],
) -> Result<Vec<u8>, CanonicalJsonError> {
    let mut root = parse(input)?;
    let rows = rows_mut(&mut root, rows_path)?;
    let mut keyed: Vec<(Vec<u8>, JsonValue)> = std::mem::take(rows)
        .into_iter()
        .map(|row| (to_canonical_bytes(&row), row))
        .collect();
    // Plain byte-wise order of the canonical form: independent of any
    // notion of numeric or locale ordering, so it is stable forever.
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    *rows = keyed.into_iter().map(|(_, row)| row).collect();
    Ok(to_canonical_bytes(&root))
}

/// Canonical bytes (`json-v1`) of each element of the array at `rows_path`,
/// in source order.
pub fn canonical_rows(
    input: &[u8],
    rows_path: &[&str],
) -> Result<Vec<Vec<u8>>, CanonicalJsonError> {
    let mut root = parse(input)?;
    let rows = rows_mut(&mut root, rows_path)?;
    Ok(rows.iter().map(to_canonical_bytes).collect())
}

/// Parsed document. Numbers keep their literal text; strings are decoded;
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
    parse(input)
}

fn rows_mut<'v>(
    root: &'v mut JsonValue,
    rows_path: &[&str],
) -> Result<&'v mut Vec<JsonValue>, CanonicalJsonError> {
    let joined = || rows_path.join("/");
    let mut current = root;
    for key in rows_path {
        current = match current {
            JsonValue::Object(map) => map
                .get_mut(*key)
                .ok_or_else(|| CanonicalJsonError::RowsPathMissing(joined()))?,
            // A path step through a non-object cannot exist.
            _ => return Err(CanonicalJsonError::RowsPathMissing(joined())),
        };
    }
    match current {
        JsonValue::Array(rows) => Ok(rows),
        _ => Err(CanonicalJsonError::RowsNotArray(joined())),
    }
}

fn parse(input: &[u8]) -> Result<JsonValue, CanonicalJsonError> {
    // A BOM is not JSON (RFC 8259 §8.1 forbids emitting one); name it
    // explicitly because it is the most common way "valid" files fail.
    if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(syntax(0, "byte order mark is not allowed"));
    }
    // Validating UTF-8 once up front means every later byte slice that is
    // split only at ASCII delimiters is itself valid UTF-8.
    if let Err(e) = std::str::from_utf8(input) {
        return Err(syntax(e.valid_up_to(), "invalid UTF-8"));
    }
    let mut parser = Parser {
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
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
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
    fn parse_value(&mut self, depth: usize) -> Result<JsonValue, CanonicalJsonError> {
        match self.peek() {
            None => Err(syntax(self.pos, "unexpected end of input")),
            Some(b'{') => self.parse_object(enter(depth)?),
            Some(b'[') => self.parse_array(enter(depth)?),
            Some(b'"') => self.parse_string().map(JsonValue::String),
            Some(b'-' | b'0'..=b'9') => self.parse_number().map(JsonValue::Number),
            Some(b't') => self.parse_literal(b"true", JsonValue::Bool(true)),
            Some(b'f') => self.parse_literal(b"false", JsonValue::Bool(false)),
            Some(b'n') => self.parse_literal(b"null", JsonValue::Null),
            Some(_) => Err(syntax(self.pos, "expected a JSON value")),
        }
    }

    fn parse_literal(
        &mut self,
        word: &[u8],
        value: JsonValue,
    ) -> Result<JsonValue, CanonicalJsonError> {
        if self.rest().starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(syntax(self.pos, "invalid literal"))
        }
    }

    /// `depth` already counts this object.
    fn parse_object(&mut self, depth: usize) -> Result<JsonValue, CanonicalJsonError> {
        self.pos += 1; // '{'
        let mut map = BTreeMap::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(JsonValue::Object(map));
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
            if map.contains_key(&key) {
                return Err(CanonicalJsonError::DuplicateKey(key));
            }
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JsonValue::Object(map));
                }
                _ => return Err(syntax(self.pos, "expected ',' or '}' in object")),
            }
        }
    }

    /// `depth` already counts this array.
    fn parse_array(&mut self, depth: usize) -> Result<JsonValue, CanonicalJsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(JsonValue::Array(items));
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
                    return Ok(JsonValue::Array(items));
                }
                _ => return Err(syntax(self.pos, "expected ',' or ']' in array")),
            }
        }
    }

    /// RFC 8259 number grammar; returns the literal text untouched.
    fn parse_number(&mut self) -> Result<String, CanonicalJsonError> {
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
        let literal = self.bytes.get(start..self.pos).unwrap_or(&[]);
        // Only ASCII digits, signs, '.', 'e' and 'E' were accepted above.
        String::from_utf8(literal.to_vec()).map_err(|_| syntax(start, "invalid number"))
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

    /// Parses a string starting at its opening quote and returns it decoded.
    fn parse_string(&mut self) -> Result<String, CanonicalJsonError> {
        let open = self.pos;
        self.pos += 1; // '"'
        let mut out: Vec<u8> = Vec::new();
        loop {
            // Copy the run of bytes that need no attention in one go.
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.extend_from_slice(self.bytes.get(run_start..self.pos).unwrap_or(&[]));
            match self.peek() {
                None => return Err(syntax(open, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => self.parse_escape(&mut out)?,
                Some(_) => return Err(syntax(self.pos, "control character in string")),
            }
        }
        // Cannot fail: the input was valid UTF-8, we only split it at ASCII
        // bytes, and escapes append whole encoded chars. Still no unwrap.
        String::from_utf8(out).map_err(|_| syntax(open, "invalid UTF-8 in string"))
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

fn to_canonical_bytes(value: &JsonValue) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(value, &mut out);
    out
}

// Recursion here is bounded because every `JsonValue` came from the parser.
fn write_value(value: &JsonValue, out: &mut Vec<u8>) {
    match value {
        JsonValue::Null => out.extend_from_slice(b"null"),
        JsonValue::Bool(true) => out.extend_from_slice(b"true"),
        JsonValue::Bool(false) => out.extend_from_slice(b"false"),
        JsonValue::Number(literal) => out.extend_from_slice(literal.as_bytes()),
        JsonValue::String(s) => write_string(s, out),
        JsonValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        JsonValue::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
    }
}

/// Minimal escaping: only what JSON requires. Working byte-wise is safe
/// because every byte of a multi-byte UTF-8 sequence is >= 0x80.
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for b in s.bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x00..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0x0F)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests;
