//! The route table: every ops route, authenticated and scoped before anything else.

use super::{OpsError, OpsRequest, OpsResult, OpsService, OPS_SCOPE};
use crate::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::protocols::http::HttpResponse;
use crate::protocols::query::Principal;

/// `{tenant}/{connector}/{account}/{source delivery id}` (the id may itself contain `/`).
pub(super) fn parse_delivery_key(text: &str) -> Option<DeliveryKey> {
    let mut parts = text.splitn(4, '/');
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let connector = ConnectorId::parse(parts.next()?).ok()?;
    let account = SourceAccount::parse(parts.next()?).ok()?;
    let id = SourceDeliveryId::parse(parts.next()?).ok()?;
    Some(DeliveryKey::new(
        tenant,
        connector,
        account,
        id,
        IdentityStrength::Source,
    ))
}

fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// Every ops route. Authentication and the `ops:write` scope are checked before anything else.
pub async fn handle_ops(service: &OpsService, request: OpsRequest) -> HttpResponse {
    // The console's page and assets hold no data and no secret; every call they make does.
    if let Some(page) = super::console::serve(&request.method, &request.path) {
        return page;
    }
    // The verifiers' routes have their own scope, and an operator's does not reach them.
    if let Some(answer) = super::verifications::route(service, &request).await {
        return answer;
    }
    let principal = match authorized(&request, OPS_SCOPE, "an operator's") {
        Ok(principal) => principal,
        Err(refusal) => return refusal,
    };
    match route(service, principal, &request).await {
        Routed::Done(Ok((status, body))) => HttpResponse::json(status, &body),
        Routed::Done(Err(e)) => e.into_response(),
        Routed::MethodNotAllowed(allowed) => method_not_allowed(allowed),
    }
}

/// The caller's principal if it may call a route that needs `scope` (`ops:write` for the ops
/// routes): authenticated (`whose` bearer token), with the scope.
pub(super) fn authorized<'r>(
    request: &'r OpsRequest,
    scope: &str,
    whose: &str,
) -> Result<&'r Principal, HttpResponse> {
    let Some(principal) = request.principal.as_ref() else {
        return Err(HttpResponse::error(
            401,
            "unauthorized",
            &format!("{whose} bearer token is required"),
        ));
    };
    if !principal.scopes.iter().any(|s| s == scope) {
        return Err(HttpResponse::error(
            403,
            "forbidden",
            &format!("the {scope} scope is required"),
        ));
    }
    Ok(principal)
}

/// What routing a request came to: a route's answer, or a known path asked with another method.
enum Routed {
    Done(OpsResult),
    MethodNotAllowed(&'static str),
}

/// Dispatches by path: the two routes whose last parameter may contain `/` first (a delivery
/// key, an artifact target), then the fixed-shape routes.
async fn route(service: &OpsService, principal: &Principal, request: &OpsRequest) -> Routed {
    let path = request.path.trim_matches('/');
    let method = request.method.as_str();
    if let Some(rest) = path.strip_prefix("v1/deliveries/") {
        if method != "GET" {
            return Routed::MethodNotAllowed("GET");
        }
        return Routed::Done(delivery_route(service, principal, rest).await);
    }
    if let Some(rest) = path.strip_prefix("v1/artifacts/") {
        if method != "GET" {
            return Routed::MethodNotAllowed("GET");
        }
        return Routed::Done(service.artifact(principal, rest).await);
    }
    match (method, segments(path).as_slice()) {
        ("GET", parts) => match get_route(service, principal, request, parts).await {
            Some(result) => Routed::Done(result),
            None => wrong_method(parts),
        },
        ("POST", parts) => match post_route(service, principal, request, parts).await {
            Some(result) => Routed::Done(result),
            None => wrong_method(parts),
        },
        ("PUT", ["v1", "connectors", id]) => Routed::Done(
            service
                .put_connector(principal, id, request.if_match.as_deref(), &request.body)
                .await,
        ),
        (_, parts) => wrong_method(parts),
    }
}

/// `GET /v1/deliveries/{key}` and `GET /v1/deliveries/{key}/artifact`.
async fn delivery_route(service: &OpsService, principal: &Principal, rest: &str) -> OpsResult {
    match rest.strip_suffix("/artifact") {
        // A delivery id may itself end in `/artifact`: fall back to the delivery route.
        Some(key) => match service.delivery_artifact(principal, key).await {
            Err(OpsError::NotFound(_)) => service.delivery(principal, rest).await,
            other => other,
        },
        None => service.delivery(principal, rest).await,
    }
}

/// The `GET` routes of fixed shape; `None` when the path is none of them.
async fn get_route(
    service: &OpsService,
    principal: &Principal,
    request: &OpsRequest,
    parts: &[&str],
) -> Option<OpsResult> {
    let query = |name: &str| request.query.get(name).map(String::as_str);
    Some(match parts {
        ["v1", "runs", run] => service.run(principal, run).await,
        ["v1", "quarantine"] => service.quarantine_list(principal, query("status")).await,
        ["v1", "quarantine", id] => service.quarantine_show(principal, id).await,
        ["v1", "quarantine", id, "artifact"] => service.quarantine_artifact(principal, id).await,
        ["v1", "identity-corrections", id] => service.correction_show(principal, id).await,
        ["v1", "source-quarantines", connector] => {
            service
                .source_quarantine_show(principal, connector, query("source_account"))
                .await
        }
        ["v1", "connectors"] => service.connectors(principal).await,
        ["v1", "connectors", id] => service.connector_definition(principal, id).await,
        ["v1", "items", item, "timeline"] => service.timeline(principal, item).await,
        // The same by query: an item whose part number holds `/`, `%`, `?` or `#` has no
        // path form through API Gateway, which decodes a path before routing it.
        ["v1", "timeline"] => match query("item").filter(|item| !item.is_empty()) {
            Some(item) => service.timeline(principal, item).await,
            None => Err(OpsError::Invalid(
                "item is required (the canonical item key or a part number, percent-encoded \
                 in the query string)"
                    .into(),
            )),
        },
        ["v1", "observations", id, "artifact"] => service.observation_artifact(principal, id).await,
        _ => return None,
    })
}

/// The `POST` routes; `None` when the path is none of them.
async fn post_route(
    service: &OpsService,
    principal: &Principal,
    request: &OpsRequest,
    parts: &[&str],
) -> Option<OpsResult> {
    let body = request.body.as_slice();
    Some(match parts {
        ["v1", "quarantine", id, "resolve"] => service.resolve(principal, id, body).await,
        ["v1", "identity-corrections"] => service.identity_correction(principal, body).await,
        ["v1", "identity-corrections", id, "withdraw"] => {
            service.correction_withdraw(principal, id, body).await
        }
        ["v1", "source-quarantines"] => service.source_quarantine(principal, body).await,
        ["v1", "source-quarantines", connector, "lift"] => {
            service
                .source_quarantine_lift(principal, connector, body)
                .await
        }
        ["v1", "connectors", connector, "runs"] => service.start_run(principal, connector).await,
        ["v1", "connector-previews"] => service.connector_preview(principal, body).await,
        ["v1", "connectors", id, "preview"] => service.stored_preview(principal, id, body).await,
        _ => return None,
    })
}

/// A known path asked with a method it does not accept (405), or an unknown path (404).
fn wrong_method(parts: &[&str]) -> Routed {
    match parts {
        ["v1", "runs", _]
        | ["v1", "quarantine"]
        | ["v1", "quarantine", _]
        | ["v1", "quarantine", _, "artifact"]
        | ["v1", "observations", _, "artifact"]
        | ["v1", "connectors"]
        | ["v1", "items", _, "timeline"]
        | ["v1", "timeline"]
        | ["v1", "identity-corrections", _]
        | ["v1", "source-quarantines", _] => Routed::MethodNotAllowed("GET"),
        ["v1", "quarantine", _, "resolve"]
        | ["v1", "identity-corrections"]
        | ["v1", "identity-corrections", _, "withdraw"]
        | ["v1", "source-quarantines"]
        | ["v1", "source-quarantines", _, "lift"]
        | ["v1", "connectors", _, "runs"]
        | ["v1", "connectors", _, "preview"]
        | ["v1", "connector-previews"] => Routed::MethodNotAllowed("POST"),
        ["v1", "connectors", _] => Routed::MethodNotAllowed("GET, PUT"),
        _ => Routed::Done(Err(OpsError::NotFound("no such route".into()))),
    }
}

pub(super) fn method_not_allowed(allowed: &str) -> HttpResponse {
    HttpResponse::error(
        405,
        "method_not_allowed",
        &format!("this route accepts {allowed} only"),
    )
}
