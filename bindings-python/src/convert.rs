//! Python values to core types. Validation itself is core's (`delayq::delay`).

use std::time::Duration;

use delayq::delay::{self as check, Integer};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDelta, PyDeltaAccess, PyFloat, PyInt};
use pyo3::types::{PyMemoryView, PyString};

use crate::error::{invalid, to_py};

/// Any Python object passed to a native method.
pub type Obj<'py> = Bound<'py, PyAny>;

/// A value in: `bytes`, `bytearray`, `memoryview` (or any buffer of bytes) or `str` (UTF-8).
pub fn value(obj: &Obj<'_>) -> PyResult<Vec<u8>> {
    let bytes = if let Ok(b) = obj.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.as_bytes().to_vec()
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        b.to_vec()
    } else if obj.is_instance_of::<PyMemoryView>() {
        obj.call_method0("tobytes")?
            .cast::<PyBytes>()?
            .as_bytes()
            .to_vec()
    } else {
        let name = obj.get_type().name()?;
        let msg = format!("a value must be bytes, bytearray, memoryview or str, not {name}");
        return Err(invalid(msg));
    };
    check::check_value(&bytes).map_err(to_py)?;
    Ok(bytes)
}

/// A Python `int` of any size (it is not checked here: core does that).
fn integer(obj: &Obj<'_>) -> PyResult<Integer> {
    match obj.extract::<i64>() {
        Ok(n) => Ok(Integer::Exact(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(match obj.lt(0)? {
            true => Integer::Below,
            false => Integer::Above,
        }),
        Err(e) => Err(e),
    }
}

/// Seconds (a whole `int` of any size, a `float` or a `timedelta`) made a duration by
/// core's `whole` or `float` (the rules of a delay or of a timeout).
fn seconds(
    obj: &Obj<'_>,
    what: &str,
    whole: fn(Integer) -> delayq::Result<Duration>,
    float: fn(f64) -> delayq::Result<Duration>,
) -> PyResult<Duration> {
    if obj.is_instance_of::<PyBool>() {
        let msg = format!("{what} must be a number of seconds or a timedelta, not bool");
        return Err(invalid(msg));
    }
    let secs = if let Ok(d) = obj.cast::<PyDelta>() {
        let days = d.get_days() as f64 * 86_400.0;
        days + d.get_seconds() as f64 + d.get_microseconds() as f64 / 1e6
    } else if obj.is_instance_of::<PyInt>() {
        return whole(integer(obj)?).map_err(to_py);
    } else if obj.is_instance_of::<PyFloat>() {
        obj.extract::<f64>()?
    } else {
        let name = obj.get_type().name()?;
        return Err(invalid(format!(
            "{what} must be int, float or timedelta seconds, not {name}"
        )));
    };
    float(secs).map_err(to_py)
}

/// A delay in seconds (`int`, `float`, `timedelta`), checked by core.
pub fn delay(obj: &Obj<'_>) -> PyResult<Duration> {
    seconds(
        obj,
        "delay",
        check::delay_from_secs_integer,
        check::delay_from_secs_f64,
    )
}

/// A duration checked like a timeout (a timeout, the reconcile interval).
pub fn duration(obj: &Obj<'_>) -> PyResult<Duration> {
    seconds(
        obj,
        "timeout",
        check::timeout_from_secs_integer,
        check::timeout_from_secs_f64,
    )
}

/// A timeout in seconds, or `None` for no limit.
pub fn timeout(obj: Option<Obj<'_>>) -> PyResult<Option<Duration>> {
    obj.map(|o| duration(&o)).transpose()
}

/// An optional delay (a queue setting, a nack's delay): None when None.
pub fn opt_delay(obj: Option<Obj<'_>>) -> PyResult<Option<Duration>> {
    obj.map(|o| delay(&o)).transpose()
}

/// A count named `what` (a limit, a concurrency, a number of attempts): an `int` of any
/// size, checked by core.
pub fn count<T: TryFrom<u64>>(obj: &Obj<'_>, what: &str) -> PyResult<T> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        let name = obj.get_type().name()?;
        return Err(invalid(format!("{what} must be an int, not {name}")));
    }
    check::count_from_integer(integer(obj)?, what).map_err(to_py)
}

/// An optional count (a queue setting): None when None.
pub fn opt_count(obj: Option<Obj<'_>>, what: &str) -> PyResult<Option<u32>> {
    obj.map(|o| count(&o, what)).transpose()
}
