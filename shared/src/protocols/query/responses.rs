//! The read path's answers as types: `OffersResponse`, `HistoryResponse` and
//! `ObservationDetail` of docs/openapi.yaml, serialized by the HTTP layer and handed to MCP
//! agents as structured content. A key the contract marks nullable is always present (`null`
//! when unknown); a key it marks optional is left out when it does not apply.

use crate::domain::ids::{ConnectorId, IdentityStrength, ObservationId, RunId, SourceAccount};
use crate::domain::item::CanonicalItem;
use crate::domain::model::{DedupConfidence, Observation};
use crate::domain::quantity::Quantity;
use crate::domain::quote::{rank, Offered, Quote};
use crate::domain::terms::{Decimal, Terms};
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::VerificationView;
use crate::protocols::projection::{Held, HeldClaim, Visibility};
use serde::Serialize;

/// The fields every observation in a response carries (docs/openapi.yaml `Observation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationBody {
    pub observation_id: ObservationId,
    pub item: String,
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub source_record: String,
    pub delivery_key: String,
    pub identity_strength: IdentityStrength,
    pub quantity: Quantity,
    pub quantity_basis: String,
    /// A decimal string, never a float.
    pub price: String,
    pub currency: String,
    pub observed_at: Timestamp,
    pub retrieved_at: Timestamp,
    /// `null` for a delivery outside any pull run.
    pub run_id: Option<RunId>,
    pub claim: String,
    /// What a separate verification record says of this claim (`unverified` without one).
    pub verification: VerificationView,
    /// When the claim was stored: what an as-of read compares. `null` on claims stored before
    /// the time was kept.
    pub recorded_at: Option<Timestamp>,
    pub dedup_confidence: DedupConfidence,
    pub future_dated: bool,
    /// The commercial terms, each left out when the supplier stated none.
    #[serde(flatten)]
    pub terms: Terms,
}

impl From<&Observation> for ObservationBody {
    fn from(o: &Observation) -> Self {
        Self {
            observation_id: o.observation_id.clone(),
            item: o.item.clone(),
            connector: o.connector.clone(),
            source_account: o.source_account.clone(),
            source_record: o.source_record.clone(),
            delivery_key: o.delivery_key.clone(),
            identity_strength: o.identity_strength,
            quantity: o.quantity.clone(),
            quantity_basis: o.quantity_basis.clone(),
            price: o.price.as_str().to_owned(),
            currency: o.currency.clone(),
            observed_at: o.observed_at,
            retrieved_at: o.retrieved_at,
            run_id: o.run_id.clone(),
            claim: o.claim.clone(),
            verification: VerificationView::unverified(),
            recorded_at: o.recorded_at,
            dedup_confidence: o.dedup_confidence,
            future_dated: o.future_dated,
            terms: o.terms.clone(),
        }
    }
}

/// How old a current offer is, and whether that is older than the caller allows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Freshness {
    pub age_seconds: i64,
    pub stale: bool,
}

/// One source's current offer: the observation and its freshness, and when the caller asked
/// about a quantity, what ordering it from this offer means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    #[serde(flatten)]
    pub observation: ObservationBody,
    pub freshness: Freshness,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quote: Option<Quote>,
}

/// A source whose current offer is older than the caller's `max_age_seconds`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreshnessGap {
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub age_seconds: i64,
    pub max_age_seconds: i64,
    pub observed_at: Timestamp,
    /// What would refresh this source. The read itself refreshes nothing.
    pub refresh: RefreshAction,
}

/// What would refresh a stale source: `{"action": ..., ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RefreshAction {
    /// A pull connector: an operator starts a run.
    StartPullRun {
        method: String,
        path: String,
        requires_scope: String,
    },
    /// A push-only connector: only the supplier can send fresher data.
    AwaitSupplierPush { detail: String },
}

impl RefreshAction {
    /// The `action` key's value.
    pub fn action(&self) -> &'static str {
        match self {
            Self::StartPullRun { .. } => "start_pull_run",
            Self::AwaitSupplierPush { .. } => "await_supplier_push",
        }
    }
}

/// `GET /v1/items/{item}/offers`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffersResponse {
    pub item: String,
    pub as_of: Timestamp,
    /// The quantity the caller asked about (`?quantity=`), as written; then the offers come
    /// grouped by currency, the ranked ones first, cheapest per unit first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity: Option<String>,
    pub offers: Vec<Offer>,
    /// Present only when some offer is older than the caller's `max_age_seconds`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub freshness_gaps: Vec<FreshnessGap>,
    /// The sources with a claim about the item that this answer leaves out, and why: an
    /// exclusion is never a silent absence. Present only when there is one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_sources: Vec<ExcludedSource>,
    /// The sources of this answer whose deliveries are overdue for their expected cadence,
    /// with what would refresh them, asked or not. Live answers only, and not part of the
    /// receipt: it says how deliveries are arriving now, not what was claimed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overdue_sources: Vec<super::sources::OverdueSource>,
    /// What proves later what this answer said: its instant and the digest of its content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

/// A source left out of an offers answer, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExcludedSource {
    pub connector: ConnectorId,
    pub source_account: SourceAccount,
    pub reason: Exclusion,
    /// Its claim that would be current but for the reason.
    pub observation_id: ObservationId,
    /// The run not published yet (`run_unpublished` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
}

impl ExcludedSource {
    pub fn of(o: &Observation, reason: Exclusion) -> Self {
        Self {
            connector: o.connector.clone(),
            source_account: o.source_account.clone(),
            reason,
            observation_id: o.observation_id.clone(),
            run_id: match reason {
                Exclusion::RunUnpublished => o.run_id.clone(),
                _ => None,
            },
        }
    }

    /// A source whose only standing claim is held back (`HeldClaim`).
    pub fn held(claim: &HeldClaim) -> Self {
        Self {
            connector: claim.connector.clone(),
            source_account: claim.source_account.clone(),
            reason: claim.reason.into(),
            observation_id: claim.observation_id.clone(),
            run_id: claim.run_id.clone(),
        }
    }

    /// The order of an answer's excluded sources, live or as of an instant: by source, as the
    /// projection orders its rows.
    pub fn order(excluded: &mut [ExcludedSource]) {
        excluded.sort_by_key(|e| format!("{}#{}", e.connector, e.source_account));
    }
}

/// Why a source is left out of an offers answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exclusion {
    /// An operator quarantined the source.
    SourceQuarantined,
    /// An identity correction attributes its claim to another item; the re-attributed copy is
    /// being written.
    AwaitingCorrection,
    /// Its newest held claim is in a run of an `on_run_complete` connector that is not
    /// published yet, and none of its claims could be current.
    RunUnpublished,
    /// Its only claims are from the future (observed later than retrieved, beyond the
    /// connector's clock-skew tolerance): kept in history, never current.
    FutureDated,
}

impl From<Held> for Exclusion {
    fn from(held: Held) -> Self {
        match held {
            Held::FutureDated => Self::FutureDated,
            Held::RunUnpublished => Self::RunUnpublished,
        }
    }
}

/// A decision receipt: `GET /v1/receipts/verify` recomputes the answer at `as_of` and compares
/// digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    pub as_of: Timestamp,
    /// `sha256:` and the hex sha256 of the answer's canonical JSON (`json-v1`: keys sorted, no
    /// whitespace), the receipt itself left out.
    pub digest: String,
}

impl OffersResponse {
    /// The digest of this answer's content, its receipt left out.
    pub fn digest(&self) -> String {
        let content = OffersResponse {
            receipt: None,
            overdue_sources: Vec::new(),
            ..self.clone()
        };
        let json = serde_json::to_vec(&content).unwrap_or_default();
        let canonical = crate::domain::canonical_json::canonicalize(&json).unwrap_or(json);
        format!("sha256:{}", crate::domain::hashing::sha256_hex(&canonical))
    }

    /// The digest this answer had before held claims were named (`run_unpublished` and
    /// `future_dated` sources left out in silence), so that a receipt made then still verifies.
    pub fn digest_before_held(&self) -> String {
        let mut earlier = self.clone();
        earlier.excluded_sources.retain(|e| {
            matches!(
                e.reason,
                Exclusion::SourceQuarantined | Exclusion::AwaitingCorrection
            )
        });
        earlier.digest()
    }

    /// The answer with its receipt.
    pub fn with_receipt(self) -> Self {
        let receipt = Receipt {
            as_of: self.as_of,
            digest: self.digest(),
        };
        Self {
            receipt: Some(receipt),
            ..self
        }
    }
}

/// `GET /v1/items?mpn=`: the canonical items of a part number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemsResponse {
    /// The part number asked about (trimmed, NFC, ASCII letters upper-cased).
    pub mpn: String,
    /// The manufacturer asked about, written as `mpn` is; absent when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    pub as_of: Timestamp,
    /// Sorted by key.
    pub items: Vec<ListedItem>,
    /// More items than the 100 listed.
    pub truncated: bool,
}

/// One canonical item of a part number, and how many sources offer it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedItem {
    pub item: String,
    pub part_number: String,
    /// Absent on an item whose source names no manufacturer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    pub revision: Option<String>,
    pub packaging: String,
    pub condition: String,
    pub current_offers: usize,
}

impl ListedItem {
    pub fn of(key: String, item: CanonicalItem, current_offers: usize) -> Self {
        ListedItem {
            item: key,
            part_number: item.part_number,
            manufacturer: item.manufacturer,
            revision: item.revision,
            packaging: item.packaging_unit,
            condition: item.condition,
            current_offers,
        }
    }
}

/// Which identity correction attributed a claim to this item, and when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribution {
    pub correction_id: String,
    /// `null` on a copy stored before the record time was kept.
    pub attributed_at: Option<Timestamp>,
}

/// One claim of an item's history (docs/openapi.yaml `HistoryEntry`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    #[serde(flatten)]
    pub observation: ObservationBody,
    pub superseded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<ObservationId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<ObservationId>,
    /// Both keys, or neither.
    #[serde(flatten)]
    pub attribution: Option<Attribution>,
    /// Present only when the row normalized to another item than the one it is attributed to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalized_item: Option<String>,
    pub current_eligibility: Visibility,
}

impl HistoryEntry {
    pub fn new(o: &Observation, visibility: Visibility) -> Self {
        Self {
            observation: ObservationBody::from(o),
            superseded: o.superseded_by.is_some(),
            superseded_by: o.superseded_by.clone(),
            supersedes: o.supersedes.clone(),
            attribution: o.correction_id.as_ref().map(|correction| Attribution {
                correction_id: correction.clone(),
                attributed_at: o.recorded_at,
            }),
            normalized_item: (o.normalized_item() != o.item)
                .then(|| o.normalized_item().to_owned()),
            current_eligibility: visibility,
        }
    }
}

/// `GET /v1/items/{item}/observations`: one page, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryResponse {
    pub item: String,
    pub observations: Vec<HistoryEntry>,
    /// `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Where a claim came from (never the payload itself).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provenance {
    pub delivery_key: String,
    pub run_id: Option<RunId>,
    pub artifact_key: String,
    pub artifact_sha256: String,
    pub epoch: u32,
    pub row_index: u32,
}

/// `GET /v1/observations/{id}` (docs/openapi.yaml `ObservationDetail`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationDetail {
    #[serde(flatten)]
    pub entry: HistoryEntry,
    pub provenance: Provenance,
}

impl ObservationDetail {
    pub fn new(o: &Observation, visibility: Visibility) -> Self {
        Self {
            entry: HistoryEntry::new(o, visibility),
            provenance: Provenance {
                delivery_key: o.delivery_key.clone(),
                run_id: o.run_id.clone(),
                artifact_key: o.artifact_key.clone(),
                artifact_sha256: o.artifact_sha256.clone(),
                epoch: o.epoch,
                row_index: o.row_index,
            },
        }
    }
}

/// The quote of `quantity` from the stored observation `o` at `now`.
pub(super) fn quote_of(o: &Observation, quantity: &Decimal, now: Timestamp) -> Quote {
    let offered = Offered {
        stock: &o.quantity,
        places: o.quantity_places,
        price: &o.price,
        currency: &o.currency,
        terms: &o.terms,
    };
    Quote::of(quantity, &offered, now)
}

/// Ranks the quoted offers within each currency and orders them: by currency, the ranked ones
/// first by rank, then the rest as they were.
pub(super) fn rank_offers(offers: &mut [Offer]) {
    let mut ranked: Vec<(&mut Quote, &str, Option<&Decimal>)> = offers
        .iter_mut()
        .filter_map(|offer| {
            let o = &offer.observation;
            let basis = o.terms.price_basis.as_ref();
            offer
                .quote
                .as_mut()
                .map(|q| (q, o.currency.as_str(), basis))
        })
        .collect();
    rank(&mut ranked);
    offers.sort_by(|a, b| {
        let key = |o: &Offer| {
            (
                o.observation.currency.clone(),
                o.quote.as_ref().and_then(|q| q.rank).unwrap_or(u32::MAX),
            )
        };
        key(a).cmp(&key(b))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::TenantId;
    use crate::domain::item::CanonicalItem;
    use crate::domain::model::{CLAIM_SOURCE_REPORTED, VERIFICATION_UNVERIFIED};
    use crate::domain::money::Price;
    use serde_json::{json, Value};

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn claim() -> Observation {
        let item = CanonicalItem::parse_key("AX-440-R2").unwrap();
        Observation {
            observation_id: ObservationId::derive_for("acme-eu/ACC-1/d1", 0, 3),
            tenant: TenantId::parse("acme").unwrap(),
            item: item.key(),
            canonical_item: item,
            connector: ConnectorId::parse("acme-eu").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            source_record: "ax-440-r2".into(),
            delivery_key: "acme-eu/ACC-1/d1".into(),
            identity_strength: IdentityStrength::Fallback,
            epoch: 2,
            row_index: 3,
            quantity: 18_446_744_073_709_551_615.into(),
            quantity_basis: "each".into(),
            quantity_places: 0,
            price: Price::parse("12.50").unwrap(),
            currency: "EUR".into(),
            terms: Default::default(),
            observed_at: at("2026-11-29T08:00:00Z"),
            retrieved_at: at("2026-11-29T08:00:05.123456Z"),
            run_id: None,
            run_publication: None,
            derivation: None,
            artifact_key: "raw/acme/d1.json".into(),
            artifact_sha256: "ab".repeat(32),
            dedup_confidence: DedupConfidence::BeyondHorizon,
            staged: true,
            claim: CLAIM_SOURCE_REPORTED.into(),
            verification: VERIFICATION_UNVERIFIED.into(),
            superseded_by: None,
            supersedes: None,
            correction_id: None,
            normalized_item: None,
            recorded_at: None,
            delivery_recorded_at: None,
            future_dated: false,
        }
    }

    /// Every shape an observation takes in a response: run or none, superseded or not, a
    /// re-attributed copy (with and without its record time), a future-dated claim.
    fn claims() -> Vec<Observation> {
        let plain = claim();
        let to = CanonicalItem::parse_key("AX-440-R3").unwrap();
        let copy = plain.reattributed(&to, "cor_1", at("2026-11-30T09:00:00Z"));
        let untimed = Observation {
            recorded_at: None,
            ..copy.clone()
        };
        let in_run = Observation {
            run_id: Some(RunId::parse("run_7").unwrap()),
            run_publication: None,
            derivation: None,
            superseded_by: Some(copy.observation_id.clone()),
            future_dated: true,
            ..plain.clone()
        };
        vec![plain, copy, untimed, in_run]
    }

    /// The observation's fields as the read path built them before it had types.
    fn observation_map(o: &Observation) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("observation_id".into(), json!(o.observation_id));
        m.insert("item".into(), json!(o.item));
        m.insert("connector".into(), json!(o.connector));
        m.insert("source_account".into(), json!(o.source_account));
        m.insert("source_record".into(), json!(o.source_record));
        m.insert("delivery_key".into(), json!(o.delivery_key));
        m.insert("identity_strength".into(), json!(o.identity_strength));
        m.insert("quantity".into(), json!(o.quantity));
        m.insert("quantity_basis".into(), json!(o.quantity_basis));
        m.insert("price".into(), json!(o.price.as_str()));
        m.insert("currency".into(), json!(o.currency));
        m.insert("observed_at".into(), json!(o.observed_at.to_rfc3339()));
        m.insert("retrieved_at".into(), json!(o.retrieved_at.to_rfc3339()));
        m.insert("run_id".into(), json!(o.run_id));
        m.insert("claim".into(), json!(o.claim));
        m.insert("verification".into(), json!({"state": o.verification}));
        m.insert("recorded_at".into(), json!(o.recorded_at));
        m.insert("dedup_confidence".into(), json!(o.dedup_confidence));
        m.insert("future_dated".into(), json!(o.future_dated));
        m
    }

    /// A history entry as the read path built it before it had types.
    fn history_map(o: &Observation, visibility: Visibility) -> serde_json::Map<String, Value> {
        let mut m = observation_map(o);
        m.insert("superseded".into(), json!(o.superseded_by.is_some()));
        if let Some(by) = &o.superseded_by {
            m.insert("superseded_by".into(), json!(by));
        }
        if let Some(old) = &o.supersedes {
            m.insert("supersedes".into(), json!(old));
        }
        if let Some(correction) = &o.correction_id {
            m.insert("correction_id".into(), json!(correction));
            m.insert("attributed_at".into(), json!(o.recorded_at));
        }
        if o.normalized_item() != o.item {
            m.insert("normalized_item".into(), json!(o.normalized_item()));
        }
        m.insert("current_eligibility".into(), json!(visibility));
        m
    }

    fn typed(body: &impl Serialize) -> Value {
        serde_json::to_value(body).unwrap()
    }

    #[test]
    fn observations_history_entries_and_details_keep_their_json() {
        for o in claims() {
            for visibility in [Visibility::Eligible, Visibility::Superseded] {
                let entry = history_map(&o, visibility);
                assert_eq!(
                    typed(&HistoryEntry::new(&o, visibility)),
                    Value::Object(entry.clone())
                );
                let mut detail = entry;
                detail.insert(
                    "provenance".into(),
                    json!({
                        "delivery_key": o.delivery_key,
                        "run_id": o.run_id,
                        "artifact_key": o.artifact_key,
                        "artifact_sha256": o.artifact_sha256,
                        "epoch": o.epoch,
                        "row_index": o.row_index,
                    }),
                );
                assert_eq!(
                    typed(&ObservationDetail::new(&o, visibility)),
                    Value::Object(detail)
                );
            }
        }
        let o = claim();
        let page = HistoryResponse {
            item: o.item.clone(),
            observations: vec![HistoryEntry::new(&o, Visibility::Eligible)],
            next_cursor: None,
        };
        assert_eq!(
            typed(&page),
            json!({
                "item": o.item,
                "observations": [history_map(&o, Visibility::Eligible)],
                "next_cursor": null,
            })
        );
    }

    #[test]
    fn offers_keep_their_json_and_name_gaps_only_when_there_are_some() {
        let now = at("2026-11-29T09:00:00Z");
        let offers: Vec<Offer> = claims()
            .iter()
            .map(|o| Offer {
                observation: ObservationBody::from(o),
                freshness: Freshness {
                    age_seconds: 3600,
                    stale: true,
                },
                quote: None,
            })
            .collect();
        let old_offers: Vec<Value> = claims()
            .iter()
            .map(|o| {
                let mut m = observation_map(o);
                m.insert(
                    "freshness".into(),
                    json!({"age_seconds": 3600, "stale": true}),
                );
                Value::Object(m)
            })
            .collect();
        let mut body = OffersResponse {
            item: "AX-440-R2~each~new".into(),
            as_of: now,
            quantity: None,
            offers,
            freshness_gaps: Vec::new(),
            excluded_sources: Vec::new(),
            overdue_sources: Vec::new(),
            receipt: None,
        };
        let old =
            json!({"item": "AX-440-R2~each~new", "as_of": now.to_rfc3339(), "offers": old_offers});
        assert_eq!(typed(&body), old);

        let o = claim();
        let gap = |refresh| FreshnessGap {
            connector: o.connector.clone(),
            source_account: o.source_account.clone(),
            age_seconds: 3600,
            max_age_seconds: 60,
            observed_at: o.observed_at,
            refresh,
        };
        body.freshness_gaps = vec![
            gap(RefreshAction::StartPullRun {
                method: "POST".into(),
                path: "/v1/connectors/acme-eu/runs".into(),
                requires_scope: "ops:write".into(),
            }),
            gap(RefreshAction::AwaitSupplierPush {
                detail: "push-only".into(),
            }),
        ];
        let gap_json = |refresh: Value| {
            json!({
                "connector": "acme-eu", "source_account": "ACC-1", "age_seconds": 3600,
                "max_age_seconds": 60, "observed_at": o.observed_at.to_rfc3339(),
                "refresh": refresh,
            })
        };
        let mut old = old;
        old["freshness_gaps"] = json!([
            gap_json(json!({
                "action": "start_pull_run", "method": "POST",
                "path": "/v1/connectors/acme-eu/runs", "requires_scope": "ops:write",
            })),
            gap_json(json!({"action": "await_supplier_push", "detail": "push-only"})),
        ]);
        assert_eq!(typed(&body), old);
        assert_eq!(body.freshness_gaps[0].refresh.action(), "start_pull_run");
        // The receipt digests the content, its own fields left out; any change of the content
        // changes it.
        let receipted = body.clone().with_receipt();
        let receipt = receipted.receipt.clone().unwrap();
        assert_eq!(
            (receipt.as_of, receipted.digest()),
            (now, receipt.digest.clone())
        );
        let mut changed = body.clone();
        changed.freshness_gaps[0].age_seconds += 1;
        assert_ne!(changed.digest(), receipt.digest);
        assert_eq!(
            body.freshness_gaps[1].refresh.action(),
            "await_supplier_push"
        );
    }
}
