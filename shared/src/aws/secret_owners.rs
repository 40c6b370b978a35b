//! Who owns a signing secret, in the evidence table: `SIGNING_SECRET#{fingerprint}` / `OWNER`
//! names the first connector that used it (`SecretOwners`).

use super::dynamo::{key, s, DynamoEvidenceStore};
use crate::domain::ids::ConnectorId;
use crate::domain::timestamp::Timestamp;
use crate::intake::webhook::SecretOwners;
use crate::protocols::ports::StoreError;
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

pub fn secret_owner_pk(fingerprint: &str) -> String {
    format!("SIGNING_SECRET#{fingerprint}")
}
pub const SK_SECRET_OWNER: &str = "OWNER";

#[async_trait]
impl SecretOwners for DynamoEvidenceStore {
    async fn claim_secret(
        &self,
        fingerprint: &str,
        connector: &ConnectorId,
    ) -> Result<ConnectorId, StoreError> {
        let mut item = key(secret_owner_pk(fingerprint), SK_SECRET_OWNER);
        item.insert("entity".into(), s("signing_secret_owner"));
        item.insert("connector".into(), s(connector.as_str()));
        item.insert("claimed_at".into(), s(Timestamp::now().to_rfc3339()));
        let result = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR connector = :connector")
            .expression_attribute_values(":connector", s(connector.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(connector.clone()),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                let owner = match e.into_err() {
                    aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(failed) => failed
                        .item
                        .and_then(|i| i.get("connector").and_then(|v| v.as_s().ok()).cloned()),
                    _ => None,
                }
                .ok_or_else(|| StoreError::Invariant("secret owner refused without an owner".into()))?;
                ConnectorId::parse(&owner).map_err(|e| {
                    StoreError::Invariant(format!("stored secret owner {owner:?}: {e}"))
                })
            }
            Err(e) => Err(super::dynamo::unavailable("claim signing secret")(e)),
        }
    }
}
