//! The projection table: one row per (tenant, item, connector, source account).
//!
//! | pk | sk | source_key (GSI `by_source`) |
//! |---|---|---|
//! | `ITEM#{tenant}#{item}` | `SRC#{connector}#{source_account}` | `SRC#{tenant}#{connector}#{source_account}`, sk `item` |

use super::dynamo::{conditional, decode, encode, key, s, unavailable, Item};
use crate::ids::TenantId;
use crate::model::SourceRef;
use crate::ports::StoreError;
use crate::projection::{ProjectedOffer, ProjectionKey, ProjectionStore};
use crate::timestamp::Timestamp;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;

pub const BY_SOURCE: &str = "by_source";

fn row_pk(tenant: &str, item: &str) -> String {
    format!("ITEM#{tenant}#{item}")
}

fn row_sk(source: &SourceRef) -> String {
    format!("SRC#{}#{}", source.connector, source.source_account)
}

fn source_key(source: &SourceRef) -> String {
    format!(
        "SRC#{}#{}#{}",
        source.tenant, source.connector, source.source_account
    )
}

#[derive(Clone, Debug)]
pub struct DynamoProjectionStore {
    client: Client,
    table: String,
}

impl DynamoProjectionStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn row(&self, offer: &ProjectedOffer) -> Result<Item, StoreError> {
        let o = &offer.observation;
        let source = o.source();
        let mut item = encode(offer)?;
        item.insert("pk".into(), s(row_pk(o.tenant.as_str(), &o.item)));
        item.insert("sk".into(), s(row_sk(&source)));
        item.insert("entity".into(), s("projection"));
        item.insert("item".into(), s(&o.item));
        item.insert("source_key".into(), s(source_key(&source)));
        item.insert("projected_at".into(), s(Timestamp::now().to_rfc3339()));
        Ok(item)
    }
}

#[async_trait]
impl ProjectionStore for DynamoProjectionStore {
    async fn current(&self, k: &ProjectionKey) -> Result<Option<ProjectedOffer>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(
                row_pk(k.source.tenant.as_str(), &k.item),
                &row_sk(&k.source),
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get projection row"))?;
        out.item.map(decode).transpose()
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
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(
                row_pk(k.source.tenant.as_str(), &k.item),
                &row_sk(&k.source),
            )))
            .condition_expression("basis = :expected")
            .expression_attribute_values(":expected", s(expected))
            .send()
            .await;
        conditional(result, "delete projection row")
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
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(row_pk(tenant.as_str(), item)))
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

    async fn items_of_source(&self, source: &SourceRef) -> Result<Vec<String>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(BY_SOURCE)
                .key_condition_expression("source_key = :source")
                .expression_attribute_values(":source", s(source_key(source)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("query projection by source"))?;
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
}
