//! The projection table: one row per (tenant, item, connector, source account).
//!
//! | pk | sk | source_key (GSI `by_source`) | part_key (GSI `by_part`) |
//! |---|---|---|---|
//! | `ITEM#{tenant}#{item}` | `SRC#{connector}#{source_account}` | `SRC#{tenant}#{connector}#{source_account}#{shard}`, sk `item` | `PART#{tenant}#{part number}`, sk `item` |
//!
//! Beside the rows, under the same item partition, a source's newest held claim (a claim
//! from the future, or one in a run not yet published): sort key `HELD#{connector}#{source_account}`,
//! without index keys, so neither index sees it. The offers read gets rows and held claims in
//! its one query; every other reader asks for rows only (`begins_with(sk, "SRC#")`).
//!
//! The index is written once per row write, so one source's rows are spread over
//! [`SOURCE_SHARDS`] index partitions (by a hash of the item) and its only reader,
//! `items_of_source`, queries them all: a supplier sending a third of a 5,000-deliveries-a-second
//! peak would otherwise write ~94,000 units a second into one index partition (docs/scale.md).
//! The index projects keys only: its reader needs the item, nothing else. `by_part` finds every
//! item (packaging, condition, revision) of a part number, also keys only.

use super::dynamo::{batch_get, conditional, decode, encode, key, s, unavailable, Item};
use crate::domain::ids::TenantId;
use crate::domain::item::CanonicalItem;
use crate::domain::model::SourceRef;
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use crate::protocols::projection::{
    HeldClaim, HeldClaims, ProjectedOffer, ProjectionKey, ProjectionStore,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use futures_util::StreamExt;
use std::collections::HashMap;

pub const BY_SOURCE: &str = "by_source";
/// The index of rows by part number (`part_key`), whatever their packaging and condition.
pub const BY_PART: &str = "by_part";

/// Partition key of an item's rows: every source's current offer for the item shares it.
pub fn row_pk(tenant: &str, item: &str) -> String {
    format!("ITEM#{tenant}#{item}")
}

/// Sort key of one source's row under its item.
pub fn row_sk(source: &SourceRef) -> String {
    format!("SRC#{}#{}", source.connector, source.source_account)
}

/// Sort key of one source's held claim under its item.
pub fn held_sk(source: &SourceRef) -> String {
    format!("HELD#{}#{}", source.connector, source.source_account)
}

/// How many `by_source` index partitions one source's rows are spread over.
pub const SOURCE_SHARDS: u32 = 64;

/// Partition key, in the `by_source` index, of the row of `source` for `item`: one of the
/// source's [`SOURCE_SHARDS`] shards, chosen by a stable hash of the item.
pub fn source_key(source: &SourceRef, item: &str) -> String {
    source_shard_key(source, source_shard(item))
}

/// Partition key, in the `by_part` index, of every row of every item with `item`'s part
/// number (each manufacturer, packaging, condition and revision):
/// `PART#{tenant}#{part number as keyed}`.
pub fn part_key(tenant: &str, item: &CanonicalItem) -> String {
    format!("PART#{tenant}#{}", item.keyed_part_number())
}

/// The shard of the `by_source` index an item's rows are written under.
pub fn source_shard(item: &str) -> u32 {
    let digest = crate::domain::hashing::sha256(item.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % SOURCE_SHARDS
}

/// Partition key of one shard of a source's rows in the `by_source` index.
pub fn source_shard_key(source: &SourceRef, shard: u32) -> String {
    format!(
        "SRC#{}#{}#{}#{shard:02}",
        source.tenant, source.connector, source.source_account
    )
}

#[derive(Clone, Debug)]
pub struct DynamoProjectionStore {
    client: Client,
    table: String,
}

impl DynamoProjectionStore {
    /// The items under one `by_source` shard, every page.
    async fn items_of_shard(&self, shard_key: String) -> Result<Vec<String>, StoreError> {
        self.items_under(BY_SOURCE, "source_key", shard_key).await
    }

    /// The `item` of every row under `key` of the keys-only index `index`, every page (an
    /// item once per row: once per source).
    async fn items_under(
        &self,
        index: &str,
        key_name: &str,
        key: String,
    ) -> Result<Vec<String>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index)
                .key_condition_expression("#key = :key")
                .expression_attribute_names("#key", key_name)
                .expression_attribute_values(":key", s(key.clone()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("query projection index"))?;
            items.extend(
                out.items
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|i| i.get("item").and_then(|v| v.as_s().ok()).cloned()),
            );
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn row(&self, offer: &ProjectedOffer) -> Result<Item, StoreError> {
        row_item(offer, Timestamp::now())
    }

    /// The item stored under `sk` in `k`'s item partition (consistent), decoded.
    async fn get_under<T: serde::de::DeserializeOwned>(
        &self,
        k: &ProjectionKey,
        sk: &str,
        what: &'static str,
    ) -> Result<Option<T>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(row_pk(k.source.tenant.as_str(), &k.item), sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable(what))?;
        out.item.map(decode).transpose()
    }

    /// Deletes the item under `sk` in `k`'s item partition if its basis is still `expected`.
    async fn delete_under(
        &self,
        k: &ProjectionKey,
        sk: &str,
        expected: &str,
        what: &'static str,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(row_pk(k.source.tenant.as_str(), &k.item), sk)))
            .condition_expression("basis = :expected")
            .expression_attribute_values(":expected", s(expected))
            .send()
            .await;
        conditional(result, what)
    }
}

/// The stored row of a projected offer, with its keys and index keys.
pub fn row_item(offer: &ProjectedOffer, projected_at: Timestamp) -> Result<Item, StoreError> {
    let o = &offer.observation;
    let source = o.source();
    let mut item = encode(offer)?;
    item.insert("pk".into(), s(row_pk(o.tenant.as_str(), &o.item)));
    item.insert("sk".into(), s(row_sk(&source)));
    item.insert("entity".into(), s("projection"));
    item.insert("item".into(), s(&o.item));
    item.insert("source_key".into(), s(source_key(&source, &o.item)));
    item.insert(
        "part_key".into(),
        s(part_key(o.tenant.as_str(), &o.canonical_item)),
    );
    item.insert("projected_at".into(), s(projected_at.to_rfc3339()));
    Ok(item)
}

#[async_trait]
impl ProjectionStore for DynamoProjectionStore {
    async fn current(&self, k: &ProjectionKey) -> Result<Option<ProjectedOffer>, StoreError> {
        self.get_under(k, &row_sk(&k.source), "get projection row")
            .await
    }

    async fn current_many(
        &self,
        keys: &[ProjectionKey],
    ) -> Result<HashMap<ProjectionKey, ProjectedOffer>, StoreError> {
        let by_key: HashMap<(String, String), &ProjectionKey> = keys
            .iter()
            .map(|k| {
                (
                    (row_pk(k.source.tenant.as_str(), &k.item), row_sk(&k.source)),
                    k,
                )
            })
            .collect();
        let requested = by_key.keys().map(|(pk, sk)| key(pk.clone(), sk)).collect();
        let mut rows = HashMap::new();
        for item in batch_get(
            &self.client,
            &self.table,
            requested,
            "batch get projection rows",
        )
        .await?
        {
            let text = |name: &str| {
                item.get(name)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default()
            };
            if let Some(k) = by_key.get(&(text("pk"), text("sk"))) {
                rows.insert((*k).clone(), decode(item)?);
            }
        }
        Ok(rows)
    }

    async fn replace(
        &self,
        offer: &ProjectedOffer,
        expected: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.row(offer)?));
        put = match expected {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(basis) => put
                .condition_expression("basis = :expected")
                .expression_attribute_values(":expected", s(basis)),
        };
        conditional(put.send().await, "put projection row")
    }

    async fn remove(&self, k: &ProjectionKey, expected: &str) -> Result<bool, StoreError> {
        self.delete_under(k, &row_sk(&k.source), expected, "delete projection row")
            .await
    }

    async fn offers(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<ProjectedOffer>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :rows)")
            .expression_attribute_values(":pk", s(row_pk(tenant.as_str(), item)))
            .expression_attribute_values(":rows", s("SRC#"))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("query projection"))?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(decode)
            .collect()
    }

    fn held_claims(&self) -> &dyn HeldClaims {
        self
    }

    async fn items_of_part(
        &self,
        tenant: &TenantId,
        part: &CanonicalItem,
    ) -> Result<Vec<String>, StoreError> {
        let key = part_key(tenant.as_str(), part);
        let mut items = self.items_under(BY_PART, "part_key", key).await?;
        items.sort();
        items.dedup();
        Ok(items)
    }

    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError> {
        // Every shard, eight queries in flight at a time; the order of items is not part of
        // the contract (callers recompute each item on its own).
        let shards = futures_util::stream::iter(0..SOURCE_SHARDS)
            .map(|shard| self.items_of_shard(source_shard_key(source, shard)))
            .buffer_unordered(8);
        let lists: Vec<Vec<String>> = futures_util::TryStreamExt::try_collect(shards).await?;
        let mut items: Vec<String> = lists.into_iter().flatten().collect();
        items.sort();
        Ok(items)
    }
}

#[async_trait]
impl HeldClaims for DynamoProjectionStore {
    async fn standing(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<(Vec<ProjectedOffer>, Vec<HeldClaim>), StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(row_pk(tenant.as_str(), item)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("query projection"))?;
        let (mut rows, mut held) = (Vec::new(), Vec::new());
        for stored in out.items.unwrap_or_default() {
            let is_held = stored
                .get("sk")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|sk| sk.starts_with("HELD#"));
            if is_held {
                held.push(decode(stored)?);
            } else {
                rows.push(decode(stored)?);
            }
        }
        Ok((rows, held))
    }

    async fn held(&self, k: &ProjectionKey) -> Result<Option<HeldClaim>, StoreError> {
        self.get_under(k, &held_sk(&k.source), "get held claim")
            .await
    }

    async fn hold(&self, claim: &HeldClaim, expected: Option<&str>) -> Result<bool, StoreError> {
        let mut stored = encode(claim)?;
        stored.insert("pk".into(), s(row_pk(claim.tenant.as_str(), &claim.item)));
        stored.insert("sk".into(), s(held_sk(&claim.key().source)));
        stored.insert("entity".into(), s("held"));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(stored));
        let put = match expected {
            None => put
                .condition_expression("attribute_not_exists(pk) OR basis < :basis")
                .expression_attribute_values(":basis", s(&claim.basis)),
            Some(stored) => put
                .condition_expression("basis = :stored")
                .expression_attribute_values(":stored", s(stored)),
        };
        conditional(put.send().await, "put held claim")
    }

    async fn release(&self, k: &ProjectionKey, expected: &str) -> Result<bool, StoreError> {
        self.delete_under(k, &held_sk(&k.source), expected, "delete held claim")
            .await
    }
}
