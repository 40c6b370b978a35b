//! API Gateway HTTP API (payload 2.0) -> the query, ops and webhook functions: the JWT
//! authorizer's principal, the request translated into the transport-independent request of
//! each service, and its `HttpResponse` back into an API Gateway response.

use crate::domain::hashing::base64_decode;
use crate::domain::ids::TenantId;
use crate::domain::timestamp::Timestamp;
use crate::intake::webhook::{WebhookRequest, WebhookService};
use crate::lambda::isolation::isolated;
use crate::ops::{handle_ops, OpsRequest, OpsService};
use crate::protocols::http::{
    given_once, handle_read, parse_query, percent_decode, HttpRequest, HttpResponse,
};
use crate::protocols::mcp::{handle_mcp, McpRequest, MCP_PATH};
use crate::protocols::query::{Principal, QueryService};
use aws_lambda_events::event::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use std::collections::HashMap;

/// Tenant and scopes from the API Gateway JWT authorizer: the tenant is the `tenant` claim,
/// which the identity provider MUST set from its own records (a client-credentials app's
/// attribute, never a user-editable profile field): whoever can change it reads and operates
/// on another tenant's data. Scopes are the authorizer's `scopes`, the `scope` claim
/// (space-separated) and the `scp` claim (a string, or an array, which API Gateway hands
/// over as `[a b]`).
pub fn principal_from_apigw(request: &ApiGatewayV2httpRequest) -> Option<Principal> {
    let jwt = request.request_context.authorizer.as_ref()?.jwt.as_ref()?;
    let tenant = jwt
        .claims
        .get("tenant")
        .and_then(|t| TenantId::parse(t).ok())?;
    let mut scopes: Vec<String> = jwt.scopes.clone().unwrap_or_default();
    for claim in ["scope", "scp"] {
        if let Some(value) = jwt.claims.get(claim) {
            let listed = value.trim().trim_start_matches('[').trim_end_matches(']');
            for scope in listed.split([' ', ',']) {
                let scope = scope.trim().trim_matches('"');
                if !scope.is_empty() && !scopes.iter().any(|s| s == scope) {
                    scopes.push(scope.to_owned());
                }
            }
        }
    }
    let subject = jwt.claims.get("sub").cloned();
    Some(Principal {
        tenant,
        scopes,
        subject,
    })
}

/// The query function: API Gateway HTTP API (payload 2.0) -> read routes -> JSON.
pub async fn handle_apigw_read(
    service: &QueryService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let route = route_of(&request);
    isolated(&route, Box::pin(read_route(service, request)))
        .await
        .unwrap_or_else(|_| apigw_response(internal_error()))
}

async fn read_route(
    service: &QueryService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let path = percent_decode(request.raw_path.as_deref().unwrap_or_default(), false);
    if path == MCP_PATH {
        let principal = principal_from_apigw(&request);
        let Some(body) = request_body(&request) else {
            return apigw_response(HttpResponse::error(
                400,
                "invalid_request",
                "the body is not valid base64",
            ));
        };
        let headers = request
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    name.as_str().to_ascii_lowercase(),
                    value.to_str().ok()?.to_owned(),
                ))
            })
            .collect();
        let mcp = McpRequest {
            method: request.request_context.http.method.to_string(),
            headers,
            body,
            principal,
        };
        return apigw_response(handle_mcp(service, mcp).await);
    }
    let query = match query_of(&request) {
        Ok(query) => query,
        Err(refusal) => return apigw_response(refusal),
    };
    let http = HttpRequest {
        method: request.request_context.http.method.to_string(),
        path,
        query,
        principal: principal_from_apigw(&request),
    };
    let response = handle_read(service, http, Timestamp::now()).await;
    apigw_response(response)
}

/// The query parameters, each given once, from `rawQueryString` decoded exactly once
/// (`parse_query`). Not from `queryStringParameters`: API Gateway hands those over already
/// decoded, with a repeated parameter's values joined by commas, and the event's `QueryMap`
/// splits every value at its commas again, so a value holding a comma (a part number may) could
/// not be told from a repeated parameter; decoding them again would decode twice (`%2525`).
/// API Gateway always sends `rawQueryString` (empty without a query); an event written without
/// it falls back to `queryStringParameters`, where a comma reads as a repetition.
fn query_of(request: &ApiGatewayV2httpRequest) -> Result<HashMap<String, String>, HttpResponse> {
    match request.raw_query_string.as_deref() {
        Some(raw) => parse_query(raw),
        None => given_once(
            request
                .query_string_parameters
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned())),
        ),
    }
}

/// `METHOD path` of a request, to name it in the log of a panic.
fn route_of(request: &ApiGatewayV2httpRequest) -> String {
    format!(
        "{} {}",
        request.request_context.http.method,
        request.raw_path.as_deref().unwrap_or_default()
    )
}

/// The answer to a request whose handling panicked (`crate::lambda::isolation`): the panic's
/// text is logged, never sent.
pub fn internal_error() -> HttpResponse {
    HttpResponse::error(
        500,
        "internal_error",
        "the request failed on a defect of ours; the failure is logged",
    )
}

/// The request's body bytes (`None`: marked base64 but not valid base64).
fn request_body(request: &ApiGatewayV2httpRequest) -> Option<Vec<u8>> {
    match (request.body.as_deref(), request.is_base64_encoded) {
        (None, _) => Some(Vec::new()),
        (Some(text), true) => base64_decode(text),
        (Some(text), false) => Some(text.as_bytes().to_vec()),
    }
}

/// The ops function: API Gateway HTTP API (payload 2.0, ops authorizer) -> `handle_ops` -> JSON.
pub async fn handle_apigw_ops(
    service: &OpsService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let route = route_of(&request);
    isolated(&route, Box::pin(ops_route(service, request)))
        .await
        .unwrap_or_else(|_| apigw_response(internal_error()))
}

async fn ops_route(
    service: &OpsService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let response = match (request_body(&request), query_of(&request)) {
        (_, Err(refusal)) => refusal,
        (Some(body), Ok(query)) => {
            let ops = OpsRequest {
                method: request.request_context.http.method.to_string(),
                path: percent_decode(request.raw_path.as_deref().unwrap_or_default(), false),
                query,
                principal: principal_from_apigw(&request),
                if_match: request
                    .headers
                    .get("if-match")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                body,
            };
            handle_ops(service, ops).await
        }
        (None, _) => HttpResponse::error(400, "invalid_request", "the body is not valid base64"),
    };
    apigw_response(response)
}

/// The webhook function: API Gateway HTTP API (payload 2.0) -> `WebhookService` -> JSON.
pub async fn handle_apigw_webhook(
    service: &WebhookService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let route = route_of(&request);
    isolated(&route, Box::pin(webhook_route(service, request)))
        .await
        .unwrap_or_else(|_| apigw_response(internal_error()))
}

async fn webhook_route(
    service: &WebhookService,
    request: ApiGatewayV2httpRequest,
) -> ApiGatewayV2httpResponse {
    let response = match webhook_request_from_apigw(request) {
        Ok(request) => service.handle(request).await,
        Err(response) => response,
    };
    apigw_response(response)
}

fn webhook_request_from_apigw(
    request: ApiGatewayV2httpRequest,
) -> Result<WebhookRequest, HttpResponse> {
    if request.request_context.http.method != aws_lambda_events::http::Method::POST {
        return Err(HttpResponse::error(
            405,
            "method_not_allowed",
            "webhooks accept POST only",
        ));
    }
    let connector = request
        .path_parameters
        .get("connector")
        .cloned()
        .or_else(|| {
            request
                .raw_path
                .as_deref()
                .and_then(|p| p.strip_prefix("/v1/webhooks/"))
                .map(|c| c.trim_end_matches('/'))
                .filter(|c| !c.is_empty() && !c.contains('/'))
                .map(str::to_owned)
        })
        .ok_or_else(|| HttpResponse::error(404, "not_found", "no such route"))?;

    let mut headers: HashMap<String, String> = HashMap::new();
    for (name, value) in &request.headers {
        let Ok(value) = value.to_str() else { continue };
        let name = name.as_str().to_ascii_lowercase();
        // Signature lists are space-separated; other repeated headers join with commas.
        let separator = if name == "webhook-signature" {
            " "
        } else {
            ", "
        };
        headers
            .entry(name)
            .and_modify(|existing| {
                existing.push_str(separator);
                existing.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }

    let body = match request.body {
        None => Vec::new(),
        Some(text) if request.is_base64_encoded => base64_decode(&text).ok_or_else(|| {
            HttpResponse::error(400, "invalid_payload", "the body could not be decoded")
        })?,
        Some(text) => text.into_bytes(),
    };
    Ok(WebhookRequest {
        connector,
        headers,
        body,
    })
}

/// An API Gateway response with the body, content type and headers of `response`. Never cacheable
/// (`Cache-Control: no-store`): every answer carries evidence, provenance, presigned links or
/// a tenant's state, none of which a shared cache or a browser may keep.
fn apigw_response(response: HttpResponse) -> ApiGatewayV2httpResponse {
    use aws_lambda_events::http::{header, HeaderValue};
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(response.status);
    out.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(response.content_type),
    );
    out.headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for (name, value) in response.headers {
        out.headers.insert(name, HeaderValue::from_static(value));
    }
    out.body = Some(aws_lambda_events::encodings::Body::Text(response.body));
    out
}

#[cfg(test)]
mod tests {
    use super::principal_from_apigw;
    use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;

    fn with_tenant_claim(tenant: &str) -> ApiGatewayV2httpRequest {
        serde_json::from_value(serde_json::json!({
            "version": "2.0",
            "rawPath": "/v1/quarantine",
            "requestContext": {
                "http": {"method": "GET", "path": "/v1/quarantine"},
                "authorizer": {"jwt": {"claims": {"tenant": tenant, "scope": "ops:write"}, "scopes": null}}
            }
        }))
        .expect("an API Gateway v2 request")
    }

    fn with_claims(claims: serde_json::Value) -> ApiGatewayV2httpRequest {
        serde_json::from_value(serde_json::json!({
            "version": "2.0",
            "rawPath": "/v1/quarantine",
            "requestContext": {
                "http": {"method": "GET", "path": "/v1/quarantine"},
                "authorizer": {"jwt": {"claims": claims, "scopes": null}}
            }
        }))
        .expect("an API Gateway v2 request")
    }

    /// The contract says scopes come in `scope` or `scp`; API Gateway hands an array claim
    /// over as `[a b]`, a string one as it is.
    #[test]
    fn scopes_are_read_from_scope_and_from_scp() {
        for (claims, expected) in [
            (
                serde_json::json!({"tenant": "demo", "scp": "ops:write"}),
                vec!["ops:write"],
            ),
            (
                serde_json::json!({"tenant": "demo", "scp": "[offers:read ops:write]"}),
                vec!["offers:read", "ops:write"],
            ),
            (
                serde_json::json!({"tenant": "demo", "scope": "offers:read", "scp": "[ops:write]"}),
                vec!["offers:read", "ops:write"],
            ),
            (
                serde_json::json!({"tenant": "demo", "scp": "[\"offers:read\",\"ops:write\"]"}),
                vec!["offers:read", "ops:write"],
            ),
        ] {
            let principal = principal_from_apigw(&with_claims(claims.clone())).unwrap();
            assert_eq!(principal.scopes, expected, "{claims}");
        }
    }

    #[test]
    fn a_jwt_naming_a_reserved_tenant_grants_nothing() {
        let demo = principal_from_apigw(&with_tenant_claim("demo")).expect("demo is a tenant");
        assert_eq!(demo.tenant.as_str(), "demo");
        // `_unknown` files the refusals of unreadable envelopes; no caller may read them.
        assert!(principal_from_apigw(&with_tenant_claim("_unknown")).is_none());
    }

    fn with_query(raw: Option<&str>, parameters: serde_json::Value) -> ApiGatewayV2httpRequest {
        let mut event = serde_json::json!({
            "version": "2.0",
            "rawPath": "/v1/offers",
            "queryStringParameters": parameters,
            "requestContext": {"http": {"method": "GET", "path": "/v1/offers"}}
        });
        if let Some(raw) = raw {
            event["rawQueryString"] = serde_json::json!(raw);
        }
        serde_json::from_value(event).expect("an API Gateway v2 request")
    }

    /// The query comes from `rawQueryString`, decoded once, not from API Gateway's decoded
    /// (and comma-joined) `queryStringParameters`.
    #[test]
    fn the_query_is_the_raw_query_string_decoded_once() {
        // As API Gateway sends `?item=LM358DR%2FNOPB%2C7%7Ereel%7Enew&quantity=2500`.
        let request = with_query(
            Some("item=LM358DR%2FNOPB%2C7%7Ereel%7Enew&quantity=2500"),
            serde_json::json!({"item": "LM358DR/NOPB,7~reel~new", "quantity": "2500"}),
        );
        let query = super::query_of(&request).unwrap();
        assert_eq!(query["item"], "LM358DR/NOPB,7~reel~new");
        assert_eq!(query["quantity"], "2500");
        // `%2525` is the text `%25`: decoded once, not again from the decoded parameters.
        let request = with_query(Some("item=A%2525"), serde_json::json!({"item": "A%25"}));
        assert_eq!(super::query_of(&request).unwrap()["item"], "A%25");
        // A parameter given twice is refused.
        let request = with_query(Some("limit=1&limit=2"), serde_json::json!({"limit": "1,2"}));
        assert_eq!(super::query_of(&request).unwrap_err().status, 400);
        // An event without `rawQueryString` (API Gateway always sends one): the parameters.
        let request = with_query(None, serde_json::json!({"item": "AX-1", "limit": "5"}));
        let query = super::query_of(&request).unwrap();
        assert_eq!(
            (query["item"].as_str(), query["limit"].as_str()),
            ("AX-1", "5")
        );
        assert!(
            super::query_of(&with_query(Some(""), serde_json::Value::Null))
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn the_apigw_adapter_decodes_the_request() {
        use crate::domain::hashing::base64_encode;
        use crate::intake::webhook::tests::{cloud_event, harness, sent, NOW, SECRET};
        use crate::intake::webhook::{sign, SigningSecret};
        use serde_json::json;
        let h = harness(&[SECRET]);
        let body = cloud_event("evt-9");
        let signature = sign(&SigningSecret::parse(SECRET).unwrap(), "msg_9", NOW, &body);
        let event = json!({
            "version": "2.0",
            "routeKey": "POST /v1/webhooks/{connector}",
            "rawPath": "/v1/webhooks/acme-events",
            "headers": {
                "Webhook-Id": "msg_9",
                "webhook-timestamp": NOW.to_string(),
                "webhook-signature": signature,
                "content-type": "application/cloudevents+json"
            },
            "requestContext": {"http": {"method": "POST", "path": "/v1/webhooks/acme-events"}},
            "body": base64_encode(&body),
            "isBase64Encoded": true
        });
        let request: ApiGatewayV2httpRequest = serde_json::from_value(event).unwrap();
        let response = super::handle_apigw_webhook(&h.service, request).await;
        assert_eq!(response.status_code, 202);
        assert_eq!(
            response.headers.get("content-type").unwrap(),
            "application/json"
        );
        assert_eq!(sent(&h).len(), 1);
        assert_eq!(sent(&h)[0].delivery.id.as_str(), "urn:acme:events/evt-9");
    }
}
