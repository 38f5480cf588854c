//! Core's logs on Python's `logging`: each record of core's `tracing` goes, from core's
//! `delayq-logs` thread and through `exit::attach` (nothing enters Python while it exits),
//! to `delayq._logs._emit`, which names the logger. Core forwards what the logger `delayq`
//! lets through: `_logs` tells it the logger's level (`set_max_level`).

use delayq::logs::LogLevel;
use pyo3::prelude::*;

use crate::exit;

/// Installs the forwarding (once, at import).
pub fn install() {
    delayq::logs::forward(|record| {
        exit::attach(|py| {
            let level = match record.level {
                LogLevel::Error => 40,
                LogLevel::Warn => 30,
                LogLevel::Info => 20,
                LogLevel::Debug | LogLevel::Trace => 10,
            };
            let args = (&record.target, level, &record.message);
            let emitted = py
                .import("delayq._logs")
                .and_then(|m| m.call_method1("_emit", args));
            if let Err(e) = emitted {
                e.write_unraisable(py, None);
            }
        });
    });
}

/// Has core forward the records a logger at `level` (a `logging` level) lets through
/// (trace too below `logging.DEBUG`).
#[pyfunction]
pub fn set_max_level(level: i64) {
    delayq::logs::set_max_level(match level {
        ..=9 => Some(LogLevel::Trace),
        10 => Some(LogLevel::Debug),
        11..=20 => Some(LogLevel::Info),
        21..=30 => Some(LogLevel::Warn),
        31..=40 => Some(LogLevel::Error),
        _ => None,
    });
}
