//! The template's shapes, read as written (`template.yaml` through `template-spec`) and after
//! the SAM transform (`infra/template/check_transformed.py`). Helpers here; the checks by topic:
//! `resources` (local resources and production settings), `privilege` (execution roles and
//! policies; `ingest_calls` and `drops_calls`: against the calls the code makes), `retention`
//! (lifecycle rules of the raw bucket), `deploy` (parameters, samconfig, log groups, alarms),
//! `functions` (asynchronous invocation, JSON logs).

mod deploy;
mod drops_calls;
mod functions;
mod ingest_calls;
mod privilege;
mod resources;
mod retention;
mod sizing;

// ---------------------------------------------------------------------------------------------
// Reusable helpers over the parsed template (also used by contract.rs)
// ---------------------------------------------------------------------------------------------

/// Actions the query function may be granted: DynamoDB reads, nothing else.
const QUERY_READ_ACTIONS: [&str; 3] = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
];

/// What every function's role grants for the function itself: writes to its own log group and
/// X-Ray trace segments (`Tracing: Active`).
const TELEMETRY_ACTIONS: [&str; 4] = [
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
];

/// Actions without resource-level permissions: `Resource: "*"` is their only form.
const STAR_ONLY_ACTIONS: [&str; 3] = [
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "dynamodb:ListStreams",
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

/// The execution role of a function: `Role: !GetAtt X.Arn` naming an `AWS::IAM::Role` of the
/// template, and no SAM `Policies` (SAM ignores them next to a role, and policy templates or
/// managed-policy names grant what this check cannot see).
pub(crate) fn execution_role<'a>(
    document: &'a serde_norway::Value,
    id: &str,
    function: &serde_norway::Value,
) -> (String, &'a serde_norway::Value) {
    assert!(
        function["Properties"].get("Policies").is_none(),
        "{id}: SAM Policies next to an explicit role"
    );
    let (role, attribute) = get_att(&function["Properties"]["Role"])
        .unwrap_or_else(|| panic!("{id}: Role must be !GetAtt <role>.Arn of this template"));
    assert_eq!(attribute, "Arn", "{id}: Role");
    let resource = resource(document, &role);
    assert_eq!(
        resource["Type"].as_str(),
        Some("AWS::IAM::Role"),
        "{id}: {role}"
    );
    assert!(
        one_or_many(&resource["Properties"]["ManagedPolicyArns"]).is_empty(),
        "{id}: {role} carries managed policies"
    );
    (role, resource)
}

/// Every statement of a function's permissions: its role's inline policies and the
/// `AWS::IAM::RolePolicy` resources attached to that role.
pub(crate) fn policy_statements<'a>(
    document: &'a serde_norway::Value,
    id: &str,
    function: &serde_norway::Value,
) -> Vec<&'a serde_norway::Value> {
    let (role_id, role) = execution_role(document, id, function);
    let inline = one_or_many(&role["Properties"]["Policies"])
        .into_iter()
        .map(|policy| &policy["PolicyDocument"]);
    let attached = resources_of_type(document, "AWS::IAM::RolePolicy")
        .into_iter()
        .filter(|(_, p)| ref_target(&p["Properties"]["RoleName"]) == Some(role_id.as_str()))
        .map(|(_, p)| &p["Properties"]["PolicyDocument"]);
    inline
        .chain(attached)
        .flat_map(|document| {
            let statements = document.get("Statement").unwrap_or_else(|| {
                panic!("{id}: policy {document:?} is not an inline policy document")
            });
            one_or_many(statements)
        })
        .collect()
}

/// The actions a function's inline policies allow (`Effect: Allow`), in template order.
pub(crate) fn allowed_actions(
    document: &serde_norway::Value,
    id: &str,
    function: &serde_norway::Value,
) -> Vec<String> {
    policy_statements(document, id, function)
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

/// Asserts that `function`'s role in template.yaml allows every IAM action that the SDK
/// operations `called` (`Service.Operation`) need, as `iam_actions` maps them.
pub(crate) fn assert_role_allows(
    function: &str,
    called: &std::collections::BTreeSet<String>,
    iam_actions: fn(&str) -> Vec<String>,
) {
    let document = template_document();
    let functions = serverless_functions(&document);
    let (id, definition) = functions
        .iter()
        .find(|(id, _)| id == function)
        .unwrap_or_else(|| panic!("{function} in template.yaml"));
    let allowed: std::collections::BTreeSet<String> = allowed_actions(&document, id, definition)
        .into_iter()
        .collect();
    let missing: Vec<String> = called
        .iter()
        .flat_map(|operation| iam_actions(operation))
        .filter(|action| !allowed.contains(action))
        .collect();
    assert!(
        missing.is_empty(),
        "{function}'s role lacks {missing:?} for the calls {called:?}"
    );
    println!("{function} called {called:?}; all allowed by its role");
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

/// The raw bucket's enabled lifecycle rules.
pub(crate) fn raw_bucket_lifecycle_rules(
    document: &serde_norway::Value,
) -> Vec<&serde_norway::Value> {
    let rules = &resource(document, "RawBucket")["Properties"]["LifecycleConfiguration"]["Rules"];
    one_or_many(rules)
        .into_iter()
        .filter(|r| r["Status"].as_str() == Some("Enabled"))
        .collect()
}
