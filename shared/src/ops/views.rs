//! What the operator console shows beyond the other ops routes: the tenant's connectors with
//! their freshness, and an item's timeline of claims. Reads only.
//!
//! Both read the projection (the read model the query function serves), so the ops service
//! answers them only when it was given one ([`OpsService::with_read_model`]); without it they
//! answer 503 and say why.

use super::bodies::{
    ConnectorList, ConnectorView, Freshness, ItemTimeline, LastDelivery, QuarantinedClaim,
    QuarantinedRow, SourceQuarantineState, TimelineClaim,
};
use super::ports::ResolvedEntry;
use super::{reply, OpsError, OpsResult, OpsService, MAX_DIFF_BYTES, STATUS_OPEN};
use crate::domain::connector::ConnectorConfig;
use crate::domain::ids::ObservationId;
use crate::domain::model::{Derivation, QuarantineEntry, QuarantineKind, SourceRef};
use crate::domain::normalize::Reading;
use crate::domain::timestamp::Timestamp;
use crate::protocols::projection::ProjectionStore;
use crate::protocols::query::{ObservationBody, Principal, QueryError, QueryService};
use crate::protocols::source_quarantine::source_quarantine_view;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// A timeline lists at most this many claims (newest first); `truncated` says when there are more.
pub const MAX_TIMELINE_CLAIMS: usize = 1_000;
/// At most this many quarantined payloads are read to place their claims on a timeline.
pub const MAX_TIMELINE_QUARANTINES: usize = 20;

/// The read model the console's views need: the projection, and the query service over it.
#[derive(Clone)]
pub struct ReadModel {
    pub projection: Arc<dyn ProjectionStore>,
    pub query: QueryService,
}

impl From<QueryError> for OpsError {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::NotFound(m) => OpsError::NotFound(m),
            QueryError::InvalidRequest(m) => OpsError::Invalid(m),
            // The views page with the cursors the store issued them: a refusal is the store's.
            QueryError::InvalidCursor(m) => crate::protocols::ports::StoreError::Invariant(
                format!("an issued cursor was refused: {m}"),
            )
            .into(),
            QueryError::Store(e) => e.into(),
        }
    }
}

impl OpsService {
    fn read_model(&self) -> Result<&ReadModel, OpsError> {
        self.read_model.as_ref().ok_or(OpsError::Unavailable {
            public: "this ops function has no read model wired; the console's connectors and timeline views are unavailable",
            internal: "no ReadModel wired into the ops service".into(),
        })
    }

    /// `GET /v1/connectors`: every connector of the tenant with its newest current claim (the
    /// freshness a reader would see), its open quarantine entries and its source quarantine.
    pub(super) async fn connectors(&self, principal: &Principal) -> OpsResult {
        let model = self.read_model()?;
        let now = self.clock.now();
        let quarantine = self.evidence.quarantine_entries(&principal.tenant).await?;
        let configs =
            super::ports::OpsStore::connectors_of(self.evidence.as_ref(), &principal.tenant)
                .await?;
        let views = configs
            .into_iter()
            .map(|config| self.connector_view(model, &quarantine, config, now));
        // Each connector's freshness reads its share of the projection; they run side by side.
        let connectors = futures_util::future::try_join_all(views).await?;
        reply(
            200,
            &ConnectorList {
                as_of: now.to_rfc3339(),
                connectors,
            },
        )
    }

    /// One connector of `GET /v1/connectors`.
    async fn connector_view(
        &self,
        model: &ReadModel,
        quarantine: &[ResolvedEntry],
        config: ConnectorConfig,
        now: Timestamp,
    ) -> Result<ConnectorView, OpsError> {
        let source = SourceRef {
            tenant: config.tenant.clone(),
            connector: config.connector.clone(),
            source_account: config.source_account.clone(),
        };
        let open = quarantine
            .iter()
            .filter(|(e, _)| {
                e.status == STATUS_OPEN && e.connector.as_deref() == Some(config.connector.as_str())
            })
            .count();
        let view = source_quarantine_view(self.evidence.as_ref(), &source)
            .await
            .map_err(super::operation_error)?;
        Ok(ConnectorView {
            kind: if config.pull.is_some() {
                "pull"
            } else {
                "push"
            },
            payload_format: config.payload_format,
            identity_rule: config.identity_rule,
            open_quarantines: open,
            source_quarantine: SourceQuarantineState {
                active: view.active,
                since: view.since,
            },
            freshness: freshness(model.projection.as_ref(), &source, now).await?,
            connector: config.connector,
            source_account: config.source_account,
        })
    }

    /// `GET /v1/items/{item}/timeline`: every claim about the item (newest first), the current
    /// offers marked, retrieval lag per claim, and the claims of quarantined payloads that
    /// were refused under one of the item's delivery keys.
    pub(super) async fn timeline(&self, principal: &Principal, item: &str) -> OpsResult {
        let model = self.read_model()?;
        let now = self.clock.now();
        let offers = model.query.offers(principal, item, None, now).await?;
        let item_key = offers.item;
        let current: HashSet<ObservationId> = offers
            .offers
            .into_iter()
            .map(|o| o.observation.observation_id)
            .collect();
        let (claims, truncated) = timeline_claims(model, principal, &item_key, &current).await?;
        let keys: BTreeSet<String> = claims
            .iter()
            .map(|c| c.claim.observation.delivery_key.clone())
            .collect();
        let entries: Vec<QuarantineEntry> = self
            .evidence
            .quarantine_list(&principal.tenant)
            .await?
            .into_iter()
            .filter(|e| {
                e.kind == QuarantineKind::Mismatch
                    && e.delivery_key.as_ref().is_some_and(|k| keys.contains(k))
            })
            .collect();
        let mut quarantined = Vec::new();
        for entry in entries.iter().rev().take(MAX_TIMELINE_QUARANTINES) {
            quarantined.extend(self.quarantined_claims(principal, entry, &item_key).await);
        }
        reply(
            200,
            &ItemTimeline {
                item: item_key,
                as_of: now.to_rfc3339(),
                claims,
                truncated,
                quarantined,
                quarantined_entries: entries.len(),
            },
        )
    }

    /// What a quarantined payload claimed about `item`, read from its own raw artifact with the
    /// connector's rules. A payload that cannot be read or parsed yields one entry saying why,
    /// with no quantity or price: nothing is guessed.
    async fn quarantined_claims(
        &self,
        principal: &Principal,
        entry: &QuarantineEntry,
        item: &str,
    ) -> Vec<QuarantinedClaim> {
        let base = QuarantinedClaim {
            quarantine_id: entry.quarantine_id.clone(),
            status: entry.status.clone(),
            reason_code: entry.reason_code.clone(),
            delivery_key: entry.delivery_key.clone(),
            first_seen_at: entry.first_seen_at.to_rfc3339(),
            readable: false,
            reason: None,
            row: None,
            read_under: None,
        };
        let unreadable = |reason: String| {
            vec![QuarantinedClaim {
                reason: Some(reason),
                ..base.clone()
            }]
        };
        let config = match self.timeline_connector(principal, entry).await {
            Ok(config) => config,
            Err(reason) => return unreadable(reason),
        };
        let body = match self.archive.read(&entry.evidence_key, MAX_DIFF_BYTES).await {
            Ok(body) => body,
            Err(e) => return unreadable(super::quarantine::unreadable_artifact(e)),
        };
        let base = QuarantinedClaim {
            read_under: Some(Derivation::now(config.version)),
            ..base
        };
        let unreadable = |reason: String| {
            vec![QuarantinedClaim {
                reason: Some(reason),
                ..base.clone()
            }]
        };
        let read = Reading::of(&config).read(config.canonicalization, &body);
        let rows = match read {
            Ok(read) => read.rows,
            Err(e) => return unreadable(format!("the quarantined payload does not parse: {e}")),
        };
        rows.into_iter()
            .filter(|row| row.item.key() == item)
            .map(|row| QuarantinedClaim {
                readable: true,
                row: Some(QuarantinedRow {
                    source_record: row.source_record,
                    quantity: row.quantity,
                    price: row.price.as_str().to_owned(),
                    currency: row.currency,
                    observed_at: row.observed_at.to_rfc3339(),
                }),
                ..base.clone()
            })
            .collect()
    }

    /// The rules to read a quarantined payload with: its connector's, or why there are none.
    async fn timeline_connector(
        &self,
        principal: &Principal,
        entry: &QuarantineEntry,
    ) -> Result<ConnectorConfig, String> {
        let Some(c) = entry.connector.as_deref() else {
            return Err("the entry names no connector".into());
        };
        match self.tenant_connector(principal, c).await {
            Ok(config) => Ok(config),
            Err(OpsError::UnknownConnector(_)) => {
                Err(format!("connector {c} is no longer configured"))
            }
            Err(e) => {
                tracing::warn!(error = ?e, connector = c, "connector unreadable for a timeline");
                Err("the connector's rules could not be read; retry later".into())
            }
        }
    }
}

/// Every claim about the item, newest first, each marked current or not; at most about
/// `MAX_TIMELINE_CLAIMS` (the flag says there were more).
async fn timeline_claims(
    model: &ReadModel,
    principal: &Principal,
    item_key: &str,
    current: &HashSet<ObservationId>,
) -> Result<(Vec<TimelineClaim>, bool), OpsError> {
    let mut claims = Vec::new();
    let mut cursor: Option<String> = None;
    let truncated = loop {
        let page = model
            .query
            .history(principal, item_key, cursor.as_deref(), 100)
            .await?;
        claims.extend(page.observations.into_iter().map(|claim| TimelineClaim {
            current: current.contains(&claim.observation.observation_id),
            retrieval_lag_seconds: Some(lag(&claim.observation)),
            claim,
        }));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break false;
        }
        if claims.len() >= MAX_TIMELINE_CLAIMS {
            break true;
        }
    };
    Ok((claims, truncated))
}

/// `retrieved_at - observed_at` of a claim, in seconds.
fn lag(claim: &ObservationBody) -> i64 {
    claim.retrieved_at.seconds_since(claim.observed_at)
}

/// The newest current claim of a source across its items: the age a reader would see.
async fn freshness(
    projection: &dyn ProjectionStore,
    source: &SourceRef,
    now: Timestamp,
) -> Result<Freshness, OpsError> {
    let rows = projection.rows_of_source(source).await?;
    let newest = rows
        .iter()
        .filter(|row| !row.observation.future_dated)
        .max_by_key(|row| row.observation.observed_at);
    let last = rows.iter().max_by_key(|row| row.observation.retrieved_at);
    Ok(Freshness {
        items: rows.len(),
        newest_observed_at: newest.map(|r| r.observation.observed_at.to_rfc3339()),
        age_seconds: newest.map(|r| now.seconds_since(r.observation.observed_at).max(0)),
        last_delivery: last.map(|r| LastDelivery {
            delivery_key: r.observation.delivery_key.clone(),
            retrieved_at: r.observation.retrieved_at.to_rfc3339(),
        }),
    })
}
