//! The local stack's long-running tasks (the ingest pollers, the stream reader, the drop
//! watcher, the schedules) are supervised: a task that panics is logged and started again, as
//! Lambda starts a new instance after one dies, instead of leaving its work undone for the rest
//! of the process's life. A task that returns is done.

use feedsafe::lambda::isolation::panic_message;
use futures_util::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tracing::error;

/// How long a task that died waits before it is started again (a panic that repeats at once
/// then costs a log line a second, not a busy loop).
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs the task `start` makes until one run of it returns; a run that panics is logged under
/// `name` and followed by a fresh one. Aborting the returned future stops the task.
pub(crate) async fn supervised<F, Fut>(name: &'static str, start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    supervised_with_pause(name, RESTART_AFTER, start).await
}

async fn supervised_with_pause<F, Fut>(name: &'static str, pause: Duration, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut restarts = 0u64;
    loop {
        match AssertUnwindSafe(start()).catch_unwind().await {
            Ok(()) => return,
            Err(payload) => {
                restarts += 1;
                let panic = panic_message(payload.as_ref());
                error!(task = name, restarts, panic = %panic, "task died; starting it again");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_task_that_panics_is_started_again_until_it_returns() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        supervised_with_pause("test", Duration::from_millis(1), move || {
            let runs = counted.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("run {} dies", runs.load(Ordering::SeqCst));
                }
            }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }
}
