//! [`Client`] over `delayq::Client`; the facade's `Client.kt` and `ClientOptions.kt` document it.

use std::sync::Arc;
use std::time::Duration;

use delayq::{Durability, ReliableQueueOptions, SchedulerOptions, TlsOptions};

use crate::bridge::{block, InRuntime};
use crate::delayed_queue::DelayedQueue;
use crate::reliable_queue::ReliableQueue;
use crate::Res;

records! {
    #[uniffi::remote(Record)] Durability { replicas: u32, aof: bool, timeout: Duration }
    /// What the facade sets of `delayq::ClientOptions`; the rest is core's default.
    #[derive(uniffi::Record)]
    ConnectOptions {
        urls: Vec<String>, cluster: bool, durability: Option<Durability>,
        tls_ca_file: Option<String>, tls_cert_file: Option<String>, tls_key_file: Option<String>,
    }
    /// A queue handle's transfer task: whether it runs; its interval (none: core's default).
    #[derive(uniffi::Record)] Scheduler { enabled: bool, reconcile_interval: Option<Duration> }
}

// Crosses as a `Scheduler`: the rest of `SchedulerOptions` is core's to set.
uniffi::custom_type!(SchedulerOptions, Scheduler, {
    remote,
    lower: |s| Scheduler { enabled: s.enabled, reconcile_interval: Some(s.reconcile_interval) },
    try_lift: |s| {
        let d = SchedulerOptions::default();
        let reconcile_interval = s.reconcile_interval.unwrap_or(d.reconcile_interval);
        Ok(SchedulerOptions { enabled: s.enabled, reconcile_interval, ..d })
    },
});

#[derive(uniffi::Object)]
pub struct Client(delayq::Client);

async fn connect_core(o: ConnectOptions) -> delayq::Result<Arc<Client>> {
    let mut opts = delayq::ClientOptions::cluster(o.urls);
    opts.cluster = o.cluster;
    opts.durability = o.durability;
    opts.tls = TlsOptions {
        ca_file: o.tls_ca_file.map(Into::into),
        client_cert_file: o.tls_cert_file.map(Into::into),
        client_key_file: o.tls_key_file.map(Into::into),
    };
    Ok(Arc::new(Client(delayq::Client::connect_with(opts).await?)))
}

#[uniffi::export]
pub async fn connect(options: ConnectOptions) -> Res<Arc<Client>> {
    InRuntime(Box::pin(connect_core(options))).await
}

#[uniffi::export]
pub fn connect_blocking(options: ConnectOptions) -> Res<Arc<Client>> {
    block(connect_core(options))
}

#[uniffi::export]
impl Client {
    pub fn delayed_queue(&self, name: String, s: SchedulerOptions) -> Res<Arc<DelayedQueue>> {
        Ok(Arc::new(DelayedQueue(self.0.delayed_queue_with(&name, s)?)))
    }

    pub fn reliable_queue(&self, name: String, o: ReliableQueueOptions) -> Res<Arc<ReliableQueue>> {
        Ok(Arc::new(ReliableQueue(self.0.reliable_queue(&name, o)?)))
    }

    pub fn close_handle(&self) {
        self.0.close();
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

twins!(Client.0 as c {
    fn server_time_ms / server_time_ms_blocking() -> i64 { c.server_time_ms().await }
});
