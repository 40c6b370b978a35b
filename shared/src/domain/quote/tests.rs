use super::*;
use crate::domain::canonical_json::parse_node;
use crate::domain::quantity::Quantity;
use crate::domain::terms::decimal_text;
use proptest::prelude::*;

fn terms(json: &str) -> Terms {
    Terms::read(&parse_node(json.as_bytes()).unwrap()).unwrap()
}

fn d(text: &str) -> Decimal {
    Decimal::parse(text).unwrap()
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

const NOW: &str = "2026-12-07T12:00:00Z";

/// The distributor of the acceptance fixture: stock 12,000, breaks at 1,000 / 2,500 / 10,000,
/// MOQ 1,000, multiple 500, valid to the end of the year.
const DISTRIBUTOR: &str = r#"{"price_breaks":[{"min_quantity":1000,"unit_price":"0.412"},
    {"min_quantity":2500,"unit_price":"0.398"},{"min_quantity":10000,"unit_price":"0.351"}],
    "minimum_order_quantity":1000,"order_multiple":500,"valid_until":"2026-12-31T23:59:59Z"}"#;

fn quote(q: &str, stock: u64, price: &str, terms_json: &str) -> Quote {
    quote_in(q, Quantity::from(stock), 0, price, terms_json)
}

/// A quote of `q` from an offer of `stock` in a unit of `places` decimal places.
fn quote_in(q: &str, stock: Quantity, places: u8, price: &str, terms_json: &str) -> Quote {
    let terms = terms(terms_json);
    let price = Price::parse(price).unwrap();
    let offered = Offered {
        stock: &stock,
        places,
        price: &price,
        currency: "USD",
        terms: &terms,
    };
    Quote::of(&d(q), &offered, at(NOW))
}

/// A quantity, whether it is orderable, its unit and extended price, and why not.
type Expected<'a> = (
    &'a str,
    bool,
    Option<&'a str>,
    Option<&'a str>,
    &'a [&'a str],
);

#[test]
fn a_quantity_is_priced_by_its_break_and_checked_against_every_term() {
    // (quantity, orderable, unit price, extended price, reasons): checked by hand.
    let table: [Expected; 6] = [
        ("2500", true, Some("0.398"), Some("995.000"), &[]),
        ("1000", true, Some("0.412"), Some("412.000"), &[]),
        ("10000", true, Some("0.351"), Some("3510.000"), &[]),
        (
            "2700",
            false,
            Some("0.398"),
            Some("1074.600"),
            &["not a multiple of 500"],
        ),
        (
            "500",
            false,
            None,
            None,
            &[
                "below the first price break (1000)",
                "below the minimum order quantity 1000",
            ],
        ),
        (
            "12500",
            false,
            Some("0.351"),
            Some("4387.500"),
            &["more than the 12000 in stock"],
        ),
    ];
    for (q, orderable, unit, extended, why) in table {
        let quote = quote(q, 12_000, "0.412", DISTRIBUTOR);
        assert_eq!(quote.orderable, orderable, "{q}: {quote:?}");
        assert_eq!(quote.unit_price.as_deref(), unit, "{q}");
        assert_eq!(quote.extended_price.as_deref(), extended, "{q}");
        assert_eq!(quote.not_orderable_because, why, "{q}");
        assert_eq!(quote.price_status, "current");
        assert!(!quote.extended_price_rounded);
    }
}

#[test]
fn an_offer_without_terms_is_priced_at_its_price_up_to_its_stock() {
    // Metres of one decimal place: 2.5 of them is a quantity of the unit.
    let within = quote_in("2.5", Quantity::from(3), 1, "19.99", "{}");
    assert!(within.orderable);
    assert_eq!(within.extended_price.as_deref(), Some("49.975"));
    assert!(!quote("4", 3, "19.99", "{}").orderable);
}

#[test]
fn a_quantity_finer_than_the_offers_unit_is_not_orderable() {
    let whole = quote("2.5", 10, "1.00", "{}");
    assert_eq!(
        whole.not_orderable_because,
        ["not a whole number of the offer's unit"]
    );
    assert!(
        quote("2.0", 10, "1.00", "{}").orderable,
        "2.0 is the whole 2"
    );
    let metres = Quantity::parse("12.5", 2).unwrap();
    assert!(quote_in("2.25", metres.clone(), 2, "1.00", "{}").orderable);
    let finer = quote_in("2.255", metres, 2, "1.00", "{}");
    assert_eq!(
        finer.not_orderable_because,
        ["finer than the offer's unit allows (2 decimal places)"]
    );
}

#[test]
fn a_price_basis_divides_exactly_or_says_it_rounded() {
    let per_hundred = quote("2500", 5_000, "41.20", r#"{"price_basis":"100"}"#);
    assert_eq!(per_hundred.extended_price.as_deref(), Some("1030.00"));
    assert!(!per_hundred.extended_price_rounded);
    let per_three = quote("1", 5_000, "1.00", r#"{"price_basis":"3"}"#);
    assert_eq!(
        per_three.extended_price.as_deref(),
        Some("0.333333333333333333")
    );
    assert!(per_three.extended_price_rounded);
    let two_thirds = quote("2", 5_000, "1.00", r#"{"price_basis":"3"}"#);
    assert_eq!(
        two_thirds.extended_price.as_deref(),
        Some("0.666666666666666667"),
        "rounded half up"
    );
}

#[test]
fn an_expired_or_future_price_is_shown_as_such() {
    let expired = quote("10", 100, "1", r#"{"valid_until":"2026-12-01T00:00:00Z"}"#);
    assert_eq!(expired.price_status, "expired");
    let future = quote("10", 100, "1", r#"{"valid_from":"2027-01-01T00:00:00Z"}"#);
    assert_eq!(future.price_status, "not_yet_valid");
}

#[test]
fn offers_rank_by_price_per_unit_within_their_currency_only() {
    let mut cheap = quote("1000", 5_000, "0.398", "{}");
    let mut per_hundred = quote("1000", 5_000, "39.50", r#"{"price_basis":100}"#);
    let mut tied = quote("1000", 5_000, "0.3950", "{}");
    let mut expired = quote(
        "1000",
        5_000,
        "0.10",
        r#"{"valid_until":"2026-01-01T00:00:00Z"}"#,
    );
    let mut short = quote("1000", 10, "0.01", "{}");
    let mut euro = quote("1000", 5_000, "0.50", "{}");
    let hundred = d("100");
    let mut quotes = [
        (&mut cheap, "USD", None),
        (&mut per_hundred, "USD", Some(&hundred)),
        (&mut tied, "USD", None),
        (&mut expired, "USD", None),
        (&mut short, "USD", None),
        (&mut euro, "EUR", None),
    ];
    rank(&mut quotes);
    let ranks: Vec<Option<u32>> = quotes.iter().map(|(q, _, _)| q.rank).collect();
    // 39.50 per 100 and 0.3950 are both 0.395 a unit: they share the first rank.
    assert_eq!(ranks, [Some(3), Some(1), Some(1), None, None, Some(1)]);
}

proptest! {
    /// A decimal reads and writes back as itself; a product has the digits of the integers'
    /// product and the sum of the scales.
    #[test]
    fn exact_decimals_round_trip_and_multiply_exactly(a in decimal_text(), b in decimal_text()) {
        prop_assert_eq!(Exact::of(&a).to_text(), a.clone());
        let product = Exact::of(&a).mul(&Exact::of(&b));
        let unscaled = |t: &str| t.replace('.', "").parse::<u128>().unwrap();
        prop_assert_eq!(product.digits.clone(), BigUint::from(unscaled(&a)) * BigUint::from(unscaled(&b)));
        let scale = |t: &str| t.split_once('.').map_or(0, |(_, f)| f.len() as u32);
        prop_assert_eq!(product.scale, scale(&a) + scale(&b));
        // Dividing the product by b gives a back, by value, whenever b is not zero.
        if Exact::of(&b).digits != BigUint::default() {
            let (back, exact) = product.div(&Exact::of(&b));
            prop_assert!(exact);
            prop_assert_eq!(back.cmp(&Exact::of(&a)), Ordering::Equal);
        }
    }
}
