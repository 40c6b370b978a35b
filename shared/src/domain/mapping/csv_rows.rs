//! CSV bodies: decoded from their declared encoding, the first `skip_rows` lines dropped, then
//! records split by the declared delimiter and quote; each field taken by column name (from
//! the header row) or by position. A row's place is the line it starts on in the file.

use super::{EachRow, Mapping, PageRead, Raw, RowRead, Source, TimeMemos};
use crate::domain::definition::Csv;
use std::borrow::Cow;

pub(super) fn read(
    mapping: &Mapping,
    csv: &Csv,
    body: &[u8],
    max_rows: usize,
    each: &mut EachRow<'_>,
) -> Result<PageRead, String> {
    let text = super::text::decode(csv.encoding, body)?;
    let (skipped, records) = skip_lines(&text, csv.skip_rows);
    let mut reader = ::csv::ReaderBuilder::new()
        .delimiter(ascii(&csv.delimiter, b','))
        .quote(ascii(&csv.quote, b'"'))
        .has_headers(csv.header)
        .flexible(true)
        .from_reader(records.as_bytes());
    let columns = if csv.header {
        let header = reader.headers().map_err(|e| format!("CSV header: {e}"))?;
        column_indexes(mapping, header)?
    } else {
        Vec::new()
    };
    let mut count = 0;
    let mut lines = Lines::default();
    // One record read into again and again (the fields are copied out where they are kept).
    let mut record = ::csv::StringRecord::new();
    let mut memo = TimeMemos::default();
    while reader
        .read_record(&mut record)
        .map_err(|e| format!("CSV: {e}"))?
    {
        // With CRLF line ends a record's position is the LF that ended the line before it:
        // counted with it, the line is the record's own.
        let start = record.position().map_or(0, |p| p.byte() as usize);
        let line = lines.at(records, start + 1) + skipped;
        if record.iter().all(str::is_empty) {
            continue;
        }
        if count == max_rows {
            return Err(format!("more than {max_rows} rows"));
        }
        count += 1;
        let row = mapping.row_of(&mut memo, None, |field| {
            Ok(value(field_index(&columns, field), &record))
        });
        let place = super::place("line ", line);
        each(
            RowRead {
                place,
                row,
                source: Vec::new(),
            },
            None,
        );
    }
    Ok(PageRead::default())
}

/// Line numbers of byte offsets, counted on from the last one asked for (offsets only grow).
#[derive(Default)]
struct Lines {
    offset: usize,
    newlines: u64,
}

impl Lines {
    /// The 1-based line of byte offset `at` in `text`.
    fn at(&mut self, text: &str, at: usize) -> u64 {
        let at = at.clamp(self.offset, text.len());
        self.newlines += text.as_bytes()[self.offset..at]
            .iter()
            .filter(|b| **b == b'\n')
            .count() as u64;
        self.offset = at;
        self.newlines + 1
    }
}

/// The text after its first `count` lines, and how many lines that was.
fn skip_lines(text: &str, count: u32) -> (u64, &str) {
    let mut rest = text;
    let mut skipped = 0;
    while skipped < u64::from(count) {
        match rest.find('\n') {
            Some(end) => rest = &rest[end + 1..],
            None => rest = "",
        }
        skipped += 1;
    }
    (skipped, rest)
}

fn ascii(setting: &str, default: u8) -> u8 {
    setting
        .bytes()
        .next()
        .filter(u8::is_ascii)
        .unwrap_or(default)
}

/// Each field's column index (by the field's slot) from its name in the header, the price
/// breaks' columns among them; every column the header lacks is named in one refusal.
fn column_indexes(
    mapping: &Mapping,
    header: &::csv::StringRecord,
) -> Result<Vec<Option<usize>>, String> {
    let mut found = vec![None; mapping.slots];
    let mut missing = Vec::new();
    for field in mapping.sourced() {
        if let Source::Column(name) = &field.source {
            match header.iter().position(|h| h.trim() == name.trim()) {
                Some(index) => {
                    if let Some(slot) = found.get_mut(field.slot) {
                        *slot = Some(index);
                    }
                }
                None => missing.push(format!("{name:?}")),
            }
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        let shown: Vec<String> = header.iter().take(32).map(|h| format!("{h:?}")).collect();
        Err(format!(
            "the header lacks the column{} {} (it has {})",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            shown.join(", ")
        ))
    }
}

/// Where a field's value is in a record: its column or position; `None` for a constant.
fn field_index(columns: &[Option<usize>], field: &super::MappedField) -> Option<usize> {
    match &field.source {
        Source::Column(_) => columns.get(field.slot).copied().flatten(),
        Source::Position(index) => Some(*index),
        Source::Path(_) | Source::Xml(_) | Source::Constant => None,
    }
}

/// The field's text in `record` (an empty cell or one past the record's end is absent).
fn value(index: Option<usize>, record: &::csv::StringRecord) -> Option<Raw<'_>> {
    index
        .and_then(|i| record.get(i))
        .filter(|v| !v.is_empty())
        .map(|v| Raw::Text(Cow::Borrowed(v)))
}
