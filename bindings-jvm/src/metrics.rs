//! Core's counters of this process (`delayq::metrics::snapshot`) as records; the facade's
//! `Metrics.snapshot()` wraps them.

/// A histogram: cumulative counts at or below each upper bound (seconds), ascending.
#[derive(Debug, Clone, uniffi::Record)]
pub struct HistogramRecord {
    pub bounds: Vec<f64>,
    pub counts: Vec<i64>,
    pub count: i64,
    pub sum_seconds: f64,
}

/// One queue's counters; see `delayq::metrics::QueueSnapshot`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct QueueMetricsRecord {
    pub kind: String,
    pub name: String,
    pub offered: i64,
    pub delivered: i64,
    pub acked: i64,
    pub nacked: i64,
    pub dead: i64,
    pub transfer_errors: i64,
    pub lateness: HistogramRecord,
    pub transfer_duration: HistogramRecord,
}

/// Every counter of this process; see `delayq::metrics::Snapshot`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct MetricsRecord {
    pub queues: Vec<QueueMetricsRecord>,
    pub connection_errors: i64,
    pub timeouts: i64,
}

fn n(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn histogram(h: delayq::metrics::HistogramSnapshot) -> HistogramRecord {
    let (bounds, counts) = h.buckets.into_iter().map(|(le, c)| (le, n(c))).unzip();
    HistogramRecord {
        bounds,
        counts,
        count: n(h.count),
        sum_seconds: h.sum_seconds,
    }
}

/// This process's counters.
#[uniffi::export]
pub fn metrics_snapshot() -> MetricsRecord {
    let s = delayq::metrics::snapshot();
    MetricsRecord {
        queues: s
            .queues
            .into_iter()
            .map(|q| QueueMetricsRecord {
                kind: q.kind.as_str().to_owned(),
                name: q.name,
                offered: n(q.offered),
                delivered: n(q.delivered),
                acked: n(q.acked),
                nacked: n(q.nacked),
                dead: n(q.dead),
                transfer_errors: n(q.transfer_errors),
                lateness: histogram(q.lateness),
                transfer_duration: histogram(q.transfer_duration),
            })
            .collect(),
        connection_errors: n(s.connection_errors),
        timeouts: n(s.timeouts),
    }
}
