//! DynamoDB's billing size of an item (docs: "Item sizes and formats"): what write and read
//! units are computed from. Used by the capacity model, the cost bench and the tests that keep
//! items small.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// DynamoDB's size of an attribute value (docs: "Item sizes and formats").
pub fn value_size(v: &AttributeValue) -> usize {
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
