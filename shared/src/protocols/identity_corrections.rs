//! Identity corrections that stick (docs/adr/0032-identity-corrections-stick.md).
//!
//! A correction is a *rule* for one source: rows that normalized to `from_item` belong to
//! `to_item`. Recording it moves the source's rule set and writes the correction's append-only
//! record in one transaction; from that moment:
//! - ingest attributes every new row by the rules (the raw artifact is untouched, the
//!   observation carries the correction id), including the remaining chunks of a staged
//!   delivery that was `PENDING` when the rule changed;
//! - the projector and the read path never show a claim the rules attribute elsewhere, whether
//!   or not it has been re-attributed yet, so the old item shows nothing from the source at once;
//! - every existing observation of the part is re-attributed: a superseding copy under the new
//!   item, the old one marked superseded, and a `SUP#` record under the correction, all in one
//!   transaction. The sweep that finds them reads the item-history index, which is eventually
//!   consistent in AWS; claims it cannot see yet are re-attributed by the projector when their
//!   own stream record (or their delivery's commit) arrives, the current row's claim is
//!   re-attributed from the projection row itself, and the sweeper repeats the sweep until a pass
//!   that starts after `SETTLE_AFTER_SECONDS` finds nothing left.
//!
//! A correction can itself be corrected (a new correction of the same part replaces it) or
//! withdrawn (the part's rows belong to the part again); each is a new record naming the one it
//! replaces, and each observation copy names the correction that made it and when.

use crate::domain::hashing::{base32_lower, sha256};
use crate::domain::ids::ObservationId;
use crate::domain::item::CanonicalItem;
use crate::domain::model::{
    CorrectionKind, CorrectionRule, CorrectionRules, IdentityCorrection, SourceRef,
    SupersessionRecord, SweepRecord,
};
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{
    Clock, CrashPoint, EvidenceReads, Faults, Reattribution, Reattributor, StoreError,
};
use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::{info, warn};

/// A sweep that starts this long after its correction was recorded sees every observation
/// written before the rule (the item-history index has caught up); a correction is settled once
/// such a sweep finds nothing left to re-attribute.
pub const SETTLE_AFTER_SECONDS: i64 = 60;
/// Observations re-attributed per transaction (three items each: the copy, the mark, the record).
pub const REATTRIBUTION_GROUP: usize = 25;
/// A sweep starts one group at most this often. Every `SUP#` record of a correction shares its
/// partition key and every re-attribution rewrites two entries of one item's history partition:
/// ten groups a second keep both near 500 write units a second, half a partition's limit, so a
/// large correction never throttles the ingest writing to the same item (docs/scale.md).
pub const REATTRIBUTION_GROUP_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// What recording a correction found.
#[derive(Debug)]
pub enum Recorded {
    /// The record and the rule were written.
    Recorded,
    /// A correction with this id exists already (this request runs it again).
    Exists,
    /// The source's rule set changed since it was read; read it again.
    RulesChanged,
}

/// The evidence-table writes and reads of corrections. Implemented by `DynamoEvidenceStore`.
#[async_trait]
pub trait CorrectionStore: Send + Sync {
    /// The rules in force for `source` (consistent; empty when none).
    async fn correction_rules(&self, source: &SourceRef) -> Result<CorrectionRules, StoreError>;
    /// Writes `correction` (MUST be refused if the id exists: records are append-only) and
    /// `rules` (MUST be refused unless the stored rule set is still at `expected_version`, or
    /// absent when it is 0) in one transaction, and marks the correction for settling.
    async fn record_correction(
        &self,
        correction: &IdentityCorrection,
        rules: &CorrectionRules,
        expected_version: u64,
        settle_due: Timestamp,
    ) -> Result<Recorded, StoreError>;
    async fn correction(&self, id: &str) -> Result<Option<IdentityCorrection>, StoreError>;
    /// The observations a correction re-attributed, from its `SUP#` records.
    async fn supersessions(&self, id: &str) -> Result<Vec<SupersessionRecord>, StoreError>;
    async fn sweeps(&self, id: &str) -> Result<Vec<SweepRecord>, StoreError>;
    /// Appends a sweep record; when `settled`, the correction leaves the settling list,
    /// otherwise it is due again at `next_due`.
    async fn record_sweep(
        &self,
        sweep: &SweepRecord,
        settled: bool,
        next_due: Timestamp,
    ) -> Result<(), StoreError>;
    /// Correction ids whose settling is due at `now`.
    async fn settling(&self, now: Timestamp) -> Result<Vec<String>, StoreError>;
    /// Whether the correction has left the settling list.
    async fn is_settled(&self, id: &str) -> Result<bool, StoreError>;
}

#[derive(Debug, Clone)]
pub struct CorrectionRequest {
    pub source: SourceRef,
    /// The item the rows were normalized to, e.g. `AX-440` (or its full key).
    pub from_item: String,
    pub to_item: CanonicalItem,
    pub reason: String,
    pub actor: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CorrectionError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the rule in force (e.g. withdrawing a correction that is no
    /// longer the rule for its part).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("injected crash at {0:?}")]
    InjectedCrash(CrashPoint),
}

/// A correction as the ops API shows it: the record, whether it is the rule in force, and
/// everything it re-attributed so far.
#[derive(Debug, Clone, Serialize)]
pub struct CorrectionView {
    #[serde(flatten)]
    pub correction: IdentityCorrection,
    /// Whether this correction is the rule in force for its part.
    pub in_force: bool,
    /// The correction that replaced it, when it is no longer in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
    pub superseded_observations: Vec<ObservationId>,
    pub supersessions: Vec<SupersessionRecord>,
    pub sweeps: Vec<SweepRecord>,
    pub settled: bool,
}

#[derive(Clone)]
pub struct CorrectionService {
    reads: Arc<dyn EvidenceReads>,
    store: Arc<dyn CorrectionStore>,
    writes: Arc<dyn Reattributor>,
    clock: Arc<dyn Clock>,
    faults: Arc<dyn Faults>,
}

const MAX_RULE_RACES: usize = 5;

/// One change of a source's rule for a part, as `correct` and `withdraw` ask for it.
struct RuleChange<'a> {
    source: &'a SourceRef,
    from: &'a str,
    to: &'a CanonicalItem,
    kind: CorrectionKind,
    reason: &'a str,
    actor: Option<String>,
    /// A withdrawal names the correction it withdraws, which must be the rule in force.
    must_replace: Option<&'a str>,
}

impl RuleChange<'_> {
    /// The correction record and the rule set that recording it against `rules` writes.
    fn proposed(
        &self,
        rules: &CorrectionRules,
        now: Timestamp,
    ) -> (IdentityCorrection, CorrectionRules) {
        let replaces = rules.rule_for(self.from).map(|r| r.correction_id.clone());
        let id = correction_id(
            self.source,
            self.from,
            self.to,
            self.kind,
            replaces.as_deref(),
        );
        let correction = IdentityCorrection {
            correction_id: id.clone(),
            kind: self.kind,
            source: self.source.clone(),
            from_item: self.from.to_owned(),
            to_item: self.to.clone(),
            replaces,
            reason: self.reason.to_owned(),
            actor: self.actor.clone(),
            created_at: now,
        };
        let mut next = rules.clone();
        next.version = rules.version + 1;
        next.rules.insert(
            self.from.to_owned(),
            CorrectionRule {
                to_item: self.to.clone(),
                correction_id: id,
                since: now,
            },
        );
        (correction, next)
    }
}

impl CorrectionService {
    pub fn new(
        reads: Arc<dyn EvidenceReads>,
        store: Arc<dyn CorrectionStore>,
        writes: Arc<dyn Reattributor>,
        clock: Arc<dyn Clock>,
        faults: Arc<dyn Faults>,
    ) -> Self {
        Self {
            reads,
            store,
            writes,
            clock,
            faults,
        }
    }

    /// Records the correction (or finds it recorded) and re-attributes what it applies to.
    /// Returns the view and whether this call recorded it (false: it ran again).
    pub async fn correct(
        &self,
        request: &CorrectionRequest,
    ) -> Result<(CorrectionView, bool), CorrectionError> {
        let from = CanonicalItem::parse_key(&request.from_item)
            .map_err(|e| CorrectionError::Invalid(format!("from_item: {e}")))?
            .key();
        let kind = if request.to_item.key() == from {
            CorrectionKind::Withdraw
        } else {
            CorrectionKind::Correct
        };
        self.record(RuleChange {
            source: &request.source,
            from: &from,
            to: &request.to_item,
            kind,
            reason: &request.reason,
            actor: request.actor.clone(),
            must_replace: None,
        })
        .await
    }

    /// Withdraws correction `id`: its part's rows belong to the part again. Only the rule in
    /// force can be withdrawn.
    pub async fn withdraw(
        &self,
        id: &str,
        reason: &str,
        actor: Option<String>,
    ) -> Result<(CorrectionView, bool), CorrectionError> {
        let correction = self
            .store
            .correction(id)
            .await?
            .ok_or_else(|| CorrectionError::NotFound(format!("correction {id} not found")))?;
        if correction.kind == CorrectionKind::Withdraw {
            return Err(CorrectionError::Invalid(format!(
                "{id} is itself a withdrawal; correct the part again instead"
            )));
        }
        let from = CanonicalItem::parse_key(&correction.from_item)
            .map_err(|e| CorrectionError::Invalid(format!("from_item: {e}")))?;
        self.record(RuleChange {
            source: &correction.source,
            from: &correction.from_item,
            to: &from,
            kind: CorrectionKind::Withdraw,
            reason,
            actor,
            must_replace: Some(id),
        })
        .await
    }

    /// Records the change of the part's rule against the rule set in force, unless the rule in
    /// force already answers the request; a rule set that moved meanwhile is read again.
    async fn record(
        &self,
        change: RuleChange<'_>,
    ) -> Result<(CorrectionView, bool), CorrectionError> {
        for _ in 0..MAX_RULE_RACES {
            let rules = self.store.correction_rules(change.source).await?;
            if let Some(answer) = self.answer_in_force(&change, &rules).await? {
                return Ok(answer);
            }
            let now = self.clock.now();
            let (correction, next) = change.proposed(&rules, now);
            let id = &correction.correction_id;
            match self
                .store
                .record_correction(
                    &correction,
                    &next,
                    rules.version,
                    now.plus_seconds(SETTLE_AFTER_SECONDS),
                )
                .await?
            {
                Recorded::Recorded => {
                    info!(correction = %id, from = change.from, to = %change.to.key(), kind = ?change.kind, "identity correction recorded");
                    self.sweep(&correction).await?;
                    return Ok((self.view(id).await?, true));
                }
                Recorded::Exists => return Ok((self.run_again(id).await?, false)),
                Recorded::RulesChanged => continue,
            }
        }
        Err(CorrectionError::Store(StoreError::Unavailable(
            anyhow::anyhow!(
                "the rule set of {}/{} kept changing",
                change.source.connector,
                change.source.source_account
            ),
        )))
    }

    /// What the rule in force already answers: the same request asked for again (run again),
    /// or a conflict. `None`: a new correction is to be recorded.
    async fn answer_in_force(
        &self,
        change: &RuleChange<'_>,
        rules: &CorrectionRules,
    ) -> Result<Option<(CorrectionView, bool)>, CorrectionError> {
        let from = change.from;
        let in_force = rules.rule_for(from);
        if let Some(required) = change.must_replace {
            // The same withdrawal asked for again: answer with the one recorded.
            if let Some(rule) = in_force.filter(|r| r.to_item == *change.to) {
                if let Some(withdrawal) = self.store.correction(&rule.correction_id).await? {
                    if withdrawal.replaces.as_deref() == Some(required) {
                        return Ok(Some((self.run_again(&rule.correction_id).await?, false)));
                    }
                }
            }
            if in_force.map(|r| r.correction_id.as_str()) != Some(required) {
                return Err(CorrectionError::Conflict(format!(
                    "correction {required} is not the rule in force for {from}; only the rule in force can be withdrawn"
                )));
            }
        }
        // The part already belongs where the request says: this is the correction in force
        // asked for again (or a withdrawal of a part nothing redirects). Run it again; its
        // record is never rewritten, whatever this request's reason says.
        if let Some(rule) = in_force.filter(|r| r.to_item == *change.to) {
            let existing = rule.correction_id.clone();
            return Ok(Some((self.run_again(&existing).await?, false)));
        }
        if in_force.is_none() && change.kind == CorrectionKind::Withdraw {
            return Err(CorrectionError::Conflict(format!(
                "no correction is in force for {from}; its rows already belong to it"
            )));
        }
        Ok(None)
    }

    /// A recorded correction asked for again: sweep again if it is still the rule in force
    /// (an earlier run may have stopped half way), and answer with the stored record.
    async fn run_again(&self, id: &str) -> Result<CorrectionView, CorrectionError> {
        let correction = self
            .store
            .correction(id)
            .await?
            .ok_or_else(|| CorrectionError::NotFound(format!("correction {id} not found")))?;
        let rules = self.store.correction_rules(&correction.source).await?;
        if rules
            .rule_for(&correction.from_item)
            .is_some_and(|r| r.correction_id == id)
        {
            self.sweep(&correction).await?;
        }
        self.view(id).await
    }

    /// Re-attributes every observation of the correction's source and part that the rules in
    /// force attribute elsewhere, as far as the item-history index shows them. Appends a sweep
    /// record; a sweep that starts `SETTLE_AFTER_SECONDS` after the correction and finds
    /// nothing settles it.
    pub async fn sweep(
        &self,
        correction: &IdentityCorrection,
    ) -> Result<SweepRecord, CorrectionError> {
        let started_at = self.clock.now();
        let rules = self.store.correction_rules(&correction.source).await?;
        let items = self.items_of_part(correction).await?;
        let found = self.to_reattribute(correction, &rules, &items).await?;
        let superseded = self.reattribute_in_groups(correction, &found).await?;
        self.record_sweep(correction, started_at, found.len(), superseded)
            .await
    }

    /// The items the part's rows can be under: the part itself, or the item a rule (this one or
    /// one it replaced) gave them.
    async fn items_of_part(
        &self,
        correction: &IdentityCorrection,
    ) -> Result<BTreeSet<String>, StoreError> {
        let mut items: BTreeSet<String> = BTreeSet::from([correction.from_item.clone()]);
        items.insert(correction.to_item.key());
        let mut chain = correction.replaces.clone();
        while let Some(previous) = chain {
            match self.store.correction(&previous).await? {
                Some(earlier) => {
                    items.insert(earlier.to_item.key());
                    chain = earlier.replaces;
                }
                None => chain = None,
            }
        }
        Ok(items)
    }

    /// The part's observations under `items` (as the item-history index shows them) that the
    /// rules attribute elsewhere, each once.
    async fn to_reattribute(
        &self,
        correction: &IdentityCorrection,
        rules: &CorrectionRules,
        items: &BTreeSet<String>,
    ) -> Result<Vec<Reattribution>, StoreError> {
        let mut found: Vec<Reattribution> = Vec::new();
        let mut seen: BTreeSet<ObservationId> = BTreeSet::new();
        for item in items {
            let mut cursor: Option<String> = None;
            loop {
                let page = self
                    .reads
                    .item_history(&correction.source.tenant, item, cursor.as_deref(), 100)
                    .await?;
                for indexed in page.observations {
                    if indexed.source() != correction.source
                        || indexed.normalized_item() != correction.from_item
                        || !seen.insert(indexed.observation_id.clone())
                    {
                        continue;
                    }
                    // The index copy may predate a supersession marker.
                    let Some(current) = self
                        .reads
                        .observation(indexed.observation_id.as_str())
                        .await?
                    else {
                        continue;
                    };
                    found.extend(Reattribution::needed(rules, &current));
                }
                match page.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
        }
        Ok(found)
    }

    /// Re-attributes `found`, `REATTRIBUTION_GROUP` observations per transaction and one group
    /// per `REATTRIBUTION_GROUP_INTERVAL` at most; returns how many were superseded.
    async fn reattribute_in_groups(
        &self,
        correction: &IdentityCorrection,
        found: &[Reattribution],
    ) -> Result<usize, CorrectionError> {
        let mut superseded = 0usize;
        let mut next_group = tokio::time::Instant::now();
        for (group, moves) in found.chunks(REATTRIBUTION_GROUP).enumerate() {
            tokio::time::sleep_until(next_group).await;
            next_group = tokio::time::Instant::now() + REATTRIBUTION_GROUP_INTERVAL;
            superseded += self
                .writes
                .reattribute(moves, self.clock.now())
                .await?
                .len();
            let point = CrashPoint::AfterReattributionGroup(group as u32 + 1);
            if self.faults.crash_at(point) {
                warn!(correction = %correction.correction_id, superseded, "injected crash in a correction sweep");
                return Err(CorrectionError::InjectedCrash(point));
            }
        }
        Ok(superseded)
    }

    /// Appends the sweep's record, settling the correction when a sweep that started late
    /// enough found nothing left.
    async fn record_sweep(
        &self,
        correction: &IdentityCorrection,
        started_at: Timestamp,
        found: usize,
        superseded: usize,
    ) -> Result<SweepRecord, CorrectionError> {
        let finished_at = self.clock.now();
        let sweep = SweepRecord {
            correction_id: correction.correction_id.clone(),
            started_at,
            finished_at,
            found: found as u32,
            superseded: superseded as u32,
        };
        let settled =
            found == 0 && started_at.seconds_since(correction.created_at) >= SETTLE_AFTER_SECONDS;
        self.store
            .record_sweep(
                &sweep,
                settled,
                finished_at.plus_seconds(SETTLE_AFTER_SECONDS),
            )
            .await?;
        info!(correction = %correction.correction_id, found, superseded, settled, "correction sweep");
        Ok(sweep)
    }

    /// The sweeper's pass: sweeps every correction whose settling is due.
    pub async fn settle_due(&self) -> Result<usize, CorrectionError> {
        let due = self.store.settling(self.clock.now()).await?;
        for id in &due {
            if let Some(correction) = self.store.correction(id).await? {
                let rules = self.store.correction_rules(&correction.source).await?;
                let in_force = rules
                    .rule_for(&correction.from_item)
                    .is_some_and(|r| r.correction_id == *id);
                if in_force {
                    self.sweep(&correction).await?;
                } else {
                    // Replaced: its successor's sweeps cover the part now.
                    let now = self.clock.now();
                    let sweep = SweepRecord {
                        correction_id: id.clone(),
                        started_at: now,
                        finished_at: now,
                        found: 0,
                        superseded: 0,
                    };
                    self.store.record_sweep(&sweep, true, now).await?;
                }
            }
        }
        Ok(due.len())
    }

    pub async fn view(&self, id: &str) -> Result<CorrectionView, CorrectionError> {
        let correction = self
            .store
            .correction(id)
            .await?
            .ok_or_else(|| CorrectionError::NotFound(format!("correction {id} not found")))?;
        let rules = self.store.correction_rules(&correction.source).await?;
        let rule = rules.rule_for(&correction.from_item);
        let in_force = rule.is_some_and(|r| r.correction_id == id);
        let supersessions = self.store.supersessions(id).await?;
        let sweeps = self.store.sweeps(id).await?;
        let settled = self.store.is_settled(id).await?;
        Ok(CorrectionView {
            in_force,
            replaced_by: (!in_force)
                .then(|| rule.map(|r| r.correction_id.clone()))
                .flatten(),
            superseded_observations: supersessions.iter().map(|s| s.superseded.clone()).collect(),
            supersessions,
            sweeps,
            settled,
            correction,
        })
    }
}

/// `corr_` + 26 base32 of sha256 over (source, part, target, kind, the correction it replaces):
/// the same request against the same rule in force is the same correction (so running it again
/// finds it), and correcting a part again after a withdrawal is a new one.
pub fn correction_id(
    source: &SourceRef,
    from: &str,
    to: &CanonicalItem,
    kind: CorrectionKind,
    replaces: Option<&str>,
) -> String {
    let fields = [
        source.tenant.as_str(),
        source.connector.as_str(),
        source.source_account.as_str(),
        from,
        &to.key(),
        match kind {
            CorrectionKind::Correct => "correct",
            CorrectionKind::Withdraw => "withdraw",
        },
        replaces.unwrap_or("-"),
    ];
    let text: String = fields
        .iter()
        .map(|f| format!("{}:{f}\n", f.len()))
        .collect();
    format!("corr_{}", base32_lower(&sha256(text.as_bytes())[..16]))
}
