//! Held claims: a source's newest claim about an item that may not be current (from the future,
//! or in a run not published yet), stored beside the item's rows, so that an offers answer
//! names the source and the reason instead of leaving it out in silence.
//!
//! The projector holds a claim when a batch shows it held back: a claim from the future always
//! (it never becomes current), a claim of an unpublished run only when its source has no row
//! for the item (once the run is published it becomes the row; a source with a row is in the
//! answer anyway). A newer held claim replaces an older one. When the held claim itself is
//! superseded (an identity correction moved it), the source's next newest held claim takes its
//! place, found in the item's history, or the held claim is removed. Readers show a held claim
//! only when its source has no row for the item.

use super::*;
use std::cmp::Reverse;

/// Whether a claim can be held back at all: only a claim from the future or a claim of a run
/// can. Every other claim is passed over without a read.
pub(super) fn may_be_held(o: &Observation) -> bool {
    o.future_dated || o.run_id.is_some()
}

impl Projector {
    /// Holds the newest held claim among one key's candidates of a batch (`has_row`: the source
    /// has a row for the item), and settles the key again from history when a candidate that
    /// was superseded is the claim held.
    pub(super) async fn hold_key(
        &self,
        key: &ProjectionKey,
        candidates: &[(Observation, Visibility)],
        has_row: bool,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), StoreError> {
        let newest = candidates
            .iter()
            .filter_map(|(o, v)| Some((o, v.held()?)))
            .filter(|(_, reason)| *reason == Held::FutureDated || !has_row)
            .max_by_key(|(o, _)| o.basis());
        if let Some((o, reason)) = newest {
            self.projection
                .held_claims()
                .hold(&HeldClaim::of(o, reason), None)
                .await?;
        }
        let superseded: Vec<&ObservationId> = candidates
            .iter()
            .filter(|(o, v)| *v == Visibility::Superseded && may_be_held(o))
            .map(|(o, _)| &o.observation_id)
            .collect();
        if superseded.is_empty() {
            return Ok(());
        }
        match self.projection.held_claims().held(key).await? {
            Some(held) if superseded.contains(&&held.observation_id) => {
                let claims = self.maybe_held_of(key).await?;
                self.settle_held(key, claims, eligibility).await
            }
            _ => Ok(()),
        }
    }

    /// The claims of `key`'s source in the item's history that may be held, every page.
    async fn maybe_held_of(&self, key: &ProjectionKey) -> Result<Vec<Observation>, StoreError> {
        let mut claims = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .reads
                .item_history(&key.source.tenant, &key.item, cursor.as_deref(), 100)
                .await?;
            claims.extend(
                page.observations
                    .into_iter()
                    .filter(|o| o.source() == key.source && may_be_held(o)),
            );
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(claims),
            }
        }
    }

    /// Decides one key's held claim from `claims` (those of the source that may be held, as the
    /// item's history shows them) and stores it, or removes a held claim that no longer is one.
    /// A concurrent write that beats it held a claim it saw held itself; it is left standing.
    pub(super) async fn settle_held(
        &self,
        key: &ProjectionKey,
        mut claims: Vec<Observation>,
        eligibility: &Eligibility<'_>,
    ) -> Result<(), StoreError> {
        claims.sort_by_key(|o| Reverse(o.basis()));
        let mut newest = None;
        for claim in claims {
            // The index copy can only lack a later supersession, which never holds a claim
            // back: a claim it shows not held is not; one it shows held is read again.
            if eligibility.check_for_row(&claim).await?.held().is_none() {
                continue;
            }
            let fresh = self
                .reads
                .observation(claim.observation_id.as_str())
                .await?
                .unwrap_or(claim);
            if let Some(reason) = eligibility.check_for_row(&fresh).await?.held() {
                newest = Some(HeldClaim::of(&fresh, reason));
                break;
            }
        }
        let stored = self.projection.held_claims().held(key).await?;
        match (newest, stored) {
            (Some(claim), stored) if stored.as_ref() != Some(&claim) => {
                let expected = stored.as_ref().map(|s| s.basis.as_str());
                self.projection.held_claims().hold(&claim, expected).await?;
            }
            (None, Some(stored)) => {
                self.projection
                    .held_claims()
                    .release(key, &stored.basis)
                    .await?;
            }
            _ => {}
        }
        Ok(())
    }
}
