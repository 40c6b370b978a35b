//! The local resources are the template's resources.

use acceptance::*;
use aws_sdk_dynamodb::types::{StreamViewType, TimeToLiveStatus};

#[tokio::test(flavor = "multi_thread")]
async fn tables_and_queues_are_created_from_the_template_shapes() {
    let env = spawn_env(true).await;
    let table = env
        .clients
        .dynamodb
        .describe_table()
        .table_name(&env.table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let gsis: Vec<String> = table
        .global_secondary_indexes()
        .iter()
        .filter_map(|g| g.index_name().map(str::to_owned))
        .collect();
    assert_eq!(gsis.len(), 2, "{gsis:?}");
    let stream = table.stream_specification().expect("stream");
    assert_eq!(
        stream.stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    let ttl = env
        .clients
        .dynamodb
        .describe_time_to_live()
        .table_name(&env.table)
        .send()
        .await
        .unwrap()
        .time_to_live_description
        .unwrap();
    assert_eq!(ttl.attribute_name(), Some("expires_at"));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));

    let queue = env.resources.queue("IngestQueue").unwrap();
    let attrs = env
        .clients
        .sqs
        .get_queue_attributes()
        .queue_url(&queue.url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    let redrive = attrs
        .get(&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy)
        .expect("redrive policy");
    let redrive: serde_json::Value = serde_json::from_str(redrive).unwrap();
    assert_eq!(
        redrive["deadLetterTargetArn"],
        env.resources.queue("IngestDLQ").unwrap().arn.as_str()
    );
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        "5"
    );
}
