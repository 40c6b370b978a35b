//! Stream redelivery, rebuild, reads without side effects, and the response contract.

use acceptance::*;
use feedsafe::aws::dynamo::Item;
use feedsafe::aws::projection_table::DynamoProjectionStore;
use feedsafe::domain::connector::Publication;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::protocols::http::HttpRequest;
use feedsafe::protocols::projection::Projector;
use local_stack::events::StreamRecordImages;
use local_stack::resources::{create_resources, CreateOptions};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use template_spec::{read_template, template_path};

/// Several items, two sources, a late arrival, a 100-row staged delivery.
pub(crate) async fn scenario(env: &TestEnv) -> Vec<StreamRecordImages> {
    let acme = acme_eu();
    let beta = connector("beta-eu", "ACC-9", Publication::PerPage);
    env.seed(&acme).await;
    env.seed(&beta).await;
    let service = env.service();
    let mut stream = env.stream().await;
    let deliveries = vec![
        page_envelope(
            &acme,
            "EXP-1",
            1,
            1,
            &export_page(
                "EXP-1",
                1,
                1,
                vec![
                    offer("AX-440-R2", 6, "820.00", "2026-11-29T08:00:00Z"),
                    offer("BX-1", 1, "5.00", "2026-11-29T08:00:00Z"),
                ],
            ),
        ),
        page_envelope(
            &acme,
            "EXP-2",
            1,
            1,
            &export_page(
                "EXP-2",
                1,
                1,
                vec![offer("AX-440-R2", 4, "820.00", "2026-11-29T09:00:00Z")],
            ),
        ),
        page_envelope(
            &acme,
            "EXP-0",
            1,
            1,
            &export_page(
                "EXP-0",
                1,
                1,
                vec![offer("AX-440-R2", 9, "820.00", "2026-11-29T07:00:00Z")],
            ),
        ),
        page_envelope(
            &beta,
            "B-1",
            1,
            1,
            &export_page(
                "B-1",
                1,
                1,
                vec![
                    offer("AX-440-R2", 2, "799.00", "2026-11-29T08:30:00Z"),
                    offer("BX-1", 7, "4.50", "2026-11-29T10:00:00Z"),
                ],
            ),
        ),
        page_envelope(&beta, "B-BIG", 1, 1, &crate::ingest::big_page("B-BIG", 100)),
    ];
    for envelope in &deliveries {
        env.service_ingest(&service, envelope).await;
    }
    // Collect the stream without applying it.
    let mut records = Vec::new();
    let mut quiet = 0;
    while quiet < 2 {
        let batch = stream.poll().await.unwrap();
        if batch.is_empty() {
            quiet += 1;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        } else {
            quiet = 0;
            records.extend(batch);
        }
    }
    records
}

/// An environment with `scenario` stored and projected, as the read tests start.
pub(crate) async fn projected_scenario() -> TestEnv {
    let env = spawn_env(true).await;
    let records = scenario(&env).await;
    apply(&env.projector(), &records).await;
    env
}

/// Applies the records in stream batches of 100, as the event source hands them over.
pub(crate) async fn apply(projector: &Projector, records: &[StreamRecordImages]) {
    for batch in records.chunks(100) {
        let changes: Vec<_> = batch
            .iter()
            .map(|(name, old, new, _)| {
                feedsafe::aws::stream_records::classify(name, old.clone(), new.clone()).unwrap()
            })
            .collect();
        projector.apply_batch(&changes).await.unwrap();
    }
}

/// The rows of a projection table without their write time.
async fn rows(env: &TestEnv, table: &str) -> BTreeMap<String, Value> {
    env.table_items(table)
        .await
        .into_iter()
        .map(|mut item| {
            item.remove("projected_at");
            let key = format!("{:?}|{:?}", item.get("pk"), item.get("sk"));
            let value: Value = serde_dynamo::from_item(item).unwrap();
            (key, value)
        })
        .collect()
}

async fn extra_projection_table(env: &TestEnv, name: &str) -> (String, Arc<DynamoProjectionStore>) {
    let mut spec = read_template(&template_path()).unwrap();
    spec.tables.retain(|t| t.logical_id == "ProjectionTable");
    spec.queues.clear();
    spec.buckets.clear();
    let prefix = format!("{}-{name}", env.table.trim_end_matches("-EvidenceTable"));
    let created = create_resources(&env.clients, &spec, &CreateOptions { prefix, ttl: false })
        .await
        .unwrap();
    let table = created.table("ProjectionTable").unwrap().to_owned();
    (
        table.clone(),
        Arc::new(DynamoProjectionStore::new(
            env.clients.dynamodb.clone(),
            table,
        )),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn replayed_and_reversed_stream_batches_and_rebuild_give_the_same_projection() {
    let env = spawn_env(true).await;
    let records = scenario(&env).await;
    assert!(
        records.len() > 100,
        "the scenario produced {} stream records",
        records.len()
    );

    apply(&env.projector(), &records).await;
    let once = rows(&env, &env.projection_table()).await;
    assert!(once.len() >= 4 + 100, "{} rows", once.len());

    let (thrice_table, thrice) = extra_projection_table(&env, "thrice").await;
    let projector = env.projector_into(thrice);
    for _ in 0..3 {
        apply(&projector, &records).await;
    }
    assert_eq!(
        rows(&env, &thrice_table).await,
        once,
        "the same batch applied 3 times"
    );

    let (reversed_table, reversed) = extra_projection_table(&env, "reversed").await;
    let backwards: Vec<_> = records.iter().rev().cloned().collect();
    apply(&env.projector_into(reversed), &backwards).await;
    assert_eq!(
        rows(&env, &reversed_table).await,
        once,
        "applied in reverse order"
    );

    let (rebuilt_table, rebuilt) = extra_projection_table(&env, "rebuilt").await;
    let projector = env.projector_into(rebuilt);
    let items = env.store.observed_items().await.unwrap();
    assert!(items.len() > 100, "{} items", items.len());
    projector.rebuild_all(items).await.unwrap();
    assert_eq!(
        rows(&env, &rebuilt_table).await,
        once,
        "rebuild equals the incremental projection"
    );

    // The winners are the rule's: greatest observed_at per source, not the latest arrival.
    let current: Vec<(String, u64)> = once
        .values()
        .filter(|r| r["observation"]["item"] == "AX-440-R2~each~new")
        .map(|r| {
            (
                r["observation"]["connector"].as_str().unwrap().to_owned(),
                r["observation"]["quantity"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(current.len(), 2);
    assert!(current.contains(&("acme-eu".into(), 4)) && current.contains(&("beta-eu".into(), 2)));
}

fn get(path: &str, query: &[(&str, &str)], env: &TestEnv) -> HttpRequest {
    read_request(&env.reader(), path, query)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_reads_change_no_item_no_queue_and_no_object() {
    let env = projected_scenario().await;
    let before = Stored::of(&env).await;
    let any_observation = env
        .observations()
        .await
        .remove(0)
        .observation_id
        .to_string();

    let service = env.query();
    let paths = [
        ("/v1/items/AX-440-R2/offers", vec![]),
        ("/v1/items/AX-440-R2/offers", vec![("max_age_seconds", "1")]),
        ("/v1/items/BX-1/observations", vec![("limit", "2")]),
        ("/v1/items/NOPE-1/offers", vec![]),
    ];
    for i in 0..100 {
        let request = match i % 5 {
            4 => get(&format!("/v1/observations/{any_observation}"), &[], &env),
            k => get(paths[k].0, &paths[k].1, &env),
        };
        let response = handle_read(&service, request, Timestamp::now()).await;
        assert_eq!(response.status, 200, "{}", response.body);
    }

    Stored::of(&env).await.assert_unchanged_since(&before);
}

/// Everything a read could change: the evidence and projection items, the queues' depths and
/// the raw bucket's object versions.
#[derive(PartialEq)]
pub(crate) struct Stored {
    evidence: Vec<Item>,
    projection: Vec<Item>,
    queues: ((i64, i64), (i64, i64)),
    objects: Vec<String>,
}

impl Stored {
    pub(crate) async fn of(env: &TestEnv) -> Self {
        Stored {
            evidence: env.table_items(&env.table).await,
            projection: env.table_items(&env.projection_table()).await,
            queues: (
                env.queue_depth("IngestQueue").await,
                env.queue_depth("IngestDLQ").await,
            ),
            objects: env.object_versions("").await,
        }
    }

    /// A snapshot once the stack has stopped writing: two in a row, 500 ms apart, the same.
    /// (A stack still finishing a pull run or a projection would change the snapshot by itself.)
    pub(crate) async fn settled(env: &TestEnv) -> Self {
        let start = std::time::Instant::now();
        let mut last = Stored::of(env).await;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let now = Stored::of(env).await;
            if now == last {
                return now;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "the stored state kept changing for 30 s"
            );
            last = now;
        }
    }

    pub(crate) fn assert_unchanged_since(&self, before: &Stored) {
        assert_eq!(self.evidence, before.evidence, "no evidence item changed");
        assert_eq!(
            self.projection, before.projection,
            "no projection row changed"
        );
        assert_eq!(self.queues, before.queues, "no message sent or taken");
        assert_eq!(self.objects, before.objects, "no object written");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_carry_provenance_trust_and_freshness_and_name_the_gap() {
    let env = projected_scenario().await;
    let service = env.query();
    let now = Timestamp::now();

    let response = handle_read(
        &service,
        get(
            "/v1/items/AX-440-R2/offers",
            &[("max_age_seconds", "3600")],
            &env,
        ),
        now,
    )
    .await;
    assert_eq!(response.status, 200);
    let body: Value = serde_json::from_str(&response.body).unwrap();
    let offers = body["offers"].as_array().unwrap();
    assert_eq!(offers.len(), 2);
    for offer in offers {
        for field in [
            "observation_id",
            "item",
            "connector",
            "source_account",
            "delivery_key",
            "identity_strength",
            "quantity",
            "quantity_basis",
            "price",
            "currency",
            "observed_at",
            "retrieved_at",
            "run_id",
            "claim",
            "verification",
            "recorded_at",
            "dedup_confidence",
            "freshness",
        ] {
            assert!(offer.get(field).is_some(), "offer lacks {field}: {offer}");
        }
        assert_eq!(offer["claim"], "source_reported");
        assert_eq!(
            offer["verification"],
            serde_json::json!({"state": "unverified"})
        );
        assert!(offer["recorded_at"].is_string(), "{offer}");
        assert_eq!(offer["identity_strength"], "source");
        assert_eq!(offer["dedup_confidence"], "within_horizon");
        assert!(offer["price"].is_string());
        assert_eq!(
            offer["freshness"]["stale"], true,
            "observed on 2026-11-29, older than an hour"
        );
    }
    let gaps = body["freshness_gaps"]
        .as_array()
        .expect("a freshness gap when max_age is exceeded");
    assert_eq!(gaps.len(), 2);
    let acme_gap = gaps.iter().find(|g| g["connector"] == "acme-eu").unwrap();
    assert_eq!(acme_gap["refresh"]["action"], "start_pull_run");
    assert_eq!(acme_gap["refresh"]["path"], "/v1/connectors/acme-eu/runs");
    assert_eq!(acme_gap["max_age_seconds"], 3600);

    // Without max_age nothing is flagged stale and there is no gap.
    let relaxed: Value = serde_json::from_str(
        &handle_read(&service, get("/v1/items/AX-440-R2/offers", &[], &env), now)
            .await
            .body,
    )
    .unwrap();
    assert!(relaxed.get("freshness_gaps").is_none());

    // Observation by id: provenance, never the payload.
    let id = offers[0]["observation_id"].as_str().unwrap();
    let one: Value = serde_json::from_str(
        &handle_read(
            &service,
            get(&format!("/v1/observations/{id}"), &[], &env),
            now,
        )
        .await
        .body,
    )
    .unwrap();
    assert!(
        one["provenance"]["artifact_key"].is_string()
            && one["provenance"]["artifact_sha256"].is_string()
    );
    assert!(one.get("payload").is_none() && one.get("body").is_none());

    // Errors: stable codes; another tenant sees nothing.
    let mut other = get(&format!("/v1/observations/{id}"), &[], &env);
    other.principal = Some(feedsafe::protocols::query::Principal {
        tenant: feedsafe::domain::ids::TenantId::parse("other").unwrap(),
        scopes: vec!["offers:read".into()],
        subject: None,
    });
    let denied = handle_read(&service, other, now).await;
    assert_eq!(denied.status, 404);
    assert!(denied.body.contains("\"not_found\""));
    let mut anonymous = get("/v1/items/AX-440-R2/offers", &[], &env);
    anonymous.principal = None;
    let response = handle_read(&service, anonymous, now).await;
    assert_eq!(response.status, 401);
    assert!(response.body.contains("\"unauthorized\""));
    let bad = handle_read(
        &service,
        get(
            "/v1/items/AX-440-R2/offers",
            &[("max_age_seconds", "-5")],
            &env,
        ),
        now,
    )
    .await;
    assert_eq!(bad.status, 400);
}
