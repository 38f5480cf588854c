//! Exiting the interpreter while delayq's threads still run.
//!
//! Once CPython finalizes, a thread that takes the GIL is terminated with `pthread_exit`
//! (bpo-36427; CPython 3.14 makes it hang instead); with Rust frames on its stack, that
//! unwinding aborts the process. The core's runtime threads enter Python to hand an
//! outcome over to asyncio (`call_soon_threadsafe`), to log and to call `consume`
//! handlers, and a Python thread blocked in a sync call takes the GIL back every 50 ms.
//! `atexit` runs before finalization, while threads may still take the GIL, so the hook
//! registered at import ([`register`]) ends all that:
//!
//! - it marks the interpreter as exiting: from then on [`attach`] runs nothing (a wake-up
//!   that nobody would read is skipped), and a sync call in another thread never takes
//!   the GIL back ([`Detached`]: what it took goes back, and the thread waits for the
//!   process to end, as a daemon thread blocked in C does);
//! - it closes every live client, so their background tasks and calls stop (a blocked
//!   `take` ends at once);
//! - it waits, with the GIL released, until the threads already in Python through
//!   [`attach`] are done (a `consume` handler that runs is waited for), and so are the
//!   sync calls that started before (their slice of at most 50 ms, and giving back what
//!   they took).
//!
//! The thread that runs the hook goes on as usual (later `atexit` hooks may use delayq).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, ThreadId};

use pyo3::prelude::*;

/// What a skipped call into Python reports.
pub const EXITING: &str = "the Python interpreter is exiting";

struct Gate {
    /// The exit hook ran.
    exiting: bool,
    /// The thread that ran it.
    exiting_thread: Option<ThreadId>,
    /// Threads in Python, or on their way to take the GIL, that the hook waits for.
    inside: usize,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    exiting: false,
    exiting_thread: None,
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

/// A thread the exit hook waits for.
pub struct Inside(());

impl Inside {
    /// None once the hook ran.
    fn enter() -> Option<Inside> {
        let mut gate = gate();
        if gate.exiting {
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

struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// `Python::attach(f)` for a thread of the runtime; None (and `f` not run) once the
/// interpreter is exiting. (`try_attach` also declines once CPython finalizes, where it
/// can tell: `Py_IsFinalizing` is not in the limited API before 3.13.)
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    let _inside = Inside::enter()?;
    let _depth = Depth::enter();
    Python::try_attach(f)
}

/// Polls `fut`, which may enter Python, as [`attach`] does: it ends with `Err(EXITING)`
/// once the interpreter is exiting.
pub async fn polled<T>(fut: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let Some(_inside) = Inside::enter() else {
            return std::task::Poll::Ready(Err(EXITING.to_owned()));
        };
        let _depth = Depth::enter();
        fut.as_mut().poll(cx)
    })
    .await
}

/// A sync call with the GIL released (see `runtime::block`), from its start until the
/// thread has the GIL back or has given up taking it. The exit hook waits for one that
/// started before it ran.
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
    /// unless this thread runs the exit hook or is one the hook waits for (a `consume`
    /// handler, in [`attach`], that acks).
    pub fn may_return(&self) -> bool {
        if DEPTH.with(Cell::get) > 0 {
            return true;
        }
        let gate = gate();
        !gate.exiting || gate.exiting_thread == Some(thread::current().id())
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

/// Has the exit hook close `client` (while the returned value lives).
pub fn track(client: &delayq::Client) -> Tracked {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    clients().insert(id, client.clone());
    Tracked(id)
}

impl Drop for Tracked {
    fn drop(&mut self) {
        clients().remove(&self.0);
    }
}

/// The `atexit` hook.
#[pyfunction]
fn at_exit(py: Python<'_>) {
    {
        let mut gate = gate();
        gate.exiting = true;
        gate.exiting_thread = Some(thread::current().id());
    }
    let live = std::mem::take(&mut *clients());
    for client in live.values() {
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
