//! The external contract, checked offline: the HTTP routes of docs/architecture.md section 10, the
//! OpenAPI document (`docs/openapi.yaml`) and the API Gateway routes of `template.yaml` agree, and
//! the sample events (`events/*.json`, for `sam local invoke` and `cargo lambda invoke`) parse into
//! the event types the functions take and say something true about the system.

use crate::template::{
    http_api_routes, one_or_many, parameter_default, ref_target, serverless_functions, sub_text,
    template_document, HttpApiRoute,
};
use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::s3::S3Event;
use aws_lambda_events::event::sqs::SqsEvent;
use feedsafe::domain::envelope::{BodyRef, DeliveryEnvelope};
use feedsafe::domain::hashing::{base64_decode, sha256_hex};
use feedsafe::domain::ids::ObservationId;
use feedsafe::protocols::projection::EvidenceChange;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Bearer JWT with `offers:read` (ReaderAuthorizer).
    Reader,
    /// Bearer JWT with `ops:write` (OpsAuthorizer).
    Ops,
    /// Bearer JWT with `offers:verify` (ReaderAuthorizer), served by the ops function.
    Verifier,
    /// Open at the gateway; the function verifies the Standard Webhooks signature.
    Signed,
    /// Open at the gateway and holding no data: the operator console's static page and assets
    /// (every call the page makes needs an operator token).
    Console,
}

/// Every HTTP route of the external contract (docs/architecture.md section 10, with the ops routes'
/// artifact links), as served by the local stack and by API Gateway. Adding a route means adding it
/// here, to `docs/openapi.yaml` and to `template.yaml`.
const ROUTES: &[(&str, &str, Access)] = &[
    ("GET", "/v1/items/{item}/offers", Access::Reader),
    ("GET", "/v1/items/{item}/observations", Access::Reader),
    ("GET", "/v1/offers", Access::Reader),
    ("GET", "/v1/items", Access::Reader),
    ("GET", "/v1/observations", Access::Reader),
    ("GET", "/v1/observations/{observation_id}", Access::Reader),
    ("GET", "/v1/receipts/verify", Access::Reader),
    ("GET", "/v1/sources", Access::Reader),
    ("POST", "/v1/mcp", Access::Reader),
    ("POST", "/v1/webhooks/{connector}", Access::Signed),
    ("GET", "/v1/deliveries/{delivery_key}", Access::Ops),
    ("GET", "/v1/deliveries/{delivery_key}/artifact", Access::Ops),
    (
        "GET",
        "/v1/observations/{observation_id}/artifact",
        Access::Ops,
    ),
    ("GET", "/v1/artifacts/{artifact_ref}", Access::Ops),
    ("GET", "/v1/runs/{run_id}", Access::Ops),
    ("GET", "/v1/quarantine", Access::Ops),
    ("GET", "/v1/quarantine/{id}", Access::Ops),
    ("GET", "/v1/quarantine/{id}/artifact", Access::Ops),
    ("POST", "/v1/quarantine/{id}/resolve", Access::Ops),
    ("POST", "/v1/identity-corrections", Access::Ops),
    ("GET", "/v1/identity-corrections/{id}", Access::Ops),
    (
        "POST",
        "/v1/identity-corrections/{id}/withdraw",
        Access::Ops,
    ),
    ("POST", "/v1/connector-previews", Access::Ops),
    ("GET", "/v1/connectors/{id}", Access::Ops),
    ("PUT", "/v1/connectors/{id}", Access::Ops),
    ("POST", "/v1/connectors/{id}/preview", Access::Ops),
    ("POST", "/v1/source-quarantines", Access::Ops),
    ("GET", "/v1/source-quarantines/{connector}", Access::Ops),
    (
        "POST",
        "/v1/source-quarantines/{connector}/lift",
        Access::Ops,
    ),
    ("POST", "/v1/connectors/{id}/runs", Access::Ops),
    ("GET", "/v1/connectors", Access::Ops),
    ("GET", "/v1/items/{item}/timeline", Access::Ops),
    ("GET", "/v1/timeline", Access::Ops),
    ("POST", "/v1/verifications", Access::Verifier),
    ("GET", "/v1/verifications/{id}", Access::Verifier),
    ("POST", "/v1/verifications/{id}/withdraw", Access::Verifier),
    ("GET", "/console", Access::Console),
    ("GET", "/console/{asset}", Access::Console),
];

const HTTP_METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

fn repo_root() -> PathBuf {
    template_spec::template_path()
        .parent()
        .expect("template directory")
        .to_path_buf()
}

fn openapi_document() -> serde_norway::Value {
    let path = repo_root().join("docs").join("openapi.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// One path segment of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Segment {
    Literal(String),
    /// `{name}`: exactly one segment.
    Param,
    /// `{name+}` (API Gateway greedy variable): one or more segments, last only.
    Greedy,
}

/// Parameter names are not part of a route's identity: `/v1/runs/{run_id}` == `/v1/runs/{id}`.
fn normalize(path: &str) -> Vec<Segment> {
    path.trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) if name.ends_with('+') => Segment::Greedy,
                Some(_) => Segment::Param,
                None => Segment::Literal(s.to_owned()),
            },
        )
        .collect()
}

fn param_names(path: &str) -> BTreeSet<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|s| s.trim_end_matches('+').to_owned())
        .collect()
}

/// Whether an API Gateway route (possibly greedy) receives requests for `route` (a contract
/// route: literals and single-segment parameters). A greedy variable also takes a parameter
/// followed by more segments, since a delivery key contains `/`.
fn gateway_serves(gateway: &[Segment], route: &[Segment]) -> bool {
    match (gateway.split_first(), route.split_first()) {
        (None, None) => true,
        (Some((Segment::Greedy, _)), Some(_)) => true,
        (Some((Segment::Param, g)), Some((Segment::Param, r))) => gateway_serves(g, r),
        (Some((Segment::Literal(a), g)), Some((Segment::Literal(b), r))) if a == b => {
            gateway_serves(g, r)
        }
        _ => false,
    }
}

fn contract_routes() -> BTreeSet<(String, Vec<Segment>)> {
    ROUTES
        .iter()
        .map(|(method, path, _)| ((*method).to_owned(), normalize(path)))
        .collect()
}

/// `(METHOD, path, operation)` of every operation in the OpenAPI document.
fn openapi_operations(
    document: &serde_norway::Value,
) -> Vec<(String, String, &serde_norway::Value)> {
    let mut out = Vec::new();
    for (path, item) in document["paths"].as_mapping().expect("openapi paths") {
        let path = path.as_str().expect("path").to_owned();
        for method in HTTP_METHODS {
            if let Some(operation) = item.get(method) {
                out.push((method.to_ascii_uppercase(), path.clone(), operation));
            }
        }
    }
    out
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve_ref<'a>(
    document: &'a serde_norway::Value,
    value: &'a serde_norway::Value,
) -> &'a serde_norway::Value {
    match value.get("$ref").and_then(serde_norway::Value::as_str) {
        Some(reference) => {
            let pointer = reference
                .strip_prefix("#/")
                .unwrap_or_else(|| panic!("only local $refs: {reference}"));
            let target = pointer.split('/').fold(document, |node, key| &node[key]);
            assert!(!target.is_null(), "dangling $ref {reference}");
            resolve_ref(document, target)
        }
        None => value,
    }
}

/// The security requirement of an operation as (scheme, scopes).
fn security_of(
    operation: &serde_norway::Value,
    document: &serde_norway::Value,
) -> Vec<(String, Vec<String>)> {
    let security = operation.get("security").unwrap_or(&document["security"]);
    one_or_many(security)
        .into_iter()
        .flat_map(|requirement| {
            requirement
                .as_mapping()
                .into_iter()
                .flatten()
                .map(|(scheme, scopes)| {
                    (
                        scheme.as_str().expect("scheme").to_owned(),
                        one_or_many(scopes)
                            .into_iter()
                            .filter_map(|s| s.as_str().map(str::to_owned))
                            .collect(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn access_of(method: &str, path: &str) -> Access {
    let normalized = normalize(path);
    ROUTES
        .iter()
        .find(|(m, p, _)| *m == method && normalize(p) == normalized)
        .map(|(_, _, access)| *access)
        .unwrap_or_else(|| panic!("{method} {path} is not a contract route"))
}

// ---------------------------------------------------------------------------------------------
// (a) + (b): route lists
// ---------------------------------------------------------------------------------------------

#[test]
fn openapi_documents_exactly_the_contract_routes() {
    let document = openapi_document();
    assert_eq!(document["openapi"].as_str().map(|v| &v[..4]), Some("3.1."));
    let operations = openapi_operations(&document);
    documented_routes_are_the_contract(&operations);
    for (method, path, operation) in &operations {
        operation_declares_its_parameters_and_security(&document, method, path, operation);
    }
    webhook_route_declares_its_headers(&document, &operations);
    errors_and_observations_carry_their_fields(&document);
}

/// Each documented (method, path) is a contract route, and each contract route is documented.
fn documented_routes_are_the_contract(operations: &[(String, String, &serde_norway::Value)]) {
    let documented: BTreeSet<(String, Vec<Segment>)> = operations
        .iter()
        .map(|(method, path, _)| (method.clone(), normalize(path)))
        .collect();
    assert_eq!(
        documented.len(),
        operations.len(),
        "two OpenAPI paths differ only in parameter names"
    );
    let contract = contract_routes();
    let missing: Vec<_> = contract.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&contract).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/openapi.yaml vs the contract: missing {missing:?}, undocumented extra {extra:?}"
    );
}

/// Every `{name}` of the path is declared, the route has responses, and its security scheme
/// matches who may call it.
fn operation_declares_its_parameters_and_security(
    document: &serde_norway::Value,
    method: &str,
    path: &str,
    operation: &serde_norway::Value,
) {
    let schemes = &document["components"]["securitySchemes"];
    // Every `{name}` of the path is declared as a path parameter.
    let declared: BTreeSet<String> = one_or_many(&operation["parameters"])
        .into_iter()
        .chain(one_or_many(&document["paths"][path]["parameters"]))
        .map(|p| resolve_ref(document, p))
        .filter(|p| p["in"].as_str() == Some("path"))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        declared,
        param_names(path),
        "{method} {path}: path parameters"
    );
    assert!(
        operation["responses"]
            .as_mapping()
            .is_some_and(|r| !r.is_empty()),
        "{method} {path}: no responses"
    );

    // The security scheme matches who may call the route.
    let security = security_of(operation, document);
    let expected = match access_of(method, path) {
        Access::Reader => ("readerJwt", vec!["offers:read".to_owned()]),
        Access::Ops => ("opsJwt", vec!["ops:write".to_owned()]),
        Access::Verifier => ("readerJwt", vec!["offers:verify".to_owned()]),
        Access::Signed => ("webhookSignature", vec![]),
        Access::Console => {
            assert!(
                security.is_empty(),
                "{method} {path}: security {security:?}"
            );
            return;
        }
    };
    assert_eq!(
        security,
        vec![(expected.0.to_owned(), expected.1)],
        "{method} {path}: security"
    );
    assert!(
        !schemes[expected.0].is_null(),
        "security scheme {} is not defined",
        expected.0
    );
}

/// The webhook route declares the Standard Webhooks headers.
fn webhook_route_declares_its_headers(
    document: &serde_norway::Value,
    operations: &[(String, String, &serde_norway::Value)],
) {
    let (_, _, webhook) = operations
        .iter()
        .find(|(m, p, _)| m == "POST" && p == "/v1/webhooks/{connector}")
        .expect("webhook route");
    let headers: BTreeSet<String> = one_or_many(&webhook["parameters"])
        .into_iter()
        .map(|p| resolve_ref(document, p))
        .filter(|p| p["in"].as_str() == Some("header"))
        .filter(|p| p["required"].as_bool() == Some(true))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    for header in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(headers.contains(header), "webhook route: header {header}");
    }
}

/// The error schema with its stable codes, and the observation's required fields.
fn errors_and_observations_carry_their_fields(document: &serde_norway::Value) {
    let codes: BTreeSet<String> =
        one_or_many(&document["components"]["schemas"]["ErrorCode"]["enum"])
            .into_iter()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect();
    for code in [
        "invalid_signature",
        "stale_timestamp",
        "unknown_connector",
        "payload_too_large",
        "invalid_payload",
        "replay_payload_mismatch",
        "not_found",
        "unauthorized",
    ] {
        assert!(codes.contains(code), "ErrorCode lacks {code}");
    }
    let error = &document["components"]["schemas"]["Error"];
    assert_eq!(
        one_or_many(&error["required"])
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>(),
        vec![Some("error")]
    );

    // Every offer and observation carries its provenance and trust (docs/architecture.md,
    // section 10).
    let observation: BTreeSet<String> =
        one_or_many(&document["components"]["schemas"]["Observation"]["required"])
            .into_iter()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect();
    for field in [
        "observation_id",
        "item",
        "connector",
        "source_account",
        "delivery_key",
        "identity_strength",
        "quantity",
        "quantity_basis",
        "price",
        "currency",
        "observed_at",
        "retrieved_at",
        "run_id",
        "claim",
        "verification",
        "recorded_at",
        "dedup_confidence",
    ] {
        assert!(
            observation.contains(field),
            "Observation schema lacks {field}"
        );
    }
}

#[test]
fn template_routes_serve_exactly_the_contract_routes() {
    let document = template_document();
    let routes = http_api_routes(&document);
    assert!(!routes.is_empty(), "no HttpApi events in template.yaml");

    for route in &routes {
        // Every event is on the one HTTP API.
        let function = &document["Resources"][route.function.as_str()];
        let api = &function["Properties"]["Events"][route.event.as_str()]["Properties"]["ApiId"];
        assert_eq!(
            ref_target(api),
            Some("ReadApi"),
            "{}.{}: ApiId",
            route.function,
            route.event
        );
    }

    for (method, path, access) in ROUTES {
        contract_route_is_served_once(&routes, method, path, access);
    }

    // And every gateway route serves some contract route: nothing undocumented is exposed.
    let contract = contract_routes();
    for route in &routes {
        let pattern = normalize(&route.path);
        assert!(
            contract
                .iter()
                .any(|(method, path)| *method == route.method && gateway_serves(&pattern, path)),
            "{}.{}: {} {} is not a contract route",
            route.function,
            route.event,
            route.method,
            route.path
        );
    }
    let keys: BTreeSet<(String, String)> = routes
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(keys.len(), routes.len(), "duplicate HttpApi route");

    // The API's default authorizer is the reader's, so a route without Auth is never open.
    let auth = &document["Resources"]["ReadApi"]["Properties"]["Auth"];
    assert_eq!(auth["DefaultAuthorizer"].as_str(), Some("ReaderAuthorizer"));
    for authorizer in ["ReaderAuthorizer", "OpsAuthorizer"] {
        assert!(
            !auth["Authorizers"][authorizer]["JwtConfiguration"].is_null(),
            "{authorizer} is a JWT authorizer"
        );
    }
}

/// A contract route reaches exactly one gateway route, with the right authorization.
fn contract_route_is_served_once(
    routes: &[HttpApiRoute],
    method: &str,
    path: &str,
    access: &Access,
) {
    let wanted = normalize(path);
    let serving: Vec<&HttpApiRoute> = routes
        .iter()
        .filter(|r| r.method == *method && gateway_serves(&normalize(&r.path), &wanted))
        .collect();
    assert_eq!(
        serving.len(),
        1,
        "{method} {path}: served by {serving:?} in template.yaml"
    );
    let route = serving[0];
    let (authorizer, scopes, function): (&str, Vec<String>, &str) = match access {
        Access::Reader => (
            "ReaderAuthorizer",
            vec!["offers:read".into()],
            "QueryFunction",
        ),
        Access::Ops => ("OpsAuthorizer", vec!["ops:write".into()], "OpsFunction"),
        Access::Verifier => (
            "ReaderAuthorizer",
            vec!["offers:verify".into()],
            "OpsFunction",
        ),
        Access::Signed => ("NONE", vec![], "WebhookFunction"),
        Access::Console => ("NONE", vec![], "OpsFunction"),
    };
    assert_eq!(
        route.authorizer.as_deref(),
        Some(authorizer),
        "{method} {path}"
    );
    assert_eq!(route.scopes, scopes, "{method} {path}");
    assert_eq!(route.function, function, "{method} {path}");
}

// ---------------------------------------------------------------------------------------------
// (c): sample events
// ---------------------------------------------------------------------------------------------

fn event_text(name: &str) -> String {
    let path = repo_root().join("events").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn event<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_json::from_str(&event_text(name)).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

fn local_file(name: &str) -> Value {
    let path: PathBuf = [repo_root(), "infra".into(), "local".into(), name.into()]
        .iter()
        .collect();
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The sample SQS delivery: its envelope and the literal payload it carries.
fn sample_delivery() -> (DeliveryEnvelope, Vec<u8>) {
    let sqs: SqsEvent = event("ingest-sqs.json");
    assert_eq!(sqs.records.len(), 1);
    let message = &sqs.records[0];
    assert!(
        message.message_id.is_some(),
        "partial batch responses need messageId"
    );
    assert_eq!(message.event_source.as_deref(), Some("aws:sqs"));
    let body = message.body.as_deref().expect("SQS body");
    let envelope = DeliveryEnvelope::parse(body.as_bytes())
        .unwrap_or_else(|e| panic!("events/ingest-sqs.json: not a v1 envelope: {e:?}"));
    let payload = match &envelope.body {
        BodyRef::Inline { base64 } => base64_decode(base64).expect("inline body is base64"),
        other => panic!("the sample carries its body inline, not {other:?}"),
    };
    (envelope, payload)
}

/// The route key API Gateway puts in a payload 2.0 event is one of the template's routes.
fn assert_routed(event: &ApiGatewayV2httpRequest, name: &str) -> HttpApiRoute {
    let key = event.route_key.as_deref().expect("routeKey");
    assert_eq!(
        event.request_context.route_key.as_deref(),
        Some(key),
        "{name}"
    );
    let (method, path) = key.split_once(' ').expect("routeKey is `METHOD /path`");
    assert_eq!(
        event.request_context.http.method.as_str(),
        method,
        "{name}: method"
    );
    http_api_routes(&template_document())
        .into_iter()
        .find(|r| r.method == method && r.path == path)
        .unwrap_or_else(|| panic!("{name}: route {key} is not in template.yaml"))
}

#[test]
fn sqs_event_carries_a_v1_delivery_envelope() {
    let (envelope, payload) = sample_delivery();
    assert_eq!(envelope.envelope_version, 1);
    assert_eq!(
        envelope.delivery_key().as_string(),
        "demo/acme-eu/ACC-1/EXP-8821/2"
    );
    let connectors = local_file("connectors.json");
    let connector = connectors
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["connector"] == envelope.connector.as_str())
        .expect("the sample connector is a local sample connector");
    assert_eq!(connector["tenant"], envelope.tenant.as_str());
    assert_eq!(
        connector["source_account"],
        envelope.source_account.as_str()
    );
    let page: Value = serde_json::from_slice(&payload).expect("an acme export page");
    assert_eq!(page["export_id"], "EXP-8821");
    assert_eq!(page["page"], 2);
    assert_eq!(
        page["offers"][0]["price"], "820.00",
        "prices are decimal strings"
    );
    let run = envelope.run.as_ref().expect("a pull page belongs to a run");
    assert_eq!((run.page, run.page_count), (2, Some(3)));
}

#[test]
fn stream_event_is_the_observation_of_the_sample_delivery() {
    let (envelope, payload) = sample_delivery();
    let key = envelope.delivery_key();
    let stream: DynamoDbEvent = event("projector-stream.json");
    assert_eq!(stream.records.len(), 1);
    let record = stream.records.into_iter().next().unwrap();
    assert_eq!(record.event_name, "INSERT");
    assert_eq!(
        record
            .change
            .stream_view_type
            .as_ref()
            .map(|v| v.to_string())
            .as_deref(),
        Some("NEW_AND_OLD_IMAGES")
    );
    let image = record.change.new_image.clone();
    let change = feedsafe::aws::stream_records::classify(
        &record.event_name,
        Some(record.change.old_image),
        Some(record.change.new_image),
    )
    .expect("the image decodes");
    let EvidenceChange::Observation(observation) = change else {
        panic!("the sample stream record is not an observation: {change:?}");
    };
    assert_eq!(observation.delivery_key, key.as_string());
    assert_eq!(
        observation.observation_id,
        ObservationId::derive(&key, 0, 0)
    );
    let sha = sha256_hex(&payload);
    assert_eq!(observation.artifact_sha256, sha);
    assert_eq!(
        observation.artifact_key,
        feedsafe::protocols::ingest::artifact_key(&key, &sha)
    );
    assert_eq!(observation.retrieved_at, envelope.retrieved_at);
    assert_eq!(
        observation.run_id.as_ref(),
        envelope.run.as_ref().map(|r| &r.run_id)
    );
    // Exactly the item the evidence store writes for it (keys, GSI attributes and all).
    let stored: serde_dynamo::Item = feedsafe::aws::dynamo::observation_item(&observation)
        .expect("encodes")
        .into();
    assert_eq!(
        image, stored,
        "NewImage differs from the stored observation item"
    );
}

#[test]
fn http_events_are_routed_and_authorized_like_the_gateway() {
    let query: ApiGatewayV2httpRequest = event("query-http.json");
    let route = assert_routed(&query, "query-http.json");
    assert_eq!(route.function, "QueryFunction");
    let reader = feedsafe::lambda::apigw::principal_from_apigw(&query).expect("JWT principal");
    assert_eq!(reader.tenant.as_str(), "demo");
    assert!(reader.scopes.iter().any(|s| s == "offers:read"));
    assert!(!reader.scopes.iter().any(|s| s == "ops:write"));

    let ops: ApiGatewayV2httpRequest = event("ops-http.json");
    let route = assert_routed(&ops, "ops-http.json");
    assert_eq!(route.function, "OpsFunction");
    let operator = feedsafe::lambda::apigw::principal_from_apigw(&ops).expect("JWT principal");
    assert!(operator.scopes.iter().any(|s| s == "ops:write"));
    assert!(ops
        .raw_path
        .as_deref()
        .unwrap_or_default()
        .starts_with("/v1/deliveries/demo/"));

    let webhook: ApiGatewayV2httpRequest = event("webhook-http.json");
    let route = assert_routed(&webhook, "webhook-http.json");
    assert_eq!(route.function, "WebhookFunction");
    assert!(
        webhook.request_context.authorizer.is_none(),
        "the webhook route has no gateway authorizer"
    );
    let header = |name: &str| {
        webhook
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("webhook-http.json: header {name}"))
            .to_owned()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let body = webhook.body.as_deref().expect("body");
    assert!(!webhook.is_base64_encoded);
    // Signed with the connector's local sample secret, exactly as a supplier would.
    let connector = webhook.path_parameters.get("connector").expect("connector");
    let secret = local_file("secrets.json")[connector.as_str()][0]
        .as_str()
        .expect("a local sample secret for the webhook connector")
        .to_owned();
    let secret = feedsafe::intake::webhook::SigningSecret::parse(&secret).expect("secret");
    let expected = feedsafe::intake::webhook::sign(
        &secret,
        &id,
        timestamp.parse().expect("unix seconds"),
        body.as_bytes(),
    );
    assert!(
        signature.split_whitespace().any(|s| s == expected),
        "webhook-signature does not verify; expected {expected}"
    );
    let cloud_event: Value = serde_json::from_str(body).expect("CloudEvents JSON");
    assert_eq!(cloud_event["specversion"], "1.0");
    assert!(cloud_event["data"]["offers"].is_array());
}

#[test]
fn s3_and_schedule_events_match_the_template() {
    let document = template_document();

    let drops: S3Event = event("drops-s3.json");
    assert_eq!(drops.records.len(), 1);
    let record = &drops.records[0];
    assert!(record
        .event_name
        .as_deref()
        .unwrap_or_default()
        .starts_with("ObjectCreated:"));
    let key = record.s3.object.key.as_deref().expect("object key");
    let prefix = one_or_many(
        &document["Resources"]["DropsFunction"]["Properties"]["Events"]["FileDropped"]
            ["Properties"]["Filter"]["S3Key"]["Rules"],
    )[0]["Value"]
        .as_str()
        .expect("drops prefix")
        .to_owned();
    let connector = key
        .strip_prefix(prefix.as_str())
        .and_then(|rest| rest.split_once('/'))
        .map(|(connector, _)| connector)
        .unwrap_or_else(|| panic!("{key} is not under {prefix}{{connector}}/"));
    assert!(
        local_file("connectors.json")
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["connector"] == connector && c["identity_rule"] == "file_version"),
        "{connector} is not a local file-drop connector"
    );
    assert!(
        record.s3.object.version_id.is_some(),
        "the claim check points at the dropped object version"
    );

    // The poller's scheduled input is exactly what the template's schedule sends.
    let poller: Value = event("poller-schedule.json");
    let schedule =
        &document["Resources"]["PollerFunction"]["Properties"]["Events"]["Schedule"]["Properties"];
    let input = sub_text(&schedule["Input"])
        .expect("schedule Input")
        .replace(
            "${PullConnector}",
            parameter_default(&document, "PullConnector")
                .as_str()
                .expect("PullConnector default"),
        );
    let input: Value = serde_json::from_str(&input).expect("schedule Input is JSON");
    assert_eq!(poller, input);
    assert!(poller["connector"].is_string());

    let sweeper: Value = event("sweeper-schedule.json");
    assert_eq!(sweeper["detail-type"], "Scheduled Event");
    assert_eq!(sweeper["source"], "aws.events");

    // Every function has a sample event.
    let samples: BTreeSet<&str> = [
        "IngestFunction",
        "ProjectorFunction",
        "QueryFunction",
        "WebhookFunction",
        "OpsFunction",
        "DropsFunction",
        "PollerFunction",
        "SweeperFunction",
    ]
    .into_iter()
    .collect();
    for (id, _) in serverless_functions(&document) {
        assert!(
            samples.contains(id.as_str()),
            "{id} has no sample event in events/"
        );
    }
}
