//! Replay-safe supplier feed ingestion: the domain (deliveries, fingerprints, observations,
//! runs), the ports it needs, the ingest protocol, and the AWS adapters behind the ports.

pub mod aws;
pub mod domain;
pub mod config;
pub mod corrections;
pub mod drops;
pub mod http;
pub mod ingest;
pub mod intake;
pub mod lambda;
pub mod metrics;
pub mod operations;
pub mod ops;
pub mod poller;
pub mod ports;
pub mod projection;
pub mod query;
pub mod stream;
pub mod webhook;
