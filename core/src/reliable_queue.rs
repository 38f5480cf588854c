//! [`ReliableQueue`]: at-least-once delivery with acknowledgement, visibility timeout,
//! retries with back-off, dead letters, cancel and reschedule by id, de-duplication.
//!
//! The layout (all keys under the hash tag `{dq:N}`) and its reasons are in
//! `docs/reliable-queue.md`: waiting messages are packed into bucket lists of a
//! hierarchical timing wheel kept in Redis (1 s, 1 min, 1 h and 1 day buckets, cascading
//! into finer ones as they come near), promoted to a small sorted set shortly before they
//! come due, and made ready as entries of a Redis stream read by a consumer group, whose
//! pending-entries list tracks what is in flight.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use redis::aio::ConnectionLike;
use redis::Value;

use crate::client::Client;
use crate::delay::{check_value, delay_to_millis};
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::keys::ReliableKeys;
use crate::scheduler::{SchedulerGuard, SchedulerOptions, TransferOutcome};
use crate::scripts;

/// Width of one time bucket of the wheel's finest level, in ms (a generated id names the
/// level-0 bucket of its due time). Part of the data layout: every process on a queue must
/// agree on it.
pub const BUCKET_WIDTH_MS: u64 = 1000;

/// The levels of the timing wheel, finest first: (bucket width, lead) in ms. A bucket opens
/// `lead` before it starts, and its messages then cascade to the finer levels (from level 0,
/// one bucket ahead: to the `near` sorted set); a coarser level's lead is ten buckets of the
/// level below. Part of the data layout, like [`BUCKET_WIDTH_MS`]; `docs/reliable-queue.md`
/// gives the reasons.
pub const WHEEL_LEVELS: [(u64, u64); 4] = [
    (BUCKET_WIDTH_MS, BUCKET_WIDTH_MS),
    (60_000, 10_000),
    (3_600_000, 600_000),
    (86_400_000, 36_000_000),
];

/// The levels as the scripts take them (`ARGV[2]`): `width:lead,width:lead,...`.
fn wheel_arg(levels: &[(u64, u64)]) -> Arc<str> {
    levels
        .iter()
        .map(|(w, a)| format!("{w}:{a}"))
        .collect::<Vec<_>>()
        .join(",")
        .into()
}

static DEFAULT_WHEEL: LazyLock<Arc<str>> = LazyLock::new(|| wheel_arg(&WHEEL_LEVELS));
static WHEEL_OVERRIDES: LazyLock<Mutex<HashMap<String, Arc<str>>>> =
    LazyLock::new(Default::default);
static WHEEL_OVERRIDDEN: AtomicBool = AtomicBool::new(false);

/// The wheel levels of a queue in this process (the default unless a test changed them).
fn wheel_of(keys: &ReliableKeys) -> Arc<str> {
    if WHEEL_OVERRIDDEN.load(Ordering::Relaxed) {
        if let Some(w) = WHEEL_OVERRIDES.lock().unwrap().get(&keys.name) {
            return w.clone();
        }
    }
    DEFAULT_WHEEL.clone()
}

/// Not part of the API, for tests and benchmarks: gives the reliable queue named `queue`
/// other wheel levels in this process, `(bucket width, lead)` finest first, so that a
/// cascade through every level takes seconds, or one level of 1 s buckets (the layout before
/// the wheel had levels). `None` restores the default. The levels are part of the data
/// layout: set them before the queue's first handle, and use the same in every process.
#[doc(hidden)]
pub fn set_wheel_levels(queue: &str, levels: Option<&[(Duration, Duration)]>) -> Result<()> {
    let mut overrides = WHEEL_OVERRIDES.lock().unwrap();
    let Some(levels) = levels else {
        overrides.remove(queue);
        return Ok(());
    };
    let ms: Vec<(u64, u64)> = levels
        .iter()
        .map(|(w, a)| Ok((delay_to_millis(*w)?, delay_to_millis(*a)?)))
        .collect::<Result<_>>()?;
    if ms.is_empty() || ms.len() > 8 {
        return Err(Error::invalid("a wheel has 1 to 8 levels"));
    }
    for (i, &(width, lead)) in ms.iter().enumerate() {
        if width == 0 || width > u32::MAX as u64 {
            return Err(Error::invalid("a bucket width is 1 ms to 49 days"));
        }
        if let Some(&(finer, finer_lead)) = i.checked_sub(1).map(|j| &ms[j]) {
            if width % finer != 0 || lead < finer_lead {
                return Err(Error::invalid(
                    "each level's width is a multiple of the finer one's, its lead no shorter",
                ));
            }
        }
    }
    overrides.insert(queue.to_owned(), wheel_arg(&ms));
    WHEEL_OVERRIDDEN.store(true, Ordering::Relaxed);
    Ok(())
}

/// The scripts take the default levels without parsing them (reliable_lib.lua).
#[cfg(test)]
#[test]
fn the_scripts_know_the_default_wheel() {
    let lib = include_str!("scripts/reliable_lib.lua");
    assert!(lib.contains(&format!("ARGV[2] == '{}'", &*DEFAULT_WHEEL)));
}

/// The longest id a caller may give.
pub const MAX_ID_LEN: usize = 256;

const GROUP: &str = "delayq";

/// How long to wait before retrying a message that failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Backoff {
    /// `base * 2^(attempt-1)`, capped at `max`, with full jitter (a random delay between
    /// half of that and all of it) so that failures do not retry in lockstep.
    Exponential {
        /// Delay after the first failed attempt.
        base: Duration,
        /// The longest delay.
        max: Duration,
    },
    /// Explicit delays after the 1st, 2nd, ... failed attempt; the last one repeats.
    /// For example 15 s, 3 min, 10 min, 30 min, 1 h.
    Schedule(Vec<Duration>),
}

impl Default for Backoff {
    /// Exponential from 1 s up to 10 min.
    fn default() -> Self {
        Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(600),
        }
    }
}

impl Backoff {
    /// The delay before retrying after failed attempt number `attempt` (1 for the first).
    pub fn delay_for(&self, attempt: u32) -> Duration {
        match self {
            Backoff::Exponential { base, max } => {
                let exp = attempt.saturating_sub(1).min(40);
                let full = base.saturating_mul(1u32 << exp.min(31)).min(*max);
                let jitter: f64 = rand::random::<f64>() * 0.5 + 0.5;
                full.mul_f64(jitter)
            }
            Backoff::Schedule(delays) => {
                let i = (attempt.max(1) as usize - 1).min(delays.len().saturating_sub(1));
                delays.get(i).copied().unwrap_or_default()
            }
        }
    }

    fn validate(&self) -> Result<()> {
        match self {
            Backoff::Exponential { base, max } => {
                delay_to_millis(*base)?;
                delay_to_millis(*max)?;
            }
            Backoff::Schedule(delays) => {
                if delays.is_empty() {
                    return Err(Error::invalid(
                        "a back-off schedule needs at least one delay",
                    ));
                }
                for d in delays {
                    delay_to_millis(*d)?;
                }
            }
        }
        Ok(())
    }
}

/// Options of a reliable queue handle. Every process on one queue should use the same
/// visibility timeout and maximum attempts.
#[derive(Debug, Clone)]
pub struct ReliableQueueOptions {
    /// How long a received message stays invisible before it is delivered again unless
    /// acked or nacked (default 30 s).
    pub visibility_timeout: Duration,
    /// Deliveries before a message goes to the dead letters (default 5, at most 255).
    pub max_attempts: u32,
    /// The delay before a retry when `nack` is called without one.
    pub backoff: Backoff,
    /// The transfer task of this handle.
    pub scheduler: SchedulerOptions,
}

impl Default for ReliableQueueOptions {
    fn default() -> Self {
        ReliableQueueOptions {
            visibility_timeout: Duration::from_secs(30),
            max_attempts: 5,
            backoff: Backoff::default(),
            scheduler: SchedulerOptions::default(),
        }
    }
}

impl ReliableQueueOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.visibility_timeout < Duration::from_millis(1) {
            return Err(Error::invalid("visibility timeout must be at least 1 ms"));
        }
        delay_to_millis(self.visibility_timeout)?;
        if !(1..=255).contains(&self.max_attempts) {
            return Err(Error::invalid(format!(
                "max_attempts must be between 1 and 255, got {}",
                self.max_attempts
            )));
        }
        self.backoff.validate()
    }
}

/// Counts of a reliable queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReliableStats {
    /// Messages waiting for their due time.
    pub delayed: u64,
    /// Messages due and not yet received.
    pub ready: u64,
    /// Messages received and neither acked, nacked nor timed out.
    pub in_flight: u64,
    /// Messages in the dead letters.
    pub dead: u64,
}

/// A message in the dead letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message id.
    pub id: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// Deliveries it had.
    pub attempts: u32,
    /// When it was buried (server Unix ms).
    pub died_at: i64,
}

/// A received message. Ack it when done, nack it to retry; if neither happens within the
/// visibility timeout it is delivered again.
#[derive(Clone)]
pub struct Delivery {
    /// The message id (generated, or the caller's).
    pub id: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// Which delivery this is: 1 for the first.
    pub attempt: u32,
    /// When the message came due (server Unix ms).
    pub due_at: i64,
    receipt: String,
    queue: ReliableQueue,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("due_at", &self.due_at)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl Delivery {
    /// Acknowledges the message: it is done and will not be delivered again. Returns
    /// false when this delivery had already ended (acked or nacked before, or its
    /// visibility timeout passed and the message went back to the queue).
    pub async fn ack(&self) -> Result<bool> {
        self.queue.ack(&self.receipt, &self.id).await
    }

    /// Gives the message back for a retry after `delay` (default: the queue's back-off
    /// for this attempt), or to the dead letters if this was its last attempt. Returns
    /// false when this delivery had already ended.
    pub async fn nack(&self, delay: Option<Duration>) -> Result<bool> {
        let delay = delay.unwrap_or_else(|| self.queue.inner.opts.backoff.delay_for(self.attempt));
        self.queue.nack(&self.receipt, delay, true).await
    }

    /// Gives the message back untouched: ready again at once, this delivery not counted as
    /// an attempt. For a wrapper (a binding, a task) that received a message and then could
    /// not hand it over. Returns false when this delivery had already ended. Works on a
    /// closed handle too.
    pub async fn release(&self) -> Result<bool> {
        self.queue
            .give_back(&self.receipt, Duration::ZERO, false)
            .await
    }

    /// The receipt of this delivery (the stream entry id), for logs.
    pub fn receipt(&self) -> &str {
        &self.receipt
    }
}

/// A handle on one reliable queue. Cheap to clone; clones share the handle.
#[derive(Clone)]
pub struct ReliableQueue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    handle: Handle,
    keys: ReliableKeys,
    opts: ReliableQueueOptions,
}

impl std::fmt::Debug for ReliableQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableQueue")
            .field("name", &self.inner.keys.name)
            .finish_non_exhaustive()
    }
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("message id must not be empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(format!(
            "message id of {} bytes is over the limit of {MAX_ID_LEN}",
            id.len()
        )));
    }
    Ok(())
}

fn random_hex16() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// One pass of a reliable queue's transfer script, repeated while it finds a full batch.
pub(crate) async fn transfer_due(
    conn: &mut (impl ConnectionLike + Send),
    keys: &ReliableKeys,
    batch: usize,
    visibility_ms: u64,
    max_attempts: u32,
) -> Result<TransferOutcome> {
    let mut total = 0;
    loop {
        let mut call = scripts::RELIABLE_TRANSFER.prepare_invoke();
        for k in keys.script_keys() {
            call.key(k);
        }
        call.arg(&keys.prefix)
            .arg(&*wheel_of(keys))
            .arg(batch)
            .arg(visibility_ms)
            .arg(max_attempts);
        let (done, next, now): (u64, i64, i64) = call.invoke_async(conn).await?;
        total += done;
        if done < batch as u64 {
            return Ok(TransferOutcome {
                moved: total,
                next_due: (next >= 0).then_some(next),
                now,
            });
        }
    }
}

impl ReliableQueue {
    pub(crate) fn new(
        client: Client,
        keys: ReliableKeys,
        opts: ReliableQueueOptions,
        scheduler: Option<Arc<SchedulerGuard>>,
    ) -> Self {
        ReliableQueue {
            inner: Arc::new(QueueInner {
                handle: Handle::new(client, scheduler),
                keys,
                opts,
            }),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.keys.name
    }

    /// The Redis keys of this queue.
    pub fn keys(&self) -> &ReliableKeys {
        &self.inner.keys
    }

    /// The options of this handle.
    pub fn options(&self) -> &ReliableQueueOptions {
        &self.inner.opts
    }

    fn check_open(&self) -> Result<()> {
        self.inner.handle.check_open()
    }

    fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.inner.handle.commands()
    }

    fn invocation<'a>(&'a self, script: &'a redis::Script) -> redis::ScriptInvocation<'a> {
        let mut call = script.prepare_invoke();
        for k in self.inner.keys.script_keys() {
            call.key(k);
        }
        call.arg(&self.inner.keys.prefix)
            .arg(&*wheel_of(&self.inner.keys));
        call
    }

    /// Offers a message due after `delay`; returns its id. With `id`, a message with that
    /// id still waiting or in flight is not offered twice: the call returns the id and
    /// leaves the existing message as it is (payload and due time unchanged). Without
    /// `id`, a unique one is generated.
    pub async fn offer(
        &self,
        payload: impl AsRef<[u8]>,
        delay: Duration,
        id: Option<&str>,
    ) -> Result<String> {
        let mut ids = self.offer_all([(payload, delay, id)]).await?;
        Ok(ids.remove(0))
    }

    /// Offers many messages in one round trip per thousand; returns their ids in order.
    /// Every argument is checked before anything is sent.
    pub async fn offer_all<'a, P, I>(&self, messages: I) -> Result<Vec<String>>
    where
        P: AsRef<[u8]>,
        I: IntoIterator<Item = (P, Duration, Option<&'a str>)>,
    {
        self.check_open()?;
        let mut checked = Vec::new();
        for (payload, delay, id) in messages {
            check_value(payload.as_ref())?;
            if let Some(id) = id {
                check_id(id)?;
            }
            checked.push((payload, delay_to_millis(delay)?, id.unwrap_or("")));
        }
        let mut out = Vec::with_capacity(checked.len());
        for chunk in checked.chunks(1000) {
            let mut call = self.invocation(&scripts::RELIABLE_OFFER);
            call.key(&self.inner.keys.channel);
            for (payload, delay_ms, id) in chunk {
                call.arg(*delay_ms)
                    .arg(*id)
                    .arg(random_hex16())
                    .arg(payload.as_ref());
            }
            let rows: Vec<(String, i64)> = self
                .inner
                .handle
                .client
                .inner
                .conn
                .write(&call, &self.inner.keys.ready)
                .await?;
            out.extend(rows.into_iter().map(|(id, _)| id));
        }
        Ok(out)
    }

    /// Removes a message that has not come due yet; returns whether there was one.
    pub async fn cancel(&self, id: &str) -> Result<bool> {
        self.check_open()?;
        check_id(id)?;
        let mut call = self.invocation(&scripts::RELIABLE_CANCEL);
        call.arg(id);
        let n: i64 = call.invoke_async(&mut self.commands()).await?;
        Ok(n == 1)
    }

    /// Moves a message that has not come due yet to a new due time, `delay` from now;
    /// returns whether there was one.
    pub async fn reschedule(&self, id: &str, delay: Duration) -> Result<bool> {
        self.check_open()?;
        check_id(id)?;
        let ms = delay_to_millis(delay)?;
        let mut call = self.invocation(&scripts::RELIABLE_RESCHEDULE);
        call.key(&self.inner.keys.channel).arg(id).arg(ms);
        let at: i64 = call.invoke_async(&mut self.commands()).await?;
        Ok(at >= 0)
    }

    /// Receives the next ready message, waiting up to `timeout` (`None`: forever) on the
    /// server. Returns `None` when the time passes. The message stays invisible to other
    /// consumers until acked, nacked, or its visibility timeout passes.
    ///
    /// Cancel-safe: if the returned future is dropped while the server hands over a
    /// message, the message is given back at once (not counted as an attempt).
    pub async fn receive(&self, timeout: Option<Duration>) -> Result<Option<Delivery>> {
        self.check_open()?;
        let queue = self.clone();
        self.inner
            .handle
            .blocking(
                "receive",
                timeout,
                move |mut conn, wait| {
                    let queue = queue.clone();
                    async move {
                        let block_ms = wait.as_millis().clamp(1, u64::MAX as u128) as u64;
                        let mut reply = read_group(&mut conn, &queue, block_ms).await;
                        if matches!(&reply, Err(e) if e.to_string().contains("NOGROUP")) {
                            reply = match create_group(&mut conn, &queue.inner.keys.ready).await {
                                Ok(()) => read_group(&mut conn, &queue, block_ms).await,
                                Err(e) => Err(e),
                            };
                        }
                        (conn, reply)
                    }
                },
                |delivery: Delivery| async move {
                    if let Err(e) = delivery.release().await {
                        tracing::warn!(queue = %delivery.queue.name(), error = %e, "could not give back an abandoned delivery; it returns after the visibility timeout");
                    }
                },
            )
            .await
    }

    async fn ack(&self, receipt: &str, id: &str) -> Result<bool> {
        self.check_open()?;
        let mut call = self.invocation(&scripts::RELIABLE_ACK);
        call.arg(receipt).arg(id);
        let n: i64 = self
            .inner
            .handle
            .client
            .inner
            .conn
            .write(&call, &self.inner.keys.ready)
            .await?;
        Ok(n == 1)
    }

    async fn nack(&self, receipt: &str, delay: Duration, count_attempt: bool) -> Result<bool> {
        self.check_open()?;
        self.give_back(receipt, delay, count_attempt).await
    }

    /// Ends a delivery with a retry (or burial), even on a closed handle: used to return
    /// a delivery nobody waits for any more.
    async fn give_back(&self, receipt: &str, delay: Duration, count_attempt: bool) -> Result<bool> {
        let ms = delay_to_millis(delay)?;
        let mut call = self.invocation(&scripts::RELIABLE_NACK);
        call.key(&self.inner.keys.channel)
            .arg(receipt)
            .arg(ms)
            .arg(self.inner.opts.max_attempts)
            .arg(if count_attempt { "1" } else { "0" });
        let n: i64 = call.invoke_async(&mut self.commands()).await?;
        Ok(n != 0)
    }

    /// Counts of delayed, ready, in-flight and dead messages.
    pub async fn stats(&self) -> Result<ReliableStats> {
        self.check_open()?;
        let (delayed, ready, in_flight, dead): (u64, u64, u64, u64) = self
            .invocation(&scripts::RELIABLE_STATS)
            .invoke_async(&mut self.commands())
            .await?;
        Ok(ReliableStats {
            delayed,
            ready,
            in_flight,
            dead,
        })
    }

    /// Up to `limit` messages from the dead letters (in no particular order).
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        self.check_open()?;
        let mut call = self.invocation(&scripts::RELIABLE_DEAD);
        call.arg("list").arg(limit);
        let rows: Vec<(String, u32, i64, Vec<u8>)> =
            call.invoke_async(&mut self.commands()).await?;
        Ok(rows
            .into_iter()
            .map(|(id, attempts, died_at, payload)| DeadLetter {
                id,
                payload,
                attempts,
                died_at,
            })
            .collect())
    }

    /// Makes dead letters ready again, with their attempts reset: those with the given
    /// ids, or all of them with `None`. Returns how many were requeued.
    pub async fn requeue_dead(&self, ids: Option<&[String]>) -> Result<u64> {
        self.check_open()?;
        let mut total = 0;
        match ids {
            Some(ids) => {
                for id in ids {
                    check_id(id)?;
                }
                for chunk in ids.chunks(1000) {
                    let mut call = self.invocation(&scripts::RELIABLE_DEAD);
                    call.arg("requeue");
                    for id in chunk {
                        call.arg(id);
                    }
                    let n: u64 = call.invoke_async(&mut self.commands()).await?;
                    total += n;
                }
            }
            None => loop {
                let mut call = self.invocation(&scripts::RELIABLE_DEAD);
                call.arg("requeue");
                let n: u64 = call.invoke_async(&mut self.commands()).await?;
                total += n;
                if n == 0 {
                    break;
                }
            },
        }
        Ok(total)
    }

    /// Deletes every dead letter; returns how many there were.
    pub async fn purge_dead(&self) -> Result<u64> {
        self.check_open()?;
        let mut call = self.invocation(&scripts::RELIABLE_DEAD);
        call.arg("purge");
        Ok(call.invoke_async(&mut self.commands()).await?)
    }

    /// Runs `handler` on received messages, `concurrency` at a time: acks each message
    /// whose handler returns `Ok`, nacks (with the back-off) each that returns `Err` or
    /// panics. Returns when the handle or its client is closed.
    pub async fn consume<F, Fut, E>(&self, handler: F, concurrency: usize) -> Result<()>
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        if concurrency == 0 {
            return Err(Error::invalid("concurrency must be at least 1"));
        }
        self.check_open()?;
        let handler = Arc::new(handler);
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (queue, handler) = (self.clone(), handler.clone());
            workers.spawn(async move { queue.consume_loop(&*handler).await });
        }
        let mut result = Ok(());
        while let Some(r) = workers.join_next().await {
            if let Ok(Err(e)) = r {
                result = Err(e);
            }
        }
        result
    }

    async fn consume_loop<F, Fut, E>(&self, handler: &F) -> Result<()>
    where
        F: Fn(Delivery) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>> + Send,
        E: std::fmt::Display,
    {
        let mut pause = Duration::from_millis(50);
        loop {
            let delivery = match self.receive(Some(Duration::from_secs(1))).await {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(e) if e.kind() == crate::ErrorKind::Closed => return Ok(()),
                Err(e) => {
                    tracing::warn!(queue = %self.name(), error = %e, "receive failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            pause = Duration::from_millis(50);
            let outcome = std::panic::AssertUnwindSafe(handler(delivery.clone()))
                .catch_unwind()
                .await;
            let settled = match outcome {
                Ok(Ok(())) => delivery.ack().await,
                Ok(Err(e)) => {
                    tracing::info!(queue = %self.name(), id = %delivery.id, attempt = delivery.attempt, error = %e, "handler failed; nacking");
                    delivery.nack(None).await
                }
                Err(_) => {
                    tracing::warn!(queue = %self.name(), id = %delivery.id, "handler panicked; nacking");
                    delivery.nack(None).await
                }
            };
            match settled {
                Err(e) if e.kind() == crate::ErrorKind::Closed => return Ok(()),
                Err(e) => {
                    tracing::warn!(queue = %self.name(), error = %e, "could not settle a delivery; it returns after the visibility timeout")
                }
                Ok(_) => {}
            }
        }
    }

    /// Runs the transfer script now (promote, make ready, take back expired deliveries).
    pub async fn transfer_now(&self) -> Result<TransferOutcome> {
        self.check_open()?;
        transfer_due(
            &mut self.commands(),
            &self.inner.keys,
            self.inner.opts.scheduler.batch_size,
            self.inner.opts.visibility_timeout.as_millis() as u64,
            self.inner.opts.max_attempts,
        )
        .await
    }

    /// Closes this handle: stops its share of the transfer task and fails later calls
    /// (and a pending `receive`) with [`Error::Closed`]. Idempotent.
    pub fn close(&self) {
        self.inner.handle.close();
    }
}

async fn create_group(conn: &mut (impl ConnectionLike + Send), stream: &str) -> Result<()> {
    let r: redis::RedisResult<Value> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("BUSYGROUP") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn read_group(
    conn: &mut (impl ConnectionLike + Send),
    queue: &ReliableQueue,
    block_ms: u64,
) -> Result<Option<Delivery>> {
    let reply: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg(queue.inner.handle.client.consumer_name())
        .arg("COUNT")
        .arg(1)
        .arg("BLOCK")
        .arg(block_ms)
        .arg("STREAMS")
        .arg(&queue.inner.keys.ready)
        .arg(">")
        .query_async(conn)
        .await?;
    parse_read(reply, queue)
}

/// Parses an XREADGROUP reply of at most one entry (RESP2 array or RESP3 map).
fn parse_read(reply: Value, queue: &ReliableQueue) -> Result<Option<Delivery>> {
    let streams = match reply {
        Value::Nil => return Ok(None),
        Value::Array(streams) => streams
            .into_iter()
            .filter_map(|s| match s {
                Value::Array(mut kv) if kv.len() == 2 => kv.pop(),
                _ => None,
            })
            .collect::<Vec<_>>(),
        Value::Map(pairs) => pairs.into_iter().map(|(_, v)| v).collect(),
        other => {
            return Err(Error::Server(format!(
                "unexpected XREADGROUP reply: {other:?}"
            )))
        }
    };
    let Some(Value::Array(entries)) = streams.into_iter().next() else {
        return Ok(None);
    };
    let Some(Value::Array(entry)) = entries.into_iter().next() else {
        return Ok(None);
    };
    let mut entry = entry.into_iter();
    let receipt: String = redis::from_redis_value(entry.next().unwrap_or(Value::Nil))
        .map_err(|e| Error::Server(format!("bad stream entry id: {e}")))?;
    let fields: Vec<(String, Vec<u8>)> =
        redis::from_redis_value(entry.next().unwrap_or(Value::Nil))
            .map_err(|e| Error::Server(format!("bad stream entry: {e}")))?;
    let mut delivery = Delivery {
        id: String::new(),
        payload: Vec::new(),
        attempt: 1,
        due_at: 0,
        receipt,
        queue: queue.clone(),
    };
    for (k, v) in fields {
        let text = || String::from_utf8_lossy(&v).into_owned();
        match k.as_str() {
            "i" => delivery.id = text(),
            "a" => delivery.attempt = text().parse::<u32>().unwrap_or(0) + 1,
            "d" => delivery.due_at = text().parse().unwrap_or(0),
            "p" => delivery.payload = v,
            _ => {}
        }
    }
    Ok(Some(delivery))
}
