//! Exiting the interpreter while delayq's threads still run.
//!
//! Once CPython finalizes, a thread that takes the GIL is terminated (bpo-36427; 3.14
//! hangs it instead), and unwinding through Rust frames aborts the process. The `atexit`
//! hook registered at import runs before that and closes core's [`ExitGate`]: [`attach`]
//! then runs nothing, a sync call in another thread never takes the GIL back (what it took
//! goes back, and the thread waits for the process to end, as a daemon thread blocked in
//! C does), every live client is closed, and the hook waits, the GIL released, for the
//! threads already in Python through [`attach`] (a running `consume` handler) and the sync
//! calls that started before (what awaited calls took and nobody claimed went back first).
//! The thread that runs the hook goes on as usual (later hooks may use delayq).

use delayq::host::exit::ExitGate;
use pyo3::prelude::*;

/// The gate of this interpreter's exit.
pub static GATE: ExitGate = ExitGate::new();

/// What a skipped call into Python reports.
pub fn exiting<T>() -> Result<T, String> {
    Err("the Python interpreter is exiting".to_owned())
}

/// `Python::attach(f)` for a thread of the runtime; None (and `f` not run) once the
/// interpreter is exiting. (`try_attach` also declines once CPython finalizes, where it
/// can tell: `Py_IsFinalizing` is not in the limited API before 3.13.)
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    GATE.enter(|| Python::try_attach(f)).flatten()
}

/// The `atexit` hook. First, while the clients are open, what awaited calls took and left
/// unclaimed goes back (asyncio tasks that will never run again: their loop was closed
/// without cancelling them).
#[pyfunction]
fn at_exit(py: Python<'_>) {
    if delayq::handover::any_started() {
        let unclaimed = delayq::handover::give_back_unclaimed(delayq::bridge::EXIT_LIMIT);
        py.detach(|| crate::runtime::runtime().block_on(unclaimed));
    }
    GATE.close();
    py.detach(|| GATE.wait_until_left());
}

/// Registers the exit hook (at import).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}
