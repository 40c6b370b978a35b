//! `opsctl connector put|get|preview`: a connector's definition stored as its next version,
//! shown with its versions, and what a supplier's sample would give under a definition (a
//! draft file or the stored one; nothing is stored by a preview).

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
    let read = read_file;
    let document: Value = serde_json::from_slice(&read(definition)?)
        .map_err(|e| CliError::Other(format!("{definition} is not JSON: {e}")))?;
    let body = json!({
        "definition": document,
        "sample_base64": base64::engine::general_purpose::STANDARD.encode(read(sample)?),
    });
    let value = api.call("POST", "/v1/connector-previews", Some(&body))?;
    answer(api, out, &value, print_preview)
}

/// `connector preview --connector ID SAMPLE_FILE`: under the stored definition.
pub(crate) fn stored_preview(
    api: &Api,
    connector: &str,
    sample: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let body = json!({
        "sample_base64": base64::engine::general_purpose::STANDARD.encode(read_file(sample)?),
    });
    let path = format!("/v1/connectors/{}/preview", crate::encode_path(connector));
    let value = api.call("POST", &path, Some(&body))?;
    answer(api, out, &value, print_preview)
}

/// `connector put DEFINITION_FILE [--if-match VERSION]`. Without `--if-match`, the version read
/// just before is the one replaced (as `apply` tools do); with it, only that version is.
pub(crate) fn connector_put(
    api: &Api,
    definition: &str,
    if_match: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let document: Value = serde_json::from_slice(&read_file(definition)?)
        .map_err(|e| CliError::Other(format!("{definition} is not JSON: {e}")))?;
    let id = document["connector"]
        .as_str()
        .ok_or_else(|| CliError::Other(format!("{definition} names no connector")))?;
    let path = format!("/v1/connectors/{}", crate::encode_path(id));
    let current = match if_match {
        Some(version) => Some(version.to_owned()),
        None => current_version(api, &path)?,
    };
    let value = api.call_with("PUT", &path, Some(&document), current.as_deref())?;
    answer(api, out, &value, |out, value| {
        fields(out, value, &["connector", "version", "outcome"]).map_err(io)
    })
}

/// The connector's current version, `None` when there is no such connector yet.
fn current_version(api: &Api, path: &str) -> Result<Option<String>, CliError> {
    match api.call("GET", path, None) {
        Ok(value) => Ok(value["version"].as_u64().map(|v| v.to_string())),
        Err(CliError::Api { status: 404, .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

/// `connector get CONNECTOR`.
pub(crate) fn connector_get(
    api: &Api,
    connector: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = format!("/v1/connectors/{}", crate::encode_path(connector));
    let value = api.call("GET", &path, None)?;
    answer(api, out, &value, print_definition)
}

fn print_definition(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    fields(
        out,
        value,
        &[
            "connector",
            "source_account",
            "transport",
            "payload_format",
            "version",
        ],
    )
    .map_err(io)?;
    let versions = cells(
        value,
        "versions",
        &["version", "recorded_at", "recorded_by"],
    );
    writeln!(out, "\nversions ({}):", versions.len()).map_err(io)?;
    write!(
        out,
        "{}",
        table(&["VERSION", "RECORDED_AT", "RECORDED_BY"], &versions)
    )
    .map_err(io)?;
    if !value["definition"].is_null() {
        let text = serde_json::to_string_pretty(&value["definition"]).unwrap_or_default();
        writeln!(out, "\ndefinition:\n{text}").map_err(io)?;
    }
    Ok(())
}

fn read_file(path: &str) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::Other(format!("reading {path}: {e}")))
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
