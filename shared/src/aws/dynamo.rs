//! The evidence table in DynamoDB. One table holds every record kind (docs/item-schema.md):
//!
//! | record       | pk                     | sk       | gsi1 (item history)                    | gsi2 (lists)                     |
//! |--------------|------------------------|----------|----------------------------------------|----------------------------------|
//! | replay       | `DLV#{delivery_key}`   | `REPLAY` |                                        |                                  |
//! | observation  | `OBS#{observation_id}` | `OBS`    | `ITEM#{tenant}#{item}`, `basis()`      |                                  |
//! | run          | `RUN#{run_id}`         | `RUN`    |                                        |                                  |
//! | quarantine   | `QUAR#{id}`            | `QUAR`   |                                        | `QUARANTINE#{tenant}`, `{at}#{id}` |
//! | connector    | `CONNECTOR#{id}`       | `CONFIG` |                                        | `CONNECTORS#{tenant}`, `{id}`    |

use crate::domain::connector::{ConnectorConfig, ConnectorConfigError};
use crate::domain::fingerprint::Fingerprint;
use crate::domain::ids::{ConnectorId, ObservationId};
use crate::domain::model::{
    CommitMarker, Observation, QuarantineEntry, ReplayRecord, ReplayState, Run, RunPageRecord,
    RunPageUpdate,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{
    AttemptProbe, ChunkOutcome, ChunkWrite, ConnectorDirectory, EvidenceStore, ReplayAction,
    StoreError,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ConditionCheck, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

pub const PK: &str = "pk";
pub const SK: &str = "sk";
/// Which record an item holds: `replay`, `observation`, `run`, `quarantine`, `connector`.
pub const ENTITY: &str = "entity";
pub const GSI1: &str = "gsi1";
pub const GSI2: &str = "gsi2";

pub const SK_REPLAY: &str = "REPLAY";
pub const SK_OBSERVATION: &str = "OBS";
pub const SK_RUN: &str = "RUN";
pub const SK_QUARANTINE: &str = "QUAR";
pub const SK_CONNECTOR: &str = "CONFIG";

pub use super::item_keys::*;

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}
pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn key(pk: String, sk: &str) -> Item {
    HashMap::from([(PK.to_owned(), s(pk)), (SK.to_owned(), s(sk))])
}

pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(value)
        .map_err(|e| StoreError::Invariant(format!("record does not encode: {e}")))
}

pub fn decode<T: serde::de::DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Invariant(format!("stored record does not decode: {e}")))
}

/// Decodes a stored observation, or reports and skips it (`None`) when this build cannot read it: a
/// value stored before today's supported ranges were enforced
/// (docs/adr/0012-supported-ranges-of-stored-values.md). Reads of history and projections then go
/// on without it, instead of failing (or being retried) for good on one row. The log names its key
/// only.
pub(crate) fn decode_or_skip(item: Item, what: &str) -> Option<Observation> {
    let pk = item
        .get(PK)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    match decode(item) {
        Ok(observation) => Some(observation),
        Err(e) => {
            tracing::error!(pk = %pk, read = what, error = %e, "a stored observation does not decode; skipped");
            None
        }
    }
}

pub(crate) fn with_keys(mut item: Item, pk: String, sk: &str, kind: &str) -> Item {
    item.insert(PK.to_owned(), s(pk));
    item.insert(SK.to_owned(), s(sk));
    item.insert(ENTITY.to_owned(), s(kind));
    item
}

/// The stored replay record. Its observation ids are not stored: they are
/// `ObservationId::derive_for(delivery_key, epoch, 0..observation_count)`, so the item stays
/// about 1 KB whatever the delivery's size. A 5,000-row delivery's id list was 155 KB, and every
/// chunk's transaction rewrote it (152 write units a chunk, all on one partition key).
pub fn replay_item(record: &ReplayRecord) -> Result<Item, StoreError> {
    let mut item = encode(record)?;
    item.remove(OBSERVATION_IDS);
    item.insert(
        OBSERVATION_COUNT.to_owned(),
        n(record.observation_ids.len()),
    );
    Ok(with_keys(
        item,
        replay_pk(&record.delivery_key),
        SK_REPLAY,
        "replay",
    ))
}

const OBSERVATION_IDS: &str = "observation_ids";
const OBSERVATION_COUNT: &str = "observation_count";

/// A stored replay record (from a read, a failed condition or a stream image), its observation
/// ids derived again. Records stored with an explicit id list decode as they are.
pub fn decode_replay(mut item: Item) -> Result<ReplayRecord, StoreError> {
    if let Some(count) = item.remove(OBSERVATION_COUNT) {
        let count: usize = count
            .as_n()
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| StoreError::Invariant("observation_count is not a number".into()))?;
        if !item.contains_key(OBSERVATION_IDS) {
            item.insert(OBSERVATION_IDS.to_owned(), AttributeValue::L(Vec::new()));
        }
        let mut record: ReplayRecord = decode(item)?;
        if record.observation_ids.is_empty() {
            record.observation_ids = (0..count)
                .map(|row| ObservationId::derive_for(&record.delivery_key, record.epoch, row))
                .collect();
        }
        return Ok(record);
    }
    decode(item)
}

pub fn observation_item(observation: &Observation) -> Result<Item, StoreError> {
    let mut item = with_keys(
        encode(observation)?,
        observation_pk(observation.observation_id.as_str()),
        SK_OBSERVATION,
        "observation",
    );
    item.insert(
        "gsi1pk".to_owned(),
        s(item_history_pk(
            observation.tenant.as_str(),
            &observation.item,
        )),
    );
    // The projection order itself (`Observation::basis`), so that newest first in the index is
    // newest first for the projector and the history route alike.
    item.insert("gsi1sk".to_owned(), s(observation.basis()));
    Ok(item)
}

pub fn quarantine_item(entry: &QuarantineEntry) -> Result<Item, StoreError> {
    let mut item = with_keys(
        encode(entry)?,
        quarantine_pk(&entry.quarantine_id),
        SK_QUARANTINE,
        "quarantine",
    );
    item.insert("gsi2pk".to_owned(), s(quarantine_list_pk(&entry.tenant)));
    item.insert(
        "gsi2sk".to_owned(),
        s(format!(
            "{}#{}",
            entry.first_seen_at.sort_key(),
            entry.quarantine_id
        )),
    );
    Ok(item)
}

/// The item of a connector. It only encodes: `DynamoEvidenceStore::put_connector` validates.
/// The item of a connector, listed under its tenant in GSI2 (`CONNECTORS#{tenant}`, by id) so
/// that the console's connectors view needs no Scan.
pub fn connector_item(config: &ConnectorConfig) -> Result<Item, StoreError> {
    let mut item = with_keys(
        encode(config)?,
        connector_pk(config.connector.as_str()),
        SK_CONNECTOR,
        "connector",
    );
    item.insert(
        "gsi2pk".to_owned(),
        s(connector_list_pk(config.tenant.as_str())),
    );
    item.insert("gsi2sk".to_owned(), s(config.connector.as_str()));
    Ok(item)
}

#[derive(Debug, thiserror::Error)]
pub enum PutConnectorError {
    #[error("connector configuration refused: {0}")]
    Invalid(#[from] ConnectorConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(crate) fn unavailable<E>(what: &'static str) -> impl FnOnce(E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| StoreError::Unavailable(anyhow::Error::new(e).context(what))
}

/// Consistent reads of many items of one table: `BatchGetItem`, 100 keys a request, the keys it
/// leaves unprocessed asked again after a short back-off. The items found, in no order.
pub(crate) async fn batch_get(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    what: &'static str,
) -> Result<Vec<Item>, StoreError> {
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(100) {
        let mut pending = chunk.to_vec();
        let mut rounds = 0u64;
        while !pending.is_empty() {
            rounds += 1;
            if rounds > 10 {
                return Err(StoreError::Unavailable(anyhow::anyhow!(
                    "{what}: BatchGetItem kept returning unprocessed keys"
                )));
            }
            let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(build_error)?;
            let out = client
                .batch_get_item()
                .request_items(table, request)
                .send()
                .await
                .map_err(unavailable(what))?;
            found.extend(
                out.responses
                    .unwrap_or_default()
                    .remove(table)
                    .unwrap_or_default(),
            );
            if let Some(rest) = out.unprocessed_keys.and_then(|mut u| u.remove(table)) {
                pending = rest.keys;
                tokio::time::sleep(std::time::Duration::from_millis(20 * rounds)).await;
            }
        }
    }
    Ok(found)
}

/// DynamoDB implementation of the evidence ports.
#[derive(Clone, Debug)]
pub struct DynamoEvidenceStore {
    client: Client,
    table: String,
}

impl DynamoEvidenceStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Consistent read of a delivery's replay record.
    pub async fn replay_record(
        &self,
        delivery_key: &str,
    ) -> Result<Option<ReplayRecord>, StoreError> {
        self.get_replay(delivery_key).await
    }

    pub async fn observation(
        &self,
        observation_id: &str,
    ) -> Result<Option<Observation>, StoreError> {
        self.get(observation_pk(observation_id), SK_OBSERVATION)
            .await
    }

    pub async fn quarantine_entry(&self, id: &str) -> Result<Option<QuarantineEntry>, StoreError> {
        self.get(quarantine_pk(id), SK_QUARANTINE).await
    }

    /// Stores a connector's configuration, refusing one that `ConnectorConfig::validate` refuses.
    pub async fn put_connector(&self, config: &ConnectorConfig) -> Result<(), PutConnectorError> {
        config.validate()?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(connector_item(config)?))
            .send()
            .await
            .map_err(unavailable("put connector"))?;
        Ok(())
    }

    pub async fn run(&self, run_id: &str) -> Result<Option<Run>, StoreError> {
        self.get(run_pk(run_id), SK_RUN).await
    }

    /// Consistent read of a replay record, its observation ids derived (`decode_replay`).
    pub(crate) async fn get_replay(
        &self,
        delivery_key: &str,
    ) -> Result<Option<ReplayRecord>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(replay_pk(delivery_key), SK_REPLAY)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get replay record"))?;
        out.item.map(decode_replay).transpose()
    }

    pub(crate) async fn get<T: serde::de::DeserializeOwned>(
        &self,
        pk: String,
        sk: &str,
    ) -> Result<Option<T>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get item"))?;
        out.item.map(decode).transpose()
    }

    /// Tokens are account-wide in DynamoDB: scope them to this table so that two stacks (or two
    /// test tables) storing the same delivery never collide.
    fn scoped_token(&self, token: &str) -> String {
        let digest = crate::domain::hashing::sha256(format!("{}\n{token}", self.table).as_bytes());
        crate::domain::hashing::hex(&digest[..16])
    }

    fn replay_action(
        &self,
        action: &ReplayAction,
        now: Timestamp,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = match action {
            ReplayAction::Create { record, replacing } => {
                let mut put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(replay_item(record)?))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    );
                put = match replacing {
                    None => put.condition_expression("attribute_not_exists(pk)"),
                    // Replace exactly the expired epoch we saw, so two workers cannot both
                    // start a new epoch from it.
                    Some(old) => put
                        .condition_expression("epoch = :old_epoch AND expires_at = :old_expires AND expires_at <= :now")
                        .expression_attribute_values(":old_epoch", n(old.epoch))
                        .expression_attribute_values(":old_expires", n(old.expires_at))
                        .expression_attribute_values(":now", n(now.unix_seconds())),
                };
                TransactWriteItem::builder()
                    .put(put.build().map_err(build_error)?)
                    .build()
            }
            ReplayAction::Commit {
                delivery_key,
                fingerprint,
                epoch,
                chunks_total,
                commit_at,
            } => {
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(replay_pk(delivery_key), SK_REPLAY)))
                    .condition_expression(
                        "#state = :pending AND fingerprint = :fp AND epoch = :epoch",
                    )
                    .update_expression(
                        "SET chunks_done = :total, #state = :committed, committed_at = :at",
                    )
                    .expression_attribute_names("#state", "state")
                    .expression_attribute_values(":pending", s("PENDING"))
                    .expression_attribute_values(":fp", s(fingerprint.to_string()))
                    .expression_attribute_values(":epoch", n(epoch))
                    .expression_attribute_values(":total", n(chunks_total))
                    .expression_attribute_values(":committed", s("COMMITTED"))
                    .expression_attribute_values(":at", s(commit_at.to_rfc3339()))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    );
                TransactWriteItem::builder()
                    .update(update.build().map_err(build_error)?)
                    .build()
            }
        };
        Ok(item)
    }

    /// The page's own record; no other page's transaction touches it.
    fn run_page_action(&self, page: &RunPageUpdate) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(run_page_item(&RunPageRecord::from(page))?))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The actions of a chunk's transaction, in order, each with its role (to read the
    /// cancellation reasons, one per action, in order).
    fn chunk_actions(
        &self,
        chunk: &ChunkWrite,
        now: Timestamp,
    ) -> Result<(Vec<TransactWriteItem>, Vec<Role>), StoreError> {
        let mut roles = Vec::with_capacity(chunk.observations.len() + chunk.witnesses.len() + 3);
        let mut actions = Vec::with_capacity(roles.capacity());
        if let Some(replay) = &chunk.replay {
            actions.push(self.replay_action(replay, now)?);
            roles.push(Role::Replay);
        }
        for observation in &chunk.observations {
            actions.push(self.observation_action(observation)?);
            roles.push(Role::Observation);
        }
        for witness in &chunk.witnesses {
            actions.push(self.witness_action(witness)?);
            roles.push(Role::Witness);
        }
        if let Some(page) = &chunk.run_page {
            actions.push(self.run_page_action(page)?);
            roles.push(Role::Other);
        }
        if let Some(marker) = &chunk.commit_marker {
            actions.push(self.commit_marker_action(marker)?);
            roles.push(Role::Other);
        }
        Ok((actions, roles))
    }

    /// An observation, written only under an id not taken yet.
    fn observation_action(
        &self,
        observation: &Observation,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(observation_item(observation)?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The staged commit's check that a chunk's first observation is stored.
    fn witness_action(&self, witness: &ObservationId) -> Result<TransactWriteItem, StoreError> {
        let check = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(observation_pk(witness.as_str()), SK_OBSERVATION)))
            .condition_expression("attribute_exists(pk)")
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// The commit marker of a staged delivery's epoch, written once.
    fn commit_marker_action(&self, marker: &CommitMarker) -> Result<TransactWriteItem, StoreError> {
        let item = with_keys(
            encode(marker)?,
            commit_marker_pk(&marker.delivery_key, marker.epoch),
            SK_COMMIT_MARKER,
            "delivery_commit",
        );
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

pub fn run_page_item(page: &RunPageRecord) -> Result<Item, StoreError> {
    Ok(with_keys(
        encode(page)?,
        run_pk(page.run_id.as_str()),
        &run_page_sk(page.page),
        "run_page",
    ))
}

/// `Ok(true)` when the conditional write happened, `Ok(false)` when its condition refused it
/// (an expected, final answer for idempotent writes), any other failure as `Unavailable`.
pub(crate) fn conditional<O, E, R>(
    result: Result<O, SdkError<E, R>>,
    what: &'static str,
) -> Result<bool, StoreError>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if e.err().code() == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(e) => Err(unavailable(what)(e)),
    }
}

pub(crate) fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Invariant(format!("request does not build: {e}"))
}

/// What an action of a chunk's transaction is, to read its cancellation reason.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Replay,
    Observation,
    Witness,
    Other,
}

/// A chunk's cancelled transaction, read from its reasons (one per action, in the order of
/// `roles`): the replay condition first (with the record that won), then a retryable
/// conflict, then a taken observation id, then a missing witness.
fn chunk_cancelled(
    reasons: Vec<CancellationReason>,
    roles: &[Role],
) -> Result<ChunkOutcome, StoreError> {
    let code = |i: usize| {
        reasons
            .get(i)
            .and_then(|r| r.code.as_deref())
            .unwrap_or("None")
    };
    let failed = |role: Role| {
        roles
            .iter()
            .enumerate()
            .any(|(i, r)| *r == role && code(i) == "ConditionalCheckFailed")
    };
    if failed(Role::Replay) {
        let old = reasons
            .into_iter()
            .next()
            .and_then(|r| r.item)
            .map(decode_replay)
            .transpose()?
            .map(Box::new);
        return Ok(ChunkOutcome::ReplayConditionFailed(old));
    }
    let retryable = [
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
    ];
    if (0..reasons.len()).any(|i| retryable.contains(&code(i))) {
        return Ok(ChunkOutcome::Contended);
    }
    if failed(Role::Observation) {
        return Ok(ChunkOutcome::ObservationIdTaken);
    }
    if failed(Role::Witness) {
        return Ok(ChunkOutcome::WitnessMissing);
    }
    let codes: Vec<&str> = (0..reasons.len()).map(code).collect();
    Err(StoreError::Invariant(format!(
        "transaction cancelled although its conditions allowed it: reasons {codes:?}"
    )))
}

#[async_trait]
impl EvidenceStore for DynamoEvidenceStore {
    async fn record_attempt(
        &self,
        delivery_key: &str,
        expected: &Fingerprint,
        count: bool,
        now: Timestamp,
    ) -> Result<AttemptProbe, StoreError> {
        if !count {
            // This message's attempt is already counted: look, do not write.
            return Ok(match self.replay_record(delivery_key).await? {
                None => AttemptProbe::Absent,
                Some(record) if record.is_expired_at(now) => AttemptProbe::Expired(record),
                Some(record) if record.fingerprint != *expected => AttemptProbe::Differs(record),
                Some(record) => AttemptProbe::Matches(record),
            });
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(replay_pk(delivery_key), SK_REPLAY)))
            .update_expression("SET attempts = attempts + :one, last_attempt_at = :now")
            .condition_expression(
                "attribute_exists(pk) AND expires_at > :now_s AND fingerprint = :fp",
            )
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", s(now.to_rfc3339()))
            .expression_attribute_values(":now_s", n(now.unix_seconds()))
            .expression_attribute_values(":fp", s(expected.to_string()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => {
                let item = out.attributes.ok_or_else(|| {
                    StoreError::Invariant("UpdateItem returned no attributes".into())
                })?;
                Ok(AttemptProbe::Matches(decode_replay(item)?))
            }
            Err(SdkError::ServiceError(e)) => match e.into_err() {
                UpdateItemError::ConditionalCheckFailedException(failed) => match failed.item {
                    None => Ok(AttemptProbe::Absent),
                    Some(item) => {
                        let record = decode_replay(item)?;
                        if record.is_expired_at(now) {
                            Ok(AttemptProbe::Expired(record))
                        } else {
                            Ok(AttemptProbe::Differs(record))
                        }
                    }
                },
                UpdateItemError::TransactionConflictException(_) => Ok(AttemptProbe::Contended),
                other => Err(unavailable("record attempt")(other)),
            },
            Err(other) => Err(unavailable("record attempt")(other)),
        }
    }

    async fn replay_hint(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<crate::protocols::ports::ReplayHint, StoreError> {
        self.replay_hint_of(delivery_key, payload_sha256, now).await
    }

    async fn replay_context(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        source: &crate::domain::model::SourceRef,
        run: Option<&crate::domain::ids::RunId>,
        now: Timestamp,
    ) -> Result<crate::protocols::ports::ReplayContext, StoreError> {
        self.replay_context_of(delivery_key, payload_sha256, source, run, now)
            .await
    }

    async fn count_byte_identical_replay(
        &self,
        delivery_key: &str,
        payload_sha256: &str,
        now: Timestamp,
    ) -> Result<Option<ReplayRecord>, StoreError> {
        self.count_replay_of_payload(delivery_key, payload_sha256, now)
            .await
    }

    /// One chunk of a delivery in one transaction: its replay action, its observations, its
    /// witnesses, its run page and its commit marker. A cancelled transaction is read from its
    /// cancellation reasons (`chunk_cancelled`).
    async fn write_chunk(
        &self,
        chunk: &ChunkWrite,
        now: Timestamp,
    ) -> Result<ChunkOutcome, StoreError> {
        let (actions, roles) = self.chunk_actions(chunk, now)?;
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .client_request_token(self.scoped_token(&chunk.token))
            .send()
            .await;
        let error = match result {
            Ok(_) => return Ok(ChunkOutcome::Written),
            Err(SdkError::ServiceError(e)) => e.into_err(),
            Err(other) => return Err(unavailable("transact write")(other)),
        };
        match error {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                chunk_cancelled(cancelled.cancellation_reasons.unwrap_or_default(), &roles)
            }
            // Same token, other parameters: a concurrent attempt at the same chunk ran first.
            TransactWriteItemsError::IdempotentParameterMismatchException(_)
            | TransactWriteItemsError::TransactionInProgressException(_) => {
                Ok(ChunkOutcome::Contended)
            }
            other => Err(unavailable("transact write")(other)),
        }
    }

    async fn observation_exists(&self, id: &ObservationId) -> Result<bool, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(observation_pk(id.as_str()), SK_OBSERVATION)))
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get observation"))?;
        Ok(out.item.is_some())
    }

    async fn correction_rules(
        &self,
        source: &crate::domain::model::SourceRef,
    ) -> Result<crate::domain::model::CorrectionRules, StoreError> {
        self.rules_of(source).await
    }

    async fn note_delivery(
        &self,
        note: &crate::domain::source_health::DeliveryNote,
    ) -> Result<(), StoreError> {
        DynamoEvidenceStore::note_delivery(self, note).await
    }

    async fn put_quarantine(&self, entry: &QuarantineEntry) -> Result<(), StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(quarantine_item(entry)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        // An entry with this id is already there: idempotent, kept as is.
        conditional(result, "put quarantine entry").map(|_| ())
    }
}

#[async_trait]
impl ConnectorDirectory for DynamoEvidenceStore {
    async fn connector(&self, id: &ConnectorId) -> Result<Option<ConnectorConfig>, StoreError> {
        self.get(connector_pk(id.as_str()), SK_CONNECTOR).await
    }

    async fn definition_version(
        &self,
        id: &ConnectorId,
        version: u64,
    ) -> Result<Option<crate::domain::definition::Definition>, StoreError> {
        DynamoEvidenceStore::definition_version(self, id, version).await
    }
}

/// Checks a replay record is committed; used where only committed deliveries may be visible.
pub fn is_committed(record: &ReplayRecord) -> bool {
    record.state == ReplayState::Committed
}
