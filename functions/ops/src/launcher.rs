//! The poller function, invoked asynchronously (`InvocationType: Event`) with the schedule's
//! input: how the ops route starts a pull run. Lambda queues the event, retries a failed
//! invocation twice and then parks it in the poller's on-failure queue, as for a schedule.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use feedsafe::domain::ids::ConnectorId;
use feedsafe::intake::poller::PullLauncher;

pub struct PollerInvoker {
    client: aws_sdk_lambda::Client,
    /// The poller function's name or ARN (`POLLER_FUNCTION`).
    function: String,
}

impl PollerInvoker {
    pub async fn from_env(function: String) -> Self {
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(feedsafe::aws::http_client())
            .load()
            .await;
        Self {
            client: aws_sdk_lambda::Client::new(&shared),
            function,
        }
    }
}

#[async_trait]
impl PullLauncher for PollerInvoker {
    async fn launch(&self, connector: &ConnectorId) -> Result<(), anyhow::Error> {
        let payload = serde_json::json!({"connector": connector.as_str()}).to_string();
        let out = self
            .client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await?;
        // 202: queued for an asynchronous invocation.
        if out.status_code() != 202 {
            anyhow::bail!("the poller invocation answered {}", out.status_code());
        }
        Ok(())
    }
}
