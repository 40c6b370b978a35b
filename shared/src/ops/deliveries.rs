//! Deliveries, runs (and starting a pull run) and links to raw artifacts.

use super::bodies::{ArtifactLink, ArtifactOf, ArtifactRef, DeliveryStatus, PullStarted, RunBody};
use super::{reply, OpsError, OpsResult, OpsService};
use crate::domain::ids::{ObservationId, RunId};
use crate::domain::model::RunStatus;
use crate::intake::poller::{ExportRun, PullError};
use crate::protocols::query::Principal;
use std::collections::BTreeSet;
use tracing::warn;

impl OpsService {
    /// `GET /v1/deliveries/{key}`.
    pub(super) async fn delivery(&self, principal: &Principal, key: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("delivery {key} not found"));
        if !Self::owns_key(principal, key) {
            return Err(not_found());
        }
        let record = self.evidence.replay_record(key).await?;
        let quarantine = self.quarantine_of_key(&principal.tenant, key).await?;
        let body = match record {
            Some(record) if record.tenant == principal.tenant => DeliveryStatus::Stored {
                artifact: ArtifactRef {
                    key: record.artifact_key.clone(),
                    sha256: record.payload_sha256.clone(),
                },
                record: Box::new(record),
                quarantine,
            },
            Some(_) => return Err(not_found()),
            // The record expired and TTL deleted it, yet entries under the key remain.
            None if !quarantine.is_empty() => DeliveryStatus::Unrecorded {
                delivery_key: key.to_owned(),
                state: None,
                note: "no replay record under this key (never stored, or deleted after its dedup horizon)",
                quarantine,
            },
            None => return Err(not_found()),
        };
        reply(200, &body)
    }

    /// A presigned link to `key`, after checking the object is there: a missing artifact
    /// answers 404 now rather than a link that fails when clicked.
    pub(super) async fn artifact_link(&self, key: &str, sha256: &str, of: ArtifactOf) -> OpsResult {
        let object = self
            .archive
            .head(key)
            .await
            .map_err(OpsError::archive)?
            .ok_or_else(|| {
                OpsError::NotFound(format!("raw artifact {key} is not in the archive"))
            })?;
        let url = self
            .archive
            .presign(key, object.content_type.as_deref())
            .await
            .map_err(OpsError::archive)?;
        reply(200, &ArtifactLink::new(key, sha256, url, of))
    }

    pub(super) async fn delivery_artifact(&self, principal: &Principal, key: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("delivery {key} not found"));
        if !Self::owns_key(principal, key) {
            return Err(not_found());
        }
        let record = self
            .evidence
            .replay_record(key)
            .await?
            .filter(|r| r.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        self.artifact_link(
            &record.artifact_key,
            &record.payload_sha256,
            ArtifactOf {
                delivery_key: Some(key.to_owned()),
                ..ArtifactOf::default()
            },
        )
        .await
    }

    pub(super) async fn observation_artifact(&self, principal: &Principal, id: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("observation {id} not found"));
        let id = ObservationId::parse(id).map_err(|_| not_found())?;
        let observation = self
            .evidence
            .observation_record(id.as_str())
            .await?
            .filter(|o| o.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        self.artifact_link(
            &observation.artifact_key,
            &observation.artifact_sha256,
            ArtifactOf {
                observation_id: Some(id),
                delivery_key: Some(observation.delivery_key.clone()),
                ..ArtifactOf::default()
            },
        )
        .await
    }

    pub(super) async fn quarantine_artifact(&self, principal: &Principal, id: &str) -> OpsResult {
        let (entry, _) = self.entry(principal, id).await?;
        self.artifact_link(
            &entry.evidence_key,
            &entry.evidence_sha256,
            ArtifactOf {
                quarantine_id: Some(id.to_owned()),
                ..ArtifactOf::default()
            },
        )
        .await
    }

    /// `GET /v1/artifacts/{x}`: an observation id, a quarantine id or a delivery key.
    pub(super) async fn artifact(&self, principal: &Principal, target: &str) -> OpsResult {
        if ObservationId::parse(target).is_ok() {
            return self.observation_artifact(principal, target).await;
        }
        if !target.contains('/') && (target.starts_with("q_") || target.starts_with("r_")) {
            return self.quarantine_artifact(principal, target).await;
        }
        self.delivery_artifact(principal, target).await
    }

    /// `GET /v1/runs/{run_id}`: the run, the pages it requested, committed and misses, and the
    /// delivery that committed each page (from the page records).
    pub(super) async fn run(&self, principal: &Principal, run_id: &str) -> OpsResult {
        let not_found = || OpsError::NotFound(format!("run {run_id} not found"));
        let id = RunId::parse(run_id).map_err(|_| not_found())?;
        let run = self
            .evidence
            .run(id.as_str())
            .await?
            .filter(|r| r.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        let pages = self.evidence.run_pages(id.as_str()).await?;
        let body = RunBody {
            pages_requested: match (run.status, run.page_count) {
                (Some(_), Some(count)) => (1..=count).collect(),
                _ => Vec::new(),
            },
            pages_committed: pages.committed().into_iter().collect(),
            pages_missing: pages.missing(run.page_count),
            all_pages_committed: pages.all_committed(run.page_count),
            delivery_keys: pages.pages.iter().map(|p| p.delivery_key.clone()).collect(),
            run,
        };
        reply(200, &body)
    }

    /// `POST /v1/connectors/{id}/runs`: ingestion authority, operators only.
    pub(super) async fn start_run(&self, principal: &Principal, connector: &str) -> OpsResult {
        let config = self.tenant_connector(principal, connector).await?;
        let Some(pull) = &self.pull else {
            return Err(OpsError::Unavailable {
                public: "pull runs cannot be started here",
                internal: "no PullService wired into the ops service".into(),
            });
        };
        // Page 1 names the export, hence the run; the pull itself runs elsewhere, since a
        // large export takes far longer than the 30 s an HTTP request may.
        let located = pull.service.locate(&config.connector).await;
        match located {
            Ok(export) => {
                // What the pull will find, read before it is launched and can change it.
                let body = self.run_start_answer(export).await?;
                pull.launcher.launch(&config.connector).await.map_err(|e| {
                    OpsError::Unavailable {
                        public: "the pull run could not be started; retry",
                        internal: format!("launching the pull of {}: {e:#}", config.connector),
                    }
                })?;
                reply(202, &body)
            }
            Err(PullError::UnknownConnector(id)) => {
                Err(OpsError::UnknownConnector(format!("no connector {id:?}")))
            }
            Err(e @ (PullError::NotPullable { .. } | PullError::Misconfigured(_))) => {
                Err(OpsError::Invalid(e.to_string()))
            }
            Err(PullError::FirstPage { attempts, error }) => {
                warn!(connector = %config.connector, attempts, error = %error, "export page 1 unavailable");
                Err(OpsError::SupplierUnavailable(format!(
                    "the supplier's export page 1 could not be fetched after {attempts} attempt(s); no run was started"
                )))
            }
            Err(PullError::BadExport(detail)) => {
                warn!(connector = %config.connector, detail = %detail, "unusable export");
                Err(OpsError::SupplierUnavailable(
                    "the supplier's export page 1 is not a usable export; no run was started"
                        .into(),
                ))
            }
            Err(PullError::Store(e)) => Err(e.into()),
            Err(e @ PullError::Credential(_)) => Err(OpsError::Invalid(e.to_string())),
        }
    }

    /// The `POST /v1/connectors/{id}/runs` answer for `export`: `started` (a new run),
    /// `resumed` (a run still `RUNNING`), `already_complete` or `already_incomplete` (a settled
    /// run, never reopened). The pull sends every page to ingest; the pages the run has
    /// committed (`pages_to_compare`) are compared there with what was stored, asynchronously,
    /// and a changed one becomes a `replay_payload_mismatch` quarantine entry under its
    /// delivery key; the others (`pages_to_commit`) are stored.
    async fn run_start_answer(&self, export: ExportRun) -> Result<PullStarted, OpsError> {
        let run_id = export.run_id.as_str().to_owned();
        let run_id = run_id.as_str();
        let existing = self.evidence.run(run_id).await?;
        let committed = match &existing {
            Some(_) => self.evidence.run_pages(run_id).await?.committed(),
            None => BTreeSet::new(),
        };
        let run_status = existing.as_ref().and_then(|r| r.status);
        let status = match (&existing, run_status) {
            (None, _) => "started",
            (Some(_), Some(RunStatus::Complete)) => "already_complete",
            (Some(_), Some(RunStatus::Incomplete)) => "already_incomplete",
            (Some(_), _) => "resumed",
        };
        let to_compare = committed.range(1..=export.page_count).count();
        let to_commit = usize::try_from(export.page_count)
            .unwrap_or(usize::MAX)
            .saturating_sub(to_compare);
        Ok(PullStarted {
            run: format!("/v1/runs/{run_id}"),
            export,
            status,
            run_status,
            pages_to_compare: to_compare,
            pages_to_commit: to_commit,
        })
    }
}
