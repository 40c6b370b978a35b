//! Lambda's DynamoDB Streams event source, locally, configured from the projector's event in
//! `template.yaml`: its `FilterCriteria` (records that match no filter are dropped, as the
//! event source drops them), `BatchSize`, `MaximumRetryAttempts`, `ReportBatchItemFailures`
//! (a failed batch resumes at the reported record) and the on-failure destination (a record
//! that failed every retry is reported there, then passed). Each batch goes through
//! `feedsafe::lambda::stream::handle_stream_batch`, the function's own entry point.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// The event source mapping of the projector's `EvidenceChanges` event.
#[derive(Debug, Clone)]
pub struct StreamSourceSettings {
    pub batch_size: usize,
    /// Retries of a failing record before it goes to the on-failure destination.
    pub max_retries: u32,
    /// `FilterCriteria` patterns; a record passes if it matches any (or there are none).
    pub filters: Vec<Value>,
}

impl StreamSourceSettings {
    /// Read from the template document (`Resources.ProjectorFunction...EvidenceChanges`).
    pub fn from_template(doc: &serde_norway::Value) -> Result<Self> {
        let event = &doc["Resources"]["ProjectorFunction"]["Properties"]["Events"]
            ["EvidenceChanges"]["Properties"];
        if event.is_null() {
            bail!("template.yaml has no ProjectorFunction EvidenceChanges event");
        }
        let batch_size = event["BatchSize"].as_u64().unwrap_or(100).clamp(1, 10_000) as usize;
        let max_retries = event["MaximumRetryAttempts"]
            .as_u64()
            .map_or(u32::MAX, |n| n as u32);
        let mut filters = Vec::new();
        if let Some(list) = event["FilterCriteria"]["Filters"].as_sequence() {
            for filter in list {
                let text = filter["Pattern"]
                    .as_str()
                    .context("a FilterCriteria filter without a Pattern string")?;
                let pattern: Value = serde_json::from_str(text)
                    .with_context(|| format!("FilterCriteria pattern is not JSON: {text}"))?;
                check_supported(&pattern)?;
                filters.push(pattern);
            }
        }
        Ok(Self {
            batch_size,
            max_retries,
            filters,
        })
    }

    /// Whether the event source hands `record` (the stream record's JSON as Lambda sees it)
    /// to the function.
    pub fn passes(&self, record: &Value) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|p| matches(p, record))
    }
}

/// Only the exact-value subset of Lambda's filter syntax is emulated (objects of objects,
/// leaves are lists of allowed strings, numbers or booleans); anything else is refused here
/// rather than matched wrongly.
fn check_supported(pattern: &Value) -> Result<()> {
    match pattern {
        Value::Object(fields) => fields.values().try_for_each(|v| match v {
            Value::Object(_) => check_supported(v),
            Value::Array(values) => values.iter().try_for_each(|value| match value {
                Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
                other => Err(anyhow!(
                    "FilterCriteria operator {other} is not emulated by the local stack"
                )),
            }),
            other => Err(anyhow!(
                "FilterCriteria value {other} is not a list or an object"
            )),
        }),
        other => Err(anyhow!("FilterCriteria pattern {other} is not an object")),
    }
}

fn matches(pattern: &Value, record: &Value) -> bool {
    let Value::Object(fields) = pattern else {
        return false;
    };
    fields.iter().all(|(key, expected)| {
        let actual = &record[key.as_str()];
        match expected {
            Value::Object(_) => matches(expected, actual),
            Value::Array(allowed) => allowed.contains(actual),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template_settings() -> StreamSourceSettings {
        let spec = template_spec::read_template(&template_spec::template_path()).unwrap();
        StreamSourceSettings::from_template(&spec.document).unwrap()
    }

    fn record(event_name: &str, entity: Option<&str>) -> Value {
        let mut new_image = json!({"pk": {"S": "X"}});
        if let Some(entity) = entity {
            new_image["entity"] = json!({"S": entity});
        }
        json!({"eventName": event_name, "dynamodb": {"NewImage": new_image}})
    }

    #[test]
    fn the_template_settings_are_the_deployed_ones() {
        let settings = template_settings();
        assert_eq!(settings.batch_size, 1000);
        assert_eq!(settings.max_retries, 10);
        assert_eq!(settings.filters.len(), 1);
    }

    #[test]
    fn only_inserts_and_modifies_of_the_projected_entities_pass() {
        let settings = template_settings();
        assert!(settings.passes(&record("INSERT", Some("observation"))));
        assert!(settings.passes(&record("MODIFY", Some("replay"))));
        assert!(settings.passes(&record("MODIFY", Some("correction_rules"))));
        assert!(!settings.passes(&record("REMOVE", Some("observation"))));
        assert!(!settings.passes(&record("INSERT", Some("quarantine"))));
        assert!(!settings.passes(&record("INSERT", Some("connector"))));
        assert!(!settings.passes(&record("INSERT", None)));
    }

    #[test]
    fn filter_operators_the_local_stack_does_not_emulate_are_refused() {
        let doc: serde_norway::Value = serde_norway::from_str(
            r#"
Resources:
  ProjectorFunction:
    Properties:
      Events:
        EvidenceChanges:
          Properties:
            BatchSize: 10
            FilterCriteria:
              Filters:
                - Pattern: '{"dynamodb": {"NewImage": {"pk": {"S": [{"prefix": "X"}]}}}}'
"#,
        )
        .unwrap();
        let error = StreamSourceSettings::from_template(&doc).unwrap_err();
        assert!(error.to_string().contains("not emulated"), "{error}");
    }
}
