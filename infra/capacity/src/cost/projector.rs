//! The projector over a window's stream, as `Projector::apply_batch` runs it: batches per
//! shard and parallelization slot, eligibility reads, row reads and the conditional puts of
//! projection rows (replayed per row as `Projector::project_key` decides them).

use super::*;
use std::collections::{BTreeMap, BinaryHeap};

impl<'w> Sim<'w> {
    /// The projector over the window's stream: records are spread over `shards` stream shards
    /// and, within a shard, over `factor` concurrent batches by partition key (as the event
    /// source does with a parallelization factor); each batch is at most 100 records polled in
    /// one 250 ms slot, or whatever has arrived when its processor is free again.
    pub fn project(&mut self, shards: usize, settings: &StreamSettings, window: f64) {
        let factor = settings.parallelization_factor;
        let processors = shards * factor;
        self.load.projector_processors = processors;
        let mut queues: Vec<Vec<StreamRecord>> = vec![Vec::new(); processors];
        for record in std::mem::take(&mut self.stream) {
            queues[processor_of(record.partition, shards, factor)].push(record);
        }
        let mut busy_until = vec![0.0f64; processors];
        let mut writes: Vec<Write> = Vec::new();
        let mut busiest = 0.0f64;
        let mut lag = 0.0f64;
        let mut busy_per_processor = vec![0.0f64; processors];
        while queues.iter().any(|q| !q.is_empty()) {
            let mut spawned: Vec<StreamRecord> = Vec::new();
            for (p, queue) in queues.iter_mut().enumerate() {
                queue.sort_by(|a, b| a.at.total_cmp(&b.at));
                let mut heap: BinaryHeap<std::cmp::Reverse<Pending>> = std::mem::take(queue)
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| std::cmp::Reverse(Pending(r.at, i, r)))
                    .collect();
                while let Some(std::cmp::Reverse(first)) = heap.pop() {
                    // The poller gathers for the batching window (or, without one, until its
                    // next poll a quarter second later), unless the batch fills first.
                    let gather = settings.batching_window.max(0.25);
                    let slot_end = (first.0 / gather).floor() * gather + gather;
                    let start = busy_until[p].max(slot_end);
                    let mut batch = vec![first.2];
                    while batch.len() < settings.batch_size {
                        match heap.peek() {
                            Some(std::cmp::Reverse(next)) if next.0 <= start => {
                                if let Some(std::cmp::Reverse(next)) = heap.pop() {
                                    batch.push(next.2);
                                }
                            }
                            _ => break,
                        }
                    }
                    lag = lag.max(start - batch[0].at);
                    let (duration, more) = self.batch(&batch, start, &mut writes);
                    self.load.projector_batches += 1;
                    self.load.projector_records += batch.len();
                    busy_until[p] = start + duration;
                    busy_per_processor[p] += duration;
                    self.load.projector_busy += duration;
                    spawned.extend(more);
                }
            }
            for record in spawned {
                queues[processor_of(record.partition, shards, factor)].push(record);
            }
        }
        for busy in busy_per_processor {
            busiest = busiest.max(busy / window);
        }
        self.load.projector_busiest_utilisation = busiest;
        self.load.projector_lag_seconds = lag;
        self.row_writes(writes);
    }

    /// One stream batch, as `Projector::apply_batch` runs it. Returns its duration and the
    /// work records it writes.
    fn batch(
        &mut self,
        batch: &[StreamRecord],
        start: f64,
        writes: &mut Vec<Write>,
    ) -> (f64, Vec<StreamRecord>) {
        use latency::*;
        let world = self.world;
        let mut t = start + 0.002;
        let mut spawned = Vec::new();
        let mut runs: BTreeSet<&str> = BTreeSet::new();
        let mut candidates: Vec<(u32, u32)> = Vec::new();
        let mut budget = INLINE_BUDGET;
        let mut sliced = false;
        for record in batch {
            match &record.change {
                Change::Replay => {}
                Change::RunPage { run } => {
                    runs.insert(run.as_str());
                }
                Change::Observation { delivery, row } => {
                    budget = budget.saturating_sub(1);
                    candidates.push((*delivery, *row));
                }
                Change::Committed { delivery } => {
                    let stored = &self.stored[*delivery as usize];
                    let count = stored.rows.len() as u32;
                    if count <= budget {
                        budget -= count;
                        candidates.extend((0..count).map(|r| (*delivery, r)));
                    } else {
                        // Split into work records (one read of the first observation, one
                        // batch write), each projected from its own stream record.
                        let first = ObservationId::derive_for(&stored.key, 0, 0);
                        self.tally.read(
                            pat::OBSERVATION,
                            DB,
                            &observation_pk(first.as_str()),
                            t,
                            1.0,
                        );
                        let pk = projection_work_pk(&stored.key, 0);
                        for slice in (0..count).step_by(WORK_SLICE as usize) {
                            self.tally
                                .write(pat::WORK, DB, &pk, t, wcu(SMALL_RECORD_BYTES));
                            spawned.push(StreamRecord {
                                at: t + 0.1,
                                partition: hash_key(&pk),
                                change: Change::Work {
                                    delivery: *delivery,
                                    start: slice,
                                    end: (slice + WORK_SLICE).min(count),
                                    deferrals: 0,
                                },
                            });
                        }
                        t += (GET_ITEM + BATCH) / 1000.0;
                    }
                }
                Change::Work {
                    delivery,
                    start: from,
                    end,
                    deferrals,
                } => {
                    let size = end - from;
                    if size <= budget || !sliced {
                        sliced = true;
                        budget = budget.saturating_sub(size);
                        candidates.extend((*from..*end).map(|r| (*delivery, r)));
                    } else {
                        let pk = projection_work_pk(&self.stored[*delivery as usize].key, 0);
                        self.tally
                            .write(pat::WORK, DB, &pk, t, wcu(SMALL_RECORD_BYTES));
                        spawned.push(StreamRecord {
                            at: t + 0.1,
                            partition: record.partition,
                            change: Change::Work {
                                delivery: *delivery,
                                start: *from,
                                end: *end,
                                deferrals: deferrals + 1,
                            },
                        });
                    }
                }
            }
        }
        for run in &runs {
            self.tally
                .write(pat::RUN, DB, &run_pk(run), t, wcu(RUN_ITEM_BYTES));
            t += WRITE_ITEM / 1000.0;
        }
        // Fresh copies of every candidate (consistent BatchGetItem).
        for (delivery, row) in &candidates {
            let stored = &self.stored[*delivery as usize];
            let id = ObservationId::derive_for(&stored.key, 0, *row as usize);
            self.tally
                .read(pat::OBSERVATION, DB, &observation_pk(id.as_str()), t, 1.0);
        }
        t += BATCH * candidates.len().div_ceil(100) as f64 / 1000.0;
        // Eligibility, one read per value and batch. A staged observation's own INSERT is not
        // committed yet (its commit record or work slice projects it): it costs its marker and
        // rules reads, and is dropped.
        let mut sources: BTreeSet<usize> = BTreeSet::new();
        let mut markers: BTreeSet<u32> = BTreeSet::new();
        let mut connectors: BTreeSet<usize> = BTreeSet::new();
        // Each row key of the batch, with the newest delivery (by arrival) among its candidates:
        // deliveries arrive in observed order, so that stands for the candidate's basis.
        let mut keys: BTreeMap<(usize, usize, usize), u32> = BTreeMap::new();
        let own_insert: HashSet<(u32, u32)> = batch
            .iter()
            .filter_map(|r| match r.change {
                Change::Observation { delivery, row } => Some((delivery, row)),
                _ => None,
            })
            .collect();
        for (delivery, row) in &candidates {
            let stored = &self.stored[*delivery as usize];
            sources.insert(stored.supplier);
            if stored.staged {
                markers.insert(*delivery);
                if own_insert.contains(&(*delivery, *row)) {
                    continue;
                }
            }
            if stored.run.is_some() {
                connectors.insert(stored.supplier);
            }
            let tenant = world.suppliers[stored.supplier].tenant_index;
            let newest = keys
                .entry((tenant, stored.rows[*row as usize], stored.supplier))
                .or_insert(*delivery);
            *newest = (*newest).max(*delivery);
        }
        for delivery in &markers {
            let key = &self.stored[*delivery as usize].key;
            self.tally
                .read(pat::MARKER, DB, &commit_marker_pk(key, 0), t, 1.0);
        }
        for s in &connectors {
            let connector = &world.suppliers[*s].connector;
            self.tally.read(
                pat::CONNECTOR,
                DB,
                &feedsafe::aws::dynamo::connector_pk(connector.as_str()),
                t,
                1.0,
            );
        }
        let key_sources: BTreeSet<usize> = keys.keys().map(|k| k.2).collect();
        for s in &sources {
            let source = &world.suppliers[*s].source;
            self.tally.read(pat::RULES, DB, &rules_pk(source), t, 1.0);
            if key_sources.contains(s) {
                self.tally.read(
                    pat::SOURCE_QUARANTINE,
                    DB,
                    &source_quarantine_pk(source),
                    t,
                    1.0,
                );
            }
        }
        let eligibility_reads = markers.len() + connectors.len() + 2 * sources.len();
        t += GET_ITEM * eligibility_reads.div_ceil(16) as f64 / 1000.0;
        // The current rows (consistent BatchGetItem), then one conditional put per key.
        let read_at = t;
        t += BATCH * keys.len().div_ceil(100) as f64 / 1000.0;
        for (i, ((tenant, item, supplier), newest)) in keys.iter().enumerate() {
            let source = &world.suppliers[*supplier];
            let item = item_key(*tenant, *item);
            let pk = row_pk(source.tenant.as_str(), &item);
            let by_source = source_partition(&source.source, &item);
            let (_, bytes) = self.sizes[supplier];
            self.tally
                .read(pat::ROWS, DB, &pk, read_at, rcu(bytes, true));
            let at = t + WRITE_ITEM * (i / 16) as f64 / 1000.0;
            let row = hash_key(&pk) ^ (*supplier as u64).rotate_left(17);
            // `by_source` projects keys only: an update of an existing row changes no indexed
            // or projected attribute and writes nothing to the index; a new row writes its keys.
            // Every row is taken as new the first time the window writes it (conservative).
            if !self.rows.contains_key(&row) {
                let index_bytes = keys_only_bytes(&[&pk, "SRC#", &by_source, &item]);
                self.tally
                    .write(pat::SOURCE_ROWS, DB, &by_source, at, wcu(index_bytes));
            }
            let index = *self.rows.entry(row).or_insert_with(|| {
                self.row_keys.push(RowKeys { row: pk, bytes });
                self.row_keys.len() as u32 - 1
            });
            writes.push(Write {
                row,
                at,
                read_at,
                newest: *newest,
                index,
            });
        }
        t += WRITE_ITEM * keys.len().div_ceil(16) as f64 / 1000.0;
        (t - start, spawned)
    }

    /// The conditional puts of projection rows, replayed per row in time order, as
    /// `Projector::project_key` decides them: a batch whose newest claim for the row is not
    /// newer than the row it read writes nothing; one that is puts the row on the condition
    /// that it is unchanged. A put that another batch's write beat (landing between its read
    /// and its write) still costs its units, reads the row again and puts again only if its
    /// claim is still the newer one.
    fn row_writes(&mut self, mut writes: Vec<Write>) {
        writes.sort_by(|a, b| a.row.cmp(&b.row).then(a.at.total_cmp(&b.at)));
        let mut lost = 0;
        let mut start = 0;
        while start < writes.len() {
            let end = start
                + writes[start..]
                    .iter()
                    .take_while(|w| w.row == writes[start].row)
                    .count();
            // The row's successful writes so far: (when, claim).
            let mut applied: Vec<(f64, u32)> = Vec::new();
            for w in &writes[start..end] {
                let keys = &self.row_keys[w.index as usize];
                let (pk, units) = (keys.row.clone(), wcu(keys.bytes));
                let current_at = |time: f64, applied: &[(f64, u32)]| {
                    applied
                        .iter()
                        .filter(|(at, _)| *at <= time)
                        .map(|(_, claim)| *claim)
                        .max()
                };
                let seen = current_at(w.read_at, &applied);
                if seen.is_some_and(|claim| claim >= w.newest) {
                    continue;
                }
                self.tally.write(pat::ROWS, DB, &pk, w.at, units);
                let now = current_at(w.at, &applied);
                if now == seen {
                    applied.push((w.at, w.newest));
                    continue;
                }
                lost += 1;
                let retry = w.at + latency::WRITE_ITEM / 1000.0;
                self.tally
                    .read(pat::ROWS, DB, &pk, retry, rcu(keys.bytes, true));
                if now.is_none_or(|claim| claim < w.newest) {
                    self.tally.write(pat::ROWS, DB, &pk, retry, units);
                    applied.push((retry, w.newest));
                }
            }
            start = end;
        }
        self.load.lost_races = lost;
    }
}

/// One conditional put of a projection row.
struct Write {
    row: u64,
    at: f64,
    read_at: f64,
    /// The newest candidate's delivery (arrival order stands for its basis).
    newest: u32,
    index: u32,
}

/// The keys a projection row's writes and recomputations touch.
pub(super) struct RowKeys {
    row: String,
    bytes: usize,
}

/// Which concurrent batch processor a partition key goes to.
fn processor_of(partition: u64, shards: usize, factor: usize) -> usize {
    let shard = (partition % shards as u64) as usize;
    let sub = ((partition / shards as u64) % factor as u64) as usize;
    shard * factor + sub
}

/// Ordered by arrival, then by sequence (a total order for the heap).
struct Pending(f64, usize, StreamRecord);

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 && self.1 == other.1
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}
