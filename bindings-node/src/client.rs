//! `connect` and `Client`. The options are documented in index.d.ts; an option left out
//! takes core's default.

use std::time::Duration;

use napi::bindgen_prelude::{Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge::promise;
use crate::convert::{count, option_ms};
use crate::delayed_queue::DelayedQueue;
use crate::error::{to_js, IntoJs, Result};
use crate::reliable_queue::ReliableQueue;

#[napi(object)]
#[derive(Default)]
pub struct ClientOptions {
    pub cluster: Option<bool>,
    pub tls: Option<TlsOptions>,
    pub durability: Option<DurabilityOptions>,
}

#[napi(object)]
#[derive(Default)]
pub struct TlsOptions {
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
}

#[napi(object)]
pub struct DurabilityOptions {
    pub replicas: Option<f64>,
    pub aof: Option<bool>,
    pub timeout_ms: Option<f64>,
}

#[napi(object)]
pub struct DelayedQueueOptions {
    pub scheduler: Option<bool>,
    pub reconcile_interval_ms: Option<f64>,
}

/// The queue's settings are stored in Redis with it: one left out uses the stored value.
#[napi(object)]
#[derive(Default)]
pub struct ReliableQueueOptions {
    pub visibility_timeout_ms: Option<f64>,
    pub max_attempts: Option<f64>,
    pub backoff_ms: Option<Vec<f64>>,
    pub backoff_base_ms: Option<f64>,
    pub backoff_max_ms: Option<f64>,
    pub shards: Option<f64>,
    pub dead_letter_retention_ms: Option<f64>,
    pub idempotency_retention_ms: Option<f64>,
    pub update_settings: Option<bool>,
    pub scheduler: Option<bool>,
    pub reconcile_interval_ms: Option<f64>,
}

/// A duration option in ms, or `default` when it is absent.
fn ms(v: Option<f64>, default: Duration) -> Result<Duration> {
    v.map_or(Ok(default), option_ms)
}

fn optional<T>(v: Option<f64>, f: impl Fn(f64) -> Result<T>) -> Result<Option<T>> {
    v.map(f).transpose()
}

fn scheduler(enabled: Option<bool>, reconcile: Option<f64>) -> Result<delayq::SchedulerOptions> {
    let default = delayq::SchedulerOptions::default();
    Ok(delayq::SchedulerOptions {
        enabled: enabled.unwrap_or(default.enabled),
        reconcile_interval: ms(reconcile, default.reconcile_interval)?,
        ..default
    })
}

impl ReliableQueueOptions {
    fn into_core(self) -> Result<delayq::ReliableQueueOptions> {
        let delayq::Backoff::Exponential { base, max } = delayq::Backoff::default() else {
            unreachable!("the default back-off is exponential")
        };
        let backoff = match (self.backoff_ms, self.backoff_base_ms, self.backoff_max_ms) {
            (Some(list), None, None) => {
                let list = list.into_iter().map(option_ms).collect::<Result<_>>()?;
                Some(delayq::Backoff::Schedule(list))
            }
            (Some(_), _, _) => Err(to_js(delayq::Error::InvalidArgument(
                "give backoffMs (a schedule) or backoffBaseMs/backoffMaxMs, not both".into(),
            )))?,
            (None, None, None) => None,
            (None, b, m) => Some(delayq::Backoff::Exponential {
                base: ms(b, base)?,
                max: ms(m, max)?,
            }),
        };
        Ok(delayq::ReliableQueueOptions {
            visibility_timeout: optional(self.visibility_timeout_ms, option_ms)?,
            max_attempts: optional(self.max_attempts, |n| count(n, "max_attempts"))?,
            backoff,
            shards: optional(self.shards, |n| count(n, "shards"))?,
            dead_letter_retention: optional(self.dead_letter_retention_ms, option_ms)?,
            idempotency_retention: optional(self.idempotency_retention_ms, option_ms)?,
            update_settings: self.update_settings.unwrap_or(false),
            scheduler: scheduler(self.scheduler, self.reconcile_interval_ms)?,
        })
    }
}

/// Connects to one URL (`redis://`, `rediss://`, `redis+unix://`, `redis+sentinel://`) or
/// to the seed URLs of a cluster.
#[napi]
pub fn connect(
    env: &Env,
    url: Either<String, Vec<String>>,
    options: Option<ClientOptions>,
) -> Result<PromiseRaw<'_, Client>> {
    let options = options.unwrap_or_default();
    let mut opts = match url {
        Either::A(url) => delayq::ClientOptions::new(url),
        Either::B(seeds) => delayq::ClientOptions::cluster(seeds),
    };
    opts.cluster |= options.cluster.unwrap_or(false);
    let tls = options.tls.unwrap_or_default();
    opts.tls = delayq::TlsOptions {
        ca_file: tls.ca_file.map(Into::into),
        client_cert_file: tls.cert_file.map(Into::into),
        client_key_file: tls.key_file.map(Into::into),
    };
    if let Some(d) = options.durability {
        opts.durability = Some(delayq::Durability {
            replicas: optional(d.replicas, |n| count(n, "durability.replicas"))?.unwrap_or(0),
            aof: d.aof.unwrap_or(false),
            timeout: ms(d.timeout_ms, delayq::Durability::DEFAULT_TIMEOUT)?,
        });
    }
    promise(env, async move {
        Ok(Client {
            inner: delayq::Client::connect_with(opts).await?,
        })
    })
}

/// A connection to Redis.
#[napi]
pub struct Client {
    inner: delayq::Client,
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
        let (enabled, reconcile) =
            options.map_or((None, None), |o| (o.scheduler, o.reconcile_interval_ms));
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
        Ok(ReliableQueue {
            inner: self.inner.reliable_queue(&name, opts).js()?,
        })
    }

    /// The Redis server's clock in Unix ms.
    #[napi]
    pub fn server_time_ms<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, i64>> {
        let c = self.inner.clone();
        promise(env, async move { c.server_time_ms().await })
    }

    /// Closes the client and its queue handles.
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
