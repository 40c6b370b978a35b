//! Fault injection for the local stack and tests (this crate only, never in a Lambda build):
//! an HTTP connector around the DynamoDB and S3 clients' own that makes a seeded fraction of
//! calls time out, as the network does in AWS. Half time out before the request is sent
//! (nothing happened); half time out after the engine answered (it happened, the caller does
//! not know). Both are connector timeouts, so the SDK's own retry policy sees them exactly as
//! it sees a real one; what it cannot absorb reaches our code as a failed call.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use feedsafe::aws::AwsClients;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Which fault one call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// The call times out before the request leaves: the engine never sees it.
    BeforeSend,
    /// The engine ran the request; its answer is lost to a timeout.
    AfterResponse,
}

/// Counts and the seeded draw, shared by every client it wraps.
#[derive(Clone)]
pub struct FaultInjector {
    seed: u64,
    /// Parts per million of calls that fail.
    rate_ppm: u64,
    calls: Arc<AtomicU64>,
    /// Faults are injected only once armed, so that setup runs clean.
    armed: Arc<AtomicBool>,
    before_send: Arc<AtomicU64>,
    after_response: Arc<AtomicU64>,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("rate_ppm", &self.rate_ppm)
            .field("injected", &self.injected())
            .finish_non_exhaustive()
    }
}

impl FaultInjector {
    /// Fails `rate` (0 to 1) of the calls once armed, chosen by `seed`.
    pub fn new(seed: u64, rate: f64) -> Self {
        Self {
            seed,
            rate_ppm: (rate.clamp(0.0, 1.0) * 1_000_000.0) as u64,
            calls: Default::default(),
            armed: Default::default(),
            before_send: Default::default(),
            after_response: Default::default(),
        }
    }

    /// From now on, calls fail at the configured rate.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// From now on, no call fails.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// Faults injected so far: (before the request was sent, after the engine answered).
    pub fn injected(&self) -> (u64, u64) {
        (
            self.before_send.load(Ordering::Relaxed),
            self.after_response.load(Ordering::Relaxed),
        )
    }

    /// Calls seen while armed.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The fault the next call gets (a pure function of the seed and the call's number).
    pub fn draw(&self) -> Fault {
        if !self.armed.load(Ordering::Relaxed) {
            return Fault::None;
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut x = (self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_add(n);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        if x % 1_000_000 >= self.rate_ppm {
            Fault::None
        } else if (x >> 40).is_multiple_of(2) {
            self.before_send.fetch_add(1, Ordering::Relaxed);
            Fault::BeforeSend
        } else {
            self.after_response.fetch_add(1, Ordering::Relaxed);
            Fault::AfterResponse
        }
    }

    /// `clients` whose DynamoDB and S3 calls go through this injector. SQS, the redelivery
    /// mechanism the faults are meant to exercise, is left alone.
    pub fn wrap(&self, clients: &AwsClients) -> AwsClients {
        let dynamodb = clients.dynamodb.config();
        let s3 = clients.s3.config();
        AwsClients {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                dynamodb
                    .to_builder()
                    .http_client(self.client_around(dynamodb.http_client()))
                    .build(),
            ),
            s3: aws_sdk_s3::Client::from_conf(
                s3.to_builder()
                    .http_client(self.client_around(s3.http_client()))
                    .build(),
            ),
            sqs: clients.sqs.clone(),
            local_access_key: clients.local_access_key.clone(),
        }
    }

    fn client_around(&self, inner: Option<SharedHttpClient>) -> SharedHttpClient {
        SharedHttpClient::new(FaultyClient {
            inner: inner.unwrap_or_else(feedsafe::aws::http_client),
            faults: self.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyClient {
    inner: SharedHttpClient,
    faults: FaultInjector,
}

impl HttpClient for FaultyClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    faults: FaultInjector,
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        match self.faults.draw() {
            Fault::None => self.inner.call(request),
            Fault::BeforeSend => HttpConnectorFuture::ready(Err(ConnectorError::timeout(
                "injected fault: timed out before the request was sent".into(),
            )
            .never_connected())),
            Fault::AfterResponse => {
                let sent = self.inner.call(request);
                HttpConnectorFuture::new(async move {
                    // The engine runs the request; its answer never arrives.
                    let _ = sent.await;
                    Err(ConnectorError::timeout(
                        "injected fault: the request ran but its response timed out".into(),
                    ))
                })
            }
        }
    }
}
