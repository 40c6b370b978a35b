//! The read side over a test's tables: projection, query, the evidence stream, and a
//! projection store that records every removal and replacement.

use crate::{engine_endpoints, unique_prefix, TestEnv, TENANT};
use feedsafe::aws::dynamo::Item;
use feedsafe::domain::ids::TenantId;
use local_stack::resources::{create_resources, CreateOptions};
use std::sync::Arc;
use template_spec::{read_template, template_path};

impl TestEnv {
    pub fn projection_table(&self) -> String {
        self.resources
            .table("ProjectionTable")
            .expect("projection table")
            .to_owned()
    }

    pub fn projection_store(&self) -> Arc<feedsafe::aws::projection_table::DynamoProjectionStore> {
        Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            self.clients.dynamodb.clone(),
            self.projection_table(),
        ))
    }

    pub fn projector(&self) -> feedsafe::protocols::projection::Projector {
        self.projector_into(self.projection_store())
    }

    pub fn projector_into(
        &self,
        projection: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
    ) -> feedsafe::protocols::projection::Projector {
        feedsafe::protocols::projection::Projector::new(
            self.store.clone(),
            projection,
            self.store.clone(),
        )
    }

    pub fn query(&self) -> feedsafe::protocols::query::QueryService {
        feedsafe::protocols::query::QueryService::new(self.store.clone(), self.projection_store())
    }

    pub async fn stream(&self) -> local_stack::events::StreamReader {
        let (dynamodb, _) = engine_endpoints();
        local_stack::events::StreamReader::open(&self.clients, &dynamodb, &self.table)
            .await
            .expect("evidence stream")
    }

    /// Reads the stream until it is quiet and applies every record in batches of 100, as the
    /// event source would.
    pub async fn drain(
        &self,
        stream: &mut local_stack::events::StreamReader,
        projector: &feedsafe::protocols::projection::Projector,
    ) -> Vec<local_stack::events::StreamRecordImages> {
        let mut all = Vec::new();
        let mut quiet = 0;
        while quiet < 2 {
            let records = stream.poll().await.expect("poll stream");
            if records.is_empty() {
                quiet += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            quiet = 0;
            for batch in records.chunks(100) {
                let changes: Vec<_> = batch
                    .iter()
                    .map(|(name, old, new, _)| {
                        feedsafe::aws::stream_records::classify(name, old.clone(), new.clone())
                            .expect("classify")
                    })
                    .collect();
                projector
                    .apply_batch(&changes)
                    .await
                    .expect("projection applies");
            }
            all.extend(records);
        }
        all
    }

    pub fn reader(&self) -> feedsafe::protocols::query::Principal {
        feedsafe::protocols::query::Principal {
            tenant: TenantId::parse(TENANT).unwrap(),
            scopes: vec!["offers:read".into()],
            subject: None,
        }
    }

    pub async fn table_items(&self, table: &str) -> Vec<Item> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .clients
                .dynamodb
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return items;
            }
        }
    }
}

/// The observation id in a projection basis (`{observed_at}#{observation_id}`).
fn basis_observation(basis: &str) -> String {
    basis.rsplit('#').next().unwrap_or_default().to_owned()
}

/// Every removal and replacement of a projection row, for tests that must prove a row was
/// never dropped or rolled back. Wraps the real projection table.
pub struct RecordingProjection {
    pub inner: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>,
    /// (item, removed observation id)
    pub removed: std::sync::Mutex<Vec<(String, String)>>,
    /// (item, previous observation id, new observation id)
    pub replaced: std::sync::Mutex<Vec<(String, String, String)>>,
}

impl RecordingProjection {
    pub fn new(inner: Arc<feedsafe::aws::projection_table::DynamoProjectionStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            removed: Default::default(),
            replaced: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl feedsafe::protocols::projection::ProjectionStore for RecordingProjection {
    async fn current(
        &self,
        key: &feedsafe::protocols::projection::ProjectionKey,
    ) -> Result<
        Option<feedsafe::protocols::projection::ProjectedOffer>,
        feedsafe::protocols::ports::StoreError,
    > {
        self.inner.current(key).await
    }

    async fn replace(
        &self,
        offer: &feedsafe::protocols::projection::ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        let done = self.inner.replace(offer, expected).await?;
        if let (true, Some(before)) = (done, expected) {
            self.replaced.lock().unwrap().push((
                offer.observation.item.clone(),
                basis_observation(before),
                offer.observation.observation_id.to_string(),
            ));
        }
        Ok(done)
    }

    async fn remove(
        &self,
        key: &feedsafe::protocols::projection::ProjectionKey,
        expected: &str,
    ) -> Result<bool, feedsafe::protocols::ports::StoreError> {
        let done = self.inner.remove(key, expected).await?;
        if done {
            self.removed
                .lock()
                .unwrap()
                .push((key.item.clone(), basis_observation(expected)));
        }
        Ok(done)
    }

    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<
        Vec<feedsafe::protocols::projection::ProjectedOffer>,
        feedsafe::protocols::ports::StoreError,
    > {
        self.inner.offers(tenant, item).await
    }

    fn held_claims(&self) -> &dyn feedsafe::protocols::projection::HeldClaims {
        self.inner.as_ref()
    }

    async fn items_of_source(
        &self,
        source: &feedsafe::domain::model::SourceRef,
    ) -> Result<Vec<String>, feedsafe::protocols::ports::StoreError> {
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

impl TestEnv {
    /// Reads the stream until it is quiet and returns every record without applying any.
    pub async fn collect(
        &self,
        stream: &mut local_stack::events::StreamReader,
    ) -> Vec<local_stack::events::StreamRecordImages> {
        let mut all = Vec::new();
        let mut quiet = 0;
        while quiet < 2 {
            let records = stream.poll().await.expect("poll stream");
            if records.is_empty() {
                quiet += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            quiet = 0;
            all.extend(records);
        }
        all
    }

    /// Another, empty projection table shaped like the template's (for side-by-side projections).
    pub async fn extra_projection_table(
        &self,
    ) -> Arc<feedsafe::aws::projection_table::DynamoProjectionStore> {
        let mut spec = read_template(&template_path()).expect("template.yaml parses");
        spec.tables.retain(|t| t.logical_id == "ProjectionTable");
        spec.queues.clear();
        spec.buckets.clear();
        let created = create_resources(
            &self.clients,
            &spec,
            &CreateOptions {
                prefix: unique_prefix(),
                ttl: false,
            },
        )
        .await
        .expect("projection table created");
        Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            self.clients.dynamodb.clone(),
            created.table("ProjectionTable").expect("table"),
        ))
    }
}
