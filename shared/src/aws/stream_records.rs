//! Evidence-table stream records -> `EvidenceChange`. Shared by the projector Lambda (DynamoDB
//! event source) and the local stack's stream poller, so both see the same meaning.

use crate::aws::dynamo::decode_replay;
use crate::domain::model::{
    CorrectionRules, Observation, ProjectionWork, ReplayRecord, ReplayState, Run, RunPageRecord,
    RunStatus, SourceQuarantine, SourceRef,
};
use crate::protocols::ports::StoreError;
use crate::protocols::projection::EvidenceChange;
use serde::Deserialize;
use std::collections::BTreeSet;

#[derive(Deserialize)]
struct Entity {
    #[serde(default)]
    entity: Option<String>,
}

fn decode<T: serde::de::DeserializeOwned>(item: serde_dynamo::Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Invariant(format!("stream image does not decode: {e}")))
}

/// An observation's stream record. One stored before today's supported ranges were enforced
/// does not decode: it is skipped and reported, never retried
/// (docs/adr/0012-supported-ranges-of-stored-values.md).
fn observation_change(new_image: serde_dynamo::Item) -> EvidenceChange {
    match decode::<Observation>(new_image) {
        Ok(observation) => EvidenceChange::Observation(Box::new(observation)),
        Err(e) => {
            tracing::error!(error = %e, "a stream record's observation does not decode; skipped");
            EvidenceChange::Ignored
        }
    }
}

/// Classifies one stream record. Only `INSERT` and `MODIFY` matter: TTL deletions (AWS:
/// `REMOVE` by the service; DynamoDB Local: `UNKNOWN_TO_SDK_VERSION`) and every other event
/// are ignored, as is any entity the projection does not depend on.
pub fn classify(
    event_name: &str,
    old_image: Option<serde_dynamo::Item>,
    new_image: Option<serde_dynamo::Item>,
) -> Result<EvidenceChange, StoreError> {
    if !matches!(event_name, "INSERT" | "MODIFY") {
        return Ok(EvidenceChange::Ignored);
    }
    let Some(new_image) = new_image.filter(|i| !i.is_empty()) else {
        return Ok(EvidenceChange::Ignored);
    };
    let entity: Entity = decode(new_image.clone())?;
    Ok(match entity.entity.as_deref() {
        Some("observation") => observation_change(new_image),
        Some("replay") => replay_change(old_image, new_image)?,
        Some("projection_work") if event_name == "INSERT" => {
            EvidenceChange::Work(Box::new(decode::<ProjectionWork>(new_image)?))
        }
        Some("run_page") if event_name == "INSERT" => {
            EvidenceChange::RunPage(Box::new(decode::<RunPageRecord>(new_image)?))
        }
        Some("run") => run_change(old_image, new_image)?,
        Some("correction_rules") => rules_change(old_image, new_image)?,
        Some("source_quarantine") => {
            EvidenceChange::SourceQuarantine(decode::<SourceQuarantine>(new_image)?.source)
        }
        _ => EvidenceChange::Ignored,
    })
}

/// A replay record that just reached `COMMITTED`. An unstaged delivery's observations were
/// written in the same transaction as its committed record: their own INSERT records project
/// them. A staged delivery's observations became eligible only now.
fn replay_change(
    old_image: Option<serde_dynamo::Item>,
    new_image: serde_dynamo::Item,
) -> Result<EvidenceChange, StoreError> {
    let new: ReplayRecord = decode_replay(new_image.into())?;
    let was_committed = match old_image.filter(|i| !i.is_empty()) {
        Some(old) => decode_replay(old.into())?.state == ReplayState::Committed,
        None => false,
    };
    Ok(
        if new.state == ReplayState::Committed && !was_committed && new.chunks_total > 1 {
            EvidenceChange::DeliveryCommitted(new.observation_ids)
        } else {
            EvidenceChange::Ignored
        },
    )
}

/// A run that just reached `COMPLETE`.
fn run_change(
    old_image: Option<serde_dynamo::Item>,
    new_image: serde_dynamo::Item,
) -> Result<EvidenceChange, StoreError> {
    let new: Run = decode(new_image)?;
    let was_complete = match old_image.filter(|i| !i.is_empty()) {
        Some(old) => decode::<Run>(old)?.status == Some(RunStatus::Complete),
        None => false,
    };
    Ok(
        if new.status == Some(RunStatus::Complete) && !was_complete {
            EvidenceChange::RunCompleted(Box::new(new))
        } else {
            EvidenceChange::Ignored
        },
    )
}

/// A source's identity rules as the evidence table stores them.
#[derive(Deserialize)]
struct StoredRules {
    source: SourceRef,
    #[serde(flatten)]
    rules: CorrectionRules,
}

/// A source's identity rules changed: every item whose rows a changed rule can move (the part
/// itself, where the old rule sent it and where the new one does).
fn rules_change(
    old_image: Option<serde_dynamo::Item>,
    new_image: serde_dynamo::Item,
) -> Result<EvidenceChange, StoreError> {
    let new: StoredRules = decode(new_image)?;
    let old = match old_image.filter(|i| !i.is_empty()) {
        Some(old) => decode::<StoredRules>(old)?.rules,
        None => CorrectionRules::default(),
    };
    let mut items = BTreeSet::new();
    for (part, rule) in &new.rules.rules {
        let before = old.rules.get(part);
        if before != Some(rule) {
            items.insert(part.clone());
            items.insert(rule.to_item.key());
            if let Some(before) = before {
                items.insert(before.to_item.key());
            }
        }
    }
    Ok(EvidenceChange::CorrectionRules {
        source: new.source,
        items: items.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_dynamo::{AttributeValue, Item};
    use std::collections::HashMap;

    fn item(entity: &str) -> Item {
        Item::from(HashMap::from([(
            "entity".to_owned(),
            AttributeValue::S(entity.to_owned()),
        )]))
    }

    #[test]
    fn ttl_deletions_and_removals_are_ignored() {
        // AWS: REMOVE by the TTL service; DynamoDB Local: UNKNOWN_TO_SDK_VERSION.
        for name in ["REMOVE", "UNKNOWN_TO_SDK_VERSION", ""] {
            let change = classify(name, Some(item("replay")), None).unwrap();
            assert!(matches!(change, EvidenceChange::Ignored), "{name}");
        }
    }

    #[test]
    fn records_the_projection_does_not_read_are_ignored() {
        for entity in [
            "quarantine",
            "connector",
            "delivery_commit",
            "identity_correction",
        ] {
            let change = classify("INSERT", None, Some(item(entity))).unwrap();
            assert!(matches!(change, EvidenceChange::Ignored), "{entity}");
        }
    }
}
