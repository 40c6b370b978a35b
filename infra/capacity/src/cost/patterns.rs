//! The key patterns the report groups load by, one per store and partition shape.

use crate::tally::Pattern;

const fn p(store: &'static str, key: &'static str) -> Pattern {
    Pattern { store, key }
}
pub const EVIDENCE: &str = "EvidenceTable";
pub const GSI1: &str = "EvidenceTable gsi1";
pub const GSI2: &str = "EvidenceTable gsi2";
pub const PROJECTION: &str = "ProjectionTable";
pub const BY_SOURCE: &str = "ProjectionTable by_source";
pub const BUCKET: &str = "RawBucket";

pub const REPLAY: Pattern = p(EVIDENCE, "DLV#{delivery_key}");
pub const OBSERVATION: Pattern = p(EVIDENCE, "OBS#{observation_id}");
pub const RUN: Pattern = p(EVIDENCE, "RUN#{run_id} (run + pages)");
pub const MARKER: Pattern = p(EVIDENCE, "DLVEPOCH#{delivery_key}#{epoch}");
pub const WORK: Pattern = p(EVIDENCE, "PROJWORK#{delivery_key}#{epoch}");
pub const QUARANTINE: Pattern = p(EVIDENCE, "QUAR#{quarantine_id}");
pub const RULES: Pattern = p(EVIDENCE, "CRULES#{tenant}#{connector}#{account}");
pub const SOURCE_QUARANTINE: Pattern = p(EVIDENCE, "SRCQ#{tenant}#{connector}#{account}");
pub const CONNECTOR: Pattern = p(EVIDENCE, "CONNECTOR#{connector}");
pub const CORRECTION: Pattern = p(EVIDENCE, "CORR#{correction_id}");
pub const ITEM_HISTORY: Pattern = p(GSI1, "ITEM#{tenant}#{item}");
pub const QUARANTINE_LIST: Pattern = p(GSI2, "QUARANTINE#{tenant}");
pub const OPEN_RUNS: Pattern = p(GSI2, "RUNS#OPEN#{shard}");
pub const SETTLING: Pattern = p(GSI2, "CORRECTIONS#SETTLING");
pub const ROWS: Pattern = p(PROJECTION, "ITEM#{tenant}#{item}");
pub const SOURCE_ROWS: Pattern = p(BY_SOURCE, crate::cost::SOURCE_KEY_PATTERN);
pub const RAW: Pattern = p(BUCKET, "raw/{tenant}/{connector}/");
pub const REJECTED: Pattern = p(BUCKET, "rejected/{tenant}/");
pub const CLAIMS: Pattern = p(BUCKET, "claims/{tenant}/{connector}/");
pub const DROPS: Pattern = p(BUCKET, "drops/{connector}/");
