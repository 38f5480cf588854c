//! Bridging core calls to Python: every native call takes `aio`, None to block (the GIL
//! released, signals checked every 50 ms) or the running loop's [`Completer`] to return a
//! [`Pending`] (awaited by `delayq._aio.Awaiting`). A call that takes from a queue goes
//! through core's [`Handover`], which gives back what nobody claimed.
//!
//! An awaited call wakes its task without entering Python from the runtime: its waiter is
//! queued on the completer (core's [`Wakeup`]), which writes a byte to a socket the loop
//! watches once per batch; the loop's reader then sets every waiter queued. An awaited
//! `consume` hands its deliveries to the loop the same way, and the loop's task reports
//! each handler's outcome ([`Reply`]). So a runtime thread never waits for the GIL, and
//! nothing enters Python while the interpreter exits.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq::handover::{Claim, Handover, Plain, Taken, TakenValue};
use delayq::host::{blocking::poll_for_holding_signals, wakeup::Wakeup, ProcessRuntime};
use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{intern, IntoPyObjectExt};

use crate::error::to_py;
use crate::exit::GATE;
use crate::reliable_queue::delivery;

/// How long a blocking call waits with the GIL released before checking for signals.
const SLICE: Duration = Duration::from_millis(50);

/// What a native call returns.
pub type R = PyResult<Py<PyAny>>;

/// The runtime of every client of this process (a forked child builds its own). No
/// runtime thread ever enters Python.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: ProcessRuntime = ProcessRuntime::new(|| {
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        let rt = rt.enable_all().thread_name("delayq").build();
        rt.expect("cannot start the delayq runtime")
    });
    RUNTIME.get()
}

/// An object of the Python layer, `delayq._api.<name>(*args)` (a data class, a Delivery).
pub struct Made<A>(pub &'static str, pub A);

impl<'py, A: PyCallArgs<'py>> IntoPyObject<'py> for Made<A> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        static API: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
        let api = API.get_or_try_init(py, || Ok::<_, PyErr>(py.import("delayq._api")?.unbind()))?;
        api.bind(py).getattr(self.0)?.call1(self.1)
    }
}

/// Python's None for a call that returns nothing (PyO3 makes `()` an empty tuple).
pub fn none((): ()) -> Option<()> {
    None
}

/// What a call hands to Python.
pub trait Outcome: Taken {
    fn into_py(self, py: Python<'_>) -> R;
}

/// Writes `impl Outcome for $ty`, converting the outcome with `$into` first.
macro_rules! outcomes {
    ($($ty:ty => $into:expr;)*) => {$(
        impl Outcome for $ty {
            fn into_py(self, py: Python<'_>) -> R {
                ($into)(self).into_py_any(py)
            }
        }
    )*};
}

outcomes! {
    Option<TakenValue> => |t: Self| t.map(|t| t.value);
    Option<delayq::Delivery> => |d: Self| d.map(delivery);
    Vec<delayq::Delivery> => |d: Self| d.into_iter().map(delivery).collect::<Vec<_>>();
}

impl<T: for<'py> IntoPyObject<'py> + Send + 'static> Outcome for Plain<T> {
    fn into_py(self, py: Python<'_>) -> R {
        self.0.into_py_any(py)
    }
}

/// A call made for Python: a core future, or a [`Taking`].
pub trait Call: Sized {
    /// Blocks until its outcome, the GIL released.
    fn block(self, py: Python<'_>) -> R;
    /// Starts it for an event loop.
    fn start(self, completer: Bound<'_, Completer>) -> PyResult<Pending>;
}

impl<T, F> Call for F
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    fn block(self, py: Python<'_>) -> R {
        wait(py, self, || {})?.into_py_any(py)
    }

    fn start(self, completer: Bound<'_, Completer>) -> PyResult<Pending> {
        let call = async { self.await.map(Plain) };
        Pending::new(completer, Handover::start(runtime().handle().clone(), call))
    }
}

/// A call that takes from a queue (`take`, `receive`, `receive_many`), already started.
pub struct Taking<T: Taken>(pub Handover<T>);

impl<T: Outcome> Call for Taking<T> {
    fn block(self, py: Python<'_>) -> R {
        claim_blocking(py, self.0)?.into_py(py)
    }

    fn start(self, completer: Bound<'_, Completer>) -> PyResult<Pending> {
        Pending::new(completer, self.0)
    }
}

/// Where a call's outcome goes: None to block for it, or the running loop's completer.
pub type Aio<'py> = Option<Bound<'py, Completer>>;

/// Makes `call`: blocking until its outcome, or its [`Pending`] for the loop of `aio`.
pub fn run(py: Python<'_>, aio: Aio<'_>, call: impl Call) -> R {
    match aio {
        Some(completer) => call.start(completer)?.into_py_any(py),
        None => call.block(py),
    }
}

/// Writes a `#[pymethods]` block in which each `fn name(args) = call;` is a method taking
/// `aio` first (see [`run`]) and making `call` with `$q`, a clone of the handle `self.0`;
/// the class's other methods follow.
macro_rules! calls {
    ($ty:ident($q:ident) { $(fn $name:ident($($arg:ident: $argty:ty),*) = $call:expr;)* } $($rest:tt)*) => {
        #[pyo3::pymethods]
        impl $ty {
            $(#[allow(clippy::too_many_arguments, reason = "the Python signature's")]
            fn $name(&self, py: Python<'_>, aio: $crate::runtime::Aio<'_> $(, $arg: $argty)*) -> $crate::runtime::R {
                let _in = $crate::runtime::runtime().enter(); // (core spawns there in a forked child)
                let $q = self.0.clone();
                $crate::runtime::run(py, aio, $call)
            })*
            $($rest)*
        }
    };
}
pub(crate) use calls;

/// Waits for `h`'s outcome with the GIL released and claims it. A signal (raised here
/// also when it arrived while the outcome was on its way) gives the outcome back.
pub fn claim_blocking<T: Taken>(py: Python<'_>, h: Handover<T>) -> PyResult<T> {
    let give_back = || runtime().block_on(h.give_back());
    let ready = async {
        h.ready().await;
        Ok(())
    };
    if let Err(e) = wait(py, ready, give_back).and_then(|()| py.check_signals()) {
        detach(py, give_back, drop);
        return Err(e);
    }
    match h.claim() {
        Claim::Ready(outcome) => outcome.map_err(to_py),
        Claim::Pending | Claim::Ended => Err(PyRuntimeError::new_err("the call ended unclaimed")),
    }
}

/// Runs `fut` on this thread with the GIL released, taking the GIL back every [`SLICE`]
/// to let Python handle signals: a KeyboardInterrupt drops `fut` (core's calls are
/// cancel-safe) and is raised. A thread that may no longer take the GIL back (the
/// interpreter is exiting) runs `on_exit` and waits for the process to end.
fn wait<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = delayq::Result<T>> + Send,
    on_exit: impl FnOnce() + Send,
) -> PyResult<T> {
    let mut fut = std::pin::pin!(fut);
    let mut on_exit = Some(on_exit);
    loop {
        let poll = || poll_for_holding_signals(runtime().handle(), fut.as_mut(), SLICE);
        match detach(py, poll, |_| on_exit.take().map_or((), |f| f())) {
            Some(outcome) => return outcome.map_err(to_py),
            None => py.check_signals()?,
        }
    }
}

/// `py.detach(f)`, counted in by the exit gate until the GIL is back (core's
/// `ExitGate::outside`: once the interpreter is exiting, a thread that may not take the
/// GIL back hands what `f` returned to `abandon` and waits for the process to end).
fn detach<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> T + Send,
    abandon: impl FnOnce(T) + Send,
) -> T {
    py.detach(|| GATE.outside(f, abandon)).0
}

/// A handover seen from Python: ready, claimed or given up.
trait Claimable: Send + Sync {
    fn ready(&self) -> bool;
    fn claim(&self, py: Python<'_>) -> R;
    fn give_up(&self);
}

impl<T: Outcome> Claimable for Handover<T> {
    fn ready(&self) -> bool {
        self.is_ready()
    }

    fn claim(&self, py: Python<'_>) -> R {
        match Handover::claim(self) {
            Claim::Ready(outcome) => outcome.map_err(to_py)?.into_py(py),
            Claim::Pending => Err(PyRuntimeError::new_err("the call is still running")),
            Claim::Ended => Err(PyRuntimeError::new_err(
                "cannot reuse an already awaited call",
            )),
        }
    }

    fn give_up(&self) {
        Handover::give_up(self)
    }
}

/// An async call: `waiter`, a future of the loop, is done once `ready()`. Given up, or
/// dropped unclaimed, core gives back what it took.
#[pyclass(frozen)]
pub struct Pending {
    call: Box<dyn Claimable>,
    #[pyo3(get)]
    waiter: Py<PyAny>,
}

impl Pending {
    fn new<T: Outcome>(completer: Bound<'_, Completer>, h: Handover<T>) -> PyResult<Pending> {
        let py = completer.py();
        let event_loop = &completer.get().event_loop;
        let waiter = event_loop.call_method0(py, intern!(py, "create_future"))?;
        let (completer, wake) = (completer.unbind(), waiter.clone_ref(py));
        h.on_ready(move || completer.get().queued.push(Queued::Waiter(wake)));
        let call = Box::new(h);
        Ok(Pending { call, waiter })
    }
}

#[pymethods]
impl Pending {
    fn ready(&self) -> bool {
        self.call.ready()
    }

    fn claim(&self, py: Python<'_>) -> R {
        self.call.claim(py)
    }

    fn give_up(&self) {
        self.call.give_up();
    }
}

/// What a loop's reader is handed: the waiter of a call that returned, or a delivery for
/// an awaited `consume`'s handler, with where its outcome goes.
pub enum Queued {
    Waiter(Py<PyAny>),
    Handle(Arc<Py<PyAny>>, delayq::Delivery, delayq::bridge::Reply),
}

/// What one event loop is handed, queued from any thread without the GIL; the loop reads
/// `fileno()` and takes what `drain()` gives: waiters to set, and `(handler, delivery,
/// reply)` to run as tasks.
#[pyclass(frozen)]
pub struct Completer {
    event_loop: Py<PyAny>,
    queued: Wakeup<Queued>,
}

impl Completer {
    /// Queues a delivery for `handler` on this loop.
    pub fn handle(
        &self,
        handler: Arc<Py<PyAny>>,
        d: delayq::Delivery,
        reply: delayq::bridge::Reply,
    ) {
        self.queued.push(Queued::Handle(handler, d, reply));
    }
}

#[pymethods]
impl Completer {
    #[new]
    fn new(event_loop: Py<PyAny>) -> PyResult<Completer> {
        let queued = Wakeup::new()?;
        Ok(Completer { event_loop, queued })
    }

    fn fileno(&self) -> i32 {
        self.queued.fd()
    }

    fn drain(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let each = |q| match q {
            Queued::Waiter(waiter) => Ok(waiter),
            Queued::Handle(handler, d, reply) => {
                (handler.clone_ref(py), delivery(d), Reply(reply)).into_py_any(py)
            }
        };
        self.queued.drain().into_iter().map(each).collect()
    }
}

/// Where an awaited `consume` handler's outcome goes: `send(None)` acks, `send(failure)`
/// nacks; the first report counts, and one never sent nacks.
#[pyclass(frozen)]
pub struct Reply(delayq::bridge::Reply);

#[pymethods]
impl Reply {
    #[pyo3(signature = (failure))]
    fn send(&self, failure: Option<String>) {
        self.0.send(failure.map_or(Ok(()), Err));
    }
}
