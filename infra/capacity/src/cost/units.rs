//! DynamoDB's billing arithmetic: an item's size by its rules, and the read and write units of a
//! request of that size.

pub use feedsafe::aws::item_size::item_size;

/// Write units of a write of `bytes` (1 per KB, at least 1).
pub fn wcu(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// Read units of reading `bytes` (1 per 4 KB; half for an eventually consistent read).
pub fn rcu(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}
