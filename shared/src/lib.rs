//! Replay-safe supplier feed ingestion: the domain (deliveries, fingerprints, observations,
//! runs), the ports it needs, the ingest protocol, and the AWS adapters behind the ports.

pub mod aws;
pub mod domain;
pub mod intake;
pub mod lambda;
pub mod ops;
pub mod protocols;
