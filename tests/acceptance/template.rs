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

// ---------------------------------------------------------------------------------------------
// Reusable helpers over the parsed template (also used by contract.rs)
// ---------------------------------------------------------------------------------------------

/// Actions the query function may be granted: DynamoDB reads, nothing else.
const QUERY_READ_ACTIONS: [&str; 3] = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
];

pub(crate) fn template_document() -> serde_norway::Value {
    template_spec::read_template(&template_spec::template_path())
        .expect("template.yaml parses")
        .document
}

/// The template's `AWS::Serverless::Function` resources, by logical id.
pub(crate) fn serverless_functions(
    document: &serde_norway::Value,
) -> Vec<(String, &serde_norway::Value)> {
    document["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, resource)| resource["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|(id, resource)| (id.as_str().expect("logical id").to_owned(), resource))
        .collect()
}

/// A scalar or a list of scalars (`Action: x` or `Action: [x, y]`) as a list.
pub(crate) fn one_or_many(value: &serde_norway::Value) -> Vec<&serde_norway::Value> {
    match value {
        serde_norway::Value::Sequence(items) => items.iter().collect(),
        serde_norway::Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// Every statement of a function's inline `Policies` documents. Managed-policy names and SAM
/// policy templates grant actions this check cannot see, so they fail it.
pub(crate) fn policy_statements<'a>(
    id: &str,
    function: &'a serde_norway::Value,
) -> Vec<&'a serde_norway::Value> {
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
pub(crate) fn allowed_actions(id: &str, function: &serde_norway::Value) -> Vec<String> {
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

pub(crate) fn is_wildcard_resource(resource: &serde_norway::Value) -> bool {
    match resource {
        serde_norway::Value::String(text) => text.trim() == "*",
        serde_norway::Value::Tagged(tagged) => is_wildcard_resource(&tagged.value),
        _ => false,
    }
}

/// The template's resources of one CloudFormation/SAM type, by logical id, in template order.
pub(crate) fn resources_of_type<'a>(
    document: &'a serde_norway::Value,
    kind: &str,
) -> Vec<(String, &'a serde_norway::Value)> {
    document["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, resource)| resource["Type"].as_str() == Some(kind))
        .map(|(id, resource)| (id.as_str().expect("logical id").to_owned(), resource))
        .collect()
}

/// One resource by logical id; panics with the id when it is missing.
pub(crate) fn resource<'a>(document: &'a serde_norway::Value, id: &str) -> &'a serde_norway::Value {
    let resource = &document["Resources"][id];
    assert!(!resource.is_null(), "no resource {id} in template.yaml");
    resource
}

/// The argument of an intrinsic function in short (`!Ref x`) or long (`{Ref: x}`) form.
pub(crate) fn intrinsic<'a>(
    value: &'a serde_norway::Value,
    short: &str,
    long: &str,
) -> Option<&'a serde_norway::Value> {
    match value {
        serde_norway::Value::Tagged(tagged) if tagged.tag == short => Some(&tagged.value),
        serde_norway::Value::Mapping(map) if map.len() == 1 => map.get(long),
        _ => None,
    }
}

/// `!Ref X` -> `X`.
pub(crate) fn ref_target(value: &serde_norway::Value) -> Option<&str> {
    intrinsic(value, "!Ref", "Ref").and_then(serde_norway::Value::as_str)
}

/// `!GetAtt X.Attr` or `Fn::GetAtt: [X, Attr]` -> `(X, Attr)`.
pub(crate) fn get_att(value: &serde_norway::Value) -> Option<(String, String)> {
    match intrinsic(value, "!GetAtt", "Fn::GetAtt")? {
        serde_norway::Value::String(text) => text
            .split_once('.')
            .map(|(id, attr)| (id.to_owned(), attr.to_owned())),
        serde_norway::Value::Sequence(parts) => Some((
            parts.first()?.as_str()?.to_owned(),
            parts.get(1)?.as_str()?.to_owned(),
        )),
        _ => None,
    }
}

/// The template string of `!Sub "..."` (or a plain string).
pub(crate) fn sub_text(value: &serde_norway::Value) -> Option<&str> {
    match intrinsic(value, "!Sub", "Fn::Sub") {
        Some(inner) => inner.as_str(),
        None => value.as_str(),
    }
}

/// True for `true`, `"true"`, or `!If [Condition, true, ...]` (on when the condition holds, which
/// the parameter defaults make it).
pub(crate) fn is_enabled(value: &serde_norway::Value) -> bool {
    match value {
        serde_norway::Value::Bool(b) => *b,
        serde_norway::Value::String(s) => s == "true",
        other => intrinsic(other, "!If", "Fn::If")
            .and_then(serde_norway::Value::as_sequence)
            .and_then(|branches| branches.get(1))
            .is_some_and(is_enabled),
    }
}

/// A parameter's `Default`, e.g. to resolve `!Ref IngestMaxReceiveCount`.
pub(crate) fn parameter_default<'a>(
    document: &'a serde_norway::Value,
    name: &str,
) -> &'a serde_norway::Value {
    &document["Parameters"][name]["Default"]
}

/// One `HttpApi` event of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpApiRoute {
    pub function: String,
    pub event: String,
    /// Upper case, e.g. `GET`.
    pub method: String,
    /// As written, e.g. `/v1/deliveries/{delivery_key+}`.
    pub path: String,
    /// `ReaderAuthorizer`, `OpsAuthorizer`, `NONE`, or the API's default when unset.
    pub authorizer: Option<String>,
    pub scopes: Vec<String>,
}

/// Every `HttpApi` event of every function, in template order.
pub(crate) fn http_api_routes(document: &serde_norway::Value) -> Vec<HttpApiRoute> {
    let mut routes = Vec::new();
    for (function, resource) in serverless_functions(document) {
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for (name, event) in events {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let props = &event["Properties"];
            let auth = &props["Auth"];
            routes.push(HttpApiRoute {
                function: function.clone(),
                event: name.as_str().expect("event name").to_owned(),
                method: props["Method"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{function}: HttpApi event without Method"))
                    .to_ascii_uppercase(),
                path: props["Path"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{function}: HttpApi event without Path"))
                    .to_owned(),
                authorizer: auth["Authorizer"].as_str().map(str::to_owned),
                scopes: one_or_many(&auth["AuthorizationScopes"])
                    .into_iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect(),
            });
        }
    }
    routes
}

/// The alarms of the template whose metric is `namespace`/`metric`, with their dimensions.
pub(crate) fn alarms_on<'a>(
    document: &'a serde_norway::Value,
    namespace: &str,
    metric: &str,
) -> Vec<(String, &'a serde_norway::Value)> {
    resources_of_type(document, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, alarm)| {
            alarm["Properties"]["Namespace"].as_str() == Some(namespace)
                && alarm["Properties"]["MetricName"].as_str() == Some(metric)
        })
        .collect()
}

/// The value of an alarm's dimension `name` (literal, `!Ref` or `!GetAtt`, unresolved).
pub(crate) fn alarm_dimension<'a>(
    alarm: &'a serde_norway::Value,
    name: &str,
) -> Option<&'a serde_norway::Value> {
    one_or_many(&alarm["Properties"]["Dimensions"])
        .into_iter()
        .find(|d| d["Name"].as_str() == Some(name))
        .map(|d| &d["Value"])
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
    let root = template_spec::template_path()
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

/// The production checks: least privilege, encryption, backups, retention, alarms and logs.
#[test]
fn template_is_production_complete() {
    let document = template_document();
    let functions = serverless_functions(&document);
    assert!(
        functions.len() >= 8,
        "expected every function: {functions:?}"
    );

    // Least privilege: no `Resource: "*"`, no wildcard action, no custom role, inline documents only.
    for (id, function) in &functions {
        assert!(
            function["Properties"].get("Role").is_none(),
            "{id}: a custom role would bypass the checked Policies"
        );
        let statements = policy_statements(id, function);
        assert!(!statements.is_empty(), "{id}: no policy statements");
        for statement in statements {
            assert!(
                statement.get("NotAction").is_none() && statement.get("NotResource").is_none(),
                "{id}: NotAction/NotResource grant everything else: {statement:?}"
            );
            let resources = one_or_many(&statement["Resource"]);
            assert!(!resources.is_empty(), "{id}: statement without Resource");
            assert!(
                !resources.iter().any(|r| is_wildcard_resource(r)),
                "{id}: Resource \"*\" in {statement:?}"
            );
        }
        for action in allowed_actions(id, function) {
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
    for (id, alarm) in resources_of_type(&document, "AWS::CloudWatch::Alarm") {
        let actions = &alarm["Properties"]["AlarmActions"];
        let conditional = intrinsic(actions, "!If", "Fn::If")
            .and_then(serde_norway::Value::as_sequence)
            .and_then(|branches| branches.first())
            .and_then(serde_norway::Value::as_str);
        assert_eq!(
            conditional,
            Some("HasAlarmTopic"),
            "{id}: AlarmActions must notify AlarmTopicArn only when it is set"
        );
    }
    assert!(
        !resources_of_type(&document, "AWS::CloudWatch::Dashboard").is_empty(),
        "no dashboard"
    );

    // Logs: every function has its own log group with a retention, and the API logs access.
    let log_groups = resources_of_type(&document, "AWS::Logs::LogGroup");
    for (id, _) in &functions {
        let expected = format!("/aws/lambda/${{{id}}}");
        let group = log_groups
            .iter()
            .find(|(_, g)| sub_text(&g["Properties"]["LogGroupName"]) == Some(expected.as_str()))
            .unwrap_or_else(|| panic!("{id}: no log group {expected}"));
        assert!(
            !group.1["Properties"]["RetentionInDays"].is_null(),
            "{id}: log group {} without retention",
            group.0
        );
    }
    let access_log = &resource(&document, "ReadApi")["Properties"]["AccessLogSettings"];
    let destination = get_att(&access_log["DestinationArn"]).expect("API access log destination");
    assert!(
        !resource(&document, &destination.0)["Properties"]["RetentionInDays"].is_null(),
        "API access log without retention"
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration guards: retention of the raw evidence, the dedup horizon
// ---------------------------------------------------------------------------------------------

/// Prefixes of the raw bucket that hold evidence records point at forever: the delivery
/// payloads (`raw/`, referenced by observations and replay records) and refused messages
/// (`rejected/`, referenced by quarantine entries).
const EVIDENCE_PREFIXES: [&str; 2] = ["raw/", "rejected/"];

/// Storage classes an artifact may move to: readable in milliseconds without a restore, so
/// ingest's verification, quarantine diffs and presigned links keep working.
const INSTANT_RETRIEVAL_CLASSES: [&str; 2] = ["GLACIER_IR", "STANDARD_IA"];

/// S3 refuses a transition to STANDARD_IA earlier than 30 days after creation.
const MIN_TRANSITION_DAYS: i64 = 30;

const EXPIRING_PROPERTIES: [&str; 4] = [
    "ExpirationInDays",
    "ExpirationDate",
    "NoncurrentVersionExpiration",
    "NoncurrentVersionExpirationInDays",
];

/// The raw bucket's enabled lifecycle rules.
fn raw_bucket_lifecycle_rules(document: &serde_norway::Value) -> Vec<&serde_norway::Value> {
    let rules = &resource(document, "RawBucket")["Properties"]["LifecycleConfiguration"]["Rules"];
    one_or_many(rules)
        .into_iter()
        .filter(|r| r["Status"].as_str() == Some("Enabled"))
        .collect()
}

/// Whether a rule can act on some object under `prefix`: a rule without a prefix acts on every
/// object; tag and size filters only narrow it, so they do not make it safe.
fn rule_reaches(rule: &serde_norway::Value, prefix: &str) -> bool {
    let own = rule["Prefix"].as_str().unwrap_or("");
    prefix.starts_with(own) || own.starts_with(prefix)
}

fn rule_name(rule: &serde_norway::Value) -> String {
    format!(
        "{} (prefix {:?})",
        rule["Id"].as_str().unwrap_or("<no Id>"),
        rule["Prefix"].as_str().unwrap_or("")
    )
}

/// The least value a number property can take: a literal, or the `MinValue` of the parameter
/// it references (`None` when the parameter has none).
fn least_number(document: &serde_norway::Value, value: &serde_norway::Value) -> Option<i64> {
    let as_number = |v: &serde_norway::Value| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    match ref_target(value) {
        Some(name) => as_number(&document["Parameters"][name]["MinValue"]),
        None => as_number(value),
    }
}

/// The values a string property can take: a literal, or the `AllowedValues` of the parameter
/// it references (`None` when the parameter allows anything).
fn possible_strings(
    document: &serde_norway::Value,
    value: &serde_norway::Value,
) -> Option<Vec<String>> {
    match ref_target(value) {
        Some(name) => document["Parameters"][name]["AllowedValues"]
            .as_sequence()
            .map(|values| {
                values
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            }),
        None => value.as_str().map(|s| vec![s.to_owned()]),
    }
}

/// The longest time (seconds) a message can stay in the ingest queue or its dead-letter queue.
fn longest_queue_retention_seconds(document: &serde_norway::Value) -> i64 {
    ["IngestQueue", "IngestDLQ"]
        .iter()
        .map(|id| {
            resource(document, id)["Properties"]["MessageRetentionPeriod"]
                .as_i64()
                .unwrap_or(345_600) // the SQS default, 4 days
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn no_lifecycle_rule_expires_raw_evidence_current_or_noncurrent() {
    let document = template_document();
    for rule in raw_bucket_lifecycle_rules(&document) {
        for prefix in EVIDENCE_PREFIXES {
            if !rule_reaches(rule, prefix) {
                continue;
            }
            for property in EXPIRING_PROPERTIES {
                assert!(
                    rule.get(property).is_none(),
                    "lifecycle rule {} reaches {prefix} and has {property}: it would delete \
                     evidence an observation or a quarantine entry still points at",
                    rule_name(rule)
                );
            }
        }
    }
}

#[test]
fn raw_evidence_moves_to_a_cheaper_instant_retrieval_class_instead_of_expiring() {
    let document = template_document();
    let rules = raw_bucket_lifecycle_rules(&document);
    for prefix in EVIDENCE_PREFIXES {
        let reaching: Vec<_> = rules.iter().filter(|r| rule_reaches(r, prefix)).collect();
        // Every transition that can touch evidence keeps it readable without a restore.
        for rule in &reaching {
            for list in [
                "Transitions",
                "Transition",
                "NoncurrentVersionTransitions",
                "NoncurrentVersionTransition",
            ] {
                for transition in one_or_many(&rule[list]) {
                    let classes = possible_strings(&document, &transition["StorageClass"])
                        .unwrap_or_else(|| {
                            panic!("{}: {list} storage class is unconstrained", rule_name(rule))
                        });
                    assert!(
                        classes
                            .iter()
                            .all(|c| INSTANT_RETRIEVAL_CLASSES.contains(&c.as_str())),
                        "{}: {list} may move evidence to {classes:?}; only {INSTANT_RETRIEVAL_CLASSES:?} \
                         are read without a restore",
                        rule_name(rule)
                    );
                    let days = transition
                        .get("TransitionInDays")
                        .or_else(|| transition.get("NoncurrentDays"))
                        .and_then(|d| least_number(&document, d));
                    assert!(
                        days.is_some_and(|d| d >= MIN_TRANSITION_DAYS),
                        "{}: {list} may transition before {MIN_TRANSITION_DAYS} days ({days:?})",
                        rule_name(rule)
                    );
                }
            }
        }
        assert!(
            reaching
                .iter()
                .any(|r| !one_or_many(&r["Transitions"]).is_empty()),
            "no lifecycle rule moves {prefix} objects to a cheaper storage class"
        );
    }
}

#[test]
fn claim_checked_bodies_still_expire_but_only_after_the_queue_is_done_with_them() {
    let document = template_document();
    let retention_days = (longest_queue_retention_seconds(&document) + 86_399) / 86_400;
    for prefix in ["claims/", "drops/"] {
        let expiring: Vec<_> = raw_bucket_lifecycle_rules(&document)
            .into_iter()
            .filter(|r| rule_reaches(r, prefix))
            .filter(|r| !r["ExpirationInDays"].is_null())
            .collect();
        assert!(!expiring.is_empty(), "nothing expires {prefix} objects");
        for rule in expiring {
            // A queued envelope (or one redriven from the dead-letter queue) points at them.
            let days = least_number(&document, &rule["ExpirationInDays"]);
            assert!(
                days.is_some_and(|d| d > retention_days),
                "{}: {prefix} objects may expire after {days:?} days, before a message that \
                 points at them leaves the queues ({retention_days} days)",
                rule_name(rule)
            );
        }
    }
}

#[test]
fn the_dedup_horizon_parameter_cannot_go_below_one_day_nor_below_queue_retention() {
    let document = template_document();
    let horizon = &document["Parameters"]["DedupHorizonDays"];
    assert_eq!(horizon["Type"].as_str(), Some("Number"));
    let least = horizon["MinValue"]
        .as_i64()
        .expect("DedupHorizonDays has a MinValue");
    assert!(least >= 1, "a horizon below one day can be deployed");
    assert!(
        least * 86_400 > longest_queue_retention_seconds(&document),
        "a horizon of {least} days does not outlive the queues' message retention"
    );
    let default = horizon["Default"].as_i64().expect("a numeric default");
    assert!(default >= least);
}

/// Issue 10: a function invoked asynchronously (an S3 notification, a schedule) that fails every
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
                && matches!(
                    r["Properties"]["AlarmActions"],
                    serde_norway::Value::Tagged(_)
                )
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

/// Issue 10: every function's logs are JSON, its own lines and Lambda's.
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
