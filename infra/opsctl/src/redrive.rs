//! `opsctl dlq redrive`: moves the ingest DLQ's messages back to the ingest queue, talking to
//! SQS directly, and reports its progress after every batch.

use crate::{CliError, Settings};
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput;

/// Where `dlq redrive` reads and writes, and through which SQS endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveTarget {
    pub dlq: String,
    pub queue: String,
    /// The local engines (`dynamodb`, `moto`) when the queues come from the local stack file.
    pub local: Option<(String, String)>,
}

pub fn redrive_target(
    dlq: Option<&str>,
    queue: Option<&str>,
    settings: &Settings,
) -> Result<RedriveTarget, CliError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let (Some(dlq), Some(queue)) = (
        dlq.map(str::to_owned).or_else(|| env("INGEST_DLQ_URL")),
        queue.map(str::to_owned).or_else(|| env("INGEST_QUEUE_URL")),
    ) {
        return Ok(RedriveTarget {
            dlq,
            queue,
            local: None,
        });
    }
    let stack = settings.stack.as_ref().ok_or_else(|| {
        CliError::Other(
            "no queues: pass --dlq URL --queue URL (or set INGEST_DLQ_URL and INGEST_QUEUE_URL), or start the local stack (.local/stack.json)".into(),
        )
    })?;
    let get = |path: &[&str]| -> Result<String, CliError> {
        let mut v = stack;
        for p in path {
            v = &v[*p];
        }
        v.as_str().map(str::to_owned).ok_or_else(|| {
            CliError::Other(format!(
                ".local/stack.json has no {}; restart the local stack",
                path.join(".")
            ))
        })
    };
    Ok(RedriveTarget {
        dlq: get(&["queues", "IngestDLQ", "url"])?,
        queue: get(&["queues", "IngestQueue", "url"])?,
        local: Some((get(&["dynamodb_endpoint"])?, get(&["moto_endpoint"])?)),
    })
}

/// Moves every message of the DLQ to the ingest queue: received in batches, sent on, and
/// deleted from the DLQ only once the ingest queue accepted it. Returns how many moved.
pub fn redrive(
    target: &RedriveTarget,
    progress: &mut dyn FnMut(RedriveProgress),
) -> Result<usize, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(format!("starting the async runtime: {e}")))?;
    runtime.block_on(async {
        let clients = match &target.local {
            Some((dynamodb, moto)) => feedsafe::aws::AwsClients::local(dynamodb, moto),
            None => feedsafe::aws::AwsClients::from_env(false).await,
        };
        redrive_with(&clients.sqs, &target.dlq, &target.queue, progress).await
    })
}

fn sqs_error<E: std::error::Error>(what: &str, e: E) -> CliError {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    CliError::Other(format!("{what}: {text}"))
}

/// How far a redrive is: reported after every batch moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedriveProgress {
    pub moved: usize,
    /// The DLQ's approximate depth at the start (SQS's own estimate).
    pub total_estimate: usize,
    /// The DLQ's approximate depth now.
    pub left_estimate: usize,
}

async fn depth(sqs: &aws_sdk_sqs::Client, queue: &str) -> Result<usize, CliError> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .map_err(|e| sqs_error("read the DLQ's depth", e))?
        .attributes
        .unwrap_or_default();
    Ok(attributes
        .get(&QueueAttributeName::ApproximateNumberOfMessages)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

async fn redrive_with(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    queue: &str,
    progress: &mut dyn FnMut(RedriveProgress),
) -> Result<usize, CliError> {
    let total_estimate = depth(sqs, dlq).await?;
    let mut moved = 0;
    let mut failed = 0;
    let mut empty_rounds = 0;
    // Bounded: a queue that refills as fast as it drains must not keep the CLI forever.
    for _ in 0..100_000 {
        let messages = receive_batch(sqs, dlq).await?;
        if messages.is_empty() {
            empty_rounds += 1;
            if empty_rounds >= 2 {
                break;
            }
            continue;
        }
        empty_rounds = 0;
        let sent = send_batch(sqs, queue, &messages).await?;
        failed += sent.failed().len();
        if let Some(deleted) = delete_sent(sqs, dlq, &messages, sent.successful()).await? {
            moved += deleted;
            progress(RedriveProgress {
                moved,
                total_estimate: total_estimate.max(moved),
                left_estimate: depth(sqs, dlq).await?,
            });
        }
    }
    if failed > 0 {
        return Err(CliError::Other(format!(
            "moved {moved} message(s); {failed} could not be sent to the ingest queue and stay in the DLQ"
        )));
    }
    Ok(moved)
}

/// Up to ten DLQ messages, hidden from other readers for two minutes while they move.
async fn receive_batch(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
) -> Result<Vec<aws_sdk_sqs::types::Message>, CliError> {
    let received = sqs
        .receive_message()
        .queue_url(dlq)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(120)
        .send()
        .await
        .map_err(|e| sqs_error("receive from the DLQ", e))?;
    Ok(received.messages.unwrap_or_default())
}

/// Sends the messages' bodies to the ingest queue as one batch, each entry named by its index.
async fn send_batch(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    messages: &[aws_sdk_sqs::types::Message],
) -> Result<SendMessageBatchOutput, CliError> {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    let mut batch = sqs.send_message_batch().queue_url(queue);
    for (i, m) in messages.iter().enumerate() {
        let entry = SendMessageBatchRequestEntry::builder()
            .id(i.to_string())
            .message_body(m.body().unwrap_or_default())
            .build()
            .map_err(|e| sqs_error("build a batch entry", e))?;
        batch = batch.entries(entry);
    }
    batch
        .send()
        .await
        .map_err(|e| sqs_error("send to the ingest queue", e))
}

/// Deletes from the DLQ the messages the ingest queue accepted. How many were deleted, or
/// `None` when none was accepted.
async fn delete_sent(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    messages: &[aws_sdk_sqs::types::Message],
    sent: &[aws_sdk_sqs::types::SendMessageBatchResultEntry],
) -> Result<Option<usize>, CliError> {
    use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
    let mut delete = sqs.delete_message_batch().queue_url(dlq);
    let mut to_delete = 0;
    for ok in sent {
        let Some(m) = ok.id().parse::<usize>().ok().and_then(|i| messages.get(i)) else {
            continue;
        };
        let entry = DeleteMessageBatchRequestEntry::builder()
            .id(ok.id())
            .receipt_handle(m.receipt_handle().unwrap_or_default())
            .build()
            .map_err(|e| sqs_error("build a delete entry", e))?;
        delete = delete.entries(entry);
        to_delete += 1;
    }
    if to_delete == 0 {
        return Ok(None);
    }
    let deleted = delete
        .send()
        .await
        .map_err(|e| sqs_error("delete from the DLQ", e))?;
    // A message sent on but not deleted comes back to the DLQ later and is sent again:
    // ingest treats the duplicate as a replay.
    Ok(Some(deleted.successful().len()))
}

#[cfg(test)]
mod redrive_tests {
    /// Against moto when the local engines are up (`eval "$(infra/engines.sh env)"`).
    #[test]
    fn redrive_moves_every_dead_letter_back_to_the_ingest_queue() {
        let (Ok(dynamodb), Ok(moto)) = (
            std::env::var("FEEDSAFE_DYNAMODB_ENDPOINT"),
            std::env::var("FEEDSAFE_MOTO_ENDPOINT"),
        ) else {
            eprintln!("skipped: the local engines are not running");
            return;
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let sqs = feedsafe::aws::AwsClients::local(&dynamodb, &moto).sqs;
        let suffix = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros()
        );
        let (dlq, queue) = runtime.block_on(async {
            let mut urls = Vec::new();
            for name in ["opsctl-dlq", "opsctl-queue"] {
                let out = sqs
                    .create_queue()
                    .queue_name(format!("{name}-{suffix}"))
                    .send()
                    .await
                    .unwrap();
                urls.push(out.queue_url.unwrap());
            }
            for i in 0..23 {
                sqs.send_message()
                    .queue_url(&urls[0])
                    .message_body(format!("{{\"n\":{i}}}"))
                    .send()
                    .await
                    .unwrap();
            }
            (urls[0].clone(), urls[1].clone())
        });
        let target = super::RedriveTarget {
            dlq: dlq.clone(),
            queue: queue.clone(),
            local: Some((dynamodb, moto)),
        };
        let mut reports = Vec::new();
        assert_eq!(
            super::redrive(&target, &mut |p| reports.push(p)).unwrap(),
            23
        );
        // Progress after each batch of (at most) ten: it climbs to 23 and the DLQ empties.
        assert!(reports.len() >= 3, "{reports:?}");
        assert!(
            reports.windows(2).all(|w| w[0].moved < w[1].moved),
            "{reports:?}"
        );
        let last = reports.last().unwrap();
        assert_eq!(
            (last.moved, last.total_estimate, last.left_estimate),
            (23, 23, 0)
        );
        let mut bodies = std::collections::BTreeSet::new();
        runtime.block_on(async {
            loop {
                let out = sqs
                    .receive_message()
                    .queue_url(&queue)
                    .max_number_of_messages(10)
                    .send()
                    .await
                    .unwrap();
                let messages = out.messages.unwrap_or_default();
                if messages.is_empty() {
                    break;
                }
                bodies.extend(messages.iter().filter_map(|m| m.body.clone()));
            }
            let left = sqs
                .receive_message()
                .queue_url(&dlq)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            assert!(left.is_empty(), "the DLQ is empty");
        });
        assert_eq!(bodies.len(), 23, "every body arrived once");
    }
}
