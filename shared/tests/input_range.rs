//! The whole range of what a supplier can send
//! (docs/adr/0012-supported-ranges-of-stored-values.md): timestamps in every year 0000-9999 with
//! every offset from -23:59 to +23:59, leap seconds and up to 9 fractional digits; quantities,
//! prices, identifiers and currencies at and past their limits, in every character class. For each:
//! nothing panics; a value is accepted exactly when it lies in the documented range; and an
//! accepted value survives the stored forms (DynamoDB's item encoding, JSON, the sort key)
//! unchanged, so reading it back never fails. 500 cases each by default;
//! `FEEDSAFE_FUZZ_CASES=100000` for a long run. No engine needed.

use feedsafe::domain::connector::PayloadFormat;
use feedsafe::domain::fingerprint::CanonicalizationRule;
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::money::Price;
use feedsafe::domain::normalize::{normalize, MAX_QUANTITY};
use feedsafe::domain::quantity::Quantity;
use feedsafe::domain::timestamp::{Timestamp, TimestampError};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

fn cases() -> u32 {
    std::env::var("FEEDSAFE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// One RFC 3339 timestamp's fields, each drawn across its whole range and its edges.
#[derive(Debug, Clone)]
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    fraction: String,
    /// `None`: `Z`; otherwise minutes east of UTC, -1439..=1439.
    offset: Option<i64>,
}

fn edge_or_any(edges: &'static [i64], low: i64, high: i64) -> impl Strategy<Value = i64> {
    prop_oneof![proptest::sample::select(edges), low..=high]
}

/// A third of the cases anywhere in the calendar, a third on the first day of year 0000 and a
/// third on the last day of year 9999, where an offset can carry the instant out of the range.
fn fields() -> impl Strategy<Value = Fields> {
    prop_oneof![
        anywhere(),
        (anywhere(), 0i64..=23).prop_map(|(f, hour)| Fields {
            year: 0,
            month: 1,
            day: 1,
            hour,
            ..f
        }),
        (anywhere(), 0i64..=23).prop_map(|(f, hour)| Fields {
            year: 9999,
            month: 12,
            day: 31,
            hour,
            ..f
        }),
    ]
}

fn anywhere() -> impl Strategy<Value = Fields> {
    (
        edge_or_any(&[0, 1, 1969, 1970, 2026, 9998, 9999], 0, 9999),
        edge_or_any(&[1, 2, 12], 1, 12),
        edge_or_any(&[1, 28, 29, 30, 31], 1, 31),
        edge_or_any(&[0, 23], 0, 23),
        edge_or_any(&[0, 59], 0, 59),
        edge_or_any(&[0, 59, 60], 0, 60),
        "[0-9]{0,9}",
        prop_oneof![
            Just(None),
            proptest::sample::select(&[-1439i64, -60, -1, 0, 1, 60, 1439][..]).prop_map(Some),
            (-1439i64..=1439).prop_map(Some),
        ],
    )
        .prop_map(
            |(year, month, day, hour, minute, second, fraction, offset)| Fields {
                year,
                month,
                day,
                hour,
                minute,
                second,
                fraction,
                offset,
            },
        )
}

impl Fields {
    fn text(&self) -> String {
        let fraction = if self.fraction.is_empty() {
            String::new()
        } else {
            format!(".{}", self.fraction)
        };
        let offset = match self.offset {
            None => "Z".to_owned(),
            Some(m) => {
                let sign = if m < 0 { '-' } else { '+' };
                format!("{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
            }
        };
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}{offset}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    fn date_exists(&self) -> bool {
        let leap = self.year % 4 == 0 && (self.year % 100 != 0 || self.year % 400 == 0);
        let days = match self.month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        self.day <= days
    }

    /// The instant's whole seconds since 0000-01-01T00:00:00Z, computed independently of the
    /// `time` crate (days from the civil date, then the offset).
    fn seconds_from_year_zero(&self) -> i64 {
        let (y, m) = if self.month <= 2 {
            (self.year - 1, self.month + 9)
        } else {
            (self.year, self.month - 3)
        };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + self.day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        // Days from 0000-03-01, then back to 0000-01-01 (year 0 is a leap year: 60 days).
        let days = era * 146_097 + doe + 60;
        let local = days * 86_400 + self.hour * 3_600 + self.minute * 60 + self.second;
        local - self.offset.unwrap_or(0) * 60
    }
}

/// The days of the years 0000 to 9999 (2,425 of them leap years, year 0 among them).
const SUPPORTED_DAYS: i64 = 10_000 * 365 + 2_425;

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_timestamp_is_accepted_exactly_within_the_range_and_round_trips(f in fields()) {
        let text = f.text();
        let parsed = Timestamp::parse(&text);
        if f.second < 60 && f.date_exists() {
            let at = f.seconds_from_year_zero();
            let in_range = (0..SUPPORTED_DAYS * 86_400).contains(&at);
            match &parsed {
                Ok(_) => prop_assert!(in_range, "{text} accepted at {at}"),
                Err(TimestampError::OutOfRange(literal)) => {
                    prop_assert!(!in_range, "{text} refused at {at}");
                    prop_assert!(text.starts_with(literal.as_str()));
                }
                Err(e) => prop_assert!(false, "{text}: {e}"),
            }
        }
        if let Ok(t) = parsed {
            round_trips(t)?;
        }
    }

    #[test]
    fn arbitrary_text_never_panics_the_timestamp_parser(text in ".{0,40}") {
        if let Ok(t) = Timestamp::parse(&text) {
            round_trips(t)?;
        }
    }
}

/// Every stored form of `t` reads back as `t`, and the fixed-width sort key has a 4-digit year.
fn round_trips(t: Timestamp) -> Result<(), TestCaseError> {
    prop_assert_eq!(Timestamp::parse(&t.to_rfc3339()), Ok(t));
    prop_assert_eq!(Timestamp::parse(&t.sort_key()), Ok(t));
    prop_assert_eq!(t.sort_key().len(), "0000-01-01T00:00:00.000000Z".len());
    let json = serde_json::to_string(&t).unwrap();
    prop_assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    let item: serde_dynamo::Item = serde_dynamo::to_item(Stored::at(t)).unwrap();
    let stored: Stored = serde_dynamo::from_item(item)
        .map_err(|e| TestCaseError::fail(format!("{t:?} does not decode: {e}")))?;
    prop_assert_eq!(stored.observed_at, t);
    Ok(())
}

/// The shape of what the evidence table keeps of a row, encoded as the store encodes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    observed_at: Timestamp,
    quantity: Quantity,
    price: Price,
    currency: String,
    item: CanonicalItem,
}

impl Stored {
    fn at(observed_at: Timestamp) -> Self {
        Self {
            observed_at,
            quantity: 0.into(),
            price: Price::parse("0").unwrap(),
            currency: "EUR".into(),
            item: CanonicalItem::new("A", None, None, None).unwrap(),
        }
    }
}

/// Part numbers from every character class: letters, digits, the allowed marks, the marks that
/// are refused, spaces, controls, non-ASCII letters and a character outside the BMP; lengths
/// from empty past the 96-character limit.
fn part_number() -> impl Strategy<Value = String> {
    let class = prop_oneof![
        "[A-Za-z0-9]",
        "[-_.+#]",
        "[/~ @%\\\\\"']",
        Just("\u{0}".to_owned()),
        Just("\u{7f}".to_owned()),
        Just("é".to_owned()),
        Just("𝄞".to_owned()),
    ];
    prop_oneof![
        proptest::collection::vec(class, 0..12).prop_map(|p| p.concat()),
        (90usize..=100).prop_map(|n| "X".repeat(n)),
    ]
}

/// Quantities as JSON literals: every edge of `u64` and of the accepted range, and junk.
fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "0".to_owned(),
            MAX_QUANTITY.to_string(),
            (MAX_QUANTITY + 1).to_string(),
            u64::MAX.to_string(),
            "18446744073709551616".to_owned(),
            "-1".to_owned(),
            "-0".to_owned(),
            "1.5".to_owned(),
            "6.0".to_owned(),
            "6.000000000000000000000000001".to_owned(),
            "1e3".to_owned(),
            "\"5\"".to_owned(),
        ]),
        any::<u64>().prop_map(|q| q.to_string()),
    ]
}

/// Prices: at the 30-character and 18-fraction-digit limits and past them, and junk.
fn price() -> impl Strategy<Value = String> {
    prop_oneof![
        "(0|[1-9][0-9]{0,20})(\\.[0-9]{1,19})?",
        proptest::sample::select(vec![
            "9".repeat(30),
            "9".repeat(31),
            format!("0.{}", "1".repeat(18)),
            format!("0.{}", "1".repeat(19)),
            "01".to_owned(),
            "-1".to_owned(),
            "1e3".to_owned(),
            "".to_owned(),
        ]),
    ]
}

fn row_json(sku: &str, quantity: &str, price: &str, currency: &str, observed_at: &str) -> String {
    format!(
        r#"{{"export_id":"EXP-R","page":1,"page_count":1,"offers":[{{"sku":{},"quantity":{quantity},"unit":"each","price":{},"currency":{},"observed_at":{}}}]}}"#,
        serde_json::to_string(sku).unwrap(),
        serde_json::to_string(price).unwrap(),
        serde_json::to_string(currency).unwrap(),
        serde_json::to_string(observed_at).unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn an_accepted_row_is_within_every_range_and_its_stored_form_reads_back(
        sku in part_number(),
        quantity in quantity(),
        price in price(),
        currency in prop_oneof!["[A-Z]{3}", ".{0,4}"],
        at in fields(),
    ) {
        let body = row_json(&sku, &quantity, &price, &currency, &at.text());
        let Ok(rows) = normalize(PayloadFormat::AcmeExportV1, CanonicalizationRule::JsonV1, body.as_bytes()) else {
            return Ok(());
        };
        prop_assert_eq!(rows.len(), 1);
        let row = &rows[0];
        // The built-in formats count whole units: `6.0` is the whole 6.
        prop_assert!(row.quantity.whole().is_some_and(|q| q <= MAX_QUANTITY));
        let whole = quantity.split_once('.').map_or(quantity.as_str(), |(w, f)| {
            assert!(f.bytes().all(|b| b == b'0'), "{quantity} was accepted");
            w
        });
        prop_assert_eq!(row.quantity.to_string(), whole);
        prop_assert_eq!(row.price.as_str(), price.as_str());
        prop_assert!(row.price.as_str().len() <= 30);
        prop_assert!(row.item.part_number.len() <= 96);
        prop_assert_eq!(&row.item.part_number, &sku.trim().to_ascii_uppercase());
        let stored = Stored {
            observed_at: row.observed_at,
            quantity: row.quantity.clone(),
            price: row.price.clone(),
            currency: row.currency.clone(),
            item: row.item.clone(),
        };
        let item: serde_dynamo::Item = serde_dynamo::to_item(stored.clone()).unwrap();
        let back: Stored = serde_dynamo::from_item(item).unwrap();
        prop_assert_eq!(&back, &stored);
        let json = serde_json::to_string(&stored).unwrap();
        prop_assert_eq!(serde_json::from_str::<Stored>(&json).unwrap(), stored);
        let again = CanonicalItem::new(&row.item.part_number, None, None, None).map(|i| i.part_number);
        prop_assert_eq!(again.as_ref(), Ok(&row.item.part_number), "a stored part number is accepted again");
        round_trips(row.observed_at)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// A fractional quantity a unit's declared places allow is stored (DynamoDB's number, the
    /// API's JSON number) and read back as the same value and the same text; one they do not
    /// allow is refused, never rounded.
    #[test]
    fn a_decimal_quantity_is_stored_and_read_back_exactly(
        whole in "0|[1-9][0-9]{0,15}",
        fraction in "[0-9]{1,7}",
        places in 0u8..=6,
    ) {
        let literal = format!("{whole}.{fraction}");
        let Ok(quantity) = Quantity::parse(&literal, places) else {
            let significant = fraction.trim_end_matches('0').len();
            prop_assert!(significant > usize::from(places) || whole.len() + significant > 15);
            return Ok(());
        };
        let places_kept = quantity.as_str().split_once('.').map_or(0, |(_, f)| f.len());
        prop_assert!(places_kept <= usize::from(places), "{} in {} places", quantity, places);
        let item: serde_dynamo::Item = serde_dynamo::to_item(QuantityOnly { quantity: quantity.clone() }).unwrap();
        let back: QuantityOnly = serde_dynamo::from_item(item).unwrap();
        prop_assert_eq!(back.quantity.as_str(), quantity.as_str());
        let json = serde_json::to_string(&QuantityOnly { quantity: quantity.clone() }).unwrap();
        let back: QuantityOnly = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back.quantity, quantity);
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct QuantityOnly {
    quantity: Quantity,
}

/// A manufacturer or its part number as a supplier may write it: every character class of a
/// part number, the edges of the length limit, an invisible character, an NFD spelling.
fn named_part() -> impl Strategy<Value = String> {
    prop_oneof![
        part_number(),
        (126usize..=130).prop_map(|n| "Ω".repeat(n)),
        Just("T\u{200B}I".to_owned()),
        Just("A\u{308}BC-E\u{301}".to_owned()),
        Just("Texas Instruments ~m~r%".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// A row naming the manufacturer and its part number beside the SKU is an item whose key
    /// reads back as it, stored and read back unchanged (DynamoDB and JSON), the SKU kept as
    /// the source record; or a refusal naming which of the two is wrong. Never a panic.
    #[test]
    fn a_manufacturer_and_its_part_number_are_stored_and_read_back_or_refused(
        mpn in named_part(),
        manufacturer in named_part(),
    ) {
        let row = serde_json::json!({
            "sku": "SUP-1", "mpn": mpn, "manufacturer": manufacturer, "quantity": 5,
            "unit": "each", "price": "1.00", "currency": "EUR",
            "observed_at": "2026-11-29T08:00:00Z"
        });
        let body = serde_json::json!({"export_id": "EXP-M", "page": 1, "page_count": 1, "offers": [row]});
        let body = serde_json::to_vec(&body).unwrap();
        let rows = match normalize(PayloadFormat::AcmeExportV1, CanonicalizationRule::JsonV1, &body) {
            Ok(rows) => rows,
            Err(refused) => {
                prop_assert!(
                    refused.message.contains("invalid item part number")
                        || refused.message.contains("invalid item manufacturer"),
                    "{}", refused.message
                );
                return Ok(());
            }
        };
        let row = &rows[0];
        prop_assert_eq!(row.source_record.as_str(), "SUP-1");
        prop_assert!(row.item.manufacturer.as_ref().is_some_and(|m| m.chars().count() <= 128));
        prop_assert_eq!(CanonicalItem::parse_key(&row.item.key()).unwrap(), row.item.clone());
        let item: serde_dynamo::Item = serde_dynamo::to_item(row.item.clone()).unwrap();
        let back: CanonicalItem = serde_dynamo::from_item(item).unwrap();
        prop_assert_eq!(&back, &row.item);
        let json = serde_json::to_string(&row.item).unwrap();
        prop_assert_eq!(serde_json::from_str::<CanonicalItem>(&json).unwrap(), row.item.clone());
    }
}
