//! `GET /v1/sources` and the MCP tool `get_source_status`: per connector of the caller's tenant,
//! how its deliveries are arriving (docs/architecture.md, "Source health"). Read only, like
//! every read: it starts no pull and asks no supplier for anything.

use super::{QueryError, QueryService};
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::{ConnectorId, SourceAccount};
use crate::domain::model::{RunStatus, SourceRef};
use crate::domain::source_health::{
    expected_cadence_minutes, refreshed_share, RefreshedShare, Settled, SourceHealth,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use crate::protocols::query::Principal;
use futures_util::{StreamExt, TryStreamExt};
use serde::Serialize;

/// Sources whose status is read side by side.
const SOURCES_IN_FLIGHT: usize = 8;

/// `GET /v1/sources`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourcesResponse {
    pub as_of: Timestamp,
    pub sources: Vec<SourceStatus>,
}

/// One connector's source and how its deliveries are arriving.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceStatus {
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    /// `pull`, `webhook` or `drop`.
    pub transport: &'static str,
    /// How often a delivery is expected (`null`: no cadence, never overdue).
    pub expected_cadence_minutes: Option<u32>,
    /// When the last delivery was received, whatever became of it, and how it settled.
    pub last_received_at: Option<Timestamp>,
    pub last_outcome: Option<Settled>,
    pub last_committed_at: Option<Timestamp>,
    /// When a delivery last settled each way.
    pub last_settled: LastSettled,
    pub overdue: bool,
    pub overdue_since: Option<Timestamp>,
    /// Of the source's current claims, those observed within the cadence of `as_of`.
    pub refreshed_within_cadence: RefreshedShare,
    pub source_quarantine: QuarantineState,
    /// A pull connector's last run (the one in flight, when there is one).
    pub last_run: Option<RunSummary>,
    pub run_in_flight: bool,
    /// When the dispatcher launches the next scheduled pull (`null`: not scheduled).
    pub next_scheduled_pull: Option<Timestamp>,
    /// What would bring fresher data. This read starts nothing.
    pub refresh: SourceRefresh,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastSettled {
    pub committed: Option<Timestamp>,
    pub replayed: Option<Timestamp>,
    pub quarantined: Option<Timestamp>,
    pub refused: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuarantineState {
    pub active: bool,
    pub since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    /// `running`, `complete` or `incomplete`.
    pub status: &'static str,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
}

/// What a caller can do for fresher data from a source: `{"action": ..., ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SourceRefresh {
    /// A pull connector: an operator starts a run, unless one is in flight or the next
    /// scheduled pull is soon enough.
    StartPullRun {
        method: &'static str,
        path: String,
        requires_scope: &'static str,
        /// The run in flight, if one is.
        run_in_flight: Option<String>,
        next_scheduled_pull: Option<Timestamp>,
    },
    /// A webhook or file-drop connector: only the supplier can send; the last delivery's time
    /// is what to tell them.
    AskSupplier {
        detail: String,
        last_delivery_at: Option<Timestamp>,
    },
}

impl SourceRefresh {
    /// What `connector`, of `transport` (`pull`, `webhook`, `drop`), can do; a pull with its run
    /// in flight and next scheduled pull, a push with its last delivery's time.
    pub fn of(
        transport: &str,
        connector: &ConnectorId,
        last_run: Option<&RunSummary>,
        next_scheduled_pull: Option<Timestamp>,
        last_delivery_at: Option<Timestamp>,
    ) -> Self {
        match transport {
            "pull" => Self::StartPullRun {
                method: "POST",
                path: format!("/v1/connectors/{connector}/runs"),
                requires_scope: "ops:write",
                run_in_flight: last_run
                    .filter(|r| r.status == "running")
                    .map(|r| r.run_id.clone()),
                next_scheduled_pull,
            },
            kind => Self::AskSupplier {
                detail: format!(
                    "connector {connector} receives {kind} deliveries: only the supplier can send fresher data"
                ),
                last_delivery_at,
            },
        }
    }
}

/// A source of an offers answer that is overdue: named even when the caller asked no
/// `max_age_seconds`. Live answers only; not part of the receipt (it is how deliveries are
/// arriving now, not a claim).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverdueSource {
    pub connector: ConnectorId,
    pub expected_cadence_minutes: Option<u32>,
    pub last_committed_at: Option<Timestamp>,
    pub overdue_since: Option<Timestamp>,
    pub refresh: SourceRefresh,
}

fn run_status(status: Option<RunStatus>) -> &'static str {
    match status {
        Some(RunStatus::Complete) => "complete",
        Some(RunStatus::Incomplete) => "incomplete",
        Some(RunStatus::Running) | None => "running",
    }
}

impl QueryService {
    /// Every connector of the caller's tenant (or the one named), with its source's status at
    /// `now`. An unknown connector is a 404, as another tenant's is.
    pub async fn sources(
        &self,
        principal: &Principal,
        connector: Option<&str>,
        now: Timestamp,
    ) -> Result<SourcesResponse, QueryError> {
        let tenant = &principal.tenant;
        let (mut configs, health) = tokio::try_join!(
            self.reads.connectors_of(tenant),
            self.reads.source_health_of(tenant)
        )?;
        if let Some(asked) = connector {
            configs.retain(|c| c.connector.as_str() == asked);
            if configs.is_empty() {
                return Err(QueryError::NotFound(format!(
                    "connector {} is not one of this tenant's",
                    crate::protocols::query::quoted(asked)
                )));
            }
        }
        configs.sort_by(|a, b| a.connector.cmp(&b.connector));
        let sources = futures_util::stream::iter(configs)
            .map(|config| {
                let health = health
                    .iter()
                    .find(|h| h.connector == config.connector)
                    .cloned()
                    .unwrap_or_else(|| {
                        SourceHealth::empty(tenant.clone(), config.connector.clone())
                    });
                self.source_status(config, health, now)
            })
            .buffered(SOURCES_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(SourcesResponse {
            as_of: now,
            sources,
        })
    }

    /// One source's status: its health record judged at `now`, with the reads it needs.
    async fn source_status(
        &self,
        config: ConnectorConfig,
        health: SourceHealth,
        now: Timestamp,
    ) -> Result<SourceStatus, QueryError> {
        let source = SourceRef {
            tenant: config.tenant.clone(),
            connector: config.connector.clone(),
            source_account: config.source_account.clone(),
        };
        let cadence = expected_cadence_minutes(&config);
        let (share, quarantine, last_run, schedule) = tokio::try_join!(
            self.refreshed_share(&source, cadence, now),
            self.reads.source_quarantine(&source),
            self.last_run(&health),
            self.reads.pull_schedule(&config.connector)
        )?;
        let overdue = health.overdue(cadence, now);
        let next_pull = schedule.and_then(|s| s.next_pull(now));
        let refresh = SourceRefresh::of(
            config.transport_kind(),
            &config.connector,
            last_run.as_ref(),
            next_pull,
            health.last_received_at,
        );
        Ok(SourceStatus {
            transport: config.transport_kind(),
            expected_cadence_minutes: cadence,
            last_received_at: health.last_received_at,
            last_outcome: health.last_outcome,
            last_committed_at: health.last_committed_at,
            last_settled: LastSettled {
                committed: health.last_committed_at,
                replayed: health.last_replayed_at,
                quarantined: health.last_quarantined_at,
                refused: health.last_refused_at,
            },
            overdue: overdue.overdue,
            overdue_since: overdue.overdue_since,
            refreshed_within_cadence: share,
            source_quarantine: QuarantineState {
                active: quarantine.as_ref().is_some_and(|q| q.active),
                since: quarantine.filter(|q| q.active).map(|q| q.created_at),
            },
            run_in_flight: last_run.as_ref().is_some_and(|r| r.status == "running"),
            last_run,
            next_scheduled_pull: next_pull,
            refresh,
            connector: config.connector,
            source_account: config.source_account,
        })
    }

    /// The share of the source's current claims observed within its cadence of `now`.
    async fn refreshed_share(
        &self,
        source: &SourceRef,
        cadence: Option<u32>,
        now: Timestamp,
    ) -> Result<RefreshedShare, StoreError> {
        let rows = self.projection.rows_of_source(source).await?;
        let observed = rows
            .iter()
            .filter(|row| !row.observation.future_dated)
            .map(|row| row.observation.observed_at);
        Ok(refreshed_share(observed, cadence, now))
    }

    /// The overdue sources among `connectors` (of an offers answer), judged at `at` from their
    /// health records alone; only an overdue pull reads its last run and schedule.
    pub(super) async fn overdue_sources(
        &self,
        connectors: &[&ConnectorId],
        health: &[SourceHealth],
        at: Timestamp,
    ) -> Result<Vec<OverdueSource>, StoreError> {
        let mut out = Vec::new();
        for h in health.iter().filter(|h| connectors.contains(&&h.connector)) {
            let state = h.overdue(h.expected_cadence_minutes, at);
            if !state.overdue {
                continue;
            }
            // A cadence is noted with its transport, by the definition write.
            let Some(transport) = h.transport.as_deref() else {
                continue;
            };
            let (last_run, schedule) = match transport {
                "pull" => {
                    tokio::try_join!(self.last_run(h), self.reads.pull_schedule(&h.connector))?
                }
                _ => (None, None),
            };
            out.push(OverdueSource {
                connector: h.connector.clone(),
                expected_cadence_minutes: h.expected_cadence_minutes,
                last_committed_at: h.last_committed_at,
                overdue_since: state.overdue_since,
                refresh: SourceRefresh::of(
                    transport,
                    &h.connector,
                    last_run.as_ref(),
                    schedule.and_then(|s| s.next_pull(at)),
                    h.last_received_at,
                ),
            });
        }
        Ok(out)
    }

    /// The run the health record names last, as it stands.
    async fn last_run(&self, health: &SourceHealth) -> Result<Option<RunSummary>, StoreError> {
        let Some(run_id) = &health.last_run_id else {
            return Ok(None);
        };
        Ok(self.reads.run(run_id).await?.map(|run| RunSummary {
            run_id: run.run_id.to_string(),
            status: run_status(run.status),
            started_at: run.started_at,
            completed_at: run.completed_at,
        }))
    }
}
