//! The reference model: what the system must do, stated without AWS. The model-based test
//! (`tests/acceptance/model_test/`) runs random histories of these operations against the real
//! adapters on DynamoDB Local and moto and compares, after every step, what the system shows
//! through its own read paths with what this model says.
//!
//! It is the specification, short on purpose:
//! - one delivery key yields at most one set of observations per epoch (invariant 1);
//! - a key that comes back with the same payload (compared under the rule recorded with the
//!   original) is a replay: one more attempt, nothing new;
//! - a key that comes back with a different payload is quarantined, nothing stored changes
//!   (invariant 4); the same mismatching payload twice is one entry;
//! - past the dedup horizon a key is stored again as a new epoch, flagged beyond_horizon;
//! - the current offer of (item, source) is the eligible claim with the greatest
//!   (observed_at, when its delivery was recorded, observation_id) (invariant 5): committed, not
//!   superseded, not from the future, attributed to that item by the source's identity rules,
//!   source not quarantined; of claims observed at the same instant the later recorded delivery
//!   wins, the id only decides within one delivery; history lists claims in that order;
//! - a source without a current offer for an item is named in the offers answer, not left
//!   out: quarantined (its newest claim that would be current but for the quarantine), or else
//!   future-dated (its newest claim from the future);
//! - a delivery naming one item twice at one instant with different claims is refused as
//!   `ambiguous_item` (`projection_ties::*`); the histories generate no such payload;
//! - an identity correction re-attributes every claim of the part (and every later one), a
//!   withdrawal sends them back; each move is a superseding copy;
//! - crashes, concurrent duplicates, stream redelivery and rebuilds change nothing of the above.

use std::collections::{BTreeMap, BTreeSet};

/// Sources of the model: each with its canonicalization rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `json-v1`: row order matters.
    Ordered,
    /// `json-unordered-rows-v1`: a reordered page is the same page.
    Unordered,
}

impl Source {
    pub const ALL: [Source; 2] = [Source::Ordered, Source::Unordered];
    pub fn connector(self) -> &'static str {
        match self {
            Source::Ordered => "acme-eu",
            Source::Unordered => "beta-eu",
        }
    }
    pub fn account(self) -> &'static str {
        match self {
            Source::Ordered => "ACC-1",
            Source::Unordered => "ACC-9",
        }
    }
    pub fn unordered(self) -> bool {
        self == Source::Unordered
    }
}

/// One row of a payload, as the supplier writes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Row {
    pub part: String,
    pub quantity: u64,
    /// Minutes after the model's base time (may lie in the future of the retrieval).
    pub observed_minute: i64,
}

impl Row {
    /// The row as canonical JSON (keys sorted, compact): the unordered rule sorts rows by it.
    pub fn canonical(&self, observed_at: &str) -> String {
        format!(
            r#"{{"currency":"EUR","observed_at":"{observed_at}","price":"1.00","quantity":{},"sku":"{}","unit":"each"}}"#,
            self.quantity, self.part
        )
    }
}

/// How the payload's bytes are written; the same rows in another layout are the same JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    Compact,
    Pretty,
    KeysReversed,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Payload {
    pub rows: Vec<Row>,
    pub layout: Layout,
}

/// What the model needs from outside: observation ids (pure functions of the key, epoch and row
/// index), timestamps of minutes, and the canonical order of rows.
pub trait Ids {
    fn observation_id(&self, delivery_key: &str, epoch: u32, index: usize) -> String;
    fn superseding_id(&self, old: &str, correction: &str) -> String;
    fn correction_id(&self, source: Source, from: &str, to: &str, replaces: Option<&str>)
        -> String;
    fn observed_at(&self, minute: i64) -> String;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub id: String,
    pub source: Source,
    pub delivery_key: String,
    pub epoch: u32,
    pub normalized_part: String,
    pub part: String,
    pub quantity: u64,
    pub observed_at: String,
    /// The order in which its delivery (epoch) was first recorded: later is greater. A
    /// superseding copy keeps its original's.
    pub recorded: u64,
    pub future_dated: bool,
    pub superseded_by: Option<String>,
    pub correction: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub source: Source,
    /// The payload's identity under the recorded rule: the rows, in order unless unordered.
    pub fingerprint: Vec<Row>,
    pub epoch: u32,
    pub attempts: u32,
    pub observations: Vec<String>,
    pub expires_at_day: i64,
    pub beyond_horizon: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuarantineEntry {
    pub source: Source,
    pub delivery_key: String,
    pub epoch: u32,
    pub payload: Payload,
    /// When the quarantined payload was retrieved (an accepted payload keeps it).
    pub retrieved_minute: i64,
    pub status: String,
}

/// What one delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Committed { observations: usize },
    Replayed { attempts: u32 },
    Mismatch,
}

pub const HORIZON_DAYS: i64 = 30;
/// A row observed later than this after its retrieval is a claim from the future.
pub const SKEW_MINUTES: i64 = 5;

#[derive(Debug, Clone, Default)]
pub struct Model {
    pub today: i64,
    pub records: BTreeMap<String, Record>,
    pub observations: BTreeMap<String, Observation>,
    pub quarantine: Vec<QuarantineEntry>,
    /// Identity rules per source: normalized part -> (target part, correction id).
    pub rules: BTreeMap<Source, BTreeMap<String, (String, String)>>,
    pub quarantined: BTreeSet<Source>,
    /// Everything delivered so far (for generating replays and mutations of it).
    pub sent: Vec<(Source, String, Payload)>,
    /// Delivery epochs recorded so far (each new one is recorded after all earlier ones).
    pub recorded: u64,
    /// Verified claims: observation id -> the day its latest verification was recorded (each
    /// is in force for `VERIFIED_DAYS`).
    pub verified: BTreeMap<String, i64>,
}

/// How long a verification the histories record stays in force.
pub const VERIFIED_DAYS: i64 = 30;

pub fn delivery_key(source: Source, id: &str) -> String {
    format!("acme/{}/{}/{id}", source.connector(), source.account())
}

impl Model {
    /// A delivery of `payload` under `id`, retrieved at minute `retrieved_minute`.
    pub fn deliver(
        &mut self,
        ids: &dyn Ids,
        source: Source,
        id: &str,
        payload: &Payload,
        retrieved_minute: i64,
    ) -> Outcome {
        let key = delivery_key(source, id);
        if !self
            .sent
            .iter()
            .any(|(s, i, p)| *s == source && i == id && p == payload)
        {
            self.sent.push((source, id.to_owned(), payload.clone()));
        }
        let fingerprint = fingerprint(source, payload, ids);
        let previous = self.records.get(&key).cloned();
        let epoch = match &previous {
            Some(record) if record.expires_at_day > self.today => {
                if record.fingerprint == fingerprint {
                    let record = self.records.get_mut(&key).expect("present");
                    record.attempts += 1;
                    return Outcome::Replayed {
                        attempts: record.attempts,
                    };
                }
                let entry = QuarantineEntry {
                    source,
                    delivery_key: key.clone(),
                    epoch: record.epoch,
                    payload: payload.clone(),
                    retrieved_minute,
                    status: "open".into(),
                };
                if !self.quarantine.iter().any(|q| {
                    q.delivery_key == key && q.epoch == record.epoch && q.payload == *payload
                }) {
                    self.quarantine.push(entry);
                }
                return Outcome::Mismatch;
            }
            Some(expired) => expired.epoch + 1,
            None => 0,
        };
        let rows = fingerprint.clone();
        assert!(
            !ambiguous(&rows),
            "the histories generate no ambiguous payload: {rows:?}"
        );
        self.recorded += 1;
        let mut observations = Vec::new();
        for (index, row) in rows.iter().enumerate() {
            let id = ids.observation_id(&key, epoch, index);
            let (part, correction) = match self.rule(source, &row.part) {
                Some((to, correction)) if to != row.part => (to, Some(correction)),
                _ => (row.part.clone(), None),
            };
            self.observations.insert(
                id.clone(),
                Observation {
                    id: id.clone(),
                    source,
                    delivery_key: key.clone(),
                    epoch,
                    normalized_part: row.part.clone(),
                    part,
                    quantity: row.quantity,
                    observed_at: ids.observed_at(row.observed_minute),
                    recorded: self.recorded,
                    future_dated: row.observed_minute > retrieved_minute + SKEW_MINUTES,
                    superseded_by: None,
                    correction,
                },
            );
            observations.push(id);
        }
        self.records.insert(
            key,
            Record {
                source,
                fingerprint,
                epoch,
                attempts: 1,
                observations: observations.clone(),
                expires_at_day: self.today + HORIZON_DAYS,
                beyond_horizon: epoch > 0,
            },
        );
        Outcome::Committed {
            observations: observations.len(),
        }
    }

    fn rule(&self, source: Source, part: &str) -> Option<(String, String)> {
        self.rules.get(&source).and_then(|r| r.get(part)).cloned()
    }

    /// Time passes (the dedup horizon may pass).
    pub fn advance_days(&mut self, days: i64) {
        self.today += days;
    }

    /// Rows of `source` that normalized to `from` belong to `to` (`to == from` withdraws the rule
    /// in force). Returns the correction's id, or `None` when the rule in force already says so.
    pub fn correct(
        &mut self,
        ids: &dyn Ids,
        source: Source,
        from: &str,
        to: &str,
    ) -> Option<String> {
        let in_force = self.rule(source, from);
        match &in_force {
            Some((target, _)) if target == to => return None,
            None if from == to => return None,
            _ => {}
        }
        let correction =
            ids.correction_id(source, from, to, in_force.as_ref().map(|(_, c)| c.as_str()));
        self.rules
            .entry(source)
            .or_default()
            .insert(from.to_owned(), (to.to_owned(), correction.clone()));
        let moving: Vec<String> = self
            .observations
            .values()
            .filter(|o| {
                o.source == source
                    && o.normalized_part == from
                    && o.superseded_by.is_none()
                    && o.part != to
            })
            .map(|o| o.id.clone())
            .collect();
        for old in moving {
            let copy_id = ids.superseding_id(&old, &correction);
            let mut copy = self.observations[&old].clone();
            copy.id = copy_id.clone();
            copy.part = to.to_owned();
            copy.correction = Some(correction.clone());
            self.observations
                .get_mut(&old)
                .expect("present")
                .superseded_by = Some(copy_id.clone());
            self.observations.insert(copy_id, copy);
        }
        Some(correction)
    }

    pub fn set_quarantine(&mut self, source: Source) -> bool {
        self.quarantined.insert(source)
    }

    pub fn lift_quarantine(&mut self, source: Source) -> bool {
        self.quarantined.remove(&source)
    }

    /// One more received delivery counted on the record of `key` (a crashed attempt that had
    /// already counted itself on a pending record).
    pub fn count_attempt(&mut self, key: &str) {
        if let Some(record) = self.records.get_mut(key) {
            record.attempts += 1;
        }
    }

    pub fn open_entries(&self) -> usize {
        self.quarantine
            .iter()
            .filter(|q| q.status == "open")
            .count()
    }

    /// Rejects the open quarantine entry `index` (of the open ones, oldest first).
    pub fn reject(&mut self, index: usize) -> Option<QuarantineEntry> {
        let entry = self
            .quarantine
            .iter_mut()
            .filter(|q| q.status == "open")
            .nth(index)?;
        entry.status = "rejected".into();
        Some(entry.clone())
    }

    /// Accepts the open quarantine entry `index` as a new delivery `id` of its payload.
    pub fn accept(&mut self, ids: &dyn Ids, index: usize, id: &str) -> Option<Outcome> {
        let entry = self
            .quarantine
            .iter_mut()
            .filter(|q| q.status == "open")
            .nth(index)?;
        entry.status = "accepted".into();
        let entry = entry.clone();
        Some(self.deliver(
            ids,
            entry.source,
            id,
            &entry.payload,
            entry.retrieved_minute,
        ))
    }

    /// Whether an observation may be the current offer of its (part, source).
    pub fn eligible(&self, o: &Observation) -> bool {
        self.eligible_but_for_quarantine(o) && !self.quarantined.contains(&o.source)
    }

    /// Whether an observation would be eligible if its source were not quarantined.
    fn eligible_but_for_quarantine(&self, o: &Observation) -> bool {
        o.superseded_by.is_none()
            && !o.future_dated
            && self
                .rule(o.source, &o.normalized_part)
                .map_or(o.normalized_part == o.part, |(to, _)| to == o.part)
    }

    /// The sources with claims about `part` that an offers answer names instead of an offer,
    /// and why, with the claim it names: a quarantined source by its newest claim that would be
    /// current but for the quarantine; a source without one by its newest claim from the future
    /// (in history, never current).
    pub fn excluded(&self, part: &str) -> BTreeMap<Source, (&'static str, String)> {
        let offered = self.offers(part);
        let mut named = BTreeMap::new();
        for source in Source::ALL.into_iter().filter(|s| !offered.contains_key(s)) {
            let newest = |pick: &dyn Fn(&Observation) -> bool| {
                self.observations
                    .values()
                    .filter(|o| o.part == part && o.source == source && pick(o))
                    .min_by(|a, b| newest_first(a, b))
                    .map(|o| o.id.clone())
            };
            let quarantined = newest(&|o| self.eligible_but_for_quarantine(o));
            let held = newest(&|o| o.superseded_by.is_none() && o.future_dated);
            match (quarantined, held) {
                (Some(id), _) => named.insert(source, ("source_quarantined", id)),
                (None, Some(id)) => named.insert(source, ("future_dated", id)),
                (None, None) => None,
            };
        }
        named
    }

    /// A verifier confirms the current claim of `source` for `part`, if it has one: that claim
    /// alone is verified, for `VERIFIED_DAYS` from today.
    pub fn verify(&mut self, part: &str, source: Source) {
        if let Some(id) = self.offers(part).remove(&source) {
            self.verified.insert(id, self.today);
        }
    }

    /// What a reader sees of the claim `id`'s verification today: `verified`, `expired` (its
    /// days are over) or `unverified`.
    pub fn verification(&self, id: &str) -> &'static str {
        match self.verified.get(id) {
            None => "unverified",
            Some(day) if self.today - day < VERIFIED_DAYS => "verified",
            Some(_) => "expired",
        }
    }

    /// The current offer (observation id) per source for `part`.
    pub fn offers(&self, part: &str) -> BTreeMap<Source, String> {
        let mut best: BTreeMap<Source, &Observation> = BTreeMap::new();
        for o in self
            .observations
            .values()
            .filter(|o| o.part == part && self.eligible(o))
        {
            let better = best
                .get(&o.source)
                .is_none_or(|b| newest_first(o, b).is_lt());
            if better {
                best.insert(o.source, o);
            }
        }
        best.into_iter().map(|(s, o)| (s, o.id.clone())).collect()
    }

    /// The history of `part`: every claim stored under it, newest first, with its superseded flag.
    pub fn history(&self, part: &str) -> Vec<(String, bool)> {
        let mut all: Vec<&Observation> = self
            .observations
            .values()
            .filter(|o| o.part == part)
            .collect();
        all.sort_by(|a, b| newest_first(a, b));
        all.into_iter()
            .map(|o| (o.id.clone(), o.superseded_by.is_some()))
            .collect()
    }
}

/// The projection order, newest first: `observed_at`, then when the delivery was recorded, then
/// the observation id.
fn newest_first(a: &Observation, b: &Observation) -> std::cmp::Ordering {
    (&b.observed_at, b.recorded, &b.id).cmp(&(&a.observed_at, a.recorded, &a.id))
}

/// Two rows about one part at one minute that claim different quantities.
pub fn ambiguous(rows: &[Row]) -> bool {
    rows.iter().enumerate().any(|(i, a)| {
        rows.iter().skip(i + 1).any(|b| {
            a.part == b.part && a.observed_minute == b.observed_minute && a.quantity != b.quantity
        })
    })
}

/// The payload's identity under the source's rule: rows in order (`json-v1`) or sorted by their
/// canonical bytes (`json-unordered-rows-v1`). The layout never matters.
pub fn fingerprint(source: Source, payload: &Payload, ids: &dyn Ids) -> Vec<Row> {
    let mut rows = payload.rows.clone();
    if source.unordered() {
        rows.sort_by_key(|r| r.canonical(&ids.observed_at(r.observed_minute)));
    }
    rows
}
