//! Sizing bench (docs/adr/0048-sized-from-measurements.md): the slowest ingest message and the
//! slowest projector invocation, measured through the functions' own handlers on the local engines,
//! from which template.yaml's timeouts and visibility timeout are set (docs/benchmarks.md,
//! "Sizing").
//!
//! - ingest: one 5,000-row export page (the largest delivery a connector takes by default),
//!   claim-checked in S3 as the webhook and the poller enqueue it, handed to
//!   `handle_sqs_batch` as a one-message SQS event; three fresh deliveries.
//! - projector: the evidence stream of those deliveries (staged, `per_page`) and of a
//!   100-page `on_run_complete` run of 50 rows a page, handed to `handle_stream_batch` in
//!   events of 1,000 records (the template's BatchSize); the slowest invocation of each.
//!
//! Run with the engines up: `infra/engines.sh start && eval "$(infra/engines.sh env)" &&
//! cargo bench -p acceptance --bench sizing`. It uses a DynamoDB Local database of its own.

use acceptance::metering::cpu_ms;
use acceptance::scale::{counted_projector, drain_as_lambda, rows_page};
use acceptance::*;
use feedsafe::domain::connector::Publication;
use feedsafe::domain::envelope::RunPage;
use feedsafe::domain::ids::RunId;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::intake::envelope_for;
use std::time::Instant;

const ROWS: usize = 5_000;
const RUN_PAGES: u32 = 100;
const RUN_ROWS_PER_PAGE: usize = 50;
const STREAM_BATCH: usize = 1_000;

/// Peak resident memory of this process so far, in MiB (VmHWM).
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// One message through the ingest function's handler; its wall time in milliseconds.
async fn ingest_as_lambda(
    service: &feedsafe::protocols::ingest::IngestService,
    body: &str,
) -> u128 {
    let event: aws_lambda_events::event::sqs::SqsEvent =
        serde_json::from_value(serde_json::json!({
            "Records": [{"messageId": "sizing-1", "body": body,
                         "attributes": {"ApproximateReceiveCount": "1"}}]
        }))
        .expect("an SQS event");
    let at = Instant::now();
    let response = feedsafe::lambda::sqs::handle_sqs_batch(service, event)
        .await
        .expect("batch handled");
    assert!(
        response.batch_item_failures.is_empty(),
        "the message settles"
    );
    at.elapsed().as_millis()
}

async fn claim_checked(
    env: &TestEnv,
    config: &feedsafe::domain::connector::ConnectorConfig,
    source_delivery_id: &str,
    run: Option<RunPage>,
    body: &[u8],
) -> String {
    let claims = feedsafe::aws::claims::S3ClaimStore::new(env.clients.s3.clone(), &env.bucket);
    envelope_for(
        &delivery_key(config, source_delivery_id),
        "export_page",
        Timestamp::now(),
        "application/json",
        run,
        body,
        &claims,
    )
    .await
    .expect("claim checked")
    .to_json()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let env = spawn_heavy_env(true, "sizing").await;
    let staged = acme_eu();
    env.seed(&staged).await;
    let on_complete = connector("acme-run", "ACC-9", Publication::OnRunComplete);
    env.seed(&on_complete).await;
    let service = env.service();
    let counter = RequestCounter::default();
    let projector = counted_projector(&env, &counter);

    // Ingest: three fresh 5,000-row deliveries.
    let mut stream = env.stream().await;
    let mut ingest_ms = Vec::new();
    let mut ingest_cpu = Vec::new();
    let rss_before = peak_rss_mib();
    for n in 1..=3 {
        let export = format!("EXP-SZ{n}");
        let body = export_page(&export, 1, 1, rows_page(&format!("SZ{n}"), 0, ROWS));
        let envelope = claim_checked(&env, &staged, &format!("{export}/1"), None, &body).await;
        assert!(
            envelope.len() < 4096,
            "the body travels in S3, not in the message"
        );
        let cpu = cpu_ms();
        let ms = ingest_as_lambda(&service, &envelope).await;
        let cpu = cpu_ms() - cpu;
        println!(
            "ingest: {ROWS}-row delivery {n} ({} KiB) in {ms} ms, {cpu} ms CPU",
            body.len() / 1024
        );
        ingest_ms.push(ms);
        ingest_cpu.push(cpu);
    }
    let rss_ingest = peak_rss_mib();
    let cpu = cpu_ms();
    let staged_drain = drain_as_lambda(&mut stream, &projector, &counter, STREAM_BATCH).await;
    let staged_cpu = (cpu_ms() - cpu) / staged_drain.batches.max(1) as u128;
    let (records, requests, staged_worst) = staged_drain.slowest();
    println!(
        "projector, staged deliveries: {} invocations, slowest {staged_worst} ms ({records} records, {requests} requests)",
        staged_drain.batches
    );

    // An on_run_complete run of 100 pages: its completion publishes 5,000 rows at once.
    let run_id = RunId::parse("run-acme-run.EXP-SZRUN").unwrap();
    let mut page_ms = Vec::new();
    for page in 1..=RUN_PAGES {
        let from = (page as usize - 1) * RUN_ROWS_PER_PAGE;
        let body = export_page(
            "EXP-SZRUN",
            page,
            RUN_PAGES,
            rows_page("SZRUN", from, RUN_ROWS_PER_PAGE),
        );
        let run = RunPage {
            run_id: run_id.clone(),
            page,
            page_count: Some(RUN_PAGES),
        };
        let envelope = claim_checked(
            &env,
            &on_complete,
            &format!("EXP-SZRUN/{page}"),
            Some(run),
            &body,
        )
        .await;
        page_ms.push(ingest_as_lambda(&service, &envelope).await);
    }
    let cpu = cpu_ms();
    let run_drain = drain_as_lambda(&mut stream, &projector, &counter, STREAM_BATCH).await;
    let run_cpu = (cpu_ms() - cpu) / run_drain.batches.max(1) as u128;
    let (records, requests, run_worst) = run_drain.slowest();
    println!(
        "projector, {RUN_PAGES}-page on_run_complete run: {} invocations, slowest {run_worst} ms ({records} records, {requests} requests)",
        run_drain.batches
    );
    // The poller: a 100-page export from the fake supplier (over loopback http), every page
    // claim-checked and enqueued, as the poller function does it.
    let supplier = local_stack::fake_supplier::FakeSupplier::start(0)
        .await
        .expect("fake supplier");
    let pages: Vec<Vec<serde_json::Value>> = (0..RUN_PAGES as usize)
        .map(|p| rows_page("SZPULL", p * RUN_ROWS_PER_PAGE, RUN_ROWS_PER_PAGE))
        .collect();
    supplier.set_export("acme-pull", "EXP-SZPULL", pages);
    let mut puller = connector("acme-pull", "ACC-8", Publication::PerPage);
    puller.pull = Some(
        serde_json::from_value(serde_json::json!({
            "export_url": supplier.url("acme-pull"), "credential_ref": "local/none"
        }))
        .unwrap(),
    );
    env.seed(&puller).await;
    let queue = feedsafe::aws::sqs::SqsDeliveryQueue::new(
        env.clients.sqs.clone(),
        &env.resources.queue("IngestQueue").unwrap().url,
    );
    let pull = feedsafe::intake::poller::PullService::new(
        env.store.clone(),
        env.store.clone(),
        std::sync::Arc::new(feedsafe::intake::poller::HttpExportSource::allowing_loopback_http()),
        std::sync::Arc::new(queue),
        std::sync::Arc::new(feedsafe::aws::claims::S3ClaimStore::new(
            env.clients.s3.clone(),
            &env.bucket,
        )),
        std::sync::Arc::new(feedsafe::protocols::ports::SystemClock),
    );
    let cpu = cpu_ms();
    let at = Instant::now();
    let report = pull
        .run_connector(&puller.connector)
        .await
        .expect("pull runs");
    let pull_ms = at.elapsed().as_millis();
    let pull_cpu = cpu_ms() - cpu;
    assert_eq!(report.enqueued.len(), RUN_PAGES as usize, "{report:?}");
    println!(
        "poller: {RUN_PAGES}-page export pulled and enqueued in {pull_ms} ms ({pull_cpu} ms CPU)"
    );

    let ingest_worst = ingest_ms.iter().copied().max().unwrap_or(0);
    let ingest_cpu_worst = ingest_cpu.iter().copied().max().unwrap_or(0);
    let page_worst = page_ms.iter().copied().max().unwrap_or(0);
    println!();
    println!("| what | worst wall, ms | CPU, ms |");
    println!("|---|---:|---:|");
    println!(
        "| ingest: one {ROWS}-row message (claim-checked) | {ingest_worst} | {ingest_cpu_worst} |"
    );
    println!("| ingest: one {RUN_ROWS_PER_PAGE}-row run page | {page_worst} | |");
    println!("| projector: one event of up to {STREAM_BATCH} records, staged {ROWS}-row deliveries | {staged_worst} | {staged_cpu} (mean) |");
    println!("| projector: one event of up to {STREAM_BATCH} records, {RUN_PAGES}-page on_run_complete run | {run_worst} | {run_cpu} (mean) |");
    println!(
        "| poller: one {RUN_PAGES}-page export, per page | {} | {} |",
        pull_ms / RUN_PAGES as u128,
        pull_cpu / RUN_PAGES as u128
    );
    println!(
        "peak resident memory: {rss_before} MiB before the deliveries, {rss_ingest} MiB after ingesting them, {} MiB at the end (the whole bench process)",
        peak_rss_mib()
    );
    println!(
        "sizing: {{\"ingest_message_ms\": {ingest_worst}, \"ingest_message_cpu_ms\": {ingest_cpu_worst}, \"projector_invocation_ms\": {}}}",
        staged_worst.max(run_worst)
    );
}
