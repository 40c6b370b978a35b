//! The comparison after each step and at the end of a history: what the read routes show
//! against what the model says.

use super::*;

impl System {
    /// Compares what the read paths show with the model after `step`: the offers and history of
    /// the parts the step may have changed (`parts_to_compare`), the delivery's record and the
    /// quarantine list.
    pub(super) async fn check(&mut self, model: &Model, step: &Step) {
        let when = format!("after {step:?}");
        for part in self.parts_to_compare(model, step) {
            self.check_part(model, part, &when).await;
        }
        self.check_record(model, &when).await;
        self.check_quarantine(model, &when).await;
    }

    /// The parts a step names (a delivery's rows, both ends of a correction), every part after
    /// a step on a whole source or on the projection, and any part whose view in the model
    /// changed since it was last compared (a delivery a correction attributes elsewhere). A
    /// part left out has a view the step cannot have changed; it is compared again when one of
    /// these applies to it and at the end of every history (`teardown`). This keeps a third of
    /// the per-step reads, the model test's largest cost, out of each history.
    fn parts_to_compare(&self, model: &Model, step: &Step) -> Vec<&'static str> {
        let named: Vec<&str> = match step {
            Step::Deliver { payload, .. } => payload.rows.iter().map(|r| r.part.as_str()).collect(),
            Step::Correct { from, to, .. } => vec![PARTS[*from], PARTS[*to]],
            _ => return PARTS.to_vec(),
        };
        PARTS
            .into_iter()
            .filter(|part| {
                named.contains(part)
                    || self.compared.get(part) != Some(&ExpectedView::of(model, part))
            })
            .collect()
    }

    /// The offers and the history of `part` as the read routes show them, against the model.
    pub(super) async fn check_part(&mut self, model: &Model, part: &'static str, when: &str) {
        let expected = ExpectedView::of(model, part);
        let shown = self.view_of(part, None).await;
        assert_eq!(shown.offers, expected.offers, "offers of {part} {when}");
        assert_eq!(
            shown.excluded, expected.excluded,
            "sources named of {part} {when}"
        );
        assert_eq!(shown.history, expected.history, "history of {part} {when}");
        self.compared.insert(part, expected);
    }

    /// What the read routes show of `part` now (`as_of` none) or as of an instant: each
    /// connector's current claim with its verification state, and the history.
    pub(super) async fn view_of(&self, part: &str, as_of: Option<Timestamp>) -> ExpectedView {
        let reader = self.env.reader();
        let now = self.clock.now();
        let asked = feedsafe::protocols::query::OffersAsked {
            as_of,
            ..Default::default()
        };
        let offers = self
            .query
            .offers_as_asked(&reader, part, &asked, now)
            .await
            .unwrap();
        let offers = serde_json::to_value(offers).unwrap();
        let history = self
            .query
            .history_as_of(&reader, part, None, 100, as_of, now)
            .await
            .unwrap();
        let history = serde_json::to_value(history).unwrap();
        let text = |v: &Value| v.as_str().unwrap().to_owned();
        ExpectedView {
            offers: offers["offers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    let claim = (
                        text(&o["observation_id"]),
                        text(&o["verification"]["state"]),
                    );
                    (text(&o["connector"]), claim)
                })
                .collect(),
            excluded: offers["excluded_sources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let named = (text(&e["reason"]), text(&e["observation_id"]));
                    (text(&e["connector"]), named)
                })
                .collect(),
            history: history["observations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        text(&o["observation_id"]),
                        o["superseded"].as_bool().unwrap(),
                    )
                })
                .collect(),
        }
    }

    /// Every part as the model says it is now, kept with the instant (the system's clock) for
    /// the as-of steps.
    pub(super) fn snapshot(&mut self, model: &Model) {
        let views = PARTS
            .into_iter()
            .map(|part| (part, ExpectedView::of(model, part)))
            .collect();
        self.snapshots.push((self.clock.now(), views));
    }

    /// The read routes as of the end of an earlier step answer what the model said then.
    pub(super) async fn check_as_of(&self, index: usize) {
        if self.snapshots.is_empty() {
            return;
        }
        let (at, views) = &self.snapshots[index % self.snapshots.len()];
        for (part, expected) in views {
            let shown = self.view_of(part, Some(*at)).await;
            assert_eq!(&shown, expected, "{part} as of {}", at.to_rfc3339());
        }
    }

    /// The last delivery's record as the ops route shows it.
    async fn check_record(&self, model: &Model, when: &str) {
        let Some(key) = &self.last_key else {
            return;
        };
        let (status, shown) = self
            .ops("GET", &format!("/v1/deliveries/{key}"), Value::Null)
            .await;
        match (status, model.records.get(key)) {
            (200, Some(e)) => {
                let ids: Vec<String> = shown["observation_ids"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|i| i.as_str().unwrap_or_default().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let confidence = if e.beyond_horizon {
                    "beyond_horizon"
                } else {
                    "within_horizon"
                };
                assert_eq!(
                    (
                        shown["state"].as_str(),
                        shown["attempts"].as_u64(),
                        shown["epoch"].as_u64(),
                        ids,
                        shown["dedup_confidence"].as_str()
                    ),
                    (
                        Some("COMMITTED"),
                        Some(u64::from(e.attempts)),
                        Some(u64::from(e.epoch)),
                        e.observations.clone(),
                        Some(confidence)
                    ),
                    "record of {key} {when}"
                );
            }
            (404, None) => {}
            (status, e) => panic!("record of {key} {when}: system {status} {shown}, model {e:?}"),
        }
    }

    /// The quarantine list, oldest first, as the ops route shows it.
    async fn check_quarantine(&self, model: &Model, when: &str) {
        let shown: Vec<(String, String)> = self
            .quarantine()
            .await
            .into_iter()
            .map(|(k, s, _)| (k, s))
            .collect();
        let expected: Vec<(String, String)> = model
            .quarantine
            .iter()
            .map(|q| (q.delivery_key.clone(), q.status.clone()))
            .collect();
        assert_eq!(shown, expected, "quarantine {when}");
    }
}

/// What the model says the read routes show for one part: the current offer's observation
/// and its verification state per connector, and the history (observation id, superseded)
/// newest first.
#[derive(Debug, PartialEq)]
pub(super) struct ExpectedView {
    offers: BTreeMap<String, (String, String)>,
    /// Per connector left out of the offers: the reason and the claim named.
    excluded: BTreeMap<String, (String, String)>,
    history: Vec<(String, bool)>,
}

impl ExpectedView {
    fn of(model: &Model, part: &str) -> Self {
        ExpectedView {
            offers: model
                .offers(part)
                .into_iter()
                .map(|(s, id)| {
                    let state = model.verification(&id).to_owned();
                    (s.connector().to_owned(), (id, state))
                })
                .collect(),
            excluded: model
                .excluded(part)
                .into_iter()
                .map(|(s, (reason, id))| (s.connector().to_owned(), (reason.to_owned(), id)))
                .collect(),
            history: model.history(part),
        }
    }
}
