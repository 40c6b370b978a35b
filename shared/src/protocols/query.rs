//! The buying agents' read path. It only reads: no write, no enqueue, no call to a supplier.
//! Offers come from the projection; history and single observations from the evidence, with
//! the same visibility rules (uncommitted deliveries and unpublished runs are never shown).

use crate::domain::connector::IdentityRule;
use crate::domain::ids::{ObservationId, TenantId};
use crate::domain::item::CanonicalItem;
use crate::domain::model::Observation;
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use crate::protocols::projection::{Eligibility, EvidenceReads, ProjectionStore, Visibility};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidRequest(String),
    /// A page cursor that was not issued for this tenant, item and listing.
    #[error("{0}")]
    InvalidCursor(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who is asking: the tenant and scopes from the authorizer, never from a header a caller sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub scopes: Vec<String>,
    /// Who the token names (the JWT `sub`), recorded on operator actions; never used for access.
    pub subject: Option<String>,
}

pub const READ_SCOPE: &str = "offers:read";

#[derive(Clone)]
pub struct QueryService {
    reads: Arc<dyn EvidenceReads>,
    projection: Arc<dyn ProjectionStore>,
}

/// Every observation in a response carries these fields (DESIGN.md section 7).
pub fn observation_json(o: &Observation) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("observation_id".into(), json!(o.observation_id));
    m.insert("item".into(), json!(o.item));
    m.insert("connector".into(), json!(o.connector));
    m.insert("source_account".into(), json!(o.source_account));
    m.insert("source_record".into(), json!(o.source_record));
    m.insert("delivery_key".into(), json!(o.delivery_key));
    m.insert("identity_strength".into(), json!(o.identity_strength));
    m.insert("quantity".into(), json!(o.quantity));
    m.insert("quantity_basis".into(), json!(o.quantity_basis));
    m.insert("price".into(), json!(o.price.as_str()));
    m.insert("currency".into(), json!(o.currency));
    m.insert("observed_at".into(), json!(o.observed_at.to_rfc3339()));
    m.insert("retrieved_at".into(), json!(o.retrieved_at.to_rfc3339()));
    m.insert("run_id".into(), json!(o.run_id));
    m.insert("claim".into(), json!(o.claim));
    m.insert("verification".into(), json!(o.verification));
    m.insert("dedup_confidence".into(), json!(o.dedup_confidence));
    m.insert("future_dated".into(), json!(o.future_dated));
    m
}

#[derive(Debug, Clone, Serialize)]
pub struct FreshnessGap {
    pub connector: String,
    pub source_account: String,
    pub age_seconds: i64,
    pub max_age_seconds: i64,
    pub observed_at: String,
    /// What would refresh this source. The read itself refreshes nothing.
    pub refresh: Value,
}

impl QueryService {
    pub fn new(reads: Arc<dyn EvidenceReads>, projection: Arc<dyn ProjectionStore>) -> Self {
        Self { reads, projection }
    }

    fn item_key(item: &str) -> Result<String, QueryError> {
        CanonicalItem::parse_key(item)
            .map(|i| i.key())
            .map_err(|e| QueryError::InvalidRequest(format!("item {}: {e}", quoted(item))))
    }

    /// Current offer per source for an item.
    pub async fn offers(
        &self,
        principal: &Principal,
        item: &str,
        max_age_seconds: Option<i64>,
        now: Timestamp,
    ) -> Result<Value, QueryError> {
        let item = Self::item_key(item)?;
        if max_age_seconds.is_some_and(|m| m < 0) {
            return Err(QueryError::InvalidRequest(
                "max_age_seconds must be a non-negative integer".into(),
            ));
        }
        let rows = self.projection.offers(&principal.tenant, &item).await?;
        let eligibility = Eligibility::new(self.reads.as_ref());
        eligibility
            .prefetch_sources(rows.iter().map(|row| row.observation.source()))
            .await?;
        let mut offers = Vec::new();
        let mut gaps = Vec::new();
        for row in rows {
            let o = row.observation;
            // A quarantine, and an identity correction, take effect at once, even before the
            // projector has updated the row.
            if eligibility.source_quarantined(&o.source()).await?
                || !eligibility.rules(&o.source()).await?.attributes(&o)
            {
                continue;
            }
            let age = now.seconds_since(o.observed_at).max(0);
            let stale = max_age_seconds.is_some_and(|m| age > m);
            let mut m = observation_json(&o);
            m.insert(
                "freshness".into(),
                json!({"age_seconds": age, "stale": stale}),
            );
            offers.push(Value::Object(m));
            if let (true, Some(max_age)) = (stale, max_age_seconds) {
                gaps.push(FreshnessGap {
                    connector: o.connector.to_string(),
                    source_account: o.source_account.to_string(),
                    age_seconds: age,
                    max_age_seconds: max_age,
                    observed_at: o.observed_at.to_rfc3339(),
                    refresh: self.refresh_action(&o).await?,
                });
            }
        }
        let mut body = json!({"item": item, "as_of": now.to_rfc3339(), "offers": offers});
        if !gaps.is_empty() {
            body["freshness_gaps"] = json!(gaps);
        }
        Ok(body)
    }

    async fn refresh_action(&self, o: &Observation) -> Result<Value, QueryError> {
        let rule = self
            .reads
            .connector_config(&o.connector)
            .await?
            .map(|c| c.identity_rule);
        Ok(match rule {
            Some(IdentityRule::ExportPage) => json!({
                "action": "start_pull_run",
                "method": "POST",
                "path": format!("/v1/connectors/{}/runs", o.connector),
                "requires_scope": "ops:write",
            }),
            _ => json!({
                "action": "await_supplier_push",
                "detail": format!("connector {} is push-only; ask the supplier to resend or wait for its next event", o.connector),
            }),
        })
    }

    /// History of an item, newest first, including superseded and quarantined-source claims
    /// (marked), excluding anything not yet published.
    pub async fn history(
        &self,
        principal: &Principal,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<Value, QueryError> {
        let item = Self::item_key(item)?;
        let limit = limit.clamp(1, 100);
        let page = self
            .reads
            .item_history(&principal.tenant, &item, cursor, limit)
            .await
            .map_err(|e| match e {
                StoreError::InvalidCursor(m) => QueryError::InvalidCursor(m),
                other => QueryError::Store(other),
            })?;
        // The index copy may lag the base item (a supersession marker, say): the base items,
        // read consistently in one batch with what their visibility depends on, are what
        // readers see.
        let eligibility = Eligibility::new(self.reads.as_ref());
        let mut current: HashMap<ObservationId, Observation> = eligibility
            .fresh_copies(&page.observations)
            .await?
            .into_iter()
            .map(|o| (o.observation_id.clone(), o))
            .collect();
        let mut observations = Vec::new();
        for indexed in page.observations {
            let o = current.remove(&indexed.observation_id).unwrap_or(indexed);
            let visibility = eligibility.check(&o).await?;
            if !visibility.is_published() {
                continue;
            }
            observations.push(Value::Object(history_entry(&o, visibility)));
        }
        Ok(json!({"item": item, "observations": observations, "next_cursor": page.next}))
    }

    /// One observation with its provenance (never the payload).
    pub async fn observation(&self, principal: &Principal, id: &str) -> Result<Value, QueryError> {
        let not_found = || QueryError::NotFound(format!("observation {} not found", quoted(id)));
        let id = ObservationId::parse(id).map_err(|_| not_found())?;
        let o = self
            .reads
            .observation(id.as_str())
            .await?
            .ok_or_else(not_found)?;
        if o.tenant != principal.tenant {
            return Err(not_found());
        }
        let visibility = Eligibility::new(self.reads.as_ref()).check(&o).await?;
        if !visibility.is_published() {
            return Err(not_found());
        }
        let mut m = history_entry(&o, visibility);
        m.insert(
            "provenance".into(),
            json!({
                "delivery_key": o.delivery_key,
                "run_id": o.run_id,
                "artifact_key": o.artifact_key,
                "artifact_sha256": o.artifact_sha256,
                "epoch": o.epoch,
                "row_index": o.row_index,
            }),
        );
        Ok(Value::Object(m))
    }
}

/// A caller's text quoted (escaped) in a message, its first 64 characters only: a message
/// never echoes unbounded input.
fn quoted(text: &str) -> String {
    let shown: String = text.chars().take(64).collect();
    if shown.len() < text.len() {
        format!("{shown:?}...")
    } else {
        format!("{shown:?}")
    }
}

fn history_entry(o: &Observation, visibility: Visibility) -> serde_json::Map<String, Value> {
    let mut m = observation_json(o);
    m.insert("superseded".into(), json!(o.superseded_by.is_some()));
    if let Some(by) = &o.superseded_by {
        m.insert("superseded_by".into(), json!(by));
    }
    if let Some(old) = &o.supersedes {
        m.insert("supersedes".into(), json!(old));
    }
    // Which identity rule attributed this claim to this item, and when.
    if let Some(correction) = &o.correction_id {
        m.insert("correction_id".into(), json!(correction));
        m.insert("attributed_at".into(), json!(o.recorded_at));
    }
    if o.normalized_item() != o.item {
        m.insert("normalized_item".into(), json!(o.normalized_item()));
    }
    m.insert("current_eligibility".into(), json!(visibility));
    m
}
