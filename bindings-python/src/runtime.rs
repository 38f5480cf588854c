//! Bridging core futures to Python: blocking (GIL released, Ctrl-C honoured) or awaitable.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;

use crate::error::to_py;
use crate::handover::Taken;

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// Runs a core future to completion with the GIL released, waking every 50 ms to let
/// Python handle signals: a KeyboardInterrupt drops the future (core's calls are
/// cancel-safe) and is raised.
pub fn block<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    T: Send,
    F: Future<Output = delayq::Result<T>> + Send,
{
    let mut fut = Box::pin(fut);
    loop {
        let step = py.detach(|| {
            runtime()
                .block_on(async { tokio::time::timeout(Duration::from_millis(50), &mut fut).await })
        });
        match step {
            Ok(result) => return result.map_err(to_py),
            Err(_) => py.check_signals()?,
        }
    }
}

/// `block` for `take` and `receive`: a signal that arrived while the value was on its way
/// is raised here, with the value given back (raised by Python once the call returned, it
/// would lose the value).
pub fn block_taking<T, F>(py: Python<'_>, fut: F) -> PyResult<Option<T>>
where
    T: Taken,
    F: Future<Output = delayq::Result<Option<T>>> + Send,
{
    let taken = block(py, fut)?;
    if taken.is_some() {
        if let Err(e) = py.check_signals() {
            if let Some(taken) = taken {
                py.detach(|| runtime().block_on(Box::new(taken).give_back()));
            }
            return Err(e);
        }
    }
    Ok(taken)
}

/// A Python awaitable for a core future, running on the core's runtime. Cancelling the
/// awaitable drops the future.
pub fn awaitable<'py, T, F>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move { fut.await.map_err(to_py) })
}

/// Runs `f` inside the runtime (core's `Client::connect` captures the runtime it runs on).
pub fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _guard = runtime().enter();
    f()
}
