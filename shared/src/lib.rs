//! Replay-safe supplier feed ingestion: the domain (deliveries, fingerprints, observations,
//! runs), the ports it needs, the ingest protocol, and the AWS adapters behind the ports.

pub mod aws;
pub mod canonical_json;
pub mod config;
pub mod connector;
pub mod corrections;
pub mod currency;
pub mod drops;
pub mod envelope;
pub mod fingerprint;
pub mod hashing;
pub mod http;
pub mod ids;
pub mod ingest;
pub mod intake;
pub mod item;
pub mod lambda;
pub mod metrics;
pub mod model;
pub mod money;
pub mod normalize;
pub mod operations;
pub mod ops;
pub mod poller;
pub mod ports;
pub mod projection;
pub mod query;
pub mod reject;
pub mod stream;
pub mod timestamp;
pub mod webhook;
