//! The crash drill: the function host (`local-stack up`, the Lambda stand-in) is killed with
//! SIGKILL at random moments while signed webhooks, file drops and pull runs arrive, and started
//! again; then, from outside, through the HTTP routes only, every acknowledged event must be
//! stored exactly once, readable, with its raw artifact downloadable and matching its sha256.
//!
//! `local-stack drill run` drives and checks one drill and writes what it expects to
//! `--state`; `local-stack drill verify` starts the host on the same data and checks that set
//! again (scripts/drill runs it after stopping and restarting the engines). Local addresses
//! only; bounded in count and in time.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const READER: &str = "local-reader-demo-token";
const OPERATOR: &str = "local-operator-demo-token";
const WEBHOOKS: &str = "acme-events";
const PULLS: &str = "acme-eu";
const DROPS: &str = "acme-files";
const SOURCE: &str = "urn:acme:events";

const USAGE: &str = "\
usage: local-stack drill run [--events N] [--kills K] [--drops D] [--pulls P] [--mutations M]
                             [--seconds S] [--seed X] --state FILE --log FILE
       local-stack drill verify --state FILE --log FILE

run     starts the function host, sends N signed webhooks (default 1000), D file drops of 5
        rows (10) and P pull runs of 3 pages (3), re-sends M acknowledged events with changed
        payloads (10, each must be quarantined), kills the host with SIGKILL K times (5) at
        random moments and restarts it, waits for everything to drain, checks every
        acknowledged event through the HTTP routes, stops the host gracefully, and writes the
        expected set to FILE. Gives up after S seconds (900).
verify  starts the host on the same data, checks FILE's expected set again, stops gracefully.

The engines come from FEEDSAFE_DYNAMODB_ENDPOINT / FEEDSAFE_MOTO_ENDPOINT; FEEDSAFE_DATA_DIR is
the host's data folder. Exit status 0 only when nothing is lost, duplicated or mismatched.";

#[derive(Debug, Clone)]
struct Options {
    events: u64,
    kills: u64,
    drops: u64,
    pulls: u64,
    mutations: u64,
    seconds: u64,
    seed: u64,
    state: PathBuf,
    log: PathBuf,
}

fn parse(args: &[String]) -> Result<(String, Options)> {
    let mut it = args.iter();
    let command = it.next().cloned().unwrap_or_default();
    if matches!(command.as_str(), "" | "help" | "--help" | "-h") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    let mut options = Options {
        events: 1000,
        kills: 5,
        drops: 10,
        pulls: 3,
        mutations: 10,
        seconds: 900,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1),
        state: PathBuf::new(),
        log: PathBuf::new(),
    };
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        let number = || {
            value
                .parse::<u64>()
                .with_context(|| format!("{flag} {value:?} is not a number"))
        };
        match flag.as_str() {
            "--events" => options.events = number()?,
            "--kills" => options.kills = number()?,
            "--drops" => options.drops = number()?,
            "--pulls" => options.pulls = number()?,
            "--mutations" => options.mutations = number()?,
            "--seconds" => options.seconds = number()?,
            "--seed" => options.seed = number()? | 1,
            "--state" => options.state = PathBuf::from(value),
            "--log" => options.log = PathBuf::from(value),
            other => bail!("unknown option {other}\n\n{USAGE}"),
        }
    }
    if options.state.as_os_str().is_empty() || options.log.as_os_str().is_empty() {
        bail!("--state and --log are required\n\n{USAGE}");
    }
    if options.mutations > options.events {
        bail!("--mutations cannot exceed --events");
    }
    Ok((command, options))
}

/// xorshift64*: enough randomness for kill moments, reproducible from `--seed`.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

use feedsafe::domain::hashing::sha256_hex;

mod check;
mod host;
use check::{check, report};
use host::{agent, Host};

fn offer(sku: &str, quantity: u64, at: &str) -> Value {
    json!({"sku": sku, "quantity": quantity, "unit": "each", "price": "9.50", "currency": "EUR", "observed_at": at})
}

fn at(second: u64) -> String {
    feedsafe::domain::timestamp::Timestamp::from_unix_seconds(1_795_000_000 + second as i64)
        .map(|t| t.to_rfc3339())
        .unwrap_or_default()
}

fn webhook_body(n: u64, quantity: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "specversion": "1.0", "id": format!("drill-{n}"), "source": SOURCE, "type": "offer.snapshot",
        "data": {"offers": [offer(&format!("DRW-{n:05}"), quantity, &at(n))]}
    }))
    .unwrap_or_default()
}

/// One expected observation: the item, the quantity it must show, and, where the drill knows
/// them, the bytes of its raw artifact.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Expected {
    sku: String,
    quantity: u64,
    artifact_sha256: Option<String>,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct DrillState {
    expected: Vec<Expected>,
    /// Delivery keys that must be quarantined (changed payload under an old identity).
    quarantined: Vec<String>,
}

/// Sends one signed webhook until it is answered 202 (a supplier retries with the same
/// webhook-id); gives up at `deadline`.
fn post_webhook(
    agent: &ureq::Agent,
    api: &str,
    secret: &feedsafe::intake::webhook::SigningSecret,
    webhook_id: &str,
    body: &[u8],
    deadline: Instant,
    attempts: &AtomicU64,
) -> Result<()> {
    let url = format!("{api}/v1/webhooks/{WEBHOOKS}");
    loop {
        attempts.fetch_add(1, Ordering::Relaxed);
        let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
        let signature = feedsafe::intake::webhook::sign(secret, webhook_id, now, body);
        let answer = agent
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", webhook_id)
            .header("webhook-timestamp", &now.to_string())
            .header("webhook-signature", &signature)
            .send(body);
        match answer {
            Ok(r) if r.status() == 202 => return Ok(()),
            Ok(r) if r.status().as_u16() < 500 && r.status() != 429 => {
                bail!("webhook {webhook_id} refused with {}", r.status())
            }
            _ => {}
        }
        if Instant::now() > deadline {
            bail!("webhook {webhook_id} not acknowledged before the deadline");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn call(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let mut response = match body {
        None if method == "GET" => agent
            .get(url)
            .header("Authorization", &format!("Bearer {token}"))
            .call(),
        body => agent
            .post(url)
            .header("Authorization", &format!("Bearer {token}"))
            .header("content-type", "application/json")
            .send(body.map(Value::to_string).unwrap_or_default()),
    }
    .with_context(|| format!("{method} {url}"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

fn export_pages(k: u64) -> Vec<Vec<Value>> {
    (1..=3)
        .map(|p| {
            (1..=4)
                .map(|r| offer(&format!("DRP-{k:02}-{p}-{r}"), p * 10 + r, &at(k)))
                .collect()
        })
        .collect()
}

fn csv_file(f: u64) -> Vec<u8> {
    let mut out = String::from("sku,quantity,unit,price,currency,observed_at\n");
    for r in 1..=5 {
        out.push_str(&format!("DRF-{f:03}-{r},{r},each,9.50,EUR,{}\n", at(f)));
    }
    out.into_bytes()
}

fn host_for(options: &Options) -> Result<Host> {
    let ports_file = options.state.with_extension("ports");
    // The same ports for every start of the drill's host: the seeded pull connector names the
    // fake supplier's address.
    let (api_port, supplier_port) = match std::fs::read_to_string(&ports_file) {
        Ok(text) => {
            let mut parts = text.split_whitespace().map(|p| p.parse::<u16>());
            match (parts.next(), parts.next()) {
                (Some(Ok(a)), Some(Ok(s))) => (a, s),
                _ => bail!("{} is unreadable; delete it", ports_file.display()),
            }
        }
        Err(_) => {
            let ports = (free_port()?, free_port()?);
            std::fs::write(&ports_file, format!("{} {}", ports.0, ports.1))?;
            ports
        }
    };
    Ok(Host {
        child: None,
        api_port,
        supplier_port,
        log: options.log.clone(),
        stack_file: options.state.with_extension("stack.json"),
    })
}

fn moto_endpoint() -> Result<String> {
    std::env::var("FEEDSAFE_MOTO_ENDPOINT")
        .context("FEEDSAFE_MOTO_ENDPOINT is not set (scripts/drill sets it)")
}

pub async fn run(args: Vec<String>) -> Result<()> {
    let (command, options) = parse(&args)?;
    match command.as_str() {
        "run" => {
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || drill(options, handle)).await?
        }
        "verify" => tokio::task::spawn_blocking(move || verify(options)).await?,
        other => bail!("unknown drill command {other:?}\n\n{USAGE}"),
    }
}

fn verify(options: Options) -> Result<()> {
    let state: DrillState = serde_json::from_slice(
        &std::fs::read(&options.state)
            .with_context(|| format!("reading {}", options.state.display()))?,
    )?;
    let mut host = host_for(&options)?;
    let started = Instant::now();
    host.start()?;
    println!(
        "function host started again on the same data in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let findings = check(
        &host.api(),
        &moto_endpoint()?,
        &state,
        Instant::now(),
        Instant::now() + Duration::from_secs(options.seconds),
    )?;
    let stop = host.stop()?;
    report(
        "verify (after the engines were stopped and started again)",
        &[("expected", state.expected.len() as u64)],
        &findings,
    );
    println!("  graceful stop exit status: {stop:?}");
    if !findings.clean() || findings.stored != state.expected.len() as u64 {
        bail!("the drill's verification failed");
    }
    Ok(())
}

fn drill(options: Options, handle: tokio::runtime::Handle) -> Result<()> {
    let began = Instant::now();
    let deadline = began + Duration::from_secs(options.seconds);
    let mut rng = Rng(options.seed);
    println!(
        "drill: seed {} — {} webhooks, {} drops, {} pull runs, {} mutations, {} kills",
        options.seed,
        options.events,
        options.drops,
        options.pulls,
        options.mutations,
        options.kills
    );
    let secrets: Value = serde_json::from_slice(&std::fs::read(
        crate::repo_root().join("infra/local/secrets.json"),
    )?)?;
    let secret = feedsafe::intake::webhook::SigningSecret::parse(
        secrets[WEBHOOKS][0].as_str().unwrap_or_default(),
    )
    .map_err(|e| anyhow!("the sample secret: {e:?}"))?;
    let host = Arc::new(Mutex::new(host_for(&options)?));
    host.lock().map_err(|_| anyhow!("host lock"))?.start()?;
    let api = host.lock().map_err(|_| anyhow!("host lock"))?.api();
    let stack: Value =
        serde_json::from_slice(&std::fs::read(options.state.with_extension("stack.json"))?)?;
    let bucket = stack["buckets"]["RawBucket"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let clients = feedsafe::aws::AwsClients::local(
        stack["dynamodb_endpoint"].as_str().unwrap_or_default(),
        stack["moto_endpoint"].as_str().unwrap_or_default(),
    );

    // The kill moments: after these many acknowledged webhooks (spread over the middle 80%).
    let mut kill_at: Vec<u64> = (0..options.kills)
        .map(|_| options.events / 10 + rng.below(options.events * 8 / 10 + 1))
        .collect();
    kill_at.sort_unstable();
    let acked = Arc::new(AtomicU64::new(0));
    let attempts = Arc::new(AtomicU64::new(0));
    let kills = Arc::new(AtomicU64::new(0));
    let stop_killer = Arc::new(AtomicBool::new(false));
    let killer = {
        let (host, acked, kills, stop_killer) = (
            host.clone(),
            acked.clone(),
            kills.clone(),
            stop_killer.clone(),
        );
        let jitter: Vec<u64> = kill_at.iter().map(|_| rng.below(400)).collect();
        std::thread::spawn(move || -> Result<()> {
            for (at, jitter) in kill_at.iter().zip(jitter) {
                while acked.load(Ordering::Relaxed) < *at {
                    if stop_killer.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(jitter));
                let mut host = host.lock().map_err(|_| anyhow!("host lock"))?;
                host.kill()?;
                let n = kills.fetch_add(1, Ordering::Relaxed) + 1;
                println!(
                    "drill: kill -9 #{n} of the function host after {} acknowledged webhooks",
                    acked.load(Ordering::Relaxed)
                );
                host.start()?;
            }
            Ok(())
        })
    };

    let state = Arc::new(Mutex::new(DrillState::default()));
    // Webhooks: 8 senders, each retrying until 202.
    let next = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for _ in 0..8 {
        let (api, secret, next, acked, attempts, state) = (
            api.clone(),
            secret.clone(),
            next.clone(),
            acked.clone(),
            attempts.clone(),
            state.clone(),
        );
        let events = options.events;
        senders.push(std::thread::spawn(move || -> Result<()> {
            let agent = agent();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= events {
                    return Ok(());
                }
                let quantity = n % 50 + 1;
                let body = webhook_body(n, quantity);
                post_webhook(
                    &agent,
                    &api,
                    &secret,
                    &format!("msg-drill-{n}"),
                    &body,
                    deadline,
                    &attempts,
                )?;
                acked.fetch_add(1, Ordering::Relaxed);
                state
                    .lock()
                    .map_err(|_| anyhow!("state lock"))?
                    .expected
                    .push(Expected {
                        sku: format!("DRW-{n:05}"),
                        quantity,
                        artifact_sha256: Some(sha256_hex(&body)),
                    });
            }
        }));
    }
    // File drops, straight into the bucket as a supplier's SFTP/S3 upload would land.
    for f in 0..options.drops {
        let body = csv_file(f);
        let key = format!("drops/{DROPS}/drill-{f:03}.csv");
        handle
            .block_on(
                clients
                    .s3
                    .put_object()
                    .bucket(&bucket)
                    .key(&key)
                    .body(body.clone().into())
                    .send(),
            )
            .with_context(|| format!("dropping {key}"))?;
        let mut s = state.lock().map_err(|_| anyhow!("state lock"))?;
        for r in 1..=5 {
            s.expected.push(Expected {
                sku: format!("DRF-{f:03}-{r}"),
                quantity: r,
                artifact_sha256: Some(sha256_hex(&body)),
            });
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(100 + rng.below(200)));
    }
    // Pull runs, one export at a time; a run cut short by a kill is started again, as the
    // schedule would.
    let agent = agent();
    for k in 0..options.pulls {
        let export_id = format!("EXP-DRILL-{k:02}");
        loop {
            if Instant::now() > deadline {
                bail!("pull run {export_id} not accepted before the deadline");
            }
            let supplier = format!(
                "http://127.0.0.1:{}",
                host.lock().map_err(|_| anyhow!("host lock"))?.supplier_port
            );
            let set = agent
                .post(&format!("{supplier}/control/{PULLS}/export"))
                .header("content-type", "application/json")
                .send(json!({"export_id": export_id, "pages": export_pages(k)}).to_string());
            if !set.is_ok_and(|r| r.status().is_success()) {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            match call(
                &agent,
                "POST",
                &format!("{api}/v1/connectors/{PULLS}/runs"),
                OPERATOR,
                None,
            ) {
                // Accepted: the run is named and its pull runs asynchronously. The run is done
                // once every page is committed; a kill that cut the pull short (or lost the
                // accepted launch with the host) means it is started again, as the schedule
                // would.
                Ok((202, body)) if body["export_id"].as_str() == Some(export_id.as_str()) => {
                    let run = format!(
                        "{api}/v1/runs/{}",
                        body["run_id"].as_str().unwrap_or_default()
                    );
                    let settled = Instant::now();
                    let mut done = false;
                    while settled.elapsed() < Duration::from_secs(20) && Instant::now() < deadline {
                        if let Ok((200, run)) = call(&agent, "GET", &run, OPERATOR, None) {
                            if run["all_pages_committed"] == true {
                                done = true;
                                break;
                            }
                        }
                        std::thread::sleep(Duration::from_millis(250));
                    }
                    if done {
                        break;
                    }
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        let mut s = state.lock().map_err(|_| anyhow!("state lock"))?;
        for (p, page) in export_pages(k).iter().enumerate() {
            for (r, _) in page.iter().enumerate() {
                let (p, r) = (p as u64 + 1, r as u64 + 1);
                s.expected.push(Expected {
                    sku: format!("DRP-{k:02}-{p}-{r}"),
                    quantity: p * 10 + r,
                    artifact_sha256: None,
                });
            }
        }
    }
    for sender in senders {
        sender.join().map_err(|_| anyhow!("a sender panicked"))??;
    }
    // Every original event is acknowledged: the drain (to everything readable) starts here,
    // though the changed payloads below wait for their originals within it.
    let acknowledged_at = Instant::now();
    // Changed payloads under acknowledged identities: each must be quarantined, the stored
    // observation untouched.
    for m in 0..options.mutations {
        let n = m * (options.events / options.mutations.max(1));
        // A changed payload under an *old* identity: the original is stored first. (Sent while
        // the original is still in flight, the change would simply arrive first, be stored, and
        // the original would be the one quarantined, which is as right but not this check.)
        let sku = format!("DRW-{n:05}");
        loop {
            let (_, history) = call(
                &agent,
                "GET",
                &format!("{api}/v1/items/{sku}/observations"),
                READER,
                None,
            )
            .unwrap_or_default();
            if history["observations"]
                .as_array()
                .is_some_and(|o| !o.is_empty())
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("{sku} was never stored, so its changed payload was not sent");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let body = webhook_body(n, 1000 + m);
        post_webhook(
            &agent,
            &api,
            &secret,
            &format!("msg-drill-{n}-changed"),
            &body,
            deadline,
            &attempts,
        )?;
        state
            .lock()
            .map_err(|_| anyhow!("state lock"))?
            .quarantined
            .push(format!("demo/{WEBHOOKS}/ACME-EVT/{SOURCE}/drill-{n}"));
    }
    stop_killer.store(true, Ordering::Relaxed);
    killer
        .join()
        .map_err(|_| anyhow!("the killer panicked"))??;
    let sent_seconds = began.elapsed().as_secs_f64();

    let state = std::mem::take(&mut *state.lock().map_err(|_| anyhow!("state lock"))?);
    let findings = check(&api, &moto_endpoint()?, &state, acknowledged_at, deadline)?;
    let stop = host.lock().map_err(|_| anyhow!("host lock"))?.stop()?;
    let mut file = std::fs::File::create(&options.state)?;
    file.write_all(&serde_json::to_vec(&state)?)?;
    report(
        "run",
        &[
            ("webhooks sent", options.events + options.mutations),
            ("webhook attempts", attempts.load(Ordering::Relaxed)),
            (
                "webhooks acknowledged",
                acked.load(Ordering::Relaxed) + options.mutations,
            ),
            ("drops", options.drops),
            ("pull runs", options.pulls),
            ("expected observations", state.expected.len() as u64),
            ("kills (SIGKILL)", kills.load(Ordering::Relaxed)),
        ],
        &findings,
    );
    println!("  {:<22} {:.1}", "seconds sending", sent_seconds);
    println!("  graceful stop exit status: {stop:?}");
    if kills.load(Ordering::Relaxed) < options.kills {
        bail!(
            "only {} of {} kills happened",
            kills.load(Ordering::Relaxed),
            options.kills
        );
    }
    if !findings.clean() || findings.stored != state.expected.len() as u64 {
        bail!("the drill failed: see the figures above");
    }
    Ok(())
}
