//! The harness of delayq's fault suite (SPEC section 10). The scenarios themselves are in
//! `tests/`; this crate gives them:
//!
//! - [`procs`]: `redis-server`, `redis-sentinel` and Toxiproxy processes on free loopback
//!   ports, with absolute `--dir` paths under the temp dir, killed on drop;
//! - [`toxiproxy`]: Toxiproxy's HTTP API (proxies and toxics), over a few lines of
//!   HTTP/1.0 on a std `TcpStream`;
//! - [`observe`]: a direct connection for the test's own eyes (the server clock, `CLIENT
//!   LIST`, `INFO`), never through a proxy;
//! - [`tally`]: what was offered and what the consumers got, counted into delivered, lost,
//!   duplicated, early and late, and the one report line each scenario prints;
//! - [`workers`]: consumer loops for both queues, and producers that record what was
//!   acknowledged.
//!
//! Every server that a scenario reaches through Toxiproxy also listens on `127.0.0.2`, and
//! the proxies connect to that address: on the server, `CLIENT LIST`'s `laddr` then tells
//! the client's proxied connections from the test's direct ones, so a scenario can see
//! which connections a client kept through a partition.

pub mod observe;
pub mod procs;
pub mod tally;
pub mod tools;
pub mod toxiproxy;
pub mod workers;

use std::future::Future;
use std::time::{Duration, Instant};

/// The bounded margin of SPEC section 10: a call with a timeout returns within its timeout
/// plus at most this.
pub const MARGIN: Duration = Duration::from_secs(3);

/// The detection bound of SPEC section 10: a dead connection is noticed (and the transfer
/// task delivers again) within this.
pub const DETECT: Duration = Duration::from_secs(10);

/// How long the silent partitions last: longer than [`DETECT`], so that a client that
/// keeps its old connections through one is seen doing so.
pub const PARTITION: Duration = Duration::from_secs(12);

/// Logs of delayq and the harness go to the test's output when `RUST_LOG` asks for them.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Polls `cond` every `step` until it holds or `limit` passes. Returns how long it took,
/// or `None` when it never held.
pub async fn wait_for<F, Fut>(limit: Duration, step: Duration, mut cond: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if cond().await {
            return Some(start.elapsed());
        }
        if start.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(step).await;
    }
}

/// Milliseconds of an optional duration for a report line (`na` when there is none).
pub fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "na".to_owned(), |d| d.as_millis().to_string())
}

/// The promises a scenario checks: every broken one is listed at the end, after the
/// scenario printed its figures, so one run shows all of them.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
}

impl Checks {
    /// Records `what` as broken unless `ok`.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    /// Records a broken promise.
    pub fn fail(&mut self, what: impl Into<String>) {
        self.failures.push(what.into());
    }

    /// Whether nothing is broken so far.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Panics with every broken promise of the scenario `fault`.
    pub fn finish(self, fault: &str) {
        if !self.failures.is_empty() {
            panic!(
                "fault={fault}: {} promise(s) of SPEC section 10 broken:\n  - {}",
                self.failures.len(),
                self.failures.join("\n  - ")
            );
        }
    }
}
