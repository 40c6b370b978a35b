//! What an operator's actions cost: an identity correction and its sweep, and the lift of a
//! source quarantine.

use super::*;
use feedsafe::protocols::identity_corrections::{
    correction_id, REATTRIBUTION_GROUP, REATTRIBUTION_GROUP_INTERVAL,
};

/// Size (bytes) of one observation in the corrected item's history.
const HISTORY_OBSERVATION_BYTES: usize = 1_100;

/// The correction of one of supplier 0's popular parts to another variant.
struct Correction<'a> {
    tenant: &'a str,
    from: String,
    to: String,
    id: String,
    /// The correction record's partition key.
    pk: String,
}

impl<'a> Correction<'a> {
    fn of(supplier: &'a crate::workload::Supplier) -> Self {
        let from = item_key(0, 1);
        let to = CanonicalItem::new("P0000-0000001", Some("B"), None, None)
            .unwrap_or_else(|e| panic!("a literal part is valid: {e}"));
        let id = correction_id(&supplier.source, &from, &to, CorrectionKind::Correct, None);
        Self {
            tenant: supplier.tenant.as_str(),
            pk: correction_pk(&id),
            to: to.key(),
            from,
            id,
        }
    }
}

impl<'w> Sim<'w> {
    /// An operator corrects one of supplier 0's popular parts, whose history holds
    /// `corrected_history` observations: the correction's transaction, then its sweep (one
    /// transaction of 25 re-attributions after another, as `Reattributor::reattribute` does).
    pub fn correction(&mut self, at: f64) {
        use latency::*;
        let world = self.world;
        let supplier = &world.suppliers[0];
        let correction = Correction::of(supplier);
        let mut t = at;
        self.write_correction(&correction, &supplier.source, t);
        t += (TRANSACTION + 3.0 * TRANSACTION_PER_ACTION) / 1000.0;
        let per_page = (1 << 20) / HISTORY_OBSERVATION_BYTES;
        let history = world.params.corrected_history;
        let group = REATTRIBUTION_GROUP;
        for start in (0..history).step_by(group) {
            if start % per_page < group {
                let page = per_page.min(history - start);
                self.read_history_page(&correction, page, t);
                t += QUERY / 1000.0;
            }
            let moves = group.min(history - start);
            for m in 0..moves {
                self.reattribute(&correction, start + m, t);
            }
            // The sweep starts a group at most every REATTRIBUTION_GROUP_INTERVAL.
            t += ((TRANSACTION + TRANSACTION_PER_ACTION * 3.0 * moves as f64) / 1000.0)
                .max(REATTRIBUTION_GROUP_INTERVAL.as_secs_f64());
        }
    }

    /// The correction's transaction: the correction record, the source's rules and the
    /// settling marker.
    fn write_correction(
        &mut self,
        correction: &Correction,
        source: &feedsafe::domain::model::SourceRef,
        t: f64,
    ) {
        self.tally.write(
            pat::CORRECTION,
            DB,
            &correction.pk,
            t,
            2.0 * 2.0 * wcu(SMALL_RECORD_BYTES),
        );
        self.tally
            .write(pat::RULES, DB, &rules_pk(source), t, 2.0 * wcu(RULES_BYTES));
        self.tally
            .write(pat::SETTLING, DB, SETTLING_PK, t, wcu(SMALL_RECORD_BYTES));
    }

    /// One page (`observations` long) of the corrected item's history, as the sweep reads it.
    fn read_history_page(&mut self, correction: &Correction, observations: usize, t: f64) {
        self.tally.read(
            pat::ITEM_HISTORY,
            DB,
            &item_history_pk(correction.tenant, &correction.from),
            t,
            rcu(observations * HISTORY_OBSERVATION_BYTES, false),
        );
    }

    /// The re-attribution of the history's `index`th observation: its superseding copy under
    /// the new part, the old one marked superseded, and the correction's count.
    fn reattribute(&mut self, correction: &Correction, index: usize, t: f64) {
        let tenant = correction.tenant;
        let old = ObservationId::derive_for(&format!("{tenant}/history"), 0, index);
        let new = ObservationId::derive_superseding(&old, &correction.id);
        let bytes = HISTORY_OBSERVATION_BYTES;
        self.tally.write(
            pat::OBSERVATION,
            DB,
            &observation_pk(new.as_str()),
            t,
            2.0 * wcu(bytes),
        );
        self.tally.write(
            pat::ITEM_HISTORY,
            DB,
            &item_history_pk(tenant, &correction.to),
            t,
            wcu(bytes),
        );
        self.tally.write(
            pat::OBSERVATION,
            DB,
            &observation_pk(old.as_str()),
            t,
            2.0 * wcu(bytes),
        );
        self.tally.write(
            pat::ITEM_HISTORY,
            DB,
            &item_history_pk(tenant, &correction.from),
            t,
            wcu(bytes),
        );
        debug_assert!(supersession_sk(&old).starts_with("SUP#"));
        self.tally.write(
            pat::CORRECTION,
            DB,
            &correction.pk,
            t,
            2.0 * wcu(SMALL_RECORD_BYTES),
        );
    }

    /// An operator lifts supplier 0's source quarantine: the state and its event in one
    /// transaction; the projector then lists the source's rows from `by_source`, one 1 MB page
    /// after another (`items_of_source`). The recomputation of those rows is not modelled.
    pub fn quarantine_lift(&mut self, at: f64) {
        use latency::*;
        let world = self.world;
        let supplier = &world.suppliers[0];
        let mut t = at;
        self.tally.write(
            pat::SOURCE_QUARANTINE,
            DB,
            &source_quarantine_pk(&supplier.source),
            t,
            2.0 * 2.0 * wcu(SMALL_RECORD_BYTES),
        );
        t += 0.1;
        // A keys-only index entry: pk, sk, source_key and item, plus DynamoDB's 100 bytes.
        let row_bytes = keys_only_bytes(&[
            &row_pk(supplier.tenant.as_str(), &item_key(0, 0)),
            "SRC#sup-00000#ACC-00000",
            &source_partition(&supplier.source, &item_key(0, 0)),
            &item_key(0, 0),
        ]);
        let rows = supplier.len;
        let per_page = (1 << 20) / row_bytes;
        for (key, count) in source_partitions(&supplier.source, rows) {
            let mut left = count;
            while left > 0 {
                let page = left.min(per_page);
                self.tally
                    .read(pat::SOURCE_ROWS, DB, &key, t, rcu(page * row_bytes, false));
                t += (QUERY + S3_PER_KIB * (page * row_bytes) as f64 / 1024.0) / 1000.0;
                left -= page;
            }
        }
    }
}
