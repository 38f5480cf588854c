//! The Python binding of delayq: a thin shell over the `delayq` crate. Types are
//! converted here, async is bridged (blocking calls release the GIL; `*_async` methods
//! return awaitables on the core's tokio runtime), errors are mapped once (error.rs).
//! Everything else lives in core.

mod client;
mod convert;
mod delayed_queue;
mod error;
mod exit;
mod logs;
mod reliable_queue;
mod runtime;

use pyo3::prelude::*;

use convert::Bytes;

/// Packs an entry the way Redisson does (`struct.pack('Bc0Lc0', ...)`).
#[pyfunction]
fn pack_entry(id: &[u8], value: &[u8]) -> PyResult<Bytes> {
    Ok(Bytes(delayq::codec::pack(id, value).map_err(error::to_py)?))
}

/// Splits a packed entry into `(id, value)`.
#[pyfunction]
fn unpack_entry(packed: &[u8]) -> PyResult<(Bytes, Bytes)> {
    let (id, value) = delayq::codec::unpack(packed)
        .map_err(|e| error::to_py(delayq::Error::InvalidArgument(e.to_string())))?;
    Ok((Bytes(id.to_vec()), Bytes(value.to_vec())))
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
    m.add_class::<runtime::Awaiting>()?;
    m.add_class::<delayed_queue::DelayedQueue>()?;
    m.add_class::<delayed_queue::DelayedStats>()?;
    m.add_class::<delayed_queue::TakeIter>()?;
    m.add_class::<reliable_queue::ReliableStats>()?;
    m.add_class::<reliable_queue::DeadLetter>()?;
    m.add_class::<reliable_queue::ReliableQueue>()?;
    m.add_class::<reliable_queue::Delivery>()?;
    m.add_class::<reliable_queue::ReliableSettings>()?;
    m.add_class::<reliable_queue::OfferOutcome>()?;
    m.add_function(wrap_pyfunction!(pack_entry, m)?)?;
    m.add_function(wrap_pyfunction!(unpack_entry, m)?)?;
    m.add_function(wrap_pyfunction!(offer_script_source, m)?)?;
    m.add_function(wrap_pyfunction!(metrics_json, m)?)?;
    m.add_function(wrap_pyfunction!(logs::set_log_level, m)?)?;
    exit::register(m)?;
    logs::install(m.py())?;
    Ok(())
}
