//! A fresh delivery's writes: the create transaction, then (staged) the other chunks at once and
//! the commit (docs/adr/0005-large-deliveries-chunks-at-once.md).

use super::*;
use std::ops::Range;

/// What every transaction of one fresh delivery shares.
struct Fresh<'d> {
    d: &'d Delivery,
    key_text: String,
    /// The replay record's partition key.
    replay: String,
    plan: Vec<Range<usize>>,
    staged: bool,
    /// The chunks written all at once between the first transaction and the commit.
    parallel: Range<usize>,
    /// The delivery's index among the stored ones (as its stream records name it).
    delivery: u32,
    observation_bytes: usize,
}

/// One transaction of a fresh delivery.
struct Transaction {
    ranges: Vec<Range<usize>>,
    with_record: bool,
    /// How many of the parallel chunks it checks by a witness.
    witnesses: usize,
}

impl Fresh<'_> {
    /// The transactions: the first chunk with the record; the middle chunks all at once,
    /// without it; then the commit, holding the last chunk when it fits, a witness check of
    /// every other chunk, the run page and the marker.
    fn transactions(&self) -> Vec<Transaction> {
        let mut transactions = vec![Transaction {
            ranges: vec![self.plan[0].clone()],
            with_record: true,
            witnesses: 0,
        }];
        transactions.extend(self.parallel.clone().map(|c| Transaction {
            ranges: vec![self.plan[c].clone()],
            with_record: false,
            witnesses: 0,
        }));
        if self.staged {
            transactions.push(Transaction {
                ranges: self.plan[self.parallel.end..].to_vec(),
                with_record: true,
                witnesses: self.parallel.len(),
            });
        }
        transactions
    }
}

impl<'w> Sim<'w> {
    /// The create transaction, then (staged) the other chunks at once and the commit.
    pub(super) fn store_fresh(&mut self, d: &Delivery, artifact: &str, sha: &str, t: f64) -> f64 {
        use latency::*;
        let supplier = &self.world.suppliers[d.supplier];
        let key_text = d.key.as_string();
        let replay = replay_pk(&key_text);
        self.tally
            .read(pat::RULES, DB, &rules_pk(&supplier.source), t, 1.0);
        let t = t + GET_ITEM / 1000.0;
        let plan = chunk_plan(d.rows.len());
        let staged = plan.len() > 1;
        let mut record = self.record(d, artifact, sha);
        let (observation_bytes, row_bytes) = self.item_sizes(d, staged, artifact, sha);
        let fresh = Fresh {
            d,
            key_text,
            replay,
            parallel: if staged { parallel_chunks(&plan) } else { 1..1 },
            plan,
            staged,
            delivery: self.stored.len() as u32,
            observation_bytes,
        };
        let t = self.run_transactions(&fresh, &mut record, t);
        self.keep_stored(fresh, row_bytes);
        t
    }

    /// The sizes of one of the delivery's observation items and of one of its projection rows.
    fn item_sizes(&self, d: &Delivery, staged: bool, artifact: &str, sha: &str) -> (usize, usize) {
        let observation_bytes = item_size(
            &observation_item(&self.observation(d, 0, staged, artifact, sha))
                .unwrap_or_else(|e| panic!("an observation encodes: {e}")),
        );
        let observation = self.observation(d, 0, staged, artifact, sha);
        let offer = ProjectedOffer {
            basis: observation.basis(),
            observation,
            source_quarantined: false,
        };
        let row_bytes = item_size(
            &row_item(&offer, self.epoch_time)
                .unwrap_or_else(|e| panic!("a projection row encodes: {e}")),
        );
        (observation_bytes, row_bytes)
    }

    /// Every transaction, each at the time it starts; returns when the last one is done.
    fn run_transactions(&mut self, fresh: &Fresh, record: &mut ReplayRecord, t: f64) -> f64 {
        use latency::*;
        let transactions = fresh.transactions();
        let count = transactions.len();
        // A transaction with the record waits for every one before it; the others start together.
        let (mut start, mut end) = (t, t);
        for (index, transaction) in transactions.into_iter().enumerate() {
            let last = index + 1 == count;
            if transaction.with_record {
                start = end;
            }
            let actions = self.transaction(fresh, record, transaction, last, start);
            end = end.max(start + (TRANSACTION + TRANSACTION_PER_ACTION * actions as f64) / 1000.0);
            if index == 0 {
                start = end;
            }
        }
        end
    }

    /// One transaction's writes at `t`; returns how many actions it holds.
    fn transaction(
        &mut self,
        fresh: &Fresh,
        record: &mut ReplayRecord,
        transaction: Transaction,
        last: bool,
        t: f64,
    ) -> usize {
        let mut actions = transaction.witnesses;
        if transaction.with_record {
            self.write_record(fresh, record, last, t);
            actions += 1;
        }
        self.check_witnesses(fresh, transaction.witnesses, t);
        actions += transaction.ranges.iter().map(|r| r.len()).sum::<usize>();
        for row in transaction.ranges.into_iter().flatten() {
            self.write_observation(fresh, row, t);
        }
        if last {
            actions += self.write_commit(fresh, t);
        }
        if transaction.with_record {
            self.stream.push(StreamRecord {
                at: t,
                partition: hash_key(&fresh.replay),
                change: if last && fresh.staged {
                    Change::Committed {
                        delivery: fresh.delivery,
                    }
                } else {
                    Change::Replay
                },
            });
        }
        actions
    }

    /// The replay record, committed by the last transaction.
    fn write_record(&mut self, fresh: &Fresh, record: &mut ReplayRecord, last: bool, t: f64) {
        let before = self.replay_bytes(record);
        if last {
            record.chunks_done = record.chunks_total;
            record.state = ReplayState::Committed;
            record.committed_at = Some(self.epoch_time);
        }
        // A Put of the record first; an Update (billed on the larger image) after.
        let after = self.replay_bytes(record);
        self.tally.write(
            pat::REPLAY,
            DB,
            &fresh.replay,
            t,
            2.0 * wcu(before.max(after)),
        );
    }

    /// The commit's check of the first row of each of `witnesses` parallel chunks.
    fn check_witnesses(&mut self, fresh: &Fresh, witnesses: usize, t: f64) {
        for rows in fresh.plan.iter().skip(fresh.parallel.start).take(witnesses) {
            let id = ObservationId::derive(&fresh.d.key, 0, rows.start);
            // A ConditionCheck is billed as a transactional write of the item it reads.
            self.tally.write(
                pat::OBSERVATION,
                DB,
                &observation_pk(id.as_str()),
                t,
                2.0 * wcu(fresh.observation_bytes),
            );
        }
    }

    /// One row's observation, its item history entry and its stream record.
    fn write_observation(&mut self, fresh: &Fresh, row: usize, t: f64) {
        let d = fresh.d;
        let supplier = &self.world.suppliers[d.supplier];
        let id = ObservationId::derive(&d.key, 0, row);
        let pk = observation_pk(id.as_str());
        self.tally.write(
            pat::OBSERVATION,
            DB,
            &pk,
            t,
            2.0 * wcu(fresh.observation_bytes),
        );
        let item = item_key(supplier.tenant_index, d.rows[row]);
        self.tally.write(
            pat::ITEM_HISTORY,
            DB,
            &item_history_pk(supplier.tenant.as_str(), &item),
            t,
            wcu(fresh.observation_bytes),
        );
        self.stream.push(StreamRecord {
            at: t,
            partition: hash_key(&pk),
            change: Change::Observation {
                delivery: fresh.delivery,
                row: row as u32,
            },
        });
    }

    /// What only the last transaction holds: the run page (of a page) and the commit marker
    /// (staged); returns how many actions that is.
    fn write_commit(&mut self, fresh: &Fresh, t: f64) -> usize {
        let mut actions = 0;
        if let Kind::Page {
            run,
            page,
            page_count,
        } = &fresh.d.kind
        {
            self.write_run_page(fresh, run, *page, *page_count, t);
            actions += 1;
        }
        if fresh.staged {
            self.tally.write(
                pat::MARKER,
                DB,
                &commit_marker_pk(&fresh.key_text, 0),
                t,
                2.0 * wcu(SMALL_RECORD_BYTES),
            );
            actions += 1;
        }
        actions
    }

    fn write_run_page(&mut self, fresh: &Fresh, run: &RunId, page: u32, page_count: u32, t: f64) {
        let supplier = &self.world.suppliers[fresh.d.supplier];
        let page_record = RunPageRecord {
            run_id: run.clone(),
            tenant: supplier.tenant.clone(),
            connector: supplier.connector.clone(),
            page,
            page_count: Some(page_count),
            delivery_key: fresh.key_text.clone(),
            epoch: 0,
            observation_count: fresh.d.rows.len() as u32,
            committed_at: self.epoch_time,
        };
        let bytes = item_size(
            &run_page_item(&page_record).unwrap_or_else(|e| panic!("a page record encodes: {e}")),
        );
        let pk = run_pk(run.as_str());
        self.tally.write(pat::RUN, DB, &pk, t, 2.0 * wcu(bytes));
        self.stream.push(StreamRecord {
            at: t,
            partition: hash_key(&pk),
            change: Change::RunPage { run: run.clone() },
        });
    }

    /// What the projector later needs of the stored delivery, and its supplier's item sizes.
    fn keep_stored(&mut self, fresh: Fresh, row_bytes: usize) {
        let d = fresh.d;
        self.sizes
            .insert(d.supplier, (fresh.observation_bytes, row_bytes));
        if d.supplier == 0 {
            self.load.hot_supplier_items = (fresh.observation_bytes, row_bytes);
        }
        self.stored.push(Stored {
            supplier: d.supplier,
            key: fresh.key_text,
            rows: d.rows.clone(),
            staged: fresh.staged,
            run: match &d.kind {
                Kind::Page { run, .. } => Some(run.clone()),
                _ => None,
            },
        });
    }
}
