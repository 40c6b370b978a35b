//! `POST /v1/webhooks/{connector}` serves webhook connectors only: a pull connector (export
//! pages) or a drop connector (files) answers exactly as a connector that does not exist,
//! however the request is signed, and nothing of it is stored.

use super::{call, cloud_event, signed_headers, SECRET};
use acceptance::*;
use serde_json::Value;

/// Secrets of their own for the pull and the drop sample connectors (the sample file gives
/// only `acme-events` some): a signature they would verify exists.
const PULL_SECRET: &str = "whsec_YWNtZS1ldS1vd24tc2lnbmluZy1zZWNyZXQtZm9yLXRlc3Rz";
const DROP_SECRET: &str = "whsec_YWNtZS1maWxlcy1vd24tc2lnbmluZy1zZWNyZXQtdGVzdHM=";

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_webhook_to_a_pull_or_drop_connector_is_an_unknown_connector() {
    let env = spawn_env(true).await;
    let secrets = std::env::temp_dir().join(format!(
        "feedsafe-secrets-{}-{}.json",
        std::process::id(),
        env.table
    ));
    std::fs::write(
        &secrets,
        serde_json::json!({
            "acme-events": [SECRET],
            "acme-eu": [PULL_SECRET],
            "acme-files": [DROP_SECRET],
        })
        .to_string(),
    )
    .expect("the test's secrets file is written");
    let stack = spawn_stack_with(&env, |o| o.secrets_file = secrets.clone()).await;
    let base = stack.base_url();
    let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
    let post = |connector: &str, secret: &str, id: &str, body: Vec<u8>| {
        call(
            "POST",
            format!("{base}/v1/webhooks/{connector}"),
            signed_headers(secret, id, now, &body),
            body,
        )
    };

    let export = export_page(
        "EXP-W",
        1,
        1,
        vec![offer("WH-1", 1, "1.00", "2026-11-29T08:00:00Z")],
    );
    let unknown = post("nobody", SECRET, "msg-u", export.clone()).await;
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    assert_eq!(
        unknown.1["error"]["code"], "unknown_connector",
        "{}",
        unknown.1
    );
    let csv = b"sku,quantity,unit,price,currency,observed_at\nWH-1,1,each,1.00,EUR,2026-11-29T08:00:00Z\n";
    let cases: [(&str, &str, &str, Vec<u8>); 4] = [
        (
            "pull, its own secret",
            "acme-eu",
            PULL_SECRET,
            export.clone(),
        ),
        (
            "pull, a webhook connector's secret",
            "acme-eu",
            SECRET,
            cloud_event("evt-w1", 1),
        ),
        (
            "drop, its own secret",
            "acme-files",
            DROP_SECRET,
            csv.to_vec(),
        ),
        (
            "drop, a webhook connector's secret",
            "acme-files",
            SECRET,
            cloud_event("evt-w2", 1),
        ),
    ];
    let mut wrong = Vec::new();
    for (n, (what, connector, secret, body)) in cases.into_iter().enumerate() {
        let answer: (u16, Value) = post(connector, secret, &format!("msg-{n}"), body).await;
        if answer != unknown {
            wrong.push(format!("{what}: {} {}", answer.0, answer.1));
        }
    }
    assert!(
        wrong.is_empty(),
        "not the unknown connector's answer: {wrong:#?}"
    );

    // Nothing reached the queue or the evidence (the stack ingests within a second).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        env.replay_records().await.is_empty(),
        "no delivery was recorded"
    );
    assert!(
        env.observations().await.is_empty(),
        "no observation was stored"
    );
    stack.stop().await;
}
