//! The checks of a definition document: its JSON Schema (docs/connector.schema.json, compiled
//! once), and the rules a schema cannot state. The rules read the document as JSON, not as a
//! parsed [`Definition`](super::Definition), so that a document with a schema problem still
//! gets every other problem reported in the same answer.

use crate::domain::ids::{ConnectorId, SourceAccount};
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::mapping::parse_xml_path;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One thing wrong with a definition: where (an RFC 6901 pointer into the document; empty for
/// the whole document) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub pointer: String,
    pub message: String,
}

/// A problem's message is capped: a schema message may quote the value it refuses, and a
/// value may be long.
const MAX_PROBLEM_CHARS: usize = 500;

impl Problem {
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if let Some((cut, _)) = message.char_indices().nth(MAX_PROBLEM_CHARS) {
            message.truncate(cut);
            message.push_str("...");
        }
        Problem {
            pointer: pointer.into(),
            message,
        }
    }
}

const SCHEMA: &str = include_str!("../../../../docs/connector.schema.json");

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(SCHEMA).expect("docs/connector.schema.json is JSON");
        jsonschema::draft202012::options()
            .build(&schema)
            .expect("docs/connector.schema.json is a JSON Schema")
    })
}

/// Every schema problem together with every rule problem; `Ok` when there is none.
pub(super) fn schema_problems(document: &Value) -> Result<(), Vec<Problem>> {
    let mut problems: Vec<Problem> = validator()
        .iter_errors(document)
        .map(|e| Problem::new(e.instance_path().to_string(), e.to_string()))
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    // A value the schema refused is not judged again by the rules (one problem, one place).
    let refused: Vec<String> = problems.iter().map(|p| p.pointer.clone()).collect();
    problems.extend(rule_problems_of(document).into_iter().filter(|rule| {
        !refused.iter().any(|at| {
            !at.is_empty() && (rule.pointer == *at || rule.pointer.starts_with(&format!("{at}/")))
        })
    }));
    problems.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    problems.dedup();
    Err(problems)
}

/// The rule problems of a document the schema accepted, read as it was sent (an absent
/// setting is its default to every rule).
pub(super) fn rule_problems(document: &Value) -> Vec<Problem> {
    rule_problems_of(document)
}

/// The rules, each skipped where the part it reads is missing or of another shape (the schema
/// reports that).
fn rule_problems_of(document: &Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    check_ids(document, &mut problems);
    check_fields(document, &mut problems);
    check_format(document, &mut problems);
    check_values(document, &mut problems);
    check_identity(document, &mut problems);
    check_transport(document, &mut problems);
    problems
}

fn text<'d>(document: &'d Value, pointer: &str) -> Option<&'d str> {
    document.pointer(pointer).and_then(Value::as_str)
}

fn check_ids(document: &Value, problems: &mut Vec<Problem>) {
    if let Some(id) = text(document, "/connector") {
        if let Err(e) = ConnectorId::parse(id) {
            problems.push(Problem::new("/connector", e.to_string()));
        }
    }
    if let Some(account) = text(document, "/source_account") {
        if let Err(e) = SourceAccount::parse(account) {
            problems.push(Problem::new("/source_account", e.to_string()));
        }
    }
}

/// What a field's source is read against: the format, whether a CSV has a header, and an
/// XML definition's prefixes.
struct Reading<'d> {
    format: Option<&'d str>,
    header: bool,
    namespaces: BTreeMap<String, String>,
}

/// Each field: exactly one source, one its format can read, a path that parses and a pattern
/// with one capture group; the price breaks' fields alike, at their own pointers.
fn check_fields(document: &Value, problems: &mut Vec<Problem>) {
    let reading = Reading {
        format: text(document, "/format/kind"),
        header: document
            .pointer("/format/header")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        namespaces: namespaces(document),
    };
    let Some(fields) = document.pointer("/fields").and_then(Value::as_object) else {
        return;
    };
    for (name, field) in fields {
        let at = format!("/fields/{name}");
        match name.as_str() {
            "price_breaks" => check_price_breaks(&at, field, &reading, problems),
            _ => check_field(&at, field, &reading, problems),
        }
    }
}

/// One field at `at`.
fn check_field(at: &str, field: &Value, reading: &Reading<'_>, problems: &mut Vec<Problem>) {
    let format = reading.format;
    check_field_source(at, field, format, reading.header, problems);
    if let (Some(path), Some("json")) = (field.get("path").and_then(Value::as_str), format) {
        if let Err(e) = JsonPath::parse(path) {
            problems.push(Problem::new(format!("{at}/path"), format!("{path:?}: {e}")));
        }
    }
    if let (Some(path), Some("xml")) = (field.get("path").and_then(Value::as_str), format) {
        if let Err(e) = parse_xml_path(path, &reading.namespaces, false) {
            problems.push(Problem::new(format!("{at}/path"), format!("{path:?}: {e}")));
        }
    }
    if let Some(pattern) = field.get("pattern").and_then(Value::as_str) {
        if let Err(why) = one_capture_group(pattern) {
            problems.push(Problem::new(format!("{at}/pattern"), why));
        }
    }
}

/// The price breaks at `at`: `each` only in a JSON definition (with a path that parses), and
/// every field of either form as a field. (Both forms at once or neither, and the number of
/// pairs, 1 to [`super::MAX_PRICE_BREAK_PAIRS`], are the schema's to refuse.)
fn check_price_breaks(
    at: &str,
    breaks: &Value,
    reading: &Reading<'_>,
    problems: &mut Vec<Problem>,
) {
    let parts = ["min_quantity", "unit_price"];
    if let Some(each) = breaks.get("each").and_then(Value::as_str) {
        match reading.format {
            Some(kind) if kind != "json" => problems.push(Problem::new(
                format!("{at}/each"),
                "each is read in JSON bodies; list the breaks as pairs",
            )),
            _ => {
                if let Err(e) = JsonPath::parse(each) {
                    problems.push(Problem::new(format!("{at}/each"), format!("{each:?}: {e}")));
                }
                for part in parts {
                    if let Some(field) = breaks.get(part) {
                        check_field(&format!("{at}/{part}"), field, reading, problems);
                    }
                }
            }
        }
    }
    let Some(pairs) = breaks.get("pairs").and_then(Value::as_array) else {
        return;
    };
    for (index, pair) in pairs.iter().enumerate() {
        for part in parts {
            if let Some(field) = pair.get(part) {
                check_field(
                    &format!("{at}/pairs/{index}/{part}"),
                    field,
                    reading,
                    problems,
                );
            }
        }
    }
}

fn check_field_source(
    at: &str,
    field: &Value,
    format: Option<&str>,
    header: bool,
    problems: &mut Vec<Problem>,
) {
    let sources: Vec<&str> = ["column", "position", "path", "constant"]
        .into_iter()
        .filter(|s| field.get(*s).is_some())
        .collect();
    if sources.len() != 1 {
        problems.push(Problem::new(
            at,
            format!(
                "needs exactly one of column, position, path or constant; found {}",
                if sources.is_empty() {
                    "none".to_owned()
                } else {
                    sources.join(", ")
                }
            ),
        ));
        return;
    }
    let readable = match (sources[0], format) {
        ("constant", _) | (_, None) => true,
        ("column", Some("csv")) => header,
        ("position", Some("csv")) => true,
        ("path", Some("json" | "xml")) => true,
        _ => false,
    };
    if !readable {
        let kind = format.unwrap_or_default();
        let why = match sources[0] {
            "column" if kind == "csv" => "a column name needs a header row (format.header \
                                          true); use position instead"
                .to_owned(),
            source => format!(
                "a {kind} body has no {source}: use {}",
                if kind == "csv" {
                    "column or position"
                } else {
                    "path"
                }
            ),
        };
        problems.push(Problem::new(format!("{at}/{}", sources[0]), why));
    }
}

/// A pattern compiles and has exactly one capture group (the value).
fn one_capture_group(pattern: &str) -> Result<(), String> {
    let regex =
        regex_lite::Regex::new(pattern).map_err(|e| format!("not a regular expression: {e}"))?;
    match regex.captures_len() - 1 {
        1 => Ok(()),
        n => Err(format!(
            "has {n} capture groups; exactly one is the value (\"^(\\\\d+)\" takes the digits \
             of \"500 In Stock\")"
        )),
    }
}

/// The format's own settings: a CSV's delimiter and quote, a JSON rows path and document paths.
fn check_format(document: &Value, problems: &mut Vec<Problem>) {
    match text(document, "/format/kind") {
        Some("csv") => check_csv(document, problems),
        Some("json") => check_json(document, problems),
        Some("xml") => {
            if let Some(rows) = text(document, "/format/rows") {
                if let Err(e) = parse_xml_path(rows, &namespaces(document), true) {
                    problems.push(Problem::new("/format/rows", format!("{rows:?}: {e}")));
                }
            }
        }
        _ => {}
    }
    let rule = text(document, "/canonicalization");
    match (text(document, "/format/kind"), rule) {
        (Some(kind @ ("csv" | "xml")), Some(rule)) if rule != "bytes-v1" => {
            problems.push(Problem::new(
                "/canonicalization",
                format!("{rule} reads JSON; a {kind} body is fingerprinted with bytes-v1"),
            ));
        }
        _ => {}
    }
}

/// The prefixes an XML definition declares.
fn namespaces(document: &Value) -> BTreeMap<String, String> {
    document
        .pointer("/format/namespaces")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(prefix, uri)| Some((prefix.clone(), uri.as_str()?.to_owned())))
        .collect()
}

fn check_csv(document: &Value, problems: &mut Vec<Problem>) {
    for setting in ["delimiter", "quote"] {
        let pointer = format!("/format/{setting}");
        if let Some(c) = text(document, &pointer) {
            if !c.is_ascii() || c == "\n" || c == "\r" {
                problems.push(Problem::new(
                    pointer,
                    format!("{c:?}: a CSV {setting} is one ASCII character other than a line end"),
                ));
            }
        }
    }
    let delimiter = text(document, "/format/delimiter").unwrap_or(",");
    let quote = text(document, "/format/quote").unwrap_or("\"");
    if delimiter == quote {
        problems.push(Problem::new(
            "/format/quote",
            format!("the quote {quote:?} is also the delimiter"),
        ));
    }
}

fn check_json(document: &Value, problems: &mut Vec<Problem>) {
    if let Some(rows) = text(document, "/format/rows") {
        if let Err(e) = JsonPath::parse_rows(rows) {
            problems.push(Problem::new("/format/rows", format!("{rows:?}: {e}")));
        } else if text(document, "/canonicalization") == Some("json-unordered-rows-v1")
            && JsonPath::parse_rows(rows)
                .ok()
                .and_then(|p| p.names().map(|_| ()))
                .is_none()
        {
            problems.push(Problem::new(
                "/format/rows",
                "json-unordered-rows-v1 orders rows at a path of member names only",
            ));
        }
    }
    let Some(fields) = document
        .pointer("/format/document")
        .and_then(Value::as_object)
    else {
        return;
    };
    for (name, field) in fields {
        if let Some(path) = field.get("path").and_then(Value::as_str) {
            if let Err(e) = JsonPath::parse(path) {
                problems.push(Problem::new(
                    format!("/format/document/{name}/path"),
                    format!("{path:?}: {e}"),
                ));
            }
        }
    }
}

/// Separators that can be told apart, a time zone the compiled-in database knows, a time
/// format whose every directive is known.
fn check_values(document: &Value, problems: &mut Vec<Problem>) {
    let decimal = text(document, "/values/decimal_separator").unwrap_or(".");
    if text(document, "/values/thousands_separator") == Some(decimal) {
        problems.push(Problem::new(
            "/values/thousands_separator",
            format!("{decimal:?} is the decimal separator too"),
        ));
    }
    if let Some(zone) = text(document, "/values/time_zone") {
        if jiff::tz::TimeZone::get(zone).is_err() {
            problems.push(Problem::new(
                "/values/time_zone",
                format!("{zone:?} is not an IANA time zone (\"Europe/Berlin\")"),
            ));
        }
    }
    if let Some(format) = text(document, "/values/time_format") {
        let sample = jiff::Timestamp::UNIX_EPOCH.to_zoned_datetime(jiff::tz::TimeZone::UTC);
        if let Err(e) = jiff::fmt::strtime::format(format, &sample) {
            problems.push(Problem::new(
                "/values/time_format",
                format!("{format:?} is not a time format: {e}"),
            ));
        }
    }
}

/// The identities each transport can give, and what each needs of the format.
fn check_identity(document: &Value, problems: &mut Vec<Problem>) {
    let (Some(kind), Some(transport)) = (
        text(document, "/identity/kind"),
        text(document, "/transport/kind"),
    ) else {
        return;
    };
    let allowed: &[&str] = match transport {
        "webhook" => &["webhook_id", "cloudevents", "body"],
        "pull" => &["export_page", "cursor", "fallback"],
        _ => &["file_name", "file_name_and_content", "body"],
    };
    if !allowed.contains(&kind) {
        problems.push(Problem::new(
            "/identity/kind",
            format!(
                "a {transport} connector names deliveries by {}",
                allowed.join(", ")
            ),
        ));
        return;
    }
    let json_only = matches!(kind, "body" | "cloudevents")
        || (kind == "export_page" && document.pointer("/identity/path").is_some());
    let format = text(document, "/format/kind");
    if json_only && format.is_some_and(|f| f != "json") {
        problems.push(Problem::new(
            "/identity/kind",
            format!(
                "{kind} reads the body as JSON; the format is {}",
                format.unwrap_or("")
            ),
        ));
    }
    for pointer in ["/identity/path"] {
        if let Some(path) = text(document, pointer) {
            if let Err(e) = JsonPath::parse(path) {
                problems.push(Problem::new(pointer, format!("{path:?}: {e}")));
            }
        }
    }
    check_identity_needs(document, kind, problems);
}

fn check_identity_needs(document: &Value, kind: &str, problems: &mut Vec<Problem>) {
    let has = |p: &str| document.pointer(p).is_some();
    match kind {
        "export_page" if has("/identity/path") == has("/identity/header") => {
            problems.push(Problem::new(
                "/identity",
                "export_page needs exactly one of path (in the body) or header",
            ));
        }
        "cursor" if text(document, "/transport/pagination/kind") != Some("cursor") => {
            problems.push(Problem::new(
                "/identity/kind",
                "cursor identity needs cursor pagination (transport.pagination.kind cursor)",
            ));
        }
        "cloudevents" if text(document, "/format/envelope") != Some("cloudevents") => {
            problems.push(Problem::new(
                "/identity/kind",
                "cloudevents identity needs format.envelope cloudevents",
            ));
        }
        _ => {}
    }
}

/// A pull's URL and next-page paths; run-complete publication only where there are runs.
fn check_transport(document: &Value, problems: &mut Vec<Problem>) {
    let transport = text(document, "/transport/kind");
    if text(document, "/publication") == Some("on_run_complete") && transport != Some("pull") {
        problems.push(Problem::new(
            "/publication",
            "on_run_complete needs a pull connector (only pulls have runs)",
        ));
    }
    if transport != Some("pull") {
        return;
    }
    if let Some(url) = text(document, "/transport/url") {
        if let Err(why) = http_url(url) {
            problems.push(Problem::new("/transport/url", why));
        }
    }
    if let Some(path) = text(document, "/transport/pagination/path") {
        if let Err(e) = JsonPath::parse(path) {
            problems.push(Problem::new(
                "/transport/pagination/path",
                format!("{path:?}: {e}"),
            ));
        }
    }
}

/// `http(s)://host[:port][/path][?query]`, no user info, no fragment.
fn http_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must start with https:// or http://")?;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err("names no host".into());
    }
    if authority.contains('@') {
        return Err("must not carry credentials (use auth with a secret_ref)".into());
    }
    if url.contains('#') || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must have no fragment, space or control character".into());
    }
    Ok(())
}
