//! The text an agent can quote beside each tool's structured result: one line per claim with
//! its provenance, terms and verification, quotes, freshness gaps, exclusions and the receipt.

use super::*;

/// What a quote means, as an agent can quote it: `#1 in USD: 2500 from acme-eu at 0.398 USD
/// each (995.000 USD), MOQ 1000 met, lead time 14 days`, or why it cannot be ordered.
pub(super) fn quote_text(q: &Quote, o: &ObservationBody) -> String {
    let place = match q.rank {
        Some(rank) => format!("#{rank} in {}", o.currency),
        None => format!("unranked in {}", o.currency),
    };
    let price = match (&q.unit_price, &q.extended_price) {
        (Some(unit), Some(extended)) => format!(
            " at {unit} {} each{} ({extended} {})",
            o.currency,
            o.terms
                .price_basis
                .as_ref()
                .map_or(String::new(), |b| format!(" per {}", b.as_str())),
            o.currency
        ),
        _ => String::new(),
    };
    let mut notes = Vec::new();
    if let Some(moq) = &o.terms.minimum_order_quantity {
        notes.push(format!(
            "MOQ {} {}",
            moq.as_str(),
            if q.orderable { "met" } else { "applies" }
        ));
    }
    notes.extend(
        o.terms
            .lead_time_days
            .map(|d| format!("lead time {d} days")),
    );
    if q.price_status != "current" {
        notes.push(format!("price {}", q.price_status.replace('_', " ")));
    }
    if !q.orderable {
        notes.push(format!(
            "not orderable: {}",
            q.not_orderable_because.join("; ")
        ));
    }
    let notes: String = notes.iter().map(|n| format!(", {n}")).collect();
    format!(
        "{place}: {} from {}{price}{notes}, {}, {}",
        q.quantity,
        o.connector.as_str(),
        o.claim.replace('_', "-"),
        o.verification
    )
}

/// The commercial terms an offer states, each as a buyer reads it (`; breaks 1000+ at 0.412
/// USD, 2500+ at 0.398 USD; MOQ 1000; ...`); empty without terms.
pub(super) fn terms_text(t: &Terms, currency: &str) -> String {
    let mut parts = Vec::new();
    if !t.price_breaks.is_empty() {
        let breaks: Vec<String> = t
            .price_breaks
            .iter()
            .map(|b| {
                format!(
                    "{}+ at {} {currency}",
                    b.min_quantity.as_str(),
                    b.unit_price.as_str()
                )
            })
            .collect();
        parts.push(format!("breaks {}", breaks.join(", ")));
    }
    let mut add = |label: &str, value: Option<String>| {
        parts.extend(value.map(|v| format!("{label} {v}")));
    };
    add(
        "price per",
        t.price_basis.as_ref().map(|d| d.as_str().to_owned()),
    );
    add(
        "MOQ",
        t.minimum_order_quantity
            .as_ref()
            .map(|d| d.as_str().to_owned()),
    );
    add(
        "order multiple",
        t.order_multiple.as_ref().map(|d| d.as_str().to_owned()),
    );
    add("lead time", t.lead_time_days.map(|d| format!("{d} days")));
    add(
        "lead time stated as",
        t.lead_time.as_ref().map(|l| format!("{l:?}")),
    );
    add("packaging", t.packaging.clone());
    add(
        "pack of",
        t.pack_size.as_ref().map(|d| d.as_str().to_owned()),
    );
    add("valid from", t.valid_from.map(|v| v.to_rfc3339()));
    add("valid until", t.valid_until.map(|v| v.to_rfc3339()));
    add("incoterms", t.incoterms.clone());
    add(
        "tax included:",
        t.tax_included
            .map(|b| if b { "yes" } else { "no" }.to_owned()),
    );
    parts.iter().map(|p| format!("; {p}")).collect()
}

pub(super) fn text_of(o: &ObservationBody) -> String {
    format!(
        "{} via {}: quantity {} {} at {} {}{}, observed {} (received {}), claim {}, {}",
        o.item,
        o.connector.as_str(),
        o.quantity,
        o.quantity_basis,
        o.price,
        o.currency,
        terms_text(&o.terms, &o.currency),
        o.observed_at.to_rfc3339(),
        o.retrieved_at.to_rfc3339(),
        o.claim,
        o.verification,
    )
}

pub(super) fn items_summary(body: &ItemsResponse) -> Vec<String> {
    let mut lines = vec![format!(
        "{} item(s) of part number {}{}{}.",
        body.items.len(),
        body.mpn,
        body.manufacturer
            .as_ref()
            .map_or(String::new(), |m| format!(" by {m}")),
        if body.truncated {
            " (the first 100)"
        } else {
            ""
        }
    )];
    for i in &body.items {
        lines.push(format!(
            "- {}: {}packaging {}, condition {}{}, {} current offer(s)",
            i.item,
            i.manufacturer
                .as_ref()
                .map_or(String::new(), |m| format!("manufacturer {m}, ")),
            i.packaging,
            i.condition,
            i.revision
                .as_ref()
                .map_or(String::new(), |r| format!(", revision {r}")),
            i.current_offers
        ));
    }
    lines
}

pub(super) fn offers_summary(body: &OffersResponse) -> Vec<String> {
    let mut lines = vec![format!(
        "{} current offer(s) for {} as of {}.",
        body.offers.len(),
        body.item,
        body.as_of.to_rfc3339()
    )];
    if let Some(quantity) = &body.quantity {
        lines.push(format!(
            "For {quantity}: cheapest orderable first within each currency (currencies are never compared)."
        ));
    }
    for o in &body.offers {
        lines.extend(o.quote.as_ref().map(|q| quote_text(q, &o.observation)));
        lines.push(format!(
            "- {}; age {} s{}",
            text_of(&o.observation),
            o.freshness.age_seconds,
            if o.freshness.stale { ", STALE" } else { "" }
        ));
    }
    for gap in &body.freshness_gaps {
        lines.push(format!(
            "Freshness gap: {} is {} s old (limit {} s); refresh: {}.",
            gap.connector.as_str(),
            gap.age_seconds,
            gap.max_age_seconds,
            gap.refresh.action()
        ));
    }
    for left_out in &body.excluded_sources {
        let reason = serde_json::to_value(left_out.reason).unwrap_or_default();
        lines.push(format!(
            "Left out: {}/{} ({}), not an absence of offers.",
            left_out.connector.as_str(),
            left_out.source_account.as_str(),
            reason.as_str().unwrap_or_default()
        ));
    }
    for late in &body.overdue_sources {
        let since = late
            .overdue_since
            .map_or(String::new(), |at| format!(" since {at}"));
        lines.push(format!(
            "Overdue: {}{since}, no delivery within its expected {} min; refresh: {}.",
            late.connector.as_str(),
            late.expected_cadence_minutes.unwrap_or_default(),
            refresh_of(&late.refresh)
        ));
    }
    lines.extend(body.receipt.as_ref().map(|r| {
        format!(
            "Receipt: as_of {}, digest {} (GET /v1/receipts/verify checks it later).",
            r.as_of.to_rfc3339(),
            r.digest
        )
    }));
    lines
}

pub(super) fn history_summary(body: &HistoryResponse) -> Vec<String> {
    let mut lines = vec![format!(
        "{} stored claim(s) for {}, newest first.",
        body.observations.len(),
        body.item
    )];
    for entry in &body.observations {
        lines.push(format!(
            "- {}{}",
            text_of(&entry.observation),
            if entry.superseded {
                " (superseded)"
            } else {
                ""
            }
        ));
    }
    lines
}

/// One line per source: overdue or not, the last commit and outcome, the share of its items
/// refreshed within the cadence, and what would refresh it.
pub(super) fn sources_summary(body: &SourcesResponse) -> Vec<String> {
    let mut lines = vec![format!(
        "{} sources as of {}:",
        body.sources.len(),
        body.as_of
    )];
    for source in &body.sources {
        let state = match (
            source.overdue,
            source.overdue_since,
            source.expected_cadence_minutes,
        ) {
            (true, Some(since), _) => format!("OVERDUE since {since}"),
            (true, None, _) => "OVERDUE".to_owned(),
            (false, _, Some(minutes)) => format!("on time (expected every {minutes} min)"),
            (false, _, None) => "no cadence expected".to_owned(),
        };
        let last = match (source.last_committed_at, source.last_outcome) {
            (Some(at), Some(outcome)) => {
                format!("last committed {at}, last delivery {}", outcome.code())
            }
            (None, Some(outcome)) => format!("nothing committed, last delivery {}", outcome.code()),
            (_, None) => "no delivery yet".to_owned(),
        };
        let share = &source.refreshed_within_cadence;
        let refreshed = match share.share {
            Some(_) => format!(
                "; {} of {} items refreshed within the cadence",
                share.refreshed, share.items
            ),
            None => String::new(),
        };
        let quarantined = if source.source_quarantine.active {
            "; SOURCE QUARANTINED"
        } else {
            ""
        };
        lines.push(format!(
            "- {} ({}): {state}; {last}{refreshed}{quarantined}; refresh: {}",
            source.connector,
            source.transport,
            refresh_of(&source.refresh)
        ));
    }
    lines
}

/// What would refresh a source, as an agent can say it.
fn refresh_of(refresh: &SourceRefresh) -> String {
    match refresh {
        SourceRefresh::StartPullRun {
            method,
            path,
            run_in_flight,
            next_scheduled_pull,
            ..
        } => {
            let when = match (run_in_flight, next_scheduled_pull) {
                (Some(run), _) => format!(", run {run} in flight"),
                (None, Some(next)) => format!(", next scheduled pull {next}"),
                (None, None) => String::new(),
            };
            format!("an operator's {method} {path}{when}")
        }
        SourceRefresh::AskSupplier {
            last_delivery_at, ..
        } => match last_delivery_at {
            Some(at) => format!("ask the supplier (last delivery received {at})"),
            None => "ask the supplier (nothing received yet)".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{ConnectorId, SourceAccount};
    use crate::domain::source_health::{RefreshedShare, Settled};
    use crate::protocols::query::sources::{LastSettled, QuarantineState, SourceStatus};

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn status(transport: &'static str, refresh: SourceRefresh) -> SourceStatus {
        SourceStatus {
            connector: ConnectorId::parse("acme-eu").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            transport,
            expected_cadence_minutes: Some(60),
            last_received_at: Some(at("2026-12-01T09:59:00Z")),
            last_outcome: Some(Settled::Refused),
            last_committed_at: Some(at("2026-12-01T09:00:00Z")),
            last_settled: LastSettled {
                committed: Some(at("2026-12-01T09:00:00Z")),
                replayed: None,
                quarantined: None,
                refused: Some(at("2026-12-01T09:59:00Z")),
            },
            overdue: true,
            overdue_since: Some(at("2026-12-01T10:00:00Z")),
            refreshed_within_cadence: RefreshedShare {
                items: 4,
                refreshed: 1,
                share: Some(0.25),
            },
            source_quarantine: QuarantineState {
                active: true,
                since: Some(at("2026-12-01T09:30:00Z")),
            },
            last_run: None,
            run_in_flight: false,
            next_scheduled_pull: None,
            refresh,
        }
    }

    #[test]
    fn an_overdue_source_is_one_line_an_agent_can_quote() {
        let pull = SourceRefresh::StartPullRun {
            method: "POST",
            path: "/v1/connectors/acme-eu/runs".into(),
            requires_scope: "ops:write",
            run_in_flight: None,
            next_scheduled_pull: Some(at("2026-12-01T11:00:00Z")),
        };
        let body = SourcesResponse {
            as_of: at("2026-12-01T10:30:00Z"),
            sources: vec![status("pull", pull)],
        };
        assert_eq!(
            sources_summary(&body),
            [
                "1 sources as of 2026-12-01T10:30:00Z:",
                "- acme-eu (pull): OVERDUE since 2026-12-01T10:00:00Z; last committed \
                 2026-12-01T09:00:00Z, last delivery refused; 1 of 4 items refreshed within \
                 the cadence; SOURCE QUARANTINED; refresh: an operator's POST \
                 /v1/connectors/acme-eu/runs, next scheduled pull 2026-12-01T11:00:00Z"
            ]
        );
        let push = SourceRefresh::AskSupplier {
            detail: "only the supplier can send".into(),
            last_delivery_at: Some(at("2026-12-01T09:59:00Z")),
        };
        let line = &sources_summary(&SourcesResponse {
            as_of: at("2026-12-01T10:30:00Z"),
            sources: vec![status("webhook", push)],
        })[1];
        assert!(
            line.ends_with(
                "refresh: ask the supplier (last delivery received 2026-12-01T09:59:00Z)"
            ),
            "{line}"
        );
    }
}
