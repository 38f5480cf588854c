//! Completions handed to Kotlin in batches, from one thread of their own.
//!
//! A task that finishes a call for Kotlin does not call into the JVM itself (each JNA upcall
//! from a runtime thread would attach it to the JVM): it queues `(token, outcome)` here, and
//! the `delayq-callbacks` thread hands all that was queued meanwhile to the facade in one
//! upcall. Concurrent offers, which core coalesces into one script call, complete together
//! and so cross into Kotlin together.

use std::future::Future;
use std::sync::{mpsc, Arc, OnceLock};

use crate::runtime::runtime;

/// Where completions go; implemented by the Kotlin facade (`Completions`).
#[uniffi::export(foreign)]
pub trait Completions: Send + Sync {
    /// Calls that succeeded, as pairs: token, value, token, value...
    fn completed(&self, pairs: Vec<i64>);
    /// A call that failed: `kind` is the error's stable name (`invalid_argument`, ...).
    fn failed(&self, token: i64, kind: String, message: String);
}

type Outcome = (i64, delayq::Result<i64>);

static QUEUED: OnceLock<mpsc::Sender<Outcome>> = OnceLock::new();

/// Sends every completion to `sink` from now on (once per process; later calls do nothing).
#[uniffi::export]
pub fn set_completions(sink: Arc<dyn Completions>) {
    let (tx, rx) = mpsc::channel::<Outcome>();
    if QUEUED.set(tx).is_err() {
        return;
    }
    let deliver = move || {
        while let Ok(first) = rx.recv() {
            let mut pairs = Vec::new();
            for (token, outcome) in std::iter::once(first).chain(rx.try_iter()) {
                match outcome {
                    Ok(value) => pairs.extend([token, value]),
                    Err(e) => sink.failed(token, e.kind().as_str().into(), e.to_string()),
                }
            }
            if !pairs.is_empty() {
                sink.completed(pairs);
            }
        }
    };
    let thread = std::thread::Builder::new().name("delayq-callbacks".into());
    thread
        .spawn(deliver)
        .expect("cannot start the delayq-callbacks thread");
}

/// Queues the outcome of the call `token` for Kotlin.
pub(crate) fn complete(token: i64, outcome: delayq::Result<i64>) {
    if let Some(queued) = QUEUED.get() {
        let _ = queued.send((token, outcome));
    }
}

/// Runs `fut` as a task on the runtime; its outcome goes to Kotlin as `token`'s.
pub(crate) fn spawn_then(
    token: i64,
    fut: impl Future<Output = delayq::Result<i64>> + Send + 'static,
) {
    runtime().spawn(async move { complete(token, fut.await) });
}
