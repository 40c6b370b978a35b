//! CPU per row of a body read through a connector definition (docs/benchmarks.md, "Connector
//! mapping CPU per row"), against a plain parse of the same bytes with the format's crate
//! alone, for each sample supplier of `tests/fixtures/suppliers` at 400 and 5,000 rows.
//!
//! - mapping: `normalize_mapped` under the supplier's definition (read and compiled once,
//!   outside the timing): decode, parse, every field's steps and conversion, the row rules,
//!   and the payload's fingerprint (sha256 of the bytes, or of the canonical JSON).
//! - plain parse: every value read into an owned string. CSV: the body decoded from
//!   Windows-1252 (a byte-to-char table, as any reader of that text must) and read by `csv`
//!   with the same delimiter, every field of every record copied out. JSON:
//!   `serde_json::from_slice::<Value>`. XML: `quick_xml::Reader` over the UTF-8-checked text,
//!   every event read, text, CDATA, entity references and attribute values unescaped into
//!   owned strings (no namespace resolution: that is the mapping's work).
//! - plain parse + sha256: the same, and sha256 of the body (the mapping fingerprints it).
//!
//! The bodies repeat the fixture's rows, each with its own sku, so every row is valid (the
//! bench checks that none is refused). The three variants of one body run in alternating
//! batches of ~40 ms, 15 rounds, each timed in this thread's CPU time; the median batch is
//! divided by the rows.
//!
//! `cargo bench -p feedsafe --bench mapping` (release); `-- --quick` checks that it works
//! (small bodies, one round; not the record); `-- --stages` shows where the mapping's time
//! and allocations go; `-- --spin SUPPLIER` runs one supplier's mapping for a profiler.

use feedsafe::domain::definition::Definition;
use feedsafe::domain::fingerprint::{CanonicalizationRule, Fingerprint};
use feedsafe::domain::hashing::sha256;
use feedsafe::domain::mapping::{Mapping, RowRead};
use feedsafe::domain::normalize::{normalize_mapped, MappedRow};
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting allocations on this thread while `--stages` asks it to
/// (a relaxed load otherwise).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations (and reallocations) one call of `f` makes.
fn allocations(f: &mut dyn FnMut()) -> u64 {
    COUNTING.store(true, Ordering::Relaxed);
    let before = ALLOCATIONS.with(Cell::get);
    f();
    let after = ALLOCATIONS.with(Cell::get);
    COUNTING.store(false, Ordering::Relaxed);
    after - before
}

fn fixture(supplier: &str, file: &str) -> Vec<u8> {
    let path = format!(
        "{}/../tests/fixtures/suppliers/{supplier}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `text` with `-{i:05}` put in before the first `end` at or after `after`.
fn splice_at(text: &str, after: usize, end: &str, i: usize) -> String {
    let at = after + text[after..].find(end).expect("end of the sku");
    format!("{}-{i:05}{}", &text[..at], &text[at..])
}

/// lieferant-de: the header, then the sample's lines in turn, each sku made unique
/// (Windows-1252 bytes kept as they are: the suffix is ASCII).
fn csv_body(rows: usize) -> Vec<u8> {
    let sample = fixture("lieferant-de", "bestand-2026-11-29.csv");
    let lines: Vec<&[u8]> = sample
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect();
    let mut body = lines[0].to_vec();
    body.extend_from_slice(b"\r\n");
    for i in 0..rows {
        let line = lines[1 + i % (lines.len() - 1)];
        let sku_end = line.iter().position(|b| *b == b';').expect("a ;");
        body.extend_from_slice(&line[..sku_end]);
        body.extend_from_slice(format!("-{i:05}").as_bytes());
        body.extend_from_slice(&line[sku_end..]);
        body.extend_from_slice(b"\r\n");
    }
    body
}

/// A JSON sample with its rows array (at `rows_at`) repeated, `sku_member` made unique.
fn json_body(supplier: &str, file: &str, rows_at: &[&str], sku_member: &str, n: usize) -> Vec<u8> {
    let mut document: Value = serde_json::from_slice(&fixture(supplier, file)).unwrap();
    let mut slot = &mut document;
    for step in rows_at {
        slot = &mut slot[*step];
    }
    let sample = slot.as_array().expect("a rows array").clone();
    let rows: Vec<Value> = (0..n)
        .map(|i| {
            let mut row = sample[i % sample.len()].clone();
            let sku = row[sku_member].as_str().expect("a sku").to_owned();
            row[sku_member] = Value::String(format!("{sku}-{i:05}"));
            row
        })
        .collect();
    *slot = Value::Array(rows);
    serde_json::to_vec(&document).unwrap()
}

/// xml-catalog: the sample's `<article>` elements in turn, each `supplierPartId` made unique.
fn xml_body(rows: usize) -> Vec<u8> {
    let sample = String::from_utf8(fixture("xml-catalog", "catalog-2026-11-29.xml")).unwrap();
    let open = sample.find("<articles>").expect("<articles>") + "<articles>".len();
    let close = sample.find("</articles>").expect("</articles>");
    let inner = &sample[open..close];
    let articles: Vec<&str> = inner
        .split_inclusive("</article>")
        .filter(|a| a.contains("<article "))
        .collect();
    let tail = inner.rsplit("</article>").next().unwrap_or_default();
    let mut body = sample[..open].to_owned();
    for i in 0..rows {
        let article = articles[i % articles.len()];
        let id = article.find("supplierPartId=\"").expect("an id") + "supplierPartId=\"".len();
        body.push_str(&splice_at(article, id, "\"", i));
    }
    body.push_str(tail);
    body.push_str(&sample[close..]);
    body.into_bytes()
}

/// Windows-1252 as text, as a plain reader would decode it: runs of ASCII copied, every other
/// byte its code point, 0x80-0x9F by table (the same technique as the mapping's decoder).
fn windows_1252(body: &[u8]) -> String {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8D}', 'Ž',
        '\u{8F}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9D}',
        'ž', 'Ÿ',
    ];
    let mut text = String::with_capacity(body.len() + body.len() / 8);
    let mut rest = body;
    loop {
        let ascii = rest
            .iter()
            .position(|b| !b.is_ascii())
            .unwrap_or(rest.len());
        text.push_str(std::str::from_utf8(&rest[..ascii]).unwrap());
        let Some((&b, tail)) = rest[ascii..].split_first() else {
            return text;
        };
        text.push(match b {
            0x80..=0x9F => HIGH[usize::from(b - 0x80)],
            _ => char::from(b),
        });
        rest = tail;
    }
}

fn plain_csv(body: &[u8]) -> usize {
    let text = windows_1252(body);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b';')
        .from_reader(text.as_bytes());
    let mut fields = 0;
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    for record in reader.records() {
        let owned: Vec<String> = record.unwrap().iter().map(str::to_owned).collect();
        fields += owned.len();
        black_box(owned);
    }
    black_box(header);
    fields
}

fn plain_json(body: &[u8]) -> usize {
    let value: Value = serde_json::from_slice(body).unwrap();
    let size = value.as_object().map_or(0, serde_json::Map::len);
    black_box(value);
    size
}

fn plain_xml(body: &[u8]) -> usize {
    use quick_xml::events::Event;
    let text = std::str::from_utf8(body).unwrap();
    let mut reader = quick_xml::Reader::from_str(text);
    let mut values = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) | Event::Empty(e) => {
                for attribute in e.attributes() {
                    let attribute = attribute.unwrap();
                    let value = attribute
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .unwrap();
                    values.push(value.into_owned());
                }
            }
            Event::Text(t) => values.push(t.xml10_content().into_owned()),
            Event::CData(c) => values.push(c.xml10_content().into_owned()),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().unwrap() {
                    Some(c) => c.to_string(),
                    None => predefined(&r.clone().into_inner()).to_owned(),
                };
                values.push(resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let count = values.len();
    black_box(values);
    count
}

fn predefined(name: &str) -> &'static str {
    match name {
        "lt" => "<",
        "gt" => ">",
        "amp" => "&",
        "apos" => "'",
        "quot" => "\"",
        other => panic!("entity {other}"),
    }
}

/// One body under one supplier's definition.
struct Case {
    label: &'static str,
    rows: usize,
    body: Vec<u8>,
    definition: Definition,
    mapping: Mapping,
    rule: CanonicalizationRule,
    plain: fn(&[u8]) -> usize,
}

fn case(
    supplier: &str,
    label: &'static str,
    rows: usize,
    body: Vec<u8>,
    plain: fn(&[u8]) -> usize,
) -> Case {
    let document: Value = serde_json::from_slice(&fixture(supplier, "definition.json")).unwrap();
    let definition = Definition::read(&document).unwrap_or_else(|p| panic!("{p:#?}"));
    let mapping = Mapping::compile(&definition).unwrap_or_else(|p| panic!("{p:#?}"));
    let rule = definition.canonicalization();
    let normalized = normalize_mapped(&mapping, rule, &body).unwrap();
    assert_eq!(
        (normalized.rows.len(), normalized.refused.len()),
        (rows, 0),
        "{supplier}: every generated row is valid"
    );
    assert!(plain(&body) > 0);
    Case {
        label,
        rows,
        body,
        definition,
        mapping,
        rule,
        plain,
    }
}

fn cases(sizes: &[usize]) -> Vec<Case> {
    let mut all = Vec::new();
    for &n in sizes {
        all.push(case(
            "lieferant-de",
            "CSV, Windows-1252 (lieferant-de)",
            n,
            csv_body(n),
            plain_csv,
        ));
        let distributor = json_body(
            "distributor-api",
            "page-1.json",
            &["data", "items"],
            "mpn",
            n,
        );
        all.push(case(
            "distributor-api",
            "JSON, regex on stock (distributor-api)",
            n,
            distributor,
            plain_json,
        ));
        all.push(case(
            "xml-catalog",
            "XML, namespaces (xml-catalog)",
            n,
            xml_body(n),
            plain_xml,
        ));
        let snapshot = json_body(
            "snapshot-webhooks",
            "snapshot-8812.json",
            &["stock"],
            "part",
            n,
        );
        all.push(case(
            "snapshot-webhooks",
            "JSON, unordered rows (snapshot-webhooks)",
            n,
            snapshot,
            plain_json,
        ));
    }
    all
}

/// This thread's CPU time in seconds: what the work costs, whatever else the host runs (a
/// preempted batch is not charged for the wait).
fn cpu_seconds() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for clock_gettime to write.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0;
    assert!(ok, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
}

/// Median CPU seconds per call of each of `variants`, from `rounds` rounds in which every
/// variant runs one batch (so a host that changes speed slows them alike).
fn medians(variants: &mut [&mut dyn FnMut()], batch: Duration, rounds: usize) -> Vec<f64> {
    let calls: Vec<u32> = variants
        .iter_mut()
        .map(|f| {
            for _ in 0..3 {
                f();
            }
            let probe = Instant::now();
            let mut calls = 0u32;
            while probe.elapsed() < batch {
                f();
                calls += 1;
            }
            calls
        })
        .collect();
    let mut times = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for ((f, calls), times) in variants.iter_mut().zip(&calls).zip(&mut times) {
            let at = cpu_seconds();
            for _ in 0..*calls {
                f();
            }
            times.push((cpu_seconds() - at) / f64::from(*calls));
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}

/// `-- --stages`: where the mapping's time goes, per row: reading the rows (decode, parse,
/// every field's steps and conversion), the fingerprint alone, and the whole; the
/// allocations each makes (counted, not timed); and compiling the definition's mapping.
fn stages(cases: &[Case]) {
    println!("| format (supplier) | rows | read ns/row | fingerprint ns/row | normalize_mapped ns/row | allocations/row: plain, read, normalize_mapped | Mapping::compile µs |");
    println!("|---|---:|---:|---:|---:|---|---:|");
    for case in cases {
        let body = case.body.as_slice();
        let names = case.mapping.json_rows_names().unwrap_or_default();
        let path: Vec<&str> = names.iter().map(String::as_str).collect();
        // The rows as the normalizer is handed them, each dropped at once.
        let mut read = || {
            let mut each = |row: RowRead<MappedRow<'_>>, _| drop(black_box(row));
            let rule = Some(case.rule);
            black_box(
                case.mapping
                    .read_each(black_box(body), 5_000, rule, &mut each),
            )
            .unwrap();
        };
        let mut fingerprint = || {
            black_box(Fingerprint::compute(case.rule, black_box(body), &path).unwrap());
        };
        let mut mapped = || {
            black_box(normalize_mapped(&case.mapping, case.rule, black_box(body)).unwrap());
        };
        let mut compile = || {
            black_box(Mapping::compile(black_box(&case.definition)).unwrap());
        };
        let t = medians(
            &mut [&mut read, &mut fingerprint, &mut mapped, &mut compile],
            Duration::from_millis(40),
            9,
        );
        let per_row = |s: f64| s * 1e9 / case.rows as f64;
        let mut plain = || {
            black_box((case.plain)(black_box(body)));
        };
        let counts = [
            allocations(&mut plain),
            allocations(&mut read),
            allocations(&mut mapped),
        ]
        .map(|n| n as f64 / case.rows as f64);
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.1}, {:.1}, {:.1} | {:.1} |",
            case.label,
            case.rows,
            per_row(t[0]),
            per_row(t[1]),
            per_row(t[2]),
            counts[0],
            counts[1],
            counts[2],
            t[3] * 1e6
        );
    }
}

/// `-- --spin SUPPLIER`: the mapping of that supplier's 400-row body, again and again for five
/// seconds, for a profiler to sample (`perf record`); prints nothing worth keeping.
fn spin(supplier: &str) {
    let cases = cases(&[400]);
    let case = cases
        .iter()
        .find(|c| c.label.contains(supplier))
        .unwrap_or_else(|| panic!("no sample supplier {supplier:?}"));
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < Duration::from_secs(5) {
        black_box(normalize_mapped(&case.mapping, case.rule, black_box(&case.body)).unwrap());
        runs += 1;
    }
    println!("{}: {runs} runs", case.label);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--stages") {
        return stages(&cases(&[400]));
    }
    if let Some(at) = args.iter().position(|a| a == "--spin") {
        return spin(args.get(at + 1).map_or("lieferant-de", String::as_str));
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (sizes, batch, rounds): (&[usize], _, _) = match quick {
        true => (&[40], Duration::from_millis(5), 1),
        false => (&[400, 5_000], Duration::from_millis(40), 15),
    };
    println!("| format (supplier) | rows | KB | plain parse ns/row | plain + sha256 ns/row | mapping ns/row | mapping / (plain + sha256) | mapping / plain |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for case in cases(sizes) {
        let body = case.body.as_slice();
        let mut plain = || {
            black_box((case.plain)(black_box(body)));
        };
        let mut plain_sha = || {
            black_box((case.plain)(black_box(body)));
            black_box(sha256(black_box(body)));
        };
        let mut mapped = || {
            black_box(normalize_mapped(&case.mapping, case.rule, black_box(body)).unwrap());
        };
        let t = medians(
            &mut [&mut plain, &mut plain_sha, &mut mapped],
            batch,
            rounds,
        );
        let per_row = |s: f64| s * 1e9 / case.rows as f64;
        println!(
            "| {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.2} x | {:.2} x |",
            case.label,
            case.rows,
            body.len() as f64 / 1000.0,
            per_row(t[0]),
            per_row(t[1]),
            per_row(t[2]),
            t[2] / t[1],
            t[2] / t[0]
        );
    }
}
