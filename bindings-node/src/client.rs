//! `connect` and `Client`. The options are documented in index.d.ts; an option left out
//! takes core's default.

use std::time::Duration;

use delayq::Backoff;
use napi::bindgen_prelude::{Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge::promise;
use crate::error::{count, option_ms, IntoJs, Result};
use crate::queues::{DelayedQueue, ReliableQueue};

#[napi(object)]
pub struct ClientOptions {
    pub cluster: Option<bool>,
    pub tls: Option<TlsOptions>,
    pub durability: Option<DurabilityOptions>,
}

#[napi(object)]
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

#[napi(object)]
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
        let schedule = self
            .backoff_ms
            .map(|list| list.into_iter().map(option_ms).collect());
        let backoff = Backoff::from_parts(
            schedule.transpose()?,
            optional(self.backoff_base_ms, option_ms)?,
            optional(self.backoff_max_ms, option_ms)?,
        )
        .js()?;
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

/// See index.d.ts.
#[napi]
pub fn connect(
    env: &Env,
    url: Either<String, Vec<String>>,
    options: Option<ClientOptions>,
) -> Result<PromiseRaw<'_, Client>> {
    let mut opts = match url {
        Either::A(url) => delayq::ClientOptions::new(url),
        Either::B(seeds) => delayq::ClientOptions::cluster(seeds),
    };
    if let Some(o) = options {
        opts.cluster |= o.cluster.unwrap_or(false);
        if let Some(tls) = o.tls {
            opts.tls = delayq::TlsOptions {
                ca_file: tls.ca_file.map(Into::into),
                client_cert_file: tls.cert_file.map(Into::into),
                client_key_file: tls.key_file.map(Into::into),
            };
        }
        if let Some(d) = o.durability {
            opts.durability = Some(delayq::Durability {
                replicas: optional(d.replicas, |n| count(n, "durability.replicas"))?.unwrap_or(0),
                aof: d.aof.unwrap_or(false),
                timeout: ms(d.timeout_ms, delayq::Durability::DEFAULT_TIMEOUT)?,
            });
        }
    }
    promise(env, async move {
        let inner = delayq::Client::connect_with(opts).await?;
        Ok(Client { inner })
    })
}

/// See index.d.ts.
#[napi]
pub struct Client {
    inner: delayq::Client,
}

calls! { Client {
    server_time_ms() -> i64 = |c| c.server_time_ms().await;
}}

sync! { Client {
    delayed_queue(name: String, options: Option<DelayedQueueOptions>) -> DelayedQueue = |c| {
        let o = options.map(|o| (o.scheduler, o.reconcile_interval_ms)).unwrap_or_default();
        DelayedQueue { inner: c.delayed_queue_with(&name, scheduler(o.0, o.1)?).js()? }
    };
    reliable_queue(name: String, options: Option<ReliableQueueOptions>) -> ReliableQueue = |c| {
        let opts = options.map_or(Ok(Default::default()), ReliableQueueOptions::into_core)?;
        ReliableQueue { inner: c.reliable_queue(&name, opts).js()? }
    };
    close() -> () = |c| c.close();
    #[napi(getter)] closed() -> bool = |c| c.is_closed();
}}
