//! `docs/openapi.yaml` as a test oracle: every JSON body a test exchanges with a route is
//! validated against the document, so every test that calls a route is also a contract test.
//!
//! The operation is found by method and path template (a path parameter may span several
//! segments: delivery keys hold `/`; the template with the most literal segments wins), the
//! response by status (or `default`), and the body is validated with JSON Schema 2020-12 after
//! every `$ref` is inlined. The contract is closed: an object schema that does not say
//! `additionalProperties` gets `additionalProperties: false` (or `unevaluatedProperties: false`
//! when it is built with `allOf`), so a field the code sends and the document does not name
//! fails. A request body is validated when the route acted on it (2xx but `202`, which only
//! queues it): what the server takes, the document must allow. A method or path no operation serves must get API Gateway's
//! `404 {"message": "Not Found"}`. Requests to anything but the API (`/v1/...`, `/console`),
//! such as a presigned artifact link, are not checked.

use jsonschema::Validator;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// One HTTP exchange with a route, as a test saw it.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    pub method: &'a str,
    /// A URL or a path, with or without a query string.
    pub target: &'a str,
    /// The request's content type and body, when it sent one.
    pub request: Option<(&'a str, &'a [u8])>,
    pub status: u16,
    /// The response's `Content-Type` (`application/json` when unknown).
    pub content_type: Option<&'a str>,
    pub body: &'a str,
}

/// Panics, naming the method, path, status, JSON pointer and schema error, unless
/// `docs/openapi.yaml` documents the exchange.
#[track_caller]
pub fn check_exchange(exchange: &Exchange<'_>) {
    if let Err(e) = contract().check(exchange) {
        panic!(
            "docs/openapi.yaml: {} {} -> {}: {e}",
            exchange.method, exchange.target, exchange.status
        );
    }
}

/// How many JSON bodies (requests and responses) were validated so far in this process.
pub fn validated_bodies() -> usize {
    VALIDATED.load(Ordering::Relaxed)
}

static VALIDATED: AtomicUsize = AtomicUsize::new(0);

/// The loaded contract (the document is read and compiled once per test process).
fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let yaml: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        Contract::load(&yaml)
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param,
}

/// What one status of an operation may answer: media type -> JSON validator (`None`: not JSON).
/// Empty: no body.
type Media = BTreeMap<String, Option<Validator>>;

struct Operation {
    method: String,
    template: Vec<Segment>,
    request: Media,
    responses: BTreeMap<String, Media>,
}

struct Contract {
    operations: Vec<Operation>,
    gateway_message: Validator,
    error: Validator,
}

impl Contract {
    fn load(document: &Value) -> Self {
        let mut operations = Vec::new();
        for (path, item) in document["paths"].as_object().expect("openapi paths") {
            let item = inline(document, item, 0);
            for (method, operation) in item.as_object().into_iter().flatten() {
                if !HTTP_METHODS.contains(&method.as_str()) {
                    continue;
                }
                operations.push(Operation::load(method, path, operation));
            }
        }
        let schema = |name: &str| {
            let schema = inline(document, &document["components"]["schemas"][name], 0);
            compile(schema, name)
        };
        Self {
            operations,
            gateway_message: schema("GatewayMessage"),
            error: schema("Error"),
        }
    }

    fn check(&self, exchange: &Exchange<'_>) -> Result<(), String> {
        let path = path_of(exchange.target);
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let best = self
            .operations
            .iter()
            .filter_map(|op| literals_matched(&op.template, &segments).map(|n| (n, op)))
            .max_by_key(|(n, _)| *n);
        let operation = best.and_then(|(n, _)| {
            self.operations.iter().find(|op| {
                op.method.eq_ignore_ascii_case(exchange.method)
                    && literals_matched(&op.template, &segments) == Some(n)
            })
        });
        match operation {
            Some(operation) => operation.check(exchange),
            None if is_api_path(path) => self.check_no_route(exchange),
            None => Ok(()),
        }
    }

    /// API Gateway answers a method or path no route serves with `404 {"message": ...}`; a
    /// handler called without it, with `404 not_found` or `405 method_not_allowed` (`Error`).
    fn check_no_route(&self, exchange: &Exchange<'_>) -> Result<(), String> {
        let gateway = validate(&self.gateway_message, "response body", exchange.body);
        match exchange.status {
            404 if gateway.is_ok() => gateway,
            404 | 405 => validate(&self.error, "response body", exchange.body),
            _ => Err("no documented operation serves this method and path".into()),
        }
    }
}

impl Operation {
    fn load(method: &str, path: &str, operation: &Value) -> Self {
        let what = format!("{} {path}", method.to_ascii_uppercase());
        let responses = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{what}: no responses"))
            .iter()
            .map(|(status, response)| {
                let media = media_of(&response["content"], &format!("{what} {status}"));
                (status.clone(), media)
            })
            .collect();
        Self {
            method: method.to_ascii_uppercase(),
            template: template_of(path),
            request: media_of(&operation["requestBody"]["content"], &what),
            responses,
        }
    }

    fn check(&self, exchange: &Exchange<'_>) -> Result<(), String> {
        let status = exchange.status.to_string();
        let media = self
            .responses
            .get(&status)
            .or_else(|| self.responses.get("default"))
            .ok_or_else(|| format!("status {status} is not documented"))?;
        check_body(media, exchange.content_type, exchange.body, "response body")?;
        match exchange.request {
            // 202 only queued the body: it is judged after the answer (a signed webhook's rows).
            Some((content_type, bytes))
                if (200..300).contains(&exchange.status) && exchange.status != 202 =>
            {
                let text = String::from_utf8_lossy(bytes);
                check_body(&self.request, Some(content_type), &text, "request body")
            }
            _ => Ok(()),
        }
    }
}

/// `body` is one of `media`'s documented bodies; JSON ones validate against their schema.
fn check_body(
    media: &Media,
    content_type: Option<&str>,
    body: &str,
    what: &str,
) -> Result<(), String> {
    if media.is_empty() {
        return match body.trim().is_empty() {
            true => Ok(()),
            false => Err(format!("{what}: documented as empty, got {body}")),
        };
    }
    let content_type = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "application/json".into());
    let validator = media
        .get(&content_type)
        .or_else(|| media.get("*/*"))
        .ok_or_else(|| format!("{what}: content type {content_type} is not documented"))?;
    match validator {
        Some(validator) => validate(validator, what, body),
        None => Ok(()),
    }
}

fn validate(validator: &Validator, what: &str, body: &str) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("{what} is not JSON ({e}): {body}"))?;
    VALIDATED.fetch_add(1, Ordering::Relaxed);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            format!(
                "at \"{}\": {e} (schema {})",
                e.instance_path(),
                e.schema_path()
            )
        })
        .collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(format!("{what}: {}\nbody: {value}", errors.join("; "))),
    }
}

const HTTP_METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

/// Media type -> validator of an (inlined) `content` map; `None` for a non-JSON media type.
fn media_of(content: &Value, what: &str) -> Media {
    content
        .as_object()
        .into_iter()
        .flatten()
        .map(|(media, entry)| {
            let json = media == "application/json" || media.ends_with("+json");
            let validator = match (&entry["schema"], json) {
                (Value::Null, _) | (_, false) => None,
                (schema, true) => Some(compile(schema.clone(), &format!("{what} {media}"))),
            };
            (media.to_ascii_lowercase(), validator)
        })
        .collect()
}

fn compile(mut schema: Value, what: &str) -> Validator {
    close(&mut schema, false, what);
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{what}: not a JSON schema: {e}"))
}

/// `value` with every local `$ref` replaced by its target (keywords beside a `$ref` other than
/// annotations make an `allOf` with it).
fn inline(document: &Value, value: &Value, depth: usize) -> Value {
    assert!(
        depth < 64,
        "docs/openapi.yaml: $refs nest too deep (a cycle?)"
    );
    match value {
        Value::Object(map) => match map.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let target = inline(document, resolve(document, reference), depth + 1);
                let siblings: Map<String, Value> = map
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "$ref" | "description" | "summary"))
                    .map(|(k, v)| (k.clone(), inline(document, v, depth + 1)))
                    .collect();
                match siblings.is_empty() {
                    true => target,
                    false => {
                        let mut all = siblings;
                        all.insert("allOf".into(), Value::Array(vec![target]));
                        Value::Object(all)
                    }
                }
            }
            None => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), inline(document, v, depth + 1)))
                    .collect(),
            ),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| inline(document, v, depth + 1))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn resolve<'a>(document: &'a Value, reference: &str) -> &'a Value {
    let target = reference
        .strip_prefix('#')
        .and_then(|pointer| document.pointer(pointer))
        .unwrap_or_else(|| panic!("docs/openapi.yaml: unresolved $ref {reference}"));
    assert!(
        !target.is_null(),
        "docs/openapi.yaml: dangling $ref {reference}"
    );
    target
}

/// Closes every object schema that leaves `additionalProperties` unsaid. A member of an `allOf`
/// stays open (its siblings name the other fields); the `allOf` itself is closed with
/// `unevaluatedProperties: false`, which sees the fields its members name.
fn close(schema: &mut Value, member: bool, what: &str) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    assert!(
        !map.contains_key("nullable"),
        "{what}: `nullable` is OpenAPI 3.0; this 3.1 document says `type: [T, \"null\"]`"
    );
    for key in [
        "items",
        "contains",
        "not",
        "propertyNames",
        "additionalProperties",
    ] {
        if let Some(sub) = map.get_mut(key) {
            close(sub, false, what);
        }
    }
    for key in ["properties", "patternProperties"] {
        for sub in map
            .get_mut(key)
            .and_then(Value::as_object_mut)
            .into_iter()
            .flatten()
        {
            close(sub.1, false, what);
        }
    }
    for (key, members) in [
        ("prefixItems", false),
        ("oneOf", member),
        ("anyOf", member),
        ("allOf", true),
    ] {
        for sub in map
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            close(sub, members, what);
        }
    }
    let said =
        map.contains_key("additionalProperties") || map.contains_key("unevaluatedProperties");
    if member || said || !is_object_schema(map) {
        return;
    }
    let keyword = match map.contains_key("allOf") {
        true => "unevaluatedProperties",
        false => "additionalProperties",
    };
    map.insert(keyword.into(), Value::Bool(false));
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    let typed = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || map.contains_key("properties") || map.contains_key("allOf")
}

fn template_of(path: &str) -> Vec<Segment> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match s.starts_with('{') && s.ends_with('}') {
            true => Segment::Param,
            false => Segment::Literal(s.to_owned()),
        })
        .collect()
}

/// How many literal segments of `template` match `path`, if it matches at all. A parameter
/// takes one or more segments.
fn literals_matched(template: &[Segment], path: &[&str]) -> Option<usize> {
    match (template.split_first(), path.split_first()) {
        (None, None) => Some(0),
        (Some((Segment::Literal(l), rest)), Some((s, tail))) if l == s => {
            literals_matched(rest, tail).map(|n| n + 1)
        }
        (Some((Segment::Param, rest)), Some(_)) => (1..=path.len())
            .filter_map(|taken| literals_matched(rest, path.get(taken..)?))
            .max(),
        _ => None,
    }
}

/// The path of a URL or of a path with a query string.
fn path_of(target: &str) -> &str {
    let without_origin = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| rest.get(i..).unwrap_or("/")),
        None => target,
    };
    without_origin
        .split(['?', '#'])
        .next()
        .unwrap_or(without_origin)
}

fn is_api_path(path: &str) -> bool {
    path.starts_with("/v1/") || path == "/console" || path.starts_with("/console/")
}

/// Validates every `example` of a JSON request or response body in the document against its
/// own (closed) schema: (how many were checked, a message per failure).
pub fn check_documented_examples() -> (usize, Vec<String>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let document: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut checked, mut failures) = (0, Vec::new());
    for (path, item) in document["paths"].as_object().into_iter().flatten() {
        let item = inline(&document, item, 0);
        for (method, operation) in item.as_object().into_iter().flatten() {
            let bodies = std::iter::once(("request".to_owned(), &operation["requestBody"])).chain(
                operation["responses"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(s, r)| (s.clone(), r)),
            );
            for (which, body) in bodies {
                for (media, entry) in body["content"].as_object().into_iter().flatten() {
                    let (Some(example), Some(Some(validator))) = (
                        entry.get("example"),
                        media_of(
                            &Value::Object(Map::from_iter([(media.clone(), entry.clone())])),
                            path,
                        )
                        .remove(&media.to_ascii_lowercase()),
                    ) else {
                        continue;
                    };
                    checked += 1;
                    if let Err(e) = validate(&validator, "example", &example.to_string()) {
                        failures.push(format!(
                            "{} {path} {which} {media}: {e}",
                            method.to_ascii_uppercase()
                        ));
                    }
                }
            }
        }
    }
    (checked, failures)
}
