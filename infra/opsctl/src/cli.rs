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
            "endpoint" | "status" | "accept-as" | "reason" | "dlq" | "queue" | "account"
        );
        if name == "token" {
            return Err(usage(
                "--token is not accepted: a command line is visible to every user of the machine; \
                 set FEEDSAFE_TOKEN or pipe the token to --token-stdin",
            ));
        }
        let is_switch = matches!(name.as_str(), "json" | "reject" | "help" | "token-stdin");
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
            "token-stdin" => global.token_stdin = true,
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
