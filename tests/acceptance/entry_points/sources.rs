//! The cases of the sources: signed webhooks, file drops, the poller's and the sweeper's
//! schedules.

use super::world::World;
use super::{body_json, parse, received_clock, sample, DROPPED_CSV, ITEM, RECEIVED_AT, RUN_ID};
use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use feedsafe::domain::envelope::DeliveryEnvelope;
use feedsafe::domain::ids::{ConnectorId, RunId};
use feedsafe::domain::model::{ReplayState, Run, RunStatus};
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::lambda::apigw::handle_apigw_webhook;
use feedsafe::lambda::schedule::{handle_pull_schedule, handle_sweep_schedule};
use feedsafe::protocols::ports::SystemClock;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// webhook-http: acme-events' signed CloudEvent, verified against the secret in Secrets
/// Manager at the moment it was sent, then ingested.
pub(super) async fn webhook_http(world: &World, file: &str, event: Value) {
    let prefix = format!("{}/webhook-signing/", world.env.table);
    world
        .secrets_client()
        .create_secret()
        .name(format!("{prefix}acme-events"))
        .secret_string(
            std::fs::read_to_string(local_stack::repo_root().join("infra/local/secrets.json"))
                .map(|text| {
                    serde_json::from_str::<Value>(&text).unwrap()["acme-events"].to_string()
                })
                .unwrap(),
        )
        .send()
        .await
        .expect("secret stored");
    let request: ApiGatewayV2httpRequest = parse(file, event);

    // Our clock, days after the signature: refused as stale, nothing enqueued.
    let late = handle_apigw_webhook(
        &world.webhook(&prefix, Arc::new(SystemClock)),
        request.clone(),
    )
    .await;
    let body = body_json(file, &late);
    assert_eq!(late.status_code, 401, "{body}");
    assert_eq!(body["error"]["code"], "stale_timestamp", "{body}");
    assert_eq!(world.env.queue_depth("IngestQueue").await, (0, 0));

    // At the sample's own moment: accepted under the CloudEvent's source and id.
    let response = handle_apigw_webhook(&world.webhook(&prefix, received_clock()), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 202, "{body}");
    let key = "demo/acme-events/ACME-EVT/urn:acme:events/evt-1042";
    assert_eq!(
        body,
        json!({"delivery_key": key, "status": "accepted"}),
        "{body}"
    );
    let messages = world.receive(1).await;
    world.ingest_messages(&messages).await;
    let observations = world.observations_json(key).await;
    assert_eq!(observations.len(), 1, "{observations:?}");
    assert_eq!(observations[0]["item"], ITEM);
    assert_eq!(observations[0]["price"], "820.00");
    assert_eq!(observations[0]["quantity"], 6);
}

/// drops-s3: a CSV file dropped under `drops/acme-files/` becomes one delivery named by its
/// name and content, its body read from that object version.
pub(super) async fn drops_s3(world: &World, file: &str, mut event: Value) {
    let object = &event["Records"][0]["s3"]["object"];
    let key = object["key"].as_str().expect("object key").to_owned();
    assert_eq!(
        object["size"],
        DROPPED_CSV.len(),
        "the sample announces the file this test drops"
    );
    let put = world
        .env
        .clients
        .s3
        .put_object()
        .bucket(&world.env.bucket)
        .key(&key)
        .body(DROPPED_CSV.to_vec().into())
        .send()
        .await
        .expect("file dropped");
    assert_eq!(
        put.e_tag().map(|t| t.trim_matches('"')),
        object["eTag"].as_str(),
        "the sample's eTag is the file's"
    );
    // The bucket and the version id are the engine's, not the sample's.
    let version = put.version_id().expect("a versioned bucket").to_owned();
    let s3 = &mut event["Records"][0]["s3"];
    s3["bucket"]["name"] = json!(world.env.bucket);
    s3["bucket"]["arn"] = json!(format!("arn:aws:s3:::{}", world.env.bucket));
    s3["object"]["versionId"] = json!(version);

    let event: aws_lambda_events::event::s3::S3Event = parse(file, event);
    let keys = feedsafe::lambda::s3::handle_s3_event(&world.drops(), event)
        .await
        .expect("drop enqueued");
    let delivery_key = format!(
        "demo/acme-files/ACC-FILES/offers-2026-11-29.csv@sha256:{}",
        feedsafe::domain::hashing::sha256_hex(DROPPED_CSV)
    );
    assert_eq!(keys, vec![delivery_key.clone()]);
    let messages = world.receive(1).await;
    world.ingest_messages(&messages).await;
    let record = world.env.replay(&delivery_key).await.expect("stored");
    assert_eq!(record.state, ReplayState::Committed);
    assert_eq!(
        record.payload_sha256,
        feedsafe::domain::hashing::sha256_hex(DROPPED_CSV)
    );
    let observations = world.observations_json(&delivery_key).await;
    let rows: Vec<(Value, Value, Value)> = observations
        .iter()
        .map(|o| (o["item"].clone(), o["quantity"].clone(), o["price"].clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (json!(ITEM), json!(6), json!("820.00")),
            (json!("BX-120~each~new"), json!(14), json!("35.50")),
        ]
    );
}

/// poller-schedule: the schedule names acme-eu; its current export's pages are enqueued, and
/// they are the envelopes the ingest sample shows.
pub(super) async fn poller_schedule(world: &World, file: &str, event: Value) {
    let row = |sku: &str, quantity: u64| json!({"sku": sku, "quantity": quantity, "unit": "each", "price": "820.00", "currency": "EUR", "observed_at": "2026-11-29T08:00:00Z"});
    world.supplier.set_export(
        "acme-eu",
        "EXP-8821",
        vec![
            vec![row("AX-440", 2)],
            vec![row("AX-440-R2", 6)],
            vec![row("AX-441", 1)],
        ],
    );
    let report = handle_pull_schedule(&world.pull(Duration::from_secs(30)), &event)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(report.run_id.as_str(), RUN_ID);
    assert_eq!(report.export_id, "EXP-8821");
    assert_eq!(report.page_count, 3);
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    assert!(report.failed.is_empty(), "{:?}", report.failed);

    let messages = world.receive(3).await;
    let envelopes: Vec<DeliveryEnvelope> = messages
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap()).expect("an envelope"))
        .collect();
    let page_2 = envelopes
        .iter()
        .find(|e| e.delivery.id.as_str() == "EXP-8821/2")
        .expect("page 2 enqueued");
    // What the ingest sample's message carries, but for the moment and the body's bytes.
    let ingest_sample: aws_lambda_events::event::sqs::SqsEvent =
        parse("ingest-sqs.json", sample("ingest-sqs.json"));
    let mut shown: DeliveryEnvelope =
        serde_json::from_str(ingest_sample.records[0].body.as_deref().unwrap()).unwrap();
    shown.retrieved_at = page_2.retrieved_at;
    shown.body = page_2.body.clone();
    assert_eq!(
        &shown, page_2,
        "the ingest sample is an envelope the poller sends"
    );

    world.ingest_messages(&messages).await;
    for page in 1..=3 {
        let key = format!("demo/acme-eu/ACC-1/EXP-8821/{page}");
        let record = world.env.replay(&key).await.expect("page stored");
        assert_eq!(record.state, ReplayState::Committed, "{key}");
    }
    let run = world.store.run(RUN_ID).await.unwrap().expect("the run");
    assert_eq!(run.page_count, Some(3));
    // An event that names no connector fails the invocation.
    let refused = handle_pull_schedule(&world.pull(Duration::from_secs(30)), &json!({}))
        .await
        .expect_err("no connector");
    assert!(refused.to_string().contains("connector"), "{refused}");
}

/// sweeper-schedule: a run past its deadline with page 2 of 3 committed is settled INCOMPLETE,
/// naming the missing pages.
pub(super) async fn sweeper_schedule(world: &World, file: &str, event: Value) {
    // An EventBridge schedule's event; the function ignores its payload.
    assert_eq!(event["detail-type"], "Scheduled Event", "{file}");
    assert_eq!(event["source"], "aws.events", "{file}");
    let acme = world.connector("acme-eu");
    // The poller started the run on 2026-11-29 with its 900-second deadline.
    let started = Timestamp::from_unix_seconds(RECEIVED_AT - 5).unwrap();
    world
        .store
        .start_run(&Run {
            run_id: RunId::parse(RUN_ID).unwrap(),
            tenant: acme.tenant.clone(),
            connector: ConnectorId::parse("acme-eu").unwrap(),
            status: None,
            credential_ref: acme.pull.as_ref().map(|p| p.credential_ref.clone()),
            started_at: Some(started),
            deadline: Some(started.unix_seconds() + 900),
            page_count: Some(3),
            pages_seen: 0,
            missing_pages: vec![],
            missing_count: 0,
            completed_at: None,
            updated_at: started,
            publication: None,
        })
        .await
        .expect("run started");
    world.ingest_sample_delivery().await;

    let report = handle_sweep_schedule(&world.store, &world.corrections(), Timestamp::now())
        .await
        .expect("sweep");
    assert_eq!(report.runs.len(), 1, "{:?}", report.runs);
    assert_eq!(report.corrections, 0);
    let run = world.store.run(RUN_ID).await.unwrap().expect("the run");
    assert_eq!(run.status, Some(RunStatus::Incomplete), "{run:?}");
    assert_eq!(run.missing_pages, vec![1, 3]);
    assert_eq!(run.missing_count, 2);
    // A second sweep finds nothing more to do.
    let again = handle_sweep_schedule(&world.store, &world.corrections(), Timestamp::now())
        .await
        .expect("sweep");
    assert!(again.runs.is_empty(), "{:?}", again.runs);
}
