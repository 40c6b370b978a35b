//! Large deliveries and long runs project in bounded stream batches
//! (docs/adr/0019-projection-recomputed-not-patched.md): reads are batched, no key is computed
//! twice in a batch, and a record that carries more work than one invocation should do is split
//! into resumable work records. Every batch goes through the projector Lambda's own entry point
//! (`handle_stream_batch`) with a DynamoDB stream event.

use acceptance::scale::{counted_projector, drain_as_lambda, rows_page};
use acceptance::*;
use feedsafe::domain::connector::Publication;
use feedsafe::protocols::projection::ProjectionStore;
use std::time::Instant;

/// A bound on any one invocation: the inline budget, a few batched reads per 100 keys, and
/// the bookkeeping of the batch's other records.
const MAX_REQUESTS_PER_BATCH: usize = feedsafe::protocols::projection::INLINE_BUDGET as usize
    + feedsafe::protocols::projection::INLINE_BUDGET as usize / 20
    + 200;
/// The same bound for a run published on completion, whose source has no rows yet: each of its
/// first rows also removes the held claim its page left while the run was unpublished (ADR 0061),
/// up to 16 at a time.
const MAX_REQUESTS_PER_PUBLISHING_BATCH: usize =
    MAX_REQUESTS_PER_BATCH + feedsafe::protocols::projection::INLINE_BUDGET as usize;

#[tokio::test(flavor = "multi_thread")]
async fn a_five_thousand_row_delivery_projects_in_bounded_stream_batches() {
    let env = spawn_heavy_env(true, "bigdelivery").await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let mut stream = env.stream().await;
    let rows = 5_000;
    let body = export_page("EXP-5K", 1, 1, rows_page("BIG", 0, rows));
    let at = Instant::now();
    env.service_ingest(&env.service(), &plain_envelope(&acme, "EXP-5K", &body))
        .await;
    let ingest_ms = at.elapsed().as_millis();

    let counter = RequestCounter::default();
    let projector = counted_projector(&env, &counter);
    let drained = drain_as_lambda(&mut stream, &projector, &counter, 100).await;
    let (records, requests, ms) = drained.slowest();
    println!(
        "5,000-row delivery: ingest {ingest_ms} ms; projection {} ms ({:.2} ms per row) over {} stream batches, \
         {} DynamoDB requests ({:.2} per row: {:?}); slowest batch {ms} ms ({records} records, {requests} requests)",
        drained.total_ms,
        drained.total_ms as f64 / rows as f64,
        drained.batches,
        drained.requests(),
        drained.requests() as f64 / rows as f64,
        drained.by_operation,
    );

    let projected = env.table_items(&env.projection_table()).await.len();
    assert_eq!(projected, rows, "every row has its offer");
    let query = env.query();
    for i in [0, 2_499, 4_999] {
        let offers = query
            .offers(
                &env.reader(),
                &format!("BIG-{i:05}"),
                None,
                feedsafe::domain::timestamp::Timestamp::now(),
            )
            .await
            .unwrap();
        let offers = serde_json::to_value(offers).unwrap();
        assert_eq!(offers["offers"].as_array().unwrap().len(), 1, "BIG-{i:05}");
    }
    assert!(
        drained.most_requests() <= MAX_REQUESTS_PER_BATCH,
        "no invocation does more than its budget: {} requests (bound {MAX_REQUESTS_PER_BATCH})",
        drained.most_requests()
    );
    assert!(
        drained.requests() <= rows * 13 / 10,
        "reads are batched: {} requests for {rows} rows",
        drained.requests()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fifty_page_run_published_on_completion_projects_in_bounded_stream_batches() {
    let env = spawn_heavy_env(true, "bigrun").await;
    let config = connector("acme-eu", "ACC-1", Publication::OnRunComplete);
    env.seed(&config).await;
    let mut stream = env.stream().await;
    let (pages, per_page) = (50u32, 60usize);
    let service = env.service();
    for page in 1..=pages {
        let body = export_page(
            "EXP-RUN50",
            page,
            pages,
            rows_page("RUN", (page as usize - 1) * per_page, per_page),
        );
        env.service_ingest(
            &service,
            &page_envelope(&config, "EXP-RUN50", page, pages, &body),
        )
        .await;
    }
    let counter = RequestCounter::default();
    let projector = counted_projector(&env, &counter);
    let drained = drain_as_lambda(&mut stream, &projector, &counter, 100).await;
    let rows = pages as usize * per_page;
    let (records, requests, ms) = drained.slowest();
    println!(
        "50-page on_run_complete run ({rows} rows): projection {} ms over {} stream batches, \
         {} DynamoDB requests ({:.2} per row); slowest batch {ms} ms ({records} records, {requests} requests)",
        drained.total_ms,
        drained.batches,
        drained.requests(),
        drained.requests() as f64 / rows as f64,
    );
    let run = env
        .store
        .run("run-acme-eu.EXP-RUN50")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        run.status,
        Some(feedsafe::domain::model::RunStatus::Complete)
    );
    let offers = env
        .projection_store()
        .offers(&config.tenant, "RUN-02999~each~new")
        .await
        .unwrap();
    assert_eq!(offers.len(), 1, "the run's last row is current");
    assert_eq!(
        env.table_items(&env.projection_table()).await.len(),
        rows,
        "one row per item; the held claims of the unpublished run were removed"
    );
    assert!(
        drained.most_requests() <= MAX_REQUESTS_PER_PUBLISHING_BATCH,
        "no invocation does more than its budget: {} requests (bound {MAX_REQUESTS_PER_PUBLISHING_BATCH})",
        drained.most_requests()
    );
}

/// The per-row cost of projecting ordinary deliveries (40 rows: one transaction; 400 rows: a
/// staged delivery of five), for docs/benchmarks.md. Figures are printed, not asserted as times.
#[tokio::test(flavor = "multi_thread")]
async fn deliveries_of_forty_and_four_hundred_rows_project_at_about_one_request_per_row() {
    for rows in [40usize, 400] {
        let env = spawn_heavy_env(true, "smalldelivery").await;
        let acme = acme_eu();
        env.seed(&acme).await;
        let mut stream = env.stream().await;
        let export = format!("EXP-S{rows}");
        let body = export_page(&export, 1, 1, rows_page("SMALL", 0, rows));
        env.service_ingest(&env.service(), &plain_envelope(&acme, &export, &body))
            .await;
        let counter = RequestCounter::default();
        let projector = counted_projector(&env, &counter);
        let drained = drain_as_lambda(&mut stream, &projector, &counter, 100).await;
        let (records, requests, ms) = drained.slowest();
        println!(
            "{rows}-row delivery: projection {} ms ({:.2} ms per row) over {} stream batches, {} DynamoDB \
             requests ({:.2} per row: {:?}); slowest batch {ms} ms ({records} records, {requests} requests)",
            drained.total_ms,
            drained.total_ms as f64 / rows as f64,
            drained.batches,
            drained.requests(),
            drained.requests() as f64 / rows as f64,
            drained.by_operation,
        );
        assert_eq!(env.table_items(&env.projection_table()).await.len(), rows);
        assert!(
            drained.requests() <= rows * 13 / 10 + 10,
            "reads are batched: {} requests for {rows} rows",
            drained.requests()
        );
    }
}
