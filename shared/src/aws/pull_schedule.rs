//! The pull schedules in the evidence table: one item `SCHEDULE#PULL` / `{connector}` per
//! connector whose definition pulls (`every_minutes`, `last_slot`), written in the transaction
//! that stores the definition (removed when a new version stops pulling), read by the
//! dispatcher with one query.

use super::dynamo::{build_error, conditional, n, s, DynamoEvidenceStore, Item};
use crate::domain::connector::ConnectorConfig;
use crate::domain::definition::Transport;
use crate::domain::ids::ConnectorId;
use crate::intake::poller::dispatch::{PullSchedules, ScheduledPull};
use crate::protocols::ports::StoreError;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use std::collections::HashMap;

const SCHEDULE_PK: &str = "SCHEDULE#PULL";
/// A pull's schedule when its definition names none.
pub const DEFAULT_EVERY_MINUTES: u32 = 60;

pub(super) fn schedule_key(connector: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(SCHEDULE_PK)),
        ("sk".to_owned(), s(connector)),
    ])
}

/// The schedule action of a definition write: its connector's schedule put, or deleted when
/// the definition does not pull. The put forgets the last dispatched slot, so the next tick
/// launches the new version's pull at once; within a slot that already ran, that names the same
/// run again (a replay of its pages, never a second copy).
pub(super) fn schedule_action(
    table: &str,
    config: &ConnectorConfig,
) -> Result<TransactWriteItem, StoreError> {
    let every = match config.definition.as_deref().map(|d| &d.transport) {
        Some(Transport::Pull(pull)) => pull.every_minutes.unwrap_or(DEFAULT_EVERY_MINUTES),
        _ => {
            let delete = Delete::builder()
                .table_name(table)
                .set_key(Some(schedule_key(config.connector.as_str())))
                .build()
                .map_err(build_error)?;
            return Ok(TransactWriteItem::builder().delete(delete).build());
        }
    };
    let mut item = schedule_key(config.connector.as_str());
    item.insert("entity".to_owned(), s("pull_schedule"));
    item.insert("tenant".to_owned(), s(config.tenant.as_str()));
    item.insert("every_minutes".to_owned(), n(every));
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

pub(super) fn scheduled(item: &Item) -> Option<ScheduledPull> {
    let number = |name: &str| item.get(name)?.as_n().ok()?.parse().ok();
    Some(ScheduledPull {
        connector: ConnectorId::parse(item.get("sk")?.as_s().ok()?).ok()?,
        every_minutes: number("every_minutes")
            .and_then(|v: i64| u32::try_from(v).ok())
            .unwrap_or(DEFAULT_EVERY_MINUTES),
        last_slot: number("last_slot"),
    })
}

#[async_trait]
impl PullSchedules for DynamoEvidenceStore {
    async fn scheduled_pulls(&self) -> Result<Vec<ScheduledPull>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client()
                .query()
                .table_name(self.table())
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(SCHEDULE_PK))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(super::dynamo::unavailable("query pull schedules"))?;
            out.extend(page.items().iter().filter_map(scheduled));
            match page.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return Ok(out),
            }
        }
    }

    async fn mark_dispatched(
        &self,
        connector: &ConnectorId,
        slot: i64,
    ) -> Result<bool, StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(schedule_key(connector.as_str())))
            .update_expression("SET last_slot = :slot")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(last_slot) OR last_slot < :slot)",
            )
            .expression_attribute_values(":slot", n(slot))
            .send()
            .await;
        conditional(result, "mark a pull dispatched")
    }
}
