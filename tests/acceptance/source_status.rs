//! Source health through the running local stack (docs/architecture.md, "Source health"): a
//! webhook connector expected every minute settles deliveries each way (committed, replayed,
//! quarantined, refused), each read back from `GET /v1/sources` as it happens; asked two minutes
//! after its commit (the instant the query and sweeper handlers are given, as the HTTP server
//! and the schedule give them the wall clock's) it is named overdue with `overdue_since` by the
//! sources route, the offers read and the sweeper's per-connector metrics, and the others are
//! not.

use acceptance::load::post_signed_webhook;
use acceptance::*;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::lambda::schedule::handle_sweep_schedule;
use feedsafe::protocols::identity_corrections::CorrectionService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use serde_json::{json, Value};
use std::sync::Arc;

/// The local sample signing secret of the `snapshot-hooks` connector (`infra/local/secrets.json`;
/// not a production secret).
const SNAPSHOT_HOOKS_SECRET: &str =
    "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1zbmFwc2hvdC1ob29rcy1ub3QtZm9yLXByb2R1Y3Rpb24=";
const QUIET: &str = "snapshot-hooks";

async fn onboard(stack: &local_stack::Stack, document: &Value) {
    let id = document["connector"].as_str().unwrap();
    let url = format!("{}/v1/connectors/{id}", stack.base_url());
    let (status, answer) =
        call_with("PUT", url, Some(LOCAL_OPERATOR), None, document.clone()).await;
    assert_eq!(status, 201, "{answer}");
}

async fn sources(stack: &local_stack::Stack, query: &str) -> Value {
    let url = format!("{}/v1/sources{query}", stack.base_url());
    let (status, answer) = call("GET", url, Some(LOCAL_READER), Value::Null).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

async fn status_of(stack: &local_stack::Stack, connector: &str) -> Value {
    let answer = sources(stack, &format!("?connector={connector}")).await;
    answer["sources"][0].clone()
}

async fn webhook(stack: &local_stack::Stack, message_id: &str, body: Value) {
    let url = format!("{}/v1/webhooks/{QUIET}", stack.base_url());
    let status = post_signed_webhook(
        &url,
        SNAPSHOT_HOOKS_SECRET,
        message_id,
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 202, "{message_id}");
}

/// Waits until the quiet connector's last delivery settled as `outcome`.
async fn settled_as(stack: &local_stack::Stack, outcome: &str) -> Value {
    wait_until(&format!("a delivery settled as {outcome}"), || async {
        status_of(stack, QUIET).await["last_outcome"] == outcome
    })
    .await;
    status_of(stack, QUIET).await
}

fn snapshot(id: &str, available: Value) -> Value {
    json!({"snapshot_id": id, "generated_at": Timestamp::now().to_rfc3339(),
        "stock": [{"part": "LM358DR", "available": available, "unit_price": "0.39"}]})
}

/// Committed, replayed, quarantined, refused: each is the last outcome in turn, and only a
/// commit moves `last_committed_at`.
async fn every_outcome(stack: &local_stack::Stack) -> Timestamp {
    let first = snapshot("SNAP-1", json!(1200));
    webhook(stack, "msg_1", first.clone()).await;
    let committed = settled_as(stack, "committed").await;
    let at = committed["last_committed_at"].as_str().unwrap().to_owned();
    assert_eq!(committed["overdue"], false, "{committed}");
    assert_eq!(committed["expected_cadence_minutes"], 1);
    assert_eq!(committed["transport"], "webhook");
    assert_eq!(committed["last_settled"]["committed"], at.as_str());

    // The same snapshot again under another webhook id is one delivery: a replay.
    webhook(stack, "msg_1b", first).await;
    let replayed = settled_as(stack, "replayed").await;
    assert_eq!(replayed["last_committed_at"], at.as_str(), "{replayed}");
    assert!(replayed["last_settled"]["replayed"].is_string());

    webhook(stack, "msg_2", snapshot("SNAP-1", json!(900))).await;
    let quarantined = settled_as(stack, "quarantined").await;
    assert!(quarantined["last_settled"]["quarantined"].is_string());
    webhook(stack, "msg_3", snapshot("SNAP-2", json!("lots"))).await;
    let refused = settled_as(stack, "refused").await;
    assert!(refused["last_settled"]["refused"].is_string());
    assert_eq!(refused["last_committed_at"], at.as_str(), "{refused}");
    assert_eq!(
        refused["refresh"],
        json!({"action": "ask_supplier", "detail": format!("connector {QUIET} receives webhook deliveries: only the supplier can send fresher data"),
            "last_delivery_at": refused["last_received_at"]})
    );
    Timestamp::parse(&at).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_source_is_named_overdue_and_the_others_are_not() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let mut quiet = supplier_definition("snapshot-webhooks");
    quiet["expected_cadence_minutes"] = json!(1);
    onboard(&stack, &quiet).await;
    let mut steady = supplier_definition("lieferant-de");
    steady["expected_cadence_minutes"] = json!(60);
    onboard(&stack, &steady).await;
    env.drop_file(
        "lieferant-de",
        "bestand.csv",
        german_file_with_three_bad_rows(),
    )
    .await;

    let committed_at = every_outcome(&stack).await;
    wait_until("lieferant-de's file committed", || async {
        status_of(&stack, "lieferant-de").await["last_committed_at"].is_string()
    })
    .await;
    // Nothing commits for the quiet connector for more than its minute: the routes, the offers
    // read and the sweeper are asked as of two minutes after its commit, through the same
    // handlers the HTTP server and the sweeper's schedule call with the wall clock.
    let due = committed_at.plus_seconds(60);
    let later = committed_at.plus_seconds(120);
    let overdue = the_list_names_it_alone(&stack, due, later).await;
    the_offers_answer_names_it(&stack, due, later).await;
    the_mcp_tool_says_how_it_stands(&stack).await;
    the_sweeper_publishes_it(&stack, due, later).await;
    assert_eq!(overdue["connector"], QUIET);
    let (status, refused) = call(
        "GET",
        format!("{}/v1/sources?connector=nobody", stack.base_url()),
        Some(LOCAL_READER),
        Value::Null,
    )
    .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}

/// `GET /v1/sources`: the quiet connector overdue since its commit plus a minute; the German
/// drop (an hour's cadence) on time though none of its claims is recent; the pull configured
/// before definitions without a cadence, never overdue. Answers the quiet connector's status.
async fn the_list_names_it_alone(
    stack: &local_stack::Stack,
    due: Timestamp,
    later: Timestamp,
) -> Value {
    let all = read_at(stack, "/v1/sources", &[], later).await;
    let by_id = |id: &str| {
        all["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["connector"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} listed: {all}"))
    };
    let overdue = by_id(QUIET);
    assert_eq!(overdue["overdue"], true, "{overdue}");
    assert_eq!(
        overdue["overdue_since"],
        due.to_rfc3339().as_str(),
        "{overdue}"
    );
    assert_eq!(
        overdue["source_quarantine"],
        json!({"active": false, "since": null})
    );
    assert_eq!(overdue["refreshed_within_cadence"]["items"], 1, "{overdue}");
    assert_eq!(
        overdue["refreshed_within_cadence"]["refreshed"], 0,
        "{overdue}"
    );

    let steady = by_id("lieferant-de");
    assert_eq!(
        (steady["overdue"].clone(), steady["transport"].clone()),
        (json!(false), json!("drop")),
        "{steady}"
    );
    // Its two current claims were observed long before this hour: on time, yet not refreshed.
    assert_eq!(
        steady["refreshed_within_cadence"],
        json!({"items": 2, "refreshed": 0, "share": 0.0})
    );
    let pulled = by_id("acme-eu");
    assert_eq!(pulled["transport"], "pull");
    assert_eq!(
        pulled["expected_cadence_minutes"],
        Value::Null,
        "no definition: no cadence"
    );
    assert_eq!(pulled["overdue"], false);
    assert_eq!(
        (&pulled["refresh"]["action"], &pulled["refresh"]["path"]),
        (
            &json!("start_pull_run"),
            &json!("/v1/connectors/acme-eu/runs")
        ),
        "{pulled}"
    );

    overdue
}

/// The MCP tool, asked now: the quiet source with its cadence, not overdue yet, and what
/// would refresh it (the overdue line is `mcp::summaries`' unit test's).
async fn the_mcp_tool_says_how_it_stands(stack: &local_stack::Stack) {
    let answer = mcp_tool(
        &stack.base_url(),
        LOCAL_READER,
        "get_source_status",
        json!({"connector": QUIET}),
    )
    .await;
    let structured = &answer["structuredContent"]["sources"][0];
    assert_eq!(structured["connector"], QUIET, "{answer}");
    assert_eq!(structured["expected_cadence_minutes"], 1, "{answer}");
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "{QUIET} (webhook): on time (expected every 1 min); last committed"
        )),
        "{text}"
    );
    assert!(
        text.contains("ask the supplier (last delivery received"),
        "{text}"
    );
}

/// The sweeper's pass judges the same, and its EMF line for the connector says so.
async fn the_sweeper_publishes_it(stack: &local_stack::Stack, due: Timestamp, later: Timestamp) {
    let store = stack.services.evidence.clone();
    let corrections = CorrectionService::new(
        store.clone(),
        store.clone(),
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let now = later;
    let report = handle_sweep_schedule(&store, &corrections, now)
        .await
        .expect("the sweep runs");
    let quiet = report
        .sources
        .iter()
        .find(|s| s.connector.as_str() == QUIET)
        .expect("the quiet connector is judged");
    assert!(quiet.overdue);
    assert_eq!(quiet.overdue_since, Some(due));
    let line = quiet.metrics().to_connector_emf(QUIET, now.unix_millis());
    println!("EMF: {line}");
    assert_eq!(line["Connector"], QUIET);
    assert_eq!(line["Overdue"], 1.0);
    assert!(
        line["NewestDeliveryAgeSeconds"].as_f64().unwrap() > 60.0,
        "{line}"
    );
    assert_eq!(
        line["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([["Connector"]])
    );
    for id in ["lieferant-de", "acme-eu"] {
        let other = report.sources.iter().find(|s| s.connector.as_str() == id);
        assert!(other.is_none_or(|s| !s.overdue), "{id}: {other:?}");
    }
}

/// An offers answer that asked no `max_age_seconds` still names the overdue source, with what
/// would refresh it; the receipt, which leaves that out, still verifies.
async fn the_offers_answer_names_it(stack: &local_stack::Stack, due: Timestamp, later: Timestamp) {
    let answer = read_at(stack, "/v1/offers", &[("item", "LM358DR")], later).await;
    let late = &answer["overdue_sources"];
    assert_eq!(late.as_array().map(Vec::len), Some(1), "{answer}");
    assert_eq!(late[0]["connector"], QUIET);
    assert_eq!(late[0]["overdue_since"], due.to_rfc3339().as_str());
    assert_eq!(late[0]["refresh"]["action"], "ask_supplier");
    assert!(
        answer.get("freshness_gaps").is_none(),
        "no maximum age was asked"
    );
    let receipt = &answer["receipt"];
    let check = [
        ("item", "LM358DR"),
        ("as_of", receipt["as_of"].as_str().unwrap()),
        ("digest", receipt["digest"].as_str().unwrap()),
    ];
    let verified = read_at(stack, "/v1/receipts/verify", &check, later.plus_seconds(1)).await;
    assert_eq!(verified["matches"], true, "{verified}");
    // Asked now, through the HTTP server, the quiet source is not overdue yet.
    let url = format!("{}/v1/offers?item=LM358DR", stack.base_url());
    let (status, now) = call("GET", url, Some(LOCAL_READER), Value::Null).await;
    assert_eq!(status, 200, "{now}");
    assert!(now.get("overdue_sources").is_none(), "{now}");
}

/// The read route `path` with `query`, as the query function's handler answers it at `at`.
async fn read_at(
    stack: &local_stack::Stack,
    path: &str,
    query: &[(&str, &str)],
    at: Timestamp,
) -> Value {
    let request = feedsafe::protocols::http::HttpRequest {
        method: "GET".into(),
        path: path.into(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        principal: Some(feedsafe::protocols::query::Principal {
            tenant: feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
            scopes: vec!["offers:read".into()],
            subject: None,
        }),
    };
    let answer = feedsafe::protocols::http::handle_read(&stack.services.query, request, at).await;
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    serde_json::from_str(&answer.body).unwrap()
}

/// A note of an older delivery, settled late (another instance, a slow retry), never rolls the
/// record back: the last received delivery and its outcome stay the newer one's, and only the
/// older one's own outcome time moves, forward only.
#[tokio::test(flavor = "multi_thread")]
async fn a_late_note_of_an_older_delivery_never_rolls_the_record_back() {
    use feedsafe::domain::ids::{ConnectorId, SourceAccount, TenantId};
    use feedsafe::domain::source_health::{DeliveryNote, Settled};
    let env = spawn_env(true).await;
    let at = |text: &str| Timestamp::parse(text).unwrap();
    let note = |settled, key: &str, received: &str, settled_at: &str| DeliveryNote {
        tenant: TenantId::parse("demo").unwrap(),
        connector: ConnectorId::parse("acme-eu").unwrap(),
        source_account: SourceAccount::parse("ACC-1").unwrap(),
        settled,
        delivery_key: key.to_owned(),
        received_at: at(received),
        settled_at: at(settled_at),
    };
    let store = &env.store;
    let newer = note(
        Settled::Committed,
        "k2",
        "2026-12-01T10:00:02Z",
        "2026-12-01T10:00:03Z",
    );
    store.note_delivery(&newer).await.unwrap();
    let late = note(
        Settled::Replayed,
        "k1",
        "2026-12-01T10:00:01Z",
        "2026-12-01T10:00:04Z",
    );
    store.note_delivery(&late).await.unwrap();
    let older = note(
        Settled::Replayed,
        "k0",
        "2026-12-01T10:00:00Z",
        "2026-12-01T10:00:00Z",
    );
    store.note_delivery(&older).await.unwrap();

    let demo = TenantId::parse("demo").unwrap();
    let records = store.source_health_of(&demo).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let health = &records[0];
    assert_eq!(health.last_received_at, Some(at("2026-12-01T10:00:02Z")));
    assert_eq!(health.last_outcome, Some(Settled::Committed));
    assert_eq!(health.last_delivery_key.as_deref(), Some("k2"));
    assert_eq!(health.last_committed_at, Some(at("2026-12-01T10:00:03Z")));
    assert_eq!(health.last_replayed_at, Some(at("2026-12-01T10:00:04Z")));
    let other = TenantId::parse("other").unwrap();
    assert!(store.source_health_of(&other).await.unwrap().is_empty());
}

/// A reader sees its own tenant's sources only; another tenant's connector is a 404, as an
/// unknown one is.
#[tokio::test(flavor = "multi_thread")]
async fn another_tenants_sources_are_neither_listed_nor_named() {
    let env = spawn_env(true).await;
    let other = "local-operator-other-sources-token";
    let stack = spawn_stack_with_other_tenant(&env, other).await;
    let url = format!("{}/v1/sources", stack.base_url());
    let (status, own) = call("GET", url.clone(), Some(LOCAL_READER), Value::Null).await;
    assert_eq!(status, 200, "{own}");
    assert!(
        own["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["connector"] == "acme-eu"),
        "{own}"
    );
    let (status, theirs) = call("GET", url.clone(), Some(other), Value::Null).await;
    assert_eq!((status, &theirs["sources"]), (200, &json!([])), "{theirs}");
    let (status, named) = call(
        "GET",
        format!("{url}?connector=acme-eu"),
        Some(other),
        Value::Null,
    )
    .await;
    assert_eq!(
        (status, named["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{named}"
    );
}

/// A health note is a summary, never a gate: when its write fails the delivery still commits
/// and is acknowledged, the record stays as it was, and the next delivery's note brings it up
/// to date (docs/crash-points.md, ingest row 14).
#[tokio::test(flavor = "multi_thread")]
async fn a_health_note_that_fails_does_not_decide_the_delivery() {
    use feedsafe::protocols::ingest::{IngestOutcome, IngestService};
    use feedsafe::protocols::ports::{NoFaults, SystemClock};
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let failing = IngestService::new(
        ChunkSeam::failing_health_notes(env.store.clone()),
        env.artifacts.clone(),
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoFaults),
    );
    let first = export_page(
        "EXP-N1",
        1,
        1,
        vec![offer("AX-440-R2", 5, "820.00", "2026-11-29T08:00:00Z")],
    );
    let outcome = failing
        .ingest_message(&page_envelope(&acme, "EXP-N1", 1, 1, &first))
        .await
        .expect("settled although its note failed");
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
    let health = env.store.source_health_of(&acme.tenant).await.unwrap();
    assert!(health.is_empty(), "nothing noted: {health:?}");

    let second = export_page(
        "EXP-N2",
        1,
        1,
        vec![offer("AX-440-R2", 6, "820.00", "2026-11-29T09:00:00Z")],
    );
    let outcome = env
        .service()
        .ingest_message(&page_envelope(&acme, "EXP-N2", 1, 1, &second))
        .await
        .unwrap();
    assert!(
        matches!(outcome, IngestOutcome::Committed(_)),
        "{outcome:?}"
    );
    let health = env.store.source_health_of(&acme.tenant).await.unwrap();
    assert_eq!(health.len(), 1, "{health:?}");
    assert_eq!(
        health[0].last_outcome,
        Some(feedsafe::domain::source_health::Settled::Committed)
    );
    assert!(
        health[0]
            .last_delivery_key
            .as_deref()
            .is_some_and(|k| k.contains("EXP-N2")),
        "{health:?}"
    );
}

/// `?connector=` is the caller's text: empty, a kilobyte long, control characters, quotes,
/// non-ASCII or another tenant's id, it is a clean 404 naming what was asked, never a 500.
#[tokio::test(flavor = "multi_thread")]
async fn any_connector_asked_about_is_a_clean_answer() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let long = "a".repeat(1024);
    for asked in [
        "",
        " ",
        "ACME-EU",
        "acme-eu ",
        "a\u{0}b",
        "\"quoted\"",
        "caf\u{e9}",
        "%00",
        long.as_str(),
    ] {
        let answer = read_status(&stack, asked).await;
        assert_eq!(answer.0, 404, "{asked:?}: {}", answer.1);
        let body: Value = serde_json::from_str(&answer.1).expect("a JSON error");
        assert_eq!(body["error"]["code"], "not_found", "{asked:?}");
    }
    assert_eq!(read_status(&stack, "acme-eu").await.0, 200);
    let refused = mcp_tool_error(&stack, json!({"connector": 7})).await;
    assert!(
        refused.contains("connector must be a non-empty string"),
        "{refused}"
    );
}

async fn read_status(stack: &local_stack::Stack, connector: &str) -> (u16, String) {
    let request = feedsafe::protocols::http::HttpRequest {
        method: "GET".into(),
        path: "/v1/sources".into(),
        query: [("connector".to_owned(), connector.to_owned())]
            .into_iter()
            .collect(),
        principal: Some(feedsafe::protocols::query::Principal {
            tenant: feedsafe::domain::ids::TenantId::parse("demo").unwrap(),
            scopes: vec!["offers:read".into()],
            subject: None,
        }),
    };
    let answer =
        feedsafe::protocols::http::handle_read(&stack.services.query, request, Timestamp::now())
            .await;
    (answer.status, answer.body)
}

/// The text of a `get_source_status` call refused as an error result.
async fn mcp_tool_error(stack: &local_stack::Stack, arguments: Value) -> String {
    let answer = mcp_tool(
        &stack.base_url(),
        LOCAL_READER,
        "get_source_status",
        arguments,
    )
    .await;
    assert_eq!(answer["isError"], true, "{answer}");
    answer["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
