//! ISO 4217 currency code check.

/// Active ISO 4217 alphabetic codes (List One), sorted for binary search.
///
/// Included: every national/regional currency in circulation plus the ISO
/// fund codes (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW), which are real
/// units of account that can appear on prices.
///
/// Deliberately excluded:
/// - codes that are not currencies: testing (XTS), "no currency" (XXX),
///   precious metals (XAU, XAG, XPT, XPD), bond-market and supranational
///   units of account (XBA, XBB, XBC, XBD, XDR, XSU, XUA, XAD);
/// - superseded codes, so stale supplier data is caught rather than passed
///   on: ANG (-> XCG, 2025), BGN (-> EUR, 2026), CUC (withdrawn 2021),
///   HRK (-> EUR, 2023), SLL (-> SLE), ZWL (-> ZWG, 2024), and older ones
///   (DEM, FRF, ITL, MRO, STD, VEF, BYR, LTL, LVL, EEK, ...).
///
/// Update this list when ISO publishes an amendment that adds or withdraws
/// a currency; the unit test keeps it sorted and unique.
const ACTIVE_CODES: &[&str] = &[
    "AED", "AFN", "ALL", "AMD", "AOA", "ARS", "AUD", "AWG", "AZN", //
    "BAM", "BBD", "BDT", "BHD", "BIF", "BMD", "BND", "BOB", "BOV", "BRL", "BSD", "BTN", "BWP",
    "BYN", "BZD", //
    "CAD", "CDF", "CHE", "CHF", "CHW", "CLF", "CLP", "CNY", "COP", "COU", "CRC", "CUP", "CVE",
    "CZK", //
    "DJF", "DKK", "DOP", "DZD", //
    "EGP", "ERN", "ETB", "EUR", //
    "FJD", "FKP", //
    "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", //
    "HKD", "HNL", "HTG", "HUF", //
    "IDR", "ILS", "INR", "IQD", "IRR", "ISK", //
    "JMD", "JOD", "JPY", //
    "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", //
    "LAK", "LBP", "LKR", "LRD", "LSL", "LYD", //
    "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MXV",
    "MYR", "MZN", //
    "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", //
    "OMR", //
    "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", //
    "QAR", //
    "RON", "RSD", "RUB", "RWF", //
    "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC",
    "SYP", "SZL", //
    "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", //
    "UAH", "UGX", "USD", "USN", "UYI", "UYU", "UYW", "UZS", //
    "VED", "VES", "VND", "VUV", //
    "WST", //
    "XAF", "XCD", "XCG", "XOF", "XPF", //
    "YER", //
    "ZAR", "ZMW", "ZWG",
];

/// Each code of [`ACTIVE_CODES`] as a number (its three bytes, big-endian), in the same
/// order: a currency is checked on every row, and numbers compare without a call.
const ACTIVE_KEYS: [u32; ACTIVE_CODES.len()] = {
    let mut keys = [0; ACTIVE_CODES.len()];
    let mut i = 0;
    while i < keys.len() {
        let code = ACTIVE_CODES[i].as_bytes();
        keys[i] = key([code[0], code[1], code[2]]);
        i += 1;
    }
    keys
};

const fn key([a, b, c]: [u8; 3]) -> u32 {
    (a as u32) << 16 | (b as u32) << 8 | c as u32
}

/// True only for an exact, upper-case, active ISO 4217 alphabetic code.
/// No normalisation on purpose: `eur` or ` EUR` in a feed is a data error.
pub fn is_iso4217_currency(code: &str) -> bool {
    match code.as_bytes() {
        &[a, b, c] => ACTIVE_KEYS.binary_search(&key([a, b, c])).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_is_sorted_unique_and_well_formed() {
        for pair in ACTIVE_CODES.windows(2) {
            assert!(pair[0] < pair[1], "{} !< {}", pair[0], pair[1]);
        }
        assert!(ACTIVE_KEYS.windows(2).all(|pair| pair[0] < pair[1]));
        for (code, key) in ACTIVE_CODES.iter().zip(ACTIVE_KEYS) {
            assert!(is_iso4217_currency(code) && key >> 16 == u32::from(code.as_bytes()[0]));
            assert!(
                code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()),
                "{code}"
            );
        }
    }

    #[test]
    fn accepts_active_codes() {
        for code in [
            "EUR", "USD", "GBP", "CHF", "JPY", "CNY", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF",
            "RON", "ISK", "TRY", "AED", "XAF", "XOF", "XPF", "XCD", "XCG", "ZWG", "SLE", "VES",
            "ZAR",
        ] {
            assert!(is_iso4217_currency(code), "{code}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for code in [
            "eur", "Eur", "EURO", "EU", "", " EUR", "EUR ", "ZZZ", "DEM", "FRF", "ITL", "ESP",
            "HRK", "ANG", "CUC", "SLL", "ZWL", "BGN", "VEF", "XTS", "XXX", "XAU", "XAG", "XPT",
            "XPD", "XDR", "XBA", "XSU", "XUA", "ÉUR",
        ] {
            assert!(!is_iso4217_currency(code), "{code:?}");
        }
    }
}
