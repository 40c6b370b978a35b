//! S3's answer to concurrent conditional puts, which moto does not give.
//!
//! moto checks `If-None-Match: *` without holding the key: sixteen workers putting the same
//! object at once are all told they created it. S3 lets one through; while its upload is in
//! flight the others get `409 ConditionalRequestConflict` ("retry the upload"), and once it is
//! stored, `412 Precondition Failed`. `ConditionalPutGate` sits in front of moto's S3 client
//! and keeps the keys that have a conditional put in flight: a second one for the same key is
//! answered 409 without reaching moto. Sequential puts still reach moto, whose 412 is right.
//! Local stack and tests only; never in a Lambda build.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use feedsafe::aws::AwsClients;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The error body S3 sends with the 409.
const CONFLICT_BODY: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting operation occurred. If using PutObject you can retry the request.</Message></Error>";

/// `clients` whose S3 client answers a conditional put that races another one for the same key
/// with 409, as S3 does. DynamoDB and SQS are left as they are.
pub fn with_s3_conditional_puts(clients: AwsClients) -> AwsClients {
    gated(clients, false)
}

/// A fault seam for tests: every conditional put is answered 409 without reaching moto, as if
/// another writer's upload of the key were in flight and then never landed.
pub fn with_s3_put_always_racing(clients: AwsClients) -> AwsClients {
    gated(clients, true)
}

fn gated(clients: AwsClients, always_racing: bool) -> AwsClients {
    let s3 = clients.s3.config();
    let gate = ConditionalPutGate {
        inner: s3.http_client().unwrap_or_else(feedsafe::aws::http_client),
        in_flight: Arc::default(),
        always_racing,
    };
    AwsClients {
        s3: aws_sdk_s3::Client::from_conf(
            s3.to_builder()
                .http_client(SharedHttpClient::new(gate))
                .build(),
        ),
        ..clients
    }
}

/// The answer S3 gives a conditional put that conflicts with one in flight.
fn conflict_response() -> HttpResponse {
    let mut response = HttpResponse::new(
        StatusCode::try_from(409).expect("409 is a status code"),
        SdkBody::from(CONFLICT_BODY),
    );
    response
        .headers_mut()
        .insert("content-type", "application/xml");
    response
}

/// Whether `request` is a conditional create (`PUT` with `If-None-Match: *`), and its path.
fn conditional_put_path(request: &HttpRequest) -> Option<String> {
    let conditional =
        request.method() == "PUT" && request.headers().get("if-none-match") == Some("*");
    conditional.then(|| {
        let uri = request.uri();
        uri.split('?').next().unwrap_or(uri).to_owned()
    })
}

#[derive(Debug, Clone)]
struct ConditionalPutGate {
    inner: SharedHttpClient,
    in_flight: Arc<Mutex<HashSet<String>>>,
    always_racing: bool,
}

impl HttpClient for ConditionalPutGate {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(GateConnector {
            inner: self.inner.http_connector(settings, components),
            in_flight: self.in_flight.clone(),
            always_racing: self.always_racing,
        })
    }
}

#[derive(Debug)]
struct GateConnector {
    inner: SharedHttpConnector,
    in_flight: Arc<Mutex<HashSet<String>>>,
    always_racing: bool,
}

/// Takes the key out of the in-flight set when the put is done, however it ends (a dropped
/// future included).
struct Release {
    in_flight: Arc<Mutex<HashSet<String>>>,
    path: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.in_flight.lock() {
            keys.remove(&self.path);
        }
    }
}

impl HttpConnector for GateConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let Some(path) = conditional_put_path(&request) else {
            return self.inner.call(request);
        };
        if self.always_racing {
            return HttpConnectorFuture::ready(Ok(conflict_response()));
        }
        let first = self
            .in_flight
            .lock()
            .map(|mut keys| keys.insert(path.clone()))
            .unwrap_or(true);
        if !first {
            return HttpConnectorFuture::ready(Ok(conflict_response()));
        }
        let release = Release {
            in_flight: self.in_flight.clone(),
            path,
        };
        let sent = self.inner.call(request);
        HttpConnectorFuture::new(async move {
            let answer = sent.await;
            drop(release);
            answer
        })
    }
}
