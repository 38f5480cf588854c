//! `Client`: connects and hands out queue handles.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{self, Arg};
use crate::delayed_queue::DelayedQueue;
use crate::error::{invalid, to_py};
use crate::exit;
use crate::reliable_queue::ReliableQueue;
use crate::runtime::{block, enter, twins, Awaiting, Call};

/// A connection to Redis: one URL, or a list of seed URLs of a Redis Cluster.
#[pyclass(module = "delayq", frozen)]
pub struct Client {
    pub(crate) inner: delayq::Client,
    /// Closed at exit while this lives.
    _tracked: exit::Tracked,
}

/// The options of `Client(...)` and `Client.connect_async(...)`, converted: their one
/// signature (named for the messages of a bad call).
#[pyclass(frozen, name = "Client")]
struct Options(delayq::ClientOptions);

#[pymethods]
impl Options {
    #[new]
    #[pyo3(signature = (url, *, cluster = false, tls_ca_file = None, tls_cert_file = None,
                        tls_key_file = None, durability_replicas = None, durability_aof = false,
                        durability_timeout = Arg::Default))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &Bound<'_, PyAny>,
        cluster: bool,
        tls_ca_file: Option<PathBuf>,
        tls_cert_file: Option<PathBuf>,
        tls_key_file: Option<PathBuf>,
        durability_replicas: Option<&Bound<'_, PyAny>>,
        durability_aof: bool,
        durability_timeout: Arg<'_>,
    ) -> PyResult<Options> {
        let mut opts = if let Ok(s) = url.cast::<PyString>() {
            let mut opts = delayq::ClientOptions::new(s.to_cow()?);
            opts.cluster = cluster;
            opts
        } else if url.is_instance_of::<PyList>() || url.is_instance_of::<PyTuple>() {
            delayq::ClientOptions::cluster(url.extract::<Vec<String>>()?)
        } else {
            return Err(invalid(
                "url must be a str, or a list of seed URLs of a cluster",
            ));
        };
        opts.tls = delayq::TlsOptions {
            ca_file: tls_ca_file,
            client_cert_file: tls_cert_file,
            client_key_file: tls_key_file,
        };
        let replicas = convert::opt_count(durability_replicas, "durability_replicas")?;
        let timeout =
            convert::timeout_arg(durability_timeout, delayq::Durability::DEFAULT_TIMEOUT)?;
        if replicas.is_some() || durability_aof {
            opts.durability = Some(delayq::Durability {
                replicas: replicas.unwrap_or(0),
                aof: durability_aof,
                timeout,
            });
        }
        crate::logs::follow_log_level(url.py())?;
        Ok(Options(opts))
    }
}

/// The options `args` and `kwargs` name (as `Client(...)` takes them).
fn options(
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<delayq::ClientOptions> {
    let options = args.py().get_type::<Options>().call(args, kwargs)?;
    Ok(options.cast_into::<Options>()?.get().0.clone())
}

/// Core's `connect_with`, making a `Client`.
fn connect(
    opts: delayq::ClientOptions,
) -> impl std::future::Future<Output = delayq::Result<Client>> + Send + 'static {
    enter(|| async move {
        let inner = delayq::Client::connect_with(opts).await?;
        let _tracked = exit::track(&inner);
        Ok(Client { inner, _tracked })
    })
}

/// A scheduler option of a queue handle.
fn scheduler(enabled: bool, reconcile_interval: Arg<'_>) -> PyResult<delayq::SchedulerOptions> {
    let defaults = delayq::SchedulerOptions::default();
    let reconcile_interval = convert::timeout_arg(reconcile_interval, defaults.reconcile_interval)?;
    Ok(delayq::SchedulerOptions {
        enabled,
        reconcile_interval,
        ..defaults
    })
}

twins! {
impl Client {
    /// The Redis server's clock in Unix milliseconds (the clock due times use).
    fn server_time_ms / server_time_ms_async(&self) = {
        let c = self.inner.clone();
        async move { c.server_time_ms().await }
    };
}

    /// Connects (blocking) to `url` (`redis://[user:pass@]host:port/db`, `rediss://`,
    /// `redis+unix:///path`, `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]`),
    /// or to a cluster through a list of seed URLs. `tls_ca_file`, `tls_cert_file` and
    /// `tls_key_file` (PEM) serve `rediss://`: a private CA, a client certificate and its key
    /// (mutual TLS). With `durability_replicas` (or `durability_aof`), offers and acks wait
    /// for that many replicas (and the append-only file) for up to `durability_timeout`
    /// seconds.
    #[new]
    #[pyo3(
        signature = (*args, **kwargs),
        text_signature = "(url, *, cluster=False, tls_ca_file=None, tls_cert_file=None, \
                          tls_key_file=None, durability_replicas=None, durability_aof=False, \
                          durability_timeout=1.0)"
    )]
    fn new(py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Client> {
        block(py, connect(options(args, kwargs)?))
    }

    /// Connects without blocking the event loop; returns an awaitable of a `Client`. The
    /// options are those of `Client(...)`.
    #[staticmethod]
    #[pyo3(
        signature = (*args, **kwargs),
        text_signature = "(url, *, cluster=False, tls_ca_file=None, tls_cert_file=None, \
                          tls_key_file=None, durability_replicas=None, durability_aof=False, \
                          durability_timeout=1.0)"
    )]
    fn connect_async(py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Awaiting> {
        connect(options(args, kwargs)?).start(py)
    }

    /// A handle on the Redisson-compatible delayed queue `name`. Unless `scheduler` is
    /// false, this process moves its due entries (waking at least every
    /// `reconcile_interval` seconds).
    #[pyo3(
        signature = (name, *, scheduler = true, reconcile_interval = Arg::Default),
        text_signature = "($self, name, *, scheduler=True, reconcile_interval=1.0)"
    )]
    fn delayed_queue(&self, name: &str, scheduler: bool, reconcile_interval: Arg<'_>) -> PyResult<DelayedQueue> {
        let opts = self::scheduler(scheduler, reconcile_interval)?;
        let inner = self.inner.delayed_queue_with(name, opts).map_err(to_py)?;
        Ok(DelayedQueue { inner })
    }

    /// A handle on the reliable queue `name`: at-least-once delivery with ack.
    ///
    /// The queue's settings are stored in Redis with the queue and shared by every handle
    /// in every process: a setting left out (None) uses the stored one; a named one must
    /// match it (else the handle's first call raises `InvalidArgument` naming the
    /// difference) unless `update_settings` is true, which overwrites the stored ones. The
    /// first handle to make a call on a new queue stores what it names and the defaults for
    /// the rest.
    ///
    /// The settings: `visibility_timeout` (the lease of a delivery, default 30 s),
    /// `max_attempts` deliveries before the dead letters (default 5), the back-off of a
    /// `nack()` without delay: `backoff`, a list of delays (the last one repeats), or
    /// exponential with jitter from `backoff_base` to `backoff_max` (defaults 1 s and
    /// 600 s), `shards` (a power of two, default 1), `dead_letter_retention` and
    /// `idempotency_retention` (0: dead letters kept until requeued or purged, acked ids
    /// not kept, the defaults). Every duration is `int`, `float` or `timedelta` seconds.
    #[pyo3(
        signature = (name, *, visibility_timeout = None, max_attempts = None,
                     backoff = None, backoff_base = None, backoff_max = None, shards = None,
                     dead_letter_retention = None, idempotency_retention = None,
                     update_settings = false, scheduler = true,
                     reconcile_interval = Arg::Default),
        text_signature = "($self, name, *, visibility_timeout=None, max_attempts=None, \
                          backoff=None, backoff_base=None, backoff_max=None, shards=None, \
                          dead_letter_retention=None, idempotency_retention=None, \
                          update_settings=False, scheduler=True, reconcile_interval=1.0)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn reliable_queue(
        &self,
        name: &str,
        visibility_timeout: Option<&Bound<'_, PyAny>>,
        max_attempts: Option<&Bound<'_, PyAny>>,
        backoff: Option<Vec<Bound<'_, PyAny>>>,
        backoff_base: Option<&Bound<'_, PyAny>>,
        backoff_max: Option<&Bound<'_, PyAny>>,
        shards: Option<&Bound<'_, PyAny>>,
        dead_letter_retention: Option<&Bound<'_, PyAny>>,
        idempotency_retention: Option<&Bound<'_, PyAny>>,
        update_settings: bool,
        scheduler: bool,
        reconcile_interval: Arg<'_>,
    ) -> PyResult<ReliableQueue> {
        let (base, max) = (convert::opt_delay(backoff_base)?, convert::opt_delay(backoff_max)?);
        let backoff = match (backoff, base, max) {
            (Some(list), None, None) => Some(delayq::Backoff::Schedule(
                list.iter().map(convert::delay).collect::<PyResult<_>>()?,
            )),
            (Some(_), _, _) => return Err(invalid(
                "give backoff (a schedule) or backoff_base/backoff_max (exponential), not both",
            )),
            (None, None, None) => None,
            (None, base, max) => match delayq::Backoff::default() {
                delayq::Backoff::Exponential { base: b, max: m } => Some(delayq::Backoff::Exponential {
                    base: base.unwrap_or(b),
                    max: max.unwrap_or(m),
                }),
                schedule => Some(schedule),
            },
        };
        let opts = delayq::ReliableQueueOptions {
            visibility_timeout: convert::opt_delay(visibility_timeout)?,
            max_attempts: convert::opt_count(max_attempts, "max_attempts")?,
            backoff,
            shards: convert::opt_count(shards, "shards")?,
            dead_letter_retention: convert::opt_delay(dead_letter_retention)?,
            idempotency_retention: convert::opt_delay(idempotency_retention)?,
            update_settings,
            scheduler: self::scheduler(scheduler, reconcile_interval)?,
        };
        let inner = self.inner.reliable_queue(name, opts).map_err(to_py)?;
        Ok(ReliableQueue { inner })
    }

    /// Closes the client and every queue handle from it. Idempotent.
    fn close(&self) {
        self.inner.close();
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _exc_type: Py<PyAny>, _exc: Py<PyAny>, _tb: Py<PyAny>) -> bool {
        self.inner.close();
        false
    }

    fn __repr__(&self) -> String {
        let closed = if self.inner.is_closed() { "True" } else { "False" };
        format!("<delayq.Client closed={closed}>")
    }
}
