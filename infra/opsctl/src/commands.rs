//! One function per subcommand: the call it makes, then its answer, as the API's JSON document
//! with `--json`, else as text.

use crate::output::{emit_json, fields, io, list, table, text};
use crate::{
    encode_path, encode_query, redrive, redrive_target, Api, CliError, RedriveProgress, Resolution,
    Settings,
};
use serde_json::{json, Value};
use std::io::Write;

/// With `--json` the answer as the API gave it, else `human`'s text.
pub(crate) fn answer(
    api: &Api,
    out: &mut dyn Write,
    value: &Value,
    human: impl FnOnce(&mut dyn Write, &Value) -> Result<(), CliError>,
) -> Result<(), CliError> {
    if api.settings.json {
        return emit_json(out, value);
    }
    human(out, value)
}

const QUARANTINE_HEADERS: [&str; 6] = [
    "ID",
    "KIND",
    "REASON",
    "STATUS",
    "FIRST SEEN",
    "DELIVERY KEY",
];

fn quarantine_rows(entries: &[Value]) -> Vec<Vec<String>> {
    entries
        .iter()
        .map(|e| {
            vec![
                text(&e["quarantine_id"]),
                text(&e["kind"]),
                text(&e["reason_code"]),
                text(&e["status"]),
                text(&e["first_seen_at"]),
                text(&e["delivery_key"]),
            ]
        })
        .collect()
}

/// `quarantine list [--status S]`.
pub(crate) fn quarantine_list(
    api: &Api,
    status: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = match status {
        Some(s) => format!("/v1/quarantine?status={}", encode_query(s)),
        None => "/v1/quarantine".to_owned(),
    };
    let value = api.call("GET", &path, None)?;
    answer(api, out, &value, print_quarantine_list)
}

fn print_quarantine_list(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    let entries = value["entries"].as_array().cloned().unwrap_or_default();
    write!(
        out,
        "{}",
        table(&QUARANTINE_HEADERS, &quarantine_rows(&entries))
    )
    .map_err(io)?;
    writeln!(
        out,
        "{} {} entr{}",
        entries.len(),
        text(&value["status"]),
        if entries.len() == 1 { "y" } else { "ies" }
    )
    .map_err(io)
}

/// `quarantine show ID`.
pub(crate) fn quarantine_show(api: &Api, id: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call("GET", &format!("/v1/quarantine/{}", encode_path(id)), None)?;
    answer(api, out, &value, |out, value| {
        print_quarantine_entry(out, value).map_err(io)
    })
}

const QUARANTINE_FIELDS: [&str; 14] = [
    "quarantine_id",
    "kind",
    "reason_code",
    "status",
    "tenant",
    "connector",
    "delivery_key",
    "first_seen_at",
    "stored_fingerprint",
    "received_fingerprint",
    "stored_artifact_key",
    "evidence_key",
    "evidence_sha256",
    "message",
];

const RESOLUTION_FIELDS: [&str; 6] = [
    "action",
    "reason",
    "delivery_id",
    "new_delivery_key",
    "requested_at",
    "resolved_at",
];

/// One quarantine entry: its fields, its resolution if any, and the diff it carries.
fn print_quarantine_entry(out: &mut dyn Write, entry: &Value) -> std::io::Result<()> {
    fields(out, entry, &QUARANTINE_FIELDS)?;
    if let Some(resolution) = entry.get("resolution").filter(|r| !r.is_null()) {
        writeln!(out, "\nresolution:")?;
        fields(out, resolution, &RESOLUTION_FIELDS)?;
    }
    let Some(diff) = entry.get("diff") else {
        return Ok(());
    };
    if diff["available"] == Value::Bool(false) {
        return writeln!(out, "\ndiff unavailable: {}", text(&diff["reason"]));
    }
    match diff["format"].as_str() {
        Some("json") => print_json_diff(out, diff),
        _ => print_byte_diff(out, diff),
    }
}

/// A JSON diff: one row per differing path, a side that lacks the path shown as `(absent)`.
fn print_json_diff(out: &mut dyn Write, diff: &Value) -> std::io::Result<()> {
    let differences = diff["differences"].as_array().cloned().unwrap_or_default();
    writeln!(
        out,
        "\ndiff (stored -> received, {} difference(s){}):",
        text(&diff["difference_count"]),
        if diff["truncated"] == Value::Bool(true) {
            ", list truncated"
        } else {
            ""
        }
    )?;
    let rows: Vec<Vec<String>> = differences
        .iter()
        .map(|d| {
            let side = |v: Option<&Value>| v.map(|v| v.to_string()).unwrap_or("(absent)".into());
            vec![
                text(&d["path"]),
                side(d.get("stored")),
                side(d.get("received")),
            ]
        })
        .collect();
    write!(out, "{}", table(&["PATH", "STORED", "RECEIVED"], &rows))?;
    if let Some(note) = diff["note"].as_str() {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// Any other diff: sizes, the first differing byte, and the differing lines when given.
fn print_byte_diff(out: &mut dyn Write, diff: &Value) -> std::io::Result<()> {
    writeln!(
        out,
        "\ndiff ({}): stored {} bytes, received {} bytes, first difference at byte {}",
        text(&diff["format"]),
        text(&diff["stored_bytes"]),
        text(&diff["received_bytes"]),
        text(&diff["first_difference_offset"])
    )?;
    if let Some(lines) = diff["line_differences"].as_array() {
        let rows: Vec<Vec<String>> = lines
            .iter()
            .map(|l| vec![text(&l["line"]), text(&l["stored"]), text(&l["received"])])
            .collect();
        write!(out, "{}", table(&["LINE", "STORED", "RECEIVED"], &rows))?;
    }
    Ok(())
}

/// `quarantine resolve ID --reject|--accept-as DELIVERY_ID --reason R`.
pub(crate) fn quarantine_resolve(
    api: &Api,
    id: &str,
    resolution: &Resolution,
    reason: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let body = match resolution {
        Resolution::Reject => json!({"action": "reject", "reason": reason}),
        Resolution::AcceptAs(delivery_id) => json!({
            "action": "accept_as_new_delivery",
            "delivery_id": delivery_id,
            "reason": reason,
        }),
    };
    let value = api.call(
        "POST",
        &format!("/v1/quarantine/{}/resolve", encode_path(id)),
        Some(&body),
    )?;
    answer(api, out, &value, |out, value| {
        match value["new_delivery_key"].as_str() {
            Some(key) => writeln!(
                out,
                "quarantine entry {id}: {}; new delivery {key} enqueued (the original delivery is unchanged)",
                text(&value["status"])
            ),
            None => writeln!(out, "quarantine entry {id}: {}", text(&value["status"])),
        }
        .map_err(io)
    })
}

const DELIVERY_FIELDS: [&str; 18] = [
    "delivery_key",
    "state",
    "fingerprint",
    "payload_format",
    "identity_strength",
    "identity_basis",
    "attempts",
    "first_attempt_at",
    "last_attempt_at",
    "retrieved_at",
    "committed_at",
    "epoch",
    "dedup_confidence",
    "previous_epoch",
    "run",
    "artifact_key",
    "payload_sha256",
    "note",
];

/// `delivery show KEY`.
pub(crate) fn delivery_show(api: &Api, key: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call("GET", &format!("/v1/deliveries/{}", encode_path(key)), None)?;
    answer(api, out, &value, print_delivery)
}

/// A delivery's fields, its observations, and its quarantine entries.
fn print_delivery(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    fields(out, value, &DELIVERY_FIELDS).map_err(io)?;
    list(out, "observations", &value["observation_ids"])?;
    let entries = value["quarantine"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() {
        writeln!(out, "quarantine: none").map_err(io)
    } else {
        writeln!(out, "quarantine ({}):", entries.len()).map_err(io)?;
        write!(
            out,
            "{}",
            table(&QUARANTINE_HEADERS, &quarantine_rows(&entries))
        )
        .map_err(io)
    }
}

/// `delivery artifact KEY`.
pub(crate) fn delivery_artifact(api: &Api, key: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call(
        "GET",
        &format!("/v1/deliveries/{}/artifact", encode_path(key)),
        None,
    )?;
    answer(api, out, &value, |out, value| {
        fields(
            out,
            value,
            &["artifact_key", "sha256", "expires_in_seconds", "url"],
        )
        .map_err(io)
    })
}

const RUN_FIELDS: [&str; 14] = [
    "run_id",
    "tenant",
    "connector",
    "status",
    "credential_ref",
    "started_at",
    "deadline",
    "page_count",
    "pages_requested",
    "pages_committed",
    "pages_missing",
    "missing_pages",
    "completed_at",
    "updated_at",
];

/// `run show RUN_ID`.
pub(crate) fn run_show(api: &Api, run_id: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call("GET", &format!("/v1/runs/{}", encode_path(run_id)), None)?;
    answer(api, out, &value, |out, value| {
        fields(out, value, &RUN_FIELDS).map_err(io)?;
        list(out, "deliveries", &value["delivery_keys"])
    })
}

/// `run start CONNECTOR`.
pub(crate) fn run_start(api: &Api, connector: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call(
        "POST",
        &format!("/v1/connectors/{}/runs", encode_path(connector)),
        None,
    )?;
    answer(api, out, &value, |out, value| {
        fields(
            out,
            value,
            &[
                "run_id",
                "export_id",
                "page_count",
                "status",
                "run_status",
                "run",
            ],
        )
        .map_err(io)
    })
}

/// `source-quarantine set|lift|show CONNECTOR [--account A] [--reason R]`.
pub(crate) fn source_quarantine(
    api: &Api,
    action: &str,
    connector: &str,
    account: Option<&str>,
    reason: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let value = match action {
        "show" => {
            let query = account
                .map(|a| format!("?source_account={}", encode_query(a)))
                .unwrap_or_default();
            api.call(
                "GET",
                &format!("/v1/source-quarantines/{}{query}", encode_path(connector)),
                None,
            )?
        }
        "set" => api.call(
            "POST",
            "/v1/source-quarantines",
            Some(&json!({"connector": connector, "source_account": account, "reason": reason})),
        )?,
        _ => api.call(
            "POST",
            &format!("/v1/source-quarantines/{}/lift", encode_path(connector)),
            Some(&json!({"source_account": account, "reason": reason})),
        )?,
    };
    answer(api, out, &value, print_source_quarantine)
}

/// Whether the source is quarantined, then who set and lifted it, when and why.
fn print_source_quarantine(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    writeln!(
        out,
        "source {}/{}: {}",
        text(&value["source"]["connector"]),
        text(&value["source"]["source_account"]),
        if value["active"] == Value::Bool(true) {
            "quarantined"
        } else {
            "not quarantined"
        }
    )
    .map_err(io)?;
    let rows: Vec<Vec<String>> = value["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            vec![
                text(&e["at"]),
                text(&e["action"]),
                text(&e["actor"]),
                text(&e["reason"]),
            ]
        })
        .collect();
    write!(out, "{}", table(&["AT", "ACTION", "BY", "REASON"], &rows)).map_err(io)
}

/// What `correction add` records: rows of `from_item` belong to `to_item`.
pub(crate) struct NewCorrection<'a> {
    pub connector: &'a str,
    pub from_item: &'a str,
    pub to_item: &'a str,
    pub account: Option<&'a str>,
    pub reason: &'a str,
}

/// `correction add CONNECTOR FROM_ITEM TO_ITEM --reason R [--account A]`.
pub(crate) fn correction_add(
    api: &Api,
    correction: &NewCorrection,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let NewCorrection {
        connector,
        from_item,
        to_item,
        account,
        reason,
    } = correction;
    let value = api.call(
        "POST",
        "/v1/identity-corrections",
        Some(&json!({"connector": connector, "source_account": account,
            "from_item": from_item, "to_item": to_item, "reason": reason})),
    )?;
    answer(api, out, &value, print_correction)
}

/// `correction show ID`.
pub(crate) fn correction_show(api: &Api, id: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let value = api.call(
        "GET",
        &format!("/v1/identity-corrections/{}", encode_path(id)),
        None,
    )?;
    answer(api, out, &value, print_correction)
}

/// `correction withdraw ID --reason R`.
pub(crate) fn correction_withdraw(
    api: &Api,
    id: &str,
    reason: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let value = api.call(
        "POST",
        &format!("/v1/identity-corrections/{}/withdraw", encode_path(id)),
        Some(&json!({"reason": reason})),
    )?;
    answer(api, out, &value, print_correction)
}

/// A correction record, its target item, and how many observations it re-attributed.
fn print_correction(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    fields(
        out,
        value,
        &[
            "correction_id",
            "kind",
            "from_item",
            "replaces",
            "reason",
            "actor",
            "created_at",
            "in_force",
            "replaced_by",
            "settled",
        ],
    )
    .map_err(io)?;
    writeln!(out, "to_item: {}", text(&value["to_item"])).map_err(io)?;
    let superseded = value["superseded_observations"]
        .as_array()
        .map_or(0, Vec::len);
    writeln!(out, "re-attributed observations: {superseded}").map_err(io)
}

/// `dlq redrive [--dlq URL --queue URL]`: progress on stderr, so that `--json` output stays one
/// document.
pub(crate) fn dlq_redrive(
    settings: &Settings,
    dlq: Option<&str>,
    queue: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let target = redrive_target(dlq, queue, settings)?;
    let moved = redrive(&target, &mut |p: RedriveProgress| {
        eprintln!(
            "dlq redrive: {} moved of about {} ({} left in the DLQ)",
            p.moved, p.total_estimate, p.left_estimate
        );
    })?;
    if settings.json {
        return emit_json(
            out,
            &json!({"moved": moved, "from": target.dlq, "to": target.queue}),
        );
    }
    writeln!(
        out,
        "moved {moved} message(s) from {} to {}",
        target.dlq, target.queue
    )
    .map_err(io)
}
