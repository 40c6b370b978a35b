//! Pull runs against the fake supplier, the local SQS source's redelivery, and file drops.

use super::{call, history, stack, OPERATOR, READER};
use acceptance::*;
use feedsafe::intake::drops::DroppedObject;
use local_stack::sample_connectors;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_pull_run_after_a_lost_response_duplicates_nothing_and_a_failing_page_leaves_the_run_incomplete(
) {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let pages = vec![
        vec![
            json!({"sku": "PL-1", "quantity": 1, "unit": "each", "price": "1.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
        vec![
            json!({"sku": "PL-2", "quantity": 2, "unit": "each", "price": "2.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
        vec![
            json!({"sku": "PL-3", "quantity": 3, "unit": "each", "price": "3.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"}),
        ],
    ];
    stack.supplier.set_export("acme-eu", "EXP-5000", pages);
    // The response for page 2 is lost (more often than the poller retries within one run).
    stack.supplier.lose_response("acme-eu", 2, 3);
    let runs = format!("{}/v1/connectors/acme-eu/runs", stack.base_url());
    let operator = vec![("authorization".to_owned(), format!("Bearer {OPERATOR}"))];
    // 202 at once: the run is named from page 1 and the pull runs asynchronously.
    let (status, first) = call("POST", runs.clone(), operator.clone(), vec![]).await;
    assert_eq!(status, 202, "{first}");
    assert_eq!(first["status"], "started", "{first}");
    assert_eq!(first["export_id"], "EXP-5000");
    assert_eq!(first["page_count"], 3);
    assert!(
        first.get("enqueued").is_none(),
        "not run inside the request: {first}"
    );
    let committed = |n: u32| {
        let store = env.store.clone();
        async move {
            store
                .replay_record(&format!("demo/acme-eu/ACC-1/EXP-5000/{n}"))
                .await
                .unwrap()
                .is_some()
        }
    };
    wait_until("the first pull to give up on page 2", || async {
        stack.supplier.requests("acme-eu", 2) >= 3 && committed(1).await && committed(3).await
    })
    .await;
    assert!(!committed(2).await, "page 2 lost in the first run");
    // The run is repeated.
    let (status, second) = call("POST", runs.clone(), operator.clone(), vec![]).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(
        second["run_id"], first["run_id"],
        "the same export resumes the same run"
    );
    wait_until("all three pages", || async {
        committed(1).await && committed(2).await && committed(3).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for sku in ["PL-1", "PL-2", "PL-3"] {
        assert_eq!(
            history(&stack, sku).await.len(),
            1,
            "{sku}: no duplicate observation"
        );
    }
    let run = env
        .store
        .run(first["run_id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(env
        .store
        .run_pages(first["run_id"].as_str().unwrap())
        .await
        .unwrap()
        .all_committed(run.page_count));

    // A page that keeps failing leaves its run INCOMPLETE with that page named.
    stack
        .supplier
        .set_export("acme-eu", "EXP-5001", vec![vec![], vec![], vec![]]);
    stack.supplier.fail_page("acme-eu", 3, u32::MAX);
    let (status, report) = call("POST", runs, operator, vec![]).await;
    assert_eq!(status, 202);
    let run_id = report["run_id"].as_str().unwrap().to_owned();
    wait_until("pages 1 and 2 of EXP-5001", || async {
        env.store.run_pages(&run_id).await.unwrap().pages.len() == 2
    })
    .await;
    let swept = env
        .store
        .sweep_runs(feedsafe::domain::timestamp::Timestamp::now().plus_seconds(3600))
        .await
        .unwrap();
    assert!(swept.iter().any(|r| r.run_id.as_str() == run_id));
    let run = env.store.run(&run_id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        Some(feedsafe::domain::model::RunStatus::Incomplete)
    );
    assert_eq!(run.missing_pages, vec![3]);
    // Reads never start ingestion; only the operator may.
    let (status, _) = call(
        "POST",
        format!("{}/v1/connectors/acme-eu/runs", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    assert_eq!(status, 403);
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_sqs_source_redelivers_only_failed_messages_and_dead_letters_after_max_receives()
{
    let env = spawn_env(true).await;
    // 3 s, not the usual 1 s: a batch slower than the visibility timeout (a loaded machine)
    // would see its good message again and count it twice, which the timeout of six function
    // timeouts in AWS rules out.
    let stack = spawn_stack_with(&env, |o| o.visibility_override = Some(3)).await;
    let acme = sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == "acme-eu")
        .unwrap();
    let good = page_envelope(
        &acme,
        "EXP-G",
        1,
        1,
        &export_page(
            "EXP-G",
            1,
            1,
            vec![offer("GOOD-1", 1, "1.00", "2026-11-29T08:00:00Z")],
        ),
    );
    // A claim check pointing at an object that does not exist: a transient failure every time.
    let mut bad: feedsafe::domain::envelope::DeliveryEnvelope =
        serde_json::from_slice(&plain_envelope(&acme, "EXP-B/1", b"{}")).unwrap();
    bad.body = feedsafe::domain::envelope::BodyRef::S3 {
        bucket: env.bucket.clone(),
        key: "claims/missing".into(),
        version_id: None,
        size: 10,
    };
    env.send("IngestQueue", &good).await;
    env.send("IngestQueue", bad.to_json().as_bytes()).await;
    wait_until("the failing message to reach the DLQ", || async {
        env.queue_depth("IngestDLQ").await.0 == 1
    })
    .await;
    let record = env
        .replay("demo/acme-eu/ACC-1/EXP-G/1")
        .await
        .expect("the good message committed");
    assert_eq!(
        record.attempts, 1,
        "the acknowledged message was not redelivered"
    );
    let dlq = env.resources.queue("IngestDLQ").unwrap().url.clone();
    let dead = env
        .clients
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let message = dead.messages.unwrap_or_default().remove(0);
    assert!(message.body().unwrap().contains("EXP-B/1"));
    let receives: u32 = message
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        receives >= 5,
        "received {receives} times before dead-lettering (maxReceiveCount 5)"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_notified_twice_is_one_delivery_and_a_changed_file_is_another() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let csv = b"sku,quantity,unit,price,currency,observed_at\nFD-1,5,each,3.20,EUR,2026-11-29T08:00:00Z\n".to_vec();
    let put = |body: Vec<u8>| {
        let s3 = env.clients.s3.clone();
        let bucket = env.bucket.clone();
        async move {
            s3.put_object()
                .bucket(bucket)
                .key("drops/acme-files/prices.csv")
                .body(body.into())
                .send()
                .await
                .unwrap()
                .version_id
                .unwrap()
        }
    };
    let v1 = put(csv.clone()).await;
    // A drop is named by its file name and content (docs/envelope.md).
    let key_of = |body: &[u8]| {
        format!(
            "demo/acme-files/ACC-FILES/prices.csv@sha256:{}",
            feedsafe::domain::hashing::sha256_hex(body)
        )
    };
    let key_v1 = key_of(&csv);
    wait_until("the dropped file's delivery", || async {
        env.replay(&key_v1).await.is_some()
    })
    .await;
    // The same notification again (S3 delivers at least once): same identity, a replay.
    let object = DroppedObject {
        bucket: env.bucket.clone(),
        key: "drops/acme-files/prices.csv".into(),
        version_id: Some(v1.clone()),
        size: csv.len() as u64,
    };
    let again = stack.services.drops.handle(&object).await.unwrap();
    assert_eq!(again.as_string(), key_v1);
    wait_until("the second notification to replay", || async {
        env.replay(&key_v1).await.is_some_and(|r| r.attempts == 2)
    })
    .await;
    assert_eq!(history(&stack, "FD-1").await.len(), 1, "one delivery");

    // Changed content under the same name is a new delivery (the same bytes again would be a
    // replay: intake::drops).
    let changed = b"sku,quantity,unit,price,currency,observed_at\nFD-1,6,each,3.20,EUR,2026-11-29T08:05:00Z\n".to_vec();
    let v2 = put(changed.clone()).await;
    assert_ne!(v1, v2);
    let key_v2 = key_of(&changed);
    wait_until("the new version's delivery", || async {
        env.replay(&key_v2).await.is_some()
    })
    .await;
    wait_until("two observations in history", || async {
        history(&stack, "FD-1").await.len() == 2
    })
    .await;

    // JSON files work too (an export page dropped for the pull connector).
    let page = export_page(
        "EXP-FILE",
        1,
        1,
        vec![offer("FD-2", 1, "1.00", "2026-11-29T08:00:00Z")],
    );
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key("drops/acme-eu/export-1.json")
        .body(page.into())
        .send()
        .await
        .unwrap();
    wait_until("the JSON drop", || async {
        history(&stack, "FD-2").await.len() == 1
    })
    .await;
    stack.stop().await;
}
