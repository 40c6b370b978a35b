//! `opsctl connector preview DEFINITION SAMPLE`: what a supplier's sample would give under a
//! definition, from the service's preview route (nothing is stored).

use crate::commands::answer;
use crate::output::{fields, io, table, text};
use crate::{Api, CliError};
use base64::Engine;
use serde_json::{json, Value};
use std::io::Write;

/// `connector preview DEFINITION_FILE SAMPLE_FILE`.
pub(crate) fn connector_preview(
    api: &Api,
    definition: &str,
    sample: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let read = |path: &str| {
        std::fs::read(path).map_err(|e| CliError::Other(format!("reading {path}: {e}")))
    };
    let document: Value = serde_json::from_slice(&read(definition)?)
        .map_err(|e| CliError::Other(format!("{definition} is not JSON: {e}")))?;
    let body = json!({
        "definition": document,
        "sample_base64": base64::engine::general_purpose::STANDARD.encode(read(sample)?),
    });
    let value = api.call("POST", "/v1/connector-previews", Some(&body))?;
    answer(api, out, &value, print_preview)
}

fn print_preview(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    fields(
        out,
        value,
        &["connector", "outcome", "refusal", "fingerprint"],
    )
    .map_err(io)?;
    let identity = &value["identity"];
    let named_by = match (identity["value"].as_str(), identity["from"].as_str()) {
        (Some(v), _) => v.to_owned(),
        (None, Some(from)) => format!("({from})"),
        (None, None) => "-".to_owned(),
    };
    writeln!(
        out,
        "identity     {} ({}): {named_by}",
        text(&identity["kind"]),
        text(&identity["strength"])
    )
    .map_err(io)?;
    let rows: Vec<Vec<String>> = cells(
        value,
        "rows",
        &["item", "quantity", "price", "currency", "observed_at"],
    );
    writeln!(out, "\nrows ({}):", rows.len()).map_err(io)?;
    write!(
        out,
        "{}",
        table(
            &["ITEM", "QUANTITY", "PRICE", "CURRENCY", "OBSERVED_AT"],
            &rows
        )
    )
    .map_err(io)?;
    let refused = cells(value, "refused_rows", &["place", "code", "reason"]);
    if !refused.is_empty() {
        writeln!(out, "\nrefused rows ({}):", refused.len()).map_err(io)?;
        write!(out, "{}", table(&["PLACE", "CODE", "REASON"], &refused)).map_err(io)?;
    }
    Ok(())
}

/// The `keys` of each element of the array `value[name]`, as text.
fn cells(value: &Value, name: &str, keys: &[&str]) -> Vec<Vec<String>> {
    value[name]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| keys.iter().map(|k| text(&row[*k])).collect())
        .collect()
}
