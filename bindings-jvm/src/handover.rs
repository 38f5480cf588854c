//! Handing what a call took from Redis over to Kotlin without losing it.
//!
//! A coroutine may be cancelled at any instant, also after core's `take` or `receive`
//! returned. UniFFI's own async calls lower a result as soon as the Rust future finishes
//! and drop it (lowered, so without giving it back) when the coroutine was cancelled
//! before collecting it. So `take` and `receive` run as tasks here and hand their result to
//! a handler that the facade implements around `CancellableContinuation.resume(value,
//! onCancellation)`: a continuation cancelled meanwhile calls `give_back` / `release`.
//! Cancelling the call before it has a result aborts the task, and core's cancel-safety
//! gives back what the server handed over for it.

use std::future::Future;
use std::sync::Arc;

use crate::error::FfiError;
use crate::runtime::runtime;

/// Receives the outcome of `DelayedQueue.take_then` (implemented by the Kotlin facade).
#[uniffi::export(foreign)]
pub trait TakeHandler: Send + Sync {
    /// The value taken, or none when the timeout passed.
    fn on_value(&self, value: Option<Vec<u8>>);
    /// The call failed: `kind` is the error's stable name (`invalid_argument`, ...).
    fn on_error(&self, kind: String, message: String);
}

/// Receives the outcome of `ReliableQueue.receive_then` (implemented by the Kotlin facade).
#[uniffi::export(foreign)]
pub trait ReceiveHandler: Send + Sync {
    /// The delivery, or none when the timeout passed.
    fn on_delivery(&self, delivery: Option<Arc<crate::reliable_queue::Delivery>>);
    /// The call failed: `kind` is the error's stable name (`invalid_argument`, ...).
    fn on_error(&self, kind: String, message: String);
}

/// Receives the outcome of `ReliableQueue.receive_many_then` (implemented by the Kotlin
/// facade).
#[uniffi::export(foreign)]
pub trait ReceiveManyHandler: Send + Sync {
    /// The deliveries; empty when the timeout passed.
    fn on_deliveries(&self, deliveries: Vec<Arc<crate::reliable_queue::Delivery>>);
    /// The call failed: `kind` is the error's stable name (`invalid_argument`, ...).
    fn on_error(&self, kind: String, message: String);
}

/// A `take_then`, `receive_then` or `receive_many_then` in progress.
#[derive(uniffi::Object)]
pub struct PendingCall {
    task: tokio::task::AbortHandle,
}

#[uniffi::export]
impl PendingCall {
    /// Gives up the call: its handler is not called unless it already was, and what the
    /// server handed over for it goes back to the queue.
    pub fn cancel(&self) {
        self.task.abort();
    }
}

/// Runs `fut` as a task whose result goes to `deliver`, or whose error goes to `fail`.
pub(crate) fn run_then<T, F>(
    fut: F,
    deliver: impl FnOnce(T) + Send + 'static,
    fail: impl FnOnce(String, String) + Send + 'static,
) -> Arc<PendingCall>
where
    T: Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    let task = runtime().spawn(async move {
        match fut.await {
            Ok(value) => deliver(value),
            Err(e) => {
                let kind = e.kind().as_str().to_owned();
                fail(kind, FfiError::from(e).to_string())
            }
        }
    });
    Arc::new(PendingCall {
        task: task.abort_handle(),
    })
}

/// Puts `value` back at the head of `queue`, in the background.
pub(crate) fn give_back(queue: delayq::DelayedQueue, value: Vec<u8>) {
    runtime().spawn(async move {
        if let Err(e) = queue.give_back(value).await {
            tracing::error!(queue = %queue.name(), error = %e, "could not give back a value nobody received");
        }
    });
}

/// Gives `delivery` back untouched, in the background.
pub(crate) fn release(delivery: delayq::Delivery) {
    runtime().spawn(async move {
        if let Err(e) = delivery.release().await {
            tracing::warn!(id = %delivery.id, error = %e, "could not give back a delivery nobody received; it returns after the visibility timeout");
        }
    });
}
