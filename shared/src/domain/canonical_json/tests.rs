use super::*;

fn canon(input: &str) -> Result<String, CanonicalJsonError> {
    canonicalize(input.as_bytes()).map(|b| String::from_utf8(b).unwrap())
}

fn ok(input: &str) -> String {
    canon(input).unwrap_or_else(|e| panic!("{input:?} rejected: {e}"))
}

fn is_syntax(r: Result<String, CanonicalJsonError>) -> bool {
    matches!(r, Err(CanonicalJsonError::Syntax { .. }))
}

#[test]
fn key_order_independent() {
    let a = ok(r#"{"b":1,"a":{"y":true,"x":null},"c":[3,2,1]}"#);
    let b = ok(r#"{"c":[3,2,1],"a":{"x":null,"y":true},"b":1}"#);
    assert_eq!(a, b);
    assert_eq!(a, r#"{"a":{"x":null,"y":true},"b":1,"c":[3,2,1]}"#);
}

#[test]
fn keys_sorted_by_utf8_bytes() {
    // Byte order, not UTF-16 order: U+FF61 (EF BD A1) sorts before
    // U+1F600 (F0 9F 98 80), though in UTF-16 the surrogate D83D < FF61.
    let out = ok(r#"{"😀":1,"｡":2,"B":3,"a":4,"":5}"#);
    assert_eq!(out, r#"{"":5,"B":3,"a":4,"｡":2,"😀":1}"#);
}

#[test]
fn whitespace_independent() {
    let a = ok(" \t\r\n{ \"a\" : [ 1 , 2 ] ,\n\"b\":\"x y\" } \n");
    assert_eq!(a, r#"{"a":[1,2],"b":"x y"}"#);
}

#[test]
fn number_literals_preserved() {
    assert_eq!(ok(r#"{"p":820.00}"#), r#"{"p":820.00}"#);
    assert_ne!(ok("820.00"), ok("820.0"));
    assert_ne!(ok("820"), ok("820.0"));
    assert_eq!(ok("1e3"), "1e3");
    assert_eq!(ok("1E+3"), "1E+3");
    assert_eq!(ok("-0"), "-0");
    assert_eq!(ok("0.0e-0"), "0.0e-0");
    assert_eq!(ok("12345678901234567890.1"), "12345678901234567890.1");
    assert_ne!(
        ok("12345678901234567890.1"),
        ok("12345678901234567890.2"),
        "values equal as f64 must still differ"
    );
    assert_eq!(ok("1e999999"), "1e999999");
}

#[test]
fn invalid_numbers_rejected() {
    for bad in [
        "01",
        "-01",
        "-",
        "+1",
        "1.",
        ".5",
        "1.e3",
        "1e",
        "1e+",
        "0x10",
        "NaN",
        "Infinity",
        "-Infinity",
        "1_000",
        "--1",
        "1.5.5",
    ] {
        assert!(is_syntax(canon(bad)), "{bad:?} accepted");
        assert!(is_syntax(canon(&format!("[{bad}]"))), "[{bad}] accepted");
    }
}

#[test]
fn escape_equivalence() {
    assert_eq!(ok(r#""\u0041""#), ok(r#""A""#));
    assert_eq!(ok(r#""\u00e9""#), ok("\"é\""));
    assert_eq!(ok(r#""\u00E9""#), "\"é\"");
    assert_eq!(ok(r#""\/""#), r#""/""#);
    assert_eq!(ok(r#""\ud83d\ude00""#), "\"😀\"");
    assert_eq!(ok(r#"{"\u0061":1}"#), r#"{"a":1}"#);
    // Canonical escapes: short forms, else lowercase \u00XX.
    assert_eq!(
        ok(r#""\u0008\u000C\u000a\u000D\u0009\u0000\u001F\u007f\"\\""#),
        "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\\\"\\\\\""
    );
    // U+2028 is legal raw in JSON and is emitted raw.
    assert_eq!(ok(r#""\u2028""#), "\"\u{2028}\"");
}

#[test]
fn bad_strings_rejected() {
    for bad in [
        "\"abc",
        "\"a\u{1}b\"",
        "\"tab\there\"",
        "\"new\nline\"",
        r#""\x41""#,
        r#""\u12G4""#,
        r#""\u12""#,
        r#""\ud800""#,
        r#""\ud800x""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        r#""\ud800\ud800""#,
        r#""\"#,
        "'single'",
    ] {
        assert!(is_syntax(canon(bad)), "{bad:?} accepted");
    }
}

#[test]
fn duplicate_keys_rejected() {
    assert_eq!(
        canon(r#"{"a":1,"b":2,"a":3}"#),
        Err(CanonicalJsonError::DuplicateKey("a".into()))
    );
    assert_eq!(
        canon(r#"{"a":1,"\u0061":1}"#),
        Err(CanonicalJsonError::DuplicateKey("a".into()))
    );
    assert_eq!(
        canon(r#"[{"x":{"k":1,"k":1}}]"#),
        Err(CanonicalJsonError::DuplicateKey("k".into()))
    );
    // Same key in sibling objects is fine.
    assert!(canon(r#"[{"a":1},{"a":1}]"#).is_ok());
}

#[test]
fn depth_limit() {
    let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
    assert!(canon(&nested(MAX_DEPTH)).is_ok());
    assert_eq!(
        canon(&nested(MAX_DEPTH + 1)),
        Err(CanonicalJsonError::TooDeep)
    );
    assert_eq!(
        canon(&"[".repeat(100_000)),
        Err(CanonicalJsonError::TooDeep)
    );
    assert_eq!(
        canon(&"{\"a\":".repeat(100_000)),
        Err(CanonicalJsonError::TooDeep)
    );
    assert_eq!(
        canon(&"[{\"a\":".repeat(50_000)),
        Err(CanonicalJsonError::TooDeep)
    );
}

#[test]
fn trailing_garbage_and_framing() {
    for bad in [
        "{} x",
        "{}{}",
        "[1]]",
        "1 2",
        "null,",
        "",
        "   ",
        "[1,]",
        "{\"a\":1,}",
    ] {
        assert!(is_syntax(canon(bad)), "{bad:?} accepted");
    }
    for bad in [
        "tru", "nul", "falsey", "True", "[,1]", "{,}", "{\"a\"}", "{1:2}",
    ] {
        assert!(is_syntax(canon(bad)), "{bad:?} accepted");
    }
    // RFC 8259 allows any value at top level.
    assert_eq!(ok(" 42 "), "42");
    assert_eq!(ok("\"s\""), "\"s\"");
    assert_eq!(ok("null"), "null");
}

#[test]
fn bom_and_invalid_utf8_rejected() {
    assert_eq!(
        canonicalize(b"\xEF\xBB\xBF{}"),
        Err(CanonicalJsonError::Syntax {
            offset: 0,
            reason: "byte order mark is not allowed"
        })
    );
    assert!(matches!(
        canonicalize(b"{\"a\":\"\xFF\"}"),
        Err(CanonicalJsonError::Syntax { offset: 6, .. })
    ));
    // Overlong encoding and UTF-8-encoded surrogate.
    assert!(canonicalize(b"\"\xC0\xAF\"").is_err());
    assert!(canonicalize(b"\"\xED\xA0\x80\"").is_err());
    // Truncated multi-byte char at end.
    assert!(canonicalize(b"\"\xE2\x82").is_err());
}

#[test]
fn syntax_offsets_point_at_problem() {
    assert_eq!(
        canon("[1, x]"),
        Err(CanonicalJsonError::Syntax {
            offset: 4,
            reason: "expected a JSON value"
        })
    );
    assert!(matches!(
        canon("{} x"),
        Err(CanonicalJsonError::Syntax { offset: 3, .. })
    ));
}

#[test]
fn unordered_rows() {
    let a = br#"{"offers":[{"id":1,"p":"9.50"},{"id":2,"p":"3.00"}],"v":1}"#;
    let b = br#"{"v":1,"offers":[{"p":"3.00","id":2},{"p":"9.50","id":1}]}"#;
    assert_ne!(canonicalize(a).unwrap(), canonicalize(b).unwrap());
    let ua = canonicalize_unordered_rows(a, &["offers"]).unwrap();
    let ub = canonicalize_unordered_rows(b, &["offers"]).unwrap();
    assert_eq!(ua, ub);
    assert_eq!(
        String::from_utf8(ua).unwrap(),
        r#"{"offers":[{"id":1,"p":"9.50"},{"id":2,"p":"3.00"}],"v":1}"#
    );
    // Duplicated rows are kept (multiset, not set).
    let d1 = canonicalize_unordered_rows(br#"{"offers":[1,2,1]}"#, &["offers"]).unwrap();
    let d2 = canonicalize_unordered_rows(br#"{"offers":[1,2]}"#, &["offers"]).unwrap();
    assert_eq!(d1, b"{\"offers\":[1,1,2]}".to_vec());
    assert_ne!(d1, d2);
    // Arrays nested inside rows keep their order.
    let n1 = canonicalize_unordered_rows(br#"{"offers":[[2,1]]}"#, &["offers"]).unwrap();
    let n2 = canonicalize_unordered_rows(br#"{"offers":[[1,2]]}"#, &["offers"]).unwrap();
    assert_ne!(n1, n2);
    // Empty path: the root is the rows array.
    assert_eq!(
        canonicalize_unordered_rows(b"[3,1,2]", &[]).unwrap(),
        b"[1,2,3]".to_vec()
    );
}

#[test]
fn nested_rows_path() {
    let a = br#"{"data":{"offers":["b","a"],"n":1},"offers":["z","y"]}"#;
    let b = br#"{"data":{"n":1,"offers":["a","b"]},"offers":["z","y"]}"#;
    let ua = canonicalize_unordered_rows(a, &["data", "offers"]).unwrap();
    assert_eq!(
        ua,
        canonicalize_unordered_rows(b, &["data", "offers"]).unwrap()
    );
    // Only the addressed array is sorted.
    assert_eq!(
        String::from_utf8(ua).unwrap(),
        r#"{"data":{"n":1,"offers":["a","b"]},"offers":["z","y"]}"#
    );
}

#[test]
fn rows_path_errors() {
    let doc = br#"{"data":{"offers":{"a":1},"list":[1]},"n":5}"#;
    assert_eq!(
        canonicalize_unordered_rows(doc, &["data", "missing"]),
        Err(CanonicalJsonError::RowsPathMissing("data/missing".into()))
    );
    assert_eq!(
        canonicalize_unordered_rows(doc, &["n", "x"]),
        Err(CanonicalJsonError::RowsPathMissing("n/x".into()))
    );
    assert_eq!(
        canonicalize_unordered_rows(doc, &["data", "offers"]),
        Err(CanonicalJsonError::RowsNotArray("data/offers".into()))
    );
    assert_eq!(
        canonical_rows(doc, &["offers"]),
        Err(CanonicalJsonError::RowsPathMissing("offers".into()))
    );
    assert_eq!(
        canonicalize_unordered_rows(b"[1]", &["offers"]),
        Err(CanonicalJsonError::RowsPathMissing("offers".into()))
    );
    assert_eq!(
        canonical_rows(doc, &["data", "list"]),
        Ok(vec![b"1".to_vec()])
    );
    // Parse errors win over path errors.
    assert!(matches!(
        canonicalize_unordered_rows(b"{\"offers\":[}", &["offers"]),
        Err(CanonicalJsonError::Syntax { .. })
    ));
}

#[test]
fn canonical_rows_in_source_order() {
    let rows = canonical_rows(
        br#"{"offers":[ {"b":2, "a":1}, 7, "\u0041" ]}"#,
        &["offers"],
    )
    .unwrap();
    assert_eq!(
        rows,
        vec![
            br#"{"a":1,"b":2}"#.to_vec(),
            b"7".to_vec(),
            br#""A""#.to_vec()
        ]
    );
    assert_eq!(canonical_rows(br#"{"offers":[]}"#, &["offers"]), Ok(vec![]));
}

#[test]
fn error_display() {
    let e = CanonicalJsonError::Syntax {
        offset: 3,
        reason: "x",
    };
    assert_eq!(e.to_string(), "invalid JSON at byte 3: x");
    assert_eq!(
        CanonicalJsonError::RowsNotArray("a/b".into()).to_string(),
        "value at rows path \"a/b\" is not an array"
    );
    let _: &dyn std::error::Error = &CanonicalJsonError::TooDeep;
}

// ---- randomized property tests (no extra crates) ----

/// xorshift64*: tiny, deterministic, good enough to drive generators.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Test-side value model (independent of the module's `JsonValue`).
#[derive(Clone)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

const CHARS: &[char] = &[
    'a',
    'b',
    'Z',
    '0',
    ' ',
    '"',
    '\\',
    '/',
    '\n',
    '\t',
    '\r',
    '\u{8}',
    '\u{c}',
    '\u{0}',
    '\u{1f}',
    '\u{7f}',
    'é',
    'ß',
    '中',
    '\u{2028}',
    '\u{ffff}',
    '😀',
    '\u{10ffff}',
];

fn gen_string(rng: &mut Rng) -> String {
    (0..rng.below(6))
        .map(|_| CHARS[rng.below(CHARS.len())])
        .collect()
}

fn gen_digits(rng: &mut Rng, first_nonzero: bool) -> String {
    let len = 1 + rng.below(25);
    (0..len)
        .map(|i| {
            let lo: u8 = if i == 0 && first_nonzero { 1 } else { 0 };
            char::from(b'0' + lo + rng.below(usize::from(10 - lo)) as u8)
        })
        .collect()
}

fn gen_number(rng: &mut Rng) -> String {
    let mut s = String::new();
    if rng.chance(3) {
        s.push('-');
    }
    if rng.chance(4) {
        s.push('0');
    } else {
        s += &gen_digits(rng, true);
    }
    if rng.chance(2) {
        s.push('.');
        s += &gen_digits(rng, false);
    }
    if rng.chance(4) {
        s.push(['e', 'E'][rng.below(2)]);
        s += ["", "+", "-"][rng.below(3)];
        s += &gen_digits(rng, false);
    }
    s
}

fn gen_value(rng: &mut Rng, depth: usize) -> J {
    let kinds = if depth >= 5 { 4 } else { 6 };
    match rng.below(kinds) {
        0 => J::Null,
        1 => J::Bool(rng.chance(2)),
        2 => J::Num(gen_number(rng)),
        3 => J::Str(gen_string(rng)),
        4 => J::Arr(
            (0..rng.below(5))
                .map(|_| gen_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut fields: Vec<(String, J)> = Vec::new();
            for _ in 0..rng.below(5) {
                let key = gen_string(rng);
                if fields.iter().all(|(k, _)| *k != key) {
                    fields.push((key, gen_value(rng, depth + 1)));
                }
            }
            J::Obj(fields)
        }
    }
}

/// Independent expected canonical form.
fn expected(v: &J, out: &mut String) {
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => expected_str(s, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                expected(item, out);
            }
            out.push(']');
        }
        J::Obj(fields) => {
            let mut sorted: Vec<&(String, J)> = fields.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                expected_str(k, out);
                out.push(':');
                expected(item, out);
            }
            out.push('}');
        }
    }
}

fn expected_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn ws(rng: &mut Rng, out: &mut String) {
    for _ in 0..rng.below(3) {
        out.push([' ', '\t', '\n', '\r'][rng.below(4)]);
    }
}

/// Same value, written the way an arbitrary producer might write it.
fn noisy(rng: &mut Rng, v: &J, out: &mut String) {
    ws(rng, out);
    match v {
        J::Null | J::Bool(_) | J::Num(_) => expected(v, out),
        J::Str(s) => noisy_str(rng, s, out),
        J::Arr(items) => {
            out.push('[');
            ws(rng, out);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                noisy(rng, item, out);
            }
            out.push(']');
        }
        J::Obj(fields) => {
            let mut shuffled = fields.clone();
            rng.shuffle(&mut shuffled);
            out.push('{');
            ws(rng, out);
            for (i, (k, item)) in shuffled.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    ws(rng, out);
                }
                noisy_str(rng, k, out);
                ws(rng, out);
                out.push(':');
                noisy(rng, item, out);
            }
            out.push('}');
        }
    }
    ws(rng, out);
}

fn noisy_str(rng: &mut Rng, s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let must_escape = matches!(c, '"' | '\\') || (c as u32) < 0x20;
        match rng.below(3) {
            0 if !must_escape => out.push(c),
            1 => {
                let short = match c {
                    '"' => Some("\\\""),
                    '\\' => Some("\\\\"),
                    '/' => Some("\\/"),
                    '\u{8}' => Some("\\b"),
                    '\u{c}' => Some("\\f"),
                    '\n' => Some("\\n"),
                    '\r' => Some("\\r"),
                    '\t' => Some("\\t"),
                    _ => None,
                };
                match short {
                    Some(esc) => out.push_str(esc),
                    None => unicode_escape(rng, c, out),
                }
            }
            _ => unicode_escape(rng, c, out),
        }
    }
    out.push('"');
}

fn unicode_escape(rng: &mut Rng, c: char, out: &mut String) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        if rng.chance(2) {
            out.push_str(&format!("\\u{:04X}", unit));
        } else {
            out.push_str(&format!("\\u{:04x}", unit));
        }
    }
}

#[test]
fn property_noisy_forms_canonicalize_identically() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..3000 {
        let v = gen_value(&mut rng, 0);
        let mut want = String::new();
        expected(&v, &mut want);
        let mut a = String::new();
        noisy(&mut rng, &v, &mut a);
        let mut b = String::new();
        noisy(&mut rng, &v, &mut b);
        let ca = canonicalize(a.as_bytes())
            .unwrap_or_else(|e| panic!("round {round}: {a:?} rejected: {e}"));
        let cb = canonicalize(b.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(ca.clone()).unwrap(),
            want,
            "round {round}: {a:?}"
        );
        assert_eq!(ca, cb, "round {round}");
        // Idempotent: canonical output is a fixed point.
        assert_eq!(canonicalize(&ca).unwrap(), ca, "round {round}");
    }
}

#[test]
fn property_unordered_rows_ignores_row_order() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for round in 0..500 {
        let mut rows: Vec<J> = (0..rng.below(8)).map(|_| gen_value(&mut rng, 1)).collect();
        let doc = |rows: &[J], rng: &mut Rng| {
            let v = J::Obj(vec![
                ("meta".into(), J::Num("1".into())),
                (
                    "data".into(),
                    J::Obj(vec![("offers".into(), J::Arr(rows.to_vec()))]),
                ),
            ]);
            let mut s = String::new();
            noisy(rng, &v, &mut s);
            s
        };
        let a = doc(&rows, &mut rng);
        rng.shuffle(&mut rows);
        let b = doc(&rows, &mut rng);
        let path = ["data", "offers"];
        let ua = canonicalize_unordered_rows(a.as_bytes(), &path).unwrap();
        let ub = canonicalize_unordered_rows(b.as_bytes(), &path).unwrap();
        assert_eq!(ua, ub, "round {round}");
        // Idempotent under the same rule.
        assert_eq!(canonicalize_unordered_rows(&ua, &path).unwrap(), ua);
        // Rows in the sorted output are exactly the sorted canonical rows.
        let mut sorted_rows = canonical_rows(a.as_bytes(), &path).unwrap();
        sorted_rows.sort();
        assert_eq!(canonical_rows(&ua, &path).unwrap(), sorted_rows);
    }
}

#[test]
fn property_mutated_input_never_panics() {
    const NOISE: &[u8] = b"{}[]\",:\\u0e-+.1 \xff\x00";
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..3000 {
        let v = gen_value(&mut rng, 0);
        let mut s = String::new();
        noisy(&mut rng, &v, &mut s);
        let mut bytes = s.into_bytes();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(3) {
                0 if at < bytes.len() => {
                    bytes.remove(at);
                }
                1 if at < bytes.len() => bytes[at] = rng.next() as u8,
                _ => bytes.insert(at, NOISE[rng.below(NOISE.len())]),
            }
        }
        // Whatever happens, no panic; and success must be a fixed point.
        if let Ok(c) = canonicalize(&bytes) {
            assert_eq!(canonicalize(&c).unwrap(), c);
        }
        let _ = canonicalize_unordered_rows(&bytes, &["x"]);
    }
}
