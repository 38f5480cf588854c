//! `connect` and `Client`.

use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge::promise;
use crate::convert::{self, option_ms};
use crate::delayed_queue::DelayedQueue;
use crate::error::{to_js, IntoJs, Result};
use crate::reliable_queue::ReliableQueue;

/// Options of a connection.
#[napi(object)]
#[derive(Default)]
pub struct ClientOptions {
    /// Treat the URL (or the list of URLs) as seeds of a Redis Cluster.
    pub cluster: Option<bool>,
    /// Certificates for `rediss://` URLs.
    pub tls: Option<TlsOptions>,
    /// Wait for replicas (and the append-only file) after offers and acks.
    pub durability: Option<DurabilityOptions>,
}

/// Certificate files (PEM) for `rediss://` URLs.
#[napi(object)]
#[derive(Default)]
pub struct TlsOptions {
    /// A CA certificate to trust instead of the system's roots (a private CA).
    pub ca_file: Option<String>,
    /// A client certificate, for servers that require one (mutual TLS).
    pub cert_file: Option<String>,
    /// The client certificate's private key.
    pub key_file: Option<String>,
}

/// The durability option: offers and acks return once `replicas` replicas (and, with
/// `aof`, the append-only files) have them, or fail with a timeout error after
/// `timeoutMs` (the write was applied on the master, but may not survive a failover).
#[napi(object)]
pub struct DurabilityOptions {
    /// Replicas that must have each write (`WAIT`), default 0.
    pub replicas: Option<Either<f64, BigInt>>,
    /// Also wait for the append-only file (`WAITAOF`, Redis 7.2+), default false.
    pub aof: Option<bool>,
    /// How long to wait, in ms (default 1000).
    pub timeout_ms: Option<Either<f64, BigInt>>,
}

/// Core's options for `url` and `options`.
fn client_options(
    url: Either<String, Vec<String>>,
    options: Option<ClientOptions>,
) -> Result<delayq::ClientOptions> {
    let options = options.unwrap_or_default();
    let mut opts = match url {
        Either::A(url) => {
            let mut o = delayq::ClientOptions::new(url);
            o.cluster = options.cluster.unwrap_or(false);
            o
        }
        Either::B(seeds) => delayq::ClientOptions::cluster(seeds),
    };
    let tls = options.tls.unwrap_or_default();
    opts.tls = delayq::TlsOptions {
        ca_file: tls.ca_file.map(Into::into),
        client_cert_file: tls.cert_file.map(Into::into),
        client_key_file: tls.key_file.map(Into::into),
    };
    if let Some(d) = options.durability {
        opts.durability = Some(delayq::Durability {
            replicas: match d.replicas {
                Some(n) => convert::count(n, "durability.replicas")?,
                None => 0,
            },
            aof: d.aof.unwrap_or(false),
            timeout: ms(d.timeout_ms, delayq::Durability::DEFAULT_TIMEOUT)?,
        });
    }
    Ok(opts)
}

/// Connects to Redis: one URL (`redis://[user:pass@]host:port/db`, `rediss://`,
/// `redis+unix:///path`, `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]`),
/// or the seed URLs of a cluster.
#[napi]
pub fn connect(
    env: &Env,
    url: Either<String, Vec<String>>,
    options: Option<ClientOptions>,
) -> Result<PromiseRaw<'_, Client>> {
    let opts = client_options(url, options)?;
    promise(env, async move {
        let inner = delayq::Client::connect_with(opts).await?;
        Ok(Client { inner })
    })
}

/// Options of a delayed queue handle.
#[napi(object)]
pub struct DelayedQueueOptions {
    /// Run this process's transfer task for the queue (default true).
    pub scheduler: Option<bool>,
    /// Longest pause between two transfer passes, in ms (default 1000).
    pub reconcile_interval_ms: Option<Either<f64, BigInt>>,
}

/// Options of a reliable queue handle. The queue's settings (all but `updateSettings`,
/// `scheduler` and `reconcileIntervalMs`) are stored in Redis with the queue and shared by
/// every handle: one left out uses the stored value; a named one must match it (else the
/// handle's first call fails with `ERR_DELAYQ_INVALID_ARGUMENT`) unless `updateSettings`.
#[napi(object)]
#[derive(Default)]
pub struct ReliableQueueOptions {
    /// How long a received message stays invisible (its lease), in ms (default 30000).
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
    /// Sub-queues, a power of two (default 1).
    pub shards: Option<Either<f64, BigInt>>,
    /// How long dead letters are kept, in ms (0, the default: until requeued or purged).
    pub dead_letter_retention_ms: Option<Either<f64, BigInt>>,
    /// How long acked ids are remembered for de-duplication, in ms (0, the default: not
    /// at all).
    pub idempotency_retention_ms: Option<Either<f64, BigInt>>,
    /// Overwrite the stored settings with the named ones instead of failing on a
    /// difference (default false).
    pub update_settings: Option<bool>,
    /// Run this process's transfer task for the queue (default true).
    pub scheduler: Option<bool>,
    /// Longest pause between two transfer passes, in ms (default 1000).
    pub reconcile_interval_ms: Option<Either<f64, BigInt>>,
}

impl ReliableQueueOptions {
    /// Core's options; every value is checked by core.
    fn into_core(self) -> Result<delayq::ReliableQueueOptions> {
        let backoff = match (self.backoff_ms, self.backoff_base_ms, self.backoff_max_ms) {
            (Some(list), None, None) => Some(delayq::Backoff::Schedule(
                list.into_iter()
                    .map(option_ms)
                    .collect::<Result<Vec<_>>>()?,
            )),
            (Some(_), _, _) => return Err(to_js(delayq::Error::InvalidArgument(
                "give backoffMs (a schedule) or backoffBaseMs/backoffMaxMs (exponential), not both"
                    .into(),
            ))),
            (None, None, None) => None,
            (None, base, max) => {
                let delayq::Backoff::Exponential { base: b, max: m } = Default::default() else {
                    unreachable!("the default back-off is exponential")
                };
                Some(delayq::Backoff::Exponential {
                    base: ms(base, b)?,
                    max: ms(max, m)?,
                })
            }
        };
        let count = |n: Option<Either<f64, BigInt>>, what: &str| -> Result<Option<u32>> {
            n.map(|n| convert::count(n, what)).transpose()
        };
        Ok(delayq::ReliableQueueOptions {
            visibility_timeout: self.visibility_timeout_ms.map(option_ms).transpose()?,
            max_attempts: count(self.max_attempts, "max_attempts")?,
            backoff,
            shards: count(self.shards, "shards")?,
            dead_letter_retention: self.dead_letter_retention_ms.map(option_ms).transpose()?,
            idempotency_retention: self.idempotency_retention_ms.map(option_ms).transpose()?,
            update_settings: self.update_settings.unwrap_or(false),
            scheduler: scheduler(self.scheduler, self.reconcile_interval_ms)?,
        })
    }
}

/// A duration option in ms (number or bigint), or core's `default` when it is absent.
fn ms(v: Option<Either<f64, BigInt>>, default: Duration) -> Result<Duration> {
    v.map_or(Ok(default), option_ms)
}

fn scheduler(
    enabled: Option<bool>,
    reconcile_ms: Option<Either<f64, BigInt>>,
) -> Result<delayq::SchedulerOptions> {
    let default = delayq::SchedulerOptions::default();
    Ok(delayq::SchedulerOptions {
        enabled: enabled.unwrap_or(default.enabled),
        reconcile_interval: ms(reconcile_ms, default.reconcile_interval)?,
        ..default
    })
}

/// A connection to Redis. Close it to let the process exit.
#[napi]
pub struct Client {
    pub(crate) inner: delayq::Client,
}

#[napi]
impl Client {
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
        let opts = options.unwrap_or_default().into_core()?;
        let inner = self.inner.reliable_queue(&name, opts).js()?;
        Ok(ReliableQueue { inner })
    }

    /// The Redis server's clock in Unix ms.
    #[napi]
    pub fn server_time_ms<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, i64>> {
        let c = self.inner.clone();
        promise(env, async move { c.server_time_ms().await })
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
