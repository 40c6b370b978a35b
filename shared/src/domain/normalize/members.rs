//! The members a row object may have, and the two ways the row rules read them: from a parsed
//! JSON object by name (the first release's formats), or from a mapped row's fixed slots (a
//! connector definition's rows, whose fields are known when the definition is compiled). Both
//! answer the same question, "what is this row's `quantity`", so one set of row rules serves
//! every format; the slots only spare the lookup by name and the object's sorting.

use crate::domain::canonical_json::Node;
use std::borrow::Cow;

/// A row member the row rules read. The variants are in the byte order of their names, the
/// order of a row object's members, so a mapped row is written as an object slot by slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Member {
    Condition,
    Currency,
    Incoterms,
    LeadTime,
    LeadTimeDays,
    Manufacturer,
    MinimumOrderQuantity,
    Mpn,
    ObservedAt,
    OrderMultiple,
    PackSize,
    Packaging,
    Price,
    PriceBasis,
    PriceBreaks,
    Quantity,
    Revision,
    Sku,
    TaxIncluded,
    Unit,
    ValidFrom,
    ValidUntil,
}

/// How many members there are.
pub const MEMBER_COUNT: usize = Member::ALL.len();

impl Member {
    /// Every member, in the byte order of their names.
    pub const ALL: [Member; 22] = [
        Member::Condition,
        Member::Currency,
        Member::Incoterms,
        Member::LeadTime,
        Member::LeadTimeDays,
        Member::Manufacturer,
        Member::MinimumOrderQuantity,
        Member::Mpn,
        Member::ObservedAt,
        Member::OrderMultiple,
        Member::PackSize,
        Member::Packaging,
        Member::Price,
        Member::PriceBasis,
        Member::PriceBreaks,
        Member::Quantity,
        Member::Revision,
        Member::Sku,
        Member::TaxIncluded,
        Member::Unit,
        Member::ValidFrom,
        Member::ValidUntil,
    ];

    /// The commercial terms (docs/item-schema.md, "Commercial terms").
    pub const TERMS: [Member; 12] = [
        Member::Incoterms,
        Member::LeadTime,
        Member::LeadTimeDays,
        Member::MinimumOrderQuantity,
        Member::OrderMultiple,
        Member::PackSize,
        Member::Packaging,
        Member::PriceBasis,
        Member::PriceBreaks,
        Member::TaxIncluded,
        Member::ValidFrom,
        Member::ValidUntil,
    ];

    /// The member's name in a row object.
    pub const fn name(self) -> &'static str {
        match self {
            Member::Condition => "condition",
            Member::Currency => "currency",
            Member::Incoterms => "incoterms",
            Member::LeadTime => "lead_time",
            Member::LeadTimeDays => "lead_time_days",
            Member::Manufacturer => "manufacturer",
            Member::MinimumOrderQuantity => "minimum_order_quantity",
            Member::Mpn => "mpn",
            Member::ObservedAt => "observed_at",
            Member::OrderMultiple => "order_multiple",
            Member::PackSize => "pack_size",
            Member::Packaging => "packaging",
            Member::Price => "price",
            Member::PriceBasis => "price_basis",
            Member::PriceBreaks => "price_breaks",
            Member::Quantity => "quantity",
            Member::Revision => "revision",
            Member::Sku => "sku",
            Member::TaxIncluded => "tax_included",
            Member::Unit => "unit",
            Member::ValidFrom => "valid_from",
            Member::ValidUntil => "valid_until",
        }
    }

    /// The member named `name`, if the row rules read one.
    pub fn named(name: &str) -> Option<Member> {
        Member::ALL
            .binary_search_by(|m| m.name().as_bytes().cmp(name.as_bytes()))
            .ok()
            .map(|at| Member::ALL[at])
    }
}

/// A row as the row rules read it: each member's value, if the row has it.
pub trait RowView {
    /// Whether the row is an object at all (a JSON row may be anything).
    fn is_object(&self) -> bool;
    /// The member's value (`None`: absent).
    fn member(&self, member: Member) -> Option<&Node<'_>>;
    /// Whether the row has any commercial term (most rows have none).
    fn states_a_term(&self) -> bool {
        Member::TERMS.iter().any(|m| self.member(*m).is_some())
    }
}

/// A parsed JSON row, read by name.
impl RowView for Node<'_> {
    fn is_object(&self) -> bool {
        Node::is_object(self)
    }

    fn member(&self, member: Member) -> Option<&Node<'_>> {
        self.get(member.name())
    }

    /// One pass over the object's members rather than a lookup of each term.
    fn states_a_term(&self) -> bool {
        match self {
            Node::Object(members) => members
                .iter()
                .any(|(name, _)| Member::named(name).is_some_and(|m| Member::TERMS.contains(&m))),
            _ => true,
        }
    }
}

/// A mapped row: each member's value in its slot, as the mapping converted it, borrowed from
/// the body where the conversion left it as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappedRow<'r> {
    slots: [Option<Node<'r>>; MEMBER_COUNT],
}

impl<'r> MappedRow<'r> {
    /// Sets `member` (a member is read from one field, so a slot is set once).
    pub fn set(&mut self, member: Member, value: Node<'r>) {
        self.slots[member as usize] = Some(value);
    }

    /// The member named `name`.
    pub fn get(&self, name: &str) -> Option<&Node<'r>> {
        Member::named(name).and_then(|m| self.slots[m as usize].as_ref())
    }

    /// The row object, owning its text, its members in name order (as a parse of it would
    /// give them).
    pub fn to_node(&self) -> Node<'static> {
        let members = Member::ALL
            .iter()
            .zip(&self.slots)
            .filter_map(|(m, value)| Some((Cow::Borrowed(m.name()), value.as_ref()?.to_static())))
            .collect();
        Node::Object(members)
    }
}

impl RowView for MappedRow<'_> {
    fn is_object(&self) -> bool {
        true
    }

    fn member(&self, member: Member) -> Option<&Node<'_>> {
        self.slots[member as usize].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::canonical_json::{canonical_bytes, parse_node};

    #[test]
    fn members_are_in_the_byte_order_of_their_names_and_each_is_found_by_it() {
        let names: Vec<&str> = Member::ALL.iter().map(|m| m.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        sorted.dedup();
        assert_eq!(names, sorted);
        for (at, member) in Member::ALL.iter().enumerate() {
            assert_eq!(*member as usize, at);
            assert_eq!(Member::named(member.name()), Some(*member));
        }
        assert_eq!(Member::named("price_break"), None);
        assert!(Member::TERMS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_mapped_row_reads_as_its_object_does() {
        let mut row = MappedRow::default();
        row.set(Member::Unit, Node::String("each".into()));
        row.set(Member::Quantity, Node::Number("5".into()));
        row.set(Member::Sku, Node::String("A-1".into()));
        let node = row.to_node();
        assert_eq!(
            canonical_bytes(&node),
            br#"{"quantity":5,"sku":"A-1","unit":"each"}"#
        );
        let parsed = parse_node(br#"{"unit":"each","sku":"A-1","quantity":5}"#).unwrap();
        for member in Member::ALL {
            assert_eq!(row.member(member), parsed.member(member), "{member:?}");
        }
        assert!(!row.states_a_term() && !parsed.states_a_term());
        row.set(Member::PackSize, Node::String("10".into()));
        assert!(row.states_a_term() && row.to_node().states_a_term());
    }
}
