//! DynamoDB's billing arithmetic: an item's size by its rules, and the read and write units of a
//! request of that size.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// DynamoDB's size of an attribute value (docs: "Item sizes and formats").
fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => {
            let digits = n.trim_start_matches('-').replace('.', "");
            let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
            significant.div_ceil(2) + 1
        }
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(items) => 3 + items.iter().map(|i| 1 + value_size(i)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.len() * 8,
        _ => 0,
    }
}

pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

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
