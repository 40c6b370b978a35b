//! CloudWatch embedded metric format (EMF): one JSON log line per batch that CloudWatch turns
//! into metrics (namespace `Feedsafe`, dimension `Service`). Emitted only inside Lambda, where
//! stdout goes to CloudWatch; the local stack and tests keep their logs readable.

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

    /// The EMF document for `service` at `timestamp_ms`.
    pub fn to_emf(&self, service: &str, timestamp_ms: i64) -> Value {
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
                "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [["Service"]], "Metrics": definitions}],
            }),
        );
        root.insert("Service".into(), json!(service));
        for (name, value, _) in &self.values {
            root.insert((*name).into(), json!(value));
        }
        Value::Object(root)
    }

    /// Prints the EMF line when running in Lambda.
    pub fn emit(&self, service: &str) {
        if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some() && !self.values.is_empty() {
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
}
