use super::super::fakes::{Directory, FixedClock, Journal, Ledger, NoClaims, Queue};
use super::*;
use crate::domain::definition::Definition;
use crate::domain::ids::{ConnectorId, TenantId};
use crate::intake::poller::credentials::LocalPullCredentials;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const TOKEN: &str = "local-sample-token-4711";
const BASE: &str = "https://api.distributor.example/v2/inventory";

/// A request as the API saw it: its URL and its headers.
type Seen = (String, Vec<(String, String)>);

/// Answers by URL; records the headers each request carried.
#[derive(Default)]
struct Api {
    pages: Mutex<HashMap<String, Vec<PageResponse>>>,
    seen: Mutex<Vec<Seen>>,
}

impl Api {
    fn answer(&self, url: &str, response: PageResponse) {
        let mut pages = self.pages.lock().unwrap();
        pages.entry(url.to_owned()).or_default().push(response);
    }
    fn ok(&self, url: &str, body: Value) {
        self.answer(url, ok(body));
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn ok(body: Value) -> PageResponse {
    PageResponse {
        status: 200,
        body: body.to_string().into_bytes(),
        ..PageResponse::default()
    }
}

#[async_trait]
impl PageSource for Api {
    async fn fetch_url(
        &self,
        _: &PullSettings,
        url: &str,
        headers: &[(String, Secret)],
        _: Option<&str>,
    ) -> Result<PageResponse, FetchError> {
        let shown = headers
            .iter()
            .map(|(n, v)| (n.clone(), v.expose().to_owned()))
            .collect();
        self.seen.lock().unwrap().push((url.to_owned(), shown));
        let mut pages = self.pages.lock().unwrap();
        let answers = pages.get_mut(url).ok_or(FetchError::Status(404))?;
        // The last answer repeats; earlier ones are used once each.
        match answers.len() {
            0 => Err(FetchError::Status(404)),
            1 => Ok(answers[0].clone()),
            _ => Ok(answers.remove(0)),
        }
    }
}

fn distributor(transport: Value, identity: Value) -> Value {
    json!({
        "definition_format": 1,
        "connector": "distri-api",
        "source_account": "ACC-99120",
        "transport": transport,
        "format": {"kind": "json", "rows": "$.data.items[*]"},
        "fields": {
            "sku": {"path": "$.mpn"},
            "quantity": {"path": "$.stock", "pattern": "^(\\d+) In Stock$"},
            "unit": {"constant": "each"},
            "price": {"path": "$.price"},
            "currency": {"constant": "USD"},
            "observed_at": {"constant": "2026-11-29T08:00:00Z"}
        },
        "identity": identity
    })
}

fn cursor_transport(extra: Value) -> Value {
    let mut transport = json!({
        "kind": "pull", "url": BASE,
        "auth": {"kind": "bearer", "secret_ref": "distri/token"},
        "pagination": {"kind": "cursor", "path": "$.meta.next_cursor", "param": "cursor"},
        "max_attempts": 3
    });
    if let (Some(t), Some(e)) = (transport.as_object_mut(), extra.as_object()) {
        t.extend(e.clone());
    }
    transport
}

fn page(skus: &[&str], next: Option<&str>) -> Value {
    let items: Vec<Value> = skus
        .iter()
        .map(|s| json!({"mpn": s, "stock": "5 In Stock", "price": "1.00"}))
        .collect();
    json!({"meta": {"next_cursor": next}, "data": {"items": items}})
}

struct Rig {
    service: PullService,
    journal: Arc<Journal>,
    api: Arc<Api>,
}

fn rig(document: Value, token: &str) -> Rig {
    let definition = Definition::read(&document).unwrap_or_else(|p| panic!("{p:?}"));
    let config = definition
        .to_config(TenantId::parse("demo").unwrap(), 1)
        .unwrap();
    let journal = Arc::new(Journal::default());
    let api = Arc::new(Api::default());
    let secrets =
        LocalPullCredentials::from_json(&json!({"distri/token": token}).to_string()).unwrap();
    let service = PullService::new(
        Arc::new(Directory(HashMap::from([(
            config.connector.clone(),
            config,
        )]))),
        Arc::new(Ledger(journal.clone())),
        Arc::new(super::super::fakes::ScriptedSource::default()),
        Arc::new(Queue(journal.clone())),
        Arc::new(NoClaims),
        Arc::new(FixedClock),
    )
    .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
    .with_defined_pulls(api.clone(), Arc::new(secrets));
    Rig {
        service,
        journal,
        api,
    }
}

fn connector() -> ConnectorId {
    ConnectorId::parse("distri-api").unwrap()
}

fn cursor_rig(extra: Value) -> Rig {
    let rig = rig(
        distributor(cursor_transport(extra), json!({"kind": "cursor"})),
        TOKEN,
    );
    rig.api.ok(BASE, page(&["A-1", "A-2"], Some("c2")));
    rig.api
        .ok(&format!("{BASE}?cursor=c2"), page(&["B-1"], Some("c 3")));
    rig.api
        .ok(&format!("{BASE}?cursor=c%203"), page(&["C-1"], None));
    rig
}

#[tokio::test]
async fn a_cursor_pull_names_its_run_by_slot_and_its_pages_by_cursor() {
    let rig = cursor_rig(json!({}));
    let report = rig.service.run_connector(&connector()).await.unwrap();
    assert_eq!(
        report.run_id.as_str(),
        "run-distri-api.slot_20261129T080000Z"
    );
    assert_eq!(
        (report.enqueued.clone(), report.page_count),
        (vec![1, 2, 3], 3)
    );
    assert!(report.failed.is_empty(), "{report:?}");
    let keys = rig.journal.keys();
    let expected: Vec<String> = ["", "c2", "c 3"]
        .iter()
        .map(|cursor| {
            let id = SourceDeliveryId::pull_cursor("2026-11-29T08:00:00Z", cursor);
            format!("demo/distri-api/ACC-99120/{id}")
        })
        .collect();
    assert_eq!(keys, expected);
    assert_eq!(
        keys[1],
        "demo/distri-api/ACC-99120/cursor:2026-11-29T08:00:00Z/c2"
    );
    let envelopes = rig.journal.envelopes();
    let counts: Vec<Option<u32>> = envelopes
        .iter()
        .map(|e| e.run.as_ref().and_then(|r| r.page_count))
        .collect();
    assert_eq!(counts, vec![None, None, Some(3)]);
    // Every request carried the bearer credential.
    for (_, headers) in rig.api.seen() {
        assert_eq!(
            headers,
            vec![("authorization".to_owned(), format!("Bearer {TOKEN}"))]
        );
    }
    // The run was started without a count, then counted.
    let runs = rig.journal.runs();
    assert_eq!(
        runs.iter().map(|r| r.page_count).collect::<Vec<_>>(),
        vec![None, Some(3)]
    );
    assert!(runs
        .iter()
        .all(|r| r.credential_ref.as_deref() == Some("distri/token")));
    // A retry of the same scheduled invocation names the same run and deliveries.
    let again = rig.service.run_connector(&connector()).await.unwrap();
    assert_eq!(again.run_id, report.run_id);
    assert_eq!(rig.journal.keys()[3..], keys[..]);
    let located = rig.service.locate(&connector()).await.unwrap();
    assert_eq!(located.run_id, report.run_id);
}

#[tokio::test]
async fn a_refused_credential_fails_the_run_without_showing_it() {
    let rig = rig(
        distributor(cursor_transport(json!({})), json!({"kind": "cursor"})),
        "wrong-token-0815",
    );
    rig.api.answer(
        BASE,
        PageResponse {
            status: 401,
            ..PageResponse::default()
        },
    );
    let error = rig.service.run_connector(&connector()).await.unwrap_err();
    assert!(
        matches!(
            error,
            PullError::FirstPage {
                attempts: 1,
                error: FetchError::Status(401)
            }
        ),
        "{error:?}"
    );
    let shown = format!("{error} {error:?} {:?}", rig.journal.runs());
    assert!(!shown.contains("wrong-token-0815"), "{shown}");
    assert!(rig.journal.envelopes().is_empty());
    // The run is recorded with its first page missing.
    let runs = rig.journal.runs();
    assert_eq!(runs.last().and_then(|r| r.page_count), Some(1));

    // A reference the store does not hold.
    let document = distributor(
        cursor_transport(json!({"auth": {"kind": "bearer", "secret_ref": "missing/ref"}})),
        json!({"kind": "cursor"}),
    );
    let rig = rig_with(document);
    let error = rig.service.run_connector(&connector()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"credential "missing/ref" does not exist"#
    );
    assert!(
        rig.api.seen().is_empty(),
        "nothing is sent without the credential"
    );
}

fn rig_with(document: Value) -> Rig {
    rig(document, TOKEN)
}

#[tokio::test]
async fn retry_after_is_waited_and_the_rate_limit_spaces_requests() {
    let rig = cursor_rig(json!({"rate_limit_per_minute": 600}));
    let second = format!("{BASE}?cursor=c2");
    let mut busy = PageResponse {
        status: 429,
        retry_after: Some("1".into()),
        ..PageResponse::default()
    };
    rig.api.pages.lock().unwrap().insert(
        second.clone(),
        vec![busy.clone(), ok(page(&["B-1"], Some("c 3")))],
    );
    let started = Instant::now();
    let report = rig.service.run_connector(&connector()).await.unwrap();
    assert_eq!(report.enqueued, vec![1, 2, 3]);
    // One second for Retry-After, 100 ms between the other requests.
    assert!(
        started.elapsed() >= Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rig.api.seen().len(), 4);

    // A Retry-After past the run's deadline is not waited for.
    let rig = cursor_rig(json!({"run_deadline_seconds": 60}));
    busy.retry_after = Some("120".into());
    rig.api.pages.lock().unwrap().insert(second, vec![busy]);
    let started = Instant::now();
    let report = rig.service.run_connector(&connector()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(report.enqueued, vec![1]);
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].1.contains("HTTP 429"), "{report:?}");
    assert_eq!(report.page_count, 2);
}

#[tokio::test]
async fn a_guard_stop_leaves_the_run_a_page_short() {
    let transport = json!({
        "kind": "pull", "url": BASE,
        "pagination": {"kind": "link_header"}
    });
    let rig = rig(distributor(transport, json!({"kind": "fallback"})), TOKEN);
    let mut first = ok(page(&["A-1"], None));
    first.link = Some(r#"<https://evil.example/v2/inventory?p=2>; rel="next""#.into());
    rig.api.answer(BASE, first);
    let report = rig.service.run_connector(&connector()).await.unwrap();
    assert_eq!(report.enqueued, vec![1]);
    assert_eq!(report.page_count, 2);
    assert_eq!(report.failed[0].0, 2);
    assert!(
        report.stopped.as_deref().unwrap().contains("origin"),
        "{report:?}"
    );
    assert!(rig
        .api
        .seen()
        .iter()
        .all(|(url, headers)| url == BASE && headers.is_empty()));
    let key = &rig.journal.keys()[0];
    assert!(key.starts_with("demo/distri-api/ACC-99120/fb-"), "{key}");
    let envelope = &rig.journal.envelopes()[0];
    assert_eq!(envelope.delivery.strength, IdentityStrength::Fallback);
}

#[tokio::test]
async fn an_export_page_identity_reads_its_export_from_page_1() {
    let transport = json!({
        "kind": "pull", "url": BASE,
        "pagination": {"kind": "page_number", "param": "page", "first": 1}
    });
    let rig = rig(
        distributor(
            transport,
            json!({"kind": "export_page", "path": "$.meta.export"}),
        ),
        TOKEN,
    );
    let with_export = |skus: &[&str]| {
        let mut body = page(skus, None);
        body["meta"]["export"] = json!("EXP-77");
        body
    };
    rig.api.ok(&format!("{BASE}?page=1"), with_export(&["A-1"]));
    rig.api.ok(&format!("{BASE}?page=2"), with_export(&["B-1"]));
    rig.api.ok(&format!("{BASE}?page=3"), with_export(&[]));
    let located = rig.service.locate(&connector()).await.unwrap();
    assert_eq!(located.run_id.as_str(), "run-distri-api.EXP-77");
    let report = rig.service.run_connector(&connector()).await.unwrap();
    assert_eq!(
        (report.enqueued.clone(), report.page_count),
        (vec![1, 2], 2)
    );
    assert_eq!(
        rig.journal.keys(),
        vec![
            "demo/distri-api/ACC-99120/EXP-77/1",
            "demo/distri-api/ACC-99120/EXP-77/2"
        ]
    );
    assert_eq!(
        rig.journal.runs().last().and_then(|r| r.page_count),
        Some(2)
    );
}
