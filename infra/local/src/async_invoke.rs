//! Lambda's asynchronous invocation, locally: the functions that S3 notifications and schedules
//! invoke (drops, poller, sweeper) are retried `EventInvokeConfig.MaximumRetryAttempts` times
//! after a failed invocation, then the event goes to the `OnFailure` destination with Lambda's
//! invocation record, so a failed drop or schedule is parked and alarmed, never silently lost.
//! Both settings come from each function's `EventInvokeConfig` in `template.yaml`.

use crate::resources::LocalResources;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use tracing::{error, warn};

/// A function's asynchronous invocation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncInvoke {
    pub function: String,
    /// Retries after the first failed attempt (Lambda's default is 2).
    pub max_retries: u32,
    /// The on-failure queue's URL, when the template names one.
    pub failure_queue: Option<String>,
}

impl AsyncInvoke {
    /// Attempts in all before the event is parked.
    pub fn max_attempts(&self) -> u32 {
        self.max_retries + 1
    }

    /// `function`'s `EventInvokeConfig`, its destination resolved to the local queue.
    pub fn from_template(
        doc: &serde_norway::Value,
        function: &str,
        resources: &LocalResources,
    ) -> Result<Self> {
        let config = &doc["Resources"][function]["Properties"]["EventInvokeConfig"];
        let max_retries = config["MaximumRetryAttempts"]
            .as_u64()
            .map_or(2, |n| n.min(2) as u32);
        let destination = &config["DestinationConfig"]["OnFailure"]["Destination"];
        let target = match destination {
            serde_norway::Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
            other => other["Fn::GetAtt"][0].as_str().map(str::to_owned),
        }
        .map(|att| att.split('.').next().unwrap_or_default().to_owned());
        let failure_queue = match target {
            Some(queue) => Some(
                resources
                    .queue(&queue)
                    .with_context(|| format!("{function}'s on-failure destination"))?
                    .url
                    .clone(),
            ),
            None => None,
        };
        Ok(Self {
            function: function.to_owned(),
            max_retries,
            failure_queue,
        })
    }

    /// Parks `event` in the on-failure queue with Lambda's invocation record (condition
    /// `RetriesExhausted`). False when there is no destination or the send failed: the caller
    /// then keeps the event rather than drop it (the drop trigger leaves the notification to
    /// come back; a schedule runs again at its next tick).
    pub async fn park(
        &self,
        sqs: &aws_sdk_sqs::Client,
        event: Value,
        attempts: u32,
        error_message: &str,
    ) -> bool {
        let Some(queue) = &self.failure_queue else {
            warn!(function = %self.function, "no on-failure destination; the event is not parked");
            return false;
        };
        let record = json!({
            "version": "1.0",
            "timestamp": feedsafe::domain::timestamp::Timestamp::now().to_rfc3339(),
            "requestContext": {
                "functionArn": format!("arn:aws:lambda:us-east-1:000000000000:function:{}", self.function),
                "condition": "RetriesExhausted",
                "approximateInvokeCount": attempts,
            },
            "requestPayload": event,
            "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
            "responsePayload": {"errorMessage": error_message},
        });
        match sqs
            .send_message()
            .queue_url(queue)
            .message_body(record.to_string())
            .send()
            .await
        {
            Ok(_) => {
                warn!(function = %self.function, attempts, error = error_message, "asynchronous invocation failed every attempt; event parked in the on-failure queue");
                true
            }
            Err(e) => {
                error!(function = %self.function, error = %crate::feedsafe_error(&e), "the on-failure queue refused the event; it is not parked");
                false
            }
        }
    }
}
