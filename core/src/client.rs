//! The entry point: a [`Client`] holds the connections and hands out queue handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio_util::sync::CancellationToken;

use crate::connection::{ClientOptions, Connection};
use crate::delayed_queue::DelayedQueue;
use crate::error::{Error, Result};
use crate::handle::CALL_MARGIN;
use crate::keys::{DelayedKeys, QueueOfKey, ReliableKeys};
use crate::pubsub::Subscriber;
use crate::reliable_queue::{ReliableQueue, ReliableQueueOptions};
use crate::scheduler::{self, Job, SchedulerGuard, SchedulerOptions};

fn check_scheduler_options(opts: &SchedulerOptions) -> Result<()> {
    // Under a millisecond, the transfer task would run passes back to back (thousands of
    // commands a second for one idle queue): a unit mistake, not a setting.
    if opts.reconcile_interval < std::time::Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "reconcile interval must be at least 1 ms, got {} ms",
            opts.reconcile_interval.as_secs_f64() * 1000.0
        )));
    }
    if opts.batch_size == 0 || opts.batch_size > 100_000 {
        return Err(Error::invalid("batch size must be between 1 and 100000"));
    }
    Ok(())
}

/// Checks the name and options of a delayed queue handle as [`Client::delayed_queue_with`]
/// does, without a client: a program (the command line) can refuse bad input before it
/// connects. `cluster`: for a cluster client (the queue's keys must share one slot).
pub fn check_delayed_queue(name: &str, opts: &SchedulerOptions, cluster: bool) -> Result<()> {
    let keys = DelayedKeys::new(name)?;
    if cluster {
        keys.check_one_slot()?;
    }
    check_scheduler_options(opts)
}

/// Checks the name and options of a reliable queue handle as [`Client::reliable_queue`]
/// does, without a client (see [`check_delayed_queue`]).
pub fn check_reliable_queue(name: &str, opts: &ReliableQueueOptions) -> Result<()> {
    ReliableKeys::new(name)?;
    opts.validate()?;
    if let Some(n) = opts.shards {
        ReliableKeys::shard(name, 0, n)?; // a name that can be split into `n` shards
    }
    check_scheduler_options(&opts.scheduler)
}

/// A failure to connect with the server it was for (its URL redacted), so that a caller
/// whose URL came from a default or the environment can tell where it tried.
fn naming_target(e: Error, target: &str) -> Error {
    match e {
        Error::Connection(m) => Error::Connection(format!("{m} (connecting to {target})")),
        Error::Timeout(m) => Error::Timeout(format!("{m} (connecting to {target})")),
        other => other,
    }
}

/// The queues [`Client::scan_queues`] found, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoundQueues {
    /// Reliable queues.
    pub reliable: std::collections::BTreeSet<String>,
    /// Redisson-compatible delayed queues.
    pub delayed: std::collections::BTreeSet<String>,
}

/// A connection to Redis (one server or a cluster). Cheap to clone; clones share the
/// connections. Closing one closes all.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) conn: Connection,
    /// The runtime it was made on (see [`Client::runtime`]), and `host::forks()` then.
    runtime: tokio::runtime::Handle,
    forks: u64,
    pub(crate) token: CancellationToken,
    consumer: String,
    pub(crate) subscriber: Subscriber,
    schedulers: Mutex<HashMap<String, Weak<SchedulerGuard>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The runtime the client's tasks run on: the one it was made on, or, in a process
    /// forked since (where no thread runs that one), the runtime of the caller, if any.
    pub(crate) fn runtime(&self) -> tokio::runtime::Handle {
        if self.inner.forks != crate::host::forks() {
            if let Ok(current) = tokio::runtime::Handle::try_current() {
                return current;
            }
        }
        self.inner.runtime.clone()
    }

    /// Connects to the Redis server at `url` (`redis://[user:pass@]host:port/db`,
    /// `rediss://` for TLS, `redis+unix:///path`). Must be called inside a tokio runtime;
    /// queue handles run their background tasks on that runtime.
    pub async fn connect(url: &str) -> Result<Client> {
        Self::connect_with(ClientOptions::new(url)).await
    }

    /// Connects with explicit options (a cluster, time limits).
    pub async fn connect_with(opts: ClientOptions) -> Result<Client> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("Client::connect must run inside a tokio runtime"))?;
        crate::scripts::make_all();
        let target = opts
            .urls
            .iter()
            .map(|u| crate::connection::redact_url(u))
            .collect::<Vec<_>>()
            .join(",");
        let conn = Connection::open(opts)
            .await
            .map_err(|e| naming_target(e, &target))?;
        let token = CancellationToken::new();
        let subscriber = Subscriber::spawn(&runtime, conn.clone(), token.clone());
        Ok(Client {
            inner: Arc::new(ClientInner {
                conn,
                runtime,
                forks: crate::host::forks(),
                token,
                subscriber,
                consumer: format!("delayq-{:016x}", crate::random::random::<u64>()),
                schedulers: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Connects as [`connect_with`](Self::connect_with) does, giving up (a `timeout`
    /// error) when `deadline` has passed by the margin within which a blocking call of core
    /// answers past its timeout: a caller's timeout that counts the connect too (the CLI's
    /// `--timeout-ms`) is kept as a blocking call keeps its own. No deadline: no limit but
    /// the connect timeout of `opts`.
    pub async fn connect_by(
        opts: ClientOptions,
        deadline: Option<std::time::Instant>,
    ) -> Result<Client> {
        let connect = Self::connect_with(opts);
        let Some(deadline) = deadline else {
            return connect.await;
        };
        let by = tokio::time::Instant::from_std(deadline + CALL_MARGIN);
        match tokio::time::timeout_at(by, connect).await {
            Ok(connected) => connected,
            Err(_) => Err(Error::Timeout(format!(
                "no connection to Redis within the timeout (plus {CALL_MARGIN:?})"
            ))),
        }
    }

    /// A handle on the Redisson-compatible delayed queue `name`, running the transfer
    /// task for it (see [`SchedulerOptions`]).
    pub fn delayed_queue(&self, name: &str) -> Result<DelayedQueue> {
        self.delayed_queue_with(name, SchedulerOptions::default())
    }

    /// A handle on the delayed queue `name` with explicit scheduler options.
    pub fn delayed_queue_with(&self, name: &str, opts: SchedulerOptions) -> Result<DelayedQueue> {
        self.check_open()?;
        check_delayed_queue(name, &opts, self.inner.conn.options().is_cluster())?;
        let keys = DelayedKeys::new(name)?;
        let guard = opts
            .enabled
            .then(|| self.scheduler_for(Job::Delayed(keys.clone()), &opts));
        Ok(DelayedQueue::new(self.clone(), keys, opts, guard))
    }

    /// A handle on the reliable queue `name` (at-least-once delivery with
    /// acknowledgement; see [`ReliableQueue`]), running its transfer task unless
    /// `opts.scheduler.enabled` is false.
    pub fn reliable_queue(&self, name: &str, opts: ReliableQueueOptions) -> Result<ReliableQueue> {
        self.check_open()?;
        check_reliable_queue(name, &opts)?;
        let keys = ReliableKeys::new(name)?;
        let guard = opts.scheduler.enabled.then(|| {
            self.scheduler_for(
                Job::Reliable {
                    keys: keys.clone(),
                    tidied: Default::default(),
                    bell: None,
                },
                &opts.scheduler,
            )
        });
        let queue = ReliableQueue::new(self.clone(), keys, opts, guard);
        queue.follow_stored_shards();
        Ok(queue)
    }

    /// One transfer task per queue per client, shared by its handles.
    pub(crate) fn scheduler_for(&self, job: Job, opts: &SchedulerOptions) -> Arc<SchedulerGuard> {
        let mut map = self.inner.schedulers.lock().expect("scheduler lock");
        if let Some(guard) = map.get(job.channel()).and_then(Weak::upgrade) {
            guard.share(opts);
            return guard;
        }
        let channel = job.channel().to_owned();
        let guard = scheduler::spawn(
            &self.runtime(),
            self.inner.conn.clone(),
            &self.inner.subscriber,
            job,
            opts.clone(),
            &self.inner.token,
        );
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(channel, Arc::downgrade(&guard));
        guard
    }

    /// Whether Redis holds a reliable queue named `name`: its stored settings or any key
    /// of its (first shard's) layout. For tools given a queue name without its kind.
    pub async fn reliable_queue_exists(&self, name: &str) -> Result<bool> {
        self.check_open()?;
        let keys = ReliableKeys::new(name)?;
        let mut exists = redis::cmd("EXISTS");
        exists.arg(keys.settings()).arg(&keys.script_keys()[..]);
        Ok(self.query::<u64>(&exists).await? > 0)
    }

    /// The queues that have keys in Redis: reliable queues by their keys (a shard's name
    /// the sharded queue), delayed queues by Redisson's timeout set. It `SCAN`s every key
    /// of the server, or of every master of a cluster (at most a million per node): for
    /// tools that list queues (`delayq serve` every 30 s), not for a hot path.
    pub async fn scan_queues(&self) -> Result<FoundQueues> {
        self.check_open()?;
        let mut found = FoundQueues::default();
        self.inner
            .conn
            .scan("*", 1000, |keys| {
                for key in keys {
                    match crate::keys::queue_of_key(&key) {
                        Some(QueueOfKey::Reliable(name)) => found.reliable.insert(name.to_owned()),
                        Some(QueueOfKey::Delayed(name)) => found.delayed.insert(name.to_owned()),
                        None => false,
                    };
                }
            })
            .await?;
        Ok(found)
    }

    /// The Redis server's clock in Unix milliseconds (the clock due times are based on).
    pub async fn server_time_ms(&self) -> Result<i64> {
        self.check_open()?;
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.inner.conn.commands())
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }

    /// Runs one Redis command on the client's connection. For tools built on core that keep
    /// keys of their own beside a queue's (`delayq serve` keeps webhook records in
    /// `{dq:N}:webhook`); a queue's own keys are for its handles. Not part of the stable API.
    #[doc(hidden)]
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.check_open()?;
        Ok(cmd.query_async(&mut self.inner.conn.commands()).await?)
    }

    /// The name this client uses as a consumer in reliable queues' consumer groups.
    pub(crate) fn consumer_name(&self) -> &str {
        &self.inner.consumer
    }

    /// Closes the client: stops every background task and fails later calls on it and on
    /// its queues with [`Error::Closed`]. Idempotent.
    pub fn close(&self) {
        self.inner.token.cancel();
        self.inner.conn.close();
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.token.is_cancelled()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::Closed("the client is closed"))
        } else {
            Ok(())
        }
    }
}
