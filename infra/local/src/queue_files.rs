//! What a durable local stack does with its queues at a graceful stop: moto keeps SQS in
//! memory, so the messages still waiting when the functions have drained (dead letters, failure
//! reports, drop notifications not yet taken) are written beside the data, one JSON line per
//! message, and sent again at the next start. A queue with messages in flight (received and not
//! yet deleted, or delayed) is not saved: the stop reports it, and the queue engine stays up so
//! that they come back after their visibility timeout (`infra/local.sh` leaves it running).

use crate::resources::LocalResources;
use crate::Drained;
use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName;
use feedsafe::aws::AwsClients;
use std::io::Write;
use std::path::Path;

/// Every queue of the stack by name and URL: the template's and the local drop-events queue.
async fn queues(clients: &AwsClients, resources: &LocalResources) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = resources
        .queues
        .values()
        .map(|q| (q.name.clone(), q.url.clone()))
        .collect();
    if let Ok(ingest) = resources.queue("IngestQueue") {
        let name = ingest.name.replace("IngestQueue", "LocalDropEvents");
        if let Ok(found) = clients.sqs.get_queue_url().queue_name(&name).send().await {
            if let Some(url) = found.queue_url {
                out.push((name, url));
            }
        }
    }
    out.sort();
    out
}

async fn count(clients: &AwsClients, url: &str, attribute: QueueAttributeName) -> Result<u64> {
    let attributes = clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(attribute.clone())
        .send()
        .await
        .with_context(|| format!("reading the attributes of {url}"))?
        .attributes
        .unwrap_or_default();
    Ok(attributes
        .get(&attribute)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// Saves and removes the waiting messages of every queue into `dir/<queue name>.jsonl`.
pub async fn save(clients: &AwsClients, resources: &LocalResources, dir: &Path) -> Result<Drained> {
    let queues = queues(clients, resources).await;
    for (name, url) in &queues {
        let in_flight = count(
            clients,
            url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .await?
            + count(
                clients,
                url,
                QueueAttributeName::ApproximateNumberOfMessagesDelayed,
            )
            .await?;
        if in_flight > 0 {
            return Ok(Drained::InFlight(format!(
                "queue {name} has {in_flight} message(s) in flight"
            )));
        }
    }
    std::fs::create_dir_all(dir)?;
    let mut saved = 0;
    for (name, url) in &queues {
        let mut handles = Vec::new();
        let mut lines = Vec::new();
        loop {
            let out = clients
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(600)
                .wait_time_seconds(0)
                .send()
                .await
                .with_context(|| format!("receiving from {name} to save it"))?;
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            for m in messages {
                lines.push(serde_json::json!({"body": m.body.unwrap_or_default()}).to_string());
                handles.extend(m.receipt_handle);
            }
        }
        if lines.is_empty() {
            continue;
        }
        let path = dir.join(format!("{name}.jsonl"));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        for line in &lines {
            writeln!(file, "{line}")?;
        }
        file.sync_all()?;
        // Saved first, removed after: a crash between the two sends them twice, which
        // ingestion absorbs (same identity, same bytes), never zero times.
        for handle in handles {
            clients
                .sqs
                .delete_message()
                .queue_url(url)
                .receipt_handle(handle)
                .send()
                .await
                .with_context(|| format!("deleting a saved message from {name}"))?;
        }
        saved += lines.len();
    }
    Ok(Drained::Clean {
        saved_messages: saved,
    })
}

/// Sends the messages saved by `save` to their queues again, then removes the files.
pub async fn restore(
    clients: &AwsClients,
    resources: &LocalResources,
    dir: &Path,
) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let queues = queues(clients, resources).await;
    let mut restored = 0;
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let Some((_, url)) = queues.iter().find(|(q, _)| q == name) else {
            anyhow::bail!(
                "{} holds messages for queue {name}, which this stack does not have; move the file away or start with --fresh",
                path.display()
            );
        };
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let saved: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("a line of {}", path.display()))?;
            clients
                .sqs
                .send_message()
                .queue_url(url)
                .message_body(saved["body"].as_str().unwrap_or_default())
                .send()
                .await
                .with_context(|| format!("sending a saved message to {name} again"))?;
            restored += 1;
        }
        std::fs::remove_file(&path)?;
    }
    Ok(restored)
}
