//! Cold start and size of every function's bootstrap (docs/benchmarks.md, "Cold start and size"),
//! against a stand-in for the Lambda Runtime API: each release binary is started the way Lambda
//! starts it (the `AWS_LAMBDA_*` environment, credentials in the environment, the function's
//! configuration) with `AWS_LAMBDA_RUNTIME_API` pointing at a listener here, and the time from
//! process start to its first `GET /2018-06-01/runtime/invocation/next` is taken, `RUNS` times per
//! function. A process that reports an init error or exits instead fails the bench.
//!
//! `scripts/bench` builds the bootstraps (`cargo build --release` of the function packages,
//! the profile `sam build` and `cargo lambda build --release` use) and runs this with
//! `FEEDSAFE_BOOTSTRAP_DIR` naming their folder. Figures: docs/benchmarks.md, "Cold start".

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FUNCTIONS: [&str; 8] = [
    "ingest",
    "projector",
    "query",
    "poller",
    "sweeper",
    "webhook",
    "drops",
    "ops",
];
const RUNS: usize = 15;
const TARGET_MS: f64 = 30.0;
const TARGET_BYTES: u64 = 8 * 1024 * 1024;

/// The configuration every function reads at init (a superset: each reads its own). Nothing is
/// called at init, so the names need not exist.
const CONFIGURATION: [(&str, &str); 12] = [
    ("EVIDENCE_TABLE", "bench-evidence"),
    ("PROJECTION_TABLE", "bench-projection"),
    ("RAW_BUCKET", "bench-raw"),
    (
        "INGEST_QUEUE_URL",
        "http://127.0.0.1:9/000000000000/bench-ingest",
    ),
    ("SIGNING_SECRET_PREFIX", "feedsafe/bench/signing/"),
    ("POLLER_FUNCTION", "bench-poller"),
    ("AWS_REGION", "us-east-1"),
    // Sample credentials (not a secret): Lambda puts the role's session in the environment.
    ("AWS_ACCESS_KEY_ID", "coldstart"),
    ("AWS_SECRET_ACCESS_KEY", "coldstart"),
    ("AWS_SESSION_TOKEN", "coldstart"),
    ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
    ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
];

/// Starts `binary` once and returns the milliseconds until it asked for its first invocation.
fn one_cold_start(binary: &PathBuf, function: &str) -> Result<f64, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let mut command = Command::new(binary);
    command
        .env_clear()
        .envs(CONFIGURATION)
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", format!("bench-{function}"))
        .env(
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/bench-{function}"),
        )
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let result = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!(
                "{function} exited with {status} before asking for an invocation"
            ));
        }
        if started.elapsed() > Duration::from_secs(10) {
            break Err(format!(
                "{function} did not ask for an invocation within 10 s"
            ));
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let asked = started.elapsed();
                stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                let mut line = String::new();
                BufReader::new(&stream)
                    .read_line(&mut line)
                    .map_err(|e| e.to_string())?;
                if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                    break Ok(asked.as_secs_f64() * 1000.0);
                }
                let _ = (&stream).write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
                break Err(format!(
                    "{function} asked {:?} instead of the next invocation",
                    line.trim()
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(200))
            }
            Err(e) => break Err(e.to_string()),
        }
    };
    let _ = child.kill();
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    result.map_err(|e| format!("{e}; stderr: {}", String::from_utf8_lossy(&output.stderr)))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank]
}

fn main() {
    let dir = std::env::var_os("FEEDSAFE_BOOTSTRAP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { RUNS };
    println!();
    println!("Cold start: process start to the first GET /runtime/invocation/next, {runs} runs each ({})", dir.display());
    println!("| function | bootstrap bytes | MiB | min ms | p50 ms | max ms | size <= 8 MiB | p50 <= 30 ms |");
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    let mut report = Vec::new();
    // `--quick` checks the harness on two functions (their debug builds cost CI the least).
    let functions: &[&str] = if quick {
        &["ingest", "query"]
    } else {
        &FUNCTIONS
    };
    for &function in functions {
        let binary = dir.join(function);
        let bytes = std::fs::metadata(&binary)
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/bench builds it)", binary.display()))
            .len();
        let mut times: Vec<f64> = (0..runs)
            .map(|_| one_cold_start(&binary, function).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        times.sort_by(f64::total_cmp);
        let p50 = percentile(&times, 0.5);
        println!(
            "| {function} | {bytes} | {:.1} | {:.1} | {p50:.1} | {:.1} | {} | {} |",
            bytes as f64 / 1_048_576.0,
            times[0],
            times[times.len() - 1],
            if bytes <= TARGET_BYTES { "yes" } else { "no" },
            if p50 <= TARGET_MS { "yes" } else { "no" },
        );
        report.push(serde_json::json!({
            "function": function, "bytes": bytes, "cold_start_ms": times,
        }));
    }
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&out).expect("target/bench");
    std::fs::write(
        out.join("cold-start.json"),
        serde_json::to_vec_pretty(&report).unwrap(),
    )
    .expect("cold-start report written");
}
