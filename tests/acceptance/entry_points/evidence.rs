//! The cases of the evidence path: ingest from SQS, the projector on the stream, the query and
//! ops APIs.

use super::world::World;
use super::{
    body_json, parse, received_clock, sample_observation, DELIVERY_KEY, ITEM, OBSERVATION_ID,
    RUN_ID,
};
use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use feedsafe::domain::model::ReplayState;
use feedsafe::lambda::apigw::handle_apigw_ops;
use feedsafe::lambda::apigw::handle_apigw_read;
use feedsafe::lambda::sqs::handle_sqs_batch;
use feedsafe::lambda::stream::handle_stream_batch;
use feedsafe::protocols::projection::ProjectionStore;
use feedsafe::protocols::query::ObservationBody;
use serde_json::{json, Value};

/// ingest-sqs: a poller's envelope for page 2 of export EXP-8821 is stored once, committed.
pub(super) async fn ingest_sqs(world: &World, file: &str, event: Value) {
    let event: aws_lambda_events::event::sqs::SqsEvent = parse(file, event);
    let service = world.ingest(received_clock());
    let response = handle_sqs_batch(&service, event.clone())
        .await
        .expect("batch handled");
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let record = world.env.replay(DELIVERY_KEY).await.expect("replay record");
    assert_eq!(record.state, ReplayState::Committed);
    assert_eq!(record.attempts, 1);
    assert!(
        world.env.quarantine().await.is_empty(),
        "nothing refused or quarantined"
    );
    let observations = world.observations_json(DELIVERY_KEY).await;
    assert_eq!(observations.len(), 1, "{observations:?}");
    sample_observation(&observations[0]);
    // The raw artifact is the payload the envelope carries.
    let artifact = world.env.read_object(&record.artifact_key).await;
    assert_eq!(
        feedsafe::domain::hashing::sha256_hex(&artifact),
        record.payload_sha256
    );
    // The same message again (SQS delivers at least once) is a replay: nothing new is stored.
    let again = handle_sqs_batch(&service, event).await.expect("handled");
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(world.env.replay(DELIVERY_KEY).await.unwrap().attempts, 2);
    assert_eq!(world.env.observations().await.len(), 1);
}

/// projector-stream: the stream record of the ingest sample's observation projects it.
pub(super) async fn projector_stream(world: &World, file: &str, event: Value) {
    world.ingest_sample_delivery().await;
    let event: aws_lambda_events::event::dynamodb::Event = parse(file, event);
    // The sample's image is the item ingest wrote, attribute for attribute.
    let new_image = event.records[0].change.new_image.clone();
    let stored = world
        .env
        .items()
        .await
        .into_iter()
        .find(|item| {
            item.get("pk")
                == Some(&aws_sdk_dynamodb::types::AttributeValue::S(format!(
                    "OBS#{OBSERVATION_ID}"
                )))
        })
        .expect("the sample's observation is stored");
    let stored = serde_dynamo::Item::from(stored);
    let image: serde_json::Map<String, Value> =
        serde_json::from_value(serde_json::to_value(&new_image).unwrap()).unwrap();
    let written: serde_json::Map<String, Value> =
        serde_json::from_value(serde_json::to_value(&stored).unwrap()).unwrap();
    let differing: Vec<String> = image
        .keys()
        .chain(written.keys())
        .filter(|k| image.get(*k) != written.get(*k))
        .map(|k| {
            format!(
                "{k}: sample {:?}, stored {:?}",
                image.get(k),
                written.get(k)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "the sample's NewImage differs from the stored observation:\n{}",
        differing.join("\n")
    );

    let projector = world.projector();
    let response = handle_stream_batch(&projector, event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let rows = world
        .projection()
        .offers(
            &feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
            ITEM,
        )
        .await
        .expect("projection readable");
    assert_eq!(rows.len(), 1, "one current offer: {rows:?}");
    sample_observation(&serde_json::to_value(ObservationBody::from(&rows[0].observation)).unwrap());
}

/// query-http: a reader's `GET /v1/items/{item}/offers?max_age_seconds=3600`.
pub(super) async fn query_http(world: &World, file: &str, event: Value) {
    let mut stream = world.env.stream().await;
    world.ingest_sample_delivery().await;
    world.env.drain(&mut stream, &world.projector()).await;
    let request: ApiGatewayV2httpRequest = parse(file, event);
    let response = handle_apigw_read(&world.query(), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 200, "{body}");
    assert_eq!(body["item"], ITEM);
    let offers = body["offers"].as_array().expect("offers");
    assert_eq!(offers.len(), 1, "{body}");
    sample_observation(&offers[0]);
    // Observed on 2026-11-29, read later: more than an hour old, and the read says what would
    // refresh it (it refreshes nothing itself).
    assert_eq!(offers[0]["freshness"]["stale"], true, "{body}");
    let gaps = body["freshness_gaps"].as_array().expect("freshness gaps");
    assert_eq!(gaps.len(), 1, "{body}");
    assert_eq!(gaps[0]["connector"], "acme-eu");
    assert_eq!(gaps[0]["max_age_seconds"], 3600);
    assert_eq!(
        world.env.queue_depth("IngestQueue").await,
        (0, 0),
        "reads never trigger ingestion"
    );
}

/// ops-http: an operator's `GET /v1/deliveries/{delivery_key+}`.
pub(super) async fn ops_http(world: &World, file: &str, event: Value) {
    world.ingest_sample_delivery().await;
    let request: ApiGatewayV2httpRequest = parse(file, event);
    let response = handle_apigw_ops(&world.ops(), request).await;
    let body = body_json(file, &response);
    assert_eq!(response.status_code, 200, "{body}");
    assert_eq!(body["delivery_key"], DELIVERY_KEY, "{body}");
    assert_eq!(body["state"], "COMMITTED", "{body}");
    assert_eq!(body["attempts"], 1, "{body}");
    assert_eq!(
        body["run"],
        json!({"run_id": RUN_ID, "page": 2, "page_count": 3}),
        "{body}"
    );
    assert_eq!(body["quarantine"], json!([]), "{body}");
    let record = world.env.replay(DELIVERY_KEY).await.unwrap();
    assert_eq!(
        body["artifact"]["key"],
        record.artifact_key.as_str(),
        "{body}"
    );
    assert_eq!(
        body["artifact"]["sha256"],
        record.payload_sha256.as_str(),
        "{body}"
    );
}
