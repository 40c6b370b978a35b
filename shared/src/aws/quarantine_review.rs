//! Quarantine entries as operators review them (`crate::ops`), with the resolution stored
//! beside each, and the GSI2 listings (a tenant's quarantine entries or connectors).

use super::dynamo::{decode, key, s, unavailable, DynamoEvidenceStore, Item};
use crate::domain::ids::TenantId;
use crate::protocols::ports::StoreError;

/// Operator review of quarantine entries (`crate::ops`). The entry's stored fields are never
/// rewritten: a resolution only moves `status` and adds a `resolution` attribute beside them.
impl DynamoEvidenceStore {
    /// A quarantine entry (consistent read) with its `resolution` attribute, if any.
    pub async fn quarantine_entry_with_resolution<R: serde::de::DeserializeOwned>(
        &self,
        id: &str,
    ) -> Result<Option<(crate::domain::model::QuarantineEntry, Option<R>)>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(
                super::dynamo::quarantine_pk(id),
                super::dynamo::SK_QUARANTINE,
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get quarantine entry"))?;
        out.item.map(split_resolution).transpose()
    }

    /// Quarantine entries of a tenant, oldest first (GSI2; no Scan), each with its
    /// `resolution` attribute, if any.
    pub async fn quarantine_list_with_resolution<R: serde::de::DeserializeOwned>(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<(crate::domain::model::QuarantineEntry, Option<R>)>, StoreError> {
        self.gsi2_list(
            &super::dynamo::quarantine_list_pk(tenant.as_str()),
            "query quarantine",
        )
        .await?
        .into_iter()
        .map(split_resolution)
        .collect()
    }

    /// Every item listed under `list` in GSI2 (a tenant's quarantine entries or connectors),
    /// in sort-key order, every page.
    pub(super) async fn gsi2_list(
        &self,
        list: &str,
        what: &'static str,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client()
                .query()
                .table_name(self.table())
                .index_name(super::dynamo::GSI2)
                .key_condition_expression("gsi2pk = :list")
                .expression_attribute_values(":list", s(list))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable(what))?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}

fn split_resolution<R: serde::de::DeserializeOwned>(
    mut item: Item,
) -> Result<(crate::domain::model::QuarantineEntry, Option<R>), StoreError> {
    let resolution = item
        .remove("resolution")
        .map(|value| {
            serde_dynamo::from_attribute_value(value).map_err(|e| {
                StoreError::Invariant(format!("stored resolution does not decode: {e}"))
            })
        })
        .transpose()?;
    Ok((decode(item)?, resolution))
}
