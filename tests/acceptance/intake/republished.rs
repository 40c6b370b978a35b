//! An export whose run is already settled, published again by the supplier: the run is not
//! reopened, every page the pull fetches goes through ingest's replay comparison (an identical
//! page is a counted replay, a changed one a `replay_payload_mismatch` quarantine entry), and
//! the run-start answer says the run was already settled, not that it started.

use super::{call, stack, OPERATOR, READER};
use acceptance::*;
use feedsafe::domain::model::{QuarantineEntry, RunStatus};
use local_stack::Stack;
use serde_json::Value;
use std::time::Duration;

const AT: &str = "2026-11-29T08:00:00Z";

fn pages(second_quantity: i64) -> Vec<Vec<Value>> {
    vec![
        vec![offer("RP-1", 1, "1.00", AT)],
        vec![offer("RP-2", second_quantity, "2.00", AT)],
        vec![offer("RP-3", 3, "3.00", AT)],
    ]
}

fn key(export: &str, page: u32) -> String {
    format!("demo/acme-eu/ACC-1/{export}/{page}")
}

async fn start_run(stack: &Stack) -> Value {
    let (status, body) = call(
        "POST",
        format!("{}/v1/connectors/acme-eu/runs", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {OPERATOR}"))],
        vec![],
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body
}

async fn current_quantity(stack: &Stack, sku: &str) -> Value {
    let (_, body) = call(
        "GET",
        format!("{}/v1/items/{sku}/offers", stack.base_url()),
        vec![("authorization".into(), format!("Bearer {READER}"))],
        vec![],
    )
    .await;
    body["offers"][0]["quantity"].clone()
}

async fn attempts(env: &TestEnv, key: &str) -> u32 {
    env.replay(key).await.map_or(0, |r| r.attempts)
}

async fn mismatches(env: &TestEnv) -> Vec<QuarantineEntry> {
    env.quarantine()
        .await
        .into_iter()
        .filter(|e| e.reason_code == "replay_payload_mismatch")
        .collect()
}

async fn run_status(env: &TestEnv, run_id: &str) -> Option<RunStatus> {
    env.store.run(run_id).await.unwrap().and_then(|r| r.status)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_complete_export_published_again_is_compared_page_by_page_and_a_changed_page_quarantined()
{
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let export = "EXP-7700";
    stack.supplier.set_export("acme-eu", export, pages(2));
    let first = start_run(&stack).await;
    assert_eq!(first["status"], "started", "{first}");
    let run_id = first["run_id"].as_str().unwrap().to_owned();
    wait_until("the run completes and page 2 is current", || async {
        run_status(&env, &run_id).await == Some(RunStatus::Complete)
            && current_quantity(&stack, "RP-2").await == 2
    })
    .await;
    let stored = env.replay(&key(export, 2)).await.expect("page 2 stored");
    let completed_at = env.store.run(&run_id).await.unwrap().unwrap().completed_at;

    // Published again unchanged: three counted replays, nothing quarantined.
    let again = start_run(&stack).await;
    assert_eq!(again["status"], "already_complete", "{again}");
    assert_eq!(again["run_status"], "COMPLETE", "{again}");
    assert_eq!(again["run_id"], run_id.as_str());
    assert_eq!(again["pages_to_compare"], 3, "{again}");
    wait_until("every page replayed once", || async {
        for page in 1..=3 {
            if attempts(&env, &key(export, page)).await < 2 {
                return false;
            }
        }
        true
    })
    .await;
    assert!(
        mismatches(&env).await.is_empty(),
        "an identical page is no mismatch"
    );

    // Published again with page 2 changed: that page, and only it, is quarantined.
    stack.supplier.set_export("acme-eu", export, pages(9));
    let changed = start_run(&stack).await;
    assert_eq!(changed["status"], "already_complete", "{changed}");
    assert_eq!(changed["pages_to_compare"], 3, "{changed}");
    wait_until("page 2's mismatch and pages 1 and 3 replayed", || async {
        attempts(&env, &key(export, 1)).await >= 3
            && attempts(&env, &key(export, 3)).await >= 3
            && !mismatches(&env).await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let entries = mismatches(&env).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.delivery_key.as_deref(), Some(key(export, 2).as_str()));
    assert_eq!(entry.stored_fingerprint.as_ref(), Some(&stored.fingerprint));
    assert!(
        entry
            .received_fingerprint
            .as_ref()
            .is_some_and(|f| *f != stored.fingerprint),
        "{entry:?}"
    );
    assert_eq!(
        entry.stored_artifact_key.as_deref(),
        Some(stored.artifact_key.as_str())
    );
    assert_ne!(
        entry.evidence_key, stored.artifact_key,
        "its own raw artifact"
    );
    let evidence: Value = serde_json::from_slice(&env.read_object(&entry.evidence_key).await)
        .expect("the received page is its raw artifact");
    assert_eq!(evidence["offers"][0]["quantity"], 9, "{evidence}");

    // Nothing stored changed and the run was not reopened.
    let after = env.replay(&key(export, 2)).await.unwrap();
    assert_eq!(
        (&after.fingerprint, &after.observation_ids),
        (&stored.fingerprint, &stored.observation_ids)
    );
    let observations = env.observations_of(&key(export, 2)).await;
    assert_eq!(observations.len(), 1, "{observations:?}");
    assert_eq!(observations[0].observation_id, stored.observation_ids[0]);
    assert_eq!(observations[0].quantity, 2);
    assert_eq!(current_quantity(&stack, "RP-2").await, 2);
    let run = env.store.run(&run_id).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.completed_at),
        (Some(RunStatus::Complete), completed_at)
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incomplete_export_published_again_compares_its_committed_pages_and_commits_the_missing_one(
) {
    let env = spawn_env(true).await;
    let stack = stack(&env).await;
    let export = "EXP-7701";
    stack.supplier.set_export("acme-eu", export, pages(2));
    stack.supplier.fail_page("acme-eu", 3, u32::MAX);
    let first = start_run(&stack).await;
    let run_id = first["run_id"].as_str().unwrap().to_owned();
    wait_until("pages 1 and 2 commit", || async {
        env.store.run_pages(&run_id).await.unwrap().pages.len() == 2
    })
    .await;
    env.store
        .sweep_runs(feedsafe::domain::timestamp::Timestamp::now().plus_seconds(3600))
        .await
        .unwrap();
    assert_eq!(run_status(&env, &run_id).await, Some(RunStatus::Incomplete));

    // Page 3 is back; page 2 changed.
    stack.supplier.fail_page("acme-eu", 3, 0);
    stack.supplier.set_export("acme-eu", export, pages(9));
    let again = start_run(&stack).await;
    assert_eq!(again["status"], "already_incomplete", "{again}");
    assert_eq!(again["run_status"], "INCOMPLETE", "{again}");
    assert_eq!(again["pages_to_compare"], 2, "{again}");
    assert_eq!(again["pages_to_commit"], 1, "{again}");
    wait_until("page 3 commits and page 2 is quarantined", || async {
        run_status(&env, &run_id).await == Some(RunStatus::Complete)
            && attempts(&env, &key(export, 1)).await >= 2
            && !mismatches(&env).await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let entries = mismatches(&env).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        entries[0].delivery_key.as_deref(),
        Some(key(export, 2).as_str())
    );
    assert_eq!(current_quantity(&stack, "RP-2").await, 2);
    stack.stop().await;
}
