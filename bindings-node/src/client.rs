//! `connect` and `Client`.

use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Either};
use napi_derive::napi;

use crate::convert::{self, option_ms};
use crate::delayed_queue::DelayedQueue;
use crate::error::IntoJs;
use crate::reliable_queue::ReliableQueue;
use napi::Result;

/// Options of a queue handle.
#[napi(object)]
#[derive(Default)]
pub struct ClientOptions {
    /// Treat the URL (or the list of URLs) as seeds of a Redis Cluster.
    pub cluster: Option<bool>,
}

/// Connects to Redis: one URL (`redis://[user:pass@]host:port/db`, `rediss://`,
/// `redis+unix:///path`), or the seed URLs of a cluster.
#[napi]
pub async fn connect(
    url: Either<String, Vec<String>>,
    options: Option<ClientOptions>,
) -> Result<Client> {
    let cluster = options.and_then(|o| o.cluster).unwrap_or(false);
    let opts = match url {
        Either::A(url) => {
            let mut o = delayq::ClientOptions::new(url);
            o.cluster = cluster;
            o
        }
        Either::B(seeds) => delayq::ClientOptions::cluster(seeds),
    };
    let inner = delayq::Client::connect_with(opts).await.js()?;
    Ok(Client { inner })
}

/// Options of a delayed queue handle.
#[napi(object)]
pub struct DelayedQueueOptions {
    /// Run this process's transfer task for the queue (default true).
    pub scheduler: Option<bool>,
    /// Longest pause between two transfer passes, in ms (default 1000).
    pub reconcile_interval_ms: Option<Either<f64, BigInt>>,
}

/// Options of a reliable queue handle.
#[napi(object)]
pub struct ReliableQueueOptions {
    /// How long a received message stays invisible, in ms (default 30000).
    pub visibility_timeout_ms: Option<Either<f64, BigInt>>,
    /// Deliveries before the dead letters (default 5).
    pub max_attempts: Option<Either<f64, BigInt>>,
    /// Delays in ms before the 1st, 2nd, ... retry (the last repeats); default:
    /// exponential with jitter from `backoffBaseMs` to `backoffMaxMs`.
    pub backoff_ms: Option<Vec<Either<f64, BigInt>>>,
    /// Exponential back-off: the first delay in ms (default 1000).
    pub backoff_base_ms: Option<Either<f64, BigInt>>,
    /// Exponential back-off: the longest delay in ms (default 600000).
    pub backoff_max_ms: Option<Either<f64, BigInt>>,
    /// Run this process's transfer task for the queue (default true).
    pub scheduler: Option<bool>,
    /// Longest pause between two transfer passes, in ms (default 1000).
    pub reconcile_interval_ms: Option<Either<f64, BigInt>>,
}

/// A duration option in ms (number or bigint), or `default_ms` when it is absent.
fn ms(v: Option<Either<f64, BigInt>>, default_ms: f64) -> Result<Duration> {
    option_ms(v.unwrap_or(Either::A(default_ms)))
}

fn scheduler(
    enabled: Option<bool>,
    reconcile_ms: Option<Either<f64, BigInt>>,
) -> Result<delayq::SchedulerOptions> {
    Ok(delayq::SchedulerOptions {
        enabled: enabled.unwrap_or(true),
        reconcile_interval: ms(reconcile_ms, 1000.0)?,
        ..Default::default()
    })
}

/// A connection to Redis. Close it to let the process exit.
#[napi]
pub struct Client {
    pub(crate) inner: delayq::Client,
}

#[napi]
impl Client {
    /// Connects; the same as the `connect` function.
    #[napi]
    pub async fn connect(
        url: Either<String, Vec<String>>,
        options: Option<ClientOptions>,
    ) -> Result<Client> {
        connect(url, options).await
    }

    /// A handle on the Redisson-compatible delayed queue `name`.
    #[napi]
    pub fn delayed_queue(
        &self,
        name: String,
        options: Option<DelayedQueueOptions>,
    ) -> Result<DelayedQueue> {
        let (enabled, reconcile) = options
            .map(|o| (o.scheduler, o.reconcile_interval_ms))
            .unwrap_or((None, None));
        let inner = self
            .inner
            .delayed_queue_with(&name, scheduler(enabled, reconcile)?)
            .js()?;
        Ok(DelayedQueue { inner })
    }

    /// A handle on the reliable queue `name` (at-least-once, acknowledged).
    #[napi]
    pub fn reliable_queue(
        &self,
        name: String,
        options: Option<ReliableQueueOptions>,
    ) -> Result<ReliableQueue> {
        let o = options.unwrap_or(ReliableQueueOptions {
            visibility_timeout_ms: None,
            max_attempts: None,
            backoff_ms: None,
            backoff_base_ms: None,
            backoff_max_ms: None,
            scheduler: None,
            reconcile_interval_ms: None,
        });
        let backoff = match o.backoff_ms {
            Some(list) => delayq::Backoff::Schedule(
                list.into_iter()
                    .map(option_ms)
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => delayq::Backoff::Exponential {
                base: ms(o.backoff_base_ms, 1000.0)?,
                max: ms(o.backoff_max_ms, 600_000.0)?,
            },
        };
        let opts = delayq::ReliableQueueOptions {
            visibility_timeout: ms(o.visibility_timeout_ms, 30_000.0)?,
            max_attempts: match o.max_attempts {
                Some(n) => convert::count(n, "max_attempts")?,
                None => 5,
            },
            backoff,
            scheduler: scheduler(o.scheduler, o.reconcile_interval_ms)?,
        };
        let inner = self.inner.reliable_queue(&name, opts).js()?;
        Ok(ReliableQueue { inner })
    }

    /// The Redis server's clock in Unix ms.
    #[napi]
    pub async fn server_time_ms(&self) -> Result<i64> {
        self.inner.server_time_ms().await.js()
    }

    /// Closes the client and its queue handles; nothing of it keeps the process alive
    /// afterwards.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}
