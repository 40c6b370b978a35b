//! Latencies (milliseconds) of one request as seen from a Lambda in the same region: typical
//! published p50 figures, not measurements (DynamoDB Local and moto are far slower).

pub const S3_PUT: f64 = 25.0;
pub const S3_GET: f64 = 15.0;
/// Transfer, per KiB of an S3 body (about 100 MB/s).
pub const S3_PER_KIB: f64 = 0.01;
pub const GET_ITEM: f64 = 4.0;
pub const WRITE_ITEM: f64 = 6.0;
pub const TRANSACTION: f64 = 10.0;
pub const TRANSACTION_PER_ACTION: f64 = 0.3;
pub const QUERY: f64 = 8.0;
pub const BATCH: f64 = 8.0;
/// Parse, canonicalize and hash, per KiB of body.
pub const CPU_PER_KIB: f64 = 0.02;
pub const CPU_BASE: f64 = 1.0;
/// Webhook function: verify a signature and send one SQS message.
pub const WEBHOOK: f64 = 30.0;
/// Query function: one read route.
pub const QUERY_ROUTE: f64 = 25.0;
