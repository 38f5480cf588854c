//! Core's logs ([`delayq::logs`]) forwarded to the facade, which hands them to SLF4J.

use std::sync::Arc;

use delayq::logs::LogLevel;

/// Receives core's log records on the `delayq-logs` thread; implemented by the facade.
#[uniffi::export(foreign)]
pub trait LogSink: Send + Sync {
    /// `level`: 1 error, 2 warn, 3 info, 4 debug, 5 trace; `target` e.g. `delayq::scheduler`.
    fn log(&self, level: u8, target: String, message: String);
}

/// Installs `sink` for the process; false if a forwarder or subscriber was installed already.
#[uniffi::export]
pub fn forward_logs(sink: Arc<dyn LogSink>) -> bool {
    delayq::logs::forward(move |r| sink.log(r.level as u8, r.target, r.message))
}

/// The most detailed level forwarded (as in [`LogSink::log`]; 0: none).
#[uniffi::export]
pub fn set_log_level(level: u8) {
    let levels = [
        LogLevel::Error,
        LogLevel::Warn,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Trace,
    ];
    delayq::logs::set_max_level(
        level
            .checked_sub(1)
            .and_then(|i| levels.get(usize::from(i)).copied()),
    );
}
