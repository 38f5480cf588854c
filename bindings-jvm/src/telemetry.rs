//! What this process reports: core's logs, forwarded to the facade (which hands them to
//! SLF4J), and core's counters; the facade's `Logs.kt` and `Metrics.kt` wrap them.

use std::sync::Arc;

use delayq::logs::LogLevel;
use delayq::metrics::{HistogramSnapshot, QueueKind, QueueSnapshot, Snapshot};

#[uniffi::remote(Enum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Receives core's log records on the `delayq-logs` thread; implemented by the facade.
#[uniffi::export(foreign)]
pub trait LogSink: Send + Sync {
    fn log(&self, level: LogLevel, target: String, message: String);
}

/// Installs `sink` for the process; false if a forwarder or subscriber was installed already.
#[uniffi::export]
pub fn forward_logs(sink: Arc<dyn LogSink>) -> bool {
    delayq::logs::forward(move |r| sink.log(r.level, r.target, r.message))
}

/// The most detailed level forwarded (none: nothing).
#[uniffi::export]
pub fn set_log_level(level: Option<LogLevel>) {
    delayq::logs::set_max_level(level);
}

#[uniffi::remote(Enum)]
pub enum QueueKind {
    Delayed,
    Reliable,
}

records! {
    #[uniffi::remote(Record)]
    QueueSnapshot {
        kind: QueueKind, name: String, offered: u64, delivered: u64, acked: u64, nacked: u64,
        dead: u64, transfer_errors: u64,
        lateness: HistogramSnapshot, transfer_duration: HistogramSnapshot,
    }
    #[uniffi::remote(Record)]
    Snapshot { queues: Vec<QueueSnapshot>, connection_errors: u64, timeouts: u64 }
    /// A histogram: cumulative counts at or below each upper bound (seconds), ascending.
    #[derive(uniffi::Record)]
    Histogram { bounds: Vec<f64>, counts: Vec<u64>, count: u64, sum_seconds: f64 }
}

// Crosses as a `Histogram`: UniFFI has no tuples for core's (bound, count) buckets.
uniffi::custom_type!(HistogramSnapshot, Histogram, {
    remote,
    lower: |h| {
        let (bounds, counts) = h.buckets.into_iter().unzip();
        Histogram { bounds, counts, count: h.count, sum_seconds: h.sum_seconds }
    },
    try_lift: |h| {
        let buckets = h.bounds.into_iter().zip(h.counts).collect();
        Ok(HistogramSnapshot { buckets, count: h.count, sum_seconds: h.sum_seconds })
    },
});

#[uniffi::export]
pub fn metrics_snapshot() -> Snapshot {
    delayq::metrics::snapshot()
}
