//! [`DelayedQueue`]: Redisson's `RDelayedQueue` layout, driven from Rust.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::client::Client;
use crate::codec;
use crate::delay::{check_value, delay_to_millis};
use crate::error::{naming_wrong_key, Error, Result};
use crate::handle::Handle;
use crate::keys::DelayedKeys;
use crate::logs::Escaped;
use crate::metrics::{self, Event, QueueKind::Delayed};
use crate::scheduler::{self, SchedulerGuard, SchedulerOptions, TransferOutcome};
use crate::scripts;

mod coalesce;

/// Entries per offer script call: large enough for one round trip per thousand, small
/// enough to keep each script call short.
const OFFER_CHUNK: usize = 1000;

/// Counts of a delayed queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DelayedStats {
    /// Entries still waiting for their due time.
    pub delayed: u64,
    /// Values in the destination list, ready to be taken.
    pub ready: u64,
    /// Entries that could not be decoded and were moved aside.
    pub corrupt: u64,
}

/// A handle on one Redisson-compatible delayed queue. Cheap to clone; clones share the
/// handle (and its transfer task). Values are bytes.
#[derive(Clone)]
pub struct DelayedQueue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    handle: Handle,
    keys: DelayedKeys,
    opts: SchedulerOptions,
    offers: coalesce::Coalescer,
    /// Set once a take found the queue list and timeout set of their types (or absent).
    keys_checked: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for DelayedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayedQueue")
            .field("name", &self.inner.keys.destination)
            .finish_non_exhaustive()
    }
}

impl QueueInner {
    /// One offer script call for checked entries (value, delay in ms), at most
    /// [`OFFER_CHUNK`] of them. Returns their due times, in order.
    async fn send_offers<'a>(
        &self,
        entries: impl ExactSizeIterator<Item = (&'a [u8], u64)>,
    ) -> Result<Vec<i64>> {
        let count = entries.len();
        let mut call = scripts::OFFER.prepare_invoke();
        call.key(&self.keys.timeout_set)
            .key(&self.keys.queue_list)
            .key(&self.keys.channel)
            .key(&self.keys.destination);
        for (value, delay_ms) in entries {
            call.arg(delay_ms).arg(&codec::random_id()[..]).arg(value);
        }
        // A cluster client resends a request after an I/O error; the token makes a second
        // run of this call return the first run's due times (SPEC section 10).
        if self.handle.client.inner.conn.options().is_cluster() {
            let token = hex_token();
            call.key(format!("{}:{token}", self.keys.offer_token_prefix))
                .arg(token);
        }
        let due: Vec<i64> = self
            .handle
            .client
            .inner
            .conn
            .write(&call, &self.keys.timeout_set)
            .await?;
        if due.len() != count {
            return Err(Error::Server(format!(
                "the offer script returned {} due times for {count} entries",
                due.len()
            )));
        }
        metrics::record(
            Delayed,
            &self.keys.destination,
            Event::Offered(count as u64),
        );
        Ok(due)
    }
}

/// `Ok` when `key`, whose `TYPE` is `found`, is a sorted set or absent.
fn zset_or_none(key: &str, found: &str) -> Result<()> {
    match found {
        "zset" | "none" => Ok(()),
        t => Err(Error::WrongType(format!(
            "key {key} holds a {t}, not a zset"
        ))),
    }
}

impl DelayedQueue {
    pub(crate) fn new(
        client: Client,
        keys: DelayedKeys,
        opts: SchedulerOptions,
        scheduler: Option<Arc<SchedulerGuard>>,
    ) -> Self {
        DelayedQueue {
            inner: Arc::new(QueueInner {
                handle: Handle::new(client, scheduler),
                keys,
                opts,
                offers: coalesce::Coalescer::default(),
                keys_checked: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// The runtime the client's tasks run on.
    pub(crate) fn runtime(&self) -> tokio::runtime::Handle {
        self.inner.handle.runtime()
    }

    /// The queue's name (its destination list).
    pub fn name(&self) -> &str {
        &self.inner.keys.destination
    }

    /// The Redis keys of this queue.
    pub fn keys(&self) -> &DelayedKeys {
        &self.inner.keys
    }

    fn check_open(&self) -> Result<()> {
        self.inner.handle.check_open()
    }

    fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.inner.handle.commands()
    }

    /// Offers `value` to be delivered after `delay`. Returns the due time in Unix ms, as
    /// computed from the Redis server's clock.
    ///
    /// Concurrent offers on one handle (and its clones) are coalesced: while one offer
    /// script call is in flight, the offers made meanwhile go together in the next one (at
    /// most 1000), each with its own delay and due time. A lone offer is sent at once, from
    /// the returned future. Arguments are checked first, so a bad one fails only its own
    /// call; a Redis error fails every offer of the script call it was in.
    ///
    /// The offer takes its place in the handle's order when `offer` is called, not when the
    /// future is first polled, so offers keep the order of the calls even when each runs in
    /// a task of its own. Dropping the future before its offer was sent withdraws it;
    /// closing the handle fails the offers not yet sent with [`Error::Closed`].
    pub fn offer(
        &self,
        value: impl AsRef<[u8]>,
        delay: Duration,
    ) -> impl Future<Output = Result<i64>> + Send {
        let joined = self
            .check_open()
            .and_then(|()| check_value(value.as_ref()))
            .and_then(|()| delay_to_millis(delay))
            .map(|delay_ms| coalesce::join(&self.inner, value.as_ref(), delay_ms));
        async move { joined?.outcome().await }
    }

    /// Offers many values, one round trip per thousand. Returns their due times, in order.
    /// Every argument is checked before anything is sent.
    pub async fn offer_all<V, I>(&self, entries: I) -> Result<Vec<i64>>
    where
        V: AsRef<[u8]>,
        I: IntoIterator<Item = (V, Duration)>,
    {
        self.check_open()?;
        let mut checked = Vec::new();
        for (value, delay) in entries {
            check_value(value.as_ref())?;
            checked.push((value, delay_to_millis(delay)?));
        }
        let mut due = Vec::with_capacity(checked.len());
        for chunk in checked.chunks(OFFER_CHUNK) {
            let part = self
                .inner
                .send_offers(
                    chunk
                        .iter()
                        .map(|(value, delay_ms)| (value.as_ref(), *delay_ms)),
                )
                .await?;
            due.extend(part);
        }
        Ok(due)
    }

    /// The number of entries still waiting for their due time.
    pub async fn size(&self) -> Result<u64> {
        self.check_open()?;
        let mut llen = redis::cmd("LLEN");
        self.waiting(llen.arg(&self.inner.keys.queue_list)).await
    }

    /// Runs `read` (of the queue list) beside a `TYPE` of the timeout set, so that a call
    /// that reads the list alone, as Redisson's do, still fails as `WrongType` when either
    /// key holds another type. (`TYPE`, not `ZCARD`: the ACL rule of docs/security.md
    /// already has it.)
    async fn waiting<T: redis::FromRedisValue>(&self, read: &redis::Cmd) -> Result<T> {
        let keys = &self.inner.keys;
        let mut pipe = redis::pipe();
        pipe.add_command(read.clone())
            .cmd("TYPE")
            .arg(&keys.timeout_set);
        let reply: Result<(T, String)> = pipe
            .query_async(&mut self.commands())
            .await
            .map_err(Error::from);
        match reply {
            Ok((read, set)) => zset_or_none(&keys.timeout_set, &set).map(|()| read),
            Err(Error::WrongType(_)) => {
                let typed = [(&keys.queue_list, "list"), (&keys.timeout_set, "zset")];
                Err(self.wrong_typed(&typed).await)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether a waiting entry holds `value`.
    pub async fn contains(&self, value: impl AsRef<[u8]>) -> Result<bool> {
        self.check_open()?;
        check_value(value.as_ref())?;
        let found: i64 = scripts::CONTAINS
            .key(&self.inner.keys.queue_list)
            .key(&self.inner.keys.timeout_set)
            .arg(value.as_ref())
            .invoke_async(&mut self.commands())
            .await?;
        Ok(found == 1)
    }

    /// Removes the first waiting entry holding `value`; returns whether there was one.
    pub async fn remove(&self, value: impl AsRef<[u8]>) -> Result<bool> {
        self.check_open()?;
        check_value(value.as_ref())?;
        let removed: i64 = scripts::REMOVE
            .key(&self.inner.keys.queue_list)
            .key(&self.inner.keys.timeout_set)
            .arg(value.as_ref())
            .invoke_async(&mut self.commands())
            .await?;
        Ok(removed == 1)
    }

    /// The values still waiting, in offer order. Undecodable entries are skipped.
    pub async fn read_all(&self) -> Result<Vec<Vec<u8>>> {
        self.check_open()?;
        let mut lrange = redis::cmd("LRANGE");
        let lrange = lrange.arg(&self.inner.keys.queue_list).arg(0).arg(-1);
        let packed: Vec<Vec<u8>> = self.waiting(lrange).await?;
        Ok(packed
            .iter()
            .filter_map(|p| match codec::unpack(p) {
                Ok((_, value)) => Some(value.to_vec()),
                Err(e) => {
                    tracing::warn!(queue = ?self.name(), error = %Escaped(&e), "skipping entry in read_all");
                    None
                }
            })
            .collect())
    }

    /// Deletes every waiting entry (values already in the destination stay).
    pub async fn clear(&self) -> Result<()> {
        self.check_open()?;
        let _: i64 = scripts::CLEAR
            .key(&self.inner.keys.queue_list)
            .key(&self.inner.keys.timeout_set)
            .invoke_async(&mut self.commands())
            .await?;
        Ok(())
    }

    /// Puts `value` back at the head of the destination, where `take` and `poll` found
    /// it, so that it is the next one taken: for a wrapper (a binding, a task) that took a
    /// value and then could not hand it over. Works on a closed handle too.
    pub async fn give_back(&self, value: impl AsRef<[u8]>) -> Result<()> {
        give_back_to(
            &mut self.commands(),
            &self.inner.keys.destination,
            value.as_ref(),
        )
        .await
    }

    /// Takes the oldest due value if there is one, without waiting.
    ///
    /// A value that came due since the transfer task's last pass counts: with the
    /// destination empty, one transfer call moves what is due and takes the head in the
    /// same script call, so that a value offered with no delay can be polled at once (even
    /// while a transfer task moves it).
    pub async fn poll(&self) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let value = poll_on(
            &mut self.commands(),
            &self.inner.keys,
            self.inner.opts.batch_size,
        )
        .await?;
        metrics::record(
            Delayed,
            self.name(),
            Event::Delivered(value.is_some() as u64),
        );
        Ok(value)
    }

    /// Takes the oldest due value, waiting up to `timeout` (`None`: forever) for one.
    /// Returns `None` when the time passes.
    ///
    /// Cancel-safe: if the returned future is dropped while the server is handing over a
    /// value, the value is pushed back to the head of the destination, not lost.
    ///
    /// A timeout of zero takes as [`DelayedQueue::poll`] does, within the same bound as
    /// any timeout (its answer within 2 s, whatever the network does), and as cancel-safe.
    ///
    /// A handle's first take also checks the types of the queue's keys, beside its wait:
    /// a queue list or timeout set of another type, which stops the transfer task from
    /// ever filling the destination, ends the take as `WrongType` instead of leaving it
    /// waiting (forever, with no timeout).
    pub async fn take(&self, timeout: Option<Duration>) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let take = self.take_from_destination(timeout);
        let checked = &self.inner.keys_checked;
        if checked.initialized() {
            return take.await;
        }
        // One check at a time; only its success is kept (a key fixed later is seen).
        // (Its requests go over the multiplexed connection even when a host's blocking call
        // polls this take: never a read on the calling thread that the take cannot bound.)
        let wrong_type = crate::connection::Indirect(async {
            let check = checked.get_or_try_init(|| async {
                let mut llen = redis::cmd("LLEN");
                let llen = llen.arg(&self.inner.keys.queue_list);
                self.waiting::<u64>(llen).await.map(drop)
            });
            match check.await {
                Err(e @ Error::WrongType(_)) => e,
                _ => std::future::pending().await, // (a lasting other error meets the take too)
            }
        });
        // The take is cancel-safe: dropped for the error, what it took goes back.
        tokio::select! {
            taken = take => taken,
            e = wrong_type => Err(e),
        }
    }

    async fn take_from_destination(&self, timeout: Option<Duration>) -> Result<Option<Vec<u8>>> {
        let (keys, dest_back) = (self.inner.keys.clone(), self.inner.keys.destination.clone());
        let batch = self.inner.opts.batch_size;
        let commands = self.commands();
        self.inner
            .handle
            .blocking(
                "take",
                timeout,
                move |mut conn, wait| {
                    let keys = keys.clone();
                    async move {
                        let reply = if wait.is_zero() {
                            poll_on(&mut conn, &keys, batch).await
                        } else {
                            // BLPOP takes seconds with millisecond resolution.
                            let secs = format!("{:.3}", wait.as_secs_f64());
                            let reply: redis::RedisResult<Option<(Vec<u8>, Vec<u8>)>> =
                                redis::cmd("BLPOP").arg(&keys.destination).arg(&secs).query_async(&mut conn).await;
                            reply.map(|r| r.map(|(_, value)| value)).map_err(Into::into)
                        };
                        let reply = match reply {
                            Err(e) => Err(naming_wrong_key(&mut conn, e, &[(&keys.destination, "list")]).await),
                            ok => ok,
                        };
                        (conn, reply)
                    }
                },
                move |value| {
                    let (mut commands, dest_back) = (commands.clone(), dest_back.clone());
                    async move {
                        if let Err(e) = give_back_to(&mut commands, &dest_back, &value).await {
                            tracing::error!(queue = ?dest_back, error = %Escaped(&e), "a value taken by a cancelled or abandoned take may not have gone back to the queue");
                        }
                    }
                },
            )
            .await
            .inspect(|v| {
                metrics::record(Delayed, self.name(), Event::Delivered(v.is_some() as u64));
            })
    }

    /// Counts of waiting, ready and corrupt entries.
    pub async fn stats(&self) -> Result<DelayedStats> {
        self.check_open()?;
        let keys = &self.inner.keys;
        let lists = [&keys.queue_list, &keys.destination, &keys.corrupt_list];
        let mut pipe = redis::pipe();
        for key in lists {
            pipe.cmd("LLEN").arg(key);
        }
        pipe.cmd("TYPE").arg(&keys.timeout_set); // (as `waiting`)
        let reply = pipe.query_async(&mut self.commands()).await;
        let (delayed, ready, corrupt, set): (u64, u64, u64, String) =
            match reply.map_err(Error::from) {
                Err(Error::WrongType(_)) => {
                    let typed = lists.map(|key| (key, "list"));
                    return Err(self.wrong_typed(&typed).await);
                }
                counts => counts?,
            };
        zset_or_none(&keys.timeout_set, &set)?;
        Ok(DelayedStats {
            delayed,
            ready,
            corrupt,
        })
    }

    /// The error of a command that met a key of another type among `typed` (each key with
    /// the type it should have): it names the key and its type (redis-rs's pipeline error
    /// names neither).
    async fn wrong_typed(&self, typed: &[(&String, &str)]) -> Error {
        for &(key, want) in typed {
            let found: Result<String> = redis::cmd("TYPE")
                .arg(key)
                .query_async(&mut self.commands())
                .await
                .map_err(Error::from);
            match found {
                Ok(t) if t != want && t != "none" => {
                    return Error::WrongType(format!("key {key} holds a {t}, not a {want}"));
                }
                Ok(_) => {}
                Err(e) => return e,
            }
        }
        Error::WrongType("a key of the queue changed type during the call".into())
    }

    /// Moves every due entry to the destination now, without waiting for the transfer
    /// task. Returns what the pass found.
    pub async fn transfer_now(&self) -> Result<TransferOutcome> {
        self.check_open()?;
        scheduler::transfer_due(
            &mut self.commands(),
            &self.inner.keys,
            self.inner.opts.batch_size,
        )
        .await
    }

    /// Closes this handle: stops its share of the transfer task and fails later calls
    /// (and a pending `take`) with [`Error::Closed`]. Other handles are unaffected.
    /// Idempotent.
    pub fn close(&self) {
        self.inner.handle.close();
    }
}

/// A random token naming one offer call.
fn hex_token() -> String {
    format!(
        "{:016x}{:016x}",
        crate::random::random::<u64>(),
        crate::random::random::<u64>()
    )
}

/// `LPOP` of `destination`.
async fn pop_head(
    conn: &mut (impl ConnectionLike + Send),
    destination: &str,
) -> Result<Option<Vec<u8>>> {
    let popped = redis::cmd("LPOP").arg(destination).query_async(conn).await;
    match popped {
        Ok(value) => Ok(value),
        Err(e) => Err(naming_wrong_key(conn, e.into(), &[(destination, "list")]).await),
    }
}

/// The head of the destination, or with it empty, what one transfer call makes due: see
/// [`DelayedQueue::poll`].
async fn poll_on(
    conn: &mut (impl ConnectionLike + Send),
    keys: &DelayedKeys,
    batch: usize,
) -> Result<Option<Vec<u8>>> {
    let value = pop_head(conn, &keys.destination).await?;
    if value.is_some() {
        return Ok(value);
    }
    // The pop in the transfer's script call: a transfer task (this handle's own, or another
    // process's) that moved an entry after the first pop must not make this poll miss it.
    scheduler::transfer_and_pop(conn, keys, batch).await
}

/// Pushes a taken value back to the head of `destination`, where it was.
async fn give_back_to(
    commands: &mut (impl ConnectionLike + Send),
    destination: &str,
    value: &[u8],
) -> Result<()> {
    let _: i64 = redis::cmd("LPUSH")
        .arg(destination)
        .arg(value)
        .query_async(commands)
        .await?;
    Ok(())
}
