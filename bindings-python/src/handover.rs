//! Handing what `take` and `receive` took from Redis over to Python without losing it.
//!
//! An asyncio task may be cancelled at any instant, also after core's call returned.
//! An asyncio future (`runtime::awaitable`) drops a finished result when it was cancelled
//! before the result was set, and a task cancelled after its future got a
//! result but before the task resumed drops it too (asyncio throws `CancelledError` into
//! the coroutine, and the result stays unread in the future). So `take_async` and
//! `receive_async` return a [`Handover`]: an awaitable that runs core's call as a task
//! and keeps the outcome on the Rust side until the awaiting coroutine reads it. Whoever
//! ends it first decides: the coroutine reading the outcome gets the value; a cancelled
//! (or dropped) awaitable gives it back with core's `give_back` / `release`. Cancelled
//! before core's call returned, the task is aborted, and core's cancel-safety gives back
//! what the server handed over for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyBaseException, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::to_py;
use crate::exit;
use crate::reliable_queue::Delivery;
use crate::runtime::{runtime, settle_soon};

/// Something taken from Redis for a caller: a value of a delayed queue or a delivery. It
/// goes back to its queue when the caller is gone.
pub(crate) trait Taken: Send + 'static {
    /// The value for Python.
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>>;
    /// Gives it back with core's call (errors are logged).
    fn give_back(self: Box<Self>) -> BoxFuture;
}

pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A value taken from a delayed queue.
pub(crate) struct Value {
    pub(crate) queue: delayq::DelayedQueue,
    pub(crate) value: Vec<u8>,
}

impl Taken for Value {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(PyBytes::new(py, &self.value).into_any().unbind())
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        Box::pin(async move {
            if let Err(e) = self.queue.give_back(&self.value).await {
                log_error(format!(
                    "could not give back a value nobody received to {:?}: {e}",
                    self.queue.name()
                ));
            }
        })
    }
}

impl Taken for delayq::Delivery {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, Delivery { inner: *self })?.into_any())
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        Box::pin(async move {
            if let Err(e) = self.release().await {
                log_error(format!(
                    "could not give back delivery {} nobody received; it returns after the visibility timeout: {e}",
                    self.id
                ));
            }
        })
    }
}

/// Deliveries of one `receive_many`: a list in Python, each given back when nobody took
/// them.
pub(crate) struct Batch(pub(crate) Vec<delayq::Delivery>);

impl Taken for Batch {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let items = self
            .0
            .into_iter()
            .map(|inner| Py::new(py, Delivery { inner }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(pyo3::types::PyList::new(py, items)?.into_any().unbind())
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        Box::pin(async move {
            for d in self.0 {
                Box::new(d).give_back().await;
            }
        })
    }
}

/// Logs `message` on Python's `delayq` logger, from any thread (on stderr once the
/// interpreter is exiting).
fn log_error(message: String) {
    runtime().spawn_blocking(move || {
        let logged = exit::attach(|py| {
            let logged = py
                .import("logging")
                .and_then(|logging| logging.call_method1("getLogger", ("delayq",)))
                .and_then(|logger| logger.call_method1("error", (&message,)));
            if let Err(e) = logged {
                e.write_unraisable(py, None);
            }
        });
        if logged.is_none() {
            eprintln!("delayq: {message}");
        }
    });
}

type Outcome = delayq::Result<Option<Box<dyn Taken>>>;

enum State {
    /// Core's call runs.
    Running,
    /// Core's call returned; the outcome waits for the awaiting coroutine.
    Ready(Outcome),
    /// The outcome went to the coroutine, or the awaitable was given up (and what was
    /// taken given back).
    Ended,
}

type Slot = Arc<Mutex<State>>;

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, State> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends `slot` for nobody: a value already taken goes back to its queue.
fn give_up(slot: &Slot) {
    let state = std::mem::replace(&mut *lock(slot), State::Ended);
    if let State::Ready(Ok(Some(taken))) = state {
        runtime().spawn(taken.give_back());
    }
}

/// The awaitable of `take_async` and `receive_async`.
#[pyclass(module = "delayq", frozen)]
pub struct Handover {
    slot: Slot,
    /// An asyncio future on the caller's loop, done once the outcome is ready: what the
    /// awaiting task waits on.
    future: Py<PyAny>,
    task: tokio::task::AbortHandle,
}

/// Starts `fut` (core's `take` or `receive`) on the core's runtime and returns the
/// awaitable that hands its outcome over.
pub(crate) fn handover<T, F>(py: Python<'_>, fut: F) -> PyResult<Handover>
where
    T: Taken,
    F: Future<Output = delayq::Result<Option<T>>> + Send + 'static,
{
    let event_loop = pyo3_async_runtimes::tokio::get_current_loop(py)?;
    let future = event_loop.call_method0("create_future")?.unbind();
    let slot: Slot = Arc::new(Mutex::new(State::Running));
    let (task_slot, task_future) = (slot.clone(), future.clone_ref(py));
    let task = runtime().spawn(async move {
        let outcome: Outcome = fut
            .await
            .map(|taken| taken.map(|t| Box::new(t) as Box<dyn Taken>));
        {
            let mut state = lock(&task_slot);
            match *state {
                State::Running => *state = State::Ready(outcome),
                State::Ready(_) | State::Ended => {
                    drop(state);
                    // Given up (and this task aborted) meanwhile: give back in a task of
                    // its own.
                    if let Ok(Some(taken)) = outcome {
                        runtime().spawn(taken.give_back());
                    }
                    return;
                }
            }
        }
        // Wakes the awaiting task (without holding a runtime thread while waiting for the
        // GIL). With the loop closed or the interpreter exiting, nobody will read the
        // outcome: it goes back.
        tokio::task::spawn_blocking(move || {
            let woken =
                exit::attach(|py| settle_soon(task_future.bind(py), py.None(), false).is_ok());
            if woken != Some(true) {
                give_up(&task_slot);
            }
        });
    });
    Ok(Handover {
        slot,
        future,
        task: task.abort_handle(),
    })
}

impl Handover {
    /// Gives the call up: aborts core's call if it still runs, gives back what it took.
    fn give_up(&self) {
        give_up(&self.slot);
        self.task.abort();
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        self.give_up();
    }
}

#[pymethods]
impl Handover {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Yields the future to wait on until the outcome is ready, then returns the outcome
    /// (raises `StopIteration(value)`, or core's error).
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let outcome = {
            let mut state = lock(&self.slot);
            match std::mem::replace(&mut *state, State::Ended) {
                State::Ready(outcome) => outcome,
                State::Running => {
                    *state = State::Running;
                    drop(state);
                    // What asyncio's own futures do when awaited: the task waits on it.
                    let future = self.future.bind(py);
                    future.setattr("_asyncio_future_blocking", true)?;
                    return Ok(future.clone().unbind());
                }
                State::Ended => {
                    return Err(PyRuntimeError::new_err(
                        "cannot reuse an already awaited take or receive",
                    ));
                }
            }
        };
        // From here on the value is the caller's: the coroutine resumes with it at once.
        let value = match outcome.map_err(to_py)? {
            Some(taken) => taken.into_py(py)?,
            None => py.None(),
        };
        Err(PyStopIteration::new_err((value,)))
    }

    fn send(&self, py: Python<'_>, _value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.__next__(py)
    }

    /// The awaiting task was cancelled (or something else was thrown in): gives the call
    /// up and raises what was thrown.
    #[pyo3(signature = (typ, val = None, _tb = None))]
    fn throw(
        &self,
        typ: &Bound<'_, PyAny>,
        val: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.give_up();
        let exc = if typ.is_instance_of::<PyBaseException>() {
            typ.clone()
        } else {
            match val {
                Some(v) if v.is_instance(typ)? => v.clone(),
                Some(v) if !v.is_none() => typ.call1((v,))?,
                _ => typ.call0()?,
            }
        };
        Err(PyErr::from_value(exc))
    }

    /// The awaiting coroutine was closed: gives the call up.
    fn close(&self) {
        self.give_up();
    }
}
