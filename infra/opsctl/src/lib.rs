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
//!
//! Modules: `cli` parses the command line, `settings` resolves endpoint and token, `commands`
//! holds one function per subcommand (the call, then the answer), `output` the text formatting,
//! and `redrive` the DLQ moves.

use serde_json::Value;
use std::io::Write;
use std::time::Duration;

mod cli;
mod commands;
mod connectors;
mod output;
mod redrive;
mod settings;
pub use cli::{
    parse_args, CliError, Command, GlobalOptions, Invocation, Resolution, UsageError, USAGE,
};
pub use output::table;
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
        self.call_with(method, path, body, None)
    }

    /// `call`, with an `If-Match` header when given (a `PUT` of a versioned record).
    fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.settings.endpoint);
        let auth = format!("Bearer {}", self.settings.token);
        let result = match body {
            None if method == "GET" => self.agent.get(&url).header("authorization", &auth).call(),
            _ => {
                let mut request = match method {
                    "PUT" => self.agent.put(&url),
                    _ => self.agent.post(&url),
                }
                .header("authorization", &auth)
                .header("content-type", "application/json");
                if let Some(version) = if_match {
                    request = request.header("if-match", version);
                }
                request.send(body.map(Value::to_string).unwrap_or_default().as_bytes())
            }
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
                message: error_message(&value),
            });
        }
        Ok(value)
    }
}

/// An error answer's message, and each problem it lists (a refused connector definition's,
/// with their JSON pointers) on a line of its own.
fn error_message(value: &Value) -> String {
    let mut message = value["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for problem in value["problems"].as_array().into_iter().flatten() {
        let pointer = problem["pointer"].as_str().unwrap_or_default();
        let pointer = if pointer.is_empty() {
            "(document)"
        } else {
            pointer
        };
        message.push_str(&format!(
            "\n  {pointer}: {}",
            problem["message"].as_str().unwrap_or_default()
        ));
    }
    message
}

/// Runs one command against the API (or SQS for `dlq redrive`), writing to `out`.
pub fn run(command: &Command, settings: &Settings, out: &mut dyn Write) -> Result<(), CliError> {
    let api = Api::new(settings);
    match command {
        Command::Help => writeln!(out, "{USAGE}").map_err(output::io),
        Command::QuarantineList { status } => {
            commands::quarantine_list(&api, status.as_deref(), out)
        }
        Command::QuarantineShow { id } => commands::quarantine_show(&api, id, out),
        Command::QuarantineResolve {
            id,
            resolution,
            reason,
        } => commands::quarantine_resolve(&api, id, resolution, reason, out),
        Command::DeliveryShow { key } => commands::delivery_show(&api, key, out),
        Command::DeliveryArtifact { key } => commands::delivery_artifact(&api, key, out),
        Command::RunShow { run_id } => commands::run_show(&api, run_id, out),
        Command::RunStart { connector } => commands::run_start(&api, connector, out),
        Command::ConnectorPreview { definition, sample } => {
            connectors::connector_preview(&api, definition, sample, out)
        }
        Command::ConnectorStoredPreview { connector, sample } => {
            connectors::stored_preview(&api, connector, sample, out)
        }
        Command::ConnectorPut {
            definition,
            if_match,
        } => connectors::connector_put(&api, definition, if_match.as_deref(), out),
        Command::ConnectorGet { connector } => connectors::connector_get(&api, connector, out),
        Command::SourceQuarantine {
            action,
            connector,
            account,
            reason,
        } => commands::source_quarantine(
            &api,
            action,
            connector,
            account.as_deref(),
            reason.as_deref(),
            out,
        ),
        Command::CorrectionAdd {
            connector,
            from_item,
            to_item,
            account,
            reason,
        } => {
            let correction = commands::NewCorrection {
                connector,
                from_item,
                to_item,
                account: account.as_deref(),
                reason,
            };
            commands::correction_add(&api, &correction, out)
        }
        Command::CorrectionShow { id } => commands::correction_show(&api, id, out),
        Command::CorrectionWithdraw { id, reason } => {
            commands::correction_withdraw(&api, id, reason, out)
        }
        Command::DlqRedrive { dlq, queue } => {
            commands::dlq_redrive(settings, dlq.as_deref(), queue.as_deref(), out)
        }
    }
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
