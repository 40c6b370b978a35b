//! Payload diffs: what differs between the payload a mismatch was judged against and the
//! quarantined one, as JSON pointers for JSON payloads and as a byte and line summary otherwise.

use super::bodies::{ByteSummary, JsonPayloadDiff, LineDifference, LineSummary, PayloadDiff};
use super::MAX_DIFF_ENTRIES;
use crate::domain::canonical_json::{parse_document, JsonValue};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// One leaf difference between two JSON documents, at a JSON pointer. A side is absent when the
/// value exists only on the other side (`change` says `added` or `removed`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonDifference {
    pub path: String,
    /// `changed`, `added` (only in the received payload) or `removed` (only in the stored one).
    pub change: &'static str,
    /// The values as `shown_value` renders them: JSON, except that a number a reader could
    /// round is `{"$number": "<literal>"}`. Free-form: whatever the supplier's payload held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonDiff {
    /// The first `cap` differences, in document order (object keys sorted).
    pub differences: Vec<JsonDifference>,
    /// How many differences there are in all.
    pub total: usize,
    pub truncated: bool,
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

struct DiffWalk {
    cap: usize,
    differences: Vec<JsonDifference>,
    total: usize,
}

impl DiffWalk {
    fn push(&mut self, path: &str, stored: Option<&JsonValue>, received: Option<&JsonValue>) {
        self.total += 1;
        if self.differences.len() < self.cap {
            self.differences.push(JsonDifference {
                path: path.to_owned(),
                change: match (stored, received) {
                    (Some(_), Some(_)) => "changed",
                    (None, _) => "added",
                    (_, None) => "removed",
                },
                stored: stored.map(shown_value),
                received: received.map(shown_value),
            });
        }
    }

    // Recursion is bounded: both documents came from the parser, which caps nesting.
    fn walk(&mut self, path: &str, stored: &JsonValue, received: &JsonValue) {
        match (stored, received) {
            (JsonValue::Object(a), JsonValue::Object(b)) => {
                let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for key in keys {
                    let child = format!("{path}/{}", pointer_escape(key));
                    match (a.get(key), b.get(key)) {
                        (Some(x), Some(y)) => self.walk(&child, x, y),
                        (x, y) => self.push(&child, x, y),
                    }
                }
            }
            (JsonValue::Array(a), JsonValue::Array(b)) => {
                for i in 0..a.len().max(b.len()) {
                    let child = format!("{path}/{i}");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => self.walk(&child, x, y),
                        (x, y) => self.push(&child, x, y),
                    }
                }
            }
            // Numbers compare by their literal text: `1.0` and `1.00` differ, and so do two
            // values that only differ beyond f64's precision.
            (a, b) if a == b => {}
            (a, b) => self.push(path, Some(a), Some(b)),
        }
    }
}

/// Leaf differences between two JSON documents: objects by key, arrays index by index, JSON
/// pointer paths (`/offers/0/quantity`); at most `cap` listed. Numbers are compared as written.
pub fn json_diff(stored: &JsonValue, received: &JsonValue, cap: usize) -> JsonDiff {
    let mut walk = DiffWalk {
        cap,
        differences: Vec::new(),
        total: 0,
    };
    walk.walk("", stored, received);
    JsonDiff {
        truncated: walk.total > walk.differences.len(),
        differences: walk.differences,
        total: walk.total,
    }
}

/// The largest integer magnitude every JSON reader holds exactly (JavaScript's f64 included).
const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// A payload value as a diff shows it: plain JSON, except a number that a reader could round or
/// rewrite (a fraction, an exponent, `-0`, an integer beyond 2^53 - 1), which is shown as
/// `{"$number": "<literal>"}` with its text exactly as the payload wrote it.
pub fn shown_value(value: &JsonValue) -> Value {
    match value {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Number(literal) => {
            // A payload value is free-form: the one shape added here is `{"$number": ...}`.
            exact_integer(literal).unwrap_or_else(|| json!({ "$number": literal }))
        }
        JsonValue::String(text) => Value::String(text.clone()),
        JsonValue::Array(items) => Value::Array(items.iter().map(shown_value).collect()),
        JsonValue::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), shown_value(item)))
                .collect(),
        ),
    }
}

/// The literal as a JSON number when it is a plain integer every reader holds exactly.
fn exact_integer(literal: &str) -> Option<Value> {
    let (negative, digits) = match literal.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, literal),
    };
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && !(negative && digits == "0");
    if !plain {
        return None;
    }
    let magnitude: u64 = digits.parse().ok()?;
    if magnitude > MAX_EXACT_INTEGER {
        return None;
    }
    let magnitude = i64::try_from(magnitude).ok()?;
    Some(Value::from(if negative { -magnitude } else { magnitude }))
}

fn excerpt(bytes: &[u8], at: usize) -> String {
    let start = at.saturating_sub(32);
    let end = (at + 64).min(bytes.len());
    String::from_utf8_lossy(&bytes[start.min(end)..end]).into_owned()
}

/// What differs between two payloads that are not both JSON: sizes, the first differing byte
/// with some context and, for text, the differing lines (at most `MAX_DIFF_ENTRIES`).
pub fn byte_summary(stored: &[u8], received: &[u8]) -> ByteSummary {
    let common = stored
        .iter()
        .zip(received)
        .take_while(|(a, b)| a == b)
        .count();
    let identical = stored == received;
    let lines = match (std::str::from_utf8(stored), std::str::from_utf8(received)) {
        (Ok(a), Ok(b)) => Some(line_summary(a, b)),
        _ => None,
    };
    ByteSummary {
        format: if lines.is_some() { "text" } else { "bytes" },
        stored_bytes: stored.len(),
        received_bytes: received.len(),
        identical,
        common_prefix_bytes: common,
        first_difference_offset: (!identical).then_some(common),
        stored_excerpt: (!identical).then(|| excerpt(stored, common)),
        received_excerpt: (!identical).then(|| excerpt(received, common)),
        lines,
    }
}

/// The lines that differ between two texts, line by line (at most `MAX_DIFF_ENTRIES` listed).
fn line_summary(stored: &str, received: &str) -> LineSummary {
    let a: Vec<&str> = stored.lines().collect();
    let b: Vec<&str> = received.lines().collect();
    let clip = |line: &str| line.chars().take(500).collect::<String>();
    let mut lines = Vec::new();
    let mut total = 0;
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x == y {
            continue;
        }
        total += 1;
        if lines.len() < MAX_DIFF_ENTRIES {
            lines.push(LineDifference {
                line: i + 1,
                stored: x.map(|l| clip(l)),
                received: y.map(|l| clip(l)),
            });
        }
    }
    LineSummary {
        truncated: total > lines.len(),
        line_differences: lines,
        line_difference_count: total,
    }
}

/// A diff of the stored payload against the received one: field-level when both are JSON,
/// a byte (and line) summary otherwise.
pub fn payload_diff(stored: &[u8], received: &[u8]) -> PayloadDiff {
    // The project's strict parser keeps number literals; serde_json would read them as f64.
    match (parse_document(stored), parse_document(received)) {
        (Ok(a), Ok(b)) => {
            let diff = json_diff(&a, &b, MAX_DIFF_ENTRIES);
            let same_values = diff.total == 0 && stored != received;
            PayloadDiff::Json(JsonPayloadDiff {
                format: "json",
                differences: diff.differences,
                difference_count: diff.total,
                truncated: diff.truncated,
                note: same_values.then_some(
                    "the documents hold the same values, numbers written alike; they differ in string escaping, whitespace or key order",
                ),
                bytes: same_values.then(|| byte_summary(stored, received)),
            })
        }
        _ => PayloadDiff::Bytes(byte_summary(stored, received)),
    }
}
