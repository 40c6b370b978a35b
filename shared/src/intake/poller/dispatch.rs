//! The pull dispatcher: one schedule for the whole stack (every minute) that starts each pull
//! connector's run when its own schedule is due. A connector made from a definition with a pull
//! transport is on the list from the moment its definition is stored (`every_minutes`, default
//! 60); its run is due once per slot (the time floored to `every_minutes`). A connector is
//! marked as dispatched for a slot only after its launch was accepted, so a failed launch is
//! tried again on the next tick; a second launch of one slot resumes the same run.

use super::PullLauncher;
use crate::domain::ids::ConnectorId;
use crate::domain::timestamp::Timestamp;
use crate::protocols::ports::{Clock, StoreError};
use async_trait::async_trait;
use std::sync::Arc;
use tracing::{info, warn};

/// Every connector whose pulls are scheduled by its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledPull {
    pub connector: ConnectorId,
    pub every_minutes: u32,
    /// The start of the last slot whose run was launched (unix seconds).
    pub last_slot: Option<i64>,
}

/// Where the schedules are kept (the evidence table's `SCHEDULE#PULL` items).
#[async_trait]
pub trait PullSchedules: Send + Sync {
    async fn scheduled_pulls(&self) -> Result<Vec<ScheduledPull>, StoreError>;
    /// Records that `slot`'s run of `connector` was launched; `false` when a later or equal
    /// slot was recorded already (another dispatcher was first).
    async fn mark_dispatched(&self, connector: &ConnectorId, slot: i64)
        -> Result<bool, StoreError>;
}

/// What one tick launched, and what it could not.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DispatchReport {
    pub launched: Vec<String>,
    pub failed: Vec<String>,
}

pub struct PullDispatcher {
    schedules: Arc<dyn PullSchedules>,
    launcher: Arc<dyn PullLauncher>,
    clock: Arc<dyn Clock>,
}

/// The start of the slot `now` falls in, for a schedule of `every_minutes`.
pub fn slot_start(now: Timestamp, every_minutes: u32) -> i64 {
    let every = i64::from(every_minutes.max(1)) * 60;
    now.unix_seconds().div_euclid(every) * every
}

impl PullDispatcher {
    pub fn new(
        schedules: Arc<dyn PullSchedules>,
        launcher: Arc<dyn PullLauncher>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            schedules,
            launcher,
            clock,
        }
    }

    /// Launches every connector whose slot is due. A launch that fails is reported (and the
    /// invocation fails, so that it is retried and then parked); the others go on.
    pub async fn dispatch(&self) -> Result<DispatchReport, StoreError> {
        let now = self.clock.now();
        let mut report = DispatchReport::default();
        for pull in self.schedules.scheduled_pulls().await? {
            let slot = slot_start(now, pull.every_minutes);
            if pull.last_slot.is_some_and(|last| last >= slot) {
                continue;
            }
            match self.launcher.launch(&pull.connector).await {
                Ok(()) => {
                    self.schedules
                        .mark_dispatched(&pull.connector, slot)
                        .await?;
                    info!(connector = %pull.connector, slot, "scheduled pull launched");
                    report.launched.push(pull.connector.to_string());
                }
                Err(e) => {
                    warn!(connector = %pull.connector, error = %e, "scheduled pull not launched; next tick retries");
                    report.failed.push(pull.connector.to_string());
                }
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Schedules(Mutex<Vec<ScheduledPull>>);

    #[async_trait]
    impl PullSchedules for Schedules {
        async fn scheduled_pulls(&self) -> Result<Vec<ScheduledPull>, StoreError> {
            Ok(self.0.lock().unwrap().clone())
        }
        async fn mark_dispatched(&self, c: &ConnectorId, slot: i64) -> Result<bool, StoreError> {
            for pull in self.0.lock().unwrap().iter_mut() {
                if &pull.connector == c {
                    pull.last_slot = Some(slot);
                }
            }
            Ok(true)
        }
    }

    struct Launcher(Mutex<Vec<String>>, bool);

    #[async_trait]
    impl PullLauncher for Launcher {
        async fn launch(&self, c: &ConnectorId) -> Result<(), anyhow::Error> {
            if !self.1 {
                anyhow::bail!("invoke refused");
            }
            self.0.lock().unwrap().push(c.to_string());
            Ok(())
        }
    }

    struct At(Mutex<Timestamp>);
    impl Clock for At {
        fn now(&self) -> Timestamp {
            *self.0.lock().unwrap()
        }
    }

    fn pull(id: &str, every: u32) -> ScheduledPull {
        ScheduledPull {
            connector: ConnectorId::parse(id).unwrap(),
            every_minutes: every,
            last_slot: None,
        }
    }

    #[tokio::test]
    async fn each_connector_runs_once_per_slot_of_its_own_schedule() {
        let schedules = Arc::new(Schedules(Mutex::new(vec![
            pull("hourly", 60),
            pull("quarter", 15),
        ])));
        let launcher = Arc::new(Launcher(Mutex::new(Vec::new()), true));
        let clock = Arc::new(At(Mutex::new(
            Timestamp::parse("2026-11-29T08:00:30Z").unwrap(),
        )));
        let dispatcher = PullDispatcher::new(schedules, launcher.clone(), clock.clone());
        let mut launched = Vec::new();
        for at in [
            "08:00:30", "08:01:00", "08:14:59", "08:15:00", "08:59:00", "09:00:00",
        ] {
            *clock.0.lock().unwrap() = Timestamp::parse(&format!("2026-11-29T{at}Z")).unwrap();
            let report = dispatcher.dispatch().await.unwrap();
            launched.push((at, report.launched));
        }
        let expect = |at: &'static str, ids: &[&str]| {
            (at, ids.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            launched,
            vec![
                expect("08:00:30", &["hourly", "quarter"]),
                expect("08:01:00", &[]),
                expect("08:14:59", &[]),
                expect("08:15:00", &["quarter"]),
                expect("08:59:00", &["quarter"]),
                expect("09:00:00", &["hourly", "quarter"]),
            ]
        );
    }

    #[tokio::test]
    async fn a_launch_that_failed_is_tried_again_on_the_next_tick() {
        let schedules = Arc::new(Schedules(Mutex::new(vec![pull("hourly", 60)])));
        let clock = Arc::new(At(Mutex::new(
            Timestamp::parse("2026-11-29T08:00:30Z").unwrap(),
        )));
        let failing = PullDispatcher::new(
            schedules.clone(),
            Arc::new(Launcher(Mutex::new(Vec::new()), false)),
            clock.clone(),
        );
        assert_eq!(failing.dispatch().await.unwrap().failed, ["hourly"]);
        let working = PullDispatcher::new(
            schedules,
            Arc::new(Launcher(Mutex::new(Vec::new()), true)),
            clock,
        );
        assert_eq!(working.dispatch().await.unwrap().launched, ["hourly"]);
    }
}
