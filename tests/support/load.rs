//! Load from outside: signed webhook deliveries as a supplier sends them, and the current offer
//! as a buying agent reads it (the soak and the throughput bench).

use feedsafe::domain::ids::TenantId;
use feedsafe::domain::timestamp::Timestamp;
use feedsafe::intake::webhook::{sign, SigningSecret};
use feedsafe::protocols::query::{Principal, QueryService};

/// The sample secret of the local `acme-events` connector (not a production secret).
pub const SAMPLE_WEBHOOK_SECRET: &str =
    "whsec_bG9jYWwtc2FtcGxlLXNlY3JldC1ub3QtZm9yLXByb2R1Y3Rpb24=";

/// POSTs `body` to `url` signed with `secret` (Standard Webhooks headers); the status, or 599
/// when no answer came.
pub async fn post_signed_webhook(url: &str, secret: &str, webhook_id: &str, body: Vec<u8>) -> u16 {
    let now = Timestamp::now().unix_seconds();
    let secret = SigningSecret::parse(secret).expect("a valid signing secret");
    let signature = sign(&secret, webhook_id, now, &body);
    let url = url.to_owned();
    let webhook_id = webhook_id.to_owned();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        agent
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", &webhook_id)
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", &signature)
            .send(&body[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(599)
    })
    .await
    .expect("the sender's thread")
}

/// The current offer of `sku` from `connector` for tenant `demo`, read through the query
/// service (the readers' route): (observed second, quantity).
pub async fn current_offer(query: &QueryService, connector: &str, sku: &str) -> Option<(i64, u64)> {
    let reader = Principal {
        tenant: TenantId::parse("demo").expect("a valid tenant"),
        scopes: vec!["offers:read".into()],
        subject: None,
    };
    let offers = query
        .offers(&reader, sku, None, Timestamp::now())
        .await
        .ok()?;
    offers.offers.iter().find_map(|o| {
        let o = &o.observation;
        let whole = o.quantity.whole().expect("the load sends whole quantities");
        (o.connector.as_str() == connector).then(|| (o.observed_at.unix_seconds(), whole))
    })
}

/// Acknowledgements as the senders report them, for a sampler that polls readability while the
/// load runs; once the last sender is gone, what is still pending gets `grace` to be readable.
pub struct AckFeed<T> {
    rx: tokio::sync::mpsc::UnboundedReceiver<T>,
    open: bool,
    deadline: std::time::Instant,
    grace: std::time::Duration,
}

impl<T> AckFeed<T> {
    pub fn new(rx: tokio::sync::mpsc::UnboundedReceiver<T>, grace: std::time::Duration) -> Self {
        Self {
            rx,
            open: true,
            // Until the senders are gone, no deadline applies (an hour bounds a stuck run).
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(3600),
            grace,
        }
    }

    /// Whether to keep sampling: senders remain, or samples are pending and time remains.
    pub fn keep_going(&self, pending: bool) -> bool {
        (self.open || pending) && std::time::Instant::now() < self.deadline
    }

    /// Everything reported since the last call.
    pub fn arrived(&mut self) -> Vec<T> {
        use tokio::sync::mpsc::error::TryRecvError;
        let mut arrived = Vec::new();
        loop {
            match self.rx.try_recv() {
                Ok(ack) => arrived.push(ack),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if self.open {
                        self.deadline = std::time::Instant::now() + self.grace;
                    }
                    self.open = false;
                    break;
                }
            }
        }
        arrived
    }
}
