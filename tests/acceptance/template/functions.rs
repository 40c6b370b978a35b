//! Functions: asynchronous invocation and logs.

use super::*;

/// A function invoked asynchronously (an S3 notification, a schedule) that fails every
/// retry must not lose its event silently: each such function has an on-failure destination,
/// a queue, watched by an alarm.
#[test]
fn asynchronously_invoked_functions_park_failed_events_in_an_alarmed_queue() {
    let document = template_document();
    let resources = &document["Resources"];
    let asynchronous: Vec<(String, &serde_norway::Value)> = serverless_functions(&document)
        .into_iter()
        .filter(|(_, f)| {
            f["Properties"]["Events"]
                .as_mapping()
                .is_some_and(|events| {
                    events.values().any(|e| {
                        matches!(
                            e["Type"].as_str(),
                            Some("S3" | "Schedule" | "ScheduleV2" | "SNS" | "EventBridgeRule")
                        )
                    })
                })
        })
        .collect();
    let mut names: Vec<&str> = asynchronous.iter().map(|(id, _)| id.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["DropsFunction", "PollerFunction", "SweeperFunction"],
        "the asynchronously invoked functions"
    );
    for (id, function) in &asynchronous {
        let config = &function["Properties"]["EventInvokeConfig"];
        let on_failure = &config["DestinationConfig"]["OnFailure"];
        assert_eq!(on_failure["Type"].as_str(), Some("SQS"), "{id}: {config:?}");
        let queue = get_att(&on_failure["Destination"])
            .filter(|(_, attribute)| attribute == "Arn")
            .map(|(queue, _)| queue)
            .unwrap_or_else(|| panic!("{id}: the destination is not a queue of the template"));
        assert_eq!(
            resources[queue.as_str()]["Type"].as_str(),
            Some("AWS::SQS::Queue"),
            "{id}"
        );
        let watched = resources.as_mapping().unwrap().values().any(|r| {
            r["Type"].as_str() == Some("AWS::CloudWatch::Alarm")
                && r["Properties"]["Dimensions"]
                    .as_sequence()
                    .is_some_and(|dims| {
                        dims.iter().any(|d| {
                            get_att(&d["Value"]) == Some((queue.clone(), "QueueName".into()))
                        })
                    })
                && !one_or_many(&r["Properties"]["AlarmActions"]).is_empty()
        });
        assert!(watched, "{id}: no alarm on {queue}");
        assert!(
            config["MaximumRetryAttempts"]
                .as_u64()
                .is_some_and(|n| n <= 2),
            "{id}: {config:?}"
        );
    }
}

/// Every function's logs are JSON, its own lines and Lambda's.
#[test]
fn every_function_logs_json() {
    let document = template_document();
    let global = document["Globals"]["Function"]["LoggingConfig"]["LogFormat"].as_str();
    for (id, function) in serverless_functions(&document) {
        let format = function["Properties"]["LoggingConfig"]["LogFormat"]
            .as_str()
            .or(global);
        assert_eq!(format, Some("JSON"), "{id}");
    }
}
