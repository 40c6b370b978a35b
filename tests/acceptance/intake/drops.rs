//! File drops are named by file name and content: a supplier's retried upload of the same bytes
//! (a new S3 version, its first response lost) is a counted replay of the stored delivery; a
//! changed file under the same name is a new delivery, projected by the normal rules.

use super::{call, history, stack, READER};
use acceptance::*;
use feedsafe::domain::hashing::sha256_hex;
use local_stack::Stack;
use serde_json::Value;

const FILE: &str = "drops/acme-files/retried.csv";

fn csv(quantity: u32, price: &str, observed_at: &str) -> Vec<u8> {
    format!(
        "sku,quantity,unit,price,currency,observed_at\nRU-1,{quantity},each,{price},EUR,{observed_at}\n"
    )
    .into_bytes()
}

/// The delivery key of `retried.csv` with these bytes.
fn key(body: &[u8]) -> String {
    format!(
        "demo/acme-files/ACC-FILES/retried.csv@sha256:{}",
        sha256_hex(body)
    )
}

/// Uploads `body` under the drop key; returns the new S3 version id.
async fn upload(env: &TestEnv, body: &[u8]) -> String {
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(FILE)
        .body(body.to_vec().into())
        .send()
        .await
        .expect("the supplier's upload")
        .version_id
        .expect("a versioned bucket")
}

async fn attempts(env: &TestEnv, key: &str) -> u32 {
    env.replay(key).await.map_or(0, |r| r.attempts)
}

async fn current_offer(stack: &Stack) -> Value {
    let (_, body) = call(
        "GET",
        format!("{}/v1/items/RU-1/offers", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    body["offers"][0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_file_uploaded_twice_is_one_delivery_and_changed_bytes_are_a_new_current_one() {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let first = csv(5, "3.20", "2026-11-29T08:00:00Z");
    // The supplier's first PUT succeeds but its response is lost, so it uploads again.
    let v1 = upload(&env, &first).await;
    let v2 = upload(&env, &first).await;
    assert_ne!(v1, v2, "every PUT makes a new S3 version");
    wait_until("both uploads handled", || async {
        attempts(&env, &key(&first)).await >= 2 || history(&stack, "RU-1").await.len() >= 2
    })
    .await;
    let observations = history(&stack, "RU-1").await;
    assert_eq!(
        observations.len(),
        1,
        "the same bytes uploaded twice are one observation: {observations:?}"
    );
    assert_eq!(observations[0]["delivery_key"], key(&first));
    // S3 event notifications are at least once (locally too: a notification not deleted within
    // its visibility timeout comes back), so an upload may count more than one attempt; each
    // one is a replay of the one stored delivery.
    assert!(
        attempts(&env, &key(&first)).await >= 2,
        "the retried upload is counted on the stored delivery"
    );

    // A changed file under the same name is a new delivery, and (newer) the current offer.
    let second = csv(7, "3.10", "2026-11-29T09:00:00Z");
    upload(&env, &second).await;
    wait_until("the changed file's delivery is current", || async {
        current_offer(&stack).await["delivery_key"] == key(&second)
    })
    .await;
    let observations = history(&stack, "RU-1").await;
    assert_eq!(observations.len(), 2, "{observations:?}");
    let offer = current_offer(&stack).await;
    assert_eq!(
        (offer["quantity"].clone(), offer["price"].clone()),
        (7.into(), "3.10".into())
    );
    assert!(attempts(&env, &key(&second)).await >= 1);
    assert!(attempts(&env, &key(&first)).await >= 2);
    stack.stop().await;
}
