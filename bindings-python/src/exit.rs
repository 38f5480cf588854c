//! Exiting the interpreter while delayq's threads still run.
//!
//! Once CPython finalizes, a thread that takes the GIL is terminated (bpo-36427; 3.14
//! hangs it instead), and unwinding through Rust frames aborts the process. The `atexit`
//! hook registered at import runs before that, and:
//! - marks the interpreter as exiting: [`attach`] then runs nothing, and a sync call in
//!   another thread never takes the GIL back ([`Detached`]: what it took goes back, and
//!   the thread waits for the process to end, as a daemon thread blocked in C does);
//! - closes every live client (their tasks stop, a blocked `take` ends at once);
//! - waits, the GIL released, for the threads already in Python through [`attach`] (a
//!   running `consume` handler) and the sync calls that started before.
//!
//! The thread that runs the hook goes on as usual (later hooks may use delayq).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::thread::{self, ThreadId};

use pyo3::prelude::*;

/// What a skipped call into Python reports.
pub fn exiting<T>() -> Result<T, String> {
    Err("the Python interpreter is exiting".to_owned())
}

struct Gate {
    /// The thread that ran the hook, once it ran.
    exiting: Option<ThreadId>,
    /// Threads in Python, or on their way to take the GIL, that the hook waits for.
    inside: usize,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    exiting: None,
    inside: 0,
});
static LEFT: Condvar = Condvar::new();

thread_local! {
    /// How deep this thread is in [`attach`]: a sync call made from there (a `consume`
    /// handler that acks) is already waited for.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

fn gate() -> MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A thread the exit hook waits for (None once the hook ran).
struct Inside(());

impl Inside {
    fn enter() -> Option<Inside> {
        let mut gate = gate();
        if gate.exiting.is_some() {
            return None;
        }
        gate.inside += 1;
        Some(Inside(()))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let mut gate = gate();
        gate.inside -= 1;
        if gate.inside == 0 {
            LEFT.notify_all();
        }
    }
}

/// Leaves [`attach`] (one level).
struct Depth;

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Runs `f` one level deeper in [`attach`], if the hook has not run.
fn inside<R>(f: impl FnOnce() -> R) -> Option<R> {
    let _inside = Inside::enter()?;
    DEPTH.with(|d| d.set(d.get() + 1));
    let _depth = Depth;
    Some(f())
}

/// `Python::attach(f)` for a thread of the runtime; None (and `f` not run) once the
/// interpreter is exiting. (`try_attach` also declines once CPython finalizes, where it
/// can tell: `Py_IsFinalizing` is not in the limited API before 3.13.)
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    inside(|| Python::try_attach(f)).flatten()
}

/// Polls `fut`, which may enter Python, as [`attach`] does: it ends with [`exiting`]
/// once the interpreter is exiting.
pub async fn polled<T>(fut: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        inside(|| fut.as_mut().poll(cx)).unwrap_or_else(|| Poll::Ready(exiting()))
    })
    .await
}

/// A sync call with the GIL released, from its start until the thread has the GIL back
/// or has given up taking it. The exit hook waits for one that started before it ran.
pub struct Detached {
    _inside: Option<Inside>,
}

impl Detached {
    pub fn enter() -> Detached {
        Detached {
            _inside: Inside::enter(),
        }
    }

    /// Whether the thread may take the GIL back: not once the interpreter is exiting,
    /// unless it runs the exit hook or is one the hook waits for (in [`attach`]).
    pub fn may_return(&self) -> bool {
        let me = thread::current().id();
        DEPTH.with(Cell::get) > 0 || gate().exiting.is_none_or(|t| t == me)
    }
}

/// For a thread that must not take the GIL back: waits for the process to end.
pub fn wait_for_the_end() -> ! {
    loop {
        thread::park();
    }
}

static CLIENTS: Mutex<BTreeMap<u64, delayq::Client>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

fn clients() -> MutexGuard<'static, BTreeMap<u64, delayq::Client>> {
    CLIENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A client the exit hook closes, as long as this lives.
pub struct Tracked(u64);

impl Tracked {
    pub fn new(client: &delayq::Client) -> Tracked {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        clients().insert(id, client.clone());
        Tracked(id)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        clients().remove(&self.0);
    }
}

/// The `atexit` hook.
#[pyfunction]
fn at_exit(py: Python<'_>) {
    gate().exiting = Some(thread::current().id());
    for client in std::mem::take(&mut *clients()).values() {
        client.close();
    }
    py.detach(|| {
        let mut gate = gate();
        while gate.inside > 0 {
            gate = LEFT.wait(gate).unwrap_or_else(PoisonError::into_inner);
        }
    });
}

/// Registers the exit hook (at import).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}
