// The operator console. Every element is built with textContent or attributes, never parsed
// from markup: supplier strings (SKUs, messages, payload values) render as text, whatever they
// hold. The token lives in this closure only; it is sent to this origin's ops routes and
// nowhere else.
"use strict";
(function () {
  const state = { token: null, generation: 0 };
  const SVG_NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = String(v);
      else if (k === "onclick") node.addEventListener("click", v);
      else if (k === "onsubmit") node.addEventListener("submit", v);
      else if (k === "onchange") node.addEventListener("change", v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = String(v);
      else node.setAttribute(k, String(v));
    }
    for (const child of children.flat()) if (child) node.append(child);
    return node;
  }

  // A path segment per part: delivery keys and ids may themselves hold '/'.
  const segment = (text) => encodeURIComponent(String(text));
  const keyPath = (key) => String(key).split("/").map(segment).join("/");

  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + state.token, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      return { status: 0, ok: false, data: { error: { code: "network", message: String(e) } } };
    }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    return { status: response.status, ok: response.ok, data };
  }

  function problem(result) {
    const e = (result.data && result.data.error) || {};
    const code = e.code || (result.data && result.data.message) || "error";
    return el("p", { class: "error", role: "alert" },
      "HTTP " + result.status + " " + code + (e.message ? ": " + e.message : ""));
  }

  const view = () => document.getElementById("view");
  // What a view renders; `route` shows it only if no later navigation started meanwhile.
  const page = (title, ...content) => ({ title, content });
  function show(title, ...content) {
    const v = view();
    v.replaceChildren(el("h2", { id: "view-title", text: title }), ...content);
    v.hidden = false;
    document.title = title + " · feedsafe console";
  }

  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) {
      if (v === undefined) continue;
      dl.append(el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : text(v)));
    }
    return dl;
  }

  function text(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  // A diff value as the API renders it: JSON, or {"$number": literal} for a number.
  function shown(value) {
    if (value === undefined) return "(absent)";
    if (value && typeof value === "object" && "$number" in value) return String(value.$number);
    return JSON.stringify(value);
  }

  function table(headers, rows, rowClass) {
    const head = el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })));
    const body = rows.map((cells, i) =>
      el("tr", { class: rowClass ? rowClass(i) : undefined },
        cells.map((c) => (c instanceof Node && c.tagName === "TD") ? c : el("td", {}, c instanceof Node ? c : text(c)))));
    return el("div", { class: "scroll" }, el("table", {}, el("thead", {}, head), el("tbody", {}, body)));
  }

  const link = (href, label) => el("a", { href, text: label });
  const badge = (label, cls) => el("span", { class: "badge " + (cls || ""), text: label });
  const when = (t) => (t ? String(t) : "—");

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    const s = Number(seconds);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " days";
  }

  // A presigned link to a raw artifact, fetched on request (links expire after minutes).
  function artifactButton(path, label) {
    const out = el("span", {});
    const button = el("button", { type: "button", class: "secondary", text: label });
    button.addEventListener("click", async () => {
      const r = await api("GET", path);
      if (!r.ok) { out.replaceChildren(problem(r)); return; }
      out.replaceChildren(
        el("a", { href: r.data.url, target: "_blank", rel: "noopener noreferrer", text: "download " + r.data.artifact_key }),
        " (sha256 ", el("code", { text: r.data.sha256 || "—" }), ", link valid " + r.data.expires_in_seconds + " s)");
    });
    out.append(button);
    return out;
  }

  // An action that changes state: a required reason (for the actions whose records keep one),
  // then an explicit confirmation.
  function guardedAction({ label, describe, fields, send, done, danger, recordsReason = true }) {
    const form = el("form", { class: "stack" });
    const reasonId = "reason-" + Math.random().toString(36).slice(2);
    const reason = recordsReason ? el("textarea", { id: reasonId, name: "reason", required: true }) : null;
    const area = el("div", {});
    form.append(...[...(fields || []), reason && el("label", { for: reasonId, text: "Reason (required, recorded with the action)" }), reason,
      el("div", {}, el("button", { type: "submit", class: danger ? "danger" : undefined, text: label + "…" })), area].filter(Boolean));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const why = reason ? reason.value.trim() : "";
      if (reason && !why) { area.replaceChildren(el("p", { class: "error", role: "alert", text: "A reason is required." })); reason.focus(); return; }
      const confirm = el("button", { type: "button", class: "danger", text: "Confirm: " + label });
      const cancel = el("button", { type: "button", class: "secondary", text: "Cancel" });
      const panel = el("div", { class: "confirm", role: "alertdialog", "aria-label": "Confirm " + label },
        el("p", {}, describe()), reason ? el("p", {}, "Reason: ", el("q", { text: why })) : null, confirm, " ", cancel);
      area.replaceChildren(panel);
      confirm.focus();
      cancel.addEventListener("click", () => area.replaceChildren());
      confirm.addEventListener("click", async () => {
        confirm.disabled = true;
        const r = await send(why);
        if (!r.ok) { area.replaceChildren(problem(r)); return; }
        area.replaceChildren(el("p", { class: "ok", role: "status" }, done(r.data)));
      });
    });
    return form;
  }

  // ---- quarantine ------------------------------------------------------------------------
  async function quarantineList(params) {
    const status = params.get("status") || "open";
    const r = await api("GET", "/v1/quarantine?status=" + segment(status));
    const select = el("select", { id: "status-filter", name: "status" },
      ["open", "accepting", "accepted", "rejected", "all"].map((s) => el("option", { value: s, selected: s === status, text: s })));
    select.addEventListener("change", () => { location.hash = "#/quarantine?status=" + select.value; });
    const filter = el("form", { class: "inline" }, el("div", {}, el("label", { for: "status-filter", text: "Status" }), select));
    if (!r.ok) return page("Quarantine", filter, problem(r));
    const entries = r.data.entries || [];
    return page("Quarantine", filter,
      el("p", { text: entries.length + " " + status + " entr" + (entries.length === 1 ? "y" : "ies") + " (oldest first)" }),
      // The review link first, where no width can push it out of sight; the message (which
      // holds two 71-character fingerprints) may break anywhere, so the table fits the window.
      table(["Entry", "Kind", "Reason", "Message", "Connector", "Delivery key", "First seen", "Status"],
        entries.map((e) => [el("td", { class: "nowrap" }, el("a", { href: "#/quarantine/" + segment(e.quarantine_id), "aria-label": "Review entry " + e.quarantine_id, text: "Review" })),
          e.kind, el("code", { text: e.reason_code }), el("td", { class: "wrap" }, text(e.message)), e.connector, e.delivery_key,
          when(e.first_seen_at), badge(e.status, e.status)])));
  }

  async function quarantineEntry(id) {
    const r = await api("GET", "/v1/quarantine/" + segment(id));
    if (!r.ok) return page("Quarantine entry " + id, problem(r));
    const e = r.data;
    const storedLink = (e.stored_observation_ids && e.stored_observation_ids.length)
      ? "/v1/observations/" + segment(e.stored_observation_ids[0]) + "/artifact"
      : (e.delivery_key ? "/v1/deliveries/" + keyPath(e.delivery_key) + "/artifact" : null);
    const sides = el("div", { class: "side" },
      el("section", { class: "card", "aria-label": "Stored" }, el("h3", { text: "Stored (kept, unchanged)" }),
        facts([["fingerprint", el("code", { id: "stored-fingerprint", text: text(e.stored_fingerprint) })],
          ["raw artifact", el("code", { text: text(e.stored_artifact_key) })],
          ["observations", text((e.stored_observation_ids || []).join(", "))]]),
        storedLink ? artifactButton(storedLink, "Link to the stored raw artifact") : null),
      el("section", { class: "card", "aria-label": "Received" }, el("h3", { text: "Received (quarantined)" }),
        facts([["fingerprint", el("code", { id: "received-fingerprint", text: text(e.received_fingerprint) })],
          ["raw artifact", el("code", { text: text(e.evidence_key) })],
          ["sha256", el("code", { text: text(e.evidence_sha256) })]]),
        artifactButton("/v1/quarantine/" + segment(id) + "/artifact", "Link to the quarantined raw artifact")));
    const content = [
      facts([["kind", e.kind], ["reason", el("code", { text: e.reason_code })], ["message", e.message],
        ["status", badge(e.status, e.status)], ["connector", e.connector],
        ["delivery key", e.delivery_key ? link("#/deliveries/" + keyPath(e.delivery_key), e.delivery_key) : "—"],
        ["first seen", when(e.first_seen_at)]]),
      sides, diffView(e.diff), resolveView(e), historyView(e.resolutions || [])];
    return page("Quarantine entry " + id, ...content);
  }

  function diffView(diff) {
    if (!diff) return null;
    const box = el("section", { "aria-labelledby": "diff-title" }, el("h3", { id: "diff-title", text: "What differs (stored vs received)" }));
    if (!diff.available) { box.append(el("p", { class: "notice", text: "No diff: " + diff.reason })); return box; }
    if (diff.format === "json") {
      box.append(el("p", { text: diff.difference_count + " differing field(s)" + (diff.truncated ? " (first ones shown)" : "") }));
      if (diff.note) box.append(el("p", { class: "notice", text: diff.note }));
      box.append(table(["Field", "Change", "Stored", "Received"], (diff.differences || []).map((d) => [
        el("code", { text: d.path }), d.change,
        el("td", { class: "differs", "data-side": "stored", "data-path": d.path, text: shown(d.stored) }),
        el("td", { class: "differs", "data-side": "received", "data-path": d.path, text: shown(d.received) })])));
    } else {
      box.append(facts([["stored bytes", diff.stored_bytes], ["received bytes", diff.received_bytes],
        ["first difference at byte", diff.first_difference_offset]]));
      if (diff.line_differences) {
        box.append(table(["Line", "Stored", "Received"], diff.line_differences.map((d) => [d.line,
          el("td", { class: "differs", "data-side": "stored", text: text(d.stored) }),
          el("td", { class: "differs", "data-side": "received", text: text(d.received) })])));
      }
    }
    return box;
  }

  function resolveView(e) {
    const box = el("section", { "aria-labelledby": "resolve-title" }, el("h3", { id: "resolve-title", text: "Resolve" }));
    if (e.status !== "open" && e.status !== "accepting") {
      box.append(el("p", { text: "This entry is " + e.status + "; a resolution is final." }));
      return box;
    }
    const reject = el("input", { type: "radio", name: "action", id: "action-reject", value: "reject", checked: true });
    const accept = el("input", { type: "radio", name: "action", id: "action-accept", value: "accept_as_new_delivery" });
    const deliveryId = el("input", { type: "text", id: "delivery-id", name: "delivery_id", autocomplete: "off" });
    const fields = [
      el("fieldset", {}, el("legend", { text: "Action" }),
        el("div", {}, reject, el("label", { for: "action-reject", class: "inline-label", text: "Reject: keep it quarantined as refused; nothing is stored" })),
        el("div", {}, accept, el("label", { for: "action-accept", class: "inline-label", text: "Accept as a new delivery under a stated identity (the original stays as it is)" }))),
      el("label", { for: "delivery-id", text: "Source delivery id for the new delivery (accept only)" }), deliveryId];
    box.append(guardedAction({
      label: "Resolve " + e.quarantine_id,
      fields,
      describe: () => accept.checked
        ? "Accept the quarantined payload as the new delivery " + JSON.stringify(deliveryId.value.trim()) + " of " + e.connector + "?"
        : "Reject the quarantined payload of " + text(e.delivery_key) + "?",
      send: (reason) => api("POST", "/v1/quarantine/" + segment(e.quarantine_id) + "/resolve",
        accept.checked ? { action: "accept_as_new_delivery", delivery_id: deliveryId.value.trim(), reason } : { action: "reject", reason }),
      done: (data) => {
        const out = el("span", { id: "resolution-outcome" }, "Entry " + data.quarantine_id + " is now " + data.status + ". ");
        if (data.new_delivery_key) out.append("New delivery: ", link("#/deliveries/" + keyPath(data.new_delivery_key), data.new_delivery_key), ". ");
        out.append(link("#/quarantine/" + segment(data.quarantine_id) + "?reload=" + Date.now(), "Show the entry's history"));
        return out;
      },
    }));
    return box;
  }

  function historyView(events) {
    return el("section", { "aria-labelledby": "history-title" }, el("h3", { id: "history-title", text: "Resolution history (append-only)" }),
      events.length ? table(["At", "Action", "Reason", "By", "New delivery"], events.map((ev) => [when(ev.at), ev.action, ev.reason, ev.actor,
        ev.new_delivery_key ? link("#/deliveries/" + keyPath(ev.new_delivery_key), ev.new_delivery_key) : "—"]))
        : el("p", { text: "No resolution yet." }));
  }

  // ---- deliveries and runs ---------------------------------------------------------------
  function lookupForm(id, label, placeholder, target) {
    const input = el("input", { type: "text", id, name: id, placeholder, autocomplete: "off", required: true });
    return el("form", { class: "inline", onsubmit: (event) => { event.preventDefault(); location.hash = target(input.value.trim()); } },
      el("div", {}, el("label", { for: id, text: label }), input), el("button", { type: "submit", text: "Look up" }));
  }

  async function deliveries(key) {
    const form = lookupForm("delivery-key", "Delivery key", "tenant/connector/account/source delivery id", (k) => "#/deliveries/" + keyPath(k));
    if (!key) return page("Deliveries", form);
    const r = await api("GET", "/v1/deliveries/" + keyPath(key));
    if (!r.ok) return page("Delivery " + key, form, problem(r));
    const d = r.data;
    const ids = d.observation_ids || [];
    return page("Delivery " + key, form,
      facts([["state", badge(text(d.state))], ["attempts", d.attempts], ["epoch", d.epoch],
        ["previous epoch", d.previous_epoch ? JSON.stringify(d.previous_epoch) : "—"],
        ["identity", text(d.identity_strength) + " (" + text(d.identity_basis) + ")"], ["dedup confidence", d.dedup_confidence],
        ["fingerprint", el("code", { text: text(d.fingerprint) })], ["first attempt", when(d.first_attempt_at)],
        ["last attempt", when(d.last_attempt_at)], ["committed", when(d.committed_at)],
        ["run", d.run ? link("#/runs/" + segment(d.run.run_id), d.run.run_id + " page " + d.run.page) : "—"],
        ["raw artifact", d.artifact ? el("code", { text: d.artifact.key }) : "—"]]),
      d.artifact ? artifactButton("/v1/deliveries/" + keyPath(key) + "/artifact", "Link to the raw artifact") : null,
      el("h3", { text: "Observations (" + ids.length + ")" }),
      ids.length ? el("ul", {}, ids.map((id) => el("li", {}, el("code", { text: id }), " ",
        artifactButton("/v1/observations/" + segment(id) + "/artifact", "artifact")))) : el("p", { text: "None." }),
      el("h3", { text: "Quarantine entries under this key" }),
      (d.quarantine || []).length ? table(["Id", "Reason", "Status", "First seen"], d.quarantine.map((q) =>
        [link("#/quarantine/" + segment(q.quarantine_id), q.quarantine_id), q.reason_code, badge(q.status, q.status), when(q.first_seen_at)]))
        : el("p", { text: "None." }));
  }

  async function runs(id) {
    const form = lookupForm("run-id", "Run id", "run id", (v) => "#/runs/" + segment(v));
    if (!id) return page("Runs", form, el("p", { text: "A run id is in each export page's delivery (its Run field) and in the answer to starting a run." }));
    const r = await api("GET", "/v1/runs/" + segment(id));
    if (!r.ok) return page("Run " + id, form, problem(r));
    const run = r.data;
    const committed = new Set(run.pages_committed || []);
    const missing = new Set(run.pages_missing || []);
    const pages = run.pages_requested && run.pages_requested.length ? run.pages_requested : [...committed];
    return page("Run " + id, form,
      facts([["connector", link("#/connectors", run.connector)], ["status", badge(text(run.status), run.all_pages_committed ? "" : "open")],
        ["pages", text(run.page_count)], ["all pages committed", run.all_pages_committed ? "yes" : "no"],
        ["started", when(run.started_at)], ["missing pages", [...missing].join(", ") || "none"]]),
      table(["Page", "State"], pages.map((p) => [p, missing.has(p)
        ? el("td", { class: "missing", text: "missing" }) : el("td", { text: committed.has(p) ? "committed" : "not seen yet" })])),
      el("h3", { text: "Re-run" }),
      el("p", { text: "A closed run is not reopened: pulling its export again compares every page with the stored one (a changed page is quarantined). Starting a run of the connector pulls its current export (a new export is a new run)." }),
      guardedAction({ label: "Start a pull run of " + run.connector, recordsReason: false, describe: () => "Start a pull run of connector " + run.connector + " now? It pulls the connector's current export.",
        send: () => api("POST", "/v1/connectors/" + segment(run.connector) + "/runs"),
        done: (data) => el("span", {}, "Run ", link("#/runs/" + segment(data.run_id), data.run_id), " " + String(data.status).replace(/_/g, " ") + ".") }));
  }

  // ---- connectors ------------------------------------------------------------------------
  async function connectors() {
    const r = await api("GET", "/v1/connectors");
    if (!r.ok) return page("Connectors", problem(r));
    const list = r.data.connectors || [];
    const rows = list.map((c) => {
      const f = c.freshness || {};
      const q = c.source_quarantine || {};
      return [link("#/connectors/" + segment(c.connector), c.connector), c.source_account, c.kind,
        f.last_delivery ? el("span", {}, link("#/deliveries/" + keyPath(f.last_delivery.delivery_key), f.last_delivery.delivery_key), " at " + f.last_delivery.retrieved_at) : "—",
        f.newest_observed_at ? age(f.age_seconds) + " (newest claim " + f.newest_observed_at + ", " + f.items + " item(s))" : "no current claim",
        c.open_quarantines ? link("#/quarantine?status=open", String(c.open_quarantines)) : "0",
        q.active ? badge("quarantined since " + q.since, "active") : badge("not quarantined")];
    });
    const actions = list.map((c) => {
      const q = c.source_quarantine || {};
      const box = el("section", { class: "card", "aria-label": "Actions for " + c.connector }, el("h3", { text: c.connector }));
      box.append(guardedAction({
        label: (q.active ? "Lift the source quarantine of " : "Quarantine the source ") + c.connector,
        danger: !q.active,
        describe: () => q.active ? "Lift the quarantine of " + c.connector + "/" + c.source_account + "? Its claims become current again."
          : "Quarantine " + c.connector + "/" + c.source_account + "? Its claims stop being current at once; nothing is deleted.",
        send: (reason) => q.active
          ? api("POST", "/v1/source-quarantines/" + segment(c.connector) + "/lift", { source_account: c.source_account, reason })
          : api("POST", "/v1/source-quarantines", { connector: c.connector, source_account: c.source_account, reason }),
        done: () => el("span", {}, "Done. ", link("#/connectors?at=" + Date.now(), "Refresh")),
      }));
      if (c.kind === "pull") {
        box.append(guardedAction({ label: "Start a pull run of " + c.connector, recordsReason: false, describe: () => "Start a pull run of " + c.connector + " now? It pulls the connector's current export.",
          send: () => api("POST", "/v1/connectors/" + segment(c.connector) + "/runs"),
          done: (data) => el("span", {}, "Run ", link("#/runs/" + segment(data.run_id), data.run_id), " " + String(data.status).replace(/_/g, " ") + ".") }));
      }
      return box;
    });
    return page("Connectors", el("p", { text: "As of " + r.data.as_of + ". Freshness is the age of the connector's newest current claim." }),
      table(["Connector", "Account", "Kind", "Last delivery (that set a current offer)", "Freshness", "Open quarantines", "Source quarantine"], rows),
      el("h3", { text: "Actions" }), ...actions);
  }

  // ---- one connector: its definition, its versions, a preview ----------------------------
  async function connectorView(id) {
    const r = await api("GET", "/v1/connectors/" + segment(id));
    if (!r.ok) return page("Connector " + id, problem(r));
    const c = r.data;
    const versions = (c.versions || []).map((v) => [String(v.version), when(v.recorded_at), text(v.recorded_by)]);
    return page("Connector " + id,
      facts([["source account", c.source_account], ["transport", c.transport], ["format", c.payload_format], ["current version", String(c.version)]]),
      el("h3", { text: "Versions" }),
      versions.length ? table(["Version", "Recorded", "By"], versions) : el("p", { text: "None: configured before definitions." }),
      el("h3", { text: "Definition (current version)" }),
      c.definition ? el("pre", { class: "definition", text: JSON.stringify(c.definition, null, 2) }) : el("p", { text: "None." }),
      c.definition ? previewForm(id) : null);
  }

  // Paste a sample or pick a file; what it would give under the stored definition. Stores nothing.
  function previewForm(id) {
    const sample = el("textarea", { id: "preview-sample", name: "sample", rows: 8, placeholder: "Paste a sample of what the supplier sends" });
    const file = el("input", { type: "file", id: "preview-file", name: "file" });
    const out = el("div", { id: "preview-result", "aria-live": "polite" });
    const form = el("form", { class: "stack", onsubmit: async (event) => {
      event.preventDefault();
      const body = file.files && file.files[0] ? { sample_base64: await fileBase64(file.files[0]) } : { sample: sample.value };
      const result = await api("POST", "/v1/connectors/" + segment(id) + "/preview", body);
      out.replaceChildren(result.ok ? previewResult(result.data) : problem(result));
    } },
    el("label", { for: "preview-sample", text: "Sample (text)" }), sample,
    el("label", { for: "preview-file", text: "or a sample file (any encoding)" }), file,
    el("button", { type: "submit", text: "Preview" }));
    return el("section", { class: "card", "aria-label": "Preview a sample" }, el("h3", { text: "Preview a sample" }), form, out);
  }

  async function fileBase64(blob) {
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(binary);
  }

  function previewResult(p) {
    const identity = p.identity || {};
    const rows = (p.rows || []).map((row) => [row.item, row.sku, String(row.quantity), row.unit, row.price, row.currency, row.observed_at]);
    const refused = (p.refused_rows || []).map((row) => [row.place, row.code, row.reason]);
    return el("div", {},
      facts([["outcome", badge(p.outcome, p.outcome === "refused" ? "active" : "")], ["refusal", p.refusal],
        ["identity", text(identity.kind) + " (" + text(identity.strength) + "): " + text(identity.value || identity.from)],
        ["fingerprint", el("code", { text: text(p.fingerprint) })]]),
      el("h4", { text: "Rows (" + rows.length + ")" }),
      rows.length ? table(["Item", "SKU", "Quantity", "Unit", "Price", "Currency", "Observed"], rows) : el("p", { text: "None." }),
      el("h4", { text: "Refused rows (" + refused.length + ")" }),
      refused.length ? table(["Place", "Code", "Reason"], refused) : el("p", { text: "None." }));
  }

  // ---- item timeline ---------------------------------------------------------------------
  function claimClass(c) {
    if (c.current) return "current";
    if (c.superseded || c.current_eligibility === "superseded") return "superseded";
    if (c.current_eligibility === "source_quarantined") return "source-quarantined";
    return "earlier";
  }
  const CLASS_LABEL = { current: "current offer", earlier: "earlier claim", superseded: "superseded",
    "source-quarantined": "source quarantined", quarantined: "quarantined payload (refused)" };

  function chart(title, points, value, times) {
    const W = 1000, H = 240, L = 70, R = 20, T = 24, B = 40;
    const values = points.map(value).filter((v) => Number.isFinite(v));
    const lo = Math.min(0, ...values), hi = Math.max(1, ...values) * 1.1;
    const t0 = Math.min(...times), t1 = Math.max(...times), span = Math.max(60000, t1 - t0);
    const x = (t) => L + ((t - t0) / span) * (W - L - R) * 0.94 + (W - L - R) * 0.03;
    const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
    const g = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title + " over observed_at" });
    g.append(svg("title", { text: title + " over observed_at" }));
    for (let i = 0; i <= 4; i++) {
      const v = lo + ((hi - lo) * i) / 4;
      g.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
        svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", text: v.toFixed(v < 10 ? 1 : 0) }));
    }
    g.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }), svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }),
      svg("text", { x: L, y: H - 8, text: new Date(t0).toISOString() }),
      svg("text", { x: W - R, y: H - 8, "text-anchor": "end", text: new Date(t1).toISOString() }),
      svg("text", { x: 8, y: 14, text: title }));
    const labelled = new Set();
    // Refused payloads first, so that a claim drawn at the same place stays visible above them.
    const ordered = [...points].sort((a, b) => (a.cls === "quarantined" ? 0 : 1) - (b.cls === "quarantined" ? 0 : 1));
    for (const p of ordered) {
      const v = value(p);
      if (!Number.isFinite(v)) continue;
      const cx = x(p.t), cy = y(v);
      if (Number.isFinite(p.retrieved)) {
        // Retrieval lag: a dashed line from observed_at to retrieved_at, cut at the plot's edge
        // (retrievals can come days after the claims), its length written beside it.
        const end = Math.min(x(p.retrieved), W - R);
        g.append(svg("line", { class: "lag", x1: cx, x2: end, y1: cy, y2: cy }));
        const spot = Math.round(cx) + ":" + Math.round(cy);
        if (p.lag !== undefined && p.lag !== null && points.length <= 30 && !labelled.has(spot)) {
          labelled.add(spot);
          // Beside the point, on the side where it fits (a point at the plot's right edge is
          // labelled to its left, or the label would be cut off).
          const left = cx + 12 + 100 > W;
          g.append(svg("text", { class: "lag-label", x: left ? cx - 12 : cx + 12, y: cy - 9, "text-anchor": left ? "end" : "start", text: "lag " + age(p.lag) }));
        }
      }
      const tip = svg("title", { text: CLASS_LABEL[p.cls] + ": " + v + " at " + p.observed_at + (p.lag !== undefined ? ", retrieved " + p.lag + " s later" : "") });
      const shape = p.cls === "quarantined"
        ? svg("rect", { class: "pt quarantined", x: cx - 6, y: cy - 6, width: 12, height: 12, "data-claim": p.id }, tip)
        : svg("circle", { class: "pt " + p.cls, cx, cy, r: 6, "data-claim": p.id }, tip);
      g.append(shape);
      if (p.cls === "current") g.append(svg("circle", { class: "ring", cx, cy, r: 10 }));
    }
    return g;
  }

  // A claim's verification (docs/openapi.yaml `Verification`): its state, and for a record what
  // it covers and until when. A claim stays source-reported whatever its verification says.
  function verificationText(v) {
    if (!v || !v.record) return (v && v.state) || "unverified";
    const scope = v.scope.kind === "stock_at_least" ? "stock ≥ " + v.scope.quantity : v.scope.kind;
    const when = v.state === "withdrawn" ? "withdrawn " + v.withdrawn_at : (v.state === "expired" ? "expired " : "until ") + v.expires_at;
    return v.state + ": " + scope + " by " + v.method.replace(/_/g, " ") + ", " + when + " (" + v.record + ")";
  }

  // A claim's commercial terms in a few words (docs/item-schema.md): "" when it states none.
  function termsText(c) {
    const parts = [];
    if (c.price_breaks) parts.push("breaks " + c.price_breaks.map((b) => b.min_quantity + "+ " + b.unit_price).join(", "));
    const add = (label, v) => { if (v !== undefined && v !== null) parts.push(label + " " + v); };
    add("per", c.price_basis); add("MOQ", c.minimum_order_quantity); add("multiple", c.order_multiple);
    add("lead", c.lead_time_days !== undefined ? c.lead_time_days + " d" : c.lead_time);
    add("packaging", c.packaging); add("pack of", c.pack_size); add("from", c.valid_from); add("until", c.valid_until);
    add("incoterms", c.incoterms); add("tax included:", c.tax_included === undefined ? undefined : (c.tax_included ? "yes" : "no"));
    return parts.join("; ");
  }

  async function timeline(item) {
    const form = lookupForm("item-key", "Item", "part number, or PART~unit~condition", (v) => "#/items/" + segment(v));
    if (!item) return page("Item timeline", form);
    // By query: a part number may hold "/" or "%", which no path segment carries through
    // API Gateway.
    const r = await api("GET", "/v1/timeline?item=" + encodeURIComponent(item));
    if (!r.ok) return page("Timeline of " + item, form, problem(r));
    const d = r.data;
    const claims = d.claims || [];
    const points = claims.map((c) => ({ id: c.observation_id, cls: claimClass(c), t: Date.parse(c.observed_at), observed_at: c.observed_at,
      retrieved: Date.parse(c.retrieved_at), lag: c.retrieval_lag_seconds, quantity: Number(c.quantity), price: Number(c.price) }));
    for (const q of (d.quarantined || []).filter((q) => q.readable)) {
      points.push({ id: q.quarantine_id, cls: "quarantined", t: Date.parse(q.observed_at), observed_at: q.observed_at,
        quantity: Number(q.quantity), price: Number(q.price) });
    }
    const times = points.map((p) => p.t).filter(Number.isFinite);
    const legend = el("ul", { class: "legend", "aria-label": "Legend" },
      Object.entries(CLASS_LABEL).map(([cls, label]) => el("li", {}, el("span", { class: "swatch " + cls }), label)),
      el("li", { text: "dashed line: retrieval lag (retrieved_at − observed_at)" }));
    const charts = points.length && times.length
      ? [chart("Quantity", points, (p) => p.quantity, times), chart("Price", points, (p) => p.price, times)]
      : [el("p", { text: "No claims about this item." })];
    const rows = claims.map((c) => [c.observed_at, c.retrieved_at, age(c.retrieval_lag_seconds), c.quantity, c.price + " " + c.currency,
      termsText(c) || "—", CLASS_LABEL[claimClass(c)] + (c.future_dated ? " (future-dated)" : ""), verificationText(c.verification), c.connector + "/" + c.source_account, el("code", { text: c.source_record }),
      link("#/deliveries/" + keyPath(c.delivery_key), c.delivery_key), el("code", { text: c.observation_id })]);
    const quarantined = (d.quarantined || []).map((q) => [link("#/quarantine/" + segment(q.quarantine_id), q.quarantine_id), q.status, q.reason_code,
      q.readable ? q.observed_at : "—", q.readable ? q.quantity : "—", q.readable ? q.price + " " + q.currency : q.reason, q.delivery_key]);
    return page("Timeline of " + d.item, form,
      el("p", { text: claims.length + " claim(s)" + (d.truncated ? " (the newest " + claims.length + " shown)" : "") + ", as of " + d.as_of }),
      legend, ...charts,
      el("h3", { text: "Claims (newest first)" }),
      table(["Observed", "Retrieved", "Lag", "Quantity", "Price", "Terms", "Status", "Verification", "Source", "Source record", "Delivery", "Observation"], rows,
        (i) => (claims[i].current ? "current" : undefined)),
      el("h3", { text: "Quarantined payloads under these deliveries" }),
      quarantined.length ? table(["Entry", "Status", "Reason", "Observed", "Quantity", "Price", "Delivery key"], quarantined) : el("p", { text: "None." }));
  }

  // ---- routing and sign-in ---------------------------------------------------------------
  async function route() {
    if (!state.token) return;
    const hash = location.hash.replace(/^#\/?/, "") || "quarantine";
    const [path, query] = hash.split("?");
    const params = new URLSearchParams(query || "");
    const [name, ...rest] = path.split("/");
    let arg = "";
    try {
      arg = rest.map(decodeURIComponent).join("/");
    } catch (_) {
      show("Not found", el("p", { text: "The address holds a malformed escape (%)." }));
      return;
    }
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.getAttribute("href") === "#/" + name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    const views = { quarantine: () => (arg ? quarantineEntry(arg) : quarantineList(params)), deliveries: () => deliveries(arg),
      runs: () => runs(arg), connectors: () => (arg ? connectorView(arg) : connectors()), items: () => timeline(arg) };
    const generation = ++state.generation;
    const rendered = await (views[name] || (() => page("Not found", el("p", { text: "No such view." }))))();
    // A navigation that started while this view waited for its data has the last word.
    if (generation !== state.generation) return;
    show(rendered.title, ...rendered.content);
    const title = document.getElementById("view-title");
    if (title) { title.setAttribute("tabindex", "-1"); title.focus({ preventScroll: true }); }
    document.body.setAttribute("data-view", name);
  }

  async function signIn(event) {
    event.preventDefault();
    const input = document.getElementById("token");
    const message = document.getElementById("login-error");
    state.token = input.value.trim();
    const r = await api("GET", "/v1/quarantine?status=open");
    if (!r.ok) {
      state.token = null;
      message.replaceChildren(problem(r));
      input.focus();
      input.select();
      return;
    }
    input.value = "";
    message.replaceChildren();
    document.getElementById("login").hidden = true;
    document.getElementById("nav").hidden = false;
    await route();
  }

  function signOut() {
    state.token = null;
    document.getElementById("view").replaceChildren();
    document.getElementById("view").hidden = true;
    document.getElementById("nav").hidden = true;
    document.getElementById("login").hidden = false;
    document.getElementById("token").focus();
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("login-form").addEventListener("submit", signIn);
    document.getElementById("logout").addEventListener("click", signOut);
    window.addEventListener("hashchange", route);
    document.getElementById("token").focus();
  });
})();
