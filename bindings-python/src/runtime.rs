//! Bridging core futures to Python: blocking (GIL released, Ctrl-C honoured) or awaitable.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::error::to_py;
use crate::exit;
use crate::handover::Taken;

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// `py.detach(f)` for a sync call. Once the interpreter is exiting, a thread that may
/// not take the GIL back (see `exit`) hands what `f` returned to `abandon` and waits for
/// the process to end.
fn detach<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> T + Send,
    abandon: impl FnOnce(T) + Send,
) -> T {
    let (value, detached) = py.detach(|| {
        let detached = exit::Detached::enter();
        let value = f();
        if !detached.may_return() {
            abandon(value);
            drop(detached);
            exit::wait_for_the_end();
        }
        (value, detached)
    });
    drop(detached);
    value
}

/// Runs a core future to completion with the GIL released, waking every 50 ms to let
/// Python handle signals: a KeyboardInterrupt drops the future (core's calls are
/// cancel-safe) and is raised.
pub fn block<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    T: Send,
    F: Future<Output = delayq::Result<T>> + Send,
{
    block_abandoning(py, fut, drop)
}

/// `block`, with what to do with the outcome of a call that cannot return (exit).
fn block_abandoning<T, F>(py: Python<'_>, fut: F, abandon: fn(T)) -> PyResult<T>
where
    T: Send,
    F: Future<Output = delayq::Result<T>> + Send,
{
    let mut fut = Box::pin(fut);
    loop {
        let (step, back) = detach(
            py,
            move || {
                let step = runtime().block_on(async {
                    tokio::time::timeout(Duration::from_millis(50), &mut fut).await
                });
                (step, fut)
            },
            |(step, fut)| {
                // Dropped, core's call gives back what comes for it later.
                drop(fut);
                if let Ok(Ok(value)) = step {
                    abandon(value);
                }
            },
        );
        fut = back;
        match step {
            Ok(result) => return result.map_err(to_py),
            Err(_) => py.check_signals()?,
        }
    }
}

/// `block` for `take` and `receive`: a signal that arrived while the value was on its way
/// is raised here, with the value given back (raised by Python once the call returned, it
/// would lose the value). A value taken by a call that cannot return is given back too.
pub fn block_taking<T, F>(py: Python<'_>, fut: F) -> PyResult<Option<T>>
where
    T: Taken,
    F: Future<Output = delayq::Result<Option<T>>> + Send,
{
    let taken = block_abandoning(py, fut, give_back)?;
    if taken.is_some() {
        if let Err(e) = py.check_signals() {
            detach(py, || give_back(taken), drop);
            return Err(e);
        }
    }
    Ok(taken)
}

fn give_back<T: Taken>(taken: Option<T>) {
    if let Some(taken) = taken {
        runtime().block_on(Box::new(taken).give_back());
    }
}

/// An asyncio future for a core future, which runs on the core's runtime at once.
/// Cancelling the asyncio future drops the core future.
///
/// Not `pyo3_async_runtimes::future_into_py`: that one enters Python from a runtime
/// thread whatever the state of the interpreter; here that goes through `exit::attach`.
pub fn awaitable<'py, T, F>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    let future = pyo3_async_runtimes::tokio::get_current_loop(py)?.call_method0("create_future")?;
    let target = future.clone().unbind();
    let task = runtime().spawn(async move {
        let outcome = fut.await;
        // Without holding a runtime thread while waiting for the GIL.
        tokio::task::spawn_blocking(move || {
            exit::attach(|py| {
                let (value, failed) = match outcome.map_err(to_py).and_then(|v| v.into_py_any(py)) {
                    Ok(value) => (value, false),
                    Err(e) => (e.into_value(py).into_any(), true),
                };
                // With the loop closed, nobody awaits it.
                let _ = settle_soon(target.bind(py), value, failed);
            })
        });
    });
    future.call_method1(
        "add_done_callback",
        (AbortIfCancelled(task.abort_handle()),),
    )?;
    Ok(future)
}

/// Has the loop of the asyncio `future` set its result (or exception, if `failed`), unless
/// it is done (cancelled) already. From any thread.
pub(crate) fn settle_soon(
    future: &Bound<'_, PyAny>,
    value: Py<PyAny>,
    failed: bool,
) -> PyResult<()> {
    let settle = wrap_pyfunction!(settle, future.py())?;
    future
        .call_method0("get_loop")?
        .call_method1("call_soon_threadsafe", (settle, future, value, failed))?;
    Ok(())
}

#[pyfunction]
fn settle(future: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, failed: bool) -> PyResult<()> {
    if !future.call_method0("done")?.is_truthy()? {
        let method = if failed {
            "set_exception"
        } else {
            "set_result"
        };
        future.call_method1(method, (value,))?;
    }
    Ok(())
}

/// The done callback of an `awaitable`'s future.
#[pyclass(frozen)]
struct AbortIfCancelled(tokio::task::AbortHandle);

#[pymethods]
impl AbortIfCancelled {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.0.abort();
        }
        Ok(())
    }
}

/// Runs `f` inside the runtime (core's `Client::connect` captures the runtime it runs on).
pub fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _guard = runtime().enter();
    f()
}
