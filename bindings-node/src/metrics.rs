//! `metrics()`: core's counters of this process (`delayq::metrics::snapshot`), as plain
//! objects.

use delayq::metrics;
use napi_derive::napi;

/// A histogram: cumulative `buckets` (`le` seconds, observations at or below it),
/// ascending, the `+Inf` bucket being `count`; `sumSeconds` of all observations.
#[napi(object)]
pub struct Histogram {
    pub buckets: Vec<HistogramBucket>,
    pub count: f64,
    pub sum_seconds: f64,
}

/// One bucket of a [`Histogram`].
#[napi(object)]
pub struct HistogramBucket {
    pub le: f64,
    pub count: f64,
}

/// What this process did with one queue since it started (see `docs/node.md`).
#[napi(object)]
pub struct QueueMetrics {
    /// `delayed` or `reliable`.
    pub kind: String,
    pub name: String,
    pub offered: f64,
    pub delivered: f64,
    pub acked: f64,
    pub nacked: f64,
    pub dead: f64,
    pub transfer_errors: f64,
    pub lateness: Histogram,
    pub transfer_duration: Histogram,
}

/// Every counter of this process.
#[napi(object)]
pub struct Metrics {
    pub queues: Vec<QueueMetrics>,
    pub connection_errors: f64,
    pub timeouts: f64,
}

fn histogram(h: metrics::HistogramSnapshot) -> Histogram {
    Histogram {
        buckets: h
            .buckets
            .into_iter()
            .map(|(le, count)| HistogramBucket {
                le,
                count: count as f64,
            })
            .collect(),
        count: h.count as f64,
        sum_seconds: h.sum_seconds,
    }
}

/// This process's counters: per queue offered, delivered, acked, nacked, dead, transfer
/// errors, lateness and transfer-pass histograms; connection errors and timeouts.
#[napi]
pub fn metrics() -> Metrics {
    let s = metrics::snapshot();
    Metrics {
        queues: s
            .queues
            .into_iter()
            .map(|q| QueueMetrics {
                kind: q.kind.as_str().to_owned(),
                name: q.name,
                offered: q.offered as f64,
                delivered: q.delivered as f64,
                acked: q.acked as f64,
                nacked: q.nacked as f64,
                dead: q.dead as f64,
                transfer_errors: q.transfer_errors as f64,
                lateness: histogram(q.lateness),
                transfer_duration: histogram(q.transfer_duration),
            })
            .collect(),
        connection_errors: s.connection_errors as f64,
        timeouts: s.timeouts as f64,
    }
}
