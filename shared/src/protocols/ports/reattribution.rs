//! Re-attribution: moving an observation to the item an identity correction names. The
//! projector re-attributes the claims it meets (through `Reattributor`) as the identity
//! corrections' sweep does; both sides share these types from here.

use crate::domain::ids::ObservationId;
use crate::domain::item::CanonicalItem;
use crate::domain::model::{CorrectionRules, Observation};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::StoreError;
use async_trait::async_trait;

/// One re-attribution: `old` (not superseded) moves to `to` under `correction_id`.
#[derive(Debug, Clone)]
pub struct Reattribution {
    pub old: Observation,
    pub to: CanonicalItem,
    pub correction_id: String,
}

impl Reattribution {
    /// The re-attribution `rules` call for, if `observation` is not attributed as they say.
    pub fn needed(rules: &CorrectionRules, observation: &Observation) -> Option<Self> {
        if observation.superseded_by.is_some() || rules.attributes(observation) {
            return None;
        }
        let rule = rules.rule_for(observation.normalized_item())?;
        Some(Self {
            old: observation.clone(),
            to: rule.to_item.clone(),
            correction_id: rule.correction_id.clone(),
        })
    }
}

/// Writes re-attributions. Each one is atomic (copy, mark, `SUP#` record) and conditional on
/// the old observation not being superseded yet; one that lost that race is skipped. Returns
/// the observations this call re-attributed.
#[async_trait]
pub trait Reattributor: Send + Sync {
    async fn reattribute(
        &self,
        moves: &[Reattribution],
        at: Timestamp,
    ) -> Result<Vec<ObservationId>, StoreError>;
}
