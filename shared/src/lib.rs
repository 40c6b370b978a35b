//! Replay-safe supplier feed ingestion, one folder per layer (each `mod.rs` says what it holds):
//!
//! - `domain`: deliveries, fingerprints, canonical items, money, observations, replay records,
//!   runs and connector rules, as plain values; no AWS type, no I/O;
//! - `protocols`: ingest, projection, the read path (`query`, which never reaches ingestion),
//!   identity corrections and source quarantines, written against the ports in
//!   `protocols/ports/` (no protocol imports `aws`), and the transport-independent HTTP
//!   answers (`http`);
//! - `intake`: the producers (signed webhooks, scheduled pulls, file drops) and the ingest-queue
//!   ports they share;
//! - `aws`: the DynamoDB, S3, SQS and Secrets Manager adapters behind those ports;
//! - `ops`: the operators' API over the protocols, the intake and the raw archive;
//! - `lambda`: each function's entry point from its event shape, and what it wires at start.
//!
//! Each layer uses only the ones listed before it (the adapters in `aws` implement the ports of
//! `protocols` and `intake`), with one exception: `protocols::source_quarantine` takes the DynamoDB
//! store itself. Local-only code (resources from the template, the fake supplier, fault
//! injection) lives in the local stack's crate (`infra/local`), not here.

pub mod aws;
pub mod domain;
pub mod intake;
pub mod lambda;
pub mod ops;
pub mod protocols;
