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

/// Actions the query function may be granted: DynamoDB reads, nothing else.
const QUERY_READ_ACTIONS: [&str; 3] = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
];

fn template_document() -> serde_yaml::Value {
    feedsafe::local::read_template(&feedsafe::local::template_path())
        .expect("template.yaml parses")
        .document
}

/// The template's `AWS::Serverless::Function` resources, by logical id.
fn serverless_functions(document: &serde_yaml::Value) -> Vec<(String, &serde_yaml::Value)> {
    document["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, resource)| resource["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|(id, resource)| (id.as_str().expect("logical id").to_owned(), resource))
        .collect()
}

/// A scalar or a list of scalars (`Action: x` or `Action: [x, y]`) as a list.
fn one_or_many(value: &serde_yaml::Value) -> Vec<&serde_yaml::Value> {
    match value {
        serde_yaml::Value::Sequence(items) => items.iter().collect(),
        serde_yaml::Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// Every statement of a function's inline `Policies` documents. Managed-policy names and SAM
/// policy templates grant actions this check cannot see, so they fail it.
fn policy_statements<'a>(id: &str, function: &'a serde_yaml::Value) -> Vec<&'a serde_yaml::Value> {
    one_or_many(&function["Properties"]["Policies"])
        .into_iter()
        .flat_map(|policy| {
            let statements = policy.get("Statement").unwrap_or_else(|| {
                panic!("{id}: policy {policy:?} is not an inline policy document")
            });
            one_or_many(statements)
        })
        .collect()
}

/// The actions a function's inline policies allow (`Effect: Allow`), in template order.
fn allowed_actions(id: &str, function: &serde_yaml::Value) -> Vec<String> {
    policy_statements(id, function)
        .into_iter()
        .filter(|statement| statement["Effect"].as_str() == Some("Allow"))
        .flat_map(|statement| {
            assert!(
                statement.get("NotAction").is_none(),
                "{id}: NotAction grants everything else"
            );
            one_or_many(&statement["Action"])
                .into_iter()
                .map(|action| action.as_str().expect("action is a string").to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_wildcard_resource(resource: &serde_yaml::Value) -> bool {
    match resource {
        serde_yaml::Value::String(text) => text.trim() == "*",
        serde_yaml::Value::Tagged(tagged) => is_wildcard_resource(&tagged.value),
        _ => false,
    }
}

#[test]
fn query_function_is_read_only_in_the_template() {
    let document = template_document();
    let functions = serverless_functions(&document);
    let (id, query) = functions
        .iter()
        .find(|(id, _)| id == "QueryFunction")
        .expect("QueryFunction in template.yaml");
    assert!(
        query["Properties"].get("Role").is_none(),
        "{id}: a custom role would bypass the checked Policies"
    );

    let actions = allowed_actions(id, query);
    assert!(!actions.is_empty(), "{id}: no policy statements found");
    for action in &actions {
        assert!(
            !action.starts_with("s3:") && !action.starts_with("sqs:") && !action.contains('*'),
            "{id}: {action} is not allowed on the read path"
        );
        assert!(
            QUERY_READ_ACTIONS.contains(&action.as_str()),
            "{id}: {action} is not one of {QUERY_READ_ACTIONS:?}"
        );
    }
    for statement in policy_statements(id, query) {
        assert_eq!(
            statement["Effect"].as_str(),
            Some("Allow"),
            "{id}: unexpected statement {statement:?}"
        );
        assert!(
            statement.get("NotResource").is_none(),
            "{id}: NotResource grants everything else"
        );
        let resources = one_or_many(&statement["Resource"]);
        assert!(!resources.is_empty(), "{id}: statement without Resource");
        assert!(
            !resources.iter().any(|r| is_wildcard_resource(r)),
            "{id}: Resource \"*\" in {statement:?}"
        );
    }

    // Every function is a cargo-lambda build of a workspace binary on the Globals runtime.
    let globals = &document["Globals"]["Function"];
    assert_eq!(globals["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(
        one_or_many(&globals["Architectures"])
            .iter()
            .map(|a| a.as_str())
            .collect::<Vec<_>>(),
        vec![Some("arm64")]
    );
    assert!(functions.len() >= 4, "{functions:?}");
    let root = feedsafe::local::template_path()
        .parent()
        .expect("template directory")
        .to_path_buf();
    for (id, function) in &functions {
        assert_eq!(
            function["Metadata"]["BuildMethod"].as_str(),
            Some("rust-cargolambda"),
            "{id}: BuildMethod"
        );
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: BuildProperties.Binary missing"));
        assert!(
            root.join("functions")
                .join(binary)
                .join("Cargo.toml")
                .is_file(),
            "{id}: no crate functions/{binary}"
        );
        for inherited in ["Runtime", "Architectures"] {
            assert!(
                function["Properties"].get(inherited).is_none(),
                "{id}: {inherited} must come from Globals"
            );
        }
    }
}
