//! Verification records in the evidence table, append-only (docs/item-schema.md):
//!
//! | record | pk | sk |
//! |---|---|---|
//! | verification | `VER#{id}` | `VER` |
//! | its withdrawal | `VER#{id}` | `WITHDRAWN` |
//! | either, beside the item's claims | `VERIFY#{tenant}#{item}` | `V#{observation id}#{recorded_at}#{record id}` |
//!
//! Each record and its copy beside the item are written in one transaction, the record with
//! `attribute_not_exists`, so a record is stored once and a verification withdrawn once. The
//! item's copies are what reads use: one query finds every record about an item's claims.

use super::dynamo::{encode, s, with_keys, DynamoEvidenceStore};
use super::operator_records::put;
use crate::domain::ids::TenantId;
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::{VerificationEvent, VerificationRecord, VerificationWithdrawal};
use crate::protocols::ports::StoreError;
use crate::protocols::verification::{StoredVerification, VerificationStore};
use async_trait::async_trait;

const SK_VERIFICATION: &str = "VER";
const SK_WITHDRAWN: &str = "WITHDRAWN";
const EVENT_PREFIX: &str = "V#";

pub fn verification_pk(id: &str) -> String {
    format!("VER#{id}")
}

/// The partition of an item's verification records.
pub fn item_verifications_pk(tenant: &TenantId, item: &str) -> String {
    format!("VERIFY#{tenant}#{item}")
}

fn event_sk(observation: &str, recorded_at: Timestamp, id: &str) -> String {
    format!(
        "{EVENT_PREFIX}{observation}#{}#{id}",
        recorded_at.sort_key()
    )
}

impl DynamoEvidenceStore {
    /// Every verification record about the tenant's `item` (consistent, oldest first within
    /// each claim).
    pub async fn item_verifications(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<VerificationEvent>, StoreError> {
        self.query_prefix(item_verifications_pk(tenant, item), EVENT_PREFIX)
            .await
    }

    /// A record under its own key and its copy beside the item, in one transaction; `false`
    /// when the record's key is taken.
    async fn write_pair(
        &self,
        own: (String, &'static str, &'static str, crate::aws::dynamo::Item),
        event: &VerificationEvent,
        tenant: &TenantId,
        item: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let (pk, sk, entity, body) = own;
        let copy = with_keys(
            encode(event)?,
            item_verifications_pk(tenant, item),
            &event_sk(event.observation_id().as_str(), event.recorded_at(), id),
            "verification_event",
        );
        let mut own = with_keys(body, pk, sk, entity);
        own.insert("record_id".into(), s(id));
        let actions = vec![
            put(own, self.table(), Some("attribute_not_exists(pk)"))?,
            put(copy, self.table(), None)?,
        ];
        match self.transact(actions, "record verification").await? {
            None => Ok(true),
            Some(reasons)
                if reasons.first().map(String::as_str) == Some("ConditionalCheckFailed") =>
            {
                Ok(false)
            }
            Some(reasons) => Err(StoreError::Unavailable(anyhow::anyhow!(
                "verification transaction cancelled: {reasons:?}"
            ))),
        }
    }
}

#[async_trait]
impl VerificationStore for DynamoEvidenceStore {
    async fn record_verification(&self, record: &VerificationRecord) -> Result<bool, StoreError> {
        let own = (
            verification_pk(&record.verification_id),
            SK_VERIFICATION,
            "verification",
            encode(record)?,
        );
        let event = VerificationEvent::Verified(Box::new(record.clone()));
        self.write_pair(
            own,
            &event,
            &record.tenant,
            &record.item,
            &record.verification_id,
        )
        .await
    }

    async fn verification(&self, id: &str) -> Result<Option<StoredVerification>, StoreError> {
        let Some(record) = self
            .get::<VerificationRecord>(verification_pk(id), SK_VERIFICATION)
            .await?
        else {
            return Ok(None);
        };
        let withdrawal = self.get(verification_pk(id), SK_WITHDRAWN).await?;
        Ok(Some((record, withdrawal)))
    }

    async fn withdraw_verification(
        &self,
        withdrawal: &VerificationWithdrawal,
    ) -> Result<bool, StoreError> {
        let own = (
            verification_pk(&withdrawal.verification_id),
            SK_WITHDRAWN,
            "verification_withdrawal",
            encode(withdrawal)?,
        );
        let event = VerificationEvent::Withdrawn(withdrawal.clone());
        self.write_pair(
            own,
            &event,
            &withdrawal.tenant,
            &withdrawal.item,
            &withdrawal.withdrawal_id,
        )
        .await
    }
}
