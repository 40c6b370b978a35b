//! Adapters that make the local engines behave like AWS where they do not by themselves.
//!
//! DynamoDB Local updates global secondary indexes synchronously; in AWS they are eventually
//! consistent, usually within a second, sometimes much later. `LaggingIndex` wraps the evidence
//! reads and hides index entries younger than a configurable lag, so tests (and the local stack,
//! when asked) see the asynchrony the deployed system lives with. Base-table reads stay
//! strongly consistent, exactly as they are in AWS.

use async_trait::async_trait;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::ids::{ConnectorId, ObservationId, TenantId};
use feedsafe::domain::model::{
    CommitMarker, CorrectionRules, Observation, ReplayRecord, Run, RunPages, SourceQuarantine,
    SourceQuarantineEvent, SourceRef,
};
use feedsafe::domain::verification::VerificationEvent;
use feedsafe::protocols::ports::{Clock, StoreError};
use feedsafe::protocols::projection::{
    ClaimContext, ContextKeys, EvidenceReads, HistoryPage, SourceState,
};
use std::sync::Arc;

/// Evidence reads whose index reads (item history, GSI1) do not show observations recorded
/// less than `lag_ms` ago by `clock`. Everything else is passed through.
pub struct LaggingIndex {
    inner: Arc<dyn EvidenceReads>,
    lag_ms: i64,
    clock: Arc<dyn Clock>,
}

impl LaggingIndex {
    pub fn new(inner: Arc<dyn EvidenceReads>, lag_ms: i64, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            lag_ms,
            clock,
        }
    }

    /// Whether the index shows `observation` yet. Observations without `recorded_at` were
    /// written before the field existed, long enough ago to be indexed.
    pub fn indexed(&self, observation: &Observation) -> bool {
        let now = self.clock.now().unix_millis();
        observation
            .recorded_at
            .is_none_or(|at| now - at.unix_millis() >= self.lag_ms)
    }
}

#[async_trait]
impl EvidenceReads for LaggingIndex {
    async fn replay_record(&self, delivery_key: &str) -> Result<Option<ReplayRecord>, StoreError> {
        self.inner.replay_record(delivery_key).await
    }

    async fn commit_marker_exists(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<bool, StoreError> {
        self.inner.commit_marker_exists(delivery_key, epoch).await
    }

    async fn run(&self, run_id: &str) -> Result<Option<Run>, StoreError> {
        self.inner.run(run_id).await
    }

    async fn run_pages(&self, run_id: &str) -> Result<RunPages, StoreError> {
        self.inner.run_pages(run_id).await
    }

    async fn connector_config(
        &self,
        id: &ConnectorId,
    ) -> Result<Option<ConnectorConfig>, StoreError> {
        self.inner.connector_config(id).await
    }

    async fn source_quarantine(
        &self,
        source: &SourceRef,
    ) -> Result<Option<SourceQuarantine>, StoreError> {
        self.inner.source_quarantine(source).await
    }

    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError> {
        self.inner.correction_rules(source).await
    }

    async fn source_states(&self, sources: &[SourceRef]) -> Result<Vec<SourceState>, StoreError> {
        self.inner.source_states(sources).await
    }

    async fn observation(&self, id: &str) -> Result<Option<Observation>, StoreError> {
        self.inner.observation(id).await
    }

    async fn observations(&self, ids: &[ObservationId]) -> Result<Vec<Observation>, StoreError> {
        self.inner.observations(ids).await
    }

    async fn observations_in_context(
        &self,
        ids: &[ObservationId],
        context: &ContextKeys,
    ) -> Result<(Vec<Observation>, ClaimContext), StoreError> {
        self.inner.observations_in_context(ids, context).await
    }

    async fn item_history(
        &self,
        tenant: &TenantId,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<HistoryPage, StoreError> {
        let mut page = self.inner.item_history(tenant, item, cursor, limit).await?;
        page.observations.retain(|o| self.indexed(o));
        Ok(page)
    }

    async fn source_quarantine_history(
        &self,
        source: &SourceRef,
    ) -> Result<Vec<SourceQuarantineEvent>, StoreError> {
        self.inner.source_quarantine_history(source).await
    }

    async fn commit_marker(
        &self,
        delivery_key: &str,
        epoch: u32,
    ) -> Result<Option<CommitMarker>, StoreError> {
        self.inner.commit_marker(delivery_key, epoch).await
    }

    async fn item_verifications(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<Vec<VerificationEvent>, StoreError> {
        self.inner.item_verifications(tenant, item).await
    }

    async fn connectors_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<feedsafe::domain::connector::ConnectorConfig>, StoreError> {
        self.inner.connectors_of(tenant).await
    }

    async fn source_health_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<feedsafe::domain::source_health::SourceHealth>, StoreError> {
        self.inner.source_health_of(tenant).await
    }

    async fn pull_schedule(
        &self,
        connector: &feedsafe::domain::ids::ConnectorId,
    ) -> Result<Option<feedsafe::domain::source_health::PullSlot>, StoreError> {
        self.inner.pull_schedule(connector).await
    }
}
