//! The native handle of a client (its class is `delayq.Client`, in Python).

use delayq::host::exit::Registered;
use pyo3::prelude::*;

use crate::convert::{self, Obj};
use crate::delayed_queue::DelayedQueue;
use crate::error::{invalid, to_py};
use crate::exit;
use crate::reliable_queue::ReliableQueue;
use crate::runtime::{calls, run, Aio, R};

#[pyclass(frozen)]
pub struct Client(
    delayq::Client,
    #[allow(dead_code, reason = "closed at exit while alive")] Registered<'static>,
);

/// A scheduler option of a queue handle (core's defaults for the rest).
fn scheduler(enabled: Obj<'_>, reconcile_interval: Obj<'_>) -> PyResult<delayq::SchedulerOptions> {
    let enabled = Some(convert::boolean(&enabled, "scheduler")?);
    let interval = Some(convert::duration(
        &reconcile_interval,
        "reconcile_interval",
    )?);
    Ok(delayq::bridge::scheduler(enabled, interval))
}

/// The back-off of `Client.reliable_queue` (see `delayq::Backoff::from_parts`).
fn backoff(
    schedule: Option<Obj<'_>>,
    base: Option<Obj<'_>>,
    max: Option<Obj<'_>>,
) -> PyResult<Option<delayq::Backoff>> {
    let what = "backoff must be a list of delays";
    let schedule = schedule.map(|s| convert::sequence(&s, what)).transpose()?;
    let each = |d: &Obj<'_>| convert::delay_named(d, "each delay of backoff");
    let schedule = schedule.map(|l| l.iter().map(each).collect());
    let (base, max) = (
        convert::setting(base, "backoff_base")?,
        convert::setting(max, "backoff_max")?,
    );
    delayq::Backoff::from_parts(schedule.transpose()?, base, max).map_err(to_py)
}

calls! { Client(c) {
    fn server_time_ms() = async move { c.server_time_ms().await };
}

    /// Connects: the native handle of a `delayq.Client` (or its `Pending`, see `aio`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn connect(py: Python<'_>, aio: Aio<'_>, url: Obj<'_>, cluster: Obj<'_>, tls: (Obj<'_>, Obj<'_>, Obj<'_>), durability_replicas: Option<Obj<'_>>, durability_aof: Obj<'_>, durability_timeout: Obj<'_>) -> R {
        let (cluster, durability_aof) = (convert::boolean(&cluster, "cluster")?, convert::boolean(&durability_aof, "durability_aof")?);
        // A list of seeds names a cluster.
        let (urls, cluster) = match (url.extract::<String>(), url.extract::<Vec<String>>()) {
            (Ok(url), _) => (vec![url], cluster),
            (_, Ok(seeds)) => (seeds, true),
            _ => return Err(invalid("url must be a str, or a list of seed URLs of a cluster")),
        };
        let (ca_file, client_cert_file, client_key_file) = (convert::opt_path(&tls.0, "tls_ca_file")?, convert::opt_path(&tls.1, "tls_cert_file")?, convert::opt_path(&tls.2, "tls_key_file")?);
        let tls = delayq::TlsOptions { ca_file, client_cert_file, client_key_file };
        let replicas = convert::opt_count(durability_replicas, "durability_replicas")?;
        let timeout = convert::duration(&durability_timeout, "durability_timeout")?;
        let durability = (replicas.is_some() || durability_aof)
            .then(|| delayq::bridge::durability(replicas, Some(durability_aof), Some(timeout)));
        let seeds = delayq::ClientOptions::cluster(urls);
        let opts = delayq::ClientOptions { cluster, tls, durability, ..seeds };
        run(py, aio, async move {
            let client = delayq::Client::connect_with(opts).await?;
            let tracked = exit::GATE.track(&client);
            Ok(Client(client, tracked))
        })
    }

    fn delayed_queue(&self, name: Obj<'_>, scheduler: Obj<'_>, reconcile_interval: Obj<'_>) -> PyResult<DelayedQueue> {
        let name = convert::string(&name, "name")?;
        let opts = self::scheduler(scheduler, reconcile_interval)?;
        let _in = crate::runtime::runtime().enter(); // its transfer task's runtime
        Ok(DelayedQueue(self.0.delayed_queue_with(&name, opts).map_err(to_py)?))
    }

    /// A reliable queue handle; each setting None is the stored one.
    #[allow(clippy::too_many_arguments)]
    fn reliable_queue(&self, name: Obj<'_>, visibility_timeout: Option<Obj<'_>>, max_attempts: Option<Obj<'_>>, backoff: Option<Obj<'_>>, backoff_base: Option<Obj<'_>>, backoff_max: Option<Obj<'_>>, shards: Option<Obj<'_>>, dead_letter_retention: Option<Obj<'_>>, idempotency_retention: Option<Obj<'_>>, update_settings: Obj<'_>, scheduler: Obj<'_>, reconcile_interval: Obj<'_>) -> PyResult<ReliableQueue> {
        let opts = delayq::ReliableQueueOptions {
            visibility_timeout: convert::setting(visibility_timeout, "visibility_timeout")?,
            max_attempts: convert::opt_count(max_attempts, "max_attempts")?,
            backoff: self::backoff(backoff, backoff_base, backoff_max)?,
            shards: convert::opt_count(shards, "shards")?,
            dead_letter_retention: convert::setting(dead_letter_retention, "dead_letter_retention")?,
            idempotency_retention: convert::setting(idempotency_retention, "idempotency_retention")?,
            update_settings: convert::boolean(&update_settings, "update_settings")?,
            scheduler: self::scheduler(scheduler, reconcile_interval)?,
        };
        let name = convert::string(&name, "name")?;
        let _in = crate::runtime::runtime().enter();
        Ok(ReliableQueue(self.0.reliable_queue(&name, opts).map_err(to_py)?))
    }

    fn close(&self) {
        self.0.close();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.0.is_closed()
    }
}
