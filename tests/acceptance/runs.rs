//! Runs over time and at scale (docs/adr/0022-runs-as-page-records.md): a completed run stays
//! closed when its export is re-announced, the sweeper pages through every open run, a run's
//! bookkeeping never grows with its page count, and the pages of one run share no item in their
//! transactions.

use acceptance::*;
use feedsafe::aws::dynamo::{DynamoEvidenceStore, Item};
use feedsafe::domain::ids::RunId;
use feedsafe::domain::model::{Run, RunStatus};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use feedsafe::aws::item_size::item_size;

async fn raw_run_item(env: &TestEnv, run_id: &str) -> Item {
    env.clients
        .dynamodb
        .get_item()
        .table_name(&env.table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("RUN#{run_id}")),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("RUN".into()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("get run item")
        .item
        .expect("run item exists")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_run_re_announced_a_hundred_times_stays_closed_and_unchanged() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let row = |sku: &str, q: u64| json!({"sku": sku, "quantity": q, "unit": "each", "price": "1.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"});
    stack.supplier.set_export(
        "acme-eu",
        "EXP-6100",
        vec![vec![row("RA-1", 1)], vec![row("RA-2", 2)]],
    );
    let connector = feedsafe::domain::ids::ConnectorId::parse("acme-eu").unwrap();
    let report = stack.services.pull.run_connector(&connector).await.unwrap();
    let run_id = report.run_id.to_string();
    wait_until("the run completes", || async {
        env.store
            .run(&run_id)
            .await
            .unwrap()
            .is_some_and(|r| r.status == Some(RunStatus::Complete))
    })
    .await;
    wait_until("both pages are projected", || async {
        env.table_items(&env.projection_table()).await.len() == 2
    })
    .await;
    // Let the projector settle whatever else the completion caused.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run_before = raw_run_item(&env, &run_id).await;
    let projection_before = env.table_items(&env.projection_table()).await;
    assert_eq!(projection_before.len(), 2, "both pages are projected");
    assert!(
        !run_before.contains_key("gsi2pk"),
        "a complete run is not in the open-runs index"
    );

    for _ in 0..100 {
        let again = stack.services.pull.run_connector(&connector).await.unwrap();
        assert_eq!(
            again.run_id.to_string(),
            run_id,
            "the same export, the same run"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let run_after = raw_run_item(&env, &run_id).await;
    assert_eq!(
        run_after.get("status"),
        run_before.get("status"),
        "status unchanged"
    );
    assert!(
        !run_after.contains_key("gsi2pk"),
        "re-announcing did not reopen the run in the open-runs index"
    );
    assert_eq!(
        item_size(&run_after),
        item_size(&run_before),
        "the run item did not grow: before {run_before:?} after {run_after:?}"
    );
    assert_eq!(
        env.table_items(&env.projection_table()).await,
        projection_before,
        "re-announcing caused no projector write (rows and projected_at unchanged)"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sweeper_closes_every_open_run_even_past_one_megabyte_of_index() {
    let env = spawn_heavy_env(true, "sweeptest").await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let runs = 2_500usize;
    let started = Timestamp::now();
    // Long credential references make each open-run index entry ~500 bytes: 2,500 of them are
    // well over the 1 MB a single Query returns.
    let padding = "x".repeat(450);
    let next = Arc::new(AtomicU32::new(0));
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (store, next, acme, padding) = (
            env.store.clone(),
            next.clone(),
            acme.clone(),
            padding.clone(),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                if i >= runs {
                    return;
                }
                let run = Run {
                    run_id: RunId::parse(&format!("run-sweep-{i:05}")).unwrap(),
                    tenant: acme.tenant.clone(),
                    connector: acme.connector.clone(),
                    status: None,
                    credential_ref: Some(format!("secret:acme-eu/{padding}")),
                    started_at: Some(started),
                    deadline: Some(started.unix_seconds() - 60),
                    page_count: Some(2),
                    pages_seen: 0,
                    missing_pages: vec![],
                    missing_count: 0,
                    completed_at: None,
                    updated_at: started,
                    publication: None,
                };
                store.start_run(&run).await.unwrap();
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let sample = raw_run_item(&env, "run-sweep-00000").await;
    assert!(
        runs * item_size(&sample) > 1024 * 1024,
        "the open runs span more than 1 MB of index ({} bytes each)",
        item_size(&sample)
    );

    let swept = env.store.sweep_runs(Timestamp::now()).await.unwrap();
    assert_eq!(
        swept.len(),
        runs,
        "every open run past its deadline was settled"
    );
    let mut open = 0;
    for i in 0..runs {
        let run = env
            .store
            .run(&format!("run-sweep-{i:05}"))
            .await
            .unwrap()
            .unwrap();
        if run.status != Some(RunStatus::Incomplete) {
            open += 1;
        }
        assert_eq!(run.missing_pages, vec![1, 2]);
    }
    assert_eq!(open, 0, "no run was left open");
}

/// The pages of one run, committed by many workers at once, each in its own transaction.
#[tokio::test(flavor = "multi_thread")]
async fn sixteen_workers_committing_two_hundred_pages_of_one_run_share_no_transaction_item() {
    let env = spawn_heavy_env(true, "pagestest").await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let log = TransactionLog::default();
    let store = Arc::new(DynamoEvidenceStore::new(
        log.client(&env.clients.dynamodb),
        &env.table,
    ));
    let service = IngestService::new(
        store.clone(),
        env.artifacts.clone(),
        store,
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let pages = 200u32;
    let next = Arc::new(AtomicU32::new(1));
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (service, next, acme) = (service.clone(), next.clone(), acme.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let page = next.fetch_add(1, Ordering::SeqCst);
                if page > pages {
                    return;
                }
                let body = export_page(
                    "EXP-R200",
                    page,
                    pages,
                    vec![offer(
                        &format!("R200-{page:03}"),
                        1,
                        "1.00",
                        "2026-11-29T08:00:00Z",
                    )],
                );
                let envelope = page_envelope(&acme, "EXP-R200", page, pages, &body);
                let outcome = service.ingest_message(&envelope).await.unwrap();
                assert!(outcome.result().is_some(), "{outcome:?}");
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }

    let (transactions, attempts, errors) = log.snapshot();
    assert_eq!(
        transactions.len(),
        pages as usize,
        "one transaction per page"
    );
    assert_eq!(attempts, pages as usize, "no transaction was retried");
    assert!(errors.is_empty(), "no transaction failed: {errors:?}");
    // Structurally: which page's transaction names each item.
    let mut pages_of_key: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for keys in &transactions {
        let page = keys
            .iter()
            .find_map(|k| k.strip_prefix("DLV#acme/acme-eu/ACC-1/EXP-R200/"))
            .and_then(|rest| rest.strip_suffix("|REPLAY"))
            .expect("every transaction carries its delivery's replay record")
            .to_owned();
        for key in keys {
            pages_of_key
                .entry(key.clone())
                .or_default()
                .insert(page.clone());
        }
    }
    let shared: Vec<_> = pages_of_key
        .iter()
        .filter(|(_, pages)| pages.len() > 1)
        .map(|(key, pages)| format!("{key} in {} pages", pages.len()))
        .collect();
    assert!(
        shared.is_empty(),
        "no item is written by the transactions of two pages: {shared:?}"
    );

    // The run's own item does not grow with its pages, and the run completes.
    let projector = env.projector();
    let mut stream = env.stream().await;
    env.drain(&mut stream, &projector).await;
    let run = env
        .store
        .run("run-acme-eu.EXP-R200")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status, Some(RunStatus::Complete));
    assert_eq!(
        env.store
            .run_pages("run-acme-eu.EXP-R200")
            .await
            .unwrap()
            .pages
            .len(),
        pages as usize
    );
    let size = item_size(&raw_run_item(&env, "run-acme-eu.EXP-R200").await);
    assert!(
        size < 2_000,
        "the run item holds no per-page data ({size} bytes after {pages} pages)"
    );
}

/// The poller accepts exports of up to `MAX_EXPORT_PAGES` (10,000) pages; the run's own
/// item stays far below DynamoDB's 400 KB item limit at that size, complete or incomplete.
/// Writes only the run bookkeeping: the page records (as each page's final transaction would),
/// the projector's page counting (in stream batches of 100) and the sweeper.
#[tokio::test(flavor = "multi_thread")]
async fn a_ten_thousand_page_run_keeps_its_run_item_small() {
    let env = spawn_heavy_env(true, "tenkpages").await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let pages = feedsafe::intake::poller::MAX_EXPORT_PAGES;
    let projector = env.projector();
    let started = Timestamp::now();
    let at = Instant::now();
    for (run, committed) in [
        ("run-10k-complete", pages),
        ("run-10k-short", pages - 1_500),
    ] {
        env.store
            .start_run(&Run {
                run_id: RunId::parse(run).unwrap(),
                tenant: acme.tenant.clone(),
                connector: acme.connector.clone(),
                status: None,
                credential_ref: Some("secret:acme-eu/export-token".into()),
                started_at: Some(started),
                deadline: Some(started.unix_seconds() - 1),
                page_count: Some(pages),
                pages_seen: 0,
                missing_pages: vec![],
                missing_count: 0,
                completed_at: None,
                updated_at: started,
                publication: None,
            })
            .await
            .unwrap();
        let records: Vec<feedsafe::domain::model::RunPageRecord> = (1..=committed)
            .map(|page| feedsafe::domain::model::RunPageRecord {
                run_id: RunId::parse(run).unwrap(),
                tenant: acme.tenant.clone(),
                connector: acme.connector.clone(),
                page,
                page_count: Some(pages),
                delivery_key: format!("acme/acme-eu/ACC-1/EXP-10K/{page}"),
                epoch: 0,
                observation_count: 1,
                committed_at: started,
            })
            .collect();
        let items = records
            .iter()
            .map(|p| feedsafe::aws::dynamo::run_page_item(p).unwrap())
            .collect();
        env.store.batch_put(items, "seed run pages").await.unwrap();
        // The page records reach the projector as stream records, 100 per invocation.
        for batch in records.chunks(100) {
            let changes: Vec<_> = batch
                .iter()
                .map(|p| {
                    feedsafe::protocols::projection::EvidenceChange::RunPage(Box::new(p.clone()))
                })
                .collect();
            projector.apply_batch(&changes).await.unwrap();
        }
    }
    let complete = env.store.run("run-10k-complete").await.unwrap().unwrap();
    assert_eq!(complete.status, Some(RunStatus::Complete));
    let swept = env.store.sweep_runs(Timestamp::now()).await.unwrap();
    assert_eq!(swept.len(), 1, "the short run is settled");
    let short = env.store.run("run-10k-short").await.unwrap().unwrap();
    assert_eq!(short.status, Some(RunStatus::Incomplete));
    assert_eq!(short.missing_count, 1_500);
    assert_eq!(
        short.missing_pages.len(),
        feedsafe::domain::model::MAX_LISTED_MISSING_PAGES,
        "the item lists the first 1,000 missing pages; the ops route lists them all"
    );
    let complete_size = item_size(&raw_run_item(&env, "run-10k-complete").await);
    let short_size = item_size(&raw_run_item(&env, "run-10k-short").await);
    println!(
        "10,000-page runs: bookkeeping written and counted in {:?}; run item {complete_size} bytes \
         complete, {short_size} bytes incomplete with 1,500 pages missing",
        at.elapsed()
    );
    assert!(complete_size < 1_000, "{complete_size} bytes");
    assert!(short_size < 8_000, "{short_size} bytes: far below 400 KB");
}
