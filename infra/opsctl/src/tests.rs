//! opsctl's unit tests: parsing, defaults, output, and the HTTP calls against a local server.

use super::*;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;

fn args(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

fn parse(text: &str) -> Result<Invocation, UsageError> {
    parse_args(&args(text))
}

/// A token on the command line is visible to every user of the machine (`ps`, shell history):
/// refused with a pointer to the environment variable and standard input.
#[test]
fn a_token_flag_is_refused() {
    for text in ["--token T quarantine list", "quarantine list --token=T"] {
        let error = parse(text).unwrap_err().to_string();
        assert!(
            error.contains("FEEDSAFE_TOKEN") && error.contains("--token-stdin"),
            "{error}"
        );
    }
}

#[test]
fn commands_parse_with_global_options_anywhere() {
    let inv = parse("--endpoint http://x:1 quarantine list --status all --token-stdin").unwrap();
    assert_eq!(inv.global.endpoint.as_deref(), Some("http://x:1"));
    assert!(inv.global.token_stdin);
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
    let resolve = |global: &GlobalOptions, env: &dyn Fn(&str) -> Option<String>, stack, stdin| {
        Settings::resolve(global, env, stack, stdin).unwrap()
    };
    let s = resolve(&GlobalOptions::default(), &none, Some(stack.clone()), None);
    assert_eq!(
        (s.endpoint.as_str(), s.token.as_str()),
        ("http://127.0.0.1:9999", LOCAL_OPERATOR_TOKEN)
    );
    let s = resolve(&GlobalOptions::default(), &none, None, None);
    assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
    let env = |k: &str| (k == "FEEDSAFE_TOKEN").then(|| "from-env".to_owned());
    let s = resolve(&GlobalOptions::default(), &env, Some(stack), None);
    assert_eq!(s.token, "from-env");
    let flags = GlobalOptions {
        endpoint: Some("https://ops.example.com/".into()),
        token_stdin: true,
        json: false,
    };
    let s = resolve(&flags, &env, None, Some("from-stdin\n".into()));
    assert_eq!(
        (s.endpoint.as_str(), s.token.as_str()),
        ("https://ops.example.com", "from-stdin")
    );
}

/// Plain http only to a loopback address; a remote endpoint needs a real token.
#[test]
fn plain_http_to_a_remote_endpoint_and_a_missing_remote_token_are_refused() {
    let none = |_: &str| None;
    let token = |k: &str| (k == "FEEDSAFE_TOKEN").then(|| "t".to_owned());
    let at = |endpoint: &str| GlobalOptions {
        endpoint: Some(endpoint.into()),
        ..GlobalOptions::default()
    };
    for remote in [
        "http://ops.example.com",
        "http://10.0.0.5:8790",
        "http://127.0.0.1.evil.example",
        "http://user@ops.example.com",
        "ftp://127.0.0.1",
    ] {
        let error = Settings::resolve(&at(remote), token, None, None).unwrap_err();
        assert!(error.contains("http"), "{remote}: {error}");
    }
    for local in [
        "http://127.0.0.1:8790",
        "http://localhost:1",
        "http://[::1]:8790",
    ] {
        assert!(
            Settings::resolve(&at(local), none, None, None).is_ok(),
            "{local}"
        );
    }
    let error = Settings::resolve(&at("https://ops.example.com"), none, None, None).unwrap_err();
    assert!(error.contains("FEEDSAFE_TOKEN"), "{error}");
    assert!(Settings::resolve(&at("https://ops.example.com"), token, None, None).is_ok());
}

/// The stack file is the repository's (or FEEDSAFE_STACK_FILE), never one in a parent folder.
#[test]
fn the_stack_file_is_looked_up_in_the_repository_only() {
    let dir = std::env::temp_dir().join(format!("opsctl-stack-{}", std::process::id()));
    let repository = dir.join("repo");
    std::fs::create_dir_all(dir.join(".local")).unwrap();
    std::fs::create_dir_all(&repository).unwrap();
    std::fs::write(dir.join(".local").join("stack.json"), "{}").unwrap();
    let none = |_: &str| None;
    assert_eq!(
        find_stack_file(&repository, none),
        None,
        "a parent's file is not used"
    );
    std::fs::create_dir_all(repository.join(".local")).unwrap();
    std::fs::write(repository.join(".local").join("stack.json"), "{}").unwrap();
    assert_eq!(
        find_stack_file(&repository, none),
        Some(repository.join(".local").join("stack.json"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
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
    let settings =
        Settings::resolve(&GlobalOptions::default(), |_| None, Some(stack), None).unwrap();
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
fn one_shot_server(status: u16, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
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

/// `opsctl --help`, `-h`, `help`, and `--help` after any subcommand print the usage text.
#[test]
fn every_command_answers_help() {
    let commands = [
        "",
        "help",
        "quarantine list",
        "quarantine show q_1",
        "quarantine resolve q_1 --reject",
        "delivery show k",
        "delivery artifact k",
        "run show r",
        "run start acme-eu",
        "source-quarantine set acme-eu",
        "source-quarantine show acme-eu",
        "correction add acme-eu A B",
        "correction withdraw corr_x",
        "dlq redrive --dlq x",
        "no such command",
    ];
    for command in commands {
        for help in ["--help", "-h"] {
            let text = format!("{command} {help}");
            assert_eq!(parse(&text).unwrap().command, Command::Help, "{text}");
        }
    }
    let mut out = Vec::new();
    run(
        &Command::Help,
        &settings("http://127.0.0.1:1".into()),
        &mut out,
    )
    .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), format!("{USAGE}\n"));
}

fn show_quarantine_entry(body: &'static str) -> String {
    let (url, server) = one_shot_server(200, body);
    let mut out = Vec::new();
    run(
        &Command::QuarantineShow { id: "q_1".into() },
        &settings(url),
        &mut out,
    )
    .unwrap();
    server.join().unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn quarantine_show_prints_the_resolution_and_a_json_diff() {
    let out = show_quarantine_entry(
        r#"{"quarantine_id":"q_1","kind":"mismatch","status":"accepted","message":null,
        "resolution":{"action":"reject","reason":"bad","resolved_at":"t2"},
        "diff":{"available":true,"format":"json","difference_count":2,"truncated":true,"note":"n",
        "differences":[{"path":"/a","stored":1,"received":"x"},{"path":"/bb","stored":null}]}}"#,
    );
    assert_eq!(
        out,
        "quarantine_id         q_1\n\
         kind                  mismatch\n\
         status                accepted\n\
         \n\
         resolution:\n\
         action            reject\n\
         reason            bad\n\
         resolved_at       t2\n\
         \n\
         diff (stored -> received, 2 difference(s), list truncated):\n\
         PATH  STORED  RECEIVED\n\
         /a    1       \"x\"\n\
         /bb   null    (absent)\n\
         note: n\n"
    );
}

#[test]
fn quarantine_show_prints_a_byte_diff_or_why_there_is_none() {
    let out = show_quarantine_entry(
        r#"{"quarantine_id":"q_1","resolution":null,"diff":{"format":"csv","stored_bytes":10,
        "received_bytes":12,"first_difference_offset":4,
        "line_differences":[{"line":2,"stored":"a,b","received":null}]}}"#,
    );
    assert_eq!(
        out,
        "quarantine_id         q_1\n\
         \n\
         diff (csv): stored 10 bytes, received 12 bytes, first difference at byte 4\n\
         LINE  STORED  RECEIVED\n\
         2     a,b     -\n"
    );
    let out = show_quarantine_entry(
        r#"{"quarantine_id":"q_1","diff":{"available":false,"reason":"artifact expired"}}"#,
    );
    assert_eq!(
        out,
        "quarantine_id         q_1\n\ndiff unavailable: artifact expired\n"
    );
}

/// The definition and sample files of `connector preview` travel as the request; the answer
/// prints as rows and refused rows.
#[test]
fn connector_preview_sends_both_files_and_prints_rows_and_refusals() {
    let dir = std::env::temp_dir().join(format!("opsctl-preview-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let definition = dir.join("definition.json");
    let sample = dir.join("sample.csv");
    std::fs::write(&definition, r#"{"connector":"lieferant-de"}"#).unwrap();
    std::fs::write(&sample, b"Preis\r\n1,00\xE4\r\n").unwrap();
    let (url, server) = one_shot_server(
        200,
        r#"{"connector":"lieferant-de","outcome":"stored_with_quarantined_rows","rows":[{"item":"LM358DR~each~new","sku":"LM358DR","quantity":1500,"unit":"each","price":"0.42","currency":"EUR","observed_at":"2026-11-29T07:00:00Z"}],"refused_rows":[{"place":"line 3","code":"invalid_row","reason":"quantity: \"viele\" is not a whole number"}],"fingerprint":"bytes-v1:ab","identity":{"kind":"file_name_and_content","strength":"source","from":"the file's name and the sha256 of its content"}}"#,
    );
    let command = format!(
        "connector preview {} {}",
        definition.display(),
        sample.display()
    );
    let mut out = Vec::new();
    run(&parse(&command).unwrap().command, &settings(url), &mut out).unwrap();
    let request = server.join().unwrap();
    assert!(
        request.starts_with("POST /v1/connector-previews HTTP/1.1"),
        "{request}"
    );
    assert!(
        request.contains(r#""definition":{"connector":"lieferant-de"}"#),
        "{request}"
    );
    assert!(
        request.contains(r#""sample_base64":"UHJlaXMNCjEsMDDkDQo=""#),
        "{request}"
    );
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("outcome      stored_with_quarantined_rows"),
        "{out}"
    );
    assert!(out.contains("LM358DR~each~new  1500"), "{out}");
    assert!(
        out.contains("line 3  invalid_row  quantity: \"viele\" is not a whole number"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A refused definition's every problem is shown with its pointer.
#[test]
fn a_refused_definition_shows_every_problem_with_its_pointer() {
    let dir = std::env::temp_dir().join(format!("opsctl-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("d.json"), "{}").unwrap();
    std::fs::write(dir.join("s.csv"), "x").unwrap();
    let (url, server) = one_shot_server(
        422,
        r#"{"error":{"code":"invalid_definition","message":"the connector definition has 2 problems; each is listed with its JSON pointer"},"problems":[{"pointer":"","message":"\"connector\" is a required property"},{"pointer":"/fields/unit","message":"needs exactly one of column, position, path or constant; found none"}]}"#,
    );
    let command = format!(
        "connector preview {} {}",
        dir.join("d.json").display(),
        dir.join("s.csv").display()
    );
    let error = run(
        &parse(&command).unwrap().command,
        &settings(url),
        &mut Vec::new(),
    )
    .unwrap_err();
    server.join().unwrap();
    let shown = error.to_string();
    assert!(
        shown.starts_with("HTTP 422 invalid_definition: the connector definition has 2"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  (document): \"connector\" is a required property"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  /fields/unit: needs exactly one of"),
        "{shown}"
    );
    std::fs::remove_dir_all(&dir).ok();
    assert!(parse("connector preview only-one-file").is_err());
}

/// `connector put` sends the file as the body of `PUT /v1/connectors/{id}` with the version it
/// replaces in `If-Match`, and prints what the service did.
#[test]
fn connector_put_sends_the_definition_with_if_match() {
    let dir = std::env::temp_dir().join(format!("opsctl-put-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let definition = dir.join("definition.json");
    std::fs::write(
        &definition,
        r#"{"connector":"lieferant-de","horizon_days":45}"#,
    )
    .unwrap();
    let (url, server) = one_shot_server(
        200,
        r#"{"connector":"lieferant-de","version":4,"outcome":"updated"}"#,
    );
    let command = format!("connector put {} --if-match 3", definition.display());
    let mut out = Vec::new();
    run(&parse(&command).unwrap().command, &settings(url), &mut out).unwrap();
    let request = server.join().unwrap();
    assert!(
        request.starts_with("PUT /v1/connectors/lieferant-de HTTP/1.1"),
        "{request}"
    );
    assert!(
        request.to_ascii_lowercase().contains("if-match: 3\r\n"),
        "{request}"
    );
    assert!(request.contains(r#""horizon_days":45"#), "{request}");
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("version    4"), "{out}");
    assert!(out.contains("outcome    updated"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
    assert!(parse("connector get").is_err());
}
