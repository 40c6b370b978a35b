//! opsctl's command line: the usage text, the commands and their parsing.

use std::fmt;

pub const USAGE: &str = "\
usage: opsctl [--endpoint URL] [--token-stdin] [--json] COMMAND

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
  connector put DEFINITION [--if-match VERSION]
                                      store the DEFINITION file as the connector's next
                                      version (created if new; unchanged if the same)
  connector get CONNECTOR             its current definition and every version
  connector preview DEFINITION SAMPLE what the SAMPLE file would give under the DEFINITION
                                      file: rows, refused rows, identity; stores nothing
  connector preview --connector ID SAMPLE
                                      the same under the connector's stored definition
  dlq redrive [--dlq URL --queue URL] move every ingest DLQ message back to the ingest queue
  help

defaults: endpoint FEEDSAFE_ENDPOINT, else `http` in the repository's .local/stack.json
          (or FEEDSAFE_STACK_FILE), else http://127.0.0.1:8790; https is required except
          to a loopback address (the local stack).
token:    --token-stdin reads it from the first line of standard input, else FEEDSAFE_TOKEN,
          else (loopback endpoint only) the local operator sample token. Never a flag: a
          command line is visible to every user of the machine.";

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
    ConnectorPreview {
        definition: String,
        sample: String,
    },
    ConnectorStoredPreview {
        connector: String,
        sample: String,
    },
    ConnectorPut {
        definition: String,
        if_match: Option<String>,
    },
    ConnectorGet {
        connector: String,
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
    /// `--token-stdin`: the token is the first line of standard input.
    pub token_stdin: bool,
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
    let Words {
        global,
        positional,
        mut flags,
    } = split_args(args)?;
    if flags.has("help") {
        return Ok(Invocation {
            global,
            command: Command::Help,
        });
    }
    let words: Vec<&str> = positional.iter().map(String::as_str).collect();
    let command = command_for(&words, &mut flags)?;
    if let Some(name) = flags.first() {
        return Err(usage(format!("--{name} does not apply to this command")));
    }
    Ok(Invocation { global, command })
}

/// A command line taken apart: the global options applied, the words, and the command's own
/// options in the order given.
#[derive(Default)]
struct Words {
    global: GlobalOptions,
    positional: Vec<String>,
    flags: Flags,
}

/// Options that take a value (`--reason R` or `--reason=R`).
const VALUED_OPTIONS: [&str; 9] = [
    "endpoint",
    "if-match",
    "connector",
    "status",
    "accept-as",
    "reason",
    "dlq",
    "queue",
    "account",
];
/// Options that take none.
const SWITCHES: [&str; 4] = ["json", "reject", "help", "token-stdin"];

/// Reads the arguments in order: `--` ends the options, `-h` is `--help`.
fn split_args(args: &[String]) -> Result<Words, UsageError> {
    let mut words = Words::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            words.positional.extend(it.by_ref().cloned());
            break;
        }
        match arg.strip_prefix("--") {
            Some(option) => {
                let (name, value) = read_option(option, &mut it)?;
                words.apply(name, value);
            }
            None if arg == "-h" => words.flags.0.push(("help".into(), None)),
            None => words.positional.push(arg.clone()),
        }
    }
    Ok(words)
}

/// One option (after its `--`): its name and value, the value taken from `rest` when it is not
/// written inline.
fn read_option(
    option: &str,
    rest: &mut std::slice::Iter<'_, String>,
) -> Result<(String, Option<String>), UsageError> {
    let (name, inline) = match option.split_once('=') {
        Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
        None => (option.to_owned(), None),
    };
    if name == "token" {
        return Err(usage(
            "--token is not accepted: a command line is visible to every user of the machine; \
             set FEEDSAFE_TOKEN or pipe the token to --token-stdin",
        ));
    }
    let takes_value = VALUED_OPTIONS.contains(&name.as_str());
    if !takes_value && !SWITCHES.contains(&name.as_str()) {
        return Err(usage(format!("unknown option --{name}")));
    }
    let value = match (takes_value, inline) {
        (true, Some(v)) => Some(v),
        (true, None) => Some(
            rest.next()
                .cloned()
                .ok_or_else(|| usage(format!("--{name} needs a value")))?,
        ),
        (false, Some(_)) => return Err(usage(format!("--{name} takes no value"))),
        (false, None) => None,
    };
    Ok((name, value))
}

impl Words {
    /// A global option sets its field; any other is kept for the command.
    fn apply(&mut self, name: String, value: Option<String>) {
        match name.as_str() {
            "endpoint" => self.global.endpoint = value,
            "token-stdin" => self.global.token_stdin = true,
            "json" => self.global.json = true,
            _ => self.flags.0.push((name, value)),
        }
    }
}

/// The command's options. Each command's parser takes the ones it knows, once each; any left
/// over do not apply to the command.
#[derive(Default)]
struct Flags(Vec<(String, Option<String>)>);

impl Flags {
    fn take(&mut self, name: &str) -> Option<Option<String>> {
        let at = self.0.iter().position(|(n, _)| n == name)?;
        Some(self.0.remove(at).1)
    }

    fn value(&mut self, name: &str) -> Option<String> {
        self.take(name).flatten()
    }

    fn switch(&mut self, name: &str) -> bool {
        self.take(name).is_some()
    }

    /// `--reason`, unless blank.
    fn reason(&mut self) -> Option<String> {
        self.value("reason").filter(|r| !r.trim().is_empty())
    }

    fn required_reason(&mut self, command: &str) -> Result<String, UsageError> {
        self.reason()
            .ok_or_else(|| usage(format!("{command} needs --reason REASON")))
    }

    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    fn first(&self) -> Option<&str> {
        self.0.first().map(|(n, _)| n.as_str())
    }
}

/// The command the words name, with the options it takes.
fn command_for(words: &[&str], flags: &mut Flags) -> Result<Command, UsageError> {
    let owned = |word: &&str| (*word).to_owned();
    Ok(match words {
        [] | ["help"] => Command::Help,
        ["quarantine", "list"] => Command::QuarantineList {
            status: flags.value("status"),
        },
        ["quarantine", "show", id] => Command::QuarantineShow { id: owned(id) },
        ["quarantine", "resolve", id] => quarantine_resolve(id, flags)?,
        ["delivery", "show", key] => Command::DeliveryShow { key: owned(key) },
        ["delivery", "artifact", key] => Command::DeliveryArtifact { key: owned(key) },
        ["run", "show", run_id] => Command::RunShow {
            run_id: owned(run_id),
        },
        ["connector", "preview", sample] if flags.has("connector") => {
            Command::ConnectorStoredPreview {
                connector: flags.value("connector").unwrap_or_default(),
                sample: owned(sample),
            }
        }
        ["connector", "preview", definition, sample] => Command::ConnectorPreview {
            definition: owned(definition),
            sample: owned(sample),
        },
        ["connector", "put", definition] => Command::ConnectorPut {
            definition: owned(definition),
            if_match: flags.value("if-match"),
        },
        ["connector", "get", connector] => Command::ConnectorGet {
            connector: owned(connector),
        },
        ["run", "start", connector] => Command::RunStart {
            connector: owned(connector),
        },
        ["source-quarantine", action @ ("set" | "lift" | "show"), connector] => {
            source_quarantine(action, connector, flags)?
        }
        ["correction", "add", connector, from, to] => Command::CorrectionAdd {
            connector: owned(connector),
            from_item: owned(from),
            to_item: owned(to),
            account: flags.value("account"),
            reason: flags.required_reason("correction add")?,
        },
        ["correction", "show", id] => Command::CorrectionShow { id: owned(id) },
        ["correction", "withdraw", id] => Command::CorrectionWithdraw {
            id: owned(id),
            reason: flags.required_reason("correction withdraw")?,
        },
        ["dlq", "redrive"] => dlq_redrive(flags)?,
        other => {
            return Err(usage(format!(
                "unknown command {:?}; see `opsctl help`",
                other.join(" ")
            )))
        }
    })
}

/// `quarantine resolve ID`: a reason, and exactly one of `--reject` and `--accept-as`.
fn quarantine_resolve(id: &str, flags: &mut Flags) -> Result<Command, UsageError> {
    let reject = flags.switch("reject");
    let accept = flags.value("accept-as");
    let reason = flags.required_reason("quarantine resolve")?;
    let resolution = match (reject, accept) {
        (true, None) => Resolution::Reject,
        (false, Some(id)) => Resolution::AcceptAs(id),
        (true, Some(_)) => return Err(usage("use either --reject or --accept-as, not both")),
        (false, None) => {
            return Err(usage(
                "quarantine resolve needs --reject or --accept-as DELIVERY_ID",
            ))
        }
    };
    Ok(Command::QuarantineResolve {
        id: id.to_owned(),
        resolution,
        reason,
    })
}

/// `source-quarantine set|lift|show CONNECTOR`: a reason to set or lift, none to show.
fn source_quarantine(
    action: &str,
    connector: &str,
    flags: &mut Flags,
) -> Result<Command, UsageError> {
    let account = flags.value("account");
    let reason = flags.reason();
    if action != "show" && reason.is_none() {
        return Err(usage(format!(
            "source-quarantine {action} needs --reason REASON"
        )));
    }
    if action == "show" && reason.is_some() {
        return Err(usage("--reason does not apply to source-quarantine show"));
    }
    Ok(Command::SourceQuarantine {
        action: action.to_owned(),
        connector: connector.to_owned(),
        account,
        reason,
    })
}

/// `dlq redrive`: both queues or neither.
fn dlq_redrive(flags: &mut Flags) -> Result<Command, UsageError> {
    let dlq = flags.value("dlq");
    let queue = flags.value("queue");
    if dlq.is_some() != queue.is_some() {
        return Err(usage(
            "dlq redrive needs both --dlq URL and --queue URL, or neither",
        ));
    }
    Ok(Command::DlqRedrive { dlq, queue })
}
