//! Reads of the evidence table for the projection and the read path, and the operator-side
//! writes (runs, source quarantines, identity corrections).

use super::dynamo::{
    batch_get, build_error, commit_marker_pk, conditional, connector_pk, decode, decode_or_skip,
    encode, item_history_pk, key, n, observation_pk, open_runs_pk, open_runs_shard_pk,
    projection_work_pk, run_pk, s, source_quarantine_pk, unavailable, with_keys,
    DynamoEvidenceStore, Item, GSI1, GSI2, OPEN_RUN_SHARDS, RUN_PAGE_SK_PREFIX, SK_COMMIT_MARKER,
    SK_CONNECTOR, SK_OBSERVATION, SK_RUN, SK_SOURCE_QUARANTINE,
};
use super::history_cursor;
use super::operator_records::{rules_pk, StoredRules, SK_RULES};
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::{ConnectorId, ObservationId, TenantId};
use crate::domain::model::{
    CorrectionRules, Observation, ProjectionWork, ReplayRecord, Run, RunPageRecord, RunPages,
    RunStart, RunStatus, SourceQuarantine, SourceRef, MAX_LISTED_MISSING_PAGES,
};
use crate::domain::timestamp::Timestamp;
use crate::intake::poller::RunLedger;
use crate::protocols::ports::{ConnectorDirectory, StoreError};
use crate::protocols::projection::{
    ClaimContext, ContextKeys, EvidenceReads, HistoryPage, ProjectorWrites, SourceState,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, PutRequest, ReturnValue, ReturnValuesOnConditionCheckFailure, WriteRequest,
};
use futures_util::StreamExt;
use std::collections::{BTreeSet, HashMap};

/// The poller's run ledger is the evidence table's run record.
#[async_trait]
impl RunLedger for DynamoEvidenceStore {
    /// Starts the run, then notes it in its connector's health record (a summary: a note
    /// that cannot be written is logged, and the run goes on).
    async fn start_run(&self, run: &Run) -> Result<RunStart, StoreError> {
        let start = DynamoEvidenceStore::start_run(self, run).await?;
        if let RunStart::Open = start {
            let at = run.started_at.unwrap_or(run.updated_at);
            let noted = self
                .note_run_started(&run.tenant, &run.connector, run.run_id.as_str(), at)
                .await;
            if let Err(e) = noted {
                tracing::warn!(error = %e, run_id = %run.run_id, "run not noted in its source's health");
            }
        }
        Ok(start)
    }

    /// Sets the count of an open run; if every page committed before it was known (no commit
    /// is left to complete the run), completes it here.
    async fn count_pages(&self, run: &Run) -> Result<(), StoreError> {
        if let RunStart::Open = DynamoEvidenceStore::start_run(self, run).await? {
            let pages = self.run_pages(run.run_id.as_str()).await?;
            if pages.all_committed(run.page_count) {
                ProjectorWrites::mark_complete(self, run.run_id.as_str(), Timestamp::now()).await?;
            }
        }
        Ok(())
    }
}

impl DynamoEvidenceStore {
    /// Starts (or re-announces) a run: RUNNING until all pages commit or its deadline passes.
    /// A run that is already `COMPLETE` or `INCOMPLETE` is left exactly as it is (not reopened,
    /// not touched at all) and reported `Closed` with its committed pages. A run id that exists
    /// for another tenant or connector is refused (`Invariant`), never overwritten.
    pub async fn start_run(&self, run: &Run) -> Result<RunStart, StoreError> {
        let deadline = run.deadline.unwrap_or(0);
        let mut expression = String::from(
            "SET entity = :entity, run_id = :run, tenant = :tenant, connector = :connector, \
             #status = if_not_exists(#status, :running), started_at = if_not_exists(started_at, :now), \
             deadline = :deadline, updated_at = :now, gsi2pk = :open, gsi2sk = :due",
        );
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(run_pk(run.run_id.as_str()), SK_RUN)))
            .condition_expression(
                "(attribute_not_exists(tenant) OR (tenant = :tenant AND connector = :connector)) \
                 AND (attribute_not_exists(#status) OR #status = :running)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":entity", s("run"))
            .expression_attribute_values(":run", s(run.run_id.as_str()))
            .expression_attribute_values(":tenant", s(run.tenant.as_str()))
            .expression_attribute_values(":connector", s(run.connector.as_str()))
            .expression_attribute_values(":running", s("RUNNING"))
            .expression_attribute_values(":now", s(run.updated_at.to_rfc3339()))
            .expression_attribute_values(":deadline", n(deadline))
            .expression_attribute_values(":open", s(open_runs_pk(run.run_id.as_str())))
            .expression_attribute_values(":due", s(format!("{deadline:012}#{}", run.run_id)));
        if let Some(credential) = &run.credential_ref {
            expression.push_str(", credential_ref = :credential");
            update = update.expression_attribute_values(":credential", s(credential));
        }
        if let Some(count) = run.page_count {
            expression.push_str(", page_count = :count");
            update = update.expression_attribute_values(":count", n(count));
        }
        if let Some(publication) = run.publication {
            // Recorded when the run starts; a re-announced run keeps what it recorded.
            expression.push_str(", publication = if_not_exists(publication, :publication)");
            update = update.expression_attribute_values(":publication", s(publication.as_str()));
        }
        let result = update
            .update_expression(expression)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(RunStart::Open),
            Err(SdkError::ServiceError(e)) => match e.into_err() {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    let stored: Run = failed.item.map(decode).transpose()?.ok_or_else(|| {
                        StoreError::Invariant("run start refused without a stored run".into())
                    })?;
                    if stored.tenant != run.tenant || stored.connector != run.connector {
                        return Err(StoreError::Invariant(format!(
                            "run {} belongs to another tenant or connector",
                            run.run_id
                        )));
                    }
                    let status = stored.status.unwrap_or(RunStatus::Running);
                    let committed = self.run_pages(run.run_id.as_str()).await?.committed();
                    Ok(RunStart::Closed { status, committed })
                }
                other => Err(unavailable("start run")(other)),
            },
            Err(other) => Err(unavailable("start run")(other)),
        }
    }

    /// Settles every open run past its deadline: `COMPLETE` if every page committed, else
    /// `INCOMPLETE` with the missing pages named. Pages through every shard of the open-runs
    /// index (each Query returns at most 1 MB) and settles up to 16 runs at a time. Returns the
    /// runs it changed.
    pub async fn sweep_runs(&self, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        let mut due: Vec<String> = Vec::new();
        for shard in 0..OPEN_RUN_SHARDS {
            let mut start = None;
            loop {
                let out = self
                    .client()
                    .query()
                    .table_name(self.table())
                    .index_name(GSI2)
                    .key_condition_expression("gsi2pk = :open AND gsi2sk < :due")
                    .expression_attribute_values(":open", s(open_runs_shard_pk(shard)))
                    .expression_attribute_values(":due", s(format!("{:012}~", now.unix_seconds())))
                    .projection_expression("run_id")
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(unavailable("query open runs"))?;
                due.extend(
                    out.items
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|i| i.get("run_id").and_then(|v| v.as_s().ok()).cloned()),
                );
                start = out.last_evaluated_key;
                if start.is_none() {
                    break;
                }
            }
        }
        let settled: Vec<Result<Option<Run>, StoreError>> = futures_util::stream::iter(due)
            .map(|run_id| async move { self.settle_run(&run_id, now).await })
            .buffer_unordered(16)
            .collect()
            .await;
        settled.into_iter().filter_map(Result::transpose).collect()
    }

    /// One run past its deadline; `None` when someone else settled it first.
    async fn settle_run(&self, run_id: &str, now: Timestamp) -> Result<Option<Run>, StoreError> {
        let Some(run) = self.run(run_id).await? else {
            return Ok(None);
        };
        let pages = self.run_pages(run_id).await?;
        if pages.all_committed(run.page_count) {
            if !ProjectorWrites::mark_complete(self, run_id, now).await? {
                return Ok(None);
            }
        } else {
            let missing = pages.missing(run.page_count);
            let listed: Vec<AttributeValue> = missing
                .iter()
                .take(MAX_LISTED_MISSING_PAGES)
                .map(n)
                .collect();
            let result = self
                .client()
                .update_item()
                .table_name(self.table())
                .set_key(Some(key(run_pk(run_id), SK_RUN)))
                .update_expression(
                    "SET #status = :incomplete, missing_pages = :missing, missing_count = :count, \
                     updated_at = :now REMOVE gsi2pk, gsi2sk",
                )
                .condition_expression("#status = :running")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":incomplete", s("INCOMPLETE"))
                .expression_attribute_values(":running", s("RUNNING"))
                .expression_attribute_values(":missing", AttributeValue::L(listed))
                .expression_attribute_values(":count", n(missing.len()))
                .expression_attribute_values(":now", s(now.to_rfc3339()))
                .send()
                .await;
            // Refused: the run is no longer RUNNING (another sweep or its last page won).
            if !conditional(result, "mark run incomplete")? {
                return Ok(None);
            }
        }
        self.run(run_id).await
    }

    /// Puts items with `BatchWriteItem` (25 at a time), retrying unprocessed ones.
    pub async fn batch_put(&self, items: Vec<Item>, what: &'static str) -> Result<(), StoreError> {
        for chunk in items.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|item| {
                    PutRequest::builder()
                        .set_item(Some(item.clone()))
                        .build()
                        .map(|put| WriteRequest::builder().put_request(put).build())
                        .map_err(build_error)
                })
                .collect::<Result<_, _>>()?;
            let mut rounds = 0u64;
            while !pending.is_empty() {
                rounds += 1;
                if rounds > 10 {
                    return Err(StoreError::Unavailable(anyhow::anyhow!(
                        "{what}: BatchWriteItem kept returning unprocessed items"
                    )));
                }
                let out = self
                    .client()
                    .batch_write_item()
                    .request_items(self.table(), std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(unavailable(what))?;
                if let Some(rest) = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(self.table()))
                {
                    pending = rest;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * rounds)).await;
                }
            }
        }
        Ok(())
    }

    /// The committed pages of a run (its page records; a consistent, paginated Query).
    pub async fn run_pages(&self, run_id: &str) -> Result<RunPages, StoreError> {
        let mut pages = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client()
                .query()
                .table_name(self.table())
                .key_condition_expression("pk = :run AND begins_with(sk, :page)")
                .expression_attribute_values(":run", s(run_pk(run_id)))
                .expression_attribute_values(":page", s(RUN_PAGE_SK_PREFIX))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("query run pages"))?;
            for item in out.items.unwrap_or_default() {
                pages.push(decode::<RunPageRecord>(item)?);
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(RunPages { pages });
            }
        }
    }

    /// Every (tenant, item) with at least one observation: the input of a full rebuild. An
    /// operator's batch job, so a Scan (paginated, keys only) is acceptable here and nowhere on
    /// the read path.
    pub async fn observed_items(
        &self,
    ) -> Result<std::collections::BTreeSet<(TenantId, String)>, StoreError> {
        let mut items = std::collections::BTreeSet::new();
        let mut start = None;
        loop {
            let out = self
                .client()
                .scan()
                .table_name(self.table())
                .filter_expression("entity = :observation")
                .projection_expression("tenant, #item")
                .expression_attribute_names("#item", "item")
                .expression_attribute_values(":observation", s("observation"))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable("scan observed items"))?;
            for item in out.items.unwrap_or_default() {
                let tenant = item
                    .get("tenant")
                    .and_then(|v| v.as_s().ok())
                    .and_then(|t| TenantId::parse(t).ok());
                let key = item.get("item").and_then(|v| v.as_s().ok()).cloned();
                if let (Some(tenant), Some(key)) = (tenant, key) {
                    items.insert((tenant, key));
                }
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// Quarantine entries of a tenant, oldest first (GSI2; no Scan).
    pub async fn quarantine_list(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<crate::domain::model::QuarantineEntry>, StoreError> {
        let entries = self
            .quarantine_list_with_resolution::<serde_json::Value>(tenant)
            .await?;
        Ok(entries.into_iter().map(|(entry, _)| entry).collect())
    }

    /// A tenant's connectors, by id (GSI2; no Scan). A connector stored before the listing
    /// attributes existed is missing here until `put_connector` writes it again.
    pub async fn connectors_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<ConnectorConfig>, StoreError> {
        self.gsi2_list(
            &super::dynamo::connector_list_pk(tenant.as_str()),
            "query connectors",
        )
        .await?
        .into_iter()
        .map(decode)
        .collect()
    }
}

#[async_trait]
impl ProjectorWrites for DynamoEvidenceStore {
    async fn reattribute(
        &self,
        moves: &[crate::protocols::ports::Reattribution],
        at: Timestamp,
    ) -> Result<Vec<ObservationId>, StoreError> {
        crate::protocols::ports::Reattributor::reattribute(self, moves, at).await
    }

    async fn enqueue_work(&self, work: &[ProjectionWork]) -> Result<(), StoreError> {
        let expires_at = Timestamp::now().unix_seconds() + PROJECTION_WORK_TTL_SECONDS;
        let mut items = Vec::with_capacity(work.len());
        for slice in work {
            let mut item = with_keys(
                encode(slice)?,
                projection_work_pk(&slice.delivery_key, slice.epoch),
                &format!("SLICE#{:06}#{:04}", slice.start, slice.deferrals),
                "projection_work",
            );
            item.insert("expires_at".into(), n(expires_at));
            items.push(item);
        }
        self.batch_put(items, "enqueue projection work").await
    }

    async fn note_pages(&self, page: &RunPageRecord, new_pages: u32) -> Result<Run, StoreError> {
        let mut expression = String::from(
            "SET entity = :entity, run_id = :run, tenant = if_not_exists(tenant, :tenant), \
             connector = if_not_exists(connector, :connector), updated_at = :at",
        );
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(run_pk(page.run_id.as_str()), SK_RUN)))
            .condition_expression(
                "attribute_not_exists(tenant) OR (tenant = :tenant AND connector = :connector)",
            )
            .expression_attribute_values(":entity", s("run"))
            .expression_attribute_values(":run", s(page.run_id.as_str()))
            .expression_attribute_values(":tenant", s(page.tenant.as_str()))
            .expression_attribute_values(":connector", s(page.connector.as_str()))
            .expression_attribute_values(":at", s(page.committed_at.to_rfc3339()))
            .expression_attribute_values(":seen", n(new_pages));
        if let Some(count) = page.page_count {
            expression.push_str(", page_count = if_not_exists(page_count, :count)");
            update = update.expression_attribute_values(":count", n(count));
        }
        expression.push_str(" ADD pages_seen :seen");
        let out = update
            .update_expression(expression)
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match out {
            Ok(out) => decode(out.attributes.unwrap_or_default()),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                Err(StoreError::Invariant(format!(
                    "page {} of run {} names tenant {} / connector {}, but the run belongs to another",
                    page.page, page.run_id, page.tenant, page.connector
                )))
            }
            Err(e) => Err(unavailable("note run pages")(e)),
        }
    }

    async fn mark_complete(&self, run_id: &str, at: Timestamp) -> Result<bool, StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(run_pk(run_id), SK_RUN)))
            .update_expression(
                "SET #status = :complete, completed_at = :at, missing_pages = :none, \
                 missing_count = :zero, updated_at = :at REMOVE gsi2pk, gsi2sk",
            )
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(#status) OR #status <> :complete)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":complete", s("COMPLETE"))
            .expression_attribute_values(":at", s(at.to_rfc3339()))
            .expression_attribute_values(":none", AttributeValue::L(vec![]))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        // Refused: already COMPLETE (or no such run); nothing to do.
        conditional(result, "mark run complete")
    }
}

#[async_trait]
impl EvidenceReads for DynamoEvidenceStore {
    async fn replay_record(&self, delivery_key: &str) -> Result<Option<ReplayRecord>, StoreError> {
        self.get_replay(delivery_key).await
    }

    async fn commit_marker_exists(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<bool, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(
                super::dynamo::commit_marker_pk(delivery_key, epoch),
                super::dynamo::SK_COMMIT_MARKER,
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get commit marker"))?;
        Ok(out.item.is_some())
    }

    async fn run(&self, run_id: &str) -> Result<Option<Run>, StoreError> {
        self.get(run_pk(run_id), SK_RUN).await
    }

    async fn run_pages(&self, run_id: &str) -> Result<RunPages, StoreError> {
        DynamoEvidenceStore::run_pages(self, run_id).await
    }

    async fn connector_config(
        &self,
        id: &ConnectorId,
    ) -> Result<Option<ConnectorConfig>, StoreError> {
        ConnectorDirectory::connector(self, id).await
    }

    async fn source_quarantine(
        &self,
        source: &SourceRef,
    ) -> Result<Option<SourceQuarantine>, StoreError> {
        self.get(source_quarantine_pk(source), SK_SOURCE_QUARANTINE)
            .await
    }

    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError> {
        self.rules_of(source).await
    }

    async fn source_states(&self, sources: &[SourceRef]) -> Result<Vec<SourceState>, StoreError> {
        let context = ContextKeys {
            sources: sources.to_vec(),
            ..ContextKeys::default()
        };
        Ok(self.observations_in_context(&[], &context).await?.1.sources)
    }

    async fn observation(&self, id: &str) -> Result<Option<Observation>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(observation_pk(id), SK_OBSERVATION)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable("get observation"))?;
        Ok(out
            .item
            .and_then(|item| decode_or_skip(item, "observation")))
    }

    async fn observations(&self, ids: &[ObservationId]) -> Result<Vec<Observation>, StoreError> {
        Ok(self
            .observations_in_context(ids, &ContextKeys::default())
            .await?
            .0)
    }

    /// One `BatchGetItem` (per 100 keys) for the observations and their context: every kind of
    /// item asked for is told apart by its sort key.
    async fn observations_in_context(
        &self,
        ids: &[ObservationId],
        context: &ContextKeys,
    ) -> Result<(Vec<Observation>, ClaimContext), StoreError> {
        // A batch may not name a key twice.
        let asked = KeysAsked {
            ids: ids.iter().collect(),
            sources: context.sources.iter().collect(),
            connectors: context.connectors.iter().collect(),
            markers: context.commit_markers.iter().collect(),
        };
        let mut found = ItemsFound::default();
        let what = "batch get observations and their context";
        for item in batch_get(self.client(), self.table(), asked.keys(), what).await? {
            found.take(item, what)?;
        }
        Ok(found.answer(ids, context, asked))
    }

    async fn source_quarantine_history(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<crate::domain::model::SourceQuarantineEvent>, StoreError> {
        self.source_quarantine_events(source).await
    }

    async fn commit_marker(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<Option<crate::domain::model::CommitMarker>, StoreError> {
        self.get(
            super::dynamo::commit_marker_pk(delivery_key, epoch),
            SK_COMMIT_MARKER,
        )
        .await
    }

    async fn item_verifications(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<crate::domain::verification::VerificationEvent>, StoreError> {
        DynamoEvidenceStore::item_verifications(self, tenant, item).await
    }

    async fn connectors_of(&self, tenant: &TenantId) -> Result<Vec<ConnectorConfig>, StoreError> {
        DynamoEvidenceStore::connectors_of(self, tenant).await
    }

    async fn source_health_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<crate::domain::source_health::SourceHealth>, StoreError> {
        DynamoEvidenceStore::source_health_of(self, tenant).await
    }

    async fn pull_schedule(
        &self,
        connector: &ConnectorId,
    ) -> Result<Option<crate::domain::source_health::PullSlot>, StoreError> {
        DynamoEvidenceStore::pull_schedule(self, connector).await
    }

    async fn item_history(
        &self,
        tenant: &TenantId,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<HistoryPage, StoreError> {
        let start = cursor
            .map(|c| history_cursor::decode(tenant, item, c))
            .transpose()?;
        let out = self
            .client()
            .query()
            .table_name(self.table())
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :item")
            .expression_attribute_values(":item", s(item_history_pk(tenant.as_str(), item)))
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(unavailable("query item history"))?;
        let observations = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| decode_or_skip(item, "item history"))
            .collect();
        Ok(HistoryPage {
            observations,
            next: out
                .last_evaluated_key
                .as_ref()
                .and_then(|last| history_cursor::encode(tenant, item, last)),
        })
    }
}

/// The distinct keys of one `observations_in_context` read.
struct KeysAsked<'a> {
    ids: BTreeSet<&'a ObservationId>,
    sources: BTreeSet<&'a SourceRef>,
    connectors: BTreeSet<&'a ConnectorId>,
    markers: BTreeSet<&'a (String, u32)>,
}

impl KeysAsked<'_> {
    /// The observations' keys, then each source's quarantine and rules, each connector's
    /// configuration and each commit marker.
    fn keys(&self) -> Vec<Item> {
        let mut keys: Vec<Item> = self
            .ids
            .iter()
            .map(|id| key(observation_pk(id.as_str()), SK_OBSERVATION))
            .collect();
        keys.extend(self.sources.iter().flat_map(|source| {
            [
                key(source_quarantine_pk(source), SK_SOURCE_QUARANTINE),
                key(rules_pk(source), SK_RULES),
            ]
        }));
        keys.extend(
            self.connectors
                .iter()
                .map(|id| key(connector_pk(id.as_str()), SK_CONNECTOR)),
        );
        keys.extend(
            self.markers
                .iter()
                .map(|(k, epoch)| key(commit_marker_pk(k, *epoch), SK_COMMIT_MARKER)),
        );
        keys
    }
}

/// The items an `observations_in_context` read found, by kind, under their `pk`.
#[derive(Default)]
struct ItemsFound {
    observations: HashMap<ObservationId, Observation>,
    quarantines: HashMap<String, SourceQuarantine>,
    rules: HashMap<String, CorrectionRules>,
    configs: HashMap<String, ConnectorConfig>,
    committed: BTreeSet<String>,
}

impl ItemsFound {
    /// Files one item found by its sort key; an item of a kind not asked for is an invariant
    /// broken.
    fn take(&mut self, item: Item, what: &str) -> Result<(), StoreError> {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        let (pk, sk) = (text(super::dynamo::PK), text(super::dynamo::SK));
        match sk.as_str() {
            SK_OBSERVATION => {
                if let Some(o) = decode_or_skip(item, what) {
                    self.observations.insert(o.observation_id.clone(), o);
                }
            }
            SK_SOURCE_QUARANTINE => {
                self.quarantines.insert(pk, decode(item)?);
            }
            SK_RULES => {
                self.rules.insert(pk, decode::<StoredRules>(item)?.rules);
            }
            SK_CONNECTOR => {
                self.configs.insert(pk, decode(item)?);
            }
            SK_COMMIT_MARKER => {
                self.committed.insert(pk);
            }
            other => {
                return Err(StoreError::Invariant(format!(
                    "{what}: an item with sort key {other:?} was not asked for"
                )))
            }
        }
        Ok(())
    }

    /// The observations in the caller's order, and the context as `ClaimContext` reports it.
    fn answer(
        mut self,
        ids: &[ObservationId],
        context: &ContextKeys,
        asked: KeysAsked<'_>,
    ) -> (Vec<Observation>, ClaimContext) {
        let found = ClaimContext {
            // In the order asked.
            sources: context
                .sources
                .iter()
                .map(|source| SourceState {
                    source: source.clone(),
                    quarantine: self.quarantines.get(&source_quarantine_pk(source)).cloned(),
                    rules: self
                        .rules
                        .get(&rules_pk(source))
                        .cloned()
                        .unwrap_or_default(),
                })
                .collect(),
            connectors: asked
                .connectors
                .into_iter()
                .map(|id| (id.clone(), self.configs.remove(&connector_pk(id.as_str()))))
                .collect(),
            commit_markers: asked
                .markers
                .into_iter()
                .map(|(k, epoch)| {
                    let exists = self.committed.contains(&commit_marker_pk(k, *epoch));
                    ((k.clone(), *epoch), exists)
                })
                .collect(),
        };
        // Keep the caller's order.
        (
            ids.iter()
                .filter_map(|id| self.observations.remove(id))
                .collect(),
            found,
        )
    }
}

/// Projection work records expire a week after they are written (they are done within
/// seconds; TTL deletions never reach the projector).
pub const PROJECTION_WORK_TTL_SECONDS: i64 = 7 * 86_400;
