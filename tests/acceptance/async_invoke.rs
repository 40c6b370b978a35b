//! The asynchronously invoked functions in the local stack (drops from S3 notifications, the
//! scheduled poller): a failed invocation is retried `EventInvokeConfig.MaximumRetryAttempts`
//! times, then parked in the on-failure queue (`AsyncFailureQueue`) with Lambda's invocation
//! record, never retried forever and never dropped.

use acceptance::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The first record in `AsyncFailureQueue`, waiting up to `limit`.
async fn parked(env: &TestEnv, limit: Duration) -> Option<Value> {
    let queue = env
        .resources
        .queue("AsyncFailureQueue")
        .unwrap()
        .url
        .clone();
    let start = Instant::now();
    while start.elapsed() < limit {
        let out = env
            .clients
            .sqs
            .receive_message()
            .queue_url(&queue)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        if let Some(message) = out.messages.unwrap_or_default().into_iter().next() {
            return Some(serde_json::from_str(message.body().unwrap_or_default()).unwrap());
        }
    }
    None
}

/// Lambda's invocation record for `function` after its last attempt: the template's
/// MaximumRetryAttempts is 2, so three attempts in all.
fn assert_parked_by(record: &Value, function: &str) {
    let context = &record["requestContext"];
    assert_eq!(context["condition"], "RetriesExhausted", "{record}");
    assert_eq!(context["approximateInvokeCount"], 3, "{record}");
    let arn = context["functionArn"].as_str().unwrap_or_default();
    assert!(arn.ends_with(&format!(":function:{function}")), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_the_function_cannot_enqueue_is_parked_after_its_retries() {
    let env = spawn_env(false).await;
    let stack = spawn_stack_with(&env, |o| o.visibility_override = Some(1)).await;
    // The drop function's queue is gone: every invocation fails.
    let ingest = env.resources.queue("IngestQueue").unwrap().url.clone();
    env.clients
        .sqs
        .delete_queue()
        .queue_url(&ingest)
        .send()
        .await
        .unwrap();
    let key = "drops/acme-files/broken.csv";
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(key)
        .body(
            b"sku,quantity,unit,price,currency,observed_at\n"
                .to_vec()
                .into(),
        )
        .send()
        .await
        .unwrap();
    let record = parked(&env, Duration::from_secs(45))
        .await
        .expect("the failed drop reached the on-failure queue");
    assert_parked_by(&record, "DropsFunction");
    assert_eq!(
        record["requestPayload"]["Records"][0]["s3"]["object"]["key"], key,
        "the parked event is the S3 event of the drop: {record}"
    );
    assert!(
        !record["responsePayload"]["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{record}"
    );
    // Parked once, and the notification is settled: no second record for it.
    assert!(parked(&env, Duration::from_secs(4)).await.is_none());
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_pull_that_fails_every_attempt_is_parked_with_its_schedule_input() {
    let env = spawn_env(false).await;
    let stack = spawn_stack_with(&env, |o| o.pull_every = Some(Duration::from_secs(1))).await;
    stack.supplier.set_export(
        "acme-eu",
        "EXP-ASYNC",
        vec![vec![offer("AS-1", 1, "1.00", "2026-11-29T08:00:00Z")]],
    );
    // The export's first page never answers: the poller's invocation fails.
    stack.supplier.fail_page("acme-eu", 1, u32::MAX);
    let record = parked(&env, Duration::from_secs(60))
        .await
        .expect("the failed schedule reached the on-failure queue");
    stack.stop().await;
    assert_parked_by(&record, "PollerFunction");
    assert_eq!(
        record["requestPayload"],
        serde_json::json!({"connector": "acme-eu"})
    );
}
