//! Python values to core types and back. Validation itself is core's (`delayq::delay`).

use std::convert::Infallible;
use std::time::Duration;

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

fn seconds(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid(format!(
            "{what} must be a number of seconds or a timedelta, not bool"
        )));
    }
    if let Ok(d) = obj.cast::<PyDelta>() {
        let secs = d.get_days() as f64 * 86_400.0
            + d.get_seconds() as f64
            + d.get_microseconds() as f64 / 1e6;
        return Ok(secs);
    }
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() {
        return obj.extract::<f64>();
    }
    Err(invalid(format!(
        "{what} must be int, float or timedelta seconds, not {}",
        obj.get_type().name()?
    )))
}

/// A delay in seconds (`int`, `float`, `timedelta`), checked by core.
pub fn delay(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    delayq::delay::delay_from_secs_f64(seconds(obj, "delay")?).map_err(to_py)
}

/// A timeout in seconds, or `None` for no limit.
pub fn timeout(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => delayq::delay::timeout_from_secs_f64(seconds(o, "timeout")?)
            .map(Some)
            .map_err(to_py),
    }
}
