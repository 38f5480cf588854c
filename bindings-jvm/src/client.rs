//! [`Client`]: connects and hands out queue handles.

use std::sync::Arc;

use crate::delayed_queue::DelayedQueue;
use crate::error::FfiError;
use crate::reliable_queue::{ReliableOptions, ReliableQueue};
use crate::runtime::{block, run};
use crate::time::DurationParts;

/// A connection to Redis; see `delayq::Client`.
#[derive(uniffi::Object)]
pub struct Client {
    inner: delayq::Client,
}

fn wrap(inner: delayq::Client) -> Arc<Client> {
    Arc::new(Client { inner })
}

/// Connects to the Redis server at `url`.
#[uniffi::export]
pub async fn connect(url: String) -> Result<Arc<Client>, FfiError> {
    run(async move { delayq::Client::connect(&url).await })
        .await
        .map(wrap)
}

/// Connects to the Redis server at `url`, blocking the calling thread.
#[uniffi::export]
pub fn connect_blocking(url: String) -> Result<Arc<Client>, FfiError> {
    block(async move { delayq::Client::connect(&url).await }).map(wrap)
}

/// Connects to a Redis Cluster through its seed URLs (or, with one URL and `cluster`
/// false, to one server).
#[uniffi::export]
pub async fn connect_with(urls: Vec<String>, cluster: bool) -> Result<Arc<Client>, FfiError> {
    let opts = options(urls, cluster);
    run(async move { delayq::Client::connect_with(opts).await })
        .await
        .map(wrap)
}

/// [`connect_with`], blocking the calling thread.
#[uniffi::export]
pub fn connect_with_blocking(urls: Vec<String>, cluster: bool) -> Result<Arc<Client>, FfiError> {
    let opts = options(urls, cluster);
    block(async move { delayq::Client::connect_with(opts).await }).map(wrap)
}

fn options(urls: Vec<String>, cluster: bool) -> delayq::ClientOptions {
    let mut opts = delayq::ClientOptions::cluster(urls);
    opts.cluster = cluster;
    opts
}

/// The durability option; see `delayq::Durability`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct DurabilitySpec {
    /// Replicas that must have each offer and ack (`WAIT`).
    pub replicas: u32,
    /// Also wait for the append-only file (`WAITAOF`).
    pub aof: bool,
    /// How long to wait.
    pub timeout: DurationParts,
}

/// How to connect: URLs (one server, a Sentinel URL, or cluster seeds), certificate files
/// for `rediss://`, the durability option. See `delayq::ClientOptions`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ConnectOptions {
    pub urls: Vec<String>,
    /// Treat `urls` as seeds of a Redis Cluster (implied by more than one URL).
    pub cluster: bool,
    /// A CA certificate (PEM) to trust instead of the system's roots.
    pub tls_ca_file: Option<String>,
    /// A client certificate (PEM), for mutual TLS.
    pub tls_cert_file: Option<String>,
    /// The client certificate's private key (PEM).
    pub tls_key_file: Option<String>,
    pub durability: Option<DurabilitySpec>,
}

impl ConnectOptions {
    fn into_core(self) -> delayq::Result<delayq::ClientOptions> {
        let mut opts = options(self.urls, self.cluster);
        opts.tls = delayq::TlsOptions {
            ca_file: self.tls_ca_file.map(Into::into),
            client_cert_file: self.tls_cert_file.map(Into::into),
            client_key_file: self.tls_key_file.map(Into::into),
        };
        opts.durability = match self.durability {
            Some(d) => Some(delayq::Durability {
                replicas: d.replicas,
                aof: d.aof,
                timeout: d.timeout.timeout()?,
            }),
            None => None,
        };
        Ok(opts)
    }
}

/// Connects with `options`.
#[uniffi::export]
pub async fn connect_with_options(options: ConnectOptions) -> Result<Arc<Client>, FfiError> {
    let opts = options.into_core()?;
    run(async move { delayq::Client::connect_with(opts).await })
        .await
        .map(wrap)
}

/// [`connect_with_options`], blocking the calling thread.
#[uniffi::export]
pub fn connect_with_options_blocking(options: ConnectOptions) -> Result<Arc<Client>, FfiError> {
    let opts = options.into_core()?;
    block(async move { delayq::Client::connect_with(opts).await }).map(wrap)
}

#[uniffi::export]
impl Client {
    /// A handle on the Redisson-compatible delayed queue `name`, running its transfer task.
    pub fn delayed_queue(&self, name: String) -> Result<Arc<DelayedQueue>, FfiError> {
        Ok(Arc::new(DelayedQueue::new(
            self.inner.delayed_queue(&name)?,
        )))
    }

    /// A handle on the delayed queue `name`; its transfer task runs only if `scheduler`,
    /// waking at least every `reconcile_interval`.
    pub fn delayed_queue_with(
        &self,
        name: String,
        scheduler: bool,
        reconcile_interval: DurationParts,
    ) -> Result<Arc<DelayedQueue>, FfiError> {
        let opts = delayq::SchedulerOptions {
            enabled: scheduler,
            reconcile_interval: reconcile_interval.timeout()?,
            ..Default::default()
        };
        Ok(Arc::new(DelayedQueue::new(
            self.inner.delayed_queue_with(&name, opts)?,
        )))
    }

    /// A handle on the reliable queue `name` (at-least-once, acknowledged), running its
    /// transfer task unless `options.scheduler` is false.
    pub fn reliable_queue(
        &self,
        name: String,
        options: ReliableOptions,
    ) -> Result<Arc<ReliableQueue>, FfiError> {
        let opts = options.to_core()?;
        Ok(Arc::new(ReliableQueue::new(
            self.inner.reliable_queue(&name, opts)?,
        )))
    }

    /// The Redis server's clock in Unix milliseconds.
    pub async fn server_time_ms(&self) -> Result<i64, FfiError> {
        let c = self.inner.clone();
        run(async move { c.server_time_ms().await }).await
    }

    /// [`Client::server_time_ms`], blocking.
    pub fn server_time_ms_blocking(&self) -> Result<i64, FfiError> {
        let c = self.inner.clone();
        block(async move { c.server_time_ms().await })
    }

    /// Closes the client and every queue handle from it. Idempotent.
    pub fn close_handle(&self) {
        self.inner.close();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}
