//! The protocol's deterministic names and plans: the chunks of a delivery's rows, its
//! fingerprint, the raw artifact and rejection keys, and the transactions' request tokens.

use crate::domain::connector::PayloadFormat;
use crate::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use crate::domain::hashing::{hex, sha256};
use crate::domain::ids::DeliveryKey;
use crate::domain::model::{ReplayRecord, ROWS_PER_TRANSACTION};
use crate::domain::reject::{RejectCode, Rejection};

/// Row ranges of each transaction. Up to 98 rows: one transaction (replay record, rows, run
/// page = 100 actions). More: chunks of 98, the last one at most 97 so that it also carries the
/// record's commit, the run page and the commit marker.
pub fn chunk_plan(rows: usize) -> Vec<std::ops::Range<usize>> {
    if rows <= ROWS_PER_TRANSACTION {
        return std::iter::once(0..rows).collect();
    }
    let mut plan = Vec::new();
    let mut start = 0;
    while rows - start > ROWS_PER_TRANSACTION - 1 {
        let take = if rows - start == ROWS_PER_TRANSACTION {
            ROWS_PER_TRANSACTION - 1
        } else {
            ROWS_PER_TRANSACTION
        };
        plan.push(start..start + take);
        start += take;
    }
    plan.push(start..rows);
    plan
}

/// Actions DynamoDB accepts in one transaction.
pub const MAX_TRANSACTION_ACTIONS: usize = 100;

/// The chunks of a staged plan (more than one chunk) written all at once, after the first
/// (which creates the `PENDING` record) and before the commit. The commit holds the record's
/// update, the commit marker, the run page and a witness of every chunk but the first and its
/// own; it holds the last chunk too when that fits, so 99 to 195 rows still take two
/// transactions.
pub fn parallel_chunks(plan: &[std::ops::Range<usize>]) -> std::ops::Range<usize> {
    let chunks = plan.len();
    let last = plan.last().map_or(0, |rows| rows.len());
    if last + 3 + chunks.saturating_sub(2) <= MAX_TRANSACTION_ACTIONS {
        1..chunks.saturating_sub(1).max(1)
    } else {
        1..chunks
    }
}

pub fn fingerprint_of(
    rule: CanonicalizationRule,
    format: PayloadFormat,
    body: &[u8],
) -> Result<Fingerprint, Rejection> {
    Fingerprint::compute(rule, body, format.rows_path()).map_err(|e| {
        Rejection::new(
            RejectCode::InvalidPayload,
            format!("body cannot be canonicalized: {e}"),
        )
    })
}

/// `raw/{tenant}/{connector}/{sha256(delivery key)[..32]}/{payload sha256}`: deterministic, so a
/// retry finds the artifact its earlier attempt wrote, and a different payload never lands on it.
pub fn artifact_key(key: &DeliveryKey, payload_sha256: &str) -> String {
    let key_digest = hex(&sha256(key.as_string().as_bytes()));
    format!(
        "raw/{}/{}/{}/{}",
        key.tenant,
        key.connector,
        &key_digest[..32],
        payload_sha256
    )
}

/// `rejected/{tenant or _unknown}/{sha256 of the whole queue message}`: the evidence of a
/// refused delivery.
pub fn rejected_key(tenant: &str, message_sha256_hex: &str) -> String {
    format!("rejected/{tenant}/{message_sha256_hex}")
}

/// Derived from (delivery, fingerprint, epoch, chunk) and this attempt's random nonce: the
/// SDK's own retry of a lost response reuses it and is absorbed by DynamoDB instead of running
/// twice. Every attempt gets its own token: two concurrent attempts with identical items (same
/// clock reading) would otherwise share one, and DynamoDB would report the loser's transaction
/// as a success it never ran; a reused token with other parameters would be refused for 10
/// minutes. Across attempts the replay-record conditions decide.
pub(super) fn transaction_token(record: &ReplayRecord, chunk: u32, attempt_nonce: u64) -> String {
    let digest = sha256(
        format!(
            "tx\n{}\n{}\n{}\n{chunk}\n{attempt_nonce}",
            record.delivery_key, record.fingerprint, record.epoch
        )
        .as_bytes(),
    );
    hex(&digest[..16])
}

/// A random value per attempt (std's per-instance randomly keyed hasher).
pub(crate) fn attempt_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::{chunk_plan, parallel_chunks, MAX_TRANSACTION_ACTIONS};

    #[test]
    fn chunk_plans_cover_every_row_once_and_leave_room_in_the_last_chunk() {
        for rows in [0usize, 1, 97, 98, 99, 195, 196, 197, 294, 400, 5000] {
            let plan = chunk_plan(rows);
            let covered: usize = plan.iter().map(|r| r.len()).sum();
            assert_eq!(covered, rows);
            assert!(plan.windows(2).all(|w| w[0].end == w[1].start));
            assert!(plan.iter().all(|r| r.len() <= 98));
            if plan.len() > 1 {
                assert!(plan.last().unwrap().len() <= 97, "{rows}: {plan:?}");
            }
        }
        assert_eq!(chunk_plan(400).len(), 5);
        // The commit of the largest delivery holds a witness of every other chunk.
        let largest = chunk_plan(crate::domain::normalize::MAX_ROWS);
        assert!(3 + largest.len() - 1 <= MAX_TRANSACTION_ACTIONS);
        for rows in [99usize, 195, 196, 197, 400, 4998, 4999, 5000] {
            let plan = chunk_plan(rows);
            let parallel = parallel_chunks(&plan);
            assert_eq!(parallel.start, 1);
            let in_commit = plan.len() - parallel.end;
            let commit_actions = 3 + (parallel.end - 1) + in_commit * plan.last().unwrap().len();
            assert!(
                commit_actions <= MAX_TRANSACTION_ACTIONS,
                "{rows}: {commit_actions}"
            );
        }
        assert_eq!(
            parallel_chunks(&chunk_plan(150)),
            1..1,
            "two chunks: no parallel step"
        );
        assert_eq!(
            parallel_chunks(&chunk_plan(400)),
            1..4,
            "the last 8 rows commit"
        );
        assert_eq!(chunk_plan(98).len(), 1);
        assert_eq!(
            chunk_plan(196).iter().map(|r| r.len()).collect::<Vec<_>>(),
            vec![98, 97, 1]
        );
    }
}
