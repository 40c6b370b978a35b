//! One item, one failure: a panic while handling one SQS message, one stream record or one HTTP
//! request becomes that item's failure only, never its batch's and never the process's
//! (docs/adr/0011-a-panic-is-one-items-failure.md). What each entry point does with the
//! failure:
//! - an SQS message: quarantined `internal_error` with the message as its evidence, then
//!   acknowledged; if even that fails, the message alone is a batch item failure;
//! - a stream record: the batch is applied again one record at a time to find the record that
//!   panics, which is reported as the batch item failure (the event source retries it, then
//!   parks it in the on-failure queue);
//! - an HTTP request: `500 internal_error`, the panic's text logged, never sent.

use futures_util::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use tracing::error;

/// A panic caught while handling one item, with the panic's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handling panicked: {0}")]
pub struct Panicked(pub String);

/// Runs `future`, turning a panic inside it into `Err(Panicked)`, logged with `item` (what was
/// being handled: a message id, a sequence number, a route).
///
/// The handlers' shared state stays usable after a caught panic: the services hold clients,
/// configuration and caches of whole values (a cache's lock is taken only to copy a value in or
/// out), and the commit protocol is crash-safe at every point (docs/crash-points.md), so a
/// delivery abandoned mid-way is what a crash would have left.
pub async fn isolated<F: Future>(item: &str, future: F) -> Result<F::Output, Panicked> {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|payload| {
            let message = panic_message(payload.as_ref());
            error!(item = %item, panic = %message, "handling panicked; only this item fails");
            Panicked(message)
        })
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_returned_as_its_message_and_a_value_passes_through() {
        assert_eq!(isolated("one", async { 7 }).await, Ok(7));
        let numbers: Vec<u8> = Vec::new();
        let caught = isolated("two", async {
            numbers.first().copied().expect("no number")
        })
        .await;
        assert_eq!(caught, Err(Panicked("no number".into())));
        let formatted = isolated("three", async { panic!("row {}", 3) }).await;
        assert_eq!(formatted, Err::<(), _>(Panicked("row 3".into())));
    }
}
