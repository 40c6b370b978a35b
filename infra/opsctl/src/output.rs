//! Text output shared by the commands: one value as text, a padded table, a list of named
//! fields, and the `--json` document.

use crate::CliError;
use serde_json::Value;
use std::io::Write;

/// A value as one cell of text: `-` for null, strings without quotes, anything else as JSON.
pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A plain-text table: a header row, then one row per entry, columns padded to fit.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// `key  value` lines for the keys `value` has and that are not null, keys padded to fit.
pub(crate) fn fields(out: &mut dyn Write, value: &Value, keys: &[&str]) -> std::io::Result<()> {
    let width = keys.iter().map(|k| k.len()).max().unwrap_or(0);
    for key in keys {
        match value.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => writeln!(out, "{key:<width$}  {}", text(v))?,
        }
    }
    Ok(())
}

/// `LABEL (N):` and one indented line per element of the array `items`; nothing when empty.
pub(crate) fn list(out: &mut dyn Write, label: &str, items: &Value) -> Result<(), CliError> {
    let items = items.as_array().cloned().unwrap_or_default();
    if !items.is_empty() {
        writeln!(out, "{label} ({}):", items.len()).map_err(io)?;
        for item in items {
            writeln!(out, "  {}", text(&item)).map_err(io)?;
        }
    }
    Ok(())
}

/// The answer as one pretty-printed JSON document (`--json`).
pub(crate) fn emit_json(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    )
    .map_err(io)
}

pub(crate) fn io(e: std::io::Error) -> CliError {
    CliError::Other(format!("writing output: {e}"))
}
