//! `opsctl`, the operators' command line over the ops HTTP API (`feedsafe::ops`) and the
//! ingest dead-letter queue.
//!
//! ```text
//! opsctl [--endpoint URL] [--token-stdin] [--json] COMMAND
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
//! `.local/stack.json` (in the repository opsctl was built from, or `FEEDSAFE_STACK_FILE`),
//! else `http://127.0.0.1:8790`; https is required except to a loopback address. The token is
//! the first line of standard input with `--token-stdin`, else `FEEDSAFE_TOKEN`, else (loopback
//! endpoints only) the local operator's sample token; there is no token flag, since a command
//! line is visible in `ps`. `dlq redrive` talks to SQS directly: with `--dlq/--queue` (or `INGEST_DLQ_URL` and
//! `INGEST_QUEUE_URL`) through the standard AWS environment, else with the local stack's queues
//! and moto endpoint from `.local/stack.json`.

use serde_json::Value;
use std::io::Write;
use std::time::Duration;

mod cli;
mod redrive;
mod settings;
pub use cli::{
    parse_args, CliError, Command, GlobalOptions, Invocation, Resolution, UsageError, USAGE,
};
pub use redrive::{redrive, redrive_target, RedriveProgress, RedriveTarget};
pub use settings::{
    check_endpoint, find_stack_file, read_stack_file, repository_root, Settings, DEFAULT_ENDPOINT,
    LOCAL_OPERATOR_TOKEN,
};

/// Percent-encodes a path tail, keeping `/` (delivery keys span several segments) and the
/// characters that need no escape in a path segment.
pub fn encode_path(text: &str) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    const KEEP: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'/')
        .remove(b':')
        .remove(b'@');
    utf8_percent_encode(text, KEEP).to_string()
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
                &[
                    "run_id",
                    "export_id",
                    "page_count",
                    "status",
                    "run_status",
                    "run",
                ],
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
    let stack = find_stack_file(&repository_root(), env).and_then(|p| read_stack_file(&p));
    let stdin_token = if invocation.global.token_stdin {
        let mut line = String::new();
        if let Err(e) = std::io::stdin().read_line(&mut line) {
            eprintln!("opsctl: error: --token-stdin: {e}");
            return 2;
        }
        Some(line)
    } else {
        None
    };
    let settings = match Settings::resolve(&invocation.global, env, stack, stdin_token) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("opsctl: error: {e}");
            return 2;
        }
    };
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
mod tests;
