//! The one mapping of core errors to Python exceptions (defined in `delayq/_errors.py`).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The Python exception for a core error.
pub fn to_py(e: delayq::Error) -> PyErr {
    let name = match e.kind() {
        delayq::ErrorKind::InvalidArgument => "InvalidArgument",
        delayq::ErrorKind::Connection => "ConnectionError",
        delayq::ErrorKind::Timeout => "TimeoutError",
        delayq::ErrorKind::WrongType => "WrongTypeError",
        delayq::ErrorKind::Closed => "ClosedError",
        delayq::ErrorKind::Server => "ServerError",
    };
    Python::attach(|py| {
        let class = py.import("delayq._errors").and_then(|m| m.getattr(name));
        match class.and_then(|c| Ok(c.cast_into::<PyType>()?)) {
            Ok(class) => PyErr::from_type(class, e.to_string()),
            Err(_) => PyRuntimeError::new_err(e.to_string()),
        }
    })
}

/// An invalid-argument error raised from the binding's own conversions.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    to_py(delayq::Error::InvalidArgument(msg.into()))
}

/// A handler's exception as Python prints it (its traceback, then itself): what core logs
/// of a failed handler.
pub fn described(py: Python<'_>, e: &PyErr) -> String {
    let trace = e.traceback(py).and_then(|t| t.format().ok());
    format!("{}{e}", trace.unwrap_or_default())
}
