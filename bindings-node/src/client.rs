//! `connect` and `Client`. The options are documented in index.d.ts; an option left out
//! takes core's default.

use delayq::{bridge, Backoff};
use napi::bindgen_prelude::{Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge::promise;
use crate::error::{opt_count, opt_ms, option_ms, IntoJs, Result};
use crate::queues::{DelayedQueue, ReliableQueue};

/// Writes the options objects of `connect`, `delayedQueue` and `reliableQueue` (index.d.ts
/// documents them, index.js checks their types), every field optional: one left out takes
/// core's default.
macro_rules! objects {
    ($($name:ident { $($field:ident: $ty:ty),* $(,)? })*) => {$(
        #[napi(object)]
        #[derive(Default)]
        pub struct $name {
            $(pub $field: Option<$ty>),*
        }
    )*};
}

objects! {
    ClientOptions { cluster: bool, tls: TlsOptions, durability: DurabilityOptions }
    TlsOptions { ca_file: String, cert_file: String, key_file: String }
    DurabilityOptions { replicas: f64, aof: bool, timeout_ms: f64 }
    DelayedQueueOptions { scheduler: bool, reconcile_interval_ms: f64 }
    ReliableQueueOptions {
        visibility_timeout_ms: f64, max_attempts: f64, backoff_ms: Vec<f64>, backoff_base_ms: f64,
        backoff_max_ms: f64, shards: f64, dead_letter_retention_ms: f64,
        idempotency_retention_ms: f64, update_settings: bool, scheduler: bool,
        reconcile_interval_ms: f64,
    }
}

impl ReliableQueueOptions {
    fn into_core(self) -> Result<delayq::ReliableQueueOptions> {
        let schedule = self.backoff_ms.map(|l| {
            l.into_iter()
                .map(|ms| option_ms(ms, "each delay of backoffMs"))
                .collect()
        });
        let schedule: Option<Vec<_>> = schedule.transpose()?;
        let (base, max) = (
            opt_ms(self.backoff_base_ms, "backoffBaseMs")?,
            opt_ms(self.backoff_max_ms, "backoffMaxMs")?,
        );
        Ok(delayq::ReliableQueueOptions {
            backoff: Backoff::from_parts(schedule, base, max).js()?,
            visibility_timeout: opt_ms(self.visibility_timeout_ms, "visibilityTimeoutMs")?,
            max_attempts: opt_count(self.max_attempts, "maxAttempts")?,
            shards: opt_count(self.shards, "shards")?,
            dead_letter_retention: opt_ms(self.dead_letter_retention_ms, "deadLetterRetentionMs")?,
            idempotency_retention: opt_ms(self.idempotency_retention_ms, "idempotencyRetentionMs")?,
            update_settings: self.update_settings.unwrap_or(false),
            scheduler: bridge::scheduler(
                self.scheduler,
                opt_ms(self.reconcile_interval_ms, "reconcileIntervalMs")?,
            ),
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
    let o = options.unwrap_or_default();
    opts.cluster |= o.cluster.unwrap_or(false);
    let tls = o.tls.unwrap_or_default();
    opts.tls = delayq::TlsOptions {
        ca_file: tls.ca_file.map(Into::into),
        client_cert_file: tls.cert_file.map(Into::into),
        client_key_file: tls.key_file.map(Into::into),
    };
    if let Some(d) = o.durability {
        let replicas = opt_count(d.replicas, "durability.replicas")?;
        opts.durability = Some(bridge::durability(
            replicas,
            d.aof,
            opt_ms(d.timeout_ms, "durability.timeoutMs")?,
        ));
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

methods! { Client {
    promise {
        server_time_ms() -> i64 = |c| c.server_time_ms().await;
    }
    sync {
        delayed_queue(name: String, options: Option<DelayedQueueOptions>) -> DelayedQueue = |c| {
            let o = options.unwrap_or_default();
            let scheduler = bridge::scheduler(o.scheduler, opt_ms(o.reconcile_interval_ms, "reconcileIntervalMs")?);
            DelayedQueue { inner: c.delayed_queue_with(&name, scheduler).js()? }
        };
        reliable_queue(name: String, options: Option<ReliableQueueOptions>) -> ReliableQueue = |c| {
            let opts = options.map_or(Ok(Default::default()), ReliableQueueOptions::into_core)?;
            ReliableQueue { inner: c.reliable_queue(&name, opts).js()? }
        };
        close() -> () = |c| c.close();
        #[napi(getter)] closed() -> bool = |c| c.is_closed();
    }
}}
