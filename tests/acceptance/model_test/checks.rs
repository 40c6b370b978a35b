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
        let reader = self.env.reader();
        let expected = ExpectedView::of(model, part);
        let offers = self
            .query
            .offers(&reader, part, None, Timestamp::now())
            .await
            .unwrap();
        let offers = serde_json::to_value(offers).unwrap();
        let shown: BTreeMap<String, String> = offers["offers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["connector"].as_str().unwrap().to_owned(),
                    o["observation_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(shown, expected.offers, "offers of {part} {when}");
        let history = self.query.history(&reader, part, None, 100).await.unwrap();
        let history = serde_json::to_value(history).unwrap();
        let shown: Vec<(String, bool)> = history["observations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["observation_id"].as_str().unwrap().to_owned(),
                    o["superseded"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(shown, expected.history, "history of {part} {when}");
        self.compared.insert(part, expected);
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

/// What the model says the read routes show for one part: the current offer's observation per
/// connector, and the history (observation id, superseded) newest first.
#[derive(Debug, PartialEq)]
pub(super) struct ExpectedView {
    offers: BTreeMap<String, String>,
    history: Vec<(String, bool)>,
}

impl ExpectedView {
    fn of(model: &Model, part: &str) -> Self {
        ExpectedView {
            offers: model
                .offers(part)
                .into_iter()
                .map(|(s, id)| (s.connector().to_owned(), id))
                .collect(),
            history: model.history(part),
        }
    }
}
