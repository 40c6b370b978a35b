//! A panic while handling one item is that item's failure only
//! (docs/adr/0011-a-panic-is-one-items-failure.md): proven through test-only seams that panic (a
//! `Faults` that panics at a crash point, a projection store that panics for one item), against the
//! real engines.

use acceptance::*;
use feedsafe::domain::ids::TenantId;
use feedsafe::domain::model::SourceRef;
use feedsafe::lambda::stream::handle_stream_batch;
use feedsafe::protocols::ports::{CrashPoint, Faults, StoreError};
use feedsafe::protocols::projection::{ProjectedOffer, ProjectionKey, ProjectionStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Panics at the first crash point of the first message that reaches it, as a defect would.
#[derive(Default)]
struct PanicOnce(AtomicBool);

impl Faults for PanicOnce {
    fn crash_at(&self, point: CrashPoint) -> bool {
        if point == CrashPoint::BeforeArtifact && !self.0.swap(true, Ordering::SeqCst) {
            panic!("seam: a defect while ingesting this message");
        }
        false
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_that_panics_is_quarantined_and_its_batch_goes_on() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let faults = Arc::new(PanicOnce::default());
    let service = env.service_with(
        Arc::new(feedsafe::protocols::ports::SystemClock),
        faults.clone(),
    );
    for (i, sku) in ["ISO-A", "ISO-B", "ISO-C"].iter().enumerate() {
        let body = export_page(
            &format!("EXP-ISO-{i}"),
            1,
            1,
            vec![offer(sku, 5, "1.00", "2026-11-29T08:00:00Z")],
        );
        env.send(
            "IngestQueue",
            &plain_envelope(&acme, &format!("EXP-ISO-{i}/1"), &body),
        )
        .await;
    }
    let mut handled = 0;
    for _ in 0..30 {
        let (received, failed) = env.pump_once("IngestQueue", &service, 5).await;
        assert_eq!(failed, 0, "no message of the batch is handed back");
        handled += received;
        if handled >= 3 {
            break;
        }
    }
    assert!(faults.0.load(Ordering::SeqCst), "the seam fired");
    assert_eq!(handled, 3);
    let entries = env.quarantine().await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].reason_code, "internal_error");
    assert!(
        entries[0].message.contains("seam: a defect"),
        "{}",
        entries[0].message
    );
    let evidence = env.read_object(&entries[0].evidence_key).await;
    assert!(
        String::from_utf8_lossy(&evidence).contains("EXP-ISO-"),
        "the message is the evidence"
    );
    assert_eq!(
        env.observations().await.len(),
        2,
        "the other two are stored"
    );
    assert_eq!(env.queue_depth("IngestQueue").await, (0, 0));
    assert_eq!(env.queue_depth("IngestDLQ").await, (0, 0));
}

/// The real projection store, except that writing a row of `item` panics.
struct PanicsFor {
    inner: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
    item: &'static str,
}

#[async_trait::async_trait]
impl ProjectionStore for PanicsFor {
    async fn current(&self, key: &ProjectionKey) -> Result<Option<ProjectedOffer>, StoreError> {
        self.inner.current(key).await
    }
    async fn replace(
        &self,
        offer: &ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, StoreError> {
        if offer.observation.item.contains(self.item) {
            panic!("seam: a defect while projecting {}", self.item);
        }
        self.inner.replace(offer, expected).await
    }
    async fn remove(&self, key: &ProjectionKey, expected: &str) -> Result<bool, StoreError> {
        self.inner.remove(key, expected).await
    }
    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<ProjectedOffer>, StoreError> {
        self.inner.offers(tenant, item).await
    }
    fn held_claims(&self) -> &dyn feedsafe::protocols::projection::HeldClaims {
        self.inner.as_ref()
    }
    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError> {
        self.inner.items_of_source(source).await
    }
    async fn items_of_part(
        &self,
        tenant: &feedsafe::domain::ids::TenantId,
        part: &feedsafe::domain::item::CanonicalItem,
    ) -> Result<Vec<String>, feedsafe::protocols::ports::StoreError> {
        self.inner.items_of_part(tenant, part).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_record_that_panics_is_the_batch_item_failure_and_the_rest_is_projected() {
    let env = spawn_env(true).await;
    let acme = acme_eu();
    env.seed(&acme).await;
    let mut stream = env.stream().await;
    for (i, sku) in ["PRJ-A", "PRJ-PANIC", "PRJ-B"].iter().enumerate() {
        let body = export_page(
            &format!("EXP-PRJ-{i}"),
            1,
            1,
            vec![offer(sku, 5, "1.00", "2026-11-29T08:00:00Z")],
        );
        env.service_ingest(
            &env.service(),
            &plain_envelope(&acme, &format!("EXP-PRJ-{i}/1"), &body),
        )
        .await;
    }
    let records = env.collect(&mut stream).await;
    let projector = feedsafe::protocols::projection::Projector::new(
        env.store.clone(),
        Arc::new(PanicsFor {
            inner: env.projection_store(),
            item: "PRJ-PANIC",
        }),
        env.store.clone(),
    );
    let response =
        handle_stream_batch(&projector, local_stack::events::stream_event(&records)).await;
    assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    let failed = response.batch_item_failures[0]
        .item_identifier
        .clone()
        .unwrap_or_default();
    let at = records
        .iter()
        .position(|(_, _, _, sequence)| *sequence == failed)
        .expect("the failure names a record of the batch");
    assert!(
        format!("{:?}", records[at].2).contains("PRJ-PANIC"),
        "the failed record is the panicking item's"
    );
    // The event source resumes after the parked record, as it does once retries are exhausted.
    let rest = handle_stream_batch(
        &projector,
        local_stack::events::stream_event(&records[at + 1..]),
    )
    .await;
    assert!(rest.batch_item_failures.is_empty(), "{rest:?}");
    let query = env.query();
    for (sku, projected) in [("PRJ-A", true), ("PRJ-PANIC", false), ("PRJ-B", true)] {
        let now = feedsafe::domain::timestamp::Timestamp::now();
        let answer = query
            .offers(&env.reader(), sku, None, now)
            .await
            .expect("offers");
        let answer = serde_json::to_value(answer).unwrap();
        let found = answer["offers"].as_array().is_some_and(|o| !o.is_empty());
        assert_eq!(found, projected, "{sku}: {answer}");
    }
}
