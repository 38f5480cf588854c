//! Counters of what this process's queues did, for library users and for `delayq serve`'s
//! `/metrics`.
//!
//! Core increments them where the events happen (an offer script call, a receive, an ack,
//! a nack, a transfer pass, a connection error); nothing here talks to Redis, and nothing
//! depends on a metrics library: [`snapshot`] hands out plain numbers that any exporter
//! (Prometheus, OpenTelemetry, a log line) can turn into its own format.
//!
//! The counters are per process and per queue (kind and name), since the process started;
//! they are not the queue's counts in Redis (those are [`crate::ReliableStats`] and
//! [`crate::DelayedStats`]), and another process's offers are not in them.
//!
//! ```
//! for q in delayq::metrics::snapshot().queues {
//!     println!("{} {}: offered {} acked {}", q.kind, q.name, q.offered, q.acked);
//! }
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Upper bounds (seconds) of the lateness histogram's buckets: from the due time to the
/// moment a consumer received the message.
pub const LATENESS_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// Upper bounds (seconds) of the transfer-pass duration histogram's buckets.
pub const TRANSFER_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

/// Which kind of queue a set of counters belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// A Redisson-compatible [`crate::DelayedQueue`].
    Delayed = 0,
    /// A [`crate::ReliableQueue`].
    Reliable = 1,
}

impl QueueKind {
    /// `delayed` or `reliable`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::Delayed => "delayed",
            QueueKind::Reliable => "reliable",
        }
    }
}

impl std::fmt::Display for QueueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A histogram with fixed buckets, updated without locks.
struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, then one for +Inf (not cumulative).
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = self
            .bounds
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            d.as_micros().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let count = cumulative + self.counts[self.bounds.len()].load(Ordering::Relaxed);
        HistogramSnapshot {
            buckets,
            count,
            sum_seconds: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// The counters of one queue in this process.
struct QueueCounters {
    offered: AtomicU64,
    delivered: AtomicU64,
    acked: AtomicU64,
    nacked: AtomicU64,
    dead: AtomicU64,
    transfer_errors: AtomicU64,
    lateness: Histogram,
    transfer: Histogram,
}

impl QueueCounters {
    fn new() -> Self {
        QueueCounters {
            offered: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            nacked: AtomicU64::new(0),
            dead: AtomicU64::new(0),
            transfer_errors: AtomicU64::new(0),
            lateness: Histogram::new(&LATENESS_BUCKETS),
            transfer: Histogram::new(&TRANSFER_BUCKETS),
        }
    }
}

/// Delayed queues' counters, then reliable queues', by name (looked up by `&str`, so
/// counting an event allocates nothing once the queue has counters).
type Registry = RwLock<[HashMap<String, Arc<QueueCounters>>; 2]>;

/// Per process: a child forked while a thread of its parent held the lock would wait forever.
static QUEUES: crate::process::PerProcess<Registry> =
    crate::process::PerProcess::new(Registry::default);
/// Errors of kind connection and timeout (per process: a forked child counts its own).
#[derive(Default)]
struct ErrorCounts {
    connection: AtomicU64,
    timeouts: AtomicU64,
}
static ERRORS: crate::process::PerProcess<ErrorCounts> =
    crate::process::PerProcess::new(ErrorCounts::default);

fn counters(kind: QueueKind, name: &str) -> Arc<QueueCounters> {
    if let Some(c) = QUEUES.get().read().unwrap_or_else(|e| e.into_inner())[kind as usize].get(name)
    {
        return c.clone();
    }
    QUEUES.get().write().unwrap_or_else(|e| e.into_inner())[kind as usize]
        .entry(name.to_owned())
        .or_insert_with(|| Arc::new(QueueCounters::new()))
        .clone()
}

/// What a queue did, counted by core.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    /// Messages offered (created; a de-duplicated offer is not counted).
    Offered(u64),
    /// Messages handed to a consumer (a reliable receive; a delayed queue's take or poll).
    Delivered(u64),
    /// Deliveries acked (whose lease was still held).
    Acked(u64),
    /// Deliveries nacked that will be retried.
    Nacked(u64),
    /// Messages buried in the dead letters: nacked on their last attempt, or whose lease
    /// ended on it (found by a transfer pass).
    Dead(u64),
    /// A transfer pass that failed.
    TransferError,
}

/// Counts an event of a queue.
pub(crate) fn record(kind: QueueKind, name: &str, event: Event) {
    let c = counters(kind, name);
    let (counter, n) = match event {
        Event::Offered(n) => (&c.offered, n),
        Event::Delivered(n) => (&c.delivered, n),
        Event::Acked(n) => (&c.acked, n),
        Event::Nacked(n) => (&c.nacked, n),
        Event::Dead(n) => (&c.dead, n),
        Event::TransferError => (&c.transfer_errors, 1),
    };
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Records the lateness of received messages (from due time to receipt, server clock, ms).
pub(crate) fn record_lateness(kind: QueueKind, name: &str, late_ms: impl Iterator<Item = i64>) {
    let c = counters(kind, name);
    for ms in late_ms {
        c.lateness.observe(Duration::from_millis(ms.max(0) as u64));
    }
}

/// Records how long one transfer pass took.
pub(crate) fn record_transfer(kind: QueueKind, name: &str, took: Duration) {
    counters(kind, name).transfer.observe(took);
}

/// Counts an error of kind connection or timeout that core saw.
pub(crate) fn record_connection_error(timeout: bool) {
    if timeout {
        ERRORS.get().timeouts.fetch_add(1, Ordering::Relaxed);
    } else {
        ERRORS.get().connection.fetch_add(1, Ordering::Relaxed);
    }
}

/// A histogram as read by [`snapshot`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistogramSnapshot {
    /// (upper bound in seconds, observations at or below it), cumulative, ascending; the
    /// `+Inf` bucket is `count`.
    pub buckets: Vec<(f64, u64)>,
    /// Observations in all.
    pub count: u64,
    /// Sum of the observations, in seconds.
    pub sum_seconds: f64,
}

/// The counters of one queue, as read by [`snapshot`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueSnapshot {
    /// Which kind of queue.
    pub kind: QueueKind,
    /// The queue's name.
    pub name: String,
    /// Messages this process offered (created; de-duplicated offers are not counted).
    pub offered: u64,
    /// Messages this process received (reliable) or took (delayed).
    pub delivered: u64,
    /// Deliveries acked while their lease was held.
    pub acked: u64,
    /// Deliveries nacked for a retry.
    pub nacked: u64,
    /// Messages this process buried in the dead letters: deliveries nacked on their last
    /// attempt, and deliveries whose lease ended on their last attempt, buried by this
    /// process's transfer passes (another process's passes count them there).
    pub dead: u64,
    /// Transfer passes of this process's transfer task that failed.
    pub transfer_errors: u64,
    /// From due time to receipt (reliable queues; server clock).
    pub lateness: HistogramSnapshot,
    /// Duration of each transfer pass of this process's transfer task.
    pub transfer_duration: HistogramSnapshot,
}

/// Every counter of this process, as read by [`snapshot`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Snapshot {
    /// One entry per queue that had an event, sorted by kind and name.
    pub queues: Vec<QueueSnapshot>,
    /// Errors of kind `connection` that core returned or retried.
    pub connection_errors: u64,
    /// Errors of kind `timeout` (a reply that did not come in time).
    pub timeouts: u64,
}

impl Snapshot {
    /// The snapshot as JSON, with the field names above (snake_case), a histogram's
    /// buckets as `[upper bound in seconds, cumulative count]` pairs, and `kind` as
    /// `"delayed"` or `"reliable"`. The Python binding's `delayq.metrics()` is this, parsed.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot is plain numbers and strings")
    }
}

/// Reads every counter of this process.
pub fn snapshot() -> Snapshot {
    let maps = QUEUES.get().read().unwrap_or_else(|e| e.into_inner());
    let kinds = [QueueKind::Delayed, QueueKind::Reliable];
    let mut queues: Vec<QueueSnapshot> = kinds
        .iter()
        .zip(maps.iter())
        .flat_map(|(kind, map)| map.iter().map(move |(name, c)| (*kind, name, c)))
        .map(|(kind, name, c)| QueueSnapshot {
            kind,
            name: name.clone(),
            offered: c.offered.load(Ordering::Relaxed),
            delivered: c.delivered.load(Ordering::Relaxed),
            acked: c.acked.load(Ordering::Relaxed),
            nacked: c.nacked.load(Ordering::Relaxed),
            dead: c.dead.load(Ordering::Relaxed),
            transfer_errors: c.transfer_errors.load(Ordering::Relaxed),
            lateness: c.lateness.snapshot(),
            transfer_duration: c.transfer.snapshot(),
        })
        .collect();
    queues.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    Snapshot {
        queues,
        connection_errors: ERRORS.get().connection.load(Ordering::Relaxed),
        timeouts: ERRORS.get().timeouts.load(Ordering::Relaxed),
    }
}

/// The counters of one queue (all zero when it had no event in this process).
pub fn queue(kind: QueueKind, name: &str) -> QueueSnapshot {
    snapshot()
        .queues
        .into_iter()
        .find(|q| q.kind == kind && q.name == name)
        .unwrap_or_else(|| QueueSnapshot {
            kind,
            name: name.to_owned(),
            offered: 0,
            delivered: 0,
            acked: 0,
            nacked: 0,
            dead: 0,
            transfer_errors: 0,
            lateness: Histogram::new(&LATENESS_BUCKETS).snapshot(),
            transfer_duration: Histogram::new(&TRANSFER_BUCKETS).snapshot(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::new(&LATENESS_BUCKETS);
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(100));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets[0], (0.001, 1));
        assert_eq!(s.buckets[2], (0.005, 2));
        assert_eq!(s.buckets.last().unwrap().1, 2);
        assert!((s.sum_seconds - 100.0035).abs() < 1e-6);
    }

    #[test]
    fn events_are_counted_per_queue() {
        record(QueueKind::Reliable, "metrics-unit", Event::Offered(3));
        record(QueueKind::Reliable, "metrics-unit", Event::Acked(2));
        record(QueueKind::Delayed, "metrics-unit", Event::Offered(1));
        let r = queue(QueueKind::Reliable, "metrics-unit");
        assert_eq!((r.offered, r.acked), (3, 2));
        assert_eq!(queue(QueueKind::Delayed, "metrics-unit").offered, 1);
        assert_eq!(queue(QueueKind::Delayed, "none").offered, 0);
    }

    #[test]
    fn the_json_form_names_every_field() {
        record(QueueKind::Reliable, "metrics-json", Event::Dead(4));
        let v: serde_json::Value = serde_json::from_str(&snapshot().to_json()).unwrap();
        let q = v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == "metrics-json")
            .unwrap();
        assert_eq!(
            (q["kind"].as_str(), q["dead"].as_u64()),
            (Some("reliable"), Some(4))
        );
        assert_eq!(q["lateness"]["buckets"][0][0].as_f64(), Some(0.001));
        assert!(v["connection_errors"].is_u64() && v["timeouts"].is_u64());
    }
}
