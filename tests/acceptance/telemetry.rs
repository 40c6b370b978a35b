//! Telemetry in the shape AWS Lambda Powertools users expect
//! (docs/adr/0055-telemetry-in-the-powertools-shape.md): each function's real bootstrap
//! (`target/debug/<name>`, built by `cargo build --workspace`) is started the way Lambda starts it,
//! against a stand-in for the Lambda Runtime API that serves one invocation (a sample from
//! `events/`) with a request id and an X-Ray trace id, and with the AWS endpoints pointing at the
//! local engines (fresh resources from `template.yaml`). Its stdout must hold JSON lines with
//! `level`, `message`, `service` (the template's `POWERTOOLS_SERVICE_NAME`), `cold_start: true`,
//! `function_request_id` (the id served), `xray_trace_id`, `timestamp`, no nested `fields`, and one
//! `ColdStart` EMF line.

use crate::template::{serverless_functions, template_document};
use acceptance::engine_endpoints;
use feedsafe::aws::AwsClients;
use local_stack::resources::{create_resources, CreateOptions, LocalResources};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use template_spec::{read_template, template_path};

const TRACE_ID: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

/// Where `cargo build --workspace` puts the bootstraps.
fn bootstrap(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("debug").join(name)
}

/// Each function of the template: its binary name and its `POWERTOOLS_SERVICE_NAME`.
fn functions() -> Vec<(String, String)> {
    let document = template_document();
    serverless_functions(&document)
        .into_iter()
        .map(|(id, function)| {
            let name = id.trim_end_matches("Function").to_ascii_lowercase();
            let service = function["Properties"]["Environment"]["Variables"]
                ["POWERTOOLS_SERVICE_NAME"]
                .as_str()
                .unwrap_or_else(|| panic!("{id} sets no POWERTOOLS_SERVICE_NAME"))
                .to_owned();
            (name, service)
        })
        .collect()
}

/// Everything a bootstrap needs in its environment besides the runtime API and its name.
struct Stage {
    dynamodb: String,
    moto: String,
    database: String,
    resources: LocalResources,
}

impl Stage {
    fn environment(&self, function: &str, service: &str) -> Vec<(String, String)> {
        let r = &self.resources;
        let table = |id: &str| r.table(id).expect("table").to_owned();
        let mut env: Vec<(&str, String)> = vec![
            ("EVIDENCE_TABLE", table("EvidenceTable")),
            ("PROJECTION_TABLE", table("ProjectionTable")),
            (
                "RAW_BUCKET",
                r.bucket("RawBucket").expect("bucket").to_owned(),
            ),
            (
                "INGEST_QUEUE_URL",
                r.queue("IngestQueue").expect("queue").url.clone(),
            ),
            (
                "SIGNING_SECRET_PREFIX",
                "feedsafe/telemetry/signing/".into(),
            ),
            ("POLLER_FUNCTION", "telemetry-poller".into()),
            ("S3_FORCE_PATH_STYLE", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            // DynamoDB Local keeps one database per access key (placeholders, not secrets).
            ("AWS_ACCESS_KEY_ID", self.database.clone()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
            ("AWS_ENDPOINT_URL_DYNAMODB", self.dynamodb.clone()),
            ("AWS_ENDPOINT_URL_S3", self.moto.clone()),
            ("AWS_ENDPOINT_URL_SQS", self.moto.clone()),
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", self.moto.clone()),
            ("AWS_ENDPOINT_URL_LAMBDA", self.moto.clone()),
            ("AWS_LAMBDA_FUNCTION_NAME", format!("telemetry-{function}")),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
            (
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function}"),
            ),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "telemetry".into()),
            ("POWERTOOLS_SERVICE_NAME", service.into()),
            // Powertools' level wins over Lambda's: debug lines show every invocation's calls.
            ("POWERTOOLS_LOG_LEVEL", "debug".into()),
            ("AWS_LAMBDA_LOG_LEVEL", "ERROR".into()),
        ];
        if let Some(path) = std::env::var_os("PATH") {
            env.push(("PATH", path.to_string_lossy().into_owned()));
        }
        env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

/// One HTTP/1.1 request read from the bootstrap: request line and body.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        chunked |= header.starts_with("transfer-encoding:") && header.contains("chunked");
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some((request_line.trim().to_owned(), body))
}

/// Serves one connection: the first `next` gets the event, a later one is never answered (the
/// process is stopped meanwhile); the response or error POST is reported on `outcome`.
fn serve(
    stream: TcpStream,
    event: &[u8],
    request_id: &str,
    served: &std::sync::atomic::AtomicBool,
    outcome: &mpsc::Sender<String>,
) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut writer = stream;
    while let Some((line, body)) = read_request(&mut reader) {
        if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
            if served.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_secs(60));
                return;
            }
            let deadline = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() + 30_000)
                .unwrap_or(0);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 lambda-runtime-aws-request-id: {request_id}\r\n\
                 lambda-runtime-trace-id: {TRACE_ID}\r\n\
                 lambda-runtime-deadline-ms: {deadline}\r\n\
                 lambda-runtime-invoked-function-arn: arn:aws:lambda:us-east-1:000000000000:function:telemetry\r\n\
                 content-length: {}\r\n\r\n",
                event.len()
            );
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(event);
        } else {
            let _ = writer.write_all(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 16\r\n\r\n{\"status\":\"OK\"}\n",
            );
            let _ = outcome.send(format!("{line} {}", String::from_utf8_lossy(&body)));
        }
    }
}

/// Runs `function`'s bootstrap for one invocation; its stdout and how the invocation ended.
fn invoke_once(function: &str, env: Vec<(String, String)>, request_id: &str) -> (String, String) {
    let event = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../events")
            .join(sample_event(function)),
    )
    .expect("sample event");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
    let address = listener.local_addr().expect("address");
    let binary = bootstrap(function);
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build --workspace` first (scripts/test does)",
        binary.display()
    );
    let mut child = Command::new(&binary)
        .env_clear()
        .envs(env)
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bootstrap starts");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let (sender, receiver) = mpsc::channel();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (id, event) = (request_id.to_owned(), std::sync::Arc::new(event));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (id, event, served, sender) =
                (id.clone(), event.clone(), served.clone(), sender.clone());
            std::thread::spawn(move || serve(stream, &event, &id, &served, &sender));
        }
    });
    let outcome = receiver
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| "no response or error within 60 s".into());
    // The lines of the invocation are written before its response is sent.
    std::thread::sleep(Duration::from_millis(200));
    let _ = child.kill();
    let _ = child.wait();
    (reader.join().unwrap_or_default(), outcome)
}

fn sample_event(function: &str) -> String {
    let kind = match function {
        "ingest" => "sqs",
        "projector" => "stream",
        "drops" => "s3",
        "poller" | "sweeper" => "schedule",
        _ => "http",
    };
    format!("{function}-{kind}.json")
}

/// The most telling line of the invocation: its most severe, else its first.
fn invocation_lines(stdout: &str, request_id: &str) -> Vec<Value> {
    let mut lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["function_request_id"] == request_id)
        .collect();
    let rank = |l: &Value| match l["level"].as_str() {
        Some("ERROR") => 0,
        Some("WARN") => 1,
        Some("INFO") => 2,
        _ => 3,
    };
    lines.sort_by_key(rank);
    lines
}

fn assert_powertools_line(function: &str, service: &str, line: &Value) {
    for key in ["level", "timestamp", "xray_trace_id"] {
        assert!(
            line[key].as_str().is_some_and(|v| !v.is_empty()),
            "{function}: `{key}` in {line}"
        );
    }
    // An event may carry fields only (the SDK's debug events): `message` is then empty.
    assert!(
        line["message"].is_string(),
        "{function}: `message` in {line}"
    );
    assert_eq!(line["service"], service, "{function}: {line}");
    assert_eq!(line["cold_start"], true, "{function}: {line}");
    assert_eq!(line["xray_trace_id"], TRACE_ID, "{function}: {line}");
    assert!(line.get("fields").is_none(), "{function}: flat: {line}");
    assert!(line.get("span").is_none(), "{function}: flat: {line}");
}

async fn stage() -> Stage {
    let (dynamodb, moto) = engine_endpoints();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let database = format!("telemetry{}", nanos % 1_000_000_000_000);
    let clients = AwsClients::local_database(&dynamodb, &moto, &database);
    let spec = read_template(&template_path()).expect("template.yaml parses");
    let options = CreateOptions {
        prefix: format!("tm{:x}", nanos % 0xffff_ffff),
        ttl: false,
    };
    let resources = create_resources(&clients, &spec, &options)
        .await
        .expect("resources are created from template.yaml");
    Stage {
        dynamodb,
        moto,
        database,
        resources,
    }
}

/// Every function's bootstrap writes Powertools-shaped lines for the invocation it handles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_logs_the_keys_powertools_users_expect() {
    let stage = stage().await;
    let functions = functions();
    assert!(functions.len() >= 8, "{functions:?}");
    let runs = functions.iter().map(|(function, service)| {
        let env = stage.environment(function, service);
        let request_id = format!("telemetry-{function}-{}", std::process::id());
        let function = function.clone();
        tokio::task::spawn_blocking(move || {
            let (stdout, outcome) = invoke_once(&function, env, &request_id);
            (function, request_id, stdout, outcome)
        })
    });
    let results = futures_util::future::join_all(runs).await;
    for ((function, request_id, stdout, outcome), (_, service)) in
        results.into_iter().map(|r| r.expect("run")).zip(&functions)
    {
        let lines = invocation_lines(&stdout, &request_id);
        let Some(line) = lines.first() else {
            panic!("{function}: no line with function_request_id {request_id} ({outcome}); stdout:\n{stdout}");
        };
        eprintln!("{function}: {line}");
        assert!(
            line["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{function}: {line}"
        );
        for line in &lines {
            assert_powertools_line(&function, service, line);
        }
        let mut flat = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        assert!(
            flat.all(|l| l.get("fields").is_none()),
            "{function}: a nested `fields` line in:\n{stdout}"
        );
        let cold_starts: Vec<Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["ColdStart"] == 1.0)
            .collect();
        assert_eq!(
            cold_starts.len(),
            1,
            "{function}: one ColdStart metric:\n{stdout}"
        );
        assert_eq!(cold_starts[0]["service"], *service, "{function}");
    }
}
