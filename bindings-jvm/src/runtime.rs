//! The tokio runtime that runs every delayq future of this process.
//!
//! Core's `Client::connect` captures the runtime it runs on and spawns its connection
//! drivers and transfer tasks there, so the client must be created on a long-lived
//! multi-thread runtime. The JVM side then only awaits a `JoinHandle` (which any executor
//! can poll) or blocks on the future.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::error::FfiError;

pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("delayq-jvm")
            .build()
            .expect("cannot start the delayq tokio runtime")
    })
}

/// A spawned task that is aborted when its awaiting future is dropped (a cancelled
/// coroutine), so that a cancelled `take` gives its value back instead of running on.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `fut` on the runtime and awaits it from whatever executor polls the result.
pub(crate) async fn run<F, T>(fut: F) -> Result<T, FfiError>
where
    F: Future<Output = delayq::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    match AbortOnDrop(runtime().spawn(fut)).await {
        Ok(result) => result.map_err(FfiError::from),
        Err(e) => Err(FfiError::Connection(format!("delayq task failed: {e}"))),
    }
}

/// Runs `fut` on the runtime, blocking the calling (JVM) thread until it is done.
pub(crate) fn block<F, T>(fut: F) -> Result<T, FfiError>
where
    F: Future<Output = delayq::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        // Called from a runtime thread (a coroutine resumed there): blocking it would
        // stall the runtime, so wait on a plain thread instead.
        return std::thread::scope(|s| s.spawn(|| block(fut)).join())
            .unwrap_or_else(|_| Err(FfiError::Connection("delayq call panicked".into())));
    }
    runtime().block_on(fut).map_err(FfiError::from)
}
