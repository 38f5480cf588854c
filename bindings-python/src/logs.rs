//! Core's logs on Python's `logging`. Each record of core's `tracing` (a transfer task
//! that keeps failing, a value given back) goes to the logger `delayq.<module>` (a child
//! of `delayq`; `delayq.redis...` for the crates core uses), from core's own `delayq-logs`
//! thread and through `exit::attach`, so that nothing enters Python while it exits.
//! Core forwards what the logger `delayq` would show: its level is read at import, at
//! each `Client`, and by `delayq.set_log_level`.

use delayq::logs::{LogLevel, LogRecord};
use pyo3::prelude::*;

use crate::exit;

/// Installs the forwarding (once, at import).
pub fn install(py: Python<'_>) -> PyResult<()> {
    delayq::logs::forward(|record| {
        exit::attach(|py| {
            if let Err(e) = emit(py, &record) {
                e.write_unraisable(py, None);
            }
        });
    });
    follow_log_level(py)
}

fn emit(py: Python<'_>, record: &LogRecord) -> PyResult<()> {
    let module = record
        .target
        .strip_prefix("delayq")
        .unwrap_or(&record.target);
    let name = format!(
        "delayq.{}",
        module.trim_start_matches("::").replace("::", ".")
    );
    let level = match record.level {
        LogLevel::Error => 40,
        LogLevel::Warn => 30,
        LogLevel::Info => 20,
        LogLevel::Debug | LogLevel::Trace => 10,
    };
    let logger = py
        .import("logging")?
        .call_method1("getLogger", (name.trim_end_matches('.'),))?;
    logger.call_method1("log", (level, &record.message))?;
    Ok(())
}

/// Sets the level of the logger `delayq` (`logging.DEBUG`, `"WARNING"`, ...) and has core
/// forward what it lets through. Core's logs (a transfer task that keeps failing, a value
/// given back) go to `logging` under `delayq.<module>`; core follows the effective level
/// of `delayq` read at import and at each new `Client`: call this (rather than
/// `setLevel`) to change it later.
#[pyfunction]
pub fn set_log_level(py: Python<'_>, level: &Bound<'_, PyAny>) -> PyResult<()> {
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("delayq",))?;
    logger.call_method1("setLevel", (level,))?;
    follow_log_level(py)
}

/// Has core forward the records the logger `delayq` lets through at its effective level
/// (trace too below `logging.DEBUG`).
pub fn follow_log_level(py: Python<'_>) -> PyResult<()> {
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("delayq",))?;
    let level: i64 = logger.call_method0("getEffectiveLevel")?.extract()?;
    delayq::logs::set_max_level(match level {
        ..=9 => Some(LogLevel::Trace),
        10 => Some(LogLevel::Debug),
        11..=20 => Some(LogLevel::Info),
        21..=30 => Some(LogLevel::Warn),
        31..=40 => Some(LogLevel::Error),
        _ => None,
    });
    Ok(())
}
