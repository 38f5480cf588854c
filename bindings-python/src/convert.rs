//! Python values to core types and back. Validation itself is core's (`delayq::delay`).

use std::convert::Infallible;
use std::time::Duration;

use delayq::delay::Integer;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDelta, PyDeltaAccess, PyFloat, PyInt, PyString};

use crate::error::{invalid, to_py};

/// Bytes out to Python as `bytes` (a plain `Vec<u8>` would become a list).
pub struct Bytes(pub Vec<u8>);

impl<'py> IntoPyObject<'py> for Bytes {
    type Target = PyBytes;
    type Output = Bound<'py, PyBytes>;
    type Error = Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyBytes::new(py, &self.0))
    }
}

/// A value in: `bytes`, `bytearray`, `memoryview` (or any buffer of bytes) or `str` (UTF-8).
pub fn value(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let bytes = if let Ok(b) = obj.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.as_bytes().to_vec()
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        b.to_vec()
    } else if obj.is_instance_of::<pyo3::types::PyMemoryView>() {
        obj.call_method0("tobytes")?
            .cast::<PyBytes>()?
            .as_bytes()
            .to_vec()
    } else {
        return Err(invalid(format!(
            "a value must be bytes, bytearray, memoryview or str, not {}",
            obj.get_type().name()?
        )));
    };
    delayq::delay::check_value(&bytes).map_err(to_py)?;
    Ok(bytes)
}

/// An argument converted where the call knows what it is (see `count`, `timeout_arg`), so
/// that a bad one raises `InvalidArgument` like every other (pyo3's own conversions raise
/// TypeError or OverflowError). `Default` when the caller left it out; such methods spell
/// their defaults in a `text_signature`, since pyo3 can only show literals.
pub enum Arg<'py> {
    Given(Bound<'py, PyAny>),
    Default,
}

impl<'a, 'py> FromPyObject<'a, 'py> for Arg<'py> {
    type Error = Infallible;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        Ok(Arg::Given(obj.to_owned()))
    }
}

/// A Python `int` of any size (it is not checked here: core does that).
fn integer(obj: &Bound<'_, PyAny>) -> PyResult<Integer> {
    match obj.extract::<i64>() {
        Ok(n) => Ok(Integer::Exact(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(if obj.lt(0)? {
            Integer::Below
        } else {
            Integer::Above
        }),
        Err(e) => Err(e),
    }
}

/// Seconds as Python gives them: a whole `int` of any size, or a `float` (or `timedelta`).
enum Seconds {
    Whole(Integer),
    Float(f64),
}

fn seconds(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Seconds> {
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid(format!(
            "{what} must be a number of seconds or a timedelta, not bool"
        )));
    }
    if let Ok(d) = obj.cast::<PyDelta>() {
        let secs = d.get_days() as f64 * 86_400.0
            + d.get_seconds() as f64
            + d.get_microseconds() as f64 / 1e6;
        return Ok(Seconds::Float(secs));
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(Seconds::Whole(integer(obj)?));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Seconds::Float(obj.extract::<f64>()?));
    }
    Err(invalid(format!(
        "{what} must be int, float or timedelta seconds, not {}",
        obj.get_type().name()?
    )))
}

/// A delay in seconds (`int`, `float`, `timedelta`), checked by core.
pub fn delay(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    match seconds(obj, "delay")? {
        Seconds::Whole(n) => delayq::delay::delay_from_secs_integer(n),
        Seconds::Float(s) => delayq::delay::delay_from_secs_f64(s),
    }
    .map_err(to_py)
}

fn timeout_secs(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    match seconds(obj, "timeout")? {
        Seconds::Whole(n) => delayq::delay::timeout_from_secs_integer(n),
        Seconds::Float(s) => delayq::delay::timeout_from_secs_f64(s),
    }
    .map_err(to_py)
}

/// A timeout in seconds, or `None` for no limit.
pub fn timeout(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => timeout_secs(o).map(Some),
    }
}

/// A duration option checked like a timeout (the reconcile interval), or `default`.
pub fn timeout_arg(arg: Arg<'_>, default: Duration) -> PyResult<Duration> {
    match arg {
        Arg::Given(obj) => timeout_secs(&obj),
        Arg::Default => Ok(default),
    }
}

/// A count named `what` (a limit, a concurrency, a number of attempts): an `int` of any
/// size, checked by core; `default` when it was left out.
pub fn count<T: TryFrom<u64>>(arg: Arg<'_>, what: &str, default: T) -> PyResult<T> {
    let obj = match arg {
        Arg::Given(obj) => obj,
        Arg::Default => return Ok(default),
    };
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(invalid(format!(
            "{what} must be an int, not {}",
            obj.get_type().name()?
        )));
    }
    delayq::delay::count_from_integer(integer(&obj)?, what).map_err(to_py)
}

/// An optional duration in seconds (a queue setting): None when left out or None.
pub fn opt_delay(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    obj.filter(|o| !o.is_none()).map(delay).transpose()
}

/// An optional count (a queue setting): None when left out or None.
pub fn opt_count(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<u32>> {
    obj.filter(|o| !o.is_none())
        .map(|o| count(Arg::Given(o.clone()), what, 0))
        .transpose()
}

/// `Name(field=value, ...)` for the `fields` named (space-separated), each value as Python
/// shows it: the `repr` of a data class.
pub fn repr(obj: &Bound<'_, PyAny>, fields: &str) -> PyResult<String> {
    let mut shown = Vec::new();
    for field in fields.split_whitespace() {
        shown.push(format!("{field}={}", obj.getattr(field)?.repr()?));
    }
    Ok(format!("{}({})", obj.get_type().name()?, shown.join(", ")))
}
