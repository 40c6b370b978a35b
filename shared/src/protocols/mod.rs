//! The protocols: what the system does with the domain, written against ports (traits) and not
//! against AWS. Ingest (store a delivery once), projection (current offers), query (the read
//! path, which never reaches ingestion), identity corrections, source quarantines, and the HTTP
//! shape of their answers (`http`, independent of the transport).

pub mod http;
pub mod identity_corrections;
pub mod ingest;
pub mod mcp;
pub mod ports;
pub mod projection;
pub mod query;
pub mod source_quarantine;
pub mod verification;
