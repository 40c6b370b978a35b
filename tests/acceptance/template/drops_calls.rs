//! The drops role against what the drops function really calls, as `ingest_calls` does for
//! ingest: the drop service runs through a request counter on the local engines (a file it
//! reads and hashes, a file too large to read), and every operation it sent must be allowed by
//! `DropsRole` (with the role policies attached to it) in template.yaml.

use super::*;
use acceptance::*;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::sqs::SqsDeliveryQueue;
use feedsafe::intake::drops::{DropService, DroppedObject};
use feedsafe::protocols::ports::SystemClock;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The IAM actions that authorise one SDK operation (`Service.Operation`, as counted).
fn iam_actions(operation: &str) -> Vec<String> {
    let (service, name) = operation.split_once('.').expect("Service.Operation");
    match (service, name) {
        // The drop service reads the object version it was told about.
        ("S3", "GetObject") => vec!["s3:GetObject".into(), "s3:GetObjectVersion".into()],
        ("S3", "HeadObject") => vec!["s3:GetObject".into()],
        ("S3", name) => vec![format!("s3:{name}")],
        ("DynamoDB", name) => vec![format!("dynamodb:{name}")],
        ("SQS", name) => vec![format!("sqs:{name}")],
        (other, _) => panic!("the drop service called {other}, which this check does not map"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_call_the_drops_function_makes_is_allowed_by_its_role() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let counter = RequestCounter::default();
    let clients = intercepted(&env.clients, counter.clone());
    let sqs = aws_sdk_sqs::Client::from_conf(
        env.clients
            .sqs
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build(),
    );
    let queue = &env
        .resources
        .queue("IngestQueue")
        .expect("ingest queue")
        .url;
    let service = DropService::new(
        env.store.clone(),
        Arc::new(SqsDeliveryQueue::new(sqs, queue)),
        Arc::new(S3ArtifactStore::new(clients.s3.clone(), &env.bucket)),
        Arc::new(SystemClock),
    );
    let key = "drops/acme-eu/iam.json";
    let body = export_page("EXP-IAM-DROP", 1, 1, vec![]);
    let version = env
        .clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(key)
        .body(body.clone().into())
        .send()
        .await
        .expect("file dropped")
        .version_id
        .expect("a versioned bucket");
    let dropped = |size: u64| DroppedObject {
        bucket: env.bucket.clone(),
        key: key.into(),
        version_id: Some(version.clone()),
        size,
    };
    let mut called = BTreeSet::new();
    for (what, object) in [
        ("a file read and hashed", dropped(body.len() as u64)),
        ("a file too large to read", dropped(acme.max_body_bytes + 1)),
    ] {
        service
            .handle(&object)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        called.extend(counter.take().into_keys());
    }
    assert!(called.contains("S3.GetObject"), "{called:?}");

    assert_role_allows("DropsFunction", &called, iam_actions);
}
