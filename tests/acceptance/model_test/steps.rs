//! The steps of a history other than deliveries, each as the operator or the platform does it.

use super::*;

impl System {
    /// An identity correction of `source`'s part `from` to `to`; a conflicting one (a rule the
    /// history already has) is refused, which a generated history may ask for.
    pub(super) async fn correct(&mut self, source: Source, from: usize, to: usize) {
        let result = self
            .corrections
            .correct(&CorrectionRequest {
                source: source_ref(source),
                from_item: PARTS[from].into(),
                to_item: CanonicalItem::parse_key(PARTS[to]).unwrap(),
                reason: "model".into(),
                actor: None,
            })
            .await;
        match result {
            Ok(_) | Err(CorrectionError::Conflict(_)) => {}
            Err(e) => panic!("correction failed: {e}"),
        }
    }

    /// Sets (`set`) or lifts `source`'s quarantine.
    pub(super) async fn set_source_quarantine(&mut self, source: Source, set: bool) {
        let store = self.env.store.as_ref();
        let source = source_ref(source);
        let result = if set {
            feedsafe::protocols::source_quarantine::quarantine_source(
                store,
                &source,
                "model",
                None,
                self.clock.now(),
            )
            .await
        } else {
            feedsafe::protocols::source_quarantine::lift_source_quarantine(
                store,
                &source,
                "model",
                None,
                self.clock.now(),
            )
            .await
        };
        settled_operation(result);
    }

    /// A verifier confirms `source`'s current claim for `part` (as the read route shows it), in
    /// force for `VERIFIED_DAYS` from the system's clock; nothing when the source offers none.
    pub(super) async fn verify(&mut self, source: Source, part: &str) {
        let now = self.clock.now();
        let offers = self
            .query
            .offers(&self.env.reader(), part, None, now)
            .await
            .unwrap();
        let Some(claim) = offers
            .offers
            .iter()
            .find(|o| o.observation.connector.as_str() == source.connector())
        else {
            return;
        };
        let body = json!({
            "observation_id": claim.observation.observation_id.as_str(),
            "scope": {"kind": "price"}, "method": "call", "evidence": {"reference": "model"},
            "expires_at": now.plus_seconds(acceptance::model::VERIFIED_DAYS * 86_400).to_rfc3339(),
        });
        let request =
            feedsafe::domain::verification::VerificationRequest::read(&body, now).unwrap();
        let store = self.env.store.as_ref();
        feedsafe::protocols::verification::record_verification(
            store,
            store,
            self.env.artifacts.as_ref(),
            &self.operator(),
            &request,
            now,
        )
        .await
        .unwrap_or_else(|e| panic!("verification failed: {e}"));
    }

    /// Rejects, or accepts as a new delivery (then ingested), the `index`th open entry.
    pub(super) async fn resolve(&mut self, model: &Model, index: usize, accept: bool) {
        let open: Vec<String> = self
            .quarantine()
            .await
            .into_iter()
            .filter(|(_, s, _)| s == "open")
            .map(|(_, _, id)| id)
            .collect();
        let id = &open[index];
        let body = match accept {
            false => json!({"action": "reject", "reason": "model"}),
            true => json!({"action": "accept_as_new_delivery", "reason": "model",
                           "delivery_id": format!("ACC{}", model.sent.len() - 1)}),
        };
        let (status, answer) = self
            .ops("POST", &format!("/v1/quarantine/{id}/resolve"), body)
            .await;
        assert_eq!(status, 200, "{answer}");
        if accept {
            let service = self.service(Arc::new(NoFaults));
            let (received, failed) = self.env.pump_once("IngestQueue", &service, 30).await;
            assert_eq!(
                (received, failed),
                (1, 0),
                "the accepted delivery is ingested"
            );
            self.last_key = answer["new_delivery_key"].as_str().map(str::to_owned);
        }
    }

    /// Up to 60 stream records seen so far, shuffled by `seed`, projected again in batches of 20.
    pub(super) async fn redeliver_stream(&mut self, seed: u64) {
        let mut rng = TestRng::seeded(seed);
        let mut again: Vec<_> = self.seen.clone();
        rng.shuffle(&mut again);
        again.truncate(60);
        for batch in again.chunks(20) {
            self.apply_records(batch).await;
        }
    }

    /// A rebuild of the pool parts from the evidence into an empty table equals the live
    /// projection.
    pub(super) async fn rebuild(&mut self) {
        let rebuilt = self.rebuilt_projection().await;
        let projector = self.env.projector_into(rebuilt.clone());
        for part in PARTS {
            projector
                .rebuild_item(&source_ref(Source::Ordered).tenant, &item_key(part))
                .await
                .unwrap();
        }
        let strip = |rows: std::collections::HashMap<
            ProjectionKey,
            feedsafe::protocols::projection::ProjectedOffer,
        >| {
            rows.into_iter()
                .map(|(k, o)| (k, (o.basis, o.source_quarantined)))
                .collect::<BTreeMap<_, _>>()
        };
        let keys = pool_keys();
        assert_eq!(
            strip(rebuilt.current_many(&keys).await.unwrap()),
            strip(
                self.env
                    .projection_store()
                    .current_many(&keys)
                    .await
                    .unwrap()
            ),
            "a rebuild of the pool parts equals the live projection"
        );
    }
}
