//! Measuring large deliveries and long runs: the stream drained in Lambda-sized events, every
//! DynamoDB request of the projector counted (tests/acceptance/projection_scale.rs and the
//! sizing bench, tests/benches/sizing.rs).

use crate::{offer, RequestCounter, TestEnv};
use feedsafe::protocols::projection::Projector;
use std::sync::Arc;
use std::time::Instant;

/// What draining the stream in Lambda-sized batches cost.
pub struct Drained {
    pub batches: usize,
    /// Per batch: (records, DynamoDB requests, milliseconds).
    pub per_batch: Vec<(usize, usize, u128)>,
    /// Requests by operation, over all batches.
    pub by_operation: std::collections::BTreeMap<String, usize>,
    pub total_ms: u128,
}

impl Drained {
    pub fn slowest(&self) -> (usize, usize, u128) {
        self.per_batch
            .iter()
            .copied()
            .max_by_key(|(_, _, ms)| *ms)
            .unwrap_or_default()
    }
    pub fn most_requests(&self) -> usize {
        self.per_batch.iter().map(|(_, r, _)| *r).max().unwrap_or(0)
    }
    pub fn requests(&self) -> usize {
        self.per_batch.iter().map(|(_, r, _)| *r).sum()
    }
}

/// Reads the evidence stream until quiet, handing each batch of up to `batch_size` records to
/// the projector Lambda's handler, and measures each invocation.
pub async fn drain_as_lambda(
    stream: &mut local_stack::events::StreamReader,
    projector: &Projector,
    counter: &RequestCounter,
    batch_size: usize,
) -> Drained {
    let started = Instant::now();
    let mut drained = Drained {
        batches: 0,
        per_batch: Vec::new(),
        by_operation: Default::default(),
        total_ms: 0,
    };
    let mut quiet = 0;
    while quiet < 3 {
        let records = stream.poll().await.expect("poll stream");
        if records.is_empty() {
            quiet += 1;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        quiet = 0;
        for batch in records.chunks(batch_size) {
            counter.take();
            let at = Instant::now();
            let response = feedsafe::lambda::stream::handle_stream_batch(
                projector,
                local_stack::events::stream_event(batch),
            )
            .await;
            assert!(
                response.batch_item_failures.is_empty(),
                "every batch is handled"
            );
            let counted = counter.take();
            let requests: usize = counted.values().sum();
            for (operation, n) in counted {
                *drained.by_operation.entry(operation).or_default() += n;
            }
            drained.batches += 1;
            drained
                .per_batch
                .push((batch.len(), requests, at.elapsed().as_millis()));
        }
    }
    drained.total_ms = started.elapsed().as_millis();
    drained
}

/// A projector whose DynamoDB client counts every request.
pub fn counted_projector(env: &TestEnv, counter: &RequestCounter) -> Projector {
    let dynamodb = aws_sdk_dynamodb::Client::from_conf(
        env.clients
            .dynamodb
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build(),
    );
    let evidence = Arc::new(feedsafe::aws::dynamo::DynamoEvidenceStore::new(
        dynamodb.clone(),
        &env.table,
    ));
    let projection = Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
        dynamodb,
        env.projection_table(),
    ));
    Projector::new(evidence.clone(), projection, evidence)
}

pub fn rows_page(prefix: &str, from: usize, count: usize) -> Vec<serde_json::Value> {
    (from..from + count)
        .map(|i| {
            offer(
                &format!("{prefix}-{i:05}"),
                1,
                "1.00",
                "2026-11-29T08:00:00Z",
            )
        })
        .collect()
}
