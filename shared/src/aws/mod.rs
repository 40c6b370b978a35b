//! AWS adapters: DynamoDB, S3, SQS and Secrets Manager behind the ports of `crate::protocols`
//! and `crate::intake`, and the evidence table's stream records decoded. The only place that
//! knows about `AttributeValue`, `SdkError` and HTTP status.

pub mod claims;
mod connector_versions;
pub mod dynamo;
pub mod evidence_reads;
mod history_cursor;
pub mod item_keys;
pub mod item_size;
pub mod operator_records;
pub mod projection_table;
pub mod pull_credentials;
pub mod pull_schedule;
mod quarantine_review;
mod replays;
pub mod s3;
pub mod secret_owners;
pub mod secrets;
pub mod source_health;
pub mod sqs;
pub mod stream_records;
pub mod verifications;

use aws_config::BehaviorVersion;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

/// The three clients every function uses, built once per process.
#[derive(Clone, Debug)]
pub struct AwsClients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// Locally: the access key id the clients use, which names the DynamoDB Local database.
    pub local_access_key: Option<String>,
}

/// The HTTP client every SDK client here uses (rustls with ring), for clients built elsewhere.
pub fn http_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

impl AwsClients {
    /// Clients from the standard AWS environment (Lambda role, `AWS_ENDPOINT_URL_*` overrides).
    /// `s3_path_style` is for S3-compatible local engines.
    pub async fn from_env(s3_path_style: bool) -> Self {
        let shared = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client())
            .load()
            .await;
        let s3_config = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(s3_path_style)
            .build();
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(&shared),
            s3: aws_sdk_s3::Client::from_conf(s3_config),
            sqs: aws_sdk_sqs::Client::new(&shared),
            local_access_key: None,
        }
    }

    /// Clients for the local engines: DynamoDB Local at `dynamodb_endpoint`, moto (S3 and SQS)
    /// at `moto_endpoint`. The static credentials are local-only placeholders: DynamoDB Local
    /// keeps tables per access key and region, so every local tool uses these same values.
    pub fn local(dynamodb_endpoint: &str, moto_endpoint: &str) -> Self {
        Self::local_database(dynamodb_endpoint, moto_endpoint, LOCAL_ACCESS_KEY_ID)
    }

    /// Like `local`, in DynamoDB Local's database of access key `database` (letters and digits):
    /// heavy tests and benchmarks get their own, because DynamoDB Local slows down as one
    /// database fills.
    pub fn local_database(dynamodb_endpoint: &str, moto_endpoint: &str, database: &str) -> Self {
        let credentials =
            aws_credential_types::Credentials::from_keys(database, LOCAL_SECRET_ACCESS_KEY, None);
        let region = aws_config::Region::new(LOCAL_REGION);
        // DynamoDB Local answers a write that waited too long for its database lock with a 500
        // ("this request will succeed in actual DynamoDB"): retry those more patiently.
        let retry = aws_config::retry::RetryConfig::standard()
            .with_max_attempts(8)
            .with_initial_backoff(std::time::Duration::from_millis(50));
        let dynamodb = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .retry_config(retry)
            .http_client(http_client())
            .credentials_provider(credentials.clone())
            .region(region.clone())
            .endpoint_url(dynamodb_endpoint)
            .build();
        let s3 = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http_client())
            .credentials_provider(credentials.clone())
            .region(region.clone())
            .endpoint_url(moto_endpoint)
            .force_path_style(true)
            .build();
        let sqs = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http_client())
            .credentials_provider(credentials)
            .region(region)
            .endpoint_url(moto_endpoint)
            .build();
        Self {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb),
            s3: aws_sdk_s3::Client::from_conf(s3),
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
            local_access_key: Some(database.to_owned()),
        }
    }
}

/// Local-only placeholder credentials (letters and digits only, as DynamoDB Local requires).
pub const LOCAL_ACCESS_KEY_ID: &str = "localtest";
pub const LOCAL_SECRET_ACCESS_KEY: &str = "localtest";
pub const LOCAL_REGION: &str = "us-east-1";
