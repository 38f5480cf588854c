//! The native half of delayq's Python binding (`delayq._delayq`): handles on core's
//! client and queues whose calls convert types, bridge blocking and async calls
//! (runtime.rs), map errors (error.rs) and keep the interpreter's exit safe (exit.rs).
//! The classes users see, their docstrings and signatures are Python's (`delayq/_api.py`);
//! everything else lives in core.

mod client;
mod convert;
mod delayed_queue;
mod error;
mod exit;
mod logs;
mod reliable_queue;
mod runtime;

use pyo3::prelude::*;

use crate::convert::Obj;

/// Packs an entry the way Redisson does (`struct.pack('Bc0Lc0', ...)`); the id and the
/// value are bytes (or `str`, UTF-8), as values are everywhere.
#[pyfunction]
fn pack_entry(id: Obj<'_>, value: Obj<'_>) -> PyResult<Vec<u8>> {
    let id = convert::bytes_like(&id, "id", "id")?;
    delayq::codec::pack(&id, &convert::value(&value)?).map_err(error::to_py)
}

/// Splits a packed entry (bytes, or a `str` as UTF-8) into `(id, value)`.
#[pyfunction]
fn unpack_entry(packed: Obj<'_>) -> PyResult<(Vec<u8>, Vec<u8>)> {
    let packed = convert::bytes_like(&packed, "packed", "packed")?;
    let (id, value) = delayq::codec::unpack(&packed).map_err(|e| error::invalid(e.to_string()))?;
    Ok((id.to_vec(), value.to_vec()))
}

/// The Lua source of the offer script (for benchmarks against other clients).
#[pyfunction]
fn offer_script_source() -> String {
    delayq::offer_script_source()
}

/// This process's counters (core's `metrics::snapshot`) as JSON; `delayq.metrics()` parses it.
#[pyfunction]
fn metrics_json() -> String {
    delayq::metrics::snapshot().to_json()
}

#[pymodule]
fn _delayq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<delayed_queue::DelayedQueue>()?;
    m.add_class::<delayed_queue::TakeIter>()?;
    m.add_class::<reliable_queue::ReliableQueue>()?;
    m.add_class::<reliable_queue::Delivery>()?;
    m.add_class::<reliable_queue::ReceiveIter>()?;
    m.add_class::<runtime::Pending>()?;
    m.add_class::<runtime::Completer>()?;
    m.add_class::<runtime::Reply>()?;
    m.add_function(wrap_pyfunction!(pack_entry, m)?)?;
    m.add_function(wrap_pyfunction!(unpack_entry, m)?)?;
    m.add_function(wrap_pyfunction!(offer_script_source, m)?)?;
    m.add_function(wrap_pyfunction!(metrics_json, m)?)?;
    m.add_function(wrap_pyfunction!(logs::set_max_level, m)?)?;
    // The defaults the Python layer's signatures show.
    let scheduler = delayq::SchedulerOptions::default();
    m.add("SCHEDULER", scheduler.enabled)?;
    let interval = scheduler.reconcile_interval.as_secs_f64();
    m.add("RECONCILE_INTERVAL", interval)?;
    let timeout = delayq::Durability::DEFAULT_TIMEOUT.as_secs_f64();
    m.add("DURABILITY_TIMEOUT", timeout)?;
    m.add("DEAD_LETTERS_LIMIT", delayq::DEAD_LETTERS_LIMIT)?;
    m.add("CONCURRENCY", 1)?;
    exit::register(m)?;
    logs::install();
    Ok(())
}
