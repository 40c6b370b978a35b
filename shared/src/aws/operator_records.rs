//! Identity corrections, source quarantines and quarantine resolutions in the evidence table.
//! Every operator record here is append-only: written once with `attribute_not_exists`, never
//! updated. The only items that change are the pointers readers consult (a source's rule set,
//! a source quarantine's state, a quarantine entry's status), and each change of a pointer is
//! made in the same transaction as the append-only record that explains it.
//!
//! | record | pk | sk |
//! |---|---|---|
//! | rule set of a source | `CRULES#{tenant}#{connector}#{account}` | `RULES` |
//! | correction | `CORR#{id}` | `CORR` |
//! | re-attributed observation | `CORR#{id}` | `SUP#{old observation id}` |
//! | sweep | `CORR#{id}` | `SWEEP#{finished_at}` |
//! | settling marker (GSI2 `CORRECTIONS#SETTLING`) | `CORR#{id}` | `SETTLE` |
//! | source quarantine state | `SRCQ#{tenant}#{connector}#{account}` | `SRCQ` |
//! | source quarantine event | `SRCQ#…` | `EVENT#{at}#{event id}` |
//! | quarantine resolution event | `QUAR#{id}` | `RES#{at}#{action}` |

use super::dynamo::{
    build_error, correction_pk, decode, encode, key, observation_item, observation_pk, s,
    source_quarantine_pk, unavailable, with_keys, DynamoEvidenceStore, Item, GSI2, SK_CORRECTION,
    SK_OBSERVATION, SK_SOURCE_QUARANTINE,
};
use crate::domain::ids::ObservationId;
use crate::domain::model::{
    CorrectionRules, IdentityCorrection, SourceQuarantine, SourceQuarantineEvent, SourceRef,
    SupersessionRecord, SweepRecord,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::identity_corrections::{CorrectionStore, Recorded};
use crate::protocols::ports::StoreError;
use crate::protocols::ports::{Reattribution, Reattributor};
use crate::protocols::source_quarantine::SourceQuarantineStore;
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

pub const SK_RULES: &str = "RULES";
pub const SK_SETTLE: &str = "SETTLE";
pub const SETTLING_PK: &str = "CORRECTIONS#SETTLING";

pub fn rules_pk(source: &SourceRef) -> String {
    format!(
        "CRULES#{}#{}#{}",
        source.tenant, source.connector, source.source_account
    )
}

pub const SUPERSESSION_SK_PREFIX: &str = "SUP#";

/// Sort key, under the correction, of the record of one observation it re-attributed.
pub fn supersession_sk(old: &ObservationId) -> String {
    format!("{SUPERSESSION_SK_PREFIX}{old}")
}

/// The stored rule set of a source (its pointer item).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredRules {
    pub source: SourceRef,
    #[serde(flatten)]
    pub rules: CorrectionRules,
}

pub(super) fn put(
    item: Item,
    table: &str,
    condition: Option<&str>,
) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item));
    if let Some(condition) = condition {
        put = put.condition_expression(condition);
    }
    Ok(TransactWriteItem::builder()
        .put(put.build().map_err(build_error)?)
        .build())
}

/// Whether a failed `TransactWriteItems` was cancelled (some condition refused it).
fn cancelled<R>(
    error: &SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError, R>,
) -> Option<Vec<String>> {
    match error {
        SdkError::ServiceError(e) => match e.err() {
            aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => {
                Some(
                    c.cancellation_reasons()
                        .iter()
                        .map(|r| r.code().unwrap_or("None").to_owned())
                        .collect(),
                )
            }
            _ => None,
        },
        _ => None,
    }
}

impl DynamoEvidenceStore {
    pub(super) async fn query_prefix<T: serde::de::DeserializeOwned>(
        &self,
        pk: String,
        prefix: &str,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client()
                .query()
                .table_name(self.table())
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":prefix", s(prefix))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("query records"))?;
            for item in page.items.unwrap_or_default() {
                out.push(decode(item)?);
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    /// The rules in force for a source (consistent; empty when none).
    pub async fn rules_of(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError> {
        Ok(self
            .get::<StoredRules>(rules_pk(source), SK_RULES)
            .await?
            .map(|stored| stored.rules)
            .unwrap_or_default())
    }

    /// One re-attribution: the copy, the mark on the old observation, the correction's record.
    fn reattribution_actions(
        &self,
        step: &Reattribution,
        at: Timestamp,
    ) -> Result<[TransactWriteItem; 3], StoreError> {
        let new = step.old.reattributed(&step.to, &step.correction_id, at);
        let copy = put(
            observation_item(&new)?,
            self.table(),
            Some("attribute_not_exists(pk)"),
        )?;
        let mark = Update::builder()
            .table_name(self.table())
            .set_key(Some(key(
                observation_pk(step.old.observation_id.as_str()),
                SK_OBSERVATION,
            )))
            .update_expression("SET superseded_by = :new")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(superseded_by)")
            .expression_attribute_values(":new", s(new.observation_id.as_str()))
            .build()
            .map_err(build_error)?;
        let record = SupersessionRecord {
            correction_id: step.correction_id.clone(),
            superseded: step.old.observation_id.clone(),
            superseded_by: new.observation_id.clone(),
            at,
        };
        let record = put(
            with_keys(
                encode(&record)?,
                correction_pk(&step.correction_id),
                &supersession_sk(&step.old.observation_id),
                "supersession",
            ),
            self.table(),
            None,
        )?;
        Ok([
            copy,
            TransactWriteItem::builder().update(mark).build(),
            record,
        ])
    }

    pub(super) async fn transact(
        &self,
        actions: Vec<TransactWriteItem>,
        what: &'static str,
    ) -> Result<Option<Vec<String>>, StoreError> {
        match self
            .client()
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await
        {
            Ok(_) => Ok(None),
            Err(e) => match cancelled(&e) {
                Some(reasons) => Ok(Some(reasons)),
                None => Err(unavailable(what)(e)),
            },
        }
    }

    /// Sets a source quarantine: the event and the state in one transaction; refused (`false`)
    /// when the source is already quarantined.
    pub async fn set_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError> {
        self.write_source_quarantine(
            event,
            true,
            "attribute_not_exists(pk) OR active = :was",
            false,
        )
        .await
    }

    /// Lifts a source quarantine; refused (`false`) when the source is not quarantined.
    pub async fn lift_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError> {
        self.write_source_quarantine(event, false, "active = :was", true)
            .await
    }

    /// Appends `event` and writes the source's state as `active`, in one transaction, if the
    /// state item meets `condition` (`:was` bound to `was`); `false` when it does not.
    async fn write_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
        active: bool,
        condition: &str,
        was: bool,
    ) -> Result<bool, StoreError> {
        let state = SourceQuarantine {
            source: event.source.clone(),
            active,
            reason: event.reason.clone(),
            created_at: event.at,
            event_id: Some(event.event_id.clone()),
        };
        let state_item = with_keys(
            encode(&state)?,
            source_quarantine_pk(&state.source),
            SK_SOURCE_QUARANTINE,
            "source_quarantine",
        );
        let actions = vec![
            self.source_quarantine_event_action(event)?,
            put(state_item, self.table(), Some(condition))
                .and_then(|a| with_value(a, ":was", AttributeValue::Bool(was)))?,
        ];
        let what = if active {
            "set source quarantine"
        } else {
            "lift source quarantine"
        };
        Ok(self.transact(actions, what).await?.is_none())
    }

    fn source_quarantine_event_action(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<TransactWriteItem, StoreError> {
        put(
            with_keys(
                encode(event)?,
                source_quarantine_pk(&event.source),
                &format!("EVENT#{}#{}", event.at.sort_key(), event.event_id),
                "source_quarantine_event",
            ),
            self.table(),
            Some("attribute_not_exists(pk)"),
        )
    }

    /// Every set and lift of a source's quarantine, oldest first.
    pub async fn source_quarantine_events(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<SourceQuarantineEvent>, StoreError> {
        self.query_prefix(source_quarantine_pk(source), "EVENT#")
            .await
    }

    /// Moves quarantine entry `id` from status `from` to `to` and appends `event` (its
    /// resolution record) in one transaction; `resolution`, when given, is set on the entry
    /// only if it has none yet (the first decision is never rewritten). False, changing
    /// nothing, when the entry is not in status `from`.
    #[allow(clippy::too_many_arguments)]
    pub async fn resolve_quarantine<R: serde::Serialize, E: serde::Serialize>(
        &self,
        id: &str,
        from: &str,
        to: &str,
        resolution: Option<&R>,
        event: &E,
        event_at: Timestamp,
        event_action: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::builder()
            .table_name(self.table())
            .set_key(Some(key(
                super::dynamo::quarantine_pk(id),
                super::dynamo::SK_QUARANTINE,
            )))
            .condition_expression("attribute_exists(pk) AND #status = :from")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", s(from))
            .expression_attribute_values(":to", s(to));
        update = match resolution {
            Some(resolution) => update
                .update_expression(
                    "SET #status = :to, resolution = if_not_exists(resolution, :resolution)",
                )
                .expression_attribute_values(":resolution", attribute(resolution)?),
            None => update.update_expression("SET #status = :to"),
        };
        let mut record = match attribute(event)? {
            AttributeValue::M(map) => map,
            _ => {
                return Err(StoreError::Invariant(
                    "resolution event is not a map".into(),
                ))
            }
        };
        record.insert("quarantine_id".into(), s(id));
        let record = with_keys(
            record,
            super::dynamo::quarantine_pk(id),
            &format!("RES#{}#{event_action}", event_at.sort_key()),
            "quarantine_resolution",
        );
        let actions = vec![
            TransactWriteItem::builder()
                .update(update.build().map_err(build_error)?)
                .build(),
            put(record, self.table(), Some("attribute_not_exists(pk)"))?,
        ];
        Ok(self
            .transact(actions, "resolve quarantine entry")
            .await?
            .is_none())
    }

    /// The resolution records of a quarantine entry, oldest first.
    pub async fn quarantine_resolutions<R: serde::de::DeserializeOwned>(
        &self,
        id: &str,
    ) -> Result<Vec<R>, StoreError> {
        self.query_prefix(super::dynamo::quarantine_pk(id), "RES#")
            .await
    }
}

fn attribute<T: serde::Serialize>(value: &T) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(value)
        .map_err(|e| StoreError::Invariant(format!("record does not encode: {e}")))
}

/// Adds an expression value to a transaction's Put (its condition refers to it).
fn with_value(
    action: TransactWriteItem,
    name: &str,
    value: AttributeValue,
) -> Result<TransactWriteItem, StoreError> {
    let Some(put) = action.put else {
        return Ok(action);
    };
    let mut values = put.expression_attribute_values.clone().unwrap_or_default();
    values.insert(name.to_owned(), value);
    let rebuilt = Put::builder()
        .table_name(put.table_name)
        .set_item(Some(put.item))
        .set_condition_expression(put.condition_expression)
        .set_expression_attribute_values(Some(values))
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().put(rebuilt).build())
}

#[async_trait]
impl SourceQuarantineStore for DynamoEvidenceStore {
    async fn set_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError> {
        DynamoEvidenceStore::set_source_quarantine(self, event).await
    }

    async fn lift_source_quarantine(
        &self,
        event: &SourceQuarantineEvent,
    ) -> Result<bool, StoreError> {
        DynamoEvidenceStore::lift_source_quarantine(self, event).await
    }

    async fn source_quarantine_events(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<SourceQuarantineEvent>, StoreError> {
        DynamoEvidenceStore::source_quarantine_events(self, source).await
    }
}

#[async_trait]
impl CorrectionStore for DynamoEvidenceStore {
    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError> {
        self.rules_of(source).await
    }

    async fn record_correction(
        &self,
        correction: &IdentityCorrection,
        rules: &CorrectionRules,
        expected_version: u64,
        settle_due: Timestamp,
    ) -> Result<Recorded, StoreError> {
        let header = put(
            with_keys(
                encode(correction)?,
                correction_pk(&correction.correction_id),
                SK_CORRECTION,
                "identity_correction",
            ),
            self.table(),
            Some("attribute_not_exists(pk)"),
        )?;
        let stored = StoredRules {
            source: correction.source.clone(),
            rules: rules.clone(),
        };
        let rules_put = put(
            with_keys(
                encode(&stored)?,
                rules_pk(&correction.source),
                SK_RULES,
                "correction_rules",
            ),
            self.table(),
            Some(if expected_version == 0 {
                "attribute_not_exists(pk) OR version = :v"
            } else {
                "version = :v"
            }),
        )
        .and_then(|a| with_value(a, ":v", AttributeValue::N(expected_version.to_string())))?;
        let mut settle = key(correction_pk(&correction.correction_id), SK_SETTLE);
        settle.insert("entity".into(), s("correction_settling"));
        settle.insert("correction_id".into(), s(&correction.correction_id));
        settle.insert("gsi2pk".into(), s(SETTLING_PK));
        settle.insert(
            "gsi2sk".into(),
            s(format!(
                "{}#{}",
                settle_due.sort_key(),
                correction.correction_id
            )),
        );
        let actions = vec![header, rules_put, put(settle, self.table(), None)?];
        match self.transact(actions, "record identity correction").await? {
            None => Ok(Recorded::Recorded),
            Some(reasons)
                if reasons.first().map(String::as_str) == Some("ConditionalCheckFailed") =>
            {
                Ok(Recorded::Exists)
            }
            Some(reasons)
                if reasons.get(1).map(String::as_str) == Some("ConditionalCheckFailed") =>
            {
                Ok(Recorded::RulesChanged)
            }
            Some(reasons) => Err(StoreError::Unavailable(anyhow::anyhow!(
                "identity correction transaction cancelled: {reasons:?}"
            ))),
        }
    }

    async fn correction(&self, id: &str) -> Result<Option<IdentityCorrection>, StoreError> {
        self.get(correction_pk(id), SK_CORRECTION).await
    }

    async fn supersessions(&self, id: &str) -> Result<Vec<SupersessionRecord>, StoreError> {
        self.query_prefix(correction_pk(id), SUPERSESSION_SK_PREFIX)
            .await
    }

    async fn sweeps(&self, id: &str) -> Result<Vec<SweepRecord>, StoreError> {
        self.query_prefix(correction_pk(id), "SWEEP#").await
    }

    async fn record_sweep(
        &self,
        sweep: &SweepRecord,
        settled: bool,
        next_due: Timestamp,
    ) -> Result<(), StoreError> {
        let record = put(
            with_keys(
                encode(sweep)?,
                correction_pk(&sweep.correction_id),
                &format!("SWEEP#{}", sweep.finished_at.sort_key()),
                "correction_sweep",
            ),
            self.table(),
            None,
        )?;
        let settle_key = key(correction_pk(&sweep.correction_id), SK_SETTLE);
        let marker = if settled {
            TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(self.table())
                        .set_key(Some(settle_key))
                        .build()
                        .map_err(build_error)?,
                )
                .build()
        } else {
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(self.table())
                        .set_key(Some(settle_key))
                        .update_expression("SET gsi2sk = :due")
                        .condition_expression("attribute_exists(pk)")
                        .expression_attribute_values(
                            ":due",
                            s(format!("{}#{}", next_due.sort_key(), sweep.correction_id)),
                        )
                        .build()
                        .map_err(build_error)?,
                )
                .build()
        };
        match self
            .transact(vec![record, marker], "record correction sweep")
            .await?
        {
            // Already settled (no marker to move): the sweep record alone is kept.
            Some(_) => {
                let record = with_keys(
                    encode(sweep)?,
                    correction_pk(&sweep.correction_id),
                    &format!("SWEEP#{}", sweep.finished_at.sort_key()),
                    "correction_sweep",
                );
                self.client()
                    .put_item()
                    .table_name(self.table())
                    .set_item(Some(record))
                    .send()
                    .await
                    .map_err(unavailable("record correction sweep"))?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    async fn settling(&self, now: Timestamp) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client()
                .query()
                .table_name(self.table())
                .index_name(GSI2)
                .key_condition_expression("gsi2pk = :settling AND gsi2sk < :due")
                .expression_attribute_values(":settling", s(SETTLING_PK))
                .expression_attribute_values(":due", s(format!("{}~", now.sort_key())))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("query settling corrections"))?;
            ids.extend(
                page.items
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|i| i.get("correction_id").and_then(|v| v.as_s().ok()).cloned()),
            );
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(ids);
            }
        }
    }

    async fn is_settled(&self, id: &str) -> Result<bool, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(correction_pk(id), SK_SETTLE)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get settling marker"))?;
        Ok(out.item.is_none())
    }
}

#[async_trait]
impl Reattributor for DynamoEvidenceStore {
    async fn reattribute(
        &self,
        moves: &[Reattribution],
        at: Timestamp,
    ) -> Result<Vec<ObservationId>, StoreError> {
        let mut done = Vec::new();
        for group in moves.chunks(crate::protocols::identity_corrections::REATTRIBUTION_GROUP) {
            let mut actions = Vec::with_capacity(group.len() * 3);
            for step in group {
                actions.extend(self.reattribution_actions(step, at)?);
            }
            if self
                .transact(actions, "re-attribute observations")
                .await?
                .is_none()
            {
                done.extend(group.iter().map(|m| m.old.observation_id.clone()));
                continue;
            }
            // Some observation of the group was re-attributed by someone else meanwhile: one
            // at a time, skipping those.
            for step in group {
                let actions = self.reattribution_actions(step, at)?.to_vec();
                if self
                    .transact(actions, "re-attribute observation")
                    .await?
                    .is_none()
                {
                    done.push(step.old.observation_id.clone());
                }
            }
        }
        Ok(done)
    }
}

/// The ops routes' evidence-table port (`crate::ops::ports::OpsStore`), by delegation.
#[async_trait]
impl crate::ops::ports::OpsStore for DynamoEvidenceStore {
    async fn quarantine_entry(
        &self,
        id: &str,
    ) -> Result<Option<crate::ops::ports::ResolvedEntry>, StoreError> {
        self.quarantine_entry_with_resolution(id).await
    }

    async fn quarantine_entries(
        &self,
        tenant: &crate::domain::ids::TenantId,
    ) -> Result<Vec<crate::ops::ports::ResolvedEntry>, StoreError> {
        self.quarantine_list_with_resolution(tenant).await
    }

    async fn quarantine_list(
        &self,
        tenant: &crate::domain::ids::TenantId,
    ) -> Result<Vec<crate::domain::model::QuarantineEntry>, StoreError> {
        DynamoEvidenceStore::quarantine_list(self, tenant).await
    }

    async fn quarantine_resolutions(
        &self,
        id: &str,
    ) -> Result<Vec<crate::ops::ResolutionEvent>, StoreError> {
        DynamoEvidenceStore::quarantine_resolutions(self, id).await
    }

    async fn resolve_quarantine(
        &self,
        transition: &crate::ops::ports::QuarantineTransition<'_>,
    ) -> Result<bool, StoreError> {
        DynamoEvidenceStore::resolve_quarantine(
            self,
            transition.quarantine_id,
            transition.from,
            transition.to,
            transition.resolution,
            transition.event,
            transition.at(),
            &transition.event.action,
        )
        .await
    }

    async fn connectors_of(
        &self,
        tenant: &crate::domain::ids::TenantId,
    ) -> Result<Vec<crate::domain::connector::ConnectorConfig>, StoreError> {
        DynamoEvidenceStore::connectors_of(self, tenant).await
    }

    async fn put_definition(
        &self,
        write: &crate::ops::ports::DefinitionWrite<'_>,
    ) -> Result<crate::ops::ports::DefinitionWritten, StoreError> {
        DynamoEvidenceStore::put_definition(self, write).await
    }

    async fn definition_versions(
        &self,
        connector: &crate::domain::ids::ConnectorId,
    ) -> Result<Vec<crate::ops::ports::DefinitionVersion>, StoreError> {
        DynamoEvidenceStore::definition_versions(self, connector).await
    }

    async fn observation_record(
        &self,
        id: &str,
    ) -> Result<Option<crate::domain::model::Observation>, StoreError> {
        DynamoEvidenceStore::observation(self, id).await
    }
}
