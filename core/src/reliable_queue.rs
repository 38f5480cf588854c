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
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

mod consume;
mod settings;

use settings::NamedSettings;
pub use settings::ReliableSettings;

use crate::client::Client;
use crate::delay::{check_value, delay_to_millis};
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::keys::ReliableKeys;
use crate::metrics::{self, Event, QueueKind::Reliable};
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

/// The most messages one `receive_many` call takes.
pub const MAX_RECEIVE: usize = 1000;

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

/// Options of a reliable queue handle. The queue's settings (visibility timeout, attempts,
/// back-off, shards, retentions) are stored in Redis with the queue and shared by every
/// handle in every process (see [`ReliableSettings`]): a field left `None` uses the stored
/// value; a named one must match it, or the handle's first call fails with
/// [`Error::InvalidArgument`] naming the difference, unless `update_settings` is set.
/// The first handle that names settings and makes a call stores them, with the defaults for
/// the rest; a handle that names none stores nothing (it uses the defaults until some are).
#[derive(Debug, Clone, Default)]
pub struct ReliableQueueOptions {
    /// How long a received message stays invisible (its lease) before it is delivered
    /// again unless acked, nacked or extended (default 30 s).
    pub visibility_timeout: Option<Duration>,
    /// Deliveries before a message goes to the dead letters (default 5, at most 255).
    pub max_attempts: Option<u32>,
    /// The delay before a retry when `nack` is called without one.
    pub backoff: Option<Backoff>,
    /// Sub-queues (a power of two, default 1).
    pub shards: Option<u32>,
    /// How long dead letters are kept (zero: until requeued or purged, the default).
    pub dead_letter_retention: Option<Duration>,
    /// How long acked ids are remembered for de-duplication (zero: not at all, the
    /// default).
    pub idempotency_retention: Option<Duration>,
    /// Overwrite the stored settings with the named ones instead of failing on a
    /// difference (what `delayq reliable configure` does).
    pub update_settings: bool,
    /// The transfer task of this handle.
    pub scheduler: SchedulerOptions,
}

impl ReliableQueueOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        self.named().validate()
    }

    fn named(&self) -> NamedSettings {
        NamedSettings {
            visibility_timeout: self.visibility_timeout,
            max_attempts: self.max_attempts,
            backoff: self.backoff.clone(),
            shards: self.shards,
            dead_letter_retention: self.dead_letter_retention,
            idempotency_retention: self.idempotency_retention,
        }
    }
}

/// What [`ReliableQueue::offer_with_outcome`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferOutcome {
    /// The message id (the caller's, or a generated one).
    pub id: String,
    /// `true` when this call created the message; `false` when a message with this id was
    /// already waiting, ready, in flight, or acked within the idempotency retention.
    pub created: bool,
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

/// A received message. Ack it when done, nack it to retry; if neither happens before its
/// lease ends ([`Delivery::deadline`], extended with [`Delivery::extend`]) it is delivered
/// again.
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
    deadline: Arc<AtomicI64>,
    receipt: String,
    queue: ReliableQueue,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("due_at", &self.due_at)
            .field("deadline", &self.deadline())
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl Delivery {
    /// When this delivery's lease ends (server Unix ms): past it, the message may be
    /// handed to another consumer. Moved by [`Delivery::extend`].
    pub fn deadline(&self) -> i64 {
        self.deadline.load(Ordering::Relaxed)
    }

    /// Acknowledges the message: it is done and will not be delivered again. Returns
    /// false when this delivery had already ended (acked or nacked before, or its lease
    /// ended and the message went back to the queue): the message may then be processed
    /// again elsewhere (counted in [`ReliableQueue::lost_leases`]). Works after the handle
    /// was closed (not after its client was).
    pub async fn ack(&self) -> Result<bool> {
        let acked = self
            .queue
            .ack_receipts(&[(&self.receipt, &self.id)])
            .await?;
        Ok(acked[0])
    }

    /// Gives the message back for a retry after `delay` (default: the queue's stored
    /// back-off for this attempt), or to the dead letters if this was its last attempt.
    /// Returns false when this delivery had already ended.
    pub async fn nack(&self, delay: Option<Duration>) -> Result<bool> {
        self.queue.nack(&self.receipt, delay, true).await
    }

    /// Moves the end of this delivery's lease to `duration` from now (SQS's
    /// ChangeMessageVisibility: shorter than what is left shortens it). Returns false when
    /// the lease was already lost (the message was taken back, acked or nacked).
    pub async fn extend(&self, duration: Duration) -> Result<bool> {
        self.queue.client_open()?;
        let ms = delay_to_millis(duration)?;
        let mut call = self.queue.invocation(&scripts::RELIABLE_LEASE);
        call.arg("extend").arg(&self.receipt).arg(ms);
        let ends: Vec<i64> = call.invoke_async(&mut self.queue.commands()).await?;
        match ends.first() {
            Some(&at) if at >= 0 => {
                self.deadline.store(at, Ordering::Relaxed);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Gives the message back untouched: ready again at once, this delivery not counted as
    /// an attempt. For a wrapper (a binding, a task) that received a message and then could
    /// not hand it over. Returns false when this delivery had already ended. Works on a
    /// closed handle too.
    pub async fn release(&self) -> Result<bool> {
        self.queue
            .give_back(&self.receipt, Some(Duration::ZERO), false)
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
    /// The stored settings, read (or created) by the handle's first call.
    settings: OnceCell<ReliableSettings>,
    /// Cancelled by a graceful close: consumers stop receiving.
    stopping: CancellationToken,
    /// Acks that found their delivery already ended.
    lost_leases: AtomicU64,
    /// Running `consume` calls, and a wake-up for when the last returns.
    consumers: std::sync::atomic::AtomicUsize,
    consumers_idle: tokio::sync::Notify,
    /// Set by `close_gracefully`: until when running handlers may finish.
    graceful_deadline: std::sync::Mutex<Option<tokio::time::Instant>>,
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
/// The visibility timeout and max attempts are the queue's stored settings.
pub(crate) async fn transfer_due(
    conn: &mut (impl ConnectionLike + Send),
    keys: &ReliableKeys,
    batch: usize,
) -> Result<TransferOutcome> {
    let mut total = 0;
    loop {
        let mut call = scripts::RELIABLE_TRANSFER.prepare_invoke();
        for k in keys.script_keys() {
            call.key(k);
        }
        call.arg(&keys.prefix).arg(&*wheel_of(keys)).arg(batch);
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

/// How often a transfer task removes gone consumers from the group.
pub(crate) const TIDY_INTERVAL: Duration = Duration::from_secs(60);

/// A consumer with nothing pending that has not read for this long is removed from the
/// group. A live consumer reads at least every few seconds (long waits are split).
pub const CONSUMER_IDLE_LIMIT: Duration = Duration::from_secs(600);

/// Removes consumers that hold nothing and have not read for [`CONSUMER_IDLE_LIMIT`].
pub(crate) async fn remove_idle_consumers(
    conn: &mut (impl ConnectionLike + Send),
    keys: &ReliableKeys,
) -> Result<u64> {
    let mut call = scripts::RELIABLE_CONSUMERS.prepare_invoke();
    for k in keys.script_keys() {
        call.key(k);
    }
    call.arg(&keys.prefix)
        .arg(&*wheel_of(keys))
        .arg("idle")
        .arg(CONSUMER_IDLE_LIMIT.as_millis() as u64);
    let removed: u64 = call.invoke_async(conn).await?;
    if removed > 0 {
        tracing::debug!(queue = %keys.name, removed, "removed idle consumers from the group");
    }
    Ok(removed)
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
                settings: OnceCell::new(),
                stopping: CancellationToken::new(),
                lost_leases: AtomicU64::new(0),
                consumers: Default::default(),
                consumers_idle: Default::default(),
                graceful_deadline: Default::default(),
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

    /// Ends of deliveries (ack, nack, extend, release) work on a closed handle, so that a
    /// graceful close can settle what its handlers finished; not on a closed client.
    fn client_open(&self) -> Result<()> {
        self.inner.handle.client.check_open()
    }

    /// The stored settings, created from this handle's options if the queue has none;
    /// fails when the handle names settings that differ from the stored ones. Read once per
    /// handle.
    async fn ensure_settings(&self) -> Result<&ReliableSettings> {
        self.inner
            .settings
            .get_or_try_init(|| async {
                let mode = if self.inner.opts.update_settings {
                    "update"
                } else {
                    "ensure"
                };
                self.load_settings(mode).await
            })
            .await
    }

    async fn load_settings(&self, mode: &str) -> Result<ReliableSettings> {
        let named = self.inner.opts.named().fields();
        let mut call = self.invocation(&scripts::RELIABLE_SETTINGS);
        call.arg(mode).arg(named.len());
        for (f, v) in named
            .iter()
            .chain(ReliableSettings::default().fields().iter())
        {
            call.arg(*f).arg(v);
        }
        let pairs: Vec<(String, String)> = match call.invoke_async(&mut self.commands()).await {
            Ok(p) => p,
            Err(e) if e.to_string().contains("DELAYQSETTINGS") => {
                let msg = e.to_string();
                let msg = msg
                    .split("DELAYQSETTINGS")
                    .nth(1)
                    .unwrap_or(&msg)
                    .trim_matches(|c: char| c == ':' || c == '"' || c.is_whitespace());
                return Err(Error::invalid(format!(
                    "{msg} (leave them out to use the stored ones, or update them explicitly)"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        ReliableSettings::from_fields(&pairs)
    }

    /// The queue's settings as stored in Redis now (created from this handle's options if
    /// the queue has none yet).
    pub async fn settings(&self) -> Result<ReliableSettings> {
        self.check_open()?;
        self.ensure_settings().await?;
        self.load_settings("get").await
    }

    /// Acks, since this handle was made, that found their delivery already ended: each
    /// means a handler's work may be done twice (its lease ended before the ack).
    pub fn lost_leases(&self) -> u64 {
        self.inner.lost_leases.load(Ordering::Relaxed)
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
    /// id still waiting, ready or in flight (or acked within the idempotency retention) is
    /// not offered twice: the call returns the id and leaves the existing message as it is
    /// (payload and due time unchanged). Without `id`, a unique one is generated.
    pub async fn offer(
        &self,
        payload: impl AsRef<[u8]>,
        delay: Duration,
        id: Option<&str>,
    ) -> Result<String> {
        Ok(self.offer_with_outcome(payload, delay, id).await?.id)
    }

    /// Like [`ReliableQueue::offer`], and tells whether this call created the message or
    /// found one with the same id (de-duplicated).
    pub async fn offer_with_outcome(
        &self,
        payload: impl AsRef<[u8]>,
        delay: Duration,
        id: Option<&str>,
    ) -> Result<OfferOutcome> {
        let mut out = self.offer_all_with_outcome([(payload, delay, id)]).await?;
        Ok(out.remove(0))
    }

    /// Offers many messages in one round trip per thousand; returns their ids in order.
    /// Every argument is checked before anything is sent.
    pub async fn offer_all<'a, P, I>(&self, messages: I) -> Result<Vec<String>>
    where
        P: AsRef<[u8]>,
        I: IntoIterator<Item = (P, Duration, Option<&'a str>)>,
    {
        let out = self.offer_all_with_outcome(messages).await?;
        Ok(out.into_iter().map(|o| o.id).collect())
    }

    /// [`ReliableQueue::offer_all`], telling for each message whether it was created.
    pub async fn offer_all_with_outcome<'a, P, I>(&self, messages: I) -> Result<Vec<OfferOutcome>>
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
        self.ensure_settings().await?;
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
            out.extend(rows.into_iter().map(|(id, created)| OfferOutcome {
                id,
                created: created == 1,
            }));
        }
        let created = out.iter().filter(|o| o.created).count() as u64;
        metrics::record(Reliable, self.name(), Event::Offered(created));
        Ok(out)
    }

    /// Removes a message that no consumer has received yet; returns whether there was one.
    pub async fn cancel(&self, id: &str) -> Result<bool> {
        self.check_open()?;
        check_id(id)?;
        self.ensure_settings().await?;
        let mut call = self.invocation(&scripts::RELIABLE_CANCEL);
        call.arg(id);
        let n: i64 = call.invoke_async(&mut self.commands()).await?;
        Ok(n == 1)
    }

    /// Moves a message that no consumer has received yet to a new due time, `delay` from
    /// now; returns whether there was one.
    pub async fn reschedule(&self, id: &str, delay: Duration) -> Result<bool> {
        self.check_open()?;
        check_id(id)?;
        let ms = delay_to_millis(delay)?;
        self.ensure_settings().await?;
        let mut call = self.invocation(&scripts::RELIABLE_RESCHEDULE);
        call.key(&self.inner.keys.channel).arg(id).arg(ms);
        let at: i64 = call.invoke_async(&mut self.commands()).await?;
        Ok(at >= 0)
    }

    /// Receives the next ready message, waiting up to `timeout` (`None`: forever) on the
    /// server. Returns `None` when the time passes. The message stays invisible to other
    /// consumers until acked or nacked, or until its lease ends
    /// ([`Delivery::deadline`]).
    ///
    /// Cancel-safe: if the returned future is dropped while the server hands over a
    /// message, the message is given back at once (not counted as an attempt).
    pub async fn receive(&self, timeout: Option<Duration>) -> Result<Option<Delivery>> {
        Ok(self.receive_many(1, timeout).await?.pop())
    }

    /// Receives up to `n` ready messages in one round trip, waiting up to `timeout`
    /// (`None`: forever) for the first. Returns an empty list when the time passes.
    /// Cancel-safe like [`ReliableQueue::receive`].
    pub async fn receive_many(&self, n: usize, timeout: Option<Duration>) -> Result<Vec<Delivery>> {
        self.check_open()?;
        if n == 0 || n > MAX_RECEIVE {
            return Err(Error::invalid(format!(
                "receive_many takes 1 to {MAX_RECEIVE} messages, got {n}"
            )));
        }
        let visibility = self.ensure_settings().await?.visibility_timeout;
        let queue = self.clone();
        let got = self
            .inner
            .handle
            .blocking(
                "receive",
                timeout,
                move |mut conn, wait| {
                    let queue = queue.clone();
                    async move {
                        let block_ms = wait.as_millis().clamp(1, u64::MAX as u128) as u64;
                        let mut reply = read_group(&mut conn, &queue, n, block_ms).await;
                        if matches!(&reply, Err(e) if e.to_string().contains("NOGROUP")) {
                            reply = match create_group(&mut conn, &queue.inner.keys.ready).await {
                                Ok(()) => read_group(&mut conn, &queue, n, block_ms).await,
                                Err(e) => Err(e),
                            };
                        }
                        if let Ok(Some(deliveries)) = &reply {
                            start_leases(&mut conn, &queue, deliveries, visibility).await;
                        }
                        (conn, reply)
                    }
                },
                |deliveries: Vec<Delivery>| async move {
                    for delivery in deliveries {
                        if let Err(e) = delivery.release().await {
                            tracing::warn!(queue = %delivery.queue.name(), error = %e, "could not give back an abandoned delivery; it returns after its lease ends");
                        }
                    }
                },
            )
            .await?;
        let got = got.unwrap_or_default();
        metrics::record(Reliable, self.name(), Event::Delivered(got.len() as u64));
        let vis_ms = visibility.as_millis() as i64;
        metrics::record_lateness(
            Reliable,
            self.name(),
            got.iter().map(|d| d.deadline() - vis_ms - d.due_at),
        );
        Ok(got)
    }

    /// Acks many deliveries in one round trip; returns, for each, whether its lease was
    /// still held (see [`Delivery::ack`]).
    pub async fn ack_many(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        let pairs: Vec<(&str, &str)> = deliveries
            .iter()
            .map(|d| (d.receipt.as_str(), d.id.as_str()))
            .collect();
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(1000) {
            out.extend(self.ack_receipts(chunk).await?);
        }
        Ok(out)
    }

    async fn ack_receipts(&self, pairs: &[(&str, &str)]) -> Result<Vec<bool>> {
        self.client_open()?;
        let mut call = self.invocation(&scripts::RELIABLE_ACK);
        for (receipt, id) in pairs {
            call.arg(*receipt).arg(*id);
        }
        let acked: Vec<i64> = self
            .inner
            .handle
            .client
            .inner
            .conn
            .write(&call, &self.inner.keys.ready)
            .await?;
        let acked: Vec<bool> = acked.into_iter().map(|n| n == 1).collect();
        let lost = acked.iter().filter(|a| !**a).count() as u64;
        metrics::record(
            Reliable,
            self.name(),
            Event::Acked(acked.len() as u64 - lost),
        );
        if lost > 0 {
            self.inner.lost_leases.fetch_add(lost, Ordering::Relaxed);
            tracing::warn!(queue = %self.name(), lost, "acks found their delivery already ended (lease lost): that work may be done again");
        }
        Ok(acked)
    }

    async fn nack(
        &self,
        receipt: &str,
        delay: Option<Duration>,
        count_attempt: bool,
    ) -> Result<bool> {
        self.client_open()?;
        self.give_back(receipt, delay, count_attempt).await
    }

    /// Ends a delivery with a retry (or burial), even on a closed handle: used to return
    /// a delivery nobody waits for any more. `delay` `None`: the stored back-off.
    async fn give_back(
        &self,
        receipt: &str,
        delay: Option<Duration>,
        count_attempt: bool,
    ) -> Result<bool> {
        let ms: i64 = match delay {
            Some(d) => delay_to_millis(d)? as i64,
            None => -1,
        };
        let jitter = 0.5 + rand::random::<f64>() * 0.5;
        let mut call = self.invocation(&scripts::RELIABLE_NACK);
        call.key(&self.inner.keys.channel)
            .arg(receipt)
            .arg(ms)
            .arg(format!("{jitter:.4}"))
            .arg(if count_attempt { "1" } else { "0" });
        let n: i64 = call.invoke_async(&mut self.commands()).await?;
        if count_attempt {
            let event = if n == 2 {
                Event::Dead(1)
            } else {
                Event::Nacked(n as u64)
            };
            metrics::record(Reliable, self.name(), event);
        }
        Ok(n != 0)
    }

    /// Counts of delayed, ready, in-flight and dead messages.
    pub async fn stats(&self) -> Result<ReliableStats> {
        self.check_open()?;
        self.ensure_settings().await?;
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
        self.ensure_settings().await?;
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
        // Checked before anything reaches Redis (the settings included).
        for id in ids.unwrap_or_default() {
            check_id(id)?;
        }
        self.ensure_settings().await?;
        let mut total = 0;
        match ids {
            Some(ids) => {
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
        self.ensure_settings().await?;
        let mut call = self.invocation(&scripts::RELIABLE_DEAD);
        call.arg("purge");
        Ok(call.invoke_async(&mut self.commands()).await?)
    }

    /// Runs the transfer script now (promote, make ready, take back expired deliveries).
    pub async fn transfer_now(&self) -> Result<TransferOutcome> {
        self.check_open()?;
        self.ensure_settings().await?;
        transfer_due(
            &mut self.commands(),
            &self.inner.keys,
            self.inner.opts.scheduler.batch_size,
        )
        .await
    }

    /// Closes this handle at once: stops its share of the transfer task and fails later
    /// calls (and a pending `receive`) with [`Error::Closed`]; deliveries already received
    /// can still be acked or nacked. Idempotent. See also [`ReliableQueue::close_gracefully`].
    pub fn close(&self) {
        if self.inner.handle.is_closed() {
            return;
        }
        self.inner.stopping.cancel();
        self.inner.handle.close();
        self.leave_group();
    }

    /// Removes this client's consumer from the group if it holds no delivery, so that
    /// processes that come and go do not grow the group (see [`CONSUMER_IDLE_LIMIT`] for
    /// the rest).
    fn leave_group(&self) {
        if self.inner.handle.client.is_closed() || self.inner.settings.get().is_none() {
            return;
        }
        let queue = self.clone();
        self.inner.handle.runtime().spawn(async move {
            let mut call = queue.invocation(&scripts::RELIABLE_CONSUMERS);
            call.arg("leave").arg(queue.inner.handle.client.consumer_name());
            if let Err(e) = call.invoke_async::<u64>(&mut queue.commands()).await {
                tracing::debug!(queue = %queue.name(), error = %e, "could not leave the consumer group");
            }
        });
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
    count: usize,
    block_ms: u64,
) -> Result<Option<Vec<Delivery>>> {
    let reply: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg(queue.inner.handle.client.consumer_name())
        .arg("COUNT")
        .arg(count)
        .arg("BLOCK")
        .arg(block_ms)
        .arg("STREAMS")
        .arg(&queue.inner.keys.ready)
        .arg(">")
        .query_async(conn)
        .await?;
    let deliveries = parse_read(reply, queue)?;
    Ok((!deliveries.is_empty()).then_some(deliveries))
}

/// Starts the leases of deliveries just received (server clock) and sets their deadlines.
/// If that call fails the deliveries stand (a delivery with no recorded lease is taken
/// back by its idle time); their deadlines are then the client's estimate.
async fn start_leases(
    conn: &mut (impl ConnectionLike + Send),
    queue: &ReliableQueue,
    deliveries: &[Delivery],
    visibility: Duration,
) {
    let mut call = queue.invocation(&scripts::RELIABLE_LEASE);
    call.arg("start");
    for d in deliveries {
        call.arg(&d.receipt);
    }
    match call.invoke_async::<Vec<i64>>(conn).await {
        Ok(ends) => {
            for (d, at) in deliveries.iter().zip(ends) {
                d.deadline.store(at, Ordering::Relaxed);
            }
        }
        Err(e) => {
            tracing::warn!(queue = %queue.name(), error = %e, "could not record delivery leases; they end by idle time");
            let estimate = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                + visibility;
            for d in deliveries {
                d.deadline
                    .store(estimate.as_millis() as i64, Ordering::Relaxed);
            }
        }
    }
}

/// Parses an XREADGROUP reply (RESP2 array or RESP3 map) into deliveries.
fn parse_read(reply: Value, queue: &ReliableQueue) -> Result<Vec<Delivery>> {
    let streams = match reply {
        Value::Nil => return Ok(Vec::new()),
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
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(entry) = entry else { continue };
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
            deadline: Arc::new(AtomicI64::new(0)),
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
        out.push(delivery);
    }
    Ok(out)
}
