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
mod tests {
    use super::*;

    fn canon(input: &str) -> Result<String, CanonicalJsonError> {
        canonicalize(input.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    fn ok(input: &str) -> String {
        canon(input).unwrap_or_else(|e| panic!("{input:?} rejected: {e}"))
    }

    fn is_syntax(r: Result<String, CanonicalJsonError>) -> bool {
        matches!(r, Err(CanonicalJsonError::Syntax { .. }))
    }

    #[test]
    fn key_order_independent() {
        let a = ok(r#"{"b":1,"a":{"y":true,"x":null},"c":[3,2,1]}"#);
        let b = ok(r#"{"c":[3,2,1],"a":{"x":null,"y":true},"b":1}"#);
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":{"x":null,"y":true},"b":1,"c":[3,2,1]}"#);
    }

    #[test]
    fn keys_sorted_by_utf8_bytes() {
        // Byte order, not UTF-16 order: U+FF61 (EF BD A1) sorts before
        // U+1F600 (F0 9F 98 80), though in UTF-16 the surrogate D83D < FF61.
        let out = ok(r#"{"😀":1,"｡":2,"B":3,"a":4,"":5}"#);
        assert_eq!(out, r#"{"":5,"B":3,"a":4,"｡":2,"😀":1}"#);
    }

    #[test]
    fn whitespace_independent() {
        let a = ok(" \t\r\n{ \"a\" : [ 1 , 2 ] ,\n\"b\":\"x y\" } \n");
        assert_eq!(a, r#"{"a":[1,2],"b":"x y"}"#);
    }

    #[test]
    fn number_literals_preserved() {
        assert_eq!(ok(r#"{"p":820.00}"#), r#"{"p":820.00}"#);
        assert_ne!(ok("820.00"), ok("820.0"));
        assert_ne!(ok("820"), ok("820.0"));
        assert_eq!(ok("1e3"), "1e3");
        assert_eq!(ok("1E+3"), "1E+3");
        assert_eq!(ok("-0"), "-0");
        assert_eq!(ok("0.0e-0"), "0.0e-0");
        assert_eq!(ok("12345678901234567890.1"), "12345678901234567890.1");
        assert_ne!(
            ok("12345678901234567890.1"),
            ok("12345678901234567890.2"),
            "values equal as f64 must still differ"
        );
        assert_eq!(ok("1e999999"), "1e999999");
    }

    #[test]
    fn invalid_numbers_rejected() {
        for bad in [
            "01",
            "-01",
            "-",
            "+1",
            "1.",
            ".5",
            "1.e3",
            "1e",
            "1e+",
            "0x10",
            "NaN",
            "Infinity",
            "-Infinity",
            "1_000",
            "--1",
            "1.5.5",
        ] {
            assert!(is_syntax(canon(bad)), "{bad:?} accepted");
            assert!(is_syntax(canon(&format!("[{bad}]"))), "[{bad}] accepted");
        }
    }

    #[test]
    fn escape_equivalence() {
        assert_eq!(ok(r#""\u0041""#), ok(r#""A""#));
        assert_eq!(ok(r#""\u00e9""#), ok("\"é\""));
        assert_eq!(ok(r#""\u00E9""#), "\"é\"");
        assert_eq!(ok(r#""\/""#), r#""/""#);
        assert_eq!(ok(r#""\ud83d\ude00""#), "\"😀\"");
        assert_eq!(ok(r#"{"\u0061":1}"#), r#"{"a":1}"#);
        // Canonical escapes: short forms, else lowercase \u00XX.
        assert_eq!(
            ok(r#""\u0008\u000C\u000a\u000D\u0009\u0000\u001F\u007f\"\\""#),
            "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\\\"\\\\\""
        );
        // U+2028 is legal raw in JSON and is emitted raw.
        assert_eq!(ok(r#""\u2028""#), "\"\u{2028}\"");
    }

    #[test]
    fn bad_strings_rejected() {
        for bad in [
            "\"abc",
            "\"a\u{1}b\"",
            "\"tab\there\"",
            "\"new\nline\"",
            r#""\x41""#,
            r#""\u12G4""#,
            r#""\u12""#,
            r#""\ud800""#,
            r#""\ud800x""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800\ud800""#,
            r#""\"#,
            "'single'",
        ] {
            assert!(is_syntax(canon(bad)), "{bad:?} accepted");
        }
    }

    #[test]
    fn duplicate_keys_rejected() {
        assert_eq!(
            canon(r#"{"a":1,"b":2,"a":3}"#),
            Err(CanonicalJsonError::DuplicateKey("a".into()))
        );
        assert_eq!(
            canon(r#"{"a":1,"\u0061":1}"#),
            Err(CanonicalJsonError::DuplicateKey("a".into()))
        );
        assert_eq!(
            canon(r#"[{"x":{"k":1,"k":1}}]"#),
            Err(CanonicalJsonError::DuplicateKey("k".into()))
        );
        // Same key in sibling objects is fine.
        assert!(canon(r#"[{"a":1},{"a":1}]"#).is_ok());
    }

    #[test]
    fn depth_limit() {
        let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(canon(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(
            canon(&nested(MAX_DEPTH + 1)),
            Err(CanonicalJsonError::TooDeep)
        );
        assert_eq!(
            canon(&"[".repeat(100_000)),
            Err(CanonicalJsonError::TooDeep)
        );
        assert_eq!(
            canon(&"{\"a\":".repeat(100_000)),
            Err(CanonicalJsonError::TooDeep)
        );
        assert_eq!(
            canon(&"[{\"a\":".repeat(50_000)),
            Err(CanonicalJsonError::TooDeep)
        );
    }

    #[test]
    fn trailing_garbage_and_framing() {
        for bad in [
            "{} x",
            "{}{}",
            "[1]]",
            "1 2",
            "null,",
            "",
            "   ",
            "[1,]",
            "{\"a\":1,}",
        ] {
            assert!(is_syntax(canon(bad)), "{bad:?} accepted");
        }
        for bad in [
            "tru", "nul", "falsey", "True", "[,1]", "{,}", "{\"a\"}", "{1:2}",
        ] {
            assert!(is_syntax(canon(bad)), "{bad:?} accepted");
        }
        // RFC 8259 allows any value at top level.
        assert_eq!(ok(" 42 "), "42");
        assert_eq!(ok("\"s\""), "\"s\"");
        assert_eq!(ok("null"), "null");
    }

    #[test]
    fn bom_and_invalid_utf8_rejected() {
        assert_eq!(
            canonicalize(b"\xEF\xBB\xBF{}"),
            Err(CanonicalJsonError::Syntax {
                offset: 0,
                reason: "byte order mark is not allowed"
            })
        );
        assert!(matches!(
            canonicalize(b"{\"a\":\"\xFF\"}"),
            Err(CanonicalJsonError::Syntax { offset: 6, .. })
        ));
        // Overlong encoding and UTF-8-encoded surrogate.
        assert!(canonicalize(b"\"\xC0\xAF\"").is_err());
        assert!(canonicalize(b"\"\xED\xA0\x80\"").is_err());
        // Truncated multi-byte char at end.
        assert!(canonicalize(b"\"\xE2\x82").is_err());
    }

    #[test]
    fn syntax_offsets_point_at_problem() {
        assert_eq!(
            canon("[1, x]"),
            Err(CanonicalJsonError::Syntax {
                offset: 4,
                reason: "expected a JSON value"
            })
        );
        assert!(matches!(
            canon("{} x"),
            Err(CanonicalJsonError::Syntax { offset: 3, .. })
        ));
    }

    #[test]
    fn unordered_rows() {
        let a = br#"{"offers":[{"id":1,"p":"9.50"},{"id":2,"p":"3.00"}],"v":1}"#;
        let b = br#"{"v":1,"offers":[{"p":"3.00","id":2},{"p":"9.50","id":1}]}"#;
        assert_ne!(canonicalize(a).unwrap(), canonicalize(b).unwrap());
        let ua = canonicalize_unordered_rows(a, &["offers"]).unwrap();
        let ub = canonicalize_unordered_rows(b, &["offers"]).unwrap();
        assert_eq!(ua, ub);
        assert_eq!(
            String::from_utf8(ua).unwrap(),
            r#"{"offers":[{"id":1,"p":"9.50"},{"id":2,"p":"3.00"}],"v":1}"#
        );
        // Duplicated rows are kept (multiset, not set).
        let d1 = canonicalize_unordered_rows(br#"{"offers":[1,2,1]}"#, &["offers"]).unwrap();
        let d2 = canonicalize_unordered_rows(br#"{"offers":[1,2]}"#, &["offers"]).unwrap();
        assert_eq!(d1, b"{\"offers\":[1,1,2]}".to_vec());
        assert_ne!(d1, d2);
        // Arrays nested inside rows keep their order.
        let n1 = canonicalize_unordered_rows(br#"{"offers":[[2,1]]}"#, &["offers"]).unwrap();
        let n2 = canonicalize_unordered_rows(br#"{"offers":[[1,2]]}"#, &["offers"]).unwrap();
        assert_ne!(n1, n2);
        // Empty path: the root is the rows array.
        assert_eq!(
            canonicalize_unordered_rows(b"[3,1,2]", &[]).unwrap(),
            b"[1,2,3]".to_vec()
        );
    }

    #[test]
    fn nested_rows_path() {
        let a = br#"{"data":{"offers":["b","a"],"n":1},"offers":["z","y"]}"#;
        let b = br#"{"data":{"n":1,"offers":["a","b"]},"offers":["z","y"]}"#;
        let ua = canonicalize_unordered_rows(a, &["data", "offers"]).unwrap();
        assert_eq!(
            ua,
            canonicalize_unordered_rows(b, &["data", "offers"]).unwrap()
        );
        // Only the addressed array is sorted.
        assert_eq!(
            String::from_utf8(ua).unwrap(),
            r#"{"data":{"n":1,"offers":["a","b"]},"offers":["z","y"]}"#
        );
    }

    #[test]
    fn rows_path_errors() {
        let doc = br#"{"data":{"offers":{"a":1},"list":[1]},"n":5}"#;
        assert_eq!(
            canonicalize_unordered_rows(doc, &["data", "missing"]),
            Err(CanonicalJsonError::RowsPathMissing("data/missing".into()))
        );
        assert_eq!(
            canonicalize_unordered_rows(doc, &["n", "x"]),
            Err(CanonicalJsonError::RowsPathMissing("n/x".into()))
        );
        assert_eq!(
            canonicalize_unordered_rows(doc, &["data", "offers"]),
            Err(CanonicalJsonError::RowsNotArray("data/offers".into()))
        );
        assert_eq!(
            canonical_rows(doc, &["offers"]),
            Err(CanonicalJsonError::RowsPathMissing("offers".into()))
        );
        assert_eq!(
            canonicalize_unordered_rows(b"[1]", &["offers"]),
            Err(CanonicalJsonError::RowsPathMissing("offers".into()))
        );
        assert_eq!(
            canonical_rows(doc, &["data", "list"]),
            Ok(vec![b"1".to_vec()])
        );
        // Parse errors win over path errors.
        assert!(matches!(
            canonicalize_unordered_rows(b"{\"offers\":[}", &["offers"]),
            Err(CanonicalJsonError::Syntax { .. })
        ));
    }

    #[test]
    fn canonical_rows_in_source_order() {
        let rows = canonical_rows(
            br#"{"offers":[ {"b":2, "a":1}, 7, "\u0041" ]}"#,
            &["offers"],
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                br#"{"a":1,"b":2}"#.to_vec(),
                b"7".to_vec(),
                br#""A""#.to_vec()
            ]
        );
        assert_eq!(canonical_rows(br#"{"offers":[]}"#, &["offers"]), Ok(vec![]));
    }

    #[test]
    fn error_display() {
        let e = CanonicalJsonError::Syntax {
            offset: 3,
            reason: "x",
        };
        assert_eq!(e.to_string(), "invalid JSON at byte 3: x");
        assert_eq!(
            CanonicalJsonError::RowsNotArray("a/b".into()).to_string(),
            "value at rows path \"a/b\" is not an array"
        );
        let _: &dyn std::error::Error = &CanonicalJsonError::TooDeep;
    }

    // ---- randomized property tests (no extra crates) ----

    /// xorshift64*: tiny, deterministic, good enough to drive generators.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn chance(&mut self, one_in: usize) -> bool {
            self.below(one_in) == 0
        }
        fn shuffle<T>(&mut self, items: &mut [T]) {
            for i in (1..items.len()).rev() {
                items.swap(i, self.below(i + 1));
            }
        }
    }

    /// Test-side value model (independent of the module's `JsonValue`).
    #[derive(Clone)]
    enum J {
        Null,
        Bool(bool),
        Num(String),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    const CHARS: &[char] = &[
        'a',
        'b',
        'Z',
        '0',
        ' ',
        '"',
        '\\',
        '/',
        '\n',
        '\t',
        '\r',
        '\u{8}',
        '\u{c}',
        '\u{0}',
        '\u{1f}',
        '\u{7f}',
        'é',
        'ß',
        '中',
        '\u{2028}',
        '\u{ffff}',
        '😀',
        '\u{10ffff}',
    ];

    fn gen_string(rng: &mut Rng) -> String {
        (0..rng.below(6))
            .map(|_| CHARS[rng.below(CHARS.len())])
            .collect()
    }

    fn gen_digits(rng: &mut Rng, first_nonzero: bool) -> String {
        let len = 1 + rng.below(25);
        (0..len)
            .map(|i| {
                let lo: u8 = if i == 0 && first_nonzero { 1 } else { 0 };
                char::from(b'0' + lo + rng.below(usize::from(10 - lo)) as u8)
            })
            .collect()
    }

    fn gen_number(rng: &mut Rng) -> String {
        let mut s = String::new();
        if rng.chance(3) {
            s.push('-');
        }
        if rng.chance(4) {
            s.push('0');
        } else {
            s += &gen_digits(rng, true);
        }
        if rng.chance(2) {
            s.push('.');
            s += &gen_digits(rng, false);
        }
        if rng.chance(4) {
            s.push(['e', 'E'][rng.below(2)]);
            s += ["", "+", "-"][rng.below(3)];
            s += &gen_digits(rng, false);
        }
        s
    }

    fn gen_value(rng: &mut Rng, depth: usize) -> J {
        let kinds = if depth >= 5 { 4 } else { 6 };
        match rng.below(kinds) {
            0 => J::Null,
            1 => J::Bool(rng.chance(2)),
            2 => J::Num(gen_number(rng)),
            3 => J::Str(gen_string(rng)),
            4 => J::Arr(
                (0..rng.below(5))
                    .map(|_| gen_value(rng, depth + 1))
                    .collect(),
            ),
            _ => {
                let mut fields: Vec<(String, J)> = Vec::new();
                for _ in 0..rng.below(5) {
                    let key = gen_string(rng);
                    if fields.iter().all(|(k, _)| *k != key) {
                        fields.push((key, gen_value(rng, depth + 1)));
                    }
                }
                J::Obj(fields)
            }
        }
    }

    /// Independent expected canonical form.
    fn expected(v: &J, out: &mut String) {
        match v {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(n),
            J::Str(s) => expected_str(s, out),
            J::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    expected(item, out);
                }
                out.push(']');
            }
            J::Obj(fields) => {
                let mut sorted: Vec<&(String, J)> = fields.iter().collect();
                sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                out.push('{');
                for (i, (k, item)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    expected_str(k, out);
                    out.push(':');
                    expected(item, out);
                }
                out.push('}');
            }
        }
    }

    fn expected_str(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }

    fn ws(rng: &mut Rng, out: &mut String) {
        for _ in 0..rng.below(3) {
            out.push([' ', '\t', '\n', '\r'][rng.below(4)]);
        }
    }

    /// Same value, written the way an arbitrary producer might write it.
    fn noisy(rng: &mut Rng, v: &J, out: &mut String) {
        ws(rng, out);
        match v {
            J::Null | J::Bool(_) | J::Num(_) => expected(v, out),
            J::Str(s) => noisy_str(rng, s, out),
            J::Arr(items) => {
                out.push('[');
                ws(rng, out);
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    noisy(rng, item, out);
                }
                out.push(']');
            }
            J::Obj(fields) => {
                let mut shuffled = fields.clone();
                rng.shuffle(&mut shuffled);
                out.push('{');
                ws(rng, out);
                for (i, (k, item)) in shuffled.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        ws(rng, out);
                    }
                    noisy_str(rng, k, out);
                    ws(rng, out);
                    out.push(':');
                    noisy(rng, item, out);
                }
                out.push('}');
            }
        }
        ws(rng, out);
    }

    fn noisy_str(rng: &mut Rng, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let must_escape = matches!(c, '"' | '\\') || (c as u32) < 0x20;
            match rng.below(3) {
                0 if !must_escape => out.push(c),
                1 => {
                    let short = match c {
                        '"' => Some("\\\""),
                        '\\' => Some("\\\\"),
                        '/' => Some("\\/"),
                        '\u{8}' => Some("\\b"),
                        '\u{c}' => Some("\\f"),
                        '\n' => Some("\\n"),
                        '\r' => Some("\\r"),
                        '\t' => Some("\\t"),
                        _ => None,
                    };
                    match short {
                        Some(esc) => out.push_str(esc),
                        None => unicode_escape(rng, c, out),
                    }
                }
                _ => unicode_escape(rng, c, out),
            }
        }
        out.push('"');
    }

    fn unicode_escape(rng: &mut Rng, c: char, out: &mut String) {
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            if rng.chance(2) {
                out.push_str(&format!("\\u{:04X}", unit));
            } else {
                out.push_str(&format!("\\u{:04x}", unit));
            }
        }
    }

    #[test]
    fn property_noisy_forms_canonicalize_identically() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..3000 {
            let v = gen_value(&mut rng, 0);
            let mut want = String::new();
            expected(&v, &mut want);
            let mut a = String::new();
            noisy(&mut rng, &v, &mut a);
            let mut b = String::new();
            noisy(&mut rng, &v, &mut b);
            let ca = canonicalize(a.as_bytes())
                .unwrap_or_else(|e| panic!("round {round}: {a:?} rejected: {e}"));
            let cb = canonicalize(b.as_bytes()).unwrap();
            assert_eq!(
                String::from_utf8(ca.clone()).unwrap(),
                want,
                "round {round}: {a:?}"
            );
            assert_eq!(ca, cb, "round {round}");
            // Idempotent: canonical output is a fixed point.
            assert_eq!(canonicalize(&ca).unwrap(), ca, "round {round}");
        }
    }

    #[test]
    fn property_unordered_rows_ignores_row_order() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        for round in 0..500 {
            let mut rows: Vec<J> = (0..rng.below(8)).map(|_| gen_value(&mut rng, 1)).collect();
            let doc = |rows: &[J], rng: &mut Rng| {
                let v = J::Obj(vec![
                    ("meta".into(), J::Num("1".into())),
                    (
                        "data".into(),
                        J::Obj(vec![("offers".into(), J::Arr(rows.to_vec()))]),
                    ),
                ]);
                let mut s = String::new();
                noisy(rng, &v, &mut s);
                s
            };
            let a = doc(&rows, &mut rng);
            rng.shuffle(&mut rows);
            let b = doc(&rows, &mut rng);
            let path = ["data", "offers"];
            let ua = canonicalize_unordered_rows(a.as_bytes(), &path).unwrap();
            let ub = canonicalize_unordered_rows(b.as_bytes(), &path).unwrap();
            assert_eq!(ua, ub, "round {round}");
            // Idempotent under the same rule.
            assert_eq!(canonicalize_unordered_rows(&ua, &path).unwrap(), ua);
            // Rows in the sorted output are exactly the sorted canonical rows.
            let mut sorted_rows = canonical_rows(a.as_bytes(), &path).unwrap();
            sorted_rows.sort();
            assert_eq!(canonical_rows(&ua, &path).unwrap(), sorted_rows);
        }
    }

    #[test]
    fn property_mutated_input_never_panics() {
        const NOISE: &[u8] = b"{}[]\",:\\u0e-+.1 \xff\x00";
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..3000 {
            let v = gen_value(&mut rng, 0);
            let mut s = String::new();
            noisy(&mut rng, &v, &mut s);
            let mut bytes = s.into_bytes();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len() + 1);
                match rng.below(3) {
                    0 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    1 if at < bytes.len() => bytes[at] = rng.next() as u8,
                    _ => bytes.insert(at, NOISE[rng.below(NOISE.len())]),
                }
            }
            // Whatever happens, no panic; and success must be a fixed point.
            if let Ok(c) = canonicalize(&bytes) {
                assert_eq!(canonicalize(&c).unwrap(), c);
            }
            let _ = canonicalize_unordered_rows(&bytes, &["x"]);
        }
    }
}
