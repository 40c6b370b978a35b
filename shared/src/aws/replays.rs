//! The byte-identical replay, recognized from the raw bytes' sha256 before any parsing
//! (`EvidenceStore::replay_hint`, `count_byte_identical_replay`): an eventually consistent read
//! of the replay record (half a read unit, and what a fresh delivery pays for the check), then,
//! only when it looks like the same payload committed, the conditional count. A record of
//! another payload sends the delivery to the probe rather than to a transaction that would be
//! cancelled.

use super::dynamo::{
    batch_get, decode, decode_replay, key, n, replay_pk, run_pk, s, unavailable,
    DynamoEvidenceStore, SK_REPLAY, SK_RUN,
};
use super::operator_records::{rules_pk, StoredRules, SK_RULES};
use crate::domain::connector::Publication;
use crate::domain::ids::RunId;
use crate::domain::model::{CorrectionRules, ReplayRecord, ReplayState, SourceRef};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{ReplayContext, ReplayHint, StoreError};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::ReturnValue;

/// What a replay record read says about a payload of sha256 `payload_sha256` arriving at `now`.
fn hint_of(seen: Option<&ReplayRecord>, payload_sha256: &str, now: Timestamp) -> ReplayHint {
    match seen {
        None => ReplayHint::None,
        Some(r)
            if r.state == ReplayState::Committed
                && r.payload_sha256 == payload_sha256
                && !r.is_expired_at(now) =>
        {
            ReplayHint::SamePayload
        }
        Some(_) => ReplayHint::Recorded,
    }
}

impl DynamoEvidenceStore {
    pub(crate) async fn replay_hint_of(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<ReplayHint, StoreError> {
        let seen = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(replay_pk(delivery_key), SK_REPLAY)))
            .send()
            .await
            .map_err(unavailable("look for a byte-identical replay"))?
            .item
            .map(decode_replay)
            .transpose()?;
        Ok(hint_of(seen.as_ref(), payload_sha256, now))
    }

    /// The replay hint and the source's identity rules in one consistent `BatchGetItem`: the
    /// fresh path needs both, and one round trip instead of two is what it saves (the replay
    /// record's read then costs a full read unit instead of half).
    pub(crate) async fn replay_context_of(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        source: &SourceRef,
        run: Option<&RunId>,
        now: Timestamp,
    ) -> Result<ReplayContext, StoreError> {
        let mut keys = vec![
            key(replay_pk(delivery_key), SK_REPLAY),
            key(rules_pk(source), SK_RULES),
        ];
        keys.extend(run.map(|run| key(run_pk(run.as_str()), SK_RUN)));
        let mut record = None;
        let mut rules = CorrectionRules::default();
        let mut run_publication = None;
        let found = batch_get(
            self.client(),
            self.table(),
            keys,
            "read the replay record, the identity rules and the run",
        )
        .await?;
        for item in found {
            match item
                .get("sk")
                .and_then(|v| v.as_s().ok())
                .map(String::as_str)
            {
                Some(SK_REPLAY) => record = Some(decode_replay(item)?),
                Some(SK_RULES) => rules = decode::<StoredRules>(item)?.rules,
                // Only the policy is read: whatever else the run item holds never stops a page.
                Some(SK_RUN) => {
                    run_publication = item
                        .get("publication")
                        .and_then(|v| v.as_s().ok())
                        .and_then(|name| Publication::parse(name))
                }
                other => {
                    return Err(StoreError::Invariant(format!(
                        "BatchGetItem returned an item that was not asked for (sk {other:?})"
                    )))
                }
            }
        }
        Ok(ReplayContext {
            hint: hint_of(record.as_ref(), payload_sha256, now),
            rules,
            run_publication,
        })
    }

    /// The read may have been stale: the count holds only if the record still is what it looked.
    pub(crate) async fn count_replay_of_payload(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<Option<ReplayRecord>, StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(replay_pk(delivery_key), SK_REPLAY)))
            .update_expression("SET attempts = attempts + :one, last_attempt_at = :now")
            .condition_expression(
                "attribute_exists(pk) AND expires_at > :now_s AND payload_sha256 = :sha \
                 AND #state = :committed",
            )
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", s(now.to_rfc3339()))
            .expression_attribute_values(":now_s", n(now.unix_seconds()))
            .expression_attribute_values(":sha", s(payload_sha256))
            .expression_attribute_values(":committed", s("COMMITTED"))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => out
                .attributes
                .map(decode_replay)
                .transpose()?
                .ok_or_else(|| StoreError::Invariant("UpdateItem returned no attributes".into()))
                .map(Some),
            Err(SdkError::ServiceError(e))
                if e.err().is_conditional_check_failed_exception()
                    || e.err().is_transaction_conflict_exception() =>
            {
                Ok(None)
            }
            Err(e) => Err(unavailable("count a byte-identical replay")(e)),
        }
    }
}
