//! The route table: every ops route, authenticated and scoped before anything else.

use super::{OpsError, OpsRequest, OpsService, OPS_SCOPE};
use crate::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, SourceAccount, SourceDeliveryId, TenantId,
};
use crate::protocols::http::HttpResponse;

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
    let Some(principal) = request.principal.as_ref() else {
        return HttpResponse::error(
            401,
            "unauthorized",
            "an operator's bearer token is required",
        );
    };
    if !principal.scopes.iter().any(|s| s == OPS_SCOPE) {
        return HttpResponse::error(403, "forbidden", "the ops:write scope is required");
    }
    let path = request.path.trim_matches('/');
    let method = request.method.as_str();
    let get_only = |method: &str| method == "GET";
    let result = if let Some(rest) = path.strip_prefix("v1/deliveries/") {
        if !get_only(method) {
            return method_not_allowed("GET");
        }
        match rest.strip_suffix("/artifact") {
            // A delivery id may itself end in `/artifact`: fall back to the delivery route.
            Some(key) => match service.delivery_artifact(principal, key).await {
                Err(OpsError::NotFound(_)) => service.delivery(principal, rest).await,
                other => other,
            },
            None => service.delivery(principal, rest).await,
        }
    } else if let Some(rest) = path.strip_prefix("v1/artifacts/") {
        if !get_only(method) {
            return method_not_allowed("GET");
        }
        service.artifact(principal, rest).await
    } else {
        match (method, segments(path).as_slice()) {
            ("GET", ["v1", "runs", run]) => service.run(principal, run).await,
            ("GET", ["v1", "quarantine"]) => {
                service
                    .quarantine_list(principal, request.query.get("status").map(String::as_str))
                    .await
            }
            ("GET", ["v1", "quarantine", id]) => service.quarantine_show(principal, id).await,
            ("GET", ["v1", "quarantine", id, "artifact"]) => {
                service.quarantine_artifact(principal, id).await
            }
            ("POST", ["v1", "quarantine", id, "resolve"]) => {
                service.resolve(principal, id, &request.body).await
            }
            ("POST", ["v1", "identity-corrections"]) => {
                service.identity_correction(principal, &request.body).await
            }
            ("GET", ["v1", "identity-corrections", id]) => {
                service.correction_show(principal, id).await
            }
            ("POST", ["v1", "identity-corrections", id, "withdraw"]) => {
                service
                    .correction_withdraw(principal, id, &request.body)
                    .await
            }
            ("POST", ["v1", "source-quarantines"]) => {
                service.source_quarantine(principal, &request.body).await
            }
            ("POST", ["v1", "source-quarantines", connector, "lift"]) => {
                service
                    .source_quarantine_lift(principal, connector, &request.body)
                    .await
            }
            ("GET", ["v1", "source-quarantines", connector]) => {
                service
                    .source_quarantine_show(
                        principal,
                        connector,
                        request.query.get("source_account").map(String::as_str),
                    )
                    .await
            }
            ("GET", ["v1", "connectors"]) => service.connectors(principal).await,
            ("GET", ["v1", "items", item, "timeline"]) => service.timeline(principal, item).await,
            ("POST", ["v1", "connectors", connector, "runs"]) => {
                service.start_run(principal, connector).await
            }
            ("GET", ["v1", "observations", id, "artifact"]) => {
                service.observation_artifact(principal, id).await
            }
            (
                _,
                ["v1", "runs", _]
                | ["v1", "quarantine"]
                | ["v1", "quarantine", _]
                | ["v1", "quarantine", _, "artifact"]
                | ["v1", "observations", _, "artifact"]
                | ["v1", "connectors"]
                | ["v1", "items", _, "timeline"],
            ) => return method_not_allowed("GET"),
            (_, ["v1", "identity-corrections", _] | ["v1", "source-quarantines", _]) => {
                return method_not_allowed("GET")
            }
            (
                _,
                ["v1", "quarantine", _, "resolve"]
                | ["v1", "identity-corrections"]
                | ["v1", "identity-corrections", _, "withdraw"]
                | ["v1", "source-quarantines"]
                | ["v1", "source-quarantines", _, "lift"]
                | ["v1", "connectors", _, "runs"],
            ) => return method_not_allowed("POST"),
            _ => Err(OpsError::NotFound("no such route".into())),
        }
    };
    match result {
        Ok((status, body)) => HttpResponse::json(status, &body),
        Err(e) => e.into_response(),
    }
}

fn method_not_allowed(allowed: &str) -> HttpResponse {
    HttpResponse::error(
        405,
        "method_not_allowed",
        &format!("this route accepts {allowed} only"),
    )
}
