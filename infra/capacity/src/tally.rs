//! Units per key per second. Each store and key pattern has its own table of
//! `(key, second) -> units`; keys are held as 64-bit hashes, and a key's text is kept only when
//! it becomes the busiest of its pattern, so memory grows with the number of distinct keys, not
//! with the text of 750,000 observation ids.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

/// Which limit a pattern is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Limit {
    /// A DynamoDB partition: 1,000 write units or 3,000 read units a second, or a linear mix.
    DynamoPartition,
    /// An S3 prefix: 3,500 PUT/COPY/POST/DELETE or 5,500 GET/HEAD requests a second.
    S3Prefix,
}

/// A table, index or bucket prefix and the key pattern counted under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pattern {
    pub store: &'static str,
    pub key: &'static str,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Units {
    /// DynamoDB write units, or S3 PUT requests.
    pub write: f64,
    /// DynamoDB read units, or S3 GET requests.
    pub read: f64,
}

impl Units {
    pub fn load(&self, limit: Limit) -> f64 {
        match limit {
            Limit::DynamoPartition => self.write / 1_000.0 + self.read / 3_000.0,
            Limit::S3Prefix => (self.write / 3_500.0).max(self.read / 5_500.0),
        }
    }
}

#[derive(Default)]
struct PatternTally {
    per_key_second: HashMap<(u64, i64), Units>,
    names: HashMap<u64, String>,
    busiest: f64,
    total: Units,
    limit: Option<Limit>,
}

/// The busiest key of one pattern over the window.
#[derive(Debug, Clone)]
pub struct Busiest {
    pub pattern: Pattern,
    pub limit: Limit,
    pub key: String,
    pub units: Units,
    pub distinct_keys: usize,
}

#[derive(Default)]
pub struct Tally {
    patterns: BTreeMap<Pattern, PatternTally>,
}

pub fn hash_key(key: &str) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

impl Tally {
    /// Adds `units` to `key` (the real key text) in the second that holds `at`.
    pub fn add(&mut self, pattern: Pattern, limit: Limit, key: &str, at: f64, units: Units) {
        let tally = self.patterns.entry(pattern).or_default();
        tally.limit = Some(limit);
        let hash = hash_key(key);
        let second = at.floor() as i64;
        let cell = tally.per_key_second.entry((hash, second)).or_default();
        cell.write += units.write;
        cell.read += units.read;
        tally.total.write += units.write;
        tally.total.read += units.read;
        let load = cell.load(limit);
        if load > tally.busiest {
            tally.busiest = load;
            tally.names.entry(hash).or_insert_with(|| key.to_owned());
        }
    }

    pub fn write(&mut self, pattern: Pattern, limit: Limit, key: &str, at: f64, units: f64) {
        self.add(
            pattern,
            limit,
            key,
            at,
            Units {
                write: units,
                read: 0.0,
            },
        );
    }

    pub fn read(&mut self, pattern: Pattern, limit: Limit, key: &str, at: f64, units: f64) {
        self.add(
            pattern,
            limit,
            key,
            at,
            Units {
                write: 0.0,
                read: units,
            },
        );
    }

    /// Busiest key-second of every pattern. Work that spills past the window's end (a
    /// projector falling behind) is counted in the second it happens.
    pub fn busiest(&self) -> Vec<Busiest> {
        self.patterns
            .iter()
            .map(|(pattern, tally)| {
                let limit = tally.limit.unwrap_or(Limit::DynamoPartition);
                let ((hash, _second), units) = tally
                    .per_key_second
                    .iter()
                    .max_by(|a, b| a.1.load(limit).total_cmp(&b.1.load(limit)))
                    .map(|(k, u)| (*k, *u))
                    .unwrap_or(((0, 0), Units::default()));
                let distinct: std::collections::HashSet<u64> =
                    tally.per_key_second.keys().map(|(h, _)| *h).collect();
                Busiest {
                    pattern: *pattern,
                    limit,
                    key: tally
                        .names
                        .get(&hash)
                        .cloned()
                        .unwrap_or_else(|| "?".into()),
                    units,
                    distinct_keys: distinct.len(),
                }
            })
            .collect()
    }

    /// Total units of every pattern of a store, per second of the window.
    pub fn store_total(&self, store: &str, window: f64) -> Units {
        let mut total = Units::default();
        for (pattern, tally) in &self.patterns {
            if pattern.store == store {
                total.write += tally.total.write / window;
                total.read += tally.total.read / window;
            }
        }
        total
    }
}
