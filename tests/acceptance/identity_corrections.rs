//! Identity corrections that stick, append-only operator records, and lifting a source
//! quarantine (docs/adr/0032-identity-corrections-stick.md,
//! docs/adr/0033-source-quarantines-keep-rows-marked.md), through the running local stack's routes.

use acceptance::*;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::protocols::ports::{CrashPoint, SystemClock};
use feedsafe::protocols::projection::ProjectionStore;
use local_stack::Stack;
use serde_json::{json, Value};

const READER: &str = "local-reader-demo-token";
const OPERATOR: &str = "local-operator-demo-token";

/// The demo tenant's pull connector, as the stack seeded it.
fn demo_acme(stack: &Stack) -> ConnectorConfig {
    sample_connector(stack, "acme-eu")
}

async fn offers(stack: &Stack, item: &str) -> Value {
    let (status, body) = call(
        "GET",
        format!("{}/v1/items/{item}/offers", stack.base_url()),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// (connector, quantity) of every offer of `item`.
async fn offer_quantities(stack: &Stack, item: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = offers(stack, item).await["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["connector"].as_str().unwrap().to_owned(),
                o["quantity"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn ops_post(stack: &Stack, path: &str, body: Value) -> (u16, Value) {
    call(
        "POST",
        format!("{}{path}", stack.base_url()),
        Some(OPERATOR),
        body,
    )
    .await
}

async fn ops_get(stack: &Stack, path: &str) -> (u16, Value) {
    call(
        "GET",
        format!("{}{path}", stack.base_url()),
        Some(OPERATOR),
        Value::Null,
    )
    .await
}

fn one_row(export: &str, sku: &str, quantity: i64, observed_at: &str) -> Vec<u8> {
    export_page(
        export,
        1,
        1,
        vec![offer(sku, quantity, "820.00", observed_at)],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_correction_later_deliveries_of_the_old_part_are_attributed_to_the_new_one() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let acme = demo_acme(&stack);
    env.send(
        "IngestQueue",
        &plain_envelope(
            &acme,
            "EXP-C1/1",
            &one_row("EXP-C1", "AX-440", 6, "2026-11-29T08:00:00Z"),
        ),
    )
    .await;
    wait_until("the AX-440 claim is current", || async {
        offer_quantities(&stack, "AX-440").await == vec![("acme-eu".into(), 6)]
    })
    .await;

    let (status, correction) = ops_post(
        &stack,
        "/v1/identity-corrections",
        json!({"connector": "acme-eu", "from_item": "AX-440", "to_item": "AX-440-R2",
               "reason": "the manufacturer suffix was resolved after ingestion"}),
    )
    .await;
    assert_eq!(status, 201, "{correction}");

    // A new export still names the old part.
    let later = one_row("EXP-C2", "AX-440", 4, "2026-11-29T09:00:00Z");
    env.send("IngestQueue", &plain_envelope(&acme, "EXP-C2/1", &later))
        .await;
    wait_until("the new claim is current under AX-440-R2", || async {
        offer_quantities(&stack, "AX-440-R2").await == vec![("acme-eu".into(), 4)]
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        offers(&stack, "AX-440").await["offers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "AX-440 shows no offer from the corrected source"
    );
    let current = &offers(&stack, "AX-440-R2").await["offers"][0];
    let (status, observation) = call(
        "GET",
        format!(
            "{}/v1/observations/{}",
            stack.base_url(),
            current["observation_id"].as_str().unwrap()
        ),
        Some(READER),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{observation}");
    assert_eq!(
        observation["source_record"], "AX-440",
        "the part as the source sent it"
    );
    assert_eq!(
        observation["correction_id"], correction["correction_id"],
        "the observation carries the correction that attributed it"
    );
    // The raw evidence of the new export is exactly what was sent.
    let key = "demo/acme-eu/ACC-1/EXP-C2/1";
    let (status, link) = ops_get(&stack, &format!("/v1/deliveries/{key}/artifact")).await;
    assert_eq!(status, 200, "{link}");
    let (status, bytes) = get_bytes(link["url"].as_str().unwrap().to_owned()).await;
    assert_eq!(status, 200);
    assert_eq!(
        bytes, later,
        "the raw artifact is byte-identical to what was sent"
    );
    stack.stop().await;
}

/// 200 rows (three transactions), AX-440 in the first and in the last chunk.
fn staged_page() -> Vec<u8> {
    let rows = (0..200)
        .map(|i| {
            let sku = if i == 5 || i == 150 {
                "AX-440".to_owned()
            } else {
                format!("STG-{i:03}")
            };
            let at = if i == 150 {
                "2026-11-29T09:00:00Z"
            } else {
                "2026-11-29T08:00:00Z"
            };
            offer(&sku, i, "1.00", at)
        })
        .collect();
    export_page("EXP-STG", 1, 1, rows)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_correction_recorded_while_a_staged_delivery_is_pending_covers_all_of_its_rows() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let acme = demo_acme(&stack);
    let envelope = plain_envelope(&acme, "EXP-STG/1", &staged_page());
    env.service_with(
        std::sync::Arc::new(SystemClock),
        CrashOnce::at(CrashPoint::AfterChunk(1)),
    )
    .ingest_message(&envelope)
    .await
    .expect_err("the first attempt stops after its first chunk");

    let (status, correction) = ops_post(
        &stack,
        "/v1/identity-corrections",
        json!({"connector": "acme-eu", "from_item": "AX-440", "to_item": "AX-440-R2",
               "reason": "suffix resolved while the export was being stored"}),
    )
    .await;
    assert_eq!(status, 201, "{correction}");
    env.service()
        .ingest_message(&envelope)
        .await
        .expect("the redelivery resumes and commits");

    wait_until("both AX-440 rows are attributed to AX-440-R2", || async {
        let (_, history) = call(
            "GET",
            format!("{}/v1/items/AX-440-R2/observations", stack.base_url()),
            Some(READER),
            Value::Null,
        )
        .await;
        history["observations"]
            .as_array()
            .map(|o| o.iter().filter(|o| o["superseded"] == false).count() == 2)
            .unwrap_or(false)
    })
    .await;
    wait_until(
        "the newer row (from the delivery's last chunk) is current under AX-440-R2",
        || async { offer_quantities(&stack, "AX-440-R2").await == vec![("acme-eu".into(), 150)] },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        offers(&stack, "AX-440").await["offers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "no row of the staged delivery is current under AX-440"
    );
    assert_eq!(
        offer_quantities(&stack, "AX-440-R2").await,
        vec![("acme-eu".into(), 150)],
        "the newer of the two rows (from the delivery's last chunk) is current under AX-440-R2"
    );
    stack.stop().await;
}

/// The stored record of correction `id` (raw item).
async fn correction_item(env: &TestEnv, id: &str) -> feedsafe::aws::dynamo::Item {
    let pk = format!("CORR#{id}");
    env.items()
        .await
        .into_iter()
        .find(|i| {
            i.get("pk").and_then(|v| v.as_s().ok()) == Some(&pk)
                && i.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str) == Some("CORR")
        })
        .expect("the correction record")
}

#[tokio::test(flavor = "multi_thread")]
async fn running_a_correction_again_never_rewrites_its_record() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let acme = demo_acme(&stack);
    env.send(
        "IngestQueue",
        &plain_envelope(
            &acme,
            "EXP-A1/1",
            &one_row("EXP-A1", "AX-440", 6, "2026-11-29T08:00:00Z"),
        ),
    )
    .await;
    wait_until("the claim is current", || async {
        !offer_quantities(&stack, "AX-440").await.is_empty()
    })
    .await;
    let request = |reason: &str| json!({"connector": "acme-eu", "from_item": "AX-440", "to_item": "AX-440-R2", "reason": reason});
    let (status, first) =
        ops_post(&stack, "/v1/identity-corrections", request("first reason")).await;
    assert_eq!(status, 201, "{first}");
    let id = first["correction_id"].as_str().unwrap().to_owned();
    let before = correction_item(&env, &id).await;
    let (status, again) =
        ops_post(&stack, "/v1/identity-corrections", request("second reason")).await;
    assert!(status == 200 || status == 201, "{status} {again}");
    assert_eq!(
        again["correction_id"], first["correction_id"],
        "the same correction"
    );
    assert_eq!(
        correction_item(&env, &id).await,
        before,
        "running the correction again left its audit record exactly as it was"
    );
    assert_eq!(again["reason"], "first reason");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lifting_a_source_quarantine_is_recorded_and_its_claims_become_current_again() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let acme = demo_acme(&stack);
    env.send(
        "IngestQueue",
        &plain_envelope(
            &acme,
            "EXP-Q1/1",
            &one_row("EXP-Q1", "AX-440-R2", 6, "2026-11-29T08:00:00Z"),
        ),
    )
    .await;
    wait_until("the claim is current", || async {
        offer_quantities(&stack, "AX-440-R2").await == vec![("acme-eu".into(), 6)]
    })
    .await;
    let (status, set) = ops_post(
        &stack,
        "/v1/source-quarantines",
        json!({"connector": "acme-eu", "reason": "supplier reports a corrupted export"}),
    )
    .await;
    assert_eq!(status, 201, "{set}");
    assert!(offer_quantities(&stack, "AX-440-R2").await.is_empty());
    // Setting it again does not rewrite the first record.
    let (status, again) = ops_post(
        &stack,
        "/v1/source-quarantines",
        json!({"connector": "acme-eu", "reason": "a second opinion"}),
    )
    .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "already_quarantined");

    let (status, lifted) = ops_post(
        &stack,
        "/v1/source-quarantines/acme-eu/lift",
        json!({"reason": "supplier re-sent a verified export"}),
    )
    .await;
    assert_eq!(status, 200, "{lifted}");
    wait_until("the source's claim is current again", || async {
        offer_quantities(&stack, "AX-440-R2").await == vec![("acme-eu".into(), 6)]
    })
    .await;
    // Through the projector: the row is no longer marked.
    wait_until(
        "the projector cleared the row's quarantine mark",
        || async {
            env.projection_store()
                .offers(&acme.tenant, "AX-440-R2~each~new")
                .await
                .unwrap()
                .iter()
                .all(|r| !r.source_quarantined)
        },
    )
    .await;
    let (status, record) = ops_get(&stack, "/v1/source-quarantines/acme-eu").await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["active"], false);
    let events: Vec<(String, String)> = record["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("set".into(), "supplier reports a corrupted export".into()),
            ("lift".into(), "supplier re-sent a verified export".into()),
        ],
        "who and why, append-only"
    );
    let (status, again) = ops_post(
        &stack,
        "/v1/source-quarantines/acme-eu/lift",
        json!({"reason": "again"}),
    )
    .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "not_quarantined");
    stack.stop().await;
}

fn source_of(config: &ConnectorConfig) -> feedsafe::domain::model::SourceRef {
    feedsafe::domain::model::SourceRef {
        tenant: config.tenant.clone(),
        connector: config.connector.clone(),
        source_account: config.source_account.clone(),
    }
}

fn request(
    config: &ConnectorConfig,
    from: &str,
    to: &str,
    reason: &str,
) -> feedsafe::protocols::identity_corrections::CorrectionRequest {
    feedsafe::protocols::identity_corrections::CorrectionRequest {
        source: source_of(config),
        from_item: from.into(),
        to_item: feedsafe::domain::item::CanonicalItem::parse_key(to).unwrap(),
        reason: reason.into(),
        actor: Some("test-operator".into()),
    }
}

/// (b): the claim was written and projected a moment before the correction, too recently for
/// the (eventually consistent) item-history index to show it to the correction's sweep.
#[tokio::test(flavor = "multi_thread")]
async fn a_correction_completes_for_claims_the_lagging_index_does_not_show_yet() {
    use local_stack::fidelity::LaggingIndex;
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let clock = SettableClock::at(feedsafe::domain::timestamp::Timestamp::now());
    let lagging = std::sync::Arc::new(LaggingIndex::new(env.store.clone(), 2_000, clock.clone()));
    let projector = feedsafe::protocols::projection::Projector::new(
        lagging.clone(),
        env.projection_store(),
        env.store.clone(),
    );
    let mut stream = env.stream().await;
    // An older claim the index shows, and a fresh one it does not show yet.
    let old = env.service_with(
        std::sync::Arc::new(feedsafe::protocols::ports::OffsetClock(-3600)),
        std::sync::Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    env.service_ingest(
        &old,
        &plain_envelope(
            &acme,
            "L-1",
            &one_row("L-1", "AX-440", 6, "2026-11-29T08:00:00Z"),
        ),
    )
    .await;
    env.service_ingest(
        &env.service(),
        &plain_envelope(
            &acme,
            "L-2",
            &one_row("L-2", "AX-440", 4, "2026-11-29T09:00:00Z"),
        ),
    )
    .await;
    env.drain(&mut stream, &projector).await;
    let query = env.query();
    let now = feedsafe::domain::timestamp::Timestamp::now();
    let quantities = |v: feedsafe::protocols::query::OffersResponse| -> Vec<u64> {
        serde_json::to_value(v).unwrap()["offers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["quantity"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        quantities(
            query
                .offers(&env.reader(), "AX-440", None, now)
                .await
                .unwrap()
        ),
        vec![4]
    );

    let corrections = env.corrections_with(
        lagging.clone(),
        std::sync::Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    let (view, _) = corrections
        .correct(&request(&acme, "AX-440", "AX-440-R2", "suffix resolved"))
        .await
        .unwrap();
    assert_eq!(
        view.superseded_observations.len(),
        1,
        "the sweep saw only the claim the index shows"
    );
    // The old part shows nothing from the source at once: the rule is consulted on every read.
    assert!(quantities(
        query
            .offers(&env.reader(), "AX-440", None, now)
            .await
            .unwrap()
    )
    .is_empty());
    // The projector sees the rule change and re-attributes the current row's claim from the row
    // itself, whatever the index shows.
    env.drain(&mut stream, &projector).await;
    assert_eq!(
        quantities(
            query
                .offers(&env.reader(), "AX-440-R2", None, now)
                .await
                .unwrap()
        ),
        vec![4],
        "the newest claim is current under the corrected item before the index catches up"
    );
    assert!(
        !corrections
            .view(&view.correction.correction_id)
            .await
            .unwrap()
            .settled
    );

    // Once the index has caught up, the sweeper's settling pass completes the correction.
    clock.set(
        feedsafe::domain::timestamp::Timestamp::now()
            .plus_seconds(feedsafe::protocols::identity_corrections::SETTLE_AFTER_SECONDS + 5),
    );
    let later = feedsafe::protocols::identity_corrections::CorrectionService::new(
        lagging.clone(),
        env.store.clone(),
        env.store.clone(),
        clock.clone(),
        std::sync::Arc::new(feedsafe::protocols::ports::NoFaults),
    );
    assert_eq!(later.settle_due().await.unwrap(), 1);
    assert_eq!(
        later.settle_due().await.unwrap(),
        0,
        "settled: nothing due any more"
    );
    let settled = later.view(&view.correction.correction_id).await.unwrap();
    assert!(settled.settled, "{settled:?}");
    let mut all: Vec<String> = settled
        .superseded_observations
        .iter()
        .map(|id| id.to_string())
        .collect();
    all.sort();
    let mut originals: Vec<String> = env
        .observations()
        .await
        .into_iter()
        .filter(|o| o.normalized_item() == "AX-440~each~new" && o.supersedes.is_none())
        .map(|o| o.observation_id.to_string())
        .collect();
    originals.sort();
    assert_eq!(
        all, originals,
        "the record lists every observation it superseded"
    );
    env.drain(&mut stream, &projector).await;
    let history = query
        .history(&env.reader(), "AX-440-R2", None, 50)
        .await
        .unwrap();
    let history = serde_json::to_value(history).unwrap();
    let attributed: Vec<(u64, String)> = history["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["quantity"].as_u64().unwrap(),
                o["correction_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        attributed,
        vec![
            (4, view.correction.correction_id.clone()),
            (6, view.correction.correction_id.clone())
        ],
        "both claims are in AX-440-R2's history, each naming the rule that moved it"
    );
}

/// A correction interrupted half way (the ops function timed out) resumes and completes
/// when asked again, and its record lists every observation it superseded.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_correction_resumes_and_its_record_lists_everything_it_superseded() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    // 60 claims of the part (one delivery, 60 rows, a second apart: one instant twice with
    // different claims would be ambiguous).
    let rows = (0..60)
        .map(|i| offer("AX-440", i, "1.00", &format!("2026-11-29T08:00:{i:02}Z")))
        .collect();
    env.service_ingest(
        &env.service(),
        &plain_envelope(&acme, "R-60", &export_page("R-60", 1, 1, rows)),
    )
    .await;
    let crashing = env.corrections_with(
        env.store.clone(),
        CrashOnce::at(CrashPoint::AfterReattributionGroup(1)),
    );
    let first = request(&acme, "AX-440", "AX-440-R2", "the first reason");
    let err = crashing.correct(&first).await.expect_err("stops half way");
    assert!(
        matches!(
            err,
            feedsafe::protocols::identity_corrections::CorrectionError::InjectedCrash(_)
        ),
        "{err:?}"
    );
    let id = feedsafe::protocols::identity_corrections::correction_id(
        &source_of(&acme),
        "AX-440~each~new",
        &feedsafe::domain::item::CanonicalItem::parse_key("AX-440-R2").unwrap(),
        feedsafe::domain::model::CorrectionKind::Correct,
        None,
    );
    let half = env.corrections().view(&id).await.unwrap();
    assert_eq!(
        half.superseded_observations.len(),
        feedsafe::protocols::identity_corrections::REATTRIBUTION_GROUP,
        "one group was done when it stopped"
    );
    let record_before = correction_item(&env, &id).await;

    let again = request(&acme, "AX-440", "AX-440-R2", "another reason, sent again");
    let (done, recorded) = env.corrections().correct(&again).await.unwrap();
    assert!(!recorded, "the same correction, resumed");
    assert_eq!(
        done.superseded_observations.len(),
        60,
        "every claim of the part"
    );
    let mut unique = done.superseded_observations.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 60, "none superseded twice");
    assert_eq!(
        correction_item(&env, &id).await,
        record_before,
        "the record itself was never rewritten"
    );
    assert_eq!(done.correction.reason, "the first reason");
    assert_eq!(
        done.sweeps.len(),
        1,
        "the interrupted pass left no sweep record; the resumed one did"
    );
    let copies = env
        .observations()
        .await
        .into_iter()
        .filter(|o| o.correction_id.as_deref() == Some(id.as_str()))
        .count();
    assert_eq!(copies, 60);
}

/// A correction can be corrected and withdrawn, each as a new record, and the history
/// says which rule attributed which claim and when.
#[tokio::test(flavor = "multi_thread")]
async fn a_correction_can_be_corrected_and_withdrawn_and_history_names_each_rule() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let projector = env.projector();
    let mut stream = env.stream().await;
    env.service_ingest(
        &env.service(),
        &plain_envelope(
            &acme,
            "W-1",
            &one_row("W-1", "AX-440", 6, "2026-11-29T08:00:00Z"),
        ),
    )
    .await;
    let service = env.corrections();
    let (first, _) = service
        .correct(&request(&acme, "AX-440", "AX-440-R1", "first guess"))
        .await
        .unwrap();
    let (second, recorded) = service
        .correct(&request(
            &acme,
            "AX-440",
            "AX-440-R2",
            "manufacturer says R2",
        ))
        .await
        .unwrap();
    assert!(recorded);
    assert_eq!(
        second.correction.replaces.as_deref(),
        Some(first.correction.correction_id.as_str())
    );
    env.drain(&mut stream, &projector).await;
    let query = env.query();
    let now = feedsafe::domain::timestamp::Timestamp::now();
    let offers = |item: &'static str| {
        let query = query.clone();
        let reader = env.reader();
        async move {
            serde_json::to_value(query.offers(&reader, item, None, now).await.unwrap()).unwrap()
                ["offers"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    assert_eq!(
        (
            offers("AX-440").await,
            offers("AX-440-R1").await,
            offers("AX-440-R2").await
        ),
        (0, 0, 1)
    );
    let first_now = service.view(&first.correction.correction_id).await.unwrap();
    assert!(!first_now.in_force);
    assert_eq!(
        first_now.replaced_by.as_deref(),
        Some(second.correction.correction_id.as_str())
    );

    let (withdrawal, recorded) = service
        .withdraw(
            &second.correction.correction_id,
            "R2 was wrong after all",
            None,
        )
        .await
        .unwrap();
    assert!(recorded);
    assert_eq!(
        withdrawal.correction.kind,
        feedsafe::domain::model::CorrectionKind::Withdraw
    );
    env.drain(&mut stream, &projector).await;
    assert_eq!(
        (
            offers("AX-440").await,
            offers("AX-440-R1").await,
            offers("AX-440-R2").await
        ),
        (1, 0, 0)
    );
    // Withdrawing what is no longer in force is refused.
    assert!(matches!(
        service
            .withdraw(&first.correction.correction_id, "again", None)
            .await,
        Err(feedsafe::protocols::identity_corrections::CorrectionError::Conflict(_))
    ));
    // The chain, claim by claim: which rule put it where, and when.
    let chain: Vec<(String, Option<String>, bool)> = {
        let mut all: Vec<_> = env
            .observations()
            .await
            .into_iter()
            .map(|o| {
                (
                    o.recorded_at,
                    o.item.clone(),
                    o.correction_id.clone(),
                    o.superseded_by.is_some(),
                )
            })
            .collect();
        all.sort();
        all.into_iter()
            .map(|(_, item, c, s)| (item, c, s))
            .collect()
    };
    assert_eq!(
        chain,
        vec![
            ("AX-440~each~new".into(), None, true),
            (
                "AX-440-R1~each~new".into(),
                Some(first.correction.correction_id.clone()),
                true
            ),
            (
                "AX-440-R2~each~new".into(),
                Some(second.correction.correction_id.clone()),
                true
            ),
            (
                "AX-440~each~new".into(),
                Some(withdrawal.correction.correction_id.clone()),
                false
            ),
        ]
    );
}
