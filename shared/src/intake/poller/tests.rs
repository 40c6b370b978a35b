use super::fakes::*;
use super::*;
use crate::domain::envelope::BodyRef;
use crate::domain::hashing::base64_decode;
use crate::domain::timestamp::Timestamp;

fn harness(source: ScriptedSource, max_attempts: u32) -> (Harness, Arc<ScriptedSource>) {
    let source = Arc::new(source);
    let harness = Harness::new(
        vec![acme_eu(
            "http://supplier.invalid/exports/acme-eu",
            max_attempts,
        )],
        source.clone(),
    );
    (harness, source)
}

fn failed_pages(report: &PullReport) -> Vec<u32> {
    report.failed.iter().map(|(page, _)| *page).collect()
}

#[tokio::test]
async fn three_pages_become_three_envelopes_of_one_run() {
    let (h, _) = harness(ScriptedSource::export("EXP-8821", 3), 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.run_id.as_str(), "run-acme-eu.EXP-8821");
    assert_eq!(report.export_id, "EXP-8821");
    assert_eq!(report.page_count, 3);
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    assert!(report.failed.is_empty());

    let envelopes = h.journal.envelopes();
    assert_eq!(envelopes.len(), 3);
    for (envelope, page) in envelopes.iter().zip(1u32..) {
        assert_eq!(envelope.delivery.id.as_str(), format!("EXP-8821/{page}"));
        assert_eq!(envelope.delivery.strength, IdentityStrength::Source);
        assert_eq!(envelope.delivery.basis, "export_page");
        assert_eq!(envelope.content_type, "application/json");
        assert_eq!(envelope.retrieved_at, Timestamp::parse(NOW).unwrap());
        assert_eq!(
            envelope.delivery_key().as_string(),
            format!("demo/acme-eu/ACC-1/EXP-8821/{page}")
        );
        assert_eq!(
            envelope.run,
            Some(RunPage {
                run_id: report.run_id.clone(),
                page,
                page_count: Some(3)
            })
        );
        let BodyRef::Inline { base64 } = &envelope.body else {
            panic!("small pages travel inline")
        };
        assert_eq!(
            base64_decode(base64).unwrap(),
            page_body("EXP-8821", page, 3)
        );
        // What the poller sends is what ingest accepts.
        crate::domain::envelope::DeliveryEnvelope::parse(envelope.to_json().as_bytes()).unwrap();
    }

    let runs = h.journal.runs();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    let now = Timestamp::parse(NOW).unwrap();
    assert_eq!(run.run_id, report.run_id);
    assert_eq!(run.status, None);
    assert_eq!(run.credential_ref.as_deref(), Some("acme-eu/export-token"));
    assert_eq!(run.started_at, Some(now));
    assert_eq!(run.deadline, Some(now.unix_seconds() + 900));
    assert_eq!(run.page_count, Some(3), "pages 1..=3 are requested");
    assert_eq!(run.tenant.as_str(), "demo");
    // The run is recorded before any page is enqueued.
    assert_eq!(
        h.journal.events(),
        [
            "start run-acme-eu.EXP-8821",
            "enqueue EXP-8821/1",
            "enqueue EXP-8821/2",
            "enqueue EXP-8821/3"
        ]
    );
    // The report is JSON for the Lambda's result.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["run_id"], "run-acme-eu.EXP-8821");
    assert_eq!(json["enqueued"], serde_json::json!([1, 2, 3]));
}

#[tokio::test]
async fn a_page_failing_once_is_retried_and_enqueued() {
    let source = ScriptedSource::export("EXP-8821", 3);
    source.fail(2, 1, FetchError::Status(503));
    let (h, source) = harness(source, 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    assert!(report.failed.is_empty());
    assert_eq!(source.calls(2), 2);
    assert_eq!(h.journal.envelopes().len(), 3);
}

#[tokio::test]
async fn a_page_failing_every_time_is_reported_and_not_enqueued() {
    let source = ScriptedSource::export("EXP-8821", 3);
    source.fail(3, u32::MAX, FetchError::Transport);
    let (h, source) = harness(source, 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.enqueued, vec![1, 2]);
    assert_eq!(failed_pages(&report), vec![3]);
    assert!(
        report.failed[0].1.starts_with("export_unreachable"),
        "{:?}",
        report.failed
    );
    assert_eq!(source.calls(3), 3, "max_attempts bounds the attempts");
    assert_eq!(h.journal.envelopes().len(), 2);
    // The run still requests all three pages, so the sweeper names page 3.
    assert_eq!(h.journal.runs()[0].page_count, Some(3));
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let source = ScriptedSource::export("EXP-8821", 2);
    source.fail(2, u32::MAX, FetchError::Status(404));
    let (h, source) = harness(source, 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(failed_pages(&report), vec![2]);
    assert_eq!(source.calls(2), 1);
}

#[tokio::test]
async fn running_the_same_export_twice_resumes_the_same_run_with_the_same_keys() {
    let (h, _) = harness(ScriptedSource::export("EXP-8821", 3), 3);
    let first = h.service.run_connector(&acme()).await.unwrap();
    let first_keys = h.journal.keys();
    let second = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(first.run_id, second.run_id);
    assert_eq!(first, second);
    let keys = h.journal.keys();
    assert_eq!(keys.len(), 6);
    assert_eq!(keys[3..], first_keys[..]);
    let runs = h.journal.runs();
    assert_eq!(runs[0].run_id, runs[1].run_id);
}

#[tokio::test]
async fn a_settled_run_is_not_reopened_but_every_page_is_sent_to_ingest_for_comparison() {
    let (h, source) = harness(ScriptedSource::export("EXP-8821", 3), 3);
    *h.journal.closed.lock().unwrap() = Some(RunStart::Closed {
        status: RunStatus::Complete,
        committed: (1..=3).collect(),
    });
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.run_was, Some(RunStatus::Complete));
    assert_eq!(report.enqueued, vec![1, 2, 3], "{report:?}");
    assert_eq!(report.compared, vec![1, 2, 3], "{report:?}");
    assert_eq!(source.calls(2), 1, "every page is fetched again");
    let keys: Vec<String> = (1..=3)
        .map(|p| format!("demo/acme-eu/ACC-1/EXP-8821/{p}"))
        .collect();
    assert_eq!(
        h.journal.keys(),
        keys,
        "under the keys they were stored under"
    );

    *h.journal.closed.lock().unwrap() = Some(RunStart::Closed {
        status: RunStatus::Incomplete,
        committed: [1, 3].into(),
    });
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.run_was, Some(RunStatus::Incomplete));
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    assert_eq!(
        report.compared,
        vec![1, 3],
        "page 2 is new, the others compared"
    );
    assert_eq!(h.journal.keys()[3..], keys[..]);
}

#[tokio::test]
async fn an_open_run_reports_no_comparison() {
    let (h, _) = harness(ScriptedSource::export("EXP-8821", 2), 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.run_was, None);
    assert!(report.compared.is_empty(), "{report:?}");
    let json = serde_json::to_value(&report).unwrap();
    assert!(json.get("compared").is_none(), "{json}");
}

#[tokio::test]
async fn a_new_export_gets_a_new_run() {
    let (h, source) = harness(ScriptedSource::export("EXP-8821", 1), 3);
    let first = h.service.run_connector(&acme()).await.unwrap();
    source.set_page(1, page_body("EXP-8822", 1, 1));
    let second = h.service.run_connector(&acme()).await.unwrap();
    assert_ne!(first.run_id, second.run_id);
    assert_eq!(h.journal.keys()[1], "demo/acme-eu/ACC-1/EXP-8822/1");
}

#[tokio::test]
async fn a_page_of_another_export_is_not_enqueued_under_this_one() {
    let source = ScriptedSource::export("EXP-8821", 3);
    source.set_page(2, page_body("EXP-8822", 2, 3));
    source.set_page(3, b"<html>maintenance</html>".to_vec());
    let (h, _) = harness(source, 3);
    let report = h.service.run_connector(&acme()).await.unwrap();
    assert_eq!(report.enqueued, vec![1]);
    assert_eq!(failed_pages(&report), vec![2, 3]);
    assert!(report.failed[0].1.contains("EXP-8822"));
}

#[tokio::test]
async fn a_connector_stored_with_an_invalid_configuration_starts_no_run() {
    let source = Arc::new(ScriptedSource::export("EXP-8821", 1));
    let mut zero = acme_eu("http://supplier.invalid/exports/acme-eu", 3);
    zero.horizon_days = 0;
    let h = Harness::new(vec![zero], source.clone());
    let err = h.service.run_connector(&acme()).await.unwrap_err();
    assert!(
        matches!(&err, PullError::Misconfigured(_)) && err.to_string().contains("horizon_days"),
        "{err}"
    );
    assert_eq!(source.calls(1), 0, "the supplier is not asked");
    assert!(h.journal.runs().is_empty());
}

#[tokio::test]
async fn connectors_that_cannot_be_pulled_are_refused() {
    let source = Arc::new(ScriptedSource::export("EXP-8821", 1));
    let mut push = acme_eu("http://x", 1);
    push.connector = ConnectorId::parse("acme-events").unwrap();
    push.identity_rule = IdentityRule::CloudEventsSourceId;
    let mut bare = acme_eu("http://x", 1);
    bare.connector = ConnectorId::parse("bare").unwrap();
    bare.pull = None;
    let h = Harness::new(vec![push, bare], source.clone());
    for (id, expected) in [
        ("nobody", "unknown"),
        ("acme-events", "not_pullable"),
        ("bare", "not_pullable"),
    ] {
        let err = h
            .service
            .run_connector(&ConnectorId::parse(id).unwrap())
            .await
            .unwrap_err();
        let kind = match err {
            PullError::UnknownConnector(_) => "unknown",
            PullError::NotPullable { .. } => "not_pullable",
            other => panic!("{other}"),
        };
        assert_eq!(kind, expected, "{id}");
    }
    assert_eq!(source.calls(1), 0);
    assert!(h.journal.runs().is_empty());
}

#[tokio::test]
async fn a_garbage_first_page_starts_no_run() {
    for body in [
        b"not json".to_vec(),
        br#"{"page": 1, "page_count": 3}"#.to_vec(),
        br#"{"export_id": 8821, "page": 1, "page_count": 3}"#.to_vec(),
        br#"{"export_id": "EXP-1", "page": 1, "page_count": 0}"#.to_vec(),
        br#"{"export_id": "EXP-1", "page": 1}"#.to_vec(),
        br#"{"export_id": "EXP-1", "page": 1, "page_count": -2}"#.to_vec(),
        br#"{"export_id": "EXP-1", "page": 2, "page_count": 3}"#.to_vec(),
        br#"{"export_id": "has space", "page": 1, "page_count": 3}"#.to_vec(),
        br#"{"export_id": "", "page": 1, "page_count": 3}"#.to_vec(),
        br#"{"export_id": "EXP-1", "page": 1, "page_count": 4000000000}"#.to_vec(),
    ] {
        let source = ScriptedSource::default();
        source.set_page(1, body.clone());
        let (h, _) = harness(source, 3);
        let err = h.service.run_connector(&acme()).await.unwrap_err();
        assert!(
            matches!(err, PullError::BadExport(_)),
            "{}: {err}",
            String::from_utf8_lossy(&body)
        );
        assert!(h.journal.events().is_empty());
    }
}

#[tokio::test]
async fn an_unreachable_first_page_starts_no_run() {
    let source = ScriptedSource::export("EXP-8821", 3);
    source.fail(1, u32::MAX, FetchError::Status(503));
    let (h, source) = harness(source, 2);
    let err = h.service.run_connector(&acme()).await.unwrap_err();
    assert!(
        matches!(
            err,
            PullError::FirstPage {
                attempts: 2,
                error: FetchError::Status(503)
            }
        ),
        "{err}"
    );
    assert_eq!(source.calls(1), 2);
    assert!(h.journal.events().is_empty());
}

#[test]
fn run_ids_are_valid_deterministic_and_distinct() {
    let acme = acme();
    assert_eq!(
        run_id_for(&acme, "EXP-8821").as_str(),
        "run-acme-eu.EXP-8821"
    );
    let slashed = run_id_for(&acme, "EXP/8821");
    assert!(slashed.as_str().starts_with("run-acme-eu.EXP-8821_"));
    assert_eq!(slashed, run_id_for(&acme, "EXP/8821"));
    assert_ne!(slashed, run_id_for(&acme, "EXP:8821"));
    let long = "X".repeat(500);
    let id = run_id_for(&acme, &long);
    assert_eq!(id.as_str().len(), 64);
    assert_ne!(id, run_id_for(&acme, &format!("{long}Y")));
    assert!(RunId::parse(run_id_for(&acme, "ÉXP 1").as_str()).is_ok());
}

#[test]
fn run_ids_of_two_connectors_never_meet_where_connector_and_export_join() {
    // Connector ids may contain `-`, so `run-{connector}-{export}` cannot tell where the
    // connector ends: `acme` + `eu-EXP-8821` and `acme-eu` + `EXP-8821` named one run.
    let acme = ConnectorId::parse("acme").unwrap();
    let acme_eu = ConnectorId::parse("acme-eu").unwrap();
    assert_ne!(
        run_id_for(&acme, "eu-EXP-8821"),
        run_id_for(&acme_eu, "EXP-8821")
    );
    // An export named like another export's digest form is not that export.
    let slashed = run_id_for(&acme_eu, "EXP/8821");
    let imitation = &slashed.as_str()["run-acme-eu-".len()..];
    assert_ne!(run_id_for(&acme_eu, imitation), slashed, "{imitation}");
}

#[test]
fn export_page_identities_keep_the_page_after_the_last_slash() {
    // The page is a decimal number without `/`, so `{export_id}/{page}` splits at its last
    // `/` even when the export id holds slashes of its own.
    let id = |export: &str, page: u32| SourceDeliveryId::export_page(export, page).unwrap();
    assert_eq!(id("EXP-8821", 2).as_str(), "EXP-8821/2");
    assert_eq!(id("EXP/8821", 2).as_str(), "EXP/8821/2");
    assert_ne!(id("A/1", 2), id("A", 12));
    assert_ne!(id("A/1", 2), id("A/12", 2));
}

#[test]
fn backoff_doubles_from_100ms_and_caps_at_2s() {
    let delays: Vec<u128> = (1..=7)
        .map(|a| backoff_delay(a, INITIAL_BACKOFF, MAX_BACKOFF).as_millis())
        .collect();
    assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
    assert_eq!(
        backoff_delay(u32::MAX, INITIAL_BACKOFF, MAX_BACKOFF),
        MAX_BACKOFF
    );
}

#[test]
fn pull_settings_default_their_numbers() {
    let settings: PullSettings = serde_json::from_str(
        r#"{"export_url": "https://supplier.example/exports", "credential_ref": "acme-eu/token"}"#,
    )
    .unwrap();
    assert_eq!(settings.run_deadline_seconds, 900);
    assert_eq!(settings.page_timeout_ms, 5000);
    assert_eq!(settings.max_attempts, 3);
    // A connector without pull settings reads and writes as before.
    let config = acme_eu("http://x", 1);
    let mut value = serde_json::to_value(&config).unwrap();
    value.as_object_mut().unwrap().remove("pull");
    let plain: ConnectorConfig = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(plain.pull, None);
    assert_eq!(serde_json::to_value(&plain).unwrap(), value);
}
