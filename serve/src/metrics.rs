//! `/metrics`: Prometheus text format, written with `prometheus-client` from core's
//! counters (`delayq::metrics`, this process's events) and the queues' counts in Redis
//! (read at each scrape). Names and labels are listed in docs/serve.md.
//!
//! `prometheus-client` writes OpenMetrics 1.0. A scraper that asks for it (`Accept:
//! application/openmetrics-text`, as Prometheus does) gets that; anything else (no
//! `Accept`, `text/plain`, `*/*`) gets the classic Prometheus text format 0.0.4, converted
//! line by line by [`to_prometheus_text`]. Label values are escaped here
//! ([`label_value`]): `prometheus-client` writes them as given.

use std::sync::Arc;

use std::collections::HashMap;

use axum::extract::State;
use axum::http::{header, HeaderMap};
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

/// A label value as the text formats want it (the same rules in Prometheus 0.0.4 and
/// OpenMetrics): `\` as `\\`, `"` as `\"`, a line feed as `\n`. A queue name may hold any
/// of them, and one unescaped would break the whole scrape.
fn label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

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
                            ("queue", label_value(name)),
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
                    let labels: Labels = vec![("queue", label_value(name)), ("kind", kind.into())];
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
                let labels: Labels = vec![
                    ("queue", label_value(&q.name)),
                    ("kind", q.kind.as_str().into()),
                ];
                ConstCounter::new(pick(q)).encode(family.encode_family(&labels)?)?;
            }
        }
        let lateness: Vec<(Labels, _)> = self
            .core
            .queues
            .iter()
            .filter(|q| q.kind == delayq::metrics::QueueKind::Reliable)
            .map(|q| (vec![("queue", label_value(&q.name))], &q.lateness))
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
                    vec![
                        ("queue", label_value(&q.name)),
                        ("kind", q.kind.as_str().into()),
                    ],
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

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header prefers OpenMetrics: it names
/// `application/openmetrics-text` with a quality at least that of `text/plain` (or
/// `text/*`, `*/*`). Prometheus sends `application/openmetrics-text;version=1.0.0,...,
/// text/plain;version=0.0.4;q=0.5,*/*;q=0.1`.
fn wants_openmetrics(accept: Option<&str>) -> bool {
    let (mut open, mut text) = (0.0f32, 0.0f32);
    for range in accept.unwrap_or("").split(',') {
        let mut params = range.split(';');
        let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = params
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse().unwrap_or(0.0));
        match media.as_str() {
            "application/openmetrics-text" => open = open.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    open > 0.0 && open >= text
}

/// OpenMetrics text (as `prometheus-client` writes it) to the Prometheus text format
/// 0.0.4: a counter family is named with its `_total` in `# HELP` and `# TYPE`; `# UNIT`
/// and `# EOF` go, and so do `_created` samples. Sample lines are otherwise the same in
/// both formats (no exemplars are written here). A line feed in a label value is escaped,
/// so every line is one line of the format.
pub(crate) fn to_prometheus_text(open: &str) -> String {
    let types: HashMap<&str, &str> = open
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .collect();
    let mut out = String::with_capacity(open.len());
    for line in open.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment.split_once(' ').unwrap_or((comment, ""));
            if keyword != "HELP" && keyword != "TYPE" {
                continue; // UNIT, EOF
            }
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let suffix = if types.get(name) == Some(&"counter") {
                "_total"
            } else {
                ""
            };
            out.push_str(&format!("# {keyword} {name}{suffix} {tail}\n"));
        } else if !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            let created_of = name
                .strip_suffix("_created")
                .and_then(|family| types.get(family));
            if matches!(created_of, Some(&("counter" | "histogram" | "summary"))) {
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Prometheus text format 0.0.4, or OpenMetrics 1.0 when the `Accept` header asks for it.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200,
        description = "Prometheus text format 0.0.4; OpenMetrics 1.0 when `Accept` asks for `application/openmetrics-text`",
        content((String = "text/plain"), (String = "application/openmetrics-text")))))]
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> impl IntoResponse {
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
    // Core's counters of the queues listed above only: a request refused on a queue this
    // service does not know keeps no handle on it, but core may have counted a pass of the
    // transfer task the handle ran meanwhile, which would otherwise stay as a series of a
    // queue shown nowhere else.
    let mut core = delayq::metrics::snapshot();
    core.queues.retain(|q| {
        let list = if q.kind == delayq::metrics::QueueKind::Reliable {
            &reliable
        } else {
            &delayed
        };
        list.iter().any(|(name, _)| *name == q.name)
    });
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        reliable,
        delayed,
        core,
    }));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("write to a String");
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (kind, text) = if wants_openmetrics(accept) {
        (OPENMETRICS, text)
    } else {
        (PROMETHEUS, to_prometheus_text(&text))
    };
    (
        [(header::CONTENT_TYPE, kind), (header::VARY, "accept")],
        text,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value("plain"), "plain");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn openmetrics_only_when_asked_for() {
        for (accept, open) in [
            (None, false),
            (Some("text/plain"), false),
            (Some("*/*"), false),
            (Some("text/plain;version=0.0.4"), false),
            (Some("application/openmetrics-text"), true),
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                true,
            ),
            (Some("text/plain, application/openmetrics-text;q=0.5"), false),
            (Some("application/openmetrics-text;q=0"), false),
            (Some("Application/OpenMetrics-Text; Version=1.0.0"), true),
        ] {
            assert_eq!(wants_openmetrics(accept), open, "{accept:?}");
        }
    }

    #[test]
    fn openmetrics_converts_to_prometheus_text() {
        let open = "# HELP c_x Things.\n# TYPE c_x counter\nc_x_total{queue=\"a\"} 1\nc_x_created{queue=\"a\"} 1.5\n\
                    # HELP h Lateness.\n# TYPE h histogram\n# UNIT h seconds\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\n\
                    # HELP g Gauge.\n# TYPE g gauge\ng 3\n# EOF\n";
        assert_eq!(
            to_prometheus_text(open),
            "# HELP c_x_total Things.\n# TYPE c_x_total counter\nc_x_total{queue=\"a\"} 1\n\
             # HELP h Lateness.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\n\
             # HELP g Gauge.\n# TYPE g gauge\ng 3\n"
        );
    }
}
