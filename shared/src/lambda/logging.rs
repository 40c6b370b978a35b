//! Log lines in the shape AWS Lambda Powertools users expect: one JSON object per line on stdout
//! with `level`, `message`, `timestamp`, `service`, `cold_start`, `function_request_id`,
//! `xray_trace_id` and the event's and enclosing spans' fields at the top level.
//!
//! The request id and trace id come from the span `lambda_runtime` opens around each invocation
//! ("Lambda runtime invoke"); that span is always enabled, whatever the level, so a warning or
//! error line still says which invocation it belongs to. The first such span of a process is the
//! cold start: its lines say `cold_start: true`, and the `ColdStart` EMF metric is emitted then.
//!
//! Level: `POWERTOOLS_LOG_LEVEL`, else `AWS_LAMBDA_LOG_LEVEL` (Lambda's own setting), else
//! `RUST_LOG`, else `info`. Service: `POWERTOOLS_SERVICE_NAME`, else the function's name.
//! Secrets are never logged.

use serde_json::{Map, Value};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The span `lambda_runtime` opens around every invocation, and where it is declared.
const INVOKE_SPAN: &str = "Lambda runtime invoke";
const INVOKE_SPAN_TARGET: &str = "lambda_runtime::layers::trace";
/// The keys every line carries; a field of the same name is kept as `field_<name>`.
const RESERVED: [&str; 7] = [
    "level",
    "message",
    "timestamp",
    "service",
    "cold_start",
    "function_request_id",
    "xray_trace_id",
];

static INVOKED: AtomicBool = AtomicBool::new(false);

/// Installs the JSON log lines; a second call (a subscriber is already installed) does nothing.
pub fn init() {
    let filter = level_filter(
        std::env::var("POWERTOOLS_LOG_LEVEL").ok().as_deref(),
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
    );
    let lines = tracing_subscriber::fmt::layer()
        .fmt_fields(JsonFields::new())
        .event_format(PowertoolsFormat)
        .with_writer(std::io::stdout);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(InvocationLayer)
        .with(lines)
        .try_init();
}

/// `service` of every line and the `service` metric dimension: `POWERTOOLS_SERVICE_NAME`, else
/// `AWS_LAMBDA_FUNCTION_NAME`, else the executable's name.
pub fn service_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        choose_service(
            std::env::var("POWERTOOLS_SERVICE_NAME").ok(),
            std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok(),
            std::env::current_exe()
                .ok()
                .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned())),
        )
    })
}

fn choose_service(
    powertools: Option<String>,
    function: Option<String>,
    exe: Option<String>,
) -> String {
    [powertools, function, exe]
        .into_iter()
        .flatten()
        .find(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "service_undefined".to_owned())
}

/// A level named by Powertools' or Lambda's setting (TRACE..ERROR, any case, `WARNING` too).
fn named_level(text: &str) -> Option<LevelFilter> {
    match text.trim().to_ascii_uppercase().as_str() {
        "TRACE" => Some(LevelFilter::TRACE),
        "DEBUG" => Some(LevelFilter::DEBUG),
        "INFO" => Some(LevelFilter::INFO),
        "WARN" | "WARNING" => Some(LevelFilter::WARN),
        "ERROR" | "FATAL" | "CRITICAL" => Some(LevelFilter::ERROR),
        _ => None,
    }
}

/// The filter for `POWERTOOLS_LOG_LEVEL` (wins) or `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else
/// `info`; the invocation span is enabled in every case (it carries the request id).
fn level_filter(powertools: Option<&str>, lambda: Option<&str>) -> EnvFilter {
    let filter = match chosen_level(powertools, lambda) {
        Some(level) => EnvFilter::new(level.to_string()),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    match format!("{INVOKE_SPAN_TARGET}=info").parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// `POWERTOOLS_LOG_LEVEL` if it names a level, else `AWS_LAMBDA_LOG_LEVEL` if it does.
fn chosen_level(powertools: Option<&str>, lambda: Option<&str>) -> Option<LevelFilter> {
    powertools
        .and_then(named_level)
        .or_else(|| lambda.and_then(named_level))
}

/// What a line inside an invocation says about it (kept in the invocation span's extensions).
#[derive(Debug, Default, Clone)]
struct Invocation {
    cold_start: bool,
    request_id: Option<String>,
    xray_trace_id: Option<String>,
}

impl Visit for Invocation {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "requestId" => self.request_id = Some(value.to_owned()),
            "xrayTraceId" => self.xray_trace_id = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_str(field, format!("{value:?}").trim_matches('"'));
    }
}

/// Marks each invocation span with its request id, trace id and whether it is the cold start
/// (the first of the process); the cold start also emits the `ColdStart` metric.
struct InvocationLayer;

impl<S> Layer<S> for InvocationLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attrs.metadata();
        if metadata.name() != INVOKE_SPAN || metadata.target() != INVOKE_SPAN_TARGET {
            return;
        }
        let mut invocation = Invocation {
            cold_start: !INVOKED.swap(true, Ordering::SeqCst),
            ..Invocation::default()
        };
        attrs.record(&mut invocation);
        if invocation.cold_start {
            crate::lambda::metrics::emit_cold_start(service_name());
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(invocation);
        }
    }
}

/// An event's fields as JSON values, `message` among them.
#[derive(Default)]
struct JsonVisitor(Map<String, Value>);

impl Visit for JsonVisitor {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

/// One flat JSON object per event (see the module documentation).
struct PowertoolsFormat;

impl<S, N> FormatEvent<S, N> for PowertoolsFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Map::new();
        let mut invocation = None;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(found) = extensions.get::<Invocation>() {
                    invocation = Some(found.clone());
                } else if let Some(formatted) = extensions.get::<FormattedFields<N>>() {
                    if let Ok(Value::Object(span_fields)) =
                        serde_json::from_str::<Value>(formatted.as_str())
                    {
                        fields.extend(span_fields);
                    }
                }
            }
        }
        let mut visitor = JsonVisitor::default();
        event.record(&mut visitor);
        fields.extend(visitor.0);
        let line = line(event.metadata().level(), fields, invocation);
        writeln!(writer, "{line}")
    }
}

/// The line's JSON: the standard keys first, then the fields (renamed where they collide).
fn line(level: &Level, mut fields: Map<String, Value>, invocation: Option<Invocation>) -> String {
    let message = fields.remove("message").unwrap_or(Value::from(""));
    let (cold_start, request_id, trace_id) = match invocation {
        Some(i) => {
            // `lambda_runtime` also puts the invocation's trace id in `_X_AMZN_TRACE_ID`.
            let trace = i
                .xray_trace_id
                .or_else(|| std::env::var("_X_AMZN_TRACE_ID").ok());
            (i.cold_start, i.request_id, trace)
        }
        // Before the first invocation (init) a line belongs to the cold start.
        None => (!INVOKED.load(Ordering::SeqCst), None, None),
    };
    let mut out = Map::new();
    out.insert("level".into(), Value::from(level.as_str()));
    out.insert("message".into(), message);
    out.insert("timestamp".into(), Value::from(now_rfc3339_millis()));
    out.insert("service".into(), Value::from(service_name()));
    out.insert("cold_start".into(), Value::from(cold_start));
    if let Some(id) = request_id {
        out.insert("function_request_id".into(), Value::from(id));
    }
    if let Some(id) = trace_id.filter(|t| !t.is_empty()) {
        out.insert("xray_trace_id".into(), Value::from(id));
    }
    for (key, value) in fields {
        let key = if RESERVED.contains(&key.as_str()) {
            format!("field_{key}")
        } else {
            key
        };
        out.insert(key, value);
    }
    Value::Object(out).to_string()
}

/// `2026-11-29T08:00:00.123Z`: UTC, milliseconds.
fn now_rfc3339_millis() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powertools_level_wins_over_lambda_level_and_any_case_is_read() {
        assert_eq!(named_level("debug"), Some(LevelFilter::DEBUG));
        assert_eq!(named_level("Warn"), Some(LevelFilter::WARN));
        assert_eq!(named_level("nonsense"), None);
        assert_eq!(
            chosen_level(Some("error"), Some("DEBUG")),
            Some(LevelFilter::ERROR)
        );
        assert_eq!(chosen_level(None, Some("DEBUG")), Some(LevelFilter::DEBUG));
        assert_eq!(
            chosen_level(Some("loud"), Some("warn")),
            Some(LevelFilter::WARN)
        );
        assert_eq!(chosen_level(None, None), None);
        let filter = level_filter(Some("error"), None).to_string();
        assert!(
            filter.contains("lambda_runtime::layers::trace=info") && filter.contains("error"),
            "the invocation span stays on: {filter}"
        );
    }

    #[test]
    fn service_is_powertools_name_else_function_name() {
        let name = |p: Option<&str>, f: Option<&str>| {
            choose_service(
                p.map(String::from),
                f.map(String::from),
                Some("bootstrap".into()),
            )
        };
        assert_eq!(name(Some("feedsafe-ingest"), Some("fn")), "feedsafe-ingest");
        assert_eq!(name(None, Some("fn")), "fn");
        assert_eq!(name(Some(" "), None), "bootstrap");
    }

    #[test]
    fn a_line_is_flat_and_keeps_colliding_fields() {
        let mut fields = Map::new();
        fields.insert("message".into(), Value::from("committed"));
        fields.insert("observations".into(), Value::from(3));
        fields.insert("service".into(), Value::from("x"));
        let invocation = Invocation {
            cold_start: true,
            request_id: Some("req-1".into()),
            xray_trace_id: Some("Root=1-a-b".into()),
        };
        let line: Value =
            serde_json::from_str(&line(&Level::INFO, fields, Some(invocation))).unwrap();
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "committed");
        assert_eq!(line["observations"], 3);
        assert_eq!(line["field_service"], "x");
        assert_eq!(line["cold_start"], true);
        assert_eq!(line["function_request_id"], "req-1");
        assert_eq!(line["xray_trace_id"], "Root=1-a-b");
        assert!(line.get("fields").is_none());
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}
