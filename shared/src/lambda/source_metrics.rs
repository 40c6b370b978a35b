//! The sweeper's source-health pass: every registered connector's health judged at the sweep,
//! published as CloudWatch metrics with the dimension `Connector` (EMF):
//! `NewestDeliveryAgeSeconds` (since the last committed delivery) and `Overdue` (1 or 0), and
//! under `Service` = `sweeper` the count `OverdueSources`. The template's overdue alarm reads
//! every connector's `Overdue` series with one Metrics Insights query
//! (docs/adr/0060-source-health-from-settled-deliveries.md).

use crate::aws::dynamo::DynamoEvidenceStore;
use crate::domain::ids::ConnectorId;
use crate::domain::source_health::{expected_cadence_minutes, SourceHealth};
use crate::domain::timestamp::Timestamp;
use crate::lambda::metrics::BatchMetrics;
use crate::protocols::ports::StoreError;
use crate::protocols::projection::EvidenceReads;
use serde::Serialize;

/// One connector's health at the sweep, as its metrics publish it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceMetric {
    pub connector: ConnectorId,
    /// Seconds since its last committed delivery (`None`: it never committed one).
    pub newest_delivery_age_seconds: Option<i64>,
    pub overdue: bool,
    pub overdue_since: Option<Timestamp>,
}

impl SourceMetric {
    fn of(health: &SourceHealth, cadence: Option<u32>, now: Timestamp) -> Self {
        let state = health.overdue(cadence, now);
        Self {
            connector: health.connector.clone(),
            newest_delivery_age_seconds: health
                .last_committed_at
                .map(|at| now.seconds_since(at).max(0)),
            overdue: state.overdue,
            overdue_since: state.overdue_since,
        }
    }

    /// The connector's metrics, as its EMF document carries them.
    pub fn metrics(&self) -> BatchMetrics {
        let mut m = BatchMetrics::default();
        if let Some(age) = self.newest_delivery_age_seconds {
            m.seconds("NewestDeliveryAgeSeconds", age);
        }
        m.count("Overdue", u64::from(self.overdue));
        m
    }
}

/// Every connector with a health record and a configuration of the same tenant (a record of
/// a connector that does not exist, from a refused delivery naming it, is left out), judged
/// at `now`, sorted by connector.
pub async fn source_metrics(
    store: &DynamoEvidenceStore,
    now: Timestamp,
) -> Result<Vec<SourceMetric>, StoreError> {
    let mut out = Vec::new();
    for health in store.all_source_health().await? {
        let Some(config) = EvidenceReads::connector_config(store, &health.connector).await? else {
            continue;
        };
        if config.tenant != health.tenant {
            continue;
        }
        out.push(SourceMetric::of(
            &health,
            expected_cadence_minutes(&config),
            now,
        ));
    }
    out.sort_by(|a, b| a.connector.cmp(&b.connector));
    Ok(out)
}

/// Prints each connector's EMF line and the sweeper's `OverdueSources` (in Lambda only).
pub fn emit(metrics: &[SourceMetric]) {
    for metric in metrics {
        metric
            .metrics()
            .emit_for_connector(metric.connector.as_str());
    }
    let mut total = BatchMetrics::default();
    total.count(
        "OverdueSources",
        metrics.iter().filter(|m| m.overdue).count() as u64,
    );
    total.emit("sweeper");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    #[test]
    fn an_overdue_connector_publishes_its_age_and_overdue_one() {
        let mut health = SourceHealth::empty(
            crate::domain::ids::TenantId::parse("tenant-a").unwrap(),
            crate::domain::ids::ConnectorId::parse("acme-eu").unwrap(),
        );
        health.last_committed_at = Some(at("2026-12-01T10:00:00Z"));
        let metric = SourceMetric::of(&health, Some(60), at("2026-12-01T12:00:00Z"));
        assert!(metric.overdue);
        assert_eq!(metric.overdue_since, Some(at("2026-12-01T11:00:00Z")));
        let doc = metric.metrics().to_connector_emf("acme-eu", 0);
        assert_eq!(doc["NewestDeliveryAgeSeconds"], 7200.0);
        assert_eq!(doc["Overdue"], 1.0);
        let on_time = SourceMetric::of(&health, Some(180), at("2026-12-01T12:00:00Z"));
        assert_eq!(
            on_time.metrics().to_connector_emf("acme-eu", 0)["Overdue"],
            0.0
        );
        let never = SourceMetric::of(
            &SourceHealth::empty(
                crate::domain::ids::TenantId::parse("tenant-a").unwrap(),
                crate::domain::ids::ConnectorId::parse("acme-eu").unwrap(),
            ),
            Some(60),
            at("2026-12-01T12:00:00Z"),
        );
        let doc = never.metrics().to_connector_emf("acme-eu", 0);
        assert!(doc.get("NewestDeliveryAgeSeconds").is_none());
    }
}
