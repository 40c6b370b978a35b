//! Interceptors on the AWS clients: operations counted, transactions logged.

use crate::TestEnv;
use aws_sdk_dynamodb::types::AttributeValue;
use feedsafe::aws::dynamo::DynamoEvidenceStore;
use feedsafe::aws::s3::S3ArtifactStore;
use feedsafe::aws::AwsClients;
use feedsafe::protocols::ingest::IngestService;
use feedsafe::protocols::ports::{NoFaults, SystemClock};
use std::sync::Arc;

/// Counts AWS operations by `Service.Operation` (each SDK operation once, its retries not counted).
#[derive(Debug, Default, Clone)]
pub struct RequestCounter(Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>);

impl RequestCounter {
    pub fn take(&self) -> std::collections::BTreeMap<String, usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_serialization(
        &self,
        _context: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(meta) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>() {
            let name = format!("{}.{}", meta.service(), meta.name());
            *self.0.lock().unwrap().entry(name).or_default() += 1;
        }
        Ok(())
    }
}

impl TestEnv {
    /// An ingest service whose DynamoDB and S3 clients report every operation to `counter`.
    pub fn counted_service(&self, counter: &RequestCounter) -> IngestService {
        self.service_through(counter.clone())
    }

    /// An ingest service whose DynamoDB and S3 clients go through `interceptor`.
    pub fn service_through(
        &self,
        interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
    ) -> IngestService {
        let AwsClients { dynamodb, s3, .. } = intercepted(&self.clients, interceptor);
        let store = Arc::new(DynamoEvidenceStore::new(dynamodb, &self.table));
        IngestService::new(
            store.clone(),
            Arc::new(S3ArtifactStore::new(s3, &self.bucket)),
            store,
            Arc::new(SystemClock),
            Arc::new(NoFaults),
        )
    }

    /// The projector, its DynamoDB client (evidence reads and projection writes) through
    /// `interceptor`.
    pub fn projector_through(
        &self,
        interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
    ) -> feedsafe::protocols::projection::Projector {
        let AwsClients { dynamodb, .. } = intercepted(&self.clients, interceptor);
        let store = Arc::new(DynamoEvidenceStore::new(dynamodb.clone(), &self.table));
        let projection = Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            dynamodb,
            self.projection_table(),
        ));
        feedsafe::protocols::projection::Projector::new(store.clone(), projection, store)
    }

    /// The read path (`QueryService`) with its requests through `interceptor`.
    pub fn query_through(
        &self,
        interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
    ) -> feedsafe::protocols::query::QueryService {
        let AwsClients { dynamodb, .. } = intercepted(&self.clients, interceptor);
        let store = Arc::new(DynamoEvidenceStore::new(dynamodb.clone(), &self.table));
        let projection = Arc::new(feedsafe::aws::projection_table::DynamoProjectionStore::new(
            dynamodb,
            self.projection_table(),
        ));
        feedsafe::protocols::query::QueryService::new(store, projection)
    }
}

/// `clients` with `interceptor` on the DynamoDB and S3 clients (SQS unchanged).
pub fn intercepted(
    clients: &AwsClients,
    interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
) -> AwsClients {
    AwsClients {
        dynamodb: aws_sdk_dynamodb::Client::from_conf(
            clients
                .dynamodb
                .config()
                .to_builder()
                .interceptor(interceptor.clone())
                .build(),
        ),
        s3: aws_sdk_s3::Client::from_conf(
            clients
                .s3
                .config()
                .to_builder()
                .interceptor(interceptor)
                .build(),
        ),
        sqs: clients.sqs.clone(),
        local_access_key: clients.local_access_key.clone(),
    }
}

/// What every `TransactWriteItems` call through a client carried and how it ended: the item
/// keys of each call, the number of attempts sent (SDK retries included) and the error codes
/// (cancellation reasons included). For structural proofs such as "no key is shared by the
/// transactions of two pages".
#[derive(Debug, Default, Clone)]
pub struct TransactionLog(Arc<std::sync::Mutex<TransactionLogInner>>);

#[derive(Debug, Default)]
pub struct TransactionLogInner {
    /// One entry per call: the `pk|sk` of every item it names.
    pub transactions: Vec<Vec<String>>,
    /// Attempts sent on the wire (a call retried by the SDK counts more than once).
    pub attempts: usize,
    /// Error codes of failed attempts, with `TransactionCanceled:{reason}` per cancellation reason.
    pub errors: Vec<String>,
}

impl TransactionLog {
    pub fn snapshot(&self) -> (Vec<Vec<String>>, usize, Vec<String>) {
        let inner = self.0.lock().unwrap();
        (
            inner.transactions.clone(),
            inner.attempts,
            inner.errors.clone(),
        )
    }

    /// A DynamoDB client like `client` that reports to this log.
    pub fn client(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            client
                .config()
                .to_builder()
                .interceptor(self.clone())
                .build(),
        )
    }
}

fn key_text(key: &std::collections::HashMap<String, AttributeValue>) -> String {
    let part = |name: &str| {
        key.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    format!("{}|{}", part("pk"), part("sk"))
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for TransactionLog {
    fn name(&self) -> &'static str {
        "TransactionLog"
    }

    fn read_before_serialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
        if let Some(input) = context.input().downcast_ref::<TransactWriteItemsInput>() {
            let keys = input
                .transact_items()
                .iter()
                .map(|action| {
                    if let Some(put) = action.put() {
                        key_text(put.item())
                    } else if let Some(update) = action.update() {
                        key_text(update.key())
                    } else if let Some(check) = action.condition_check() {
                        key_text(check.key())
                    } else if let Some(delete) = action.delete() {
                        key_text(delete.key())
                    } else {
                        String::new()
                    }
                })
                .collect();
            self.0.lock().unwrap().transactions.push(keys);
        }
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(meta) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>() {
            if meta.name() == "TransactWriteItems" {
                self.0.lock().unwrap().attempts += 1;
            }
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::error::ProvideErrorMetadata;
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
        if let Err(error) = context.output_or_error() {
            let Some(error) = error
                .as_operation_error()
                .and_then(|e| e.downcast_ref::<TransactWriteItemsError>())
            else {
                return Ok(());
            };
            let mut inner = self.0.lock().unwrap();
            inner
                .errors
                .push(error.code().unwrap_or("unknown").to_owned());
            if let TransactWriteItemsError::TransactionCanceledException(cancelled) = error {
                for reason in cancelled.cancellation_reasons() {
                    if let Some(code) = reason.code() {
                        if code != "None" {
                            inner.errors.push(format!("TransactionCanceled:{code}"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
