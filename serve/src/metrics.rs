//! `/metrics`: Prometheus text format, written with `prometheus-client` from core's
//! counters (`delayq::metrics`, this process's events) and the queues' counts in Redis
//! (read at each scrape). Names and labels are listed in docs/serve.md.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::api::{delayed_counts, reliable_counts, Counts, DelayedCounts};
use crate::state::AppState;

/// What one scrape reports.
#[derive(Debug)]
struct Scrape {
    reliable: Vec<(String, Option<CountsRow>)>,
    delayed: Vec<(String, Option<CountsRow>)>,
    core: delayq::metrics::Snapshot,
}

#[derive(Debug)]
struct CountsRow(Vec<(&'static str, u64)>);

impl From<Counts> for CountsRow {
    fn from(c: Counts) -> Self {
        CountsRow(vec![
            ("delayed", c.delayed),
            ("ready", c.ready),
            ("in_flight", c.in_flight),
            ("dead", c.dead),
        ])
    }
}

impl From<DelayedCounts> for CountsRow {
    fn from(c: DelayedCounts) -> Self {
        CountsRow(vec![
            ("delayed", c.delayed),
            ("ready", c.ready),
            ("corrupt", c.corrupt),
        ])
    }
}

type Labels = Vec<(&'static str, String)>;

fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, &delayq::metrics::HistogramSnapshot)],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        // prometheus-client takes per-bucket counts and adds them up itself.
        let mut buckets = Vec::with_capacity(h.buckets.len() + 1);
        let mut prev = 0;
        for (bound, cumulative) in &h.buckets {
            buckets.push((*bound, cumulative - prev));
            prev = *cumulative;
        }
        buckets.push((f64::MAX, h.count - prev));
        family
            .encode_family(labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                h.sum_seconds,
                h.count,
                &buckets,
                None,
            )?;
    }
    Ok(())
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        {
            let mut family = encoder.encode_descriptor(
                "delayq_queue_messages",
                "Messages of a queue in Redis, by state (read at scrape time)",
                None,
                MetricType::Gauge,
            )?;
            for (kind, list) in [("reliable", &self.reliable), ("delayed", &self.delayed)] {
                for (name, counts) in list {
                    for (state, n) in counts.iter().flat_map(|c| c.0.iter()) {
                        let labels: Labels = vec![
                            ("queue", name.clone()),
                            ("kind", kind.into()),
                            ("state", (*state).into()),
                        ];
                        ConstGauge::new(*n as i64).encode(family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "delayq_queue_up",
                "1 when the queue's counts could be read at this scrape, else 0",
                None,
                MetricType::Gauge,
            )?;
            for (kind, list) in [("reliable", &self.reliable), ("delayed", &self.delayed)] {
                for (name, counts) in list {
                    let labels: Labels = vec![("queue", name.clone()), ("kind", kind.into())];
                    ConstGauge::new(counts.is_some() as i64)
                        .encode(family.encode_family(&labels)?)?;
                }
            }
        }
        type Pick = fn(&delayq::metrics::QueueSnapshot) -> u64;
        let counters: [(&str, &str, Pick); 6] = [
            (
                "delayq_offered",
                "Messages offered by this process (de-duplicated offers not counted)",
                |q| q.offered,
            ),
            (
                "delayq_delivered",
                "Messages received (reliable) or taken (delayed) by this process",
                |q| q.delivered,
            ),
            (
                "delayq_acked",
                "Deliveries acked by this process while their lease was held",
                |q| q.acked,
            ),
            (
                "delayq_nacked",
                "Deliveries nacked by this process for a retry",
                |q| q.nacked,
            ),
            (
                "delayq_dead",
                "Messages buried by this process: nacked, or their lease ended, on the last attempt",
                |q| q.dead,
            ),
            (
                "delayq_transfer_errors",
                "Transfer passes of this process that failed",
                |q| q.transfer_errors,
            ),
        ];
        for (name, help, pick) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for q in &self.core.queues {
                let labels: Labels =
                    vec![("queue", q.name.clone()), ("kind", q.kind.as_str().into())];
                ConstCounter::new(pick(q)).encode(family.encode_family(&labels)?)?;
            }
        }
        let lateness: Vec<(Labels, _)> = self
            .core
            .queues
            .iter()
            .filter(|q| q.kind == delayq::metrics::QueueKind::Reliable)
            .map(|q| (vec![("queue", q.name.clone())], &q.lateness))
            .collect();
        histogram(
            &mut encoder,
            "delayq_lateness_seconds",
            "From a message's due time to its receipt by a consumer in this process (server clock)",
            &lateness,
        )?;
        let transfer: Vec<(Labels, _)> = self
            .core
            .queues
            .iter()
            .filter(|q| q.transfer_duration.count > 0)
            .map(|q| {
                (
                    vec![("queue", q.name.clone()), ("kind", q.kind.as_str().into())],
                    &q.transfer_duration,
                )
            })
            .collect();
        histogram(
            &mut encoder,
            "delayq_transfer_pass_duration_seconds",
            "Duration of each transfer pass of this process's transfer tasks",
            &transfer,
        )?;
        for (name, help, n) in [
            (
                "delayq_connection_errors",
                "Errors of kind connection seen by core in this process",
                self.core.connection_errors,
            ),
            (
                "delayq_timeouts",
                "Errors of kind timeout seen by core in this process",
                self.core.timeouts,
            ),
        ] {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(n).encode(family)?;
        }
        Ok(())
    }
}

/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let (reliable, delayed) = state.known();
    let reliable = futures_util::future::join_all(reliable.into_iter().map(|name| {
        let state = &state;
        async move {
            let c = reliable_counts(state, &name)
                .await
                .ok()
                .map(CountsRow::from);
            (name, c)
        }
    }))
    .await;
    let delayed = futures_util::future::join_all(delayed.into_iter().map(|name| {
        let state = &state;
        async move {
            let c = delayed_counts(state, &name).await.ok().map(CountsRow::from);
            (name, c)
        }
    }))
    .await;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        reliable,
        delayed,
        core: delayq::metrics::snapshot(),
    }));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("write to a String");
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}
