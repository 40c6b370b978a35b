//! The buying agents' read path. It only reads: no write, no enqueue, no call to a supplier.
//! Offers come from the projection; history and single observations from the evidence, with
//! the same visibility rules (uncommitted deliveries and unpublished runs are never shown).

use crate::domain::ids::{ConnectorId, ObservationId, TenantId};
use crate::domain::item::{CanonicalItem, ItemParts};
use crate::domain::model::{Observation, SourceRef};
use crate::domain::source_health::SourceHealth;
use crate::domain::terms::Decimal;
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::{VerificationEvent, VerificationView};
use crate::protocols::ports::StoreError;
use crate::protocols::projection::{Eligibility, EvidenceReads, ProjectionStore, Visibility};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

pub mod as_of;
mod responses;
pub mod sources;
pub use responses::{
    Attribution, ExcludedSource, Exclusion, Freshness, FreshnessGap, HistoryEntry, HistoryResponse,
    ItemsResponse, ListedItem, ObservationBody, ObservationDetail, Offer, OffersResponse,
    Provenance, Receipt, RefreshAction,
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
        let asked = OffersAsked {
            max_age_seconds,
            quantity,
            as_of: None,
        };
        self.offers_as_asked(principal, item, &asked, now).await
    }

    /// The offers answer `asked` names: at `now`, or as it stood at an earlier instant
    /// (`as_of`, rebuilt from the evidence: `as_of`), with its receipt.
    pub async fn offers_as_asked(
        &self,
        principal: &Principal,
        item: &str,
        asked: &OffersAsked<'_>,
        now: Timestamp,
    ) -> Result<OffersResponse, QueryError> {
        let item = Self::item_key(item)?;
        if asked.max_age_seconds.is_some_and(|m| m < 0) {
            return Err(QueryError::InvalidRequest(
                "max_age_seconds must be a non-negative integer".into(),
            ));
        }
        let at = instant_asked(asked.as_of, now)?;
        let tenant = &principal.tenant;
        let (standing, verifications, health) = match asked.as_of {
            None => self.live_claims(tenant, &item).await?,
            Some(_) => tokio::try_join!(
                as_of::claims_at(self.reads.as_ref(), tenant, &item, at),
                self.reads.item_verifications(tenant, &item)
            )
            .map(|(claims, verifications)| (as_of::standing(&claims), verifications, Vec::new()))?,
        };
        let mut answer = self
            .answer(item, standing, &verifications, asked, at)
            .await?;
        // How deliveries are arriving now: live answers only, outside the receipt.
        let connectors: Vec<&ConnectorId> = answer
            .offers
            .iter()
            .map(|o| &o.observation.connector)
            .chain(answer.excluded_sources.iter().map(|e| &e.connector))
            .collect();
        let overdue = self.overdue_sources(&connectors, &health, at).await?;
        answer.overdue_sources = overdue;
        Ok(answer)
    }

    /// The current claim of each source now (the projection's rows), and every verification
    /// record of the item's claims, read side by side. A quarantine, and an identity
    /// correction, take effect at once, even before the projector has updated a row.
    async fn live_claims(
        &self,
        tenant: &TenantId,
        item: &str,
    ) -> Result<(Standing, Vec<VerificationEvent>, Vec<SourceHealth>), QueryError> {
        let ((rows, held), verifications, health) = tokio::try_join!(
            self.projection.held_claims().standing(tenant, item),
            self.reads.item_verifications(tenant, item),
            self.reads.source_health_of(tenant)
        )?;
        let eligibility = Eligibility::new(self.reads.as_ref());
        eligibility
            .prefetch_sources(rows.iter().map(|row| row.observation.source()))
            .await?;
        let with_row: BTreeSet<SourceRef> = rows.iter().map(|r| r.observation.source()).collect();
        let (mut claims, mut excluded) = (Vec::new(), Vec::new());
        for row in rows {
            let o = row.observation;
            if eligibility.source_quarantined(&o.source()).await? {
                excluded.push(ExcludedSource::of(&o, Exclusion::SourceQuarantined));
            } else if !eligibility.rules(&o.source()).await?.attributes(&o) {
                excluded.push(ExcludedSource::of(&o, Exclusion::AwaitingCorrection));
            } else {
                claims.push(o);
            }
        }
        // A held claim speaks for a source only when the source has no row for the item.
        excluded.extend(
            held.iter()
                .filter(|h| !with_row.contains(&h.key().source))
                .map(ExcludedSource::held),
        );
        ExcludedSource::order(&mut excluded);
        Ok(((claims, excluded), verifications, health))
    }

    /// The offers answer of `claims` (one per source) at `at`, with its receipt.
    async fn answer(
        &self,
        item: String,
        (claims, excluded_sources): Standing,
        verifications: &[VerificationEvent],
        asked: &OffersAsked<'_>,
        at: Timestamp,
    ) -> Result<OffersResponse, QueryError> {
        let mut offers = Vec::new();
        let mut gaps = Vec::new();
        for o in claims {
            let age = at.seconds_since(o.observed_at).max(0);
            let stale = asked.max_age_seconds.is_some_and(|m| age > m);
            offers.push(Offer {
                observation: body_of(&o, verifications, at),
                freshness: Freshness {
                    age_seconds: age,
                    stale,
                },
                quote: asked.quantity.map(|q| responses::quote_of(&o, q, at)),
            });
            if let (true, Some(max_age)) = (stale, asked.max_age_seconds) {
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
        if asked.quantity.is_some() {
            responses::rank_offers(&mut offers);
        }
        Ok(OffersResponse {
            item,
            as_of: at,
            quantity: asked.quantity.map(|q| q.as_str().to_owned()),
            offers,
            freshness_gaps: gaps,
            excluded_sources,
            overdue_sources: Vec::new(),
            receipt: None,
        }
        .with_receipt())
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
        self.items_as_of(principal, mpn, manufacturer, None, now)
            .await
    }

    /// [`Self::items`] now, or as they stood at `as_of`: the items with a claim recorded by
    /// then, each with its current offers then.
    pub async fn items_as_of(
        &self,
        principal: &Principal,
        mpn: &str,
        manufacturer: Option<&str>,
        as_of: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<ItemsResponse, QueryError> {
        let at = instant_asked(as_of, now)?;
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
            let current_offers = match as_of {
                None => self.offers(principal, &key, None, now).await?.offers.len(),
                Some(at) => {
                    let claims =
                        as_of::claims_at(self.reads.as_ref(), &principal.tenant, &key, at).await?;
                    if claims.is_empty() {
                        continue;
                    }
                    as_of::current_claims(&claims).len()
                }
            };
            items.push(ListedItem::of(key, item, current_offers));
        }
        Ok(ItemsResponse {
            mpn: part.part_number,
            manufacturer: part.manufacturer,
            as_of: at,
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
        self.history_as_of(principal, item, cursor, limit, None, Timestamp::now())
            .await
    }

    /// [`Self::history`] now, or as it stood at `as_of`: only the claims recorded by then, each
    /// marked as it was then (a page may hold fewer than `limit`).
    pub async fn history_as_of(
        &self,
        principal: &Principal,
        item: &str,
        cursor: Option<&str>,
        limit: i32,
        as_of: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<HistoryResponse, QueryError> {
        let item = Self::item_key(item)?;
        let at = instant_asked(as_of, now)?;
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
        let claims = match as_of {
            None => self.fresh_claims(page.observations).await?,
            Some(at) => as_of::stood_at(self.reads.as_ref(), page.observations, at).await?,
        };
        let observations = claims
            .iter()
            .filter(|(_, visibility)| visibility.is_published())
            .map(|(o, visibility)| HistoryEntry {
                observation: body_of(o, &verifications, at),
                ..HistoryEntry::new(o, *visibility)
            })
            .collect();
        Ok(HistoryResponse {
            item,
            observations,
            next_cursor: page.next,
        })
    }

    /// `indexed` claims as their base items hold them now, with their visibility now. The index
    /// copy may lag the base item (a supersession marker, say): the base items, read
    /// consistently in one batch with what their visibility depends on, are what readers see.
    async fn fresh_claims(
        &self,
        indexed: Vec<Observation>,
    ) -> Result<Vec<(Observation, Visibility)>, QueryError> {
        let eligibility = Eligibility::new(self.reads.as_ref());
        let mut current: HashMap<ObservationId, Observation> = eligibility
            .fresh_copies(&indexed)
            .await?
            .into_iter()
            .map(|o| (o.observation_id.clone(), o))
            .collect();
        let mut claims = Vec::with_capacity(indexed.len());
        for indexed in indexed {
            let o = current.remove(&indexed.observation_id).unwrap_or(indexed);
            let visibility = eligibility.check(&o).await?;
            claims.push((o, visibility));
        }
        Ok(claims)
    }

    /// One observation with its provenance (never the payload).
    pub async fn observation(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<ObservationDetail, QueryError> {
        self.observation_as_of(principal, id, None, Timestamp::now())
            .await
    }

    /// [`Self::observation`] now, or as it stood at `as_of` (not found if recorded later).
    pub async fn observation_as_of(
        &self,
        principal: &Principal,
        id: &str,
        as_of: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<ObservationDetail, QueryError> {
        let at = instant_asked(as_of, now)?;
        let not_found = || QueryError::NotFound(format!("observation {} not found", quoted(id)));
        let id = ObservationId::parse(id).map_err(|_| not_found())?;
        let o = self
            .reads
            .observation(id.as_str())
            .await?
            .filter(|o| o.tenant == principal.tenant)
            .ok_or_else(not_found)?;
        let (o, visibility) = match as_of {
            None => {
                let visibility = Eligibility::new(self.reads.as_ref()).check(&o).await?;
                (o, visibility)
            }
            Some(at) => as_of::stood_at(self.reads.as_ref(), vec![o], at)
                .await?
                .pop()
                .ok_or_else(not_found)?,
        };
        if !visibility.is_published() {
            return Err(not_found());
        }
        let verifications = self.reads.item_verifications(&o.tenant, &o.item).await?;
        let mut detail = ObservationDetail::new(&o, visibility);
        detail.entry.observation = body_of(&o, &verifications, at);
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

/// The current claim of each source, and the sources left out with why.
type Standing = (Vec<Observation>, Vec<ExcludedSource>);

/// What an offers read asks for besides the item.
#[derive(Debug, Clone, Copy, Default)]
pub struct OffersAsked<'a> {
    /// Offers older than this are stale, with a freshness gap.
    pub max_age_seconds: Option<i64>,
    /// Quote each offer for this quantity.
    pub quantity: Option<&'a Decimal>,
    /// The answer as it stood then (`None`: now).
    pub as_of: Option<Timestamp>,
}

/// The instant a read answers for: `as_of` when asked (not after `now`: what has not happened
/// cannot be answered), else `now`.
pub fn instant_asked(as_of: Option<Timestamp>, now: Timestamp) -> Result<Timestamp, QueryError> {
    match as_of {
        Some(at) if at > now => Err(QueryError::InvalidRequest(format!(
            "as_of {} is later than now ({})",
            at.to_rfc3339(),
            now.to_rfc3339()
        ))),
        Some(at) => Ok(at),
        None => Ok(now),
    }
}

/// A caller's text quoted (escaped) in a message, its first 64 characters only: a message
/// never echoes unbounded input.
pub(crate) fn quoted(text: &str) -> String {
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
