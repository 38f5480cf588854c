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

/// The durability option; see `delayq::Durability`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct DurabilitySpec {
    pub replicas: u32,
    pub aof: bool,
    pub timeout: DurationParts,
}

/// How to connect; see `delayq::ClientOptions`. `urls`: one server, a Sentinel URL, or
/// cluster seeds (`cluster`, implied by more than one URL).
#[derive(Debug, Clone, uniffi::Record)]
pub struct ConnectOptions {
    pub urls: Vec<String>,
    pub cluster: bool,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub durability: Option<DurabilitySpec>,
}

impl ConnectOptions {
    fn into_core(self) -> delayq::Result<delayq::ClientOptions> {
        let mut opts = delayq::ClientOptions::cluster(self.urls);
        opts.cluster = self.cluster;
        opts.tls = delayq::TlsOptions {
            ca_file: self.tls_ca_file.map(Into::into),
            client_cert_file: self.tls_cert_file.map(Into::into),
            client_key_file: self.tls_key_file.map(Into::into),
        };
        if let Some(d) = self.durability {
            let (replicas, aof, timeout) = (d.replicas, d.aof, d.timeout.timeout()?);
            opts.durability = Some(delayq::Durability {
                replicas,
                aof,
                timeout,
            });
        }
        Ok(opts)
    }
}

async fn connect_core(options: ConnectOptions) -> delayq::Result<Arc<Client>> {
    let inner = delayq::Client::connect_with(options.into_core()?).await?;
    Ok(Arc::new(Client { inner }))
}

/// Connects with `options`.
#[uniffi::export]
pub async fn connect(options: ConnectOptions) -> Result<Arc<Client>, FfiError> {
    run(connect_core(options)).await
}

/// [`connect`], blocking the calling thread.
#[uniffi::export]
pub fn connect_blocking(options: ConnectOptions) -> Result<Arc<Client>, FfiError> {
    block(connect_core(options))
}

#[uniffi::export]
impl Client {
    /// A handle on the Redisson-compatible delayed queue `name`; its transfer task runs
    /// only if `scheduler`, waking at least every `reconcile_interval` (none: core's default).
    pub fn delayed_queue(
        &self,
        name: String,
        scheduler: bool,
        reconcile_interval: Option<DurationParts>,
    ) -> Result<Arc<DelayedQueue>, FfiError> {
        let opts = crate::time::scheduler(scheduler, reconcile_interval)?;
        Ok(Arc::new(DelayedQueue::new(
            self.inner.delayed_queue_with(&name, opts)?,
        )))
    }

    /// A handle on the reliable queue `name` (at-least-once, acknowledged).
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

    /// Closes the client and every queue handle from it. Idempotent.
    pub fn close_handle(&self) {
        self.inner.close();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

twins!(Client.inner as c {
    /// The Redis server's clock in Unix milliseconds.
    fn server_time_ms / server_time_ms_blocking() -> i64 { c.server_time_ms().await }
});
