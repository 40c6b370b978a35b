//! The evidence table's partition and sort keys, one function per record kind
//! (`docs/item-schema.md`).

pub fn replay_pk(delivery_key: &str) -> String {
    format!("DLV#{delivery_key}")
}
pub fn observation_pk(observation_id: &str) -> String {
    format!("OBS#{observation_id}")
}
pub fn run_pk(run_id: &str) -> String {
    format!("RUN#{run_id}")
}
pub fn quarantine_pk(id: &str) -> String {
    format!("QUAR#{id}")
}
pub fn connector_pk(id: &str) -> String {
    format!("CONNECTOR#{id}")
}
/// Sort key of the record of page `page` of a run (under the run's `pk`).
pub fn run_page_sk(page: u32) -> String {
    format!("{RUN_PAGE_SK_PREFIX}{page:06}")
}
pub const RUN_PAGE_SK_PREFIX: &str = "PAGE#";
pub fn source_quarantine_pk(source: &crate::domain::model::SourceRef) -> String {
    format!(
        "SRCQ#{}#{}#{}",
        source.tenant, source.connector, source.source_account
    )
}
pub const SK_SOURCE_QUARANTINE: &str = "SRCQ";
pub fn correction_pk(id: &str) -> String {
    format!("CORR#{id}")
}
pub const SK_CORRECTION: &str = "CORR";
/// The open-runs index (GSI2) is spread over this many partitions so that no single index
/// partition carries every open run of every tenant.
pub const OPEN_RUN_SHARDS: u32 = 16;
/// GSI2 partition of an open run: `RUNS#OPEN#{shard:02}`, the shard derived from the run id.
pub fn open_runs_pk(run_id: &str) -> String {
    let shard = u32::from(crate::domain::hashing::sha256(run_id.as_bytes())[0]) % OPEN_RUN_SHARDS;
    open_runs_shard_pk(shard)
}
pub fn open_runs_shard_pk(shard: u32) -> String {
    format!("RUNS#OPEN#{shard:02}")
}
pub fn commit_marker_pk(delivery_key: &str, epoch: u32) -> String {
    format!("DLVEPOCH#{delivery_key}#{epoch}")
}
pub const SK_COMMIT_MARKER: &str = "COMMITTED";
pub fn projection_work_pk(delivery_key: &str, epoch: u32) -> String {
    format!("PROJWORK#{delivery_key}#{epoch}")
}

pub fn item_history_pk(tenant: &str, item: &str) -> String {
    format!("ITEM#{tenant}#{item}")
}
pub fn quarantine_list_pk(tenant: &str) -> String {
    format!("QUARANTINE#{tenant}")
}
pub fn connector_list_pk(tenant: &str) -> String {
    format!("CONNECTORS#{tenant}")
}
