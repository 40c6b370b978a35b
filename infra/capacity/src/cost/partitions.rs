//! The `by_source` index partitions of a source, as the projection table shards them.

use feedsafe::aws::projection_table::{source_key, source_shard_key, SOURCE_SHARDS};

/// The `by_source` partition a row of `source` for `item` is indexed under.
pub fn source_partition(source: &feedsafe::domain::model::SourceRef, item: &str) -> String {
    source_key(source, item)
}

/// Every `by_source` partition of a source with `rows` rows, and how many rows each holds
/// (rows spread evenly: the shard is a hash of the item).
pub fn source_partitions(
    source: &feedsafe::domain::model::SourceRef,
    rows: usize,
) -> Vec<(String, usize)> {
    let shards = SOURCE_SHARDS as usize;
    (0..SOURCE_SHARDS)
        .map(|shard| {
            let count = rows / shards + usize::from((shard as usize) < rows % shards);
            (source_shard_key(source, shard), count)
        })
        .collect()
}
