//! Bridging core calls to Python: every native call takes `aio`, None to block (the GIL
//! released, signals checked every 50 ms) or the running loop's [`Completer`] to return a
//! [`Pending`] (awaited by `delayq._aio.Awaiting`). A call that takes from a queue goes
//! through core's [`Handover`], which gives back what nobody claimed.
//!
//! An awaited call wakes its task without entering Python from the runtime: its waiter is
//! queued on the completer, and the first of a batch writes a byte to a socket the loop
//! watches; the loop's reader then sets every waiter queued. So a runtime thread never
//! waits for the GIL, and nothing enters Python while the interpreter exits.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use delayq::handover::{Claim, Handover, Taken, TakenValue};
use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{intern, IntoPyObjectExt};

use crate::error::to_py;
use crate::exit;
use crate::reliable_queue::delivery;

/// How long a blocking call waits with the GIL released before checking for signals.
const SLICE: Duration = Duration::from_millis(50);
/// How long a blocking call yields before it parks (see `poll_for`).
const SPIN: Duration = Duration::from_micros(50);

/// What a native call returns.
pub type R = PyResult<Py<PyAny>>;

pub fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
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

/// What a call hands to Python.
pub trait Outcome: Taken {
    fn into_py(self, py: Python<'_>) -> R;
}

/// The outcome of a call that takes nothing from a queue: nothing to give back.
pub struct Plain<T>(T);

impl<T: Send + 'static> Taken for Plain<T> {
    fn give_back(self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(async {})
    }
}

impl<T: for<'py> IntoPyObject<'py> + Send + 'static> Outcome for Plain<T> {
    fn into_py(self, py: Python<'_>) -> R {
        self.0.into_py_any(py)
    }
}

impl Outcome for Option<TakenValue> {
    fn into_py(self, py: Python<'_>) -> R {
        self.map(|t| t.value).into_py_any(py)
    }
}

impl Outcome for Option<delayq::Delivery> {
    fn into_py(self, py: Python<'_>) -> R {
        self.map(delivery).into_py_any(py)
    }
}

impl Outcome for Vec<delayq::Delivery> {
    fn into_py(self, py: Python<'_>) -> R {
        self.into_iter()
            .map(delivery)
            .collect::<Vec<_>>()
            .into_py_any(py)
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
        block(py, self)?.into_py_any(py)
    }

    fn start(self, completer: Bound<'_, Completer>) -> PyResult<Pending> {
        let handle = runtime().handle().clone();
        Pending::new(
            completer,
            Handover::start(handle, async { self.await.map(Plain) }),
        )
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
            $(fn $name(&self, py: Python<'_>, aio: $crate::runtime::Aio<'_> $(, $arg: $argty)*) -> $crate::runtime::R {
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

/// Runs `fut` on this thread with the GIL released (see [`wait`]).
pub fn block<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = delayq::Result<T>> + Send,
) -> PyResult<T> {
    wait(py, fut, || {})
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
        let abandon = |_| on_exit.take().map_or((), |f| f());
        match detach(py, || poll_for(fut.as_mut()), abandon) {
            Some(outcome) => return outcome.map_err(to_py),
            None => py.check_signals()?,
        }
    }
}

/// Polls `fut` on this thread until it is ready, for up to [`SLICE`]. Not the runtime's
/// `block_on` with a timer: registering a timer earlier than the runtime's next one wakes
/// a runtime thread, once per call. After each poll that is not ready the thread yields
/// for up to [`SPIN`] before it parks: a reply over loopback often comes within that, and
/// waking a parked thread (a futex, on a VM an interrupt to an idle CPU) costs more.
fn poll_for<F: Future>(mut fut: Pin<&mut F>) -> Option<F::Output> {
    struct Unpark(std::thread::Thread, AtomicBool);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.1.store(true, Ordering::Release);
            self.0.unpark();
        }
    }
    let _context = runtime().enter();
    let unpark = Arc::new(Unpark(std::thread::current(), AtomicBool::new(false)));
    let waker = Waker::from(unpark.clone());
    let until = Instant::now() + SLICE;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            return Some(out);
        }
        let spin_until = Instant::now() + SPIN;
        while !unpark.1.swap(false, Ordering::Acquire) {
            let now = Instant::now();
            if now < spin_until {
                std::thread::yield_now();
                continue;
            }
            match until.checked_duration_since(now) {
                Some(left) if !left.is_zero() => std::thread::park_timeout(left),
                _ => return None,
            }
            break;
        }
    }
}

/// `py.detach(f)`, the exit hook waiting for it until the GIL is back. Once the
/// interpreter is exiting, a thread that may not take the GIL back hands what `f`
/// returned to `abandon` and waits for the process to end.
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
        let waiter = completer
            .get()
            .event_loop
            .call_method0(py, intern!(py, "create_future"))?;
        let (completer, wake) = (completer.unbind(), waiter.clone_ref(py));
        h.on_ready(move || completer.get().push(wake));
        Ok(Pending {
            call: Box::new(h),
            waiter,
        })
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

/// The waiters of one event loop's calls that returned, queued from any thread without
/// the GIL; the loop reads `fileno()` and sets the waiters `drain()` gives.
#[pyclass(frozen)]
pub struct Completer {
    event_loop: Py<PyAny>,
    /// Waiters to set done, and whether a wake-up byte is on its way.
    queue: Mutex<(Vec<Py<PyAny>>, bool)>,
    wake: UnixStream,
    woken: UnixStream,
}

impl Completer {
    fn push(&self, waiter: Py<PyAny>) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.0.push(waiter);
        if !std::mem::replace(&mut queue.1, true) {
            drop(queue);
            // Full socket buffer: a wake-up is pending anyway.
            let _ = (&self.wake).write(&[0]);
        }
    }
}

#[pymethods]
impl Completer {
    #[new]
    fn new(event_loop: Py<PyAny>) -> PyResult<Completer> {
        let (wake, woken) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        woken.set_nonblocking(true)?;
        let queue = Mutex::new((Vec::new(), false));
        Ok(Completer {
            event_loop,
            queue,
            wake,
            woken,
        })
    }

    fn fileno(&self) -> i32 {
        self.woken.as_raw_fd()
    }

    fn drain(&self) -> Vec<Py<PyAny>> {
        while matches!((&self.woken).read(&mut [0; 64]), Ok(n) if n > 0) {}
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.1 = false;
        std::mem::take(&mut queue.0)
    }
}
