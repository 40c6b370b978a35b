//! CloudWatch embedded metric format (EMF): one JSON log line per batch that CloudWatch turns
//! into metrics (namespace `Feedsafe`). Every metric is published twice: under the dimension
//! `Service` (the handler: `ingest`, `projector`; the alarms read these) and under `service`
//! (Powertools' dimension: `POWERTOOLS_SERVICE_NAME`, see `lambda::logging`). `ColdStart`
//! (Count 1) is emitted once per execution environment, on its first invocation. Emitted only
//! inside Lambda, where stdout goes to CloudWatch (or with `FEEDSAFE_EMF_STDOUT=1`); the local
//! stack and tests otherwise keep their logs readable.

use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "Feedsafe";

/// Counters of one batch; zero counters are still emitted so alarms see explicit zeros.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BatchMetrics {
    pub values: Vec<(&'static str, f64, &'static str)>,
}

impl BatchMetrics {
    pub fn count(&mut self, name: &'static str, value: u64) {
        self.values.push((name, value as f64, "Count"));
    }

    pub fn millis(&mut self, name: &'static str, value: i64) {
        self.values.push((name, value as f64, "Milliseconds"));
    }

    /// The EMF document for `service` at `timestamp_ms`, with the `service` dimension named
    /// by `lambda::logging::service_name`.
    pub fn to_emf(&self, service: &str, timestamp_ms: i64) -> Value {
        self.to_emf_for(
            service,
            crate::lambda::logging::service_name(),
            timestamp_ms,
        )
    }

    /// The EMF document: dimension `Service` = `service`, dimension `service` = `powertools`.
    pub fn to_emf_for(&self, service: &str, powertools: &str, timestamp_ms: i64) -> Value {
        self.document(
            json!([["Service"], ["service"]]),
            &[("Service", service), ("service", powertools)],
            timestamp_ms,
        )
    }

    /// The EMF document of one connector's metrics: dimension `Connector` alone, so that an
    /// alarm or a dashboard can read each connector's series
    /// (docs/adr/0060-source-health-from-settled-deliveries.md).
    pub fn to_connector_emf(&self, connector: &str, timestamp_ms: i64) -> Value {
        self.document(
            json!([["Connector"]]),
            &[("Connector", connector)],
            timestamp_ms,
        )
    }

    /// Every metric declared under `dimensions`, with the dimensions' values and the metrics'.
    fn document(&self, dimensions: Value, values: &[(&str, &str)], timestamp_ms: i64) -> Value {
        let definitions: Vec<Value> = self
            .values
            .iter()
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit}))
            .collect();
        let mut root = Map::new();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": definitions}],
            }),
        );
        for (dimension, value) in values {
            root.insert((*dimension).into(), json!(value));
        }
        for (name, value, _) in &self.values {
            root.insert((*name).into(), json!(value));
        }
        Value::Object(root)
    }

    /// Prints one connector's EMF line when running in Lambda.
    pub fn emit_for_connector(&self, connector: &str) {
        if in_lambda() && !self.values.is_empty() {
            let now = crate::domain::timestamp::Timestamp::now().unix_millis();
            println!("{}", self.to_connector_emf(connector, now));
        }
    }

    pub fn seconds(&mut self, name: &'static str, value: i64) {
        self.values.push((name, value as f64, "Seconds"));
    }

    /// Prints the EMF line when running in Lambda.
    pub fn emit(&self, service: &str) {
        if in_lambda() && !self.values.is_empty() {
            println!(
                "{}",
                self.to_emf(
                    service,
                    crate::domain::timestamp::Timestamp::now().unix_millis()
                )
            );
        }
    }
}

/// Inside Lambda, or where `FEEDSAFE_EMF_STDOUT=1` asks for the lines (the local stack, to see
/// what CloudWatch would receive).
fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
        || std::env::var("FEEDSAFE_EMF_STDOUT").is_ok_and(|v| v == "1")
}

/// The `ColdStart` document (Count 1) for the Powertools service `service`.
pub fn cold_start_emf(service: &str, timestamp_ms: i64) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [["service"]], "Metrics": [{"Name": "ColdStart", "Unit": "Count"}]}],
        },
        "service": service,
        "ColdStart": 1.0,
    })
}

/// Prints the `ColdStart` line when running in Lambda; `lambda::logging` calls it once, when
/// the first invocation of the process starts.
pub fn emit_cold_start(service: &str) {
    if in_lambda() {
        println!(
            "{}",
            cold_start_emf(
                service,
                crate::domain::timestamp::Timestamp::now().unix_millis()
            )
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_document_declares_every_metric() {
        let mut m = BatchMetrics::default();
        m.count("Committed", 2);
        m.millis("ProjectionLagMs", 150);
        let doc = m.to_emf("ingest", 1_700_000_000_000);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Feedsafe");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(doc["Committed"], 2.0);
        assert_eq!(doc["Service"], "ingest");
    }

    #[test]
    fn every_metric_has_the_service_dimension() {
        let mut m = BatchMetrics::default();
        m.count("Committed", 1);
        let doc = m.to_emf_for("ingest", "feedsafe-ingest", 1_700_000_000_000);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Service"], ["service"]])
        );
        assert_eq!(doc["service"], "feedsafe-ingest");
        assert_eq!(doc["Service"], "ingest");
    }

    #[test]
    fn a_connector_document_has_the_connector_dimension_alone() {
        let mut m = BatchMetrics::default();
        m.count("DeliveriesCommitted", 3);
        m.seconds("NewestDeliveryAgeSeconds", 7_200);
        let doc = m.to_connector_emf("acme-eu", 1_700_000_000_000);
        let metric = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(metric["Dimensions"], json!([["Connector"]]));
        assert_eq!(
            metric["Metrics"],
            json!([
                {"Name": "DeliveriesCommitted", "Unit": "Count"},
                {"Name": "NewestDeliveryAgeSeconds", "Unit": "Seconds"}
            ])
        );
        assert_eq!(doc["Connector"], "acme-eu");
        assert_eq!(doc["DeliveriesCommitted"], 3.0);
        assert_eq!(doc["NewestDeliveryAgeSeconds"], 7200.0);
        assert!(doc.get("Service").is_none());
    }

    #[test]
    fn cold_start_is_a_count_of_one_by_service() {
        let doc = cold_start_emf("feedsafe-query", 1_700_000_000_000);
        let metric = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(
            metric["Metrics"],
            json!([{"Name": "ColdStart", "Unit": "Count"}])
        );
        assert_eq!(metric["Dimensions"], json!([["service"]]));
        assert_eq!(doc["service"], "feedsafe-query");
        assert_eq!(doc["ColdStart"], 1.0);
    }
}
