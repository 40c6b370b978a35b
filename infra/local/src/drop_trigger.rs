//! The drop function's trigger, locally: S3 event notifications for `drops/`, delivered
//! through moto's S3 -> SQS notifications and handed to `handle_s3_event` as S3 events.

use crate::feedsafe_error;
use crate::resources::LocalResources;
use anyhow::{Context, Result};
use feedsafe::aws::AwsClients;
use feedsafe::intake::drops::{DropService, DROPS_PREFIX};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::watch;
use tracing::warn;

/// S3 event notifications for `drops/`, locally: moto sends a message per created object to a
/// local queue (`{prefix}-LocalDropEvents`, not in the template: in AWS, S3 invokes the drop
/// function directly). Returns the queue's URL.
pub(crate) async fn subscribe_to_drops(
    clients: &AwsClients,
    resources: &LocalResources,
    bucket: &str,
) -> Result<String> {
    use aws_sdk_s3::types::{
        Event, FilterRule, FilterRuleName, NotificationConfiguration,
        NotificationConfigurationFilter, QueueConfiguration, S3KeyFilter,
    };
    let name = resources
        .queue("IngestQueue")?
        .name
        .replace("IngestQueue", "LocalDropEvents");
    let url = clients
        .sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .context("creating the local drop-events queue")?
        .queue_url
        .context("the drop-events queue has a URL")?;
    let arn = clients
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .context("the drop-events queue has an ARN")?;
    let prefix = FilterRule::builder()
        .name(FilterRuleName::Prefix)
        .value(DROPS_PREFIX)
        .build();
    let queue = QueueConfiguration::builder()
        .queue_arn(arn)
        .events(Event::from("s3:ObjectCreated:*"))
        .filter(
            NotificationConfigurationFilter::builder()
                .key(S3KeyFilter::builder().filter_rules(prefix).build())
                .build(),
        )
        .build()?;
    clients
        .s3
        .put_bucket_notification_configuration()
        .bucket(bucket)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(queue)
                .build(),
        )
        .send()
        .await
        .context("subscribing to drops/ notifications")?;
    Ok(url)
}

/// The drop function's trigger, locally: each notification moto queued becomes the S3 event
/// AWS would deliver, handled by `handle_s3_event`. moto's notifications name the key and the
/// ETag but no version id, so the watcher finds the version each one announces (the current
/// one if it has that ETag and was not reported yet, else every unreported version with that
/// ETag): one notification per created version, so no version is missed, even one replaced
/// at once. A notification is deleted only once its versions are enqueued.
pub(crate) async fn drops_watcher(
    clients: AwsClients,
    queue_url: String,
    bucket: String,
    drops: DropService,
    invoke: crate::async_invoke::AsyncInvoke,
    visibility: i32,
    mut stopped: watch::Receiver<bool>,
) {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        if *stopped.borrow() {
            return;
        }
        let received = tokio::select! {
            r = clients
                .sqs
                .receive_message()
                .queue_url(&queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .visibility_timeout(visibility)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                .send() => r,
            _ = stopped.changed() => return,
        };
        let messages = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                warn!(error = %feedsafe_error(&e), "receiving drop notifications failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for message in messages {
            let mut handled = true;
            // The drop function's failed invocations for this notification (Lambda retries an
            // asynchronous invocation, then parks it): the events and their errors.
            let mut failed: Vec<(aws_lambda_events::event::s3::S3Event, String)> = Vec::new();
            let attempt: u32 = message
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            for (key, etag) in announced(message.body().unwrap_or_default()) {
                let versions = match announced_versions(&clients.s3, &bucket, &key, &etag, &seen)
                    .await
                {
                    Ok(v) => v,
                    Err(e) => {
                        warn!(error = %e, key, "finding the dropped version failed; will retry");
                        handled = false;
                        continue;
                    }
                };
                for (version, size) in versions {
                    let event = s3_event(&bucket, &key, &version, size);
                    match feedsafe::lambda::s3::handle_s3_event(&drops, event.clone()).await {
                        Ok(_) | Err(feedsafe::intake::drops::DropError::Ignored(_)) => {
                            seen.insert((key.clone(), version));
                        }
                        Err(e) => {
                            warn!(error = %e, key, attempt, "drop not enqueued; will retry");
                            failed.push((event, e.to_string()));
                        }
                    }
                }
            }
            if !failed.is_empty() {
                handled = handled && attempt >= invoke.max_attempts();
                for (event, error) in failed {
                    if handled {
                        let event = serde_json::to_value(&event).unwrap_or_default();
                        handled = invoke.park(&clients.sqs, event, attempt, &error).await;
                    }
                }
            }
            if handled {
                if let Some(receipt) = message.receipt_handle() {
                    if let Err(e) = clients
                        .sqs
                        .delete_message()
                        .queue_url(&queue_url)
                        .receipt_handle(receipt)
                        .send()
                        .await
                    {
                        warn!(error = %feedsafe_error(&e), "deleting a drop notification failed");
                    }
                }
            }
        }
    }
}

/// (URL-decoded key, ETag) of each object a moto notification announces.
fn announced(body: &str) -> Vec<(String, String)> {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(body) else {
        warn!("a drop notification that is not JSON; ignored");
        return Vec::new();
    };
    event["Records"]
        .as_array()
        .map(|records| {
            records
                .iter()
                .filter_map(|r| {
                    let object = &r["s3"]["object"];
                    Some((
                        feedsafe::protocols::http::percent_decode(object["key"].as_str()?, true),
                        object["eTag"].as_str()?.trim_matches('"').to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The unreported versions of `key` with `etag`: the current one when it matches, else all.
async fn announced_versions(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    etag: &str,
    seen: &BTreeSet<(String, String)>,
) -> Result<Vec<(String, u64)>> {
    let unseen = |version: &str| !seen.contains(&(key.to_owned(), version.to_owned()));
    // A failed HEAD (the key deleted since, or a fault) falls through to the version list,
    // so a notification for a vanished object is settled rather than retried forever.
    if let Ok(head) = s3.head_object().bucket(bucket).key(key).send().await {
        if let Some(version) = head.version_id() {
            if head.e_tag().map(|t| t.trim_matches('"')) == Some(etag) && unseen(version) {
                let size = head.content_length().unwrap_or(0).max(0) as u64;
                return Ok(vec![(version.to_owned(), size)]);
            }
        }
    }
    // Replaced or deleted since, or the same content dropped again: look at every version of
    // the key (moto's ListObjectVersions copies the whole bucket, so this is the rare path).
    let out = s3
        .list_object_versions()
        .bucket(bucket)
        .prefix(key)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!(feedsafe_error(&e)))?;
    Ok(out
        .versions()
        .iter()
        .filter(|v| v.key() == Some(key) && v.e_tag().map(|t| t.trim_matches('"')) == Some(etag))
        .filter_map(|v| {
            let version = v.version_id()?;
            unseen(version).then(|| (version.to_owned(), v.size().unwrap_or(0).max(0) as u64))
        })
        .collect())
}

/// A key as S3 events carry it: URL-encoded, a space as `+`.
fn s3_event_key(key: &str) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    const KEEP: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/');
    // A literal `%` is itself encoded (`%25`), so `%20` can only be a space.
    utf8_percent_encode(key, KEEP)
        .to_string()
        .replace("%20", "+")
}

/// The S3 event AWS delivers to the drop function for one created version.
fn s3_event(
    bucket: &str,
    key: &str,
    version: &str,
    size: u64,
) -> aws_lambda_events::event::s3::S3Event {
    serde_json::from_value(serde_json::json!({"Records": [{
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": feedsafe::aws::LOCAL_REGION,
        "eventTime": feedsafe::domain::timestamp::Timestamp::now().to_rfc3339(),
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "local"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "local-drops",
            "bucket": {"name": bucket, "ownerIdentity": {"principalId": "local"}, "arn": format!("arn:aws:s3:::{bucket}")},
            "object": {"key": s3_event_key(key), "size": size, "versionId": version},
        },
    }]}))
    .expect("an S3 event in the shape AWS sends (fields as in aws_lambda_events' fixture)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_s3_event_carries_the_key_encoded_as_s3_does_and_decodes_back() {
        let key = "drops/acme files/prix été+1.csv";
        let event = s3_event("raw", key, "v1", 12);
        let object = &event.records[0].s3.object;
        assert_eq!(
            object.key.as_deref(),
            Some("drops/acme+files/prix+%C3%A9t%C3%A9%2B1.csv")
        );
        assert_eq!(
            feedsafe::protocols::http::percent_decode(object.key.as_deref().unwrap(), true),
            key
        );
        assert_eq!(object.version_id.as_deref(), Some("v1"));
    }

    #[test]
    fn a_moto_notification_names_each_created_key_and_its_etag() {
        let body = r#"{"Records": [{"s3": {"object": {"key": "drops/acme-files/a+b.csv", "size": 3, "eTag": "abc"}}}]}"#;
        assert_eq!(
            announced(body),
            vec![("drops/acme-files/a b.csv".to_owned(), "abc".to_owned())]
        );
        assert!(announced(r#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#).is_empty());
        assert!(announced("not json").is_empty());
    }
}
