//! Bridging core calls to Python, once for every method: blocking (the GIL released,
//! signals checked every 50 ms) or awaitable. A call that takes from a queue goes through
//! core's [`Handover`], which gives back what nobody claimed; this only says "claimed" or
//! "gone".
//!
//! An awaited call wakes its asyncio task without entering Python from the runtime: the
//! outcome is queued for the task's loop, and the first outcome of a batch writes a byte to
//! a socket the loop watches ([`Completer`]); the loop then hands over every queued
//! outcome in one callback. So a runtime thread never waits for the GIL, many futures
//! complete per wake-up, and nothing enters Python while the interpreter exits.

use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use delayq::handover::{Claim, Handover, Taken, TakenValue};
use pyo3::exceptions::{PyBaseException, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{intern, IntoPyObjectExt};

use crate::convert::Bytes;
use crate::error::to_py;
use crate::exit;
use crate::reliable_queue::Delivery;

/// How long a blocking call waits with the GIL released before checking for signals.
const SLICE: Duration = Duration::from_millis(50);

/// How long a blocking call yields before it parks (see `poll_for`).
const SPIN: Duration = Duration::from_micros(50);

pub fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// What a call hands to Python.
pub trait Outcome: Taken {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
}

/// The outcome of a call that takes nothing from a queue: nothing to give back.
pub struct Plain<T>(T);

impl<T: Send + 'static> Taken for Plain<T> {
    fn give_back(self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(async {})
    }
}

impl<T: for<'py> IntoPyObject<'py> + Send + 'static> Outcome for Plain<T> {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.0.into_py_any(py)
    }
}

impl Outcome for Option<TakenValue> {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.map(|t| Bytes(t.value)).into_py_any(py)
    }
}

impl Outcome for Option<delayq::Delivery> {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.map(|inner| Delivery { inner }).into_py_any(py)
    }
}

impl Outcome for Vec<delayq::Delivery> {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let list: Vec<Delivery> = self.into_iter().map(|inner| Delivery { inner }).collect();
        list.into_py_any(py)
    }
}

/// A call made for Python: a core future, or a [`Taking`].
pub trait Call: Sized {
    /// Blocks until its outcome, the GIL released.
    fn block(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
    /// Its awaitable, on the running event loop.
    fn start(self, py: Python<'_>) -> PyResult<Awaiting>;
}

impl<T, F> Call for F
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    fn block(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        block(py, self)?.into_py_any(py)
    }

    fn start(self, py: Python<'_>) -> PyResult<Awaiting> {
        let handle = runtime().handle().clone();
        Awaiting::new(py, Handover::start(handle, async { self.await.map(Plain) }))
    }
}

/// A call that takes from a queue (`take`, `receive`, `receive_many`), already started.
pub struct Taking<T: Taken>(pub Handover<T>);

impl<T: Outcome> Call for Taking<T> {
    fn block(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        claim_blocking(py, self.0)?.into_py(py)
    }

    fn start(self, py: Python<'_>) -> PyResult<Awaiting> {
        Awaiting::new(py, self.0)
    }
}

/// Waits for `h`'s outcome with the GIL released and claims it. A signal (raised here
/// also when it arrived while the outcome was on its way) gives the outcome back.
pub fn claim_blocking<T: Taken>(py: Python<'_>, h: Handover<T>) -> PyResult<T> {
    let give_back = || runtime().block_on(h.give_back());
    let ready = wait(
        py,
        async {
            h.ready().await;
            Ok::<_, delayq::Error>(())
        },
        give_back,
    );
    if let Err(e) = ready.and_then(|()| py.check_signals()) {
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
/// interpreter is exiting, see `exit`) runs `on_exit` and waits for the process to end.
fn wait<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = delayq::Result<T>> + Send,
    on_exit: impl FnOnce() + Send,
) -> PyResult<T> {
    let mut fut = std::pin::pin!(fut);
    let mut on_exit = Some(on_exit);
    loop {
        let step = detach(
            py,
            || poll_for(fut.as_mut()),
            |_| on_exit.take().map_or((), |f| f()),
        );
        match step {
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
    struct Unpark {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.woken.store(true, Ordering::Release);
            self.thread.unpark();
        }
    }
    let _context = runtime().enter();
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(unpark.clone());
    let until = Instant::now() + SLICE;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            return Some(out);
        }
        let spin_until = Instant::now() + SPIN;
        while !unpark.woken.swap(false, Ordering::Acquire) {
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

/// A handover seen from the awaitable: claimed or given up.
trait Claimable: Send + Sync {
    /// None while core's call runs.
    fn claim(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>>;
    fn give_up(&self);
}

impl<T: Outcome> Claimable for Handover<T> {
    fn claim(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>> {
        match Handover::claim(self) {
            Claim::Pending => None,
            Claim::Ready(outcome) => Some(outcome.map_err(to_py).and_then(|v| v.into_py(py))),
            Claim::Ended => Some(Err(PyRuntimeError::new_err(
                "cannot reuse an already awaited call",
            ))),
        }
    }

    fn give_up(&self) {
        Handover::give_up(self)
    }
}

/// The awaitable of every `*_async` call. The awaiting task waits on `waiter`, an asyncio
/// future of its loop done once core's call returned, then claims the outcome: the
/// coroutine resumes with it at once. Cancelled, closed or dropped before, the call is
/// given up (core gives back what it took).
#[pyclass(module = "delayq", frozen)]
pub struct Awaiting {
    call: Box<dyn Claimable>,
    waiter: Py<PyAny>,
}

impl Awaiting {
    fn new<T: Outcome>(py: Python<'_>, h: Handover<T>) -> PyResult<Awaiting> {
        let event_loop = pyo3_async_runtimes::tokio::get_current_loop(py)?;
        let waiter = event_loop
            .call_method0(intern!(py, "create_future"))?
            .unbind();
        let (completer, wake) = (completer(&event_loop)?, waiter.clone_ref(py));
        h.on_ready(move || completer.get().push(wake));
        Ok(Awaiting {
            call: Box::new(h),
            waiter,
        })
    }
}

#[pymethods]
impl Awaiting {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Yields the future to wait on until the outcome is ready, then returns the outcome
    /// (raises `StopIteration(value)`, or core's error).
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.call.claim(py) {
            Some(outcome) => Err(PyStopIteration::new_err((outcome?,))),
            None => {
                // What asyncio's own futures do when awaited: the task waits on it.
                let waiter = self.waiter.bind(py);
                waiter.setattr(intern!(py, "_asyncio_future_blocking"), true)?;
                Ok(waiter.clone().unbind())
            }
        }
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
        self.call.give_up();
        let exc = match val {
            _ if typ.is_instance_of::<PyBaseException>() => typ.clone(),
            Some(v) if v.is_instance(typ)? => v.clone(),
            Some(v) if !v.is_none() => typ.call1((v,))?,
            _ => typ.call0()?,
        };
        Err(PyErr::from_value(exc))
    }

    /// The awaiting coroutine was closed: gives the call up.
    fn close(&self) {
        self.call.give_up();
    }
}

/// Wakes the tasks of one event loop whose calls returned: waiters queued from any thread
/// without the GIL, done on the loop's thread by one reader callback per batch.
#[pyclass(frozen)]
struct Completer {
    /// Waiters to set done, and whether a wake-up byte is on its way.
    queue: Mutex<(Vec<Py<PyAny>>, bool)>,
    wake: UnixStream,
    woken: UnixStream,
}

impl Completer {
    fn push(&self, waiter: Py<PyAny>) {
        let wake = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.0.push(waiter);
            !std::mem::replace(&mut queue.1, true)
        };
        if wake {
            // Full socket buffer: a wake-up is pending anyway.
            let _ = (&self.wake).write(&[0]);
        }
    }
}

#[pymethods]
impl Completer {
    /// The loop's reader callback.
    fn __call__(&self, py: Python<'_>) {
        while matches!((&self.woken).read(&mut [0; 64]), Ok(n) if n > 0) {}
        let waiters = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.1 = false;
            std::mem::take(&mut queue.0)
        };
        for waiter in waiters {
            let waiter = waiter.bind(py);
            // Done already: the task was cancelled.
            let woken = waiter.call_method0(intern!(py, "done")).and_then(|done| {
                match done.is_truthy()? {
                    true => Ok(()),
                    false => waiter
                        .call_method1(intern!(py, "set_result"), (py.None(),))
                        .map(drop),
                }
            });
            if let Err(e) = woken {
                e.write_unraisable(py, Some(waiter));
            }
        }
    }
}

thread_local! {
    /// The last loop of this thread and its completer.
    static LAST: RefCell<Option<(Py<PyAny>, Py<Completer>)>> = const { RefCell::new(None) };
}

/// The completer of `event_loop`, made and registered with it on first use.
fn completer(event_loop: &Bound<'_, PyAny>) -> PyResult<Py<Completer>> {
    let py = event_loop.py();
    let last = LAST.with_borrow(|last| match last {
        Some((l, c)) if l.is(event_loop) => Some(c.clone_ref(py)),
        _ => None,
    });
    if let Some(c) = last {
        return Ok(c);
    }
    static ALL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let all = ALL.get_or_try_init(py, || {
        let weak = py.import("weakref")?.getattr("WeakKeyDictionary")?;
        PyResult::Ok(weak.call0()?.unbind())
    })?;
    let c = match all.bind(py).call_method1("get", (event_loop,))? {
        c if !c.is_none() => c.cast_into::<Completer>()?.unbind(),
        _ => {
            let (wake, woken) = UnixStream::pair()?;
            wake.set_nonblocking(true)?;
            woken.set_nonblocking(true)?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&woken);
            let c = Py::new(
                py,
                Completer {
                    queue: Mutex::new((Vec::new(), false)),
                    wake,
                    woken,
                },
            )?;
            event_loop.call_method1("add_reader", (fd, c.clone_ref(py)))?;
            all.bind(py).set_item(event_loop, c.clone_ref(py))?;
            c
        }
    };
    let remembered = (event_loop.clone().unbind(), c.clone_ref(py));
    LAST.with_borrow_mut(|last| *last = Some(remembered));
    Ok(c)
}

/// Runs `f` inside the runtime (core's `Client::connect` captures the runtime it runs on).
pub fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _guard = runtime().enter();
    f()
}

/// Writes a `#[pymethods]` block in which each `fn name / name_async(&self, args) = call;`
/// is a blocking method and its awaitable twin making the same [`Call`], followed by the
/// class's other methods.
macro_rules! twins {
    (impl $ty:ident {
        $(
            $(#[doc = $doc:literal])*
            $(#[pyo3($($opt:tt)*)])?
            fn $name:ident / $name_async:ident(&$self:ident $(, $arg:ident: $argty:ty)* $(,)?) = $call:expr;
        )*
    } $($rest:tt)*) => {
        #[pyo3::pymethods]
        impl $ty {
            $(
                $(#[doc = $doc])*
                $(#[pyo3($($opt)*)])?
                fn $name(&$self, py: pyo3::Python<'_> $(, $arg: $argty)*) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                    $crate::runtime::Call::block($call, py)
                }

                #[doc = concat!("Awaitable `", stringify!($name), "`.")]
                $(#[pyo3($($opt)*)])?
                fn $name_async(&$self, py: pyo3::Python<'_> $(, $arg: $argty)*) -> pyo3::PyResult<$crate::runtime::Awaiting> {
                    $crate::runtime::Call::start($call, py)
                }
            )*
            $($rest)*
        }
    };
}
pub(crate) use twins;
