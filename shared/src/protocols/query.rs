//! The buying agents' read path. It only reads: no write, no enqueue, no call to a supplier.
//! Offers come from the projection; history and single observations from the evidence, with
//! the same visibility rules (uncommitted deliveries and unpublished runs are never shown).

use crate::domain::ids::{ObservationId, TenantId};
use crate::domain::item::{CanonicalItem, ItemParts};
use crate::domain::model::Observation;
use crate::domain::terms::Decimal;
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::{VerificationEvent, VerificationView};
use crate::protocols::ports::StoreError;
use crate::protocols::projection::{Eligibility, EvidenceReads, ProjectionStore};
use std::collections::HashMap;
use std::sync::Arc;

mod responses;
pub use responses::{
    Attribution, Freshness, FreshnessGap, HistoryEntry, HistoryResponse, ItemsResponse, ListedItem,
    ObservationBody, ObservationDetail, Offer, OffersResponse, Provenance, RefreshAction,
};

/// Most items one `GET /v1/items?mpn=` lists (a part number has a handful of packaging and
/// condition variants; more is a sign of something else).
pub const MAX_LISTED_ITEMS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidRequest(String),
    /// A page cursor that was not issued for this tenant, item and listing.
    #[error("{0}")]
    InvalidCursor(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who is asking: the tenant and scopes from the authorizer, never from a header a caller sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub scopes: Vec<String>,
    /// Who the token names (the JWT `sub`), recorded on operator actions; never used for access.
    pub subject: Option<String>,
}

pub const READ_SCOPE: &str = "offers:read";

#[derive(Clone)]
pub struct QueryService {
    reads: Arc<dyn EvidenceReads>,
    projection: Arc<dyn ProjectionStore>,
}

impl QueryService {
    pub fn new(reads: Arc<dyn EvidenceReads>, projection: Arc<dyn ProjectionStore>) -> Self {
        Self { reads, projection }
    }

    fn item_key(item: &str) -> Result<String, QueryError> {
        CanonicalItem::parse_key(item)
            .map(|i| i.key())
            .map_err(|e| QueryError::InvalidRequest(format!("item {}: {e}", quoted(item))))
    }

    /// Current offer per source for an item.
    pub async fn offers(
        &self,
        principal: &Principal,
        item: &str,
        max_age_seconds: Option<i64>,
        now: Timestamp,
    ) -> Result<OffersResponse, QueryError> {
        self.offers_for(principal, item, max_age_seconds, None, now)
            .await
    }

    /// [`Self::offers`], each quoted for `quantity` when asked (`?quantity=`): orderable or
    /// why not, its unit and extended price, its rank within its currency.
    pub async fn offers_for(
        &self,
        principal: &Principal,
        item: &str,
        max_age_seconds: Option<i64>,
        quantity: Option<&Decimal>,
        now: Timestamp,
    ) -> Result<OffersResponse, QueryError> {
        let item = Self::item_key(item)?;
        if max_age_seconds.is_some_and(|m| m < 0) {
            return Err(QueryError::InvalidRequest(
                "max_age_seconds must be a non-negative integer".into(),
            ));
        }
        // The claims and every verification record about them, side by side.
        let (rows, verifications) = tokio::try_join!(
            self.projection.offers(&principal.tenant, &item),
            self.reads.item_verifications(&principal.tenant, &item)
        )?;
        let eligibility = Eligibility::new(self.reads.as_ref());
        eligibility
            .prefetch_sources(rows.iter().map(|row| row.observation.source()))
            .await?;
        let mut offers = Vec::new();
        let mut gaps = Vec::new();
        for row in rows {
            let o = row.observation;
            // A quarantine, and an identity correction, take effect at once, even before the
            // projector has updated the row.
            if eligibility.source_quarantined(&o.source()).await?
                || !eligibility.rules(&o.source()).await?.attributes(&o)
            {
                continue;
            }
            let age = now.seconds_since(o.observed_at).max(0);
            let stale = max_age_seconds.is_some_and(|m| age > m);
            offers.push(Offer {
                observation: body_of(&o, &verifications, now),
                freshness: Freshness {
                    age_seconds: age,
                    stale,
                },
                quote: quantity.map(|q| responses::quote_of(&o, q, now)),
            });
            if let (true, Some(max_age)) = (stale, max_age_seconds) {
                gaps.push(FreshnessGap {
                    connector: o.connector.clone(),
                    source_account: o.source_account.clone(),
                    age_seconds: age,
                    max_age_seconds: max_age,
                    observed_at: o.observed_at,
                    refresh: self.refresh_action(&o).await?,
                });
            }
        }
        if quantity.is_some() {
            responses::rank_offers(&mut offers);
        }
        Ok(OffersResponse {
            item,
            as_of: now,
            quantity: quantity.map(|q| q.as_str().to_owned()),
            offers,
            freshness_gaps: gaps,
        })
    }

    /// The tenant's items of part number `mpn` (every manufacturer, packaging, condition and
    /// revision; of `manufacturer` alone when one is given), each with its number of current
    /// offers as the offers read counts them. Both are read under the item rules (trimmed, NFC,
    /// ASCII letters upper-cased), as the items hold them.
    pub async fn items(
        &self,
        principal: &Principal,
        mpn: &str,
        manufacturer: Option<&str>,
        now: Timestamp,
    ) -> Result<ItemsResponse, QueryError> {
        let parts = ItemParts {
            part_number: mpn,
            manufacturer,
            ..ItemParts::default()
        };
        let part = CanonicalItem::of(parts).map_err(|e| {
            let asked = manufacturer.map_or(String::new(), |m| format!(" of {}", quoted(m)));
            QueryError::InvalidRequest(format!("mpn {}{asked}: {e}", quoted(mpn)))
        })?;
        let mut found = Vec::new();
        for key in self
            .projection
            .items_of_part(&principal.tenant, &part)
            .await?
        {
            // The index holds keys ingest wrote from valid items: one that does not parse is
            // a defect to report, not an item to leave out quietly.
            let item = CanonicalItem::parse_key(&key).map_err(|e| {
                StoreError::Invariant(format!("the by_part index holds item key {key:?}: {e}"))
            })?;
            if made_by(&item, part.manufacturer.as_deref()) {
                found.push((key, item));
            }
        }
        let truncated = found.len() > MAX_LISTED_ITEMS;
        found.truncate(MAX_LISTED_ITEMS);
        let mut items = Vec::with_capacity(found.len());
        for (key, item) in found {
            let current_offers = self.offers(principal, &key, None, now).await?.offers.len();
            items.push(ListedItem::of(key, item, current_offers));
        }
        Ok(ItemsResponse {
            mpn: part.part_number,
            manufacturer: part.manufacturer,
            as_of: now,
            items,
            truncated,
        })
    }

    async fn refresh_action(&self, o: &Observation) -> Result<RefreshAction, QueryError> {
        let pulled = self
            .reads
            .connector_config(&o.connector)
            .await?
            .is_some_and(|c| c.transport_kind() == "pull");
        Ok(match pulled {
            true => RefreshAction::StartPullRun {
                method: "POST".into(),
                path: format!("/v1/connectors/{}/runs", o.connector),
                requires_scope: "ops:write".into(),
            },
            false => RefreshAction::AwaitSupplierPush {
                detail: format!("connector {} is push-only; ask the supplier to resend or wait for its next event", o.connector),
            },
        })
    }

    /// History of an item, newest first, including superseded and quarantined-source claims
    /// (marked), excluding anything not yet published.
    pub async fn history(
        &self,
        principal: &Principal,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
    ) -> Result<HistoryResponse, QueryError> {
        let item = Self::item_key(item)?;
        let limit = limit.clamp(1, 100);
        let (page, verifications) = tokio::join!(
            self.reads
                .item_history(&principal.tenant, &item, cursor, limit),
            self.reads.item_verifications(&principal.tenant, &item)
        );
        let page = page.map_err(|e| match e {
            StoreError::InvalidCursor(m) => QueryError::InvalidCursor(m),
            other => QueryError::Store(other),
        })?;
        let verifications = verifications?;
        let now = Timestamp::now();
        // The index copy may lag the base item (a supersession marker, say): the base items,
        // read consistently in one batch with what their visibility depends on, are what
        // readers see.
        let eligibility = Eligibility::new(self.reads.as_ref());
        let mut current: HashMap<ObservationId, Observation> = eligibility
            .fresh_copies(&page.observations)
            .await?
            .into_iter()
            .map(|o| (o.observation_id.clone(), o))
            .collect();
        let mut observations = Vec::new();
        for indexed in page.observations {
            let o = current.remove(&indexed.observation_id).unwrap_or(indexed);
            let visibility = eligibility.check(&o).await?;
            if !visibility.is_published() {
                continue;
            }
            let mut entry = HistoryEntry::new(&o, visibility);
            entry.observation = body_of(&o, &verifications, now);
            observations.push(entry);
        }
        Ok(HistoryResponse {
            item,
            observations,
            next_cursor: page.next,
        })
    }

    /// One observation with its provenance (never the payload).
    pub async fn observation(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<ObservationDetail, QueryError> {
        let not_found = || QueryError::NotFound(format!("observation {} not found", quoted(id)));
        let id = ObservationId::parse(id).map_err(|_| not_found())?;
        let o = self
            .reads
            .observation(id.as_str())
            .await?
            .ok_or_else(not_found)?;
        if o.tenant != principal.tenant {
            return Err(not_found());
        }
        let visibility = Eligibility::new(self.reads.as_ref()).check(&o).await?;
        if !visibility.is_published() {
            return Err(not_found());
        }
        let verifications = self.reads.item_verifications(&o.tenant, &o.item).await?;
        let mut detail = ObservationDetail::new(&o, visibility);
        detail.entry.observation = body_of(&o, &verifications, Timestamp::now());
        Ok(detail)
    }
}

/// The observation's fields as a response shows them, with its verification at `now`.
fn body_of(
    o: &Observation,
    verifications: &[VerificationEvent],
    now: Timestamp,
) -> ObservationBody {
    ObservationBody {
        verification: VerificationView::at(verifications, &o.observation_id, now),
        ..ObservationBody::from(o)
    }
}

/// A caller's text quoted (escaped) in a message, its first 64 characters only: a message
/// never echoes unbounded input.
fn quoted(text: &str) -> String {
    let shown: String = text.chars().take(64).collect();
    if shown.len() < text.len() {
        format!("{shown:?}...")
    } else {
        format!("{shown:?}")
    }
}

/// Whether `item` is of `manufacturer` (as items hold it; `None`: any).
fn made_by(item: &CanonicalItem, manufacturer: Option<&str>) -> bool {
    manufacturer.is_none_or(|asked| item.manufacturer.as_deref() == Some(asked))
}
