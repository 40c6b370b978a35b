//! `opsctl`, the operators' command line over the ops HTTP API (`feedsafe::ops`) and the
//! ingest dead-letter queue.
//!
//! ```text
//! opsctl [--endpoint URL] [--token T] [--json] COMMAND
//!   quarantine list [--status open|accepting|accepted|rejected|all]
//!   quarantine show ID
//!   quarantine resolve ID --reject --reason R
//!   quarantine resolve ID --accept-as DELIVERY_ID --reason R
//!   delivery show KEY
//!   delivery artifact KEY
//!   run show RUN_ID
//!   run start CONNECTOR
//!   source-quarantine set|lift CONNECTOR --reason R [--account A]
//!   source-quarantine show CONNECTOR [--account A]
//!   correction add CONNECTOR FROM_ITEM TO_ITEM --reason R [--account A]
//!   correction show ID
//!   correction withdraw ID --reason R
//!   dlq redrive [--dlq URL --queue URL]
//! ```
//!
//! Defaults: the endpoint is `FEEDSAFE_ENDPOINT`, else `http` from the local stack's
//! `.local/stack.json` (found from the current directory upwards, or `FEEDSAFE_STACK_FILE`),
//! else `http://127.0.0.1:8790`; the token is `FEEDSAFE_TOKEN`, else the local operator's sample
//! token. `dlq redrive` talks to SQS directly: with `--dlq/--queue` (or `INGEST_DLQ_URL` and
//! `INGEST_QUEUE_URL`) through the standard AWS environment, else with the local stack's queues
//! and moto endpoint from `.local/stack.json`.

use serde_json::Value;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod redrive;
pub use redrive::{redrive, redrive_target, RedriveProgress, RedriveTarget};

pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8790";
/// The local stack's sample operator token (infra/local/tokens.json); never valid in AWS.
pub const LOCAL_OPERATOR_TOKEN: &str = "local-operator-demo-token";

pub const USAGE: &str = "\
usage: opsctl [--endpoint URL] [--token T] [--json] COMMAND

commands:
  quarantine list [--status open|accepting|accepted|rejected|all]
  quarantine show ID
  quarantine resolve ID --reject --reason REASON
  quarantine resolve ID --accept-as DELIVERY_ID --reason REASON
  delivery show DELIVERY_KEY
  delivery artifact DELIVERY_KEY      presigned link to the raw artifact (300 s)
  run show RUN_ID
  run start CONNECTOR                 start a pull run now
  source-quarantine set CONNECTOR --reason REASON [--account A]
                                      exclude the source from current offers
  source-quarantine lift CONNECTOR --reason REASON [--account A]
                                      its claims become current again
  source-quarantine show CONNECTOR [--account A]
                                      state, and who set and lifted it, and why
  correction add CONNECTOR FROM_ITEM TO_ITEM --reason REASON [--account A]
                                      rows of FROM_ITEM belong to TO_ITEM, now and later
  correction show ID                  the record, what it re-attributed, whether in force
  correction withdraw ID --reason REASON
                                      the part's rows belong to the part again
  dlq redrive [--dlq URL --queue URL] move every ingest DLQ message back to the ingest queue
  help

defaults: endpoint FEEDSAFE_ENDPOINT, else `http` in .local/stack.json, else http://127.0.0.1:8790;
          token FEEDSAFE_TOKEN, else the local operator sample token.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Reject,
    AcceptAs(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    QuarantineList {
        status: Option<String>,
    },
    QuarantineShow {
        id: String,
    },
    QuarantineResolve {
        id: String,
        resolution: Resolution,
        reason: String,
    },
    DeliveryShow {
        key: String,
    },
    DeliveryArtifact {
        key: String,
    },
    RunShow {
        run_id: String,
    },
    RunStart {
        connector: String,
    },
    SourceQuarantine {
        /// `set`, `lift` or `show`.
        action: String,
        connector: String,
        account: Option<String>,
        reason: Option<String>,
    },
    CorrectionAdd {
        connector: String,
        from_item: String,
        to_item: String,
        account: Option<String>,
        reason: String,
    },
    CorrectionShow {
        id: String,
    },
    CorrectionWithdraw {
        id: String,
        reason: String,
    },
    DlqRedrive {
        dlq: Option<String>,
        queue: Option<String>,
    },
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GlobalOptions {
    pub endpoint: Option<String>,
    pub token: Option<String>,
    pub json: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub global: GlobalOptions,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug)]
pub enum CliError {
    /// The API answered with an error document.
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// The endpoint could not be reached or answered something that is not the API.
    Transport(String),
    /// Anything else (configuration, SQS).
    Other(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Api {
                status,
                code,
                message,
            } => write!(f, "HTTP {status} {code}: {message}"),
            Self::Transport(m) | Self::Other(m) => f.write_str(m),
        }
    }
}

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Parses the arguments after the program name. Global options may appear anywhere.
pub fn parse_args(args: &[String]) -> Result<Invocation, UsageError> {
    let mut global = GlobalOptions::default();
    let mut positional: Vec<String> = Vec::new();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        if arg == "--" {
            positional.extend(it.by_ref().cloned());
            break;
        }
        let Some(name) = arg.strip_prefix("--") else {
            if arg == "-h" {
                flags.push(("help".into(), None));
            } else {
                positional.push(arg.clone());
            }
            continue;
        };
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (name.to_owned(), None),
        };
        let takes_value = matches!(
            name.as_str(),
            "endpoint" | "token" | "status" | "accept-as" | "reason" | "dlq" | "queue" | "account"
        );
        let is_switch = matches!(name.as_str(), "json" | "reject" | "help");
        if !takes_value && !is_switch {
            return Err(usage(format!("unknown option --{name}")));
        }
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => Some(
                    it.next()
                        .cloned()
                        .ok_or_else(|| usage(format!("--{name} needs a value")))?,
                ),
            }
        } else {
            if inline.is_some() {
                return Err(usage(format!("--{name} takes no value")));
            }
            None
        };
        match name.as_str() {
            "endpoint" => global.endpoint = value,
            "token" => global.token = value,
            "json" => global.json = true,
            _ => flags.push((name, value)),
        }
    }
    if flags.iter().any(|(n, _)| n == "help") {
        return Ok(Invocation {
            global,
            command: Command::Help,
        });
    }
    let mut take = |name: &str| -> Option<Option<String>> {
        let at = flags.iter().position(|(n, _)| n == name)?;
        Some(flags.remove(at).1)
    };
    let words: Vec<&str> = positional.iter().map(String::as_str).collect();
    let command = match words.as_slice() {
        [] | ["help"] => Command::Help,
        ["quarantine", "list"] => Command::QuarantineList {
            status: take("status").flatten(),
        },
        ["quarantine", "show", id] => Command::QuarantineShow {
            id: (*id).to_owned(),
        },
        ["quarantine", "resolve", id] => {
            let reject = take("reject").is_some();
            let accept = take("accept-as").flatten();
            let reason = take("reason")
                .flatten()
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| usage("quarantine resolve needs --reason REASON"))?;
            let resolution = match (reject, accept) {
                (true, None) => Resolution::Reject,
                (false, Some(id)) => Resolution::AcceptAs(id),
                (true, Some(_)) => {
                    return Err(usage("use either --reject or --accept-as, not both"))
                }
                (false, None) => {
                    return Err(usage(
                        "quarantine resolve needs --reject or --accept-as DELIVERY_ID",
                    ))
                }
            };
            Command::QuarantineResolve {
                id: (*id).to_owned(),
                resolution,
                reason,
            }
        }
        ["delivery", "show", key] => Command::DeliveryShow {
            key: (*key).to_owned(),
        },
        ["delivery", "artifact", key] => Command::DeliveryArtifact {
            key: (*key).to_owned(),
        },
        ["run", "show", run_id] => Command::RunShow {
            run_id: (*run_id).to_owned(),
        },
        ["run", "start", connector] => Command::RunStart {
            connector: (*connector).to_owned(),
        },
        ["source-quarantine", action @ ("set" | "lift" | "show"), connector] => {
            let account = take("account").flatten();
            let reason = take("reason").flatten().filter(|r| !r.trim().is_empty());
            if *action != "show" && reason.is_none() {
                return Err(usage(format!(
                    "source-quarantine {action} needs --reason REASON"
                )));
            }
            if *action == "show" && reason.is_some() {
                return Err(usage("--reason does not apply to source-quarantine show"));
            }
            Command::SourceQuarantine {
                action: (*action).to_owned(),
                connector: (*connector).to_owned(),
                account,
                reason,
            }
        }
        ["correction", "add", connector, from, to] => Command::CorrectionAdd {
            connector: (*connector).to_owned(),
            from_item: (*from).to_owned(),
            to_item: (*to).to_owned(),
            account: take("account").flatten(),
            reason: take("reason")
                .flatten()
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| usage("correction add needs --reason REASON"))?,
        },
        ["correction", "show", id] => Command::CorrectionShow {
            id: (*id).to_owned(),
        },
        ["correction", "withdraw", id] => Command::CorrectionWithdraw {
            id: (*id).to_owned(),
            reason: take("reason")
                .flatten()
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| usage("correction withdraw needs --reason REASON"))?,
        },
        ["dlq", "redrive"] => {
            let dlq = take("dlq").flatten();
            let queue = take("queue").flatten();
            if dlq.is_some() != queue.is_some() {
                return Err(usage(
                    "dlq redrive needs both --dlq URL and --queue URL, or neither",
                ));
            }
            Command::DlqRedrive { dlq, queue }
        }
        other => {
            return Err(usage(format!(
                "unknown command {:?}; see `opsctl help`",
                other.join(" ")
            )))
        }
    };
    if let Some((name, _)) = flags.first() {
        return Err(usage(format!("--{name} does not apply to this command")));
    }
    Ok(Invocation { global, command })
}

/// Where and as whom the CLI talks, after defaults are applied.
#[derive(Debug, Clone)]
pub struct Settings {
    pub endpoint: String,
    pub token: String,
    pub json: bool,
    /// The local stack's `.local/stack.json`, when one was found.
    pub stack: Option<Value>,
}

impl Settings {
    /// Applies the defaults: flags, then the environment (`env`), then the local stack file.
    pub fn resolve(
        global: &GlobalOptions,
        env: impl Fn(&str) -> Option<String>,
        stack: Option<Value>,
    ) -> Self {
        let endpoint = global
            .endpoint
            .clone()
            .or_else(|| env("FEEDSAFE_ENDPOINT"))
            .or_else(|| {
                stack
                    .as_ref()
                    .and_then(|s| s["http"].as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let token = global
            .token
            .clone()
            .or_else(|| env("FEEDSAFE_TOKEN").filter(|t| !t.is_empty()))
            .unwrap_or_else(|| LOCAL_OPERATOR_TOKEN.to_owned());
        Self {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            token,
            json: global.json,
            stack,
        }
    }
}

/// `.local/stack.json` from `FEEDSAFE_STACK_FILE`, or the first found from `start` upwards.
pub fn find_stack_file(start: &Path, env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env("FEEDSAFE_STACK_FILE") {
        return Some(PathBuf::from(path));
    }
    start
        .ancestors()
        .map(|dir| dir.join(".local").join("stack.json"))
        .find(|p| p.is_file())
}

pub fn read_stack_file(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Percent-encodes a path tail, keeping `/` (delivery keys span several segments).
pub fn encode_path(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b':' | b'@')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encode_query(text: &str) -> String {
    encode_path(text).replace('/', "%2F")
}

struct Api<'a> {
    settings: &'a Settings,
    agent: ureq::Agent,
}

impl<'a> Api<'a> {
    fn new(settings: &'a Settings) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self { settings, agent }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.settings.endpoint);
        let auth = format!("Bearer {}", self.settings.token);
        let result = match body {
            None if method == "GET" => self.agent.get(&url).header("authorization", &auth).call(),
            _ => self
                .agent
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.map(Value::to_string).unwrap_or_default().as_bytes()),
        };
        let mut response = result.map_err(|e| {
            CliError::Transport(format!(
                "cannot reach {}: {e} (is the local stack up? `infra/local.sh`)",
                self.settings.endpoint
            ))
        })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| CliError::Transport(format!("reading the answer: {e}")))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            CliError::Transport(format!(
                "{url} answered HTTP {status} with a body that is not JSON"
            ))
        })?;
        if status >= 400 {
            return Err(CliError::Api {
                status,
                code: value["error"]["code"]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_owned(),
                message: value["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        Ok(value)
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A plain-text table: a header row, then one row per entry, columns padded to fit.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

fn fields(out: &mut dyn Write, value: &Value, keys: &[&str]) -> std::io::Result<()> {
    let width = keys.iter().map(|k| k.len()).max().unwrap_or(0);
    for key in keys {
        match value.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => writeln!(out, "{key:<width$}  {}", text(v))?,
        }
    }
    Ok(())
}

fn quarantine_rows(entries: &[Value]) -> Vec<Vec<String>> {
    entries
        .iter()
        .map(|e| {
            vec![
                text(&e["quarantine_id"]),
                text(&e["kind"]),
                text(&e["reason_code"]),
                text(&e["status"]),
                text(&e["first_seen_at"]),
                text(&e["delivery_key"]),
            ]
        })
        .collect()
}

const QUARANTINE_HEADERS: [&str; 6] = [
    "ID",
    "KIND",
    "REASON",
    "STATUS",
    "FIRST SEEN",
    "DELIVERY KEY",
];

fn io(e: std::io::Error) -> CliError {
    CliError::Other(format!("writing output: {e}"))
}

fn print_quarantine_entry(out: &mut dyn Write, entry: &Value) -> std::io::Result<()> {
    fields(
        out,
        entry,
        &[
            "quarantine_id",
            "kind",
            "reason_code",
            "status",
            "tenant",
            "connector",
            "delivery_key",
            "first_seen_at",
            "stored_fingerprint",
            "received_fingerprint",
            "stored_artifact_key",
            "evidence_key",
            "evidence_sha256",
            "message",
        ],
    )?;
    if let Some(resolution) = entry.get("resolution").filter(|r| !r.is_null()) {
        writeln!(out, "\nresolution:")?;
        fields(
            out,
            resolution,
            &[
                "action",
                "reason",
                "delivery_id",
                "new_delivery_key",
                "requested_at",
                "resolved_at",
            ],
        )?;
    }
    let Some(diff) = entry.get("diff") else {
        return Ok(());
    };
    if diff["available"] == Value::Bool(false) {
        return writeln!(out, "\ndiff unavailable: {}", text(&diff["reason"]));
    }
    match diff["format"].as_str() {
        Some("json") => {
            let differences = diff["differences"].as_array().cloned().unwrap_or_default();
            writeln!(
                out,
                "\ndiff (stored -> received, {} difference(s){}):",
                text(&diff["difference_count"]),
                if diff["truncated"] == Value::Bool(true) {
                    ", list truncated"
                } else {
                    ""
                }
            )?;
            let rows: Vec<Vec<String>> = differences
                .iter()
                .map(|d| {
                    let side =
                        |v: Option<&Value>| v.map(|v| v.to_string()).unwrap_or("(absent)".into());
                    vec![
                        text(&d["path"]),
                        side(d.get("stored")),
                        side(d.get("received")),
                    ]
                })
                .collect();
            write!(out, "{}", table(&["PATH", "STORED", "RECEIVED"], &rows))?;
            if let Some(note) = diff["note"].as_str() {
                writeln!(out, "note: {note}")?;
            }
        }
        _ => {
            writeln!(
                out,
                "\ndiff ({}): stored {} bytes, received {} bytes, first difference at byte {}",
                text(&diff["format"]),
                text(&diff["stored_bytes"]),
                text(&diff["received_bytes"]),
                text(&diff["first_difference_offset"])
            )?;
            if let Some(lines) = diff["line_differences"].as_array() {
                let rows: Vec<Vec<String>> = lines
                    .iter()
                    .map(|l| vec![text(&l["line"]), text(&l["stored"]), text(&l["received"])])
                    .collect();
                write!(out, "{}", table(&["LINE", "STORED", "RECEIVED"], &rows))?;
            }
        }
    }
    Ok(())
}

/// Runs one command against the API (or SQS for `dlq redrive`), writing to `out`.
pub fn run(command: &Command, settings: &Settings, out: &mut dyn Write) -> Result<(), CliError> {
    let api = Api::new(settings);
    let emit_json = |out: &mut dyn Write, value: &Value| -> Result<(), CliError> {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        )
        .map_err(io)
    };
    match command {
        Command::Help => writeln!(out, "{USAGE}").map_err(io),
        Command::QuarantineList { status } => {
            let path = match status {
                Some(s) => format!("/v1/quarantine?status={}", encode_query(s)),
                None => "/v1/quarantine".to_owned(),
            };
            let value = api.call("GET", &path, None)?;
            if settings.json {
                return emit_json(out, &value);
            }
            let entries = value["entries"].as_array().cloned().unwrap_or_default();
            write!(
                out,
                "{}",
                table(&QUARANTINE_HEADERS, &quarantine_rows(&entries))
            )
            .map_err(io)?;
            writeln!(
                out,
                "{} {} entr{}",
                entries.len(),
                text(&value["status"]),
                if entries.len() == 1 { "y" } else { "ies" }
            )
            .map_err(io)
        }
        Command::QuarantineShow { id } => {
            let value = api.call("GET", &format!("/v1/quarantine/{}", encode_path(id)), None)?;
            if settings.json {
                return emit_json(out, &value);
            }
            print_quarantine_entry(out, &value).map_err(io)
        }
        Command::QuarantineResolve {
            id,
            resolution,
            reason,
        } => {
            let body = match resolution {
                Resolution::Reject => serde_json::json!({"action": "reject", "reason": reason}),
                Resolution::AcceptAs(delivery_id) => serde_json::json!({
                    "action": "accept_as_new_delivery",
                    "delivery_id": delivery_id,
                    "reason": reason,
                }),
            };
            let value = api.call(
                "POST",
                &format!("/v1/quarantine/{}/resolve", encode_path(id)),
                Some(&body),
            )?;
            if settings.json {
                return emit_json(out, &value);
            }
            match value["new_delivery_key"].as_str() {
                Some(key) => writeln!(
                    out,
                    "quarantine entry {id}: {}; new delivery {key} enqueued (the original delivery is unchanged)",
                    text(&value["status"])
                ),
                None => writeln!(out, "quarantine entry {id}: {}", text(&value["status"])),
            }
            .map_err(io)
        }
        Command::DeliveryShow { key } => {
            let value = api.call("GET", &format!("/v1/deliveries/{}", encode_path(key)), None)?;
            if settings.json {
                return emit_json(out, &value);
            }
            fields(
                out,
                &value,
                &[
                    "delivery_key",
                    "state",
                    "fingerprint",
                    "payload_format",
                    "identity_strength",
                    "identity_basis",
                    "attempts",
                    "first_attempt_at",
                    "last_attempt_at",
                    "retrieved_at",
                    "committed_at",
                    "epoch",
                    "dedup_confidence",
                    "previous_epoch",
                    "run",
                    "artifact_key",
                    "payload_sha256",
                    "note",
                ],
            )
            .map_err(io)?;
            let ids = value["observation_ids"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !ids.is_empty() {
                writeln!(out, "observations ({}):", ids.len()).map_err(io)?;
                for id in ids {
                    writeln!(out, "  {}", text(&id)).map_err(io)?;
                }
            }
            let entries = value["quarantine"].as_array().cloned().unwrap_or_default();
            if entries.is_empty() {
                writeln!(out, "quarantine: none").map_err(io)
            } else {
                writeln!(out, "quarantine ({}):", entries.len()).map_err(io)?;
                write!(
                    out,
                    "{}",
                    table(&QUARANTINE_HEADERS, &quarantine_rows(&entries))
                )
                .map_err(io)
            }
        }
        Command::DeliveryArtifact { key } => {
            let value = api.call(
                "GET",
                &format!("/v1/deliveries/{}/artifact", encode_path(key)),
                None,
            )?;
            if settings.json {
                return emit_json(out, &value);
            }
            fields(
                out,
                &value,
                &["artifact_key", "sha256", "expires_in_seconds", "url"],
            )
            .map_err(io)
        }
        Command::RunShow { run_id } => {
            let value = api.call("GET", &format!("/v1/runs/{}", encode_path(run_id)), None)?;
            if settings.json {
                return emit_json(out, &value);
            }
            fields(
                out,
                &value,
                &[
                    "run_id",
                    "tenant",
                    "connector",
                    "status",
                    "credential_ref",
                    "started_at",
                    "deadline",
                    "page_count",
                    "pages_requested",
                    "pages_committed",
                    "pages_missing",
                    "missing_pages",
                    "completed_at",
                    "updated_at",
                ],
            )
            .map_err(io)?;
            let keys = value["delivery_keys"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !keys.is_empty() {
                writeln!(out, "deliveries ({}):", keys.len()).map_err(io)?;
                for key in keys {
                    writeln!(out, "  {}", text(&key)).map_err(io)?;
                }
            }
            Ok(())
        }
        Command::RunStart { connector } => {
            let value = api.call(
                "POST",
                &format!("/v1/connectors/{}/runs", encode_path(connector)),
                None,
            )?;
            if settings.json {
                return emit_json(out, &value);
            }
            fields(
                out,
                &value,
                &["run_id", "export_id", "page_count", "enqueued", "failed"],
            )
            .map_err(io)
        }
        Command::SourceQuarantine {
            action,
            connector,
            account,
            reason,
        } => {
            let value = match action.as_str() {
                "show" => {
                    let query = account
                        .as_deref()
                        .map(|a| format!("?source_account={}", encode_query(a)))
                        .unwrap_or_default();
                    api.call(
                        "GET",
                        &format!("/v1/source-quarantines/{}{query}", encode_path(connector)),
                        None,
                    )?
                }
                "set" => api.call(
                    "POST",
                    "/v1/source-quarantines",
                    Some(&serde_json::json!({"connector": connector, "source_account": account, "reason": reason})),
                )?,
                _ => api.call(
                    "POST",
                    &format!("/v1/source-quarantines/{}/lift", encode_path(connector)),
                    Some(&serde_json::json!({"source_account": account, "reason": reason})),
                )?,
            };
            if settings.json {
                return emit_json(out, &value);
            }
            writeln!(
                out,
                "source {}/{}: {}",
                text(&value["source"]["connector"]),
                text(&value["source"]["source_account"]),
                if value["active"] == Value::Bool(true) {
                    "quarantined"
                } else {
                    "not quarantined"
                }
            )
            .map_err(io)?;
            let rows: Vec<Vec<String>> = value["events"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|e| {
                    vec![
                        text(&e["at"]),
                        text(&e["action"]),
                        text(&e["actor"]),
                        text(&e["reason"]),
                    ]
                })
                .collect();
            write!(out, "{}", table(&["AT", "ACTION", "BY", "REASON"], &rows)).map_err(io)
        }
        Command::CorrectionAdd {
            connector,
            from_item,
            to_item,
            account,
            reason,
        } => {
            let value = api.call(
                "POST",
                "/v1/identity-corrections",
                Some(
                    &serde_json::json!({"connector": connector, "source_account": account,
                    "from_item": from_item, "to_item": to_item, "reason": reason}),
                ),
            )?;
            print_correction(out, &value, settings.json)
        }
        Command::CorrectionShow { id } => {
            let value = api.call(
                "GET",
                &format!("/v1/identity-corrections/{}", encode_path(id)),
                None,
            )?;
            print_correction(out, &value, settings.json)
        }
        Command::CorrectionWithdraw { id, reason } => {
            let value = api.call(
                "POST",
                &format!("/v1/identity-corrections/{}/withdraw", encode_path(id)),
                Some(&serde_json::json!({"reason": reason})),
            )?;
            print_correction(out, &value, settings.json)
        }
        Command::DlqRedrive { dlq, queue } => {
            let target = redrive_target(dlq.as_deref(), queue.as_deref(), settings)?;
            let moved = redrive(&target, &mut |p: RedriveProgress| {
                // On stderr, so that --json output stays one document.
                eprintln!(
                    "dlq redrive: {} moved of about {} ({} left in the DLQ)",
                    p.moved, p.total_estimate, p.left_estimate
                );
            })?;
            if settings.json {
                return emit_json(
                    out,
                    &serde_json::json!({"moved": moved, "from": target.dlq, "to": target.queue}),
                );
            }
            writeln!(
                out,
                "moved {moved} message(s) from {} to {}",
                target.dlq, target.queue
            )
            .map_err(io)
        }
    }
}

fn print_correction(out: &mut dyn Write, value: &Value, json: bool) -> Result<(), CliError> {
    if json {
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        )
        .map_err(io);
    }
    fields(
        out,
        value,
        &[
            "correction_id",
            "kind",
            "from_item",
            "replaces",
            "reason",
            "actor",
            "created_at",
            "in_force",
            "replaced_by",
            "settled",
        ],
    )
    .map_err(io)?;
    writeln!(out, "to_item: {}", text(&value["to_item"])).map_err(io)?;
    let superseded = value["superseded_observations"]
        .as_array()
        .map_or(0, Vec::len);
    writeln!(out, "re-attributed observations: {superseded}").map_err(io)
}

/// The whole CLI: parse, apply defaults, run. Returns the process exit code (0 ok, 1 failed,
/// 2 usage).
pub fn main_with(args: &[String]) -> i32 {
    let invocation = match parse_args(args) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("opsctl: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let env = |k: &str| std::env::var(k).ok();
    let stack = std::env::current_dir()
        .ok()
        .and_then(|dir| find_stack_file(&dir, env))
        .and_then(|p| read_stack_file(&p));
    let settings = Settings::resolve(&invocation.global, env, stack);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(&invocation.command, &settings, &mut out) {
        Ok(()) => 0,
        Err(e) => {
            let _ = out.flush();
            eprintln!("opsctl: error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpListener;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn parse(text: &str) -> Result<Invocation, UsageError> {
        parse_args(&args(text))
    }

    #[test]
    fn commands_parse_with_global_options_anywhere() {
        let inv = parse("--endpoint http://x:1 quarantine list --status all --token T").unwrap();
        assert_eq!(inv.global.endpoint.as_deref(), Some("http://x:1"));
        assert_eq!(inv.global.token.as_deref(), Some("T"));
        assert_eq!(
            inv.command,
            Command::QuarantineList {
                status: Some("all".into())
            }
        );
        assert_eq!(
            parse("quarantine show q_abc --json").unwrap(),
            Invocation {
                global: GlobalOptions {
                    json: true,
                    ..GlobalOptions::default()
                },
                command: Command::QuarantineShow { id: "q_abc".into() }
            }
        );
        assert_eq!(
            parse("delivery show demo/acme-eu/ACC-1/EXP-8821/2")
                .unwrap()
                .command,
            Command::DeliveryShow {
                key: "demo/acme-eu/ACC-1/EXP-8821/2".into()
            }
        );
        assert_eq!(
            parse("run show run-acme-eu.EXP-8821").unwrap().command,
            Command::RunShow {
                run_id: "run-acme-eu.EXP-8821".into()
            }
        );
        assert_eq!(
            parse("dlq redrive").unwrap().command,
            Command::DlqRedrive {
                dlq: None,
                queue: None
            }
        );
        assert_eq!(parse("").unwrap().command, Command::Help);
        assert_eq!(
            parse("quarantine list --help").unwrap().command,
            Command::Help
        );
    }

    #[test]
    fn resolve_needs_exactly_one_action_and_a_reason() {
        let mut argv = args("quarantine resolve q_1 --accept-as EXP-8821/2-corrected --reason");
        argv.push("supplier confirmed the correction".into());
        assert_eq!(
            parse_args(&argv).unwrap().command,
            Command::QuarantineResolve {
                id: "q_1".into(),
                resolution: Resolution::AcceptAs("EXP-8821/2-corrected".into()),
                reason: "supplier confirmed the correction".into()
            }
        );
        assert_eq!(
            parse("quarantine resolve q_1 --reject --reason=dup")
                .unwrap()
                .command,
            Command::QuarantineResolve {
                id: "q_1".into(),
                resolution: Resolution::Reject,
                reason: "dup".into()
            }
        );
        for bad in [
            "quarantine resolve q_1 --reject",
            "quarantine resolve q_1 --reason r",
            "quarantine resolve q_1 --reject --accept-as X --reason r",
            "quarantine resolve q_1 --accept-as",
            "quarantine resolve --reject --reason r",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_commands_and_misplaced_options_are_usage_errors() {
        for bad in [
            "quarantine",
            "quarantine delete q_1",
            "delivery show",
            "run show a b",
            "quarantine show q_1 --reject",
            "quarantine list --frobnicate",
            "dlq redrive --dlq http://q",
            "--json=yes quarantine list",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_come_from_flags_then_environment_then_the_stack_file() {
        let stack = serde_json::json!({"http": "http://127.0.0.1:9999"});
        let none = |_: &str| None;
        let s = Settings::resolve(&GlobalOptions::default(), none, Some(stack.clone()));
        assert_eq!(
            (s.endpoint.as_str(), s.token.as_str()),
            ("http://127.0.0.1:9999", LOCAL_OPERATOR_TOKEN)
        );
        let s = Settings::resolve(&GlobalOptions::default(), none, None);
        assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
        let env = |k: &str| (k == "FEEDSAFE_TOKEN").then(|| "from-env".to_owned());
        let s = Settings::resolve(&GlobalOptions::default(), env, Some(stack));
        assert_eq!(s.token, "from-env");
        let flags = GlobalOptions {
            endpoint: Some("http://h:1/".into()),
            token: Some("flag".into()),
            json: false,
        };
        let s = Settings::resolve(&flags, env, None);
        assert_eq!(
            (s.endpoint.as_str(), s.token.as_str()),
            ("http://h:1", "flag")
        );
    }

    #[test]
    fn delivery_keys_keep_their_slashes_and_escape_the_rest() {
        assert_eq!(
            encode_path("demo/acme-events/ACME-EVT/urn:acme:events/evt 1+x?#"),
            "demo/acme-events/ACME-EVT/urn:acme:events/evt%201%2Bx%3F%23"
        );
    }

    #[test]
    fn redrive_queues_come_from_the_local_stack_file() {
        let stack = serde_json::json!({
            "dynamodb_endpoint": "http://127.0.0.1:1",
            "moto_endpoint": "http://127.0.0.1:2",
            "queues": {"IngestDLQ": {"url": "http://127.0.0.1:2/1/dlq"}, "IngestQueue": {"url": "http://127.0.0.1:2/1/q"}}
        });
        let settings = Settings::resolve(&GlobalOptions::default(), |_| None, Some(stack));
        let target = redrive_target(Some("A"), Some("B"), &settings).unwrap();
        assert_eq!(
            (target.dlq.as_str(), target.queue.as_str(), target.local),
            ("A", "B", None)
        );
        if std::env::var("INGEST_DLQ_URL").is_err() || std::env::var("INGEST_QUEUE_URL").is_err() {
            let target = redrive_target(None, None, &settings).unwrap();
            assert_eq!(target.dlq, "http://127.0.0.1:2/1/dlq");
            assert_eq!(
                target.local,
                Some(("http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()))
            );
        }
    }

    /// Serves one canned answer and reports the request line and headers it received.
    fn one_shot_server(
        status: u16,
        body: &'static str,
    ) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).unwrap();
            head.push_str(&String::from_utf8_lossy(&request_body));
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            head
        });
        (url, handle)
    }

    fn settings(endpoint: String) -> Settings {
        Settings {
            endpoint,
            token: "tok".into(),
            json: false,
            stack: None,
        }
    }

    #[test]
    fn quarantine_list_prints_a_table_and_sends_the_operator_token() {
        let (url, server) = one_shot_server(
            200,
            r#"{"status":"open","count":1,"entries":[{"quarantine_id":"q_abc","kind":"mismatch","reason_code":"replay_payload_mismatch","status":"open","first_seen_at":"2026-11-29T08:00:05Z","delivery_key":"demo/acme-eu/ACC-1/EXP-8821/2"}]}"#,
        );
        let mut out = Vec::new();
        run(
            &Command::QuarantineList { status: None },
            &settings(url),
            &mut out,
        )
        .unwrap();
        let request = server.join().unwrap();
        assert!(
            request.starts_with("GET /v1/quarantine HTTP/1.1"),
            "{request}"
        );
        assert!(request
            .to_ascii_lowercase()
            .contains("authorization: bearer tok"));
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("ID     KIND      REASON"), "{out}");
        assert!(
            out.contains("q_abc  mismatch  replay_payload_mismatch  open"),
            "{out}"
        );
        assert!(out.ends_with("1 open entry\n"), "{out}");
    }

    #[test]
    fn source_quarantine_lift_posts_the_reason_and_prints_the_history() {
        let (url, server) = one_shot_server(
            200,
            r#"{"source":{"tenant":"demo","connector":"acme-eu","source_account":"ACC-1"},"active":false,"events":[{"event_id":"sq_1","action":"set","reason":"broken feed","actor":"alice","at":"2026-11-29T08:00:00Z"},{"event_id":"sq_2","action":"lift","reason":"verified again","actor":"bob","at":"2026-11-29T09:00:00Z"}]}"#,
        );
        let invocation = parse("source-quarantine lift acme-eu --reason verified").unwrap();
        let mut out = Vec::new();
        run(&invocation.command, &settings(url), &mut out).unwrap();
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /v1/source-quarantines/acme-eu/lift HTTP/1.1"),
            "{request}"
        );
        assert!(request.contains(r#""reason":"verified""#), "{request}");
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("source acme-eu/ACC-1: not quarantined"),
            "{out}"
        );
        assert!(out.contains("lift    bob"), "{out}");
        assert!(
            parse("source-quarantine lift acme-eu").is_err(),
            "a reason is required"
        );
        assert!(parse("source-quarantine show acme-eu --reason x").is_err());
    }

    #[test]
    fn correction_commands_parse_and_need_a_reason() {
        assert_eq!(
            parse("correction add acme-eu AX-440 AX-440-R2 --reason suffix")
                .unwrap()
                .command,
            Command::CorrectionAdd {
                connector: "acme-eu".into(),
                from_item: "AX-440".into(),
                to_item: "AX-440-R2".into(),
                account: None,
                reason: "suffix".into(),
            }
        );
        assert!(parse("correction add acme-eu AX-440 AX-440-R2").is_err());
        assert!(parse("correction withdraw corr_x").is_err());
        assert_eq!(
            parse("correction show corr_x").unwrap().command,
            Command::CorrectionShow {
                id: "corr_x".into()
            }
        );
    }

    #[test]
    fn resolve_posts_the_action_and_api_errors_carry_their_code() {
        let (url, server) = one_shot_server(
            409,
            r#"{"error":{"code":"already_resolved","message":"quarantine entry q_abc is accepted, not open"}}"#,
        );
        let err = run(
            &Command::QuarantineResolve {
                id: "q_abc".into(),
                resolution: Resolution::AcceptAs("EXP-8821/2-corrected".into()),
                reason: "confirmed".into(),
            },
            &settings(url),
            &mut Vec::new(),
        )
        .unwrap_err();
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /v1/quarantine/q_abc/resolve HTTP/1.1"),
            "{request}"
        );
        assert!(request.ends_with(
            r#"{"action":"accept_as_new_delivery","delivery_id":"EXP-8821/2-corrected","reason":"confirmed"}"#
        ), "{request}");
        assert_eq!(
            err.to_string(),
            "HTTP 409 already_resolved: quarantine entry q_abc is accepted, not open"
        );
    }

    #[test]
    fn an_unreachable_endpoint_is_a_clear_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = run(
            &Command::RunShow { run_id: "r".into() },
            &settings(format!("http://127.0.0.1:{port}")),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(matches!(err, CliError::Transport(_)), "{err}");
        assert!(err.to_string().contains("cannot reach"), "{err}");
    }
}
