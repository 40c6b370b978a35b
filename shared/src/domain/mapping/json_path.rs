//! The JSONPath a connector definition may write: RFC 9535 singular queries (`$`, then member
//! names as `.name`, `['name']` or `["name"]`, and array indexes as `[2]` or `[-1]`), and for
//! the rows one final wildcard (`$.data.items[*]`).
//!
//! Written here rather than taken from a JSONPath crate: those evaluate over `serde_json::Value`,
//! which keeps numbers as `f64` or `i64`, while a payload is read as a [`Node`] tree that keeps
//! every number literal as written (a price or a quantity is never rounded, and the fingerprint
//! sees the bytes sent). A singular query also names one place, which the row order of
//! `json-unordered-rows-v1` and every diagnostic's pointer need; filters and descendants would
//! not.

use crate::domain::canonical_json::Node;
use std::fmt;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Name(String),
    /// An array index; negative counts from the end (`-1` is the last element).
    Index(i64),
}

/// A parsed singular query: the steps from the node it is applied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

/// Where a path cannot be read: the character offset and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    pub offset: usize,
    pub reason: String,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at character {}: {}", self.offset, self.reason)
    }
}

impl JsonPath {
    /// A singular query (`$.stock.available`, `$['Artikel-Nr']`, `$.prices[0].amount`).
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let (path, wildcard) = Parser::new(text).path()?;
        match wildcard {
            None => Ok(path),
            Some(offset) => Err(PathError {
                offset,
                reason: "[*] is allowed only at the end of the rows path".into(),
            }),
        }
    }

    /// The rows path: a singular query to an array, then `[*]` (`$.offers[*]`); the array's
    /// path is returned.
    pub fn parse_rows(text: &str) -> Result<Self, PathError> {
        let (path, wildcard) = Parser::new(text).path()?;
        match wildcard {
            Some(_) => Ok(path),
            None => Err(PathError {
                offset: text.chars().count(),
                reason: "the rows path must end in [*] (\"$.data.items[*]\")".into(),
            }),
        }
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The member names of a path made only of names (the key path `canonical_page` orders
    /// rows at), or `None` when it has an index.
    pub fn names(&self) -> Option<Vec<&str>> {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Name(n) => Some(n.as_str()),
                Segment::Index(_) => None,
            })
            .collect()
    }

    /// The node the path leads to from `root`, if any.
    pub fn select<'n, 'a>(&self, root: &'n Node<'a>) -> Option<&'n Node<'a>> {
        let mut node = root;
        for segment in &self.segments {
            node = match segment {
                Segment::Name(name) => node.get(name)?,
                Segment::Index(index) => {
                    let items = node.as_array()?;
                    let at = if *index < 0 {
                        items
                            .len()
                            .checked_sub(usize::try_from(index.unsigned_abs()).ok()?)?
                    } else {
                        usize::try_from(*index).ok()?
                    };
                    items.get(at)?
                }
            };
        }
        Some(node)
    }

    /// An RFC 6901 JSON pointer to the place the path names (for diagnostics); a negative
    /// index is shown as written.
    pub fn pointer(&self) -> String {
        let mut pointer = String::new();
        for segment in &self.segments {
            pointer.push('/');
            match segment {
                Segment::Name(name) => {
                    pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
                }
                Segment::Index(index) => pointer.push_str(&index.to_string()),
            }
        }
        pointer
    }
}

/// A recursive-descent reader over the path's characters.
struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn new(text: &str) -> Self {
        Parser {
            chars: text.chars().collect(),
            at: 0,
        }
    }

    fn fail<T>(&self, reason: impl Into<String>) -> Result<T, PathError> {
        Err(PathError {
            offset: self.at,
            reason: reason.into(),
        })
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// The whole path: `$`, segments, and the offset of a final `[*]` if there is one.
    fn path(mut self) -> Result<(JsonPath, Option<usize>), PathError> {
        if self.peek() != Some('$') {
            return self.fail("a path starts with $");
        }
        self.at += 1;
        let mut segments = Vec::new();
        while let Some(c) = self.peek() {
            let start = self.at;
            match c {
                '.' => {
                    self.at += 1;
                    segments.push(Segment::Name(self.shorthand_name()?));
                }
                '[' if self.chars.get(self.at + 1) == Some(&'*') => {
                    self.at += 2;
                    self.expect(']')?;
                    if self.peek().is_some() {
                        self.at = start;
                        return self.fail("[*] is allowed only at the end of the rows path");
                    }
                    return Ok((JsonPath { segments }, Some(start)));
                }
                '[' => {
                    self.at += 1;
                    segments.push(self.bracketed()?);
                    self.expect(']')?;
                }
                _ => return self.fail(format!("expected . or [ but found {c:?}")),
            }
        }
        Ok((JsonPath { segments }, None))
    }

    fn expect(&mut self, wanted: char) -> Result<(), PathError> {
        if self.peek() == Some(wanted) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(format!("expected {wanted:?}"))
        }
    }

    /// RFC 9535 member-name-shorthand: a letter, `_` or a non-ASCII character, then those or
    /// digits.
    fn shorthand_name(&mut self) -> Result<String, PathError> {
        let first = |c: char| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii();
        let mut name = String::new();
        match self.peek() {
            Some(c) if first(c) => {}
            Some('*') => return self.fail(".* is not allowed; the rows path ends in [*]"),
            _ => return self.fail("expected a member name after . (use ['name'] for others)"),
        }
        while let Some(c) = self.peek().filter(|c| first(*c) || c.is_ascii_digit()) {
            name.push(c);
            self.at += 1;
        }
        Ok(name)
    }

    /// Inside brackets: a quoted name or an integer index.
    fn bracketed(&mut self) -> Result<Segment, PathError> {
        match self.peek() {
            Some(quote @ ('\'' | '"')) => {
                self.at += 1;
                self.quoted(quote).map(Segment::Name)
            }
            Some(c) if c == '-' || c.is_ascii_digit() => self.index().map(Segment::Index),
            _ => self.fail("expected a quoted name or an index inside [ ]"),
        }
    }

    /// An RFC 9535 int: `0`, or an optional minus and digits without a leading zero, within
    /// ±(2^53 - 1).
    fn index(&mut self) -> Result<i64, PathError> {
        let start = self.at;
        if self.peek() == Some('-') {
            self.at += 1;
        }
        let digits: String = self.chars[self.at..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        self.at += digits.len();
        let text: String = self.chars[start..self.at].iter().collect();
        let leading_zero = digits.len() > 1 && digits.starts_with('0');
        match text.parse::<i64>() {
            Ok(n) if !leading_zero && text != "-0" && n.unsigned_abs() < (1 << 53) => Ok(n),
            _ => {
                self.at = start;
                self.fail(format!("{text:?} is not an index"))
            }
        }
    }

    /// A quoted name up to the closing `quote`, with RFC 9535's escapes.
    fn quoted(&mut self, quote: char) -> Result<String, PathError> {
        let mut name = String::new();
        loop {
            let Some(c) = self.peek() else {
                return self.fail("unterminated quoted name");
            };
            self.at += 1;
            match c {
                c if c == quote => return Ok(name),
                '\\' => name.push(self.escape(quote)?),
                c if (c as u32) < 0x20 => {
                    self.at -= 1;
                    return self.fail("a control character must be escaped");
                }
                c => name.push(c),
            }
        }
    }

    fn escape(&mut self, quote: char) -> Result<char, PathError> {
        let Some(c) = self.peek() else {
            return self.fail("unterminated escape");
        };
        self.at += 1;
        Ok(match c {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '/' | '\\' => c,
            c if c == quote => c,
            'u' => return self.unicode_escape(),
            _ => {
                self.at -= 1;
                return self.fail(format!("unknown escape \\{c}"));
            }
        })
    }

    /// `\uXXXX`, a surrogate pair as two of them.
    fn unicode_escape(&mut self) -> Result<char, PathError> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high).map_or_else(|| self.fail("a lone low surrogate"), Ok);
        }
        if self.peek() != Some('\\') || self.chars.get(self.at + 1) != Some(&'u') {
            return self.fail("a high surrogate must be followed by a low one");
        }
        self.at += 2;
        let low = self.hex4()?;
        if !(0xDC00..0xE000).contains(&low) {
            return self.fail("a high surrogate must be followed by a low one");
        }
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            .map_or_else(|| self.fail("not a character"), Ok)
    }

    fn hex4(&mut self) -> Result<u32, PathError> {
        let digits: String = self.chars.iter().skip(self.at).take(4).collect();
        match u32::from_str_radix(&digits, 16) {
            Ok(n) if digits.len() == 4 && digits.chars().all(|c| c.is_ascii_hexdigit()) => {
                self.at += 4;
                Ok(n)
            }
            _ => self.fail("\\u needs four hex digits"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::canonical_json::parse_node;

    fn names(path: &str) -> Vec<String> {
        JsonPath::parse(path)
            .unwrap()
            .segments()
            .iter()
            .map(|s| format!("{s:?}"))
            .collect()
    }

    #[test]
    fn singular_queries_parse_in_every_notation() {
        assert_eq!(names("$"), Vec::<String>::new());
        assert_eq!(
            names("$.data['items'][\"x y\"][0][-1]"),
            [
                "Name(\"data\")",
                "Name(\"items\")",
                "Name(\"x y\")",
                "Index(0)",
                "Index(-1)"
            ]
        );
        assert_eq!(names("$.Stück_1"), ["Name(\"Stück_1\")"]);
        assert_eq!(names(r"$['a\'b\u00e9\ud83d\ude00']"), ["Name(\"a'bé😀\")"]);
    }

    #[test]
    fn the_rows_path_ends_in_a_wildcard_and_names_its_array() {
        let rows = JsonPath::parse_rows("$.data.items[*]").unwrap();
        assert_eq!(rows.names(), Some(vec!["data", "items"]));
        assert_eq!(rows.pointer(), "/data/items");
        assert!(JsonPath::parse_rows("$.data.items").is_err());
        assert!(JsonPath::parse("$.data[*]").is_err());
        assert!(JsonPath::parse_rows("$[*].x").is_err());
    }

    #[test]
    fn malformed_paths_are_refused_with_their_offset() {
        for (path, offset) in [
            ("", 0),
            ("data", 0),
            ("$.", 2),
            ("$.1a", 2),
            ("$[01]", 2),
            ("$[-0]", 2),
            ("$['a", 4),
            ("$['a'", 5),
            ("$[9007199254740992]", 2),
            ("$..a", 2),
            ("$.*", 2),
            (r"$['\x']", 4),
            (r"$['\ud800']", 9),
        ] {
            let e = JsonPath::parse(path).unwrap_err();
            assert_eq!(e.offset, offset, "{path}: {e}");
        }
    }

    #[test]
    fn select_follows_names_and_indexes_and_never_panics() {
        let doc = br#"{"a":{"b":[10,20,{"c":"x"}]},"k~/":1}"#;
        let root = parse_node(doc).unwrap();
        let at = |p: &str| JsonPath::parse(p).unwrap().select(&root).cloned();
        assert_eq!(
            at("$.a.b[2].c")
                .and_then(|n| n.as_str().map(str::to_owned))
                .as_deref(),
            Some("x")
        );
        assert!(at("$.a.b[-3]").is_some());
        assert!(at("$.a.b[-4]").is_none());
        assert!(at("$.a.b[3]").is_none());
        assert!(at("$.a.b.c").is_none());
        assert!(at(&format!("$.a.b[{}]", (1i64 << 53) - 1)).is_none());
        assert!(at(&format!("$.a.b[-{}]", (1i64 << 53) - 1)).is_none());
        assert_eq!(JsonPath::parse("$['k~/']").unwrap().pointer(), "/k~0~1");
    }
}
