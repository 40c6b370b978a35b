//! The source health records in the evidence table: one item `HEALTH` / `{tenant}#{connector}`
//! per connector (docs/item-schema.md). Ingest notes how each delivery settled, the poller notes
//! each run it starts, and the definition write notes when the connector was registered, its
//! transport and its cadence (so that the offers read judges overdue sources from this record
//! alone). Every note moves a time forward only (a condition on the stored time), so a late
//! note of an older delivery never rolls the record back. One partition key holds every
//! connector's record: the notes are coalesced per ingest instance
//! (`protocols::ingest::health`), and DynamoDB splits a busy partition by sort key, so one
//! query lists a tenant's sources and the sweeper's pass reads them all. Tenant and connector
//! ids are slugs (no `#`), so the sort key splits back into both.

use super::dynamo::{build_error, conditional, n, s, unavailable, DynamoEvidenceStore, Item};
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::{ConnectorId, SourceAccount, TenantId};
use crate::domain::source_health::{
    expected_cadence_minutes, DeliveryNote, PullSlot, Settled, SourceHealth,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use std::collections::HashMap;

const HEALTH_PK: &str = "HEALTH";

fn health_key(tenant: &TenantId, connector: &ConnectorId) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(HEALTH_PK)),
        ("sk".to_owned(), s(format!("{tenant}#{connector}"))),
    ])
}

/// The attribute holding the time of the last delivery that settled as `settled`.
fn settled_attribute(settled: Settled) -> &'static str {
    match settled {
        Settled::Committed => "last_committed_at",
        Settled::Replayed => "last_replayed_at",
        Settled::Quarantined => "last_quarantined_at",
        Settled::Refused => "last_refused_at",
    }
}

/// The definition write's action: the connector's health record, registered at `now` unless
/// it was registered before (a new version keeps the first registration).
pub(super) fn register_action(
    table: &str,
    config: &ConnectorConfig,
    now: Timestamp,
) -> Result<TransactWriteItem, StoreError> {
    let cadence = expected_cadence_minutes(config);
    let expression = format!(
        "SET entity = :entity, tenant = :tenant, connector = :connector, \
         source_account = :account, transport = :transport, \
         registered_at = if_not_exists(registered_at, :now){}",
        match cadence {
            Some(_) => ", expected_cadence_minutes = :cadence",
            None => " REMOVE expected_cadence_minutes",
        }
    );
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(health_key(&config.tenant, &config.connector)))
        .update_expression(expression)
        .set_expression_attribute_values(
            cadence.map(|c| HashMap::from([(":cadence".to_owned(), n(c))])),
        )
        .expression_attribute_values(":transport", s(config.transport_kind()))
        .expression_attribute_values(":entity", s("source_health"))
        .expression_attribute_values(":tenant", s(config.tenant.as_str()))
        .expression_attribute_values(":connector", s(config.connector.as_str()))
        .expression_attribute_values(":account", s(config.source_account.as_str()))
        .expression_attribute_values(":now", s(now.sort_key()))
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

impl DynamoEvidenceStore {
    /// Notes one settled delivery: the last received delivery and its outcome when it is the
    /// newest received, and in any case the time of the last delivery settled that way.
    pub async fn note_delivery(&self, note: &DeliveryNote) -> Result<(), StoreError> {
        let attribute = settled_attribute(note.settled);
        let newest = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(health_key(&note.tenant, &note.connector)))
            .update_expression(format!(
                "SET entity = :entity, tenant = :tenant, connector = :connector, \
                 source_account = :account, last_received_at = :received, \
                 last_outcome = :outcome, last_delivery_key = :key, {attribute} = :at"
            ))
            .condition_expression(
                "attribute_not_exists(last_received_at) OR last_received_at <= :received",
            )
            .expression_attribute_values(":entity", s("source_health"))
            .expression_attribute_values(":tenant", s(note.tenant.as_str()))
            .expression_attribute_values(":connector", s(note.connector.as_str()))
            .expression_attribute_values(":account", s(note.source_account.as_str()))
            .expression_attribute_values(":received", s(note.received_at.sort_key()))
            .expression_attribute_values(":at", s(note.settled_at.sort_key()))
            .expression_attribute_values(":outcome", s(note.settled.code()))
            .expression_attribute_values(":key", s(note.delivery_key.clone()))
            .send()
            .await;
        if conditional(newest, "note a delivery in its source's health")? {
            return Ok(());
        }
        // A newer delivery was noted first: this one only moves its own outcome's time.
        let own = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(health_key(&note.tenant, &note.connector)))
            .update_expression(format!("SET {attribute} = :at"))
            .condition_expression(format!(
                "attribute_not_exists({attribute}) OR {attribute} < :at"
            ))
            .expression_attribute_values(":at", s(note.settled_at.sort_key()))
            .send()
            .await;
        conditional(own, "note a delivery's outcome in its source's health").map(|_| ())
    }

    /// Notes that the poller started run `run_id` of `connector` at `at` (a later start only).
    pub async fn note_run_started(
        &self,
        tenant: &TenantId,
        connector: &ConnectorId,
        run_id: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(health_key(tenant, connector)))
            .update_expression(
                "SET entity = :entity, tenant = :tenant, connector = :connector, \
                 last_run_id = :run, last_run_started_at = :at",
            )
            .condition_expression(
                "attribute_not_exists(last_run_started_at) OR last_run_started_at <= :at",
            )
            .expression_attribute_values(":entity", s("source_health"))
            .expression_attribute_values(":tenant", s(tenant.as_str()))
            .expression_attribute_values(":connector", s(connector.as_str()))
            .expression_attribute_values(":run", s(run_id))
            .expression_attribute_values(":at", s(at.sort_key()))
            .send()
            .await;
        conditional(result, "note a run in its source's health").map(|_| ())
    }

    /// The health records of `tenant`'s connectors (every page).
    pub async fn source_health_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<SourceHealth>, StoreError> {
        self.health_records(Some(format!("{tenant}#"))).await
    }

    /// Every connector's health record, every tenant's (the sweeper's pass).
    pub async fn all_source_health(&self) -> Result<Vec<SourceHealth>, StoreError> {
        self.health_records(None).await
    }

    async fn health_records(
        &self,
        prefix: Option<String>,
    ) -> Result<Vec<SourceHealth>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut query = self
                .client()
                .query()
                .table_name(self.table())
                .expression_attribute_values(":pk", s(HEALTH_PK))
                .set_exclusive_start_key(start);
            query = match &prefix {
                Some(prefix) => query
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", s(prefix.clone())),
                None => query.key_condition_expression("pk = :pk"),
            };
            let page = query
                .send()
                .await
                .map_err(unavailable("query source health"))?;
            for item in page.items() {
                match decode_health(item) {
                    Some(health) => out.push(health),
                    None => tracing::error!(
                        sk = ?item.get("sk"),
                        "a source health record does not decode; left out"
                    ),
                }
            }
            match page.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return Ok(out),
            }
        }
    }

    /// A pull connector's schedule (`None`: its definition does not pull).
    pub async fn pull_schedule(
        &self,
        connector: &ConnectorId,
    ) -> Result<Option<PullSlot>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(super::pull_schedule::schedule_key(connector.as_str())))
            .send()
            .await
            .map_err(unavailable("read a pull schedule"))?;
        Ok(out
            .item
            .as_ref()
            .and_then(super::pull_schedule::scheduled)
            .map(|pull| PullSlot {
                every_minutes: pull.every_minutes,
                last_slot: pull.last_slot,
            }))
    }
}

/// A stored health record; `None` for one that does not decode (a key written by hand), which
/// the listing logs and leaves out.
fn decode_health(item: &Item) -> Option<SourceHealth> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let time = |name: &str| text(name).and_then(|t| Timestamp::parse(&t).ok());
    let (tenant, connector) = item.get("sk")?.as_s().ok()?.split_once('#')?;
    let mut health = SourceHealth::empty(
        TenantId::parse(tenant).ok()?,
        ConnectorId::parse(connector).ok()?,
    );
    health.source_account = text("source_account").and_then(|a| SourceAccount::parse(&a).ok());
    health.last_received_at = time("last_received_at");
    health.last_outcome = text("last_outcome").and_then(|c| Settled::parse(&c));
    health.last_delivery_key = text("last_delivery_key");
    health.last_committed_at = time("last_committed_at");
    health.last_replayed_at = time("last_replayed_at");
    health.last_quarantined_at = time("last_quarantined_at");
    health.last_refused_at = time("last_refused_at");
    health.last_run_id = text("last_run_id");
    health.last_run_started_at = time("last_run_started_at");
    health.registered_at = time("registered_at");
    health.expected_cadence_minutes = item
        .get("expected_cadence_minutes")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok());
    health.transport = text("transport");
    Some(health)
}
