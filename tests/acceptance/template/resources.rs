//! The local resources are the template's resources; the production settings of tables, bucket, alarms and logs.

use super::*;
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

/// The production checks: least privilege, encryption, backups, retention, alarms and logs.
#[test]
fn template_is_production_complete() {
    let document = template_document();
    let functions = serverless_functions(&document);
    assert!(
        functions.len() >= 8,
        "expected every function: {functions:?}"
    );

    // Least privilege: an explicit role of the template with inline documents only; no
    // `Resource: "*"` except for actions that have no resource-level permission; no wildcard
    // action. (After the SAM transform: infra/template/check_transformed.py, privilege.rs.)
    for (id, function) in &functions {
        let statements = policy_statements(&document, id, function);
        assert!(!statements.is_empty(), "{id}: no policy statements");
        for statement in statements {
            assert!(
                statement.get("NotAction").is_none() && statement.get("NotResource").is_none(),
                "{id}: NotAction/NotResource grant everything else: {statement:?}"
            );
            let resources = one_or_many(&statement["Resource"]);
            assert!(!resources.is_empty(), "{id}: statement without Resource");
            if resources.iter().any(|r| is_wildcard_resource(r)) {
                for action in one_or_many(&statement["Action"]) {
                    assert!(
                        action
                            .as_str()
                            .is_some_and(|a| STAR_ONLY_ACTIONS.contains(&a)),
                        "{id}: {action:?} on Resource \"*\" in {statement:?}"
                    );
                }
            }
        }
        for action in allowed_actions(&document, id, function) {
            assert!(!action.contains('*'), "{id}: wildcard action {action}");
        }
    }

    // Tables: encryption, point-in-time recovery, deletion protection; the evidence table's
    // stream and TTL attribute.
    let tables = resources_of_type(&document, "AWS::DynamoDB::Table");
    assert_eq!(
        tables.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        vec!["EvidenceTable", "ProjectionTable"]
    );
    for (id, table) in &tables {
        let props = &table["Properties"];
        assert!(
            is_enabled(&props["SSESpecification"]["SSEEnabled"]),
            "{id}: SSE"
        );
        assert!(
            is_enabled(&props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"]),
            "{id}: PITR"
        );
        assert!(
            is_enabled(&props["DeletionProtectionEnabled"]),
            "{id}: deletion protection (on by default)"
        );
    }
    let evidence = &resource(&document, "EvidenceTable")["Properties"];
    assert_eq!(
        evidence["StreamSpecification"]["StreamViewType"].as_str(),
        Some("NEW_AND_OLD_IMAGES")
    );
    assert_eq!(
        evidence["TimeToLiveSpecification"]["AttributeName"].as_str(),
        Some("expires_at")
    );
    assert_eq!(
        evidence["TimeToLiveSpecification"]["Enabled"].as_bool(),
        Some(true),
        "TTL must be a literal true (the local stack reads it)"
    );
    assert_eq!(
        resource(&document, "EvidenceTable")["DeletionPolicy"].as_str(),
        Some("Retain"),
        "the evidence outlives the stack"
    );

    // The raw archive: KMS, versioning, no public access, lifecycle, TLS only.
    let bucket = &resource(&document, "RawBucket")["Properties"];
    let sse = &one_or_many(&bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"])[0]
        ["ServerSideEncryptionByDefault"];
    assert_eq!(sse["SSEAlgorithm"].as_str(), Some("aws:kms"));
    assert_eq!(
        get_att(&sse["KMSMasterKeyID"]),
        Some(("RawArchiveKey".to_owned(), "Arn".to_owned())),
        "a customer-managed key"
    );
    assert_eq!(
        resource(&document, "RawArchiveKey")["Properties"]["EnableKeyRotation"].as_bool(),
        Some(true)
    );
    assert_eq!(
        bucket["VersioningConfiguration"]["Status"].as_str(),
        Some("Enabled")
    );
    for flag in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            bucket["PublicAccessBlockConfiguration"][flag].as_bool(),
            Some(true),
            "RawBucket: {flag}"
        );
    }
    // What expires and what moves to a cheaper class: the configuration-guard tests below.
    assert!(
        raw_bucket_lifecycle_rules(&document)
            .iter()
            .any(|r| !r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"].is_null()),
        "RawBucket: incomplete multipart uploads are aborted"
    );
    let tls_only = resources_of_type(&document, "AWS::S3::BucketPolicy")
        .into_iter()
        .filter(|(_, p)| ref_target(&p["Properties"]["Bucket"]) == Some("RawBucket"))
        .flat_map(|(_, p)| one_or_many(&p["Properties"]["PolicyDocument"]["Statement"]))
        .any(|s| {
            s["Effect"].as_str() == Some("Deny")
                && s["Condition"]["Bool"]["aws:SecureTransport"].as_str() == Some("false")
        });
    assert!(tls_only, "RawBucket: no TLS-only deny statement");

    // Alarms.
    let dlq = alarms_on(&document, "AWS/SQS", "ApproximateNumberOfMessagesVisible");
    for queue in ["IngestDLQ", "ProjectorFailureQueue"] {
        assert!(
            dlq.iter()
                .any(|(_, a)| alarm_dimension(a, "QueueName").and_then(get_att)
                    == Some((queue.to_owned(), "QueueName".to_owned()))),
            "no depth alarm on {queue}"
        );
    }
    assert!(
        alarms_on(&document, "AWS/Lambda", "IteratorAge")
            .iter()
            .any(|(_, a)| {
                alarm_dimension(a, "FunctionName").and_then(ref_target) == Some("ProjectorFunction")
                    && a["Properties"]["Threshold"].as_i64() == Some(60_000)
            }),
        "no IteratorAge alarm (60 s) on ProjectorFunction"
    );
    // One alarm reads every connector's Overdue series (the sweeper's, dimension Connector);
    // the dashboard shows each connector's age and outcomes.
    let overdue = resources_of_type(&document, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, a)| {
            one_or_many(&a["Properties"]["Metrics"]).iter().any(|m| {
                m["Expression"].as_str()
                    == Some("SELECT MAX(Overdue) FROM SCHEMA(Feedsafe, Connector)")
                    && m["ReturnData"].as_bool() == Some(true)
            })
        })
        .count();
    assert_eq!(overdue, 1, "one alarm over every connector's Overdue");
    let text = std::fs::read_to_string(template_spec::template_path()).unwrap();
    for metric in ["NewestDeliveryAgeSeconds", "Overdue", "DeliveriesCommitted"] {
        let search = format!(r#"SEARCH('{{Feedsafe,Connector}} MetricName=\"{metric}\""#);
        assert!(
            text.contains(&search),
            "the dashboard shows {metric} per connector"
        );
    }
    for metric in ["Mismatches", "RejectedInputs"] {
        assert!(
            !alarms_on(&document, "Feedsafe", metric).is_empty(),
            "no alarm on Feedsafe/{metric}"
        );
    }
    for metric in ["Errors", "Throttles"] {
        let alarms = alarms_on(&document, "AWS/Lambda", metric);
        for (id, _) in &functions {
            assert!(
                alarms.iter().any(
                    |(_, a)| alarm_dimension(a, "FunctionName").and_then(ref_target)
                        == Some(id.as_str())
                ),
                "no {metric} alarm for {id}"
            );
        }
    }
    // Every alarm notifies AlarmTopicArn (a required parameter): deploy.rs.
    assert!(
        !resources_of_type(&document, "AWS::CloudWatch::Dashboard").is_empty(),
        "no dashboard"
    );

    // Logs: every function writes to its own log group, created by the template with a
    // retention before the function exists (LoggingConfig.LogGroup; a group named after the
    // function would be created after it, or by Lambda without retention on a first invoke).
    let mut groups = std::collections::BTreeSet::new();
    for (id, function) in &functions {
        let group = ref_target(&function["Properties"]["LoggingConfig"]["LogGroup"])
            .unwrap_or_else(|| panic!("{id}: LoggingConfig.LogGroup is not !Ref of a log group"));
        let resource = resource(&document, group);
        assert_eq!(
            resource["Type"].as_str(),
            Some("AWS::Logs::LogGroup"),
            "{id}: {group}"
        );
        assert!(
            !resource["Properties"]["RetentionInDays"].is_null(),
            "{id}: log group {group} without retention"
        );
        let name = sub_text(&resource["Properties"]["LogGroupName"]).unwrap_or_default();
        assert!(
            !name.contains(&format!("${{{id}}}")),
            "{id}: {group} is named after the function, so it cannot exist before it"
        );
        assert!(groups.insert(group), "{id}: {group} is shared");
    }
    let access_log = &resource(&document, "ReadApi")["Properties"]["AccessLogSettings"];
    let destination = get_att(&access_log["DestinationArn"]).expect("API access log destination");
    assert!(
        !resource(&document, &destination.0)["Properties"]["RetentionInDays"].is_null(),
        "API access log without retention"
    );
}
