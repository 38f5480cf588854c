//! [`ReliableQueue`]: at-least-once delivery with acknowledgement, visibility timeout,
//! retries with back-off, dead letters, cancel and reschedule by id, de-duplication.
//!
//! The layout (all keys under the hash tag `{dq:N}`) and its reasons are in
//! `docs/reliable-queue.md`: waiting messages are packed into bucket lists of a
//! hierarchical timing wheel kept in Redis (1 s, 1 min, 1 h and 1 day buckets, cascading
//! into finer ones as they come near), promoted to a small sorted set shortly before they
//! come due, and made ready as entries of a Redis stream read by a consumer group, whose
//! pending-entries list tracks what is in flight.
//!
//! A queue with `shards = S > 1` is S such queues, each under a hash tag of its own so that
//! a cluster spreads them over its masters (`docs/cluster.md`): a message lives in the shard
//! of its shard key or id ([`crate::keys::shard_for`]), receives sweep the shards in turn and
//! wait on the queue's bell channel, and counts and dead letters add the shards up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
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
use crate::connection::Dedicated;
use crate::delay::{check_value, delay_to_millis};
use crate::error::{naming_wrong_key, Error, ErrorKind, Result};
use crate::handle::{Handle, CALL_MARGIN};
use crate::keys::{id_shard_basis, shard_for, ReliableKeys};
use crate::logs::Escaped;
use crate::metrics::{self, Event, QueueKind::Reliable};
use crate::scheduler::{Job, SchedulerGuard, SchedulerOptions, TransferOutcome};
use crate::scripts;
use tokio::time::Instant;

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

pub(crate) static DEFAULT_WHEEL: LazyLock<Arc<str>> = LazyLock::new(|| wheel_arg(&WHEEL_LEVELS));
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

#[cfg(test)]
#[test]
fn a_back_off_is_named_by_its_schedule_or_its_exponential_parts() {
    let s = Duration::from_secs;
    assert_eq!(Backoff::from_parts(None, None, None).unwrap(), None);
    assert_eq!(
        Backoff::from_parts(Some(vec![s(5)]), None, None).unwrap(),
        Some(Backoff::Schedule(vec![s(5)]))
    );
    assert_eq!(
        Backoff::from_parts(None, None, Some(s(60))).unwrap(),
        Some(Backoff::Exponential {
            base: s(1),
            max: s(60)
        })
    );
    let both = Backoff::from_parts(Some(vec![s(5)]), Some(s(2)), None).unwrap_err();
    assert_eq!(both.kind(), ErrorKind::InvalidArgument);
    for b in [Backoff::Schedule(vec![s(5), s(9)]), Backoff::default()] {
        let (schedule, base, max) = b.parts();
        assert_eq!(Backoff::from_parts(schedule, base, max).unwrap(), Some(b));
    }
}

/// The longest id a caller may give.
pub const MAX_ID_LEN: usize = 256;

/// The most messages one `receive_many` call takes.
pub const MAX_RECEIVE: usize = 1000;

/// How many dead letters a listing shows when the caller names no limit (the bindings'
/// `dead_letters()` without an argument, the CLI, the service).
pub const DEAD_LETTERS_LIMIT: usize = 100;

const GROUP: &str = "delayq";

/// How often a handle that names no number of shards reads the stored one again, to move
/// a layout stored after it started, and to read from it (see `follow_stored_shards`).
const SHARDS_REREAD: Duration = Duration::from_secs(5);

/// How long to wait before retrying a message that failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Backoff {
    /// `base * 2^(attempt-1)`, capped at `max`, with jitter (a random delay between half
    /// of that and all of it) so that failures do not retry in lockstep.
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

/// The default back-off's first delay and longest delay.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(600);

impl Default for Backoff {
    /// Exponential from 1 s up to 10 min.
    fn default() -> Self {
        Backoff::Exponential {
            base: BACKOFF_BASE,
            max: BACKOFF_MAX,
        }
    }
}

impl Backoff {
    /// The back-off named by its parts, as the bindings take it: a `schedule`, or an
    /// exponential back-off's `base` and/or `max` (a part left out is
    /// [`Backoff::default`]'s). `None` when no part is given: the queue's stored back-off
    /// applies. A schedule together with an exponential part is an
    /// [`ErrorKind::InvalidArgument`] error.
    pub fn from_parts(
        schedule: Option<Vec<Duration>>,
        base: Option<Duration>,
        max: Option<Duration>,
    ) -> Result<Option<Backoff>> {
        match (schedule, base, max) {
            (Some(delays), None, None) => Ok(Some(Backoff::Schedule(delays))),
            (Some(_), _, _) => Err(Error::invalid(
                "give a back-off schedule or an exponential back-off's base/max, not both",
            )),
            (None, None, None) => Ok(None),
            (None, base, max) => Ok(Some(Backoff::Exponential {
                base: base.unwrap_or(BACKOFF_BASE),
                max: max.unwrap_or(BACKOFF_MAX),
            })),
        }
    }

    /// The parts of this back-off, as [`Backoff::from_parts`] takes them: a schedule's
    /// delays, or an exponential back-off's base and max.
    pub fn parts(&self) -> (Option<Vec<Duration>>, Option<Duration>, Option<Duration>) {
        match self {
            Backoff::Schedule(delays) => (Some(delays.clone()), None, None),
            Backoff::Exponential { base, max } => (None, Some(*base), Some(*max)),
        }
    }

    /// The delay before retrying after failed attempt number `attempt` (1 for the first).
    pub fn delay_for(&self, attempt: u32) -> Duration {
        match self {
            Backoff::Exponential { base, max } => {
                let exp = attempt.saturating_sub(1).min(40);
                let full = base.saturating_mul(1u32 << exp.min(31)).min(*max);
                let jitter: f64 = crate::random::random::<f64>() * 0.5 + 0.5;
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
                let base_ms = crate::delay::duration_to_millis(*base, "back-off base")?;
                let max_ms = crate::delay::duration_to_millis(*max, "back-off max")?;
                if base > max {
                    return Err(Error::invalid(format!(
                        "an exponential back-off's base ({base_ms} ms) is longer than its max ({max_ms} ms; default {} ms)",
                        BACKOFF_MAX.as_millis()
                    )));
                }
            }
            Backoff::Schedule(delays) => {
                if delays.is_empty() {
                    return Err(Error::invalid(
                        "a back-off schedule needs at least one delay",
                    ));
                }
                if delays.len() > MAX_SCHEDULE {
                    return Err(Error::invalid(format!(
                        "a back-off schedule has at most {MAX_SCHEDULE} delays (the last one repeats), got {}",
                        delays.len()
                    )));
                }
                for d in delays {
                    crate::delay::duration_to_millis(*d, "each delay of a back-off schedule")?;
                }
            }
        }
        Ok(())
    }
}

/// The most delays a back-off schedule holds: it is stored with the queue's settings and
/// read by every script that nacks.
pub const MAX_SCHEDULE: usize = 1000;

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
    /// difference (what `delayq reliable configure` does); a queue with no stored settings
    /// gets them stored, the defaults for the ones not named, even when none is named.
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
    /// When the message is due (server Unix ms, as the offer script computed it); `None`
    /// when it was de-duplicated (the existing message keeps its own due time).
    pub due_at: Option<i64>,
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
    /// The queue's visibility timeout when this delivery was received (ms): the length of
    /// its lease, which `consume` keeps (the stored settings may have changed since the
    /// handle read them).
    lease_ms: i64,
    /// When the read that delivered it was sent (local clock): its lease started later,
    /// so a lease counted from here ends no later than the server's.
    pub(crate) asked: std::time::Instant,
    /// Set once an ack, nack or release of this delivery (or a clone) got its reply, so
    /// that `consume` does not settle what its handler settled itself.
    ended: Arc<AtomicBool>,
    receipt: String,
    shard: u32,
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

/// How a nack or give-back ended a delivery (the nack script's answer).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ended {
    /// Ended before (acked, nacked, or its lease lost): nothing done.
    Already,
    /// Back in the queue, for another attempt.
    Retried,
    /// Its last attempt: moved to the dead letters.
    Dead,
}
impl Delivery {
    /// When this delivery's lease ends (server Unix ms): past it, the message may be
    /// handed to another consumer. Moved by [`Delivery::extend`].
    pub fn deadline(&self) -> i64 {
        self.deadline.load(Ordering::Relaxed)
    }

    /// The length of this delivery's lease: the queue's visibility timeout when it was
    /// received (`fallback` if unknown).
    pub(crate) fn lease(&self, fallback: Duration) -> Duration {
        u64::try_from(self.lease_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map_or(fallback, Duration::from_millis)
    }

    /// Acknowledges the message: it is done and will not be delivered again. Returns
    /// false when this delivery had already ended (acked or nacked before, or its lease
    /// ended and the message went back to the queue): the message may then be processed
    /// again elsewhere (counted in [`ReliableQueue::lost_leases`], unless this handle or a
    /// clone of it had ended the delivery itself). Works after the handle was closed (not
    /// after its client was). A `connection` error leaves it unknown whether the ack
    /// happened: if it did not, the message comes back after its lease.
    pub async fn ack(&self) -> Result<bool> {
        if self.has_ended() {
            return Ok(false); // acked or nacked here already: no lease was lost
        }
        let acked = self
            .queue
            .ack_receipts(&[(&self.receipt, &self.id, self.shard)])
            .await?;
        self.end();
        Ok(acked[0])
    }

    /// Gives the message back for a retry after `delay` (default: the queue's stored
    /// back-off for this attempt), or to the dead letters if this was its last attempt.
    /// Returns false when this delivery had already ended.
    pub async fn nack(&self, delay: Option<Duration>) -> Result<bool> {
        let nacked = self.queue.nack(&self.receipt, self.shard, delay, true);
        let ended = nacked.await.inspect(|_| self.end())?;
        if ended == Ended::Dead {
            let (queue, id, attempt) = (self.queue.name(), &self.id, self.attempt);
            tracing::warn!(
                ?queue,
                ?id,
                attempt,
                "message moved to the dead letters after its last attempt"
            );
        }
        Ok(ended != Ended::Already)
    }

    /// Moves the end of this delivery's lease to `duration` from now (SQS's
    /// ChangeMessageVisibility: shorter than what is left shortens it). Returns false when
    /// the lease was already lost (the message was taken back, acked or nacked).
    pub async fn extend(&self, duration: Duration) -> Result<bool> {
        self.queue.client_open()?;
        let ms = delay_to_millis(duration)?;
        let keys = self.queue.shard_keys(self.shard);
        let mut call = invocation_on(&keys, &scripts::RELIABLE_LEASE);
        call.key(&keys.channel)
            .arg("extend")
            .arg(&self.receipt)
            .arg(ms);
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
        let given = self
            .queue
            .give_back(&self.receipt, self.shard, Some(Duration::ZERO), false);
        let ended = given.await.inspect(|_| self.end())?;
        Ok(ended != Ended::Already)
    }

    fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Whether an ack, nack or release of this delivery (or of a clone) was answered.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// The receipt of this delivery (the stream entry id), for logs.
    pub fn receipt(&self) -> &str {
        &self.receipt
    }

    /// The shard the message lives in (0 for a queue of one shard).
    pub fn shard(&self) -> u32 {
        self.shard
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
    /// Held by the one call reading the settings for the first time.
    settings_reading: crate::process::OneAtATime,
    /// Failed first readings so far, and the last one's error: a call that waited for a
    /// reading that failed gets its error rather than trying again itself. (Each waiter
    /// trying in turn made N callers on a silent link wait N connect timeouts.)
    settings_failed: Mutex<(u64, Option<Error>)>,
    /// Cancelled by a graceful close: consumers stop receiving.
    stopping: CancellationToken,
    /// Acks that found their delivery already ended.
    lost_leases: AtomicU64,
    /// Running `consume` calls, and a wake-up for when the last returns.
    consumers: std::sync::atomic::AtomicUsize,
    consumers_idle: tokio::sync::Notify,
    /// Set by `close_gracefully`: until when running handlers may finish.
    graceful_deadline: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The keys of each shard, from the stored settings (one shard: the queue's own keys);
    /// none until the first call read them. A handle that names no number of shards
    /// follows the stored one (`follow_stored_shards`).
    shards: std::sync::RwLock<Option<Arc<Vec<ReliableKeys>>>>,
    /// The shard counts this handle started transfer tasks for.
    transfers_for: Mutex<Vec<u32>>,
    /// The shard a sharded receive looks at first; moves on by one at each receive.
    rotation: AtomicUsize,
    /// Rings (the value grows) when a shard of a sharded queue may have new ready messages.
    bell: OnceLock<tokio::sync::watch::Receiver<u64>>,
    /// Shards whose last read failed, left out of receives until the given time, so that a
    /// master that is down (a failover) does not hold up the shards of the others.
    /// The value: until when, and the rest after the next failure (doubling up to
    /// [`SHARD_REST_MAX`] while the shard keeps failing).
    resting: Mutex<HashMap<u32, (tokio::time::Instant, Duration)>>,
}

impl std::fmt::Debug for ReliableQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableQueue")
            .field("name", &self.inner.keys.name)
            .finish_non_exhaustive()
    }
}

/// Checks one message of an offer as [`ReliableQueue::offer_with_shard_key`] does before
/// anything reaches Redis; returns its delay in ms.
pub fn check_message(
    payload: &[u8],
    delay: Duration,
    id: Option<&str>,
    shard_key: Option<&str>,
) -> Result<u64> {
    check_value(payload)?;
    if let Some(id) = id {
        check_id(id)?;
    }
    if let Some(key) = shard_key {
        check_shard_key(key)?;
    }
    delay_to_millis(delay)
}

/// Checks a message id (of an offer, `cancel`, `reschedule`, `requeue_dead`): 1 to
/// [`MAX_ID_LEN`] bytes.
pub fn check_id(id: &str) -> Result<()> {
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

/// One message of an offer, in its shard: (position in the call, delay ms, id or "" for a
/// generated one, random digits, payload).
type ShardOffer<'a> = (usize, u64, &'a str, String, &'a [u8]);

fn check_shard_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_ID_LEN {
        return Err(Error::invalid(format!(
            "a shard key is 1 to {MAX_ID_LEN} bytes, got {}",
            key.len()
        )));
    }
    Ok(())
}

fn random_hex16() -> String {
    format!("{:016x}", crate::random::random::<u64>())
}

/// A call of a reliable script on the keys of one queue (or shard).
fn invocation_on<'a>(
    keys: &'a ReliableKeys,
    script: &'a redis::Script,
) -> redis::ScriptInvocation<'a> {
    let mut call = script.prepare_invoke();
    for k in keys.script_keys() {
        call.key(k);
    }
    call.arg(&keys.prefix).arg(&*wheel_of(keys));
    call
}

/// What a refused offer says to do, and what it did (see `ReliableQueue::moved`).
const OFFER_MOVED: (&str, &str) = ("offer again", "nothing was offered");

/// `e`, saying that `done` dead letters were `what` (requeued, purged) by the calls before
/// it (earlier shards or chunks), when there were any.
fn partly(e: Error, done: u64, what: &str) -> Error {
    if done == 0 {
        return e;
    }
    e.with_note(&format!(
        "{done} dead letters were {what} before it (on earlier shards, or in earlier chunks of 1000 ids)"
    ))
}

/// The counts of one queue (or shard), read by a handle that takes the queue to have
/// `shards` shards: refused (DELAYQSHARDS, as an offer is) when the settings there say
/// otherwise, since it would count a layout nobody uses.
async fn stats_of(
    conn: &mut (impl ConnectionLike + Send),
    keys: &ReliableKeys,
    shards: u32,
) -> Result<ReliableStats> {
    let mut call = invocation_on(keys, &scripts::RELIABLE_STATS);
    call.arg(shards);
    let (delayed, ready, in_flight, dead): (u64, u64, u64, u64) = call.invoke_async(conn).await?;
    Ok(ReliableStats {
        delayed,
        ready,
        in_flight,
        dead,
    })
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
        let (done, next, now, buried, set_aside): (u64, i64, i64, u64, u64) =
            call.invoke_async(conn).await?;
        if set_aside > 0 {
            let to = format!("{}corrupt", keys.prefix);
            tracing::warn!(queue = ?keys.name, count = set_aside, to = ?to, "moved undecodable entries aside");
        }
        // Leases that ended on the last attempt: dead letters no nack counted.
        if buried > 0 {
            metrics::record(Reliable, &keys.name, Event::Dead(buried));
        }
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
        tracing::debug!(queue = ?keys.name, removed, "removed idle consumers from the group");
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
                settings_reading: Default::default(),
                settings_failed: Default::default(),
                stopping: CancellationToken::new(),
                lost_leases: AtomicU64::new(0),
                consumers: Default::default(),
                consumers_idle: Default::default(),
                graceful_deadline: Default::default(),
                shards: Default::default(),
                transfers_for: Mutex::new(vec![1]),
                rotation: AtomicUsize::new(0),
                bell: OnceLock::new(),
                resting: Mutex::default(),
            }),
        }
    }

    /// The runtime the client's tasks run on.
    pub(crate) fn runtime(&self) -> tokio::runtime::Handle {
        self.inner.handle.runtime()
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
    /// Calls made while a first reading is under way share its outcome, its failure too.
    async fn ensure_settings(&self) -> Result<&ReliableSettings> {
        let inner = &self.inner;
        if let Some(settings) = inner.settings.get() {
            return Ok(settings);
        }
        let failed = || {
            inner
                .settings_failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
        };
        let seen = failed().0;
        let _reading = inner.settings_reading.lock().await;
        if let Some(settings) = inner.settings.get() {
            return Ok(settings);
        }
        if let (n, Some(e)) = &*failed() {
            if *n != seen {
                return Err(e.joined());
            }
        }
        match self.first_settings().await {
            Ok(settings) => Ok(inner.settings.get_or_init(|| async { settings }).await),
            Err(e) => {
                let mut failed = failed();
                *failed = (failed.0 + 1, Some(e.clone()));
                Err(e)
            }
        }
    }

    /// Reads (or creates) the stored settings and sets up the shards they name.
    async fn first_settings(&self) -> Result<ReliableSettings> {
        let mode = if self.inner.opts.update_settings {
            "update"
        } else {
            "ensure"
        };
        let mut before = None;
        if let Some(wanted) = self.inner.opts.shards {
            before = self.check_shard_change(wanted).await?;
        }
        let settings = self.load_settings(mode).await?;
        self.use_shards(&settings).await?;
        if let Some(before) = before.filter(|&b| b > 1 && b != settings.shards) {
            self.retire_shards(before, settings.shards).await?;
        }
        Ok(settings)
    }

    /// Refuses to change the number of shards of a queue that holds messages: they would
    /// stay in sub-queues nobody reads any more. Returns the stored count when it differs.
    async fn check_shard_change(&self, wanted: u32) -> Result<Option<u32>> {
        let stored = self.load_settings("get").await?;
        if stored.shards == wanted {
            return Ok(None);
        }
        let mut held = ReliableStats::default();
        for shard in 0..stored.shards {
            let keys = ReliableKeys::shard(self.name(), shard, stored.shards)?;
            let s = stats_of(&mut self.commands(), &keys, stored.shards).await?;
            // The delayed count can under-read (it never goes below 0, though entries
            // written by hand were set aside): the wheel's own keys say whether any waits.
            let mut waiting = redis::cmd("EXISTS");
            waiting.arg(&keys.near).arg(&keys.wheel);
            for level in 1..WHEEL_LEVELS.len() {
                waiting.arg(format!("{}wheel{level}", keys.prefix));
            }
            let waiting: u64 = waiting.query_async(&mut self.commands()).await?;
            held.delayed += s.delayed.max(u64::from(waiting > 0));
            held.ready += s.ready;
            held.in_flight += s.in_flight;
            held.dead += s.dead;
        }
        if held != ReliableStats::default() {
            // A handle that does not update the settings only needs to name the stored
            // count (or none); draining the queue is the way to change it.
            let how = match self.inner.opts.update_settings {
                true => format!("its shards cannot change to {wanted} until it is empty"),
                false => format!(
                    "this handle names {wanted}: name {} or none (the stored count is used); to change it, update the settings once the queue is empty",
                    stored.shards
                ),
            };
            return Err(Error::invalid(format!(
                "queue {:?} has {} shard(s) and holds messages ({} delayed, {} ready, {} in flight, {} dead); {how}",
                self.name(),
                stored.shards,
                held.delayed,
                held.ready,
                held.in_flight,
                held.dead
            )));
        }
        Ok(Some(stored.shards))
    }

    /// Writes the new count into the settings copy of each shard of the old layout, so
    /// that a handle still using it gets an error on its next offer instead of writing
    /// where nobody reads (reliable_offer.lua). (One shard: its settings are the queue's,
    /// already changed.)
    async fn retire_shards(&self, before: u32, now: u32) -> Result<()> {
        let retire = (0..before).map(|shard| async move {
            let keys = ReliableKeys::shard(self.name(), shard, before)?;
            let mut call = invocation_on(&keys, &scripts::RELIABLE_SETTINGS);
            call.arg("update").arg(1).arg(settings::SHARDS).arg(now);
            call.invoke_async::<Vec<String>>(&mut self.commands())
                .await?;
            Ok::<_, Error>(())
        });
        for r in futures_util::future::join_all(retire).await {
            r?;
        }
        Ok(())
    }

    /// Sets up the shards the stored settings name: their keys, a copy of the settings in
    /// each (the scripts of a shard read its own copy: in a cluster they cannot reach
    /// `{dq:N}:settings`), and their transfer tasks.
    async fn use_shards(&self, settings: &ReliableSettings) -> Result<()> {
        let n = settings.shards.max(1);
        let keys: Vec<ReliableKeys> = (0..n)
            .map(|s| ReliableKeys::shard(self.name(), s, n))
            .collect::<Result<_>>()?;
        if n > 1 {
            let fields = settings.fields();
            let copies = keys.iter().map(|k| {
                let mut call = invocation_on(k, &scripts::RELIABLE_SETTINGS);
                call.arg("update").arg(fields.len());
                for (f, v) in &fields {
                    call.arg(*f).arg(v);
                }
                let mut conn = self.commands();
                async move { call.invoke_async::<Vec<String>>(&mut conn).await }
            });
            for r in futures_util::future::join_all(copies).await {
                r?;
            }
        }
        self.set_layout(keys);
        self.start_transfers(n);
        Ok(())
    }

    fn set_layout(&self, keys: Vec<ReliableKeys>) {
        *self.inner.shards.write().expect("shards lock") = Some(Arc::new(keys));
    }

    /// The keys of each shard, once the first call read the settings.
    fn layout(&self) -> Option<Arc<Vec<ReliableKeys>>> {
        self.inner.shards.read().expect("shards lock").clone()
    }

    /// Starts this handle's transfer tasks for the shards of a queue split into `n` (one
    /// shard: the task started with the handle).
    fn start_transfers(&self, n: u32) {
        if !self.inner.opts.scheduler.enabled || self.inner.handle.is_closed() {
            return;
        }
        {
            let mut started = self.inner.transfers_for.lock().expect("transfers lock");
            if started.contains(&n) {
                return;
            }
            started.push(n);
        }
        let client = &self.inner.handle.client;
        for shard in 0..n {
            let Ok(keys) = ReliableKeys::shard(self.name(), shard, n) else {
                return;
            };
            let job = Job::Reliable {
                keys,
                tidied: Default::default(),
                bell: Some(self.bell_channel()),
            };
            self.inner
                .handle
                .add_scheduler(client.scheduler_for(job, &self.inner.opts.scheduler));
        }
    }

    /// Called with a new handle. A handle that names its number of shards starts their
    /// transfer tasks. One that names none reads the stored number in the background now
    /// and every [`SHARDS_REREAD`], starts the transfer tasks of the layout it finds, and
    /// once its first call has set its layout, follows a change of it: a consumer (or a
    /// `delayq transfer`) started before the queue was split into shards, or that outlives
    /// a change of their number (allowed only while the queue is empty), reads and moves
    /// the shards the settings name.
    pub(crate) fn follow_stored_shards(&self) {
        if let Some(n) = self.inner.opts.shards {
            self.start_transfers(n);
            return;
        }
        let queue = self.clone();
        self.inner.handle.runtime().spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                let got = tokio::select! {
                    _ = queue.inner.handle.closed() => return,
                    r = queue.load_settings("get") => r,
                };
                match got {
                    Ok(s) => {
                        let n = s.shards.max(1);
                        queue.start_transfers(n);
                        queue.follow_layout(n);
                        pause = SHARDS_REREAD;
                    }
                    Err(e) => {
                        tracing::debug!(queue = ?queue.name(), error = %Escaped(&e), "could not read the settings; trying again");
                        pause = (pause * 2).min(SHARDS_REREAD);
                    }
                }
                tokio::select! {
                    _ = queue.inner.handle.closed() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        });
    }

    /// Moves this handle to a layout of `n` shards if its first call set another.
    fn follow_layout(&self, n: u32) {
        let current = self.layout().map(|k| k.len() as u32);
        if current.is_none_or(|c| c == n) {
            return;
        }
        let Ok(keys) = (0..n)
            .map(|s| ReliableKeys::shard(self.name(), s, n))
            .collect()
        else {
            return;
        };
        tracing::info!(queue = ?self.name(), shards = n, "the queue's number of shards changed; this handle follows");
        self.set_layout(keys);
    }

    /// The channel a sharded queue's transfer tasks ring when they moved messages.
    fn bell_channel(&self) -> String {
        format!("{}bell", self.inner.keys.prefix)
    }

    /// The bell of a sharded queue: a value that grows when a shard may have new ready
    /// messages (transfer passes, offers due now, messages given back or requeued).
    fn bell(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner
            .bell
            .get_or_init(|| {
                let (tx, rx) = tokio::sync::watch::channel(0u64);
                let subscription = self
                    .inner
                    .handle
                    .client
                    .inner
                    .subscriber
                    .subscribe(&self.bell_channel());
                let queue = self.clone();
                self.inner.handle.runtime().spawn(async move {
                    let notify = subscription.notify().clone();
                    loop {
                        tokio::select! {
                            _ = queue.inner.handle.closed() => break,
                            _ = notify.notified() => tx.send_modify(|n| *n += 1),
                        }
                    }
                    drop(subscription);
                });
                rx
            })
            .clone()
    }

    /// Rings the bell of a sharded queue (in the background: nobody waits for it).
    fn ring(&self) {
        if self.shard_count() <= 1 {
            return;
        }
        let channel = self.bell_channel();
        let mut conn = self.commands();
        self.inner.handle.runtime().spawn(async move {
            if let Err(e) = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg("")
                .query_async::<()>(&mut conn)
                .await
            {
                tracing::debug!(channel, error = %Escaped(&e), "could not ring the bell");
            }
        });
    }

    /// The number of shards (1 until the settings were read).
    fn shard_count(&self) -> u32 {
        self.layout().map_or(1, |k| k.len() as u32)
    }

    /// The keys of shard `shard` (the queue's own keys until the settings were read).
    fn shard_keys(&self, shard: u32) -> ReliableKeys {
        match self.layout() {
            Some(keys) => keys[shard as usize % keys.len()].clone(),
            None => self.inner.keys.clone(),
        }
    }

    /// Whether shard `shard` is left out of receives for now (its last read failed).
    fn shard_rests(&self, shard: u32) -> bool {
        let resting = self.inner.resting.lock().expect("resting lock");
        resting
            .get(&shard)
            .is_some_and(|(until, _)| *until > tokio::time::Instant::now())
    }

    fn shard_answered(&self, shard: u32) {
        self.inner
            .resting
            .lock()
            .expect("resting lock")
            .remove(&shard);
    }

    /// Leaves a shard whose read failed out of receives for a while, longer each time.
    fn shard_failed(&self, shard: u32) {
        let mut resting = self.inner.resting.lock().expect("resting lock");
        let rest = resting.get(&shard).map_or(SHARD_REST, |(_, r)| *r);
        resting.insert(
            shard,
            (
                tokio::time::Instant::now() + rest,
                (rest * 2).min(SHARD_REST_MAX),
            ),
        );
    }

    /// The shards in the order to look for message `id` in: its own shard first.
    fn shards_for_id(&self, id: &str) -> Vec<u32> {
        let n = self.shard_count();
        let first = shard_for(id_shard_basis(id), n);
        (0..n).map(|i| (first + i) % n).collect()
    }

    /// An offer refused because the queue's shards changed after this handle read them
    /// (another handle changed them while the queue was empty): a clear error, the offer
    /// not written. A handle that names no number of shards moves to the new layout at
    /// once, so that the offer can be made again.
    fn moved(&self, e: Error, mine: u32, (again, undone): (&str, &str)) -> Error {
        let text = e.to_string();
        let Some(now) = text.split("DELAYQSHARDS").nth(1) else {
            return e;
        };
        let now = now.trim_matches(|c: char| !c.is_ascii_digit());
        let then = match now.parse() {
            Ok(n) if self.inner.opts.shards.is_none() => {
                self.follow_layout(n);
                format!("this handle follows them from now on: {again}")
            }
            _ => "open a new handle".to_owned(),
        };
        Error::invalid(format!(
            "queue {:?} has {now} shard(s) now (its settings changed after this handle read them), this handle used {mine}: {then}; {undone}",
            self.name()
        ))
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

    /// Runs a script that writes what a caller is told is stored (offers, acks) on a
    /// shard, with the client's durability option (its wait goes to the shard's master).
    async fn write<T: redis::FromRedisValue + Send>(
        &self,
        call: &redis::ScriptInvocation<'_>,
        keys: &ReliableKeys,
    ) -> Result<T> {
        self.inner
            .handle
            .client
            .inner
            .conn
            .write(call, &keys.ready)
            .await
    }

    fn invocation<'a>(&'a self, script: &'a redis::Script) -> redis::ScriptInvocation<'a> {
        invocation_on(&self.inner.keys, script)
    }

    /// Offers a message due after `delay`; returns its id. With `id`, a message with that
    /// id still waiting, ready or in flight (or acked within the idempotency retention) is
    /// not offered twice: the call returns the id and leaves the existing message as it is
    /// (payload and due time unchanged). Without `id`, a unique one is generated. After a
    /// `connection` error the message may or may not be stored: offered with an id, it is
    /// safe to offer it again with that id.
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
        // Collected before the await: a closure held across it makes the future's `Send`
        // check fail for callers that pass a mapping closure of their own (the bindings).
        let messages: Vec<(P, Duration, Option<&'a str>, Option<&'a str>)> = messages
            .into_iter()
            .map(|(payload, delay, id)| (payload, delay, id, None))
            .collect();
        self.offer_all_with_shard_keys(messages).await
    }

    /// Like [`ReliableQueue::offer_with_outcome`], in the shard of `shard_key` instead of
    /// the shard of the id: messages with one shard key live in one shard, in the order
    /// they were offered (seed 002's `slotBasis`). On a queue of one shard the key changes
    /// nothing. De-duplication by id holds within a shard: offer an id always with the
    /// same shard key (or always without). A generated id is drawn so that it names the
    /// key's shard; a caller's id offered with a shard key is found by `cancel` and
    /// `reschedule` after a look in its own shard (one more round trip per shard).
    pub async fn offer_with_shard_key(
        &self,
        payload: impl AsRef<[u8]>,
        delay: Duration,
        id: Option<&str>,
        shard_key: Option<&str>,
    ) -> Result<OfferOutcome> {
        let mut out = self
            .offer_all_with_shard_keys([(payload, delay, id, shard_key)])
            .await?;
        Ok(out.remove(0))
    }

    /// [`ReliableQueue::offer_all_with_outcome`] with a shard key per message (see
    /// [`ReliableQueue::offer_with_shard_key`]). The messages of each shard go in one
    /// round trip per thousand; the shards are written concurrently.
    pub async fn offer_all_with_shard_keys<'a, P, I>(
        &self,
        messages: I,
    ) -> Result<Vec<OfferOutcome>>
    where
        P: AsRef<[u8]>,
        I: IntoIterator<Item = (P, Duration, Option<&'a str>, Option<&'a str>)>,
    {
        self.check_open()?;
        let mut checked = Vec::new();
        for (payload, delay, id, shard_key) in messages {
            let delay_ms = check_message(payload.as_ref(), delay, id, shard_key)?;
            checked.push((payload, delay_ms, id, shard_key));
        }
        self.ensure_settings().await?;
        let n = self.shard_count();
        let mut by_shard: Vec<Vec<ShardOffer>> = vec![Vec::new(); n as usize];
        for (pos, (payload, delay_ms, id, shard_key)) in checked.iter().enumerate() {
            let mut random = random_hex16();
            let shard = match (id, shard_key) {
                (_, Some(key)) if n > 1 => {
                    let shard = shard_for(key, n);
                    // A generated id names its shard: draw digits of that shard.
                    while id.is_none() && shard_for(&random, n) != shard {
                        random = random_hex16();
                    }
                    shard
                }
                (Some(id), _) => shard_for(id_shard_basis(id), n),
                (None, _) => shard_for(&random, n),
            };
            by_shard[shard as usize].push((
                pos,
                *delay_ms,
                id.unwrap_or(""),
                random,
                payload.as_ref(),
            ));
        }
        let writes =
            by_shard
                .iter()
                .enumerate()
                .filter(|(_, m)| !m.is_empty())
                .map(|(shard, messages)| async move {
                    let keys = self.shard_keys(shard as u32);
                    let mut out = Vec::with_capacity(messages.len());
                    for chunk in messages.chunks(1000) {
                        let mut call = invocation_on(&keys, &scripts::RELIABLE_OFFER);
                        call.key(&keys.channel).arg(n);
                        for (_, delay_ms, id, random, payload) in chunk {
                            call.arg(*delay_ms).arg(*id).arg(random).arg(*payload);
                        }
                        // What earlier chunks stored stays counted when a later one fails.
                        let rows: Vec<(String, i64, i64)> = match self.write(&call, &keys).await {
                            Ok(rows) => rows,
                            Err(e) => return (out, Some(self.moved(e, n, OFFER_MOVED))),
                        };
                        out.extend(chunk.iter().zip(rows).map(
                            |((pos, ..), (id, created, due))| {
                                (
                                    *pos,
                                    OfferOutcome {
                                        id,
                                        created: created == 1,
                                        due_at: (due >= 0).then_some(due),
                                    },
                                )
                            },
                        ));
                    }
                    (out, None)
                });
        let mut out: Vec<Option<OfferOutcome>> = vec![None; checked.len()];
        let mut first_error = None;
        for (rows, error) in futures_util::future::join_all(writes).await {
            for (pos, outcome) in rows {
                out[pos] = Some(outcome);
            }
            if let Some(e) = error {
                first_error.get_or_insert(e);
            }
        }
        let written = || out.iter().flatten();
        // Stored due at once (by calls that answered, whatever the others did): consumers
        // waiting on other shards look again.
        if (out.iter().zip(&checked)).any(|(o, (_, delay_ms, ..))| o.is_some() && *delay_ms == 0) {
            self.ring();
        }
        if let Some(e) = first_error {
            let stored = written().count();
            if stored == 0 {
                return Err(e);
            }
            let created = written().filter(|o| o.created).count() as u64;
            metrics::record(Reliable, self.name(), Event::Offered(created));
            return Err(e.with_note(&format!(
                "but {stored} of the {} messages of this batch were stored by calls that answered \
                 (other shards, or earlier chunks of 1000), and the rest's outcome is as this \
                 error says: offer the batch again with the same ids to store the rest \
                 without duplicates (without ids, those {stored} would be stored twice)",
                checked.len()
            )));
        }
        let out: Vec<OfferOutcome> = out
            .into_iter()
            .map(|o| o.expect("every message written"))
            .collect();
        let created = out.iter().filter(|o| o.created).count() as u64;
        metrics::record(Reliable, self.name(), Event::Offered(created));
        Ok(out)
    }

    /// Removes a message that no consumer has received yet; returns whether there was one.
    /// On a sharded queue it looks in the id's shard, then (for an id offered with a shard
    /// key) in the others.
    pub async fn cancel(&self, id: &str) -> Result<bool> {
        self.check_open()?;
        check_id(id)?;
        self.ensure_settings().await?;
        for shard in self.shards_for_id(id) {
            let keys = self.shard_keys(shard);
            let mut call = invocation_on(&keys, &scripts::RELIABLE_CANCEL);
            call.arg(id);
            let n: i64 = call.invoke_async(&mut self.commands()).await?;
            if n == 1 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Moves a message that no consumer has received yet to a new due time, `delay` from
    /// now; returns whether there was one.
    pub async fn reschedule(&self, id: &str, delay: Duration) -> Result<bool> {
        Ok(self.reschedule_due_at(id, delay).await?.is_some())
    }

    /// Like [`ReliableQueue::reschedule`]; returns the new due time (server Unix ms, as the
    /// script computed it), or `None` when no message waiting or ready had that id.
    pub async fn reschedule_due_at(&self, id: &str, delay: Duration) -> Result<Option<i64>> {
        self.check_open()?;
        check_id(id)?;
        let ms = delay_to_millis(delay)?;
        self.ensure_settings().await?;
        for shard in self.shards_for_id(id) {
            let keys = self.shard_keys(shard);
            let mut call = invocation_on(&keys, &scripts::RELIABLE_RESCHEDULE);
            call.key(&keys.channel).arg(id).arg(ms);
            let at: i64 = call.invoke_async(&mut self.commands()).await?;
            if at >= 0 {
                if ms == 0 {
                    self.ring();
                }
                return Ok(Some(at));
            }
        }
        Ok(None)
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
        // The whole call answers within its timeout and the margin (SPEC 10), its first
        // reading of the settings and a zero timeout's transfer pass included: over a
        // silent link those would each wait the response timeout.
        let deadline = timeout.map(crate::handle::instant_after);
        let answer_by = deadline.map(|d| d + CALL_MARGIN);
        within(answer_by, self.ensure_settings()).await?;
        // The read is cancel-safe: cut short at SPEC's 3 s, what it took goes back.
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let spec_bound = deadline.map(|d| d + Duration::from_secs(3));
        // (Boxed: a receive awaited inside deep futures, the service's handlers, overflowed
        // the compiler's query depth.)
        let mut got = within(spec_bound, Box::pin(self.read_many(n, left))).await?;
        // No wait and nothing ready: messages that came due since the transfer task's last
        // pass count, so one pass moves them and the read is made again (a message offered
        // with no delay can be received at once).
        if got.is_empty()
            && timeout.is_some_and(|t| t.is_zero())
            && within(answer_by, self.transfer_now()).await?.moved > 0
        {
            got = self.read_many(n, timeout).await?;
        }
        metrics::record(Reliable, self.name(), Event::Delivered(got.len() as u64));
        Ok(got)
    }

    /// One read of up to `n` ready messages, waiting up to `timeout` for the first.
    async fn read_many(&self, n: usize, timeout: Option<Duration>) -> Result<Vec<Delivery>> {
        let queue = self.clone();
        let got = self
            .inner
            .handle
            .blocking(
                "receive",
                timeout,
                move |mut conn, wait| {
                    let queue = queue.clone();
                    // Each wait of a long receive looks again: the layout may change.
                    let bell = (queue.shard_count() > 1).then(|| queue.bell());
                    async move {
                        if let Some(bell) = bell {
                            let reply = sweep_shards(&conn, &queue, n, wait, bell).await;
                            return (conn, reply);
                        }
                        // No wait (`receive(0)`): a read without BLOCK. `BLOCK 1` waited
                        // for Redis's timer (100 ms at its default `hz`) on an empty queue.
                        let block_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                        let block_ms = (block_ms > 0).then_some(block_ms);
                        let reply = read_ready(&mut conn, &queue, 0, n, block_ms).await;
                        (conn, reply)
                    }
                },
                |deliveries: Vec<Delivery>| async move {
                    for delivery in deliveries {
                        if let Err(e) = delivery.release().await {
                            tracing::warn!(queue = ?delivery.queue.name(), error = %Escaped(&e), "could not give back an abandoned delivery; it returns after its lease ends");
                        }
                    }
                },
            )
            .await?;
        Ok(got.unwrap_or_default())
    }

    /// Acks many deliveries in one round trip; returns, for each, whether its lease was
    /// still held (see [`Delivery::ack`]).
    ///
    /// A delivery of another queue is an invalid argument, and then nothing is acked: its
    /// receipt means nothing here (stream entry ids of two queues may even be equal).
    pub async fn ack_many(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        if let Some(d) = deliveries.iter().find(|d| d.queue.name() != self.name()) {
            return Err(Error::invalid(format!(
                "ack_many of queue {:?} got a delivery of queue {:?} (id {:?}): ack it with its own queue, or with Delivery::ack",
                self.name(),
                d.queue.name(),
                d.id
            )));
        }
        // Deliveries ended here already, and a delivery's second place in the batch, are
        // false without a lost lease (as a second `Delivery::ack`).
        let mut seen = std::collections::HashSet::new();
        let ended: Vec<bool> = (deliveries.iter())
            .map(|d| d.has_ended() || !seen.insert((d.shard, d.receipt.as_str())))
            .collect();
        let open: Vec<&Delivery> = (deliveries.iter().zip(&ended))
            .filter_map(|(d, ended)| (!ended).then_some(d))
            .collect();
        let pairs: Vec<(&str, &str, u32)> = open
            .iter()
            .map(|d| (d.receipt.as_str(), d.id.as_str(), d.shard))
            .collect();
        let mut acked = Vec::with_capacity(pairs.len());
        for (chunk, ds) in pairs.chunks(1000).zip(open.chunks(1000)) {
            acked.extend(self.ack_receipts(chunk).await?);
            ds.iter().for_each(|d| d.end());
        }
        let mut acked = acked.into_iter();
        let each = |ended: &bool| !ended && acked.next().unwrap_or(false);
        Ok(ended.iter().map(each).collect())
    }

    /// Acks (receipt, id, shard) triples: one script call per shard, the shards at once.
    async fn ack_receipts(&self, triples: &[(&str, &str, u32)]) -> Result<Vec<bool>> {
        self.client_open()?;
        let mut shards: Vec<u32> = triples.iter().map(|t| t.2).collect();
        shards.sort_unstable();
        shards.dedup();
        let calls = shards.iter().map(|&shard| async move {
            let keys = self.shard_keys(shard);
            let mut call = invocation_on(&keys, &scripts::RELIABLE_ACK);
            for (receipt, id, _) in triples.iter().filter(|t| t.2 == shard) {
                call.arg(*receipt).arg(*id);
            }
            let acked: Vec<i64> = self.write(&call, &keys).await?;
            Ok::<_, Error>((shard, acked))
        });
        let mut replies = Vec::new();
        for r in futures_util::future::join_all(calls).await {
            replies.push(r?);
        }
        let mut acked = Vec::with_capacity(triples.len());
        let mut next = vec![0usize; replies.len()];
        for t in triples {
            let i = replies
                .iter()
                .position(|(s, _)| *s == t.2)
                .expect("a reply per shard");
            acked.push(replies[i].1.get(next[i]).copied() == Some(1));
            next[i] += 1;
        }
        let lost = acked.iter().filter(|a| !**a).count() as u64;
        metrics::record(
            Reliable,
            self.name(),
            Event::Acked(acked.len() as u64 - lost),
        );
        if lost > 0 {
            self.inner.lost_leases.fetch_add(lost, Ordering::Relaxed);
            tracing::warn!(queue = ?self.name(), lost, "acks found their delivery already ended (lease lost): that work may be done again");
        }
        Ok(acked)
    }

    async fn nack(
        &self,
        receipt: &str,
        shard: u32,
        delay: Option<Duration>,
        count_attempt: bool,
    ) -> Result<Ended> {
        self.client_open()?;
        self.give_back(receipt, shard, delay, count_attempt).await
    }

    /// Ends a delivery with a retry (or burial), even on a closed handle: used to return
    /// a delivery nobody waits for any more. `delay` `None`: the stored back-off.
    async fn give_back(
        &self,
        receipt: &str,
        shard: u32,
        delay: Option<Duration>,
        count_attempt: bool,
    ) -> Result<Ended> {
        let ms: i64 = match delay {
            Some(d) => delay_to_millis(d)? as i64,
            None => -1,
        };
        let jitter = 0.5 + crate::random::random::<f64>() * 0.5;
        let keys = self.shard_keys(shard);
        let mut call = invocation_on(&keys, &scripts::RELIABLE_NACK);
        call.key(&keys.channel)
            .arg(receipt)
            .arg(ms)
            .arg(format!("{jitter:.4}"))
            .arg(if count_attempt { "1" } else { "0" });
        let n: i64 = call.invoke_async(&mut self.commands()).await?;
        if n == 1 && ms == 0 {
            self.ring();
        }
        if count_attempt {
            let event = if n == 2 {
                Event::Dead(1)
            } else {
                Event::Nacked(n as u64)
            };
            metrics::record(Reliable, self.name(), event);
        }
        Ok(match n {
            0 => Ended::Already,
            2 => Ended::Dead,
            _ => Ended::Retried,
        })
    }

    /// Counts of delayed, ready, in-flight and dead messages (added up over the shards).
    pub async fn stats(&self) -> Result<ReliableStats> {
        self.check_open()?;
        self.ensure_settings().await?;
        let mut total = ReliableStats::default();
        let n = self.shard_count();
        for s in futures_util::future::join_all((0..n).map(|shard| async move {
            stats_of(&mut self.commands(), &self.shard_keys(shard), n).await
        }))
        .await
        {
            let s = s.map_err(|e| self.moved(e, n, ("ask again", "nothing was counted")))?;
            total.delayed += s.delayed;
            total.ready += s.ready;
            total.in_flight += s.in_flight;
            total.dead += s.dead;
        }
        Ok(total)
    }

    /// Up to `limit` messages from the dead letters (in no particular order; shard after
    /// shard on a sharded queue).
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        self.check_open()?;
        self.ensure_settings().await?;
        let mut out = Vec::new();
        for shard in 0..self.shard_count() {
            if out.len() >= limit {
                break;
            }
            let keys = self.shard_keys(shard);
            let mut call = invocation_on(&keys, &scripts::RELIABLE_DEAD);
            call.arg("list").arg(limit - out.len());
            let rows: Vec<(String, u32, i64, Vec<u8>)> =
                call.invoke_async(&mut self.commands()).await?;
            out.extend(
                rows.into_iter()
                    .map(|(id, attempts, died_at, payload)| DeadLetter {
                        id,
                        payload,
                        attempts,
                        died_at,
                    }),
            );
        }
        Ok(out)
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
        let requeued = async {
            for shard in 0..self.shard_count() {
                let keys = self.shard_keys(shard);
                match ids {
                    // A dead letter offered with a shard key may be in any shard: every
                    // shard is asked for every id (each id is requeued where it is).
                    Some(ids) => {
                        for chunk in ids.chunks(1000) {
                            let mut call = invocation_on(&keys, &scripts::RELIABLE_DEAD);
                            call.arg("requeue");
                            for id in chunk {
                                call.arg(id);
                            }
                            let n: u64 = call.invoke_async(&mut self.commands()).await?;
                            total += n;
                        }
                    }
                    None => loop {
                        let mut call = invocation_on(&keys, &scripts::RELIABLE_DEAD);
                        call.arg("requeue");
                        let n: u64 = call.invoke_async(&mut self.commands()).await?;
                        total += n;
                        if n == 0 {
                            break;
                        }
                    },
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        if total > 0 {
            self.ring();
        }
        requeued.map_err(|e| partly(e, total, "requeued"))?;
        Ok(total)
    }

    /// Deletes every dead letter; returns how many there were.
    pub async fn purge_dead(&self) -> Result<u64> {
        self.check_open()?;
        self.ensure_settings().await?;
        let mut total = 0;
        for shard in 0..self.shard_count() {
            let keys = self.shard_keys(shard);
            let mut call = invocation_on(&keys, &scripts::RELIABLE_DEAD);
            call.arg("purge");
            let n: u64 = call
                .invoke_async(&mut self.commands())
                .await
                .map_err(|e| partly(e.into(), total, "purged"))?;
            total += n;
        }
        Ok(total)
    }

    /// Runs the transfer script now (promote, make ready, take back expired deliveries),
    /// on every shard.
    pub async fn transfer_now(&self) -> Result<TransferOutcome> {
        self.check_open()?;
        self.ensure_settings().await?;
        let mut total: Option<TransferOutcome> = None;
        for shard in 0..self.shard_count() {
            let o = transfer_due(
                &mut self.commands(),
                &self.shard_keys(shard),
                self.inner.opts.scheduler.batch_size,
            )
            .await?;
            total = Some(match total {
                None => o,
                Some(t) => TransferOutcome {
                    moved: t.moved + o.moved,
                    next_due: match (t.next_due, o.next_due) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    },
                    now: t.now.max(o.now),
                },
            });
        }
        let total = total.expect("at least one shard");
        if total.moved > 0 {
            self.ring();
        }
        Ok(total)
    }

    /// Closes this handle at once: stops its share of the transfer task and fails later
    /// calls (and a pending `receive`) with [`Error::Closed`]; deliveries already received
    /// can still be acked or nacked. A running `consume` stops taking messages and gives
    /// its handlers up to 1 s to end (settled as usual; the messages of those still running
    /// then are given back) before it returns. Idempotent. See also
    /// [`ReliableQueue::close_gracefully`].
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
            for shard in 0..queue.shard_count() {
                let keys = queue.shard_keys(shard);
                let mut call = invocation_on(&keys, &scripts::RELIABLE_CONSUMERS);
                call.arg("leave").arg(queue.inner.handle.client.consumer_name());
                if let Err(e) = call.invoke_async::<u64>(&mut queue.commands()).await {
                    tracing::debug!(queue = ?queue.name(), error = %Escaped(&e), "could not leave the consumer group");
                }
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

/// Reads up to `count` entries of shard `shard` that no consumer has had yet, blocking
/// for `block_ms` (or not at all), and creates the group when it is missing. `None` when
/// none came.
///
/// A lease starts on the server as XREADGROUP delivers an entry: the pending list's
/// delivery time is its start, and the reaper (reliable_transfer.lua) takes back a
/// delivery idle for the stored visibility timeout unless [`Delivery::extend`] recorded
/// another end. So receiving writes nothing but the read itself. The server's `TIME` and
/// the stored visibility timeout (the settings of the shard's scripts; the default without
/// any), read in the same round trip right after the read, give the deadlines.
async fn read_ready(
    conn: &mut (impl ConnectionLike + Send),
    queue: &ReliableQueue,
    shard: u32,
    count: usize,
    block_ms: Option<u64>,
) -> Result<Option<Vec<Delivery>>> {
    let keys = queue.shard_keys(shard);
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(GROUP)
        .arg(queue.inner.handle.client.consumer_name())
        .arg("COUNT")
        .arg(count);
    if let Some(ms) = block_ms {
        cmd.arg("BLOCK").arg(ms);
    }
    cmd.arg("STREAMS").arg(&keys.ready).arg(">");
    let mut pipe = redis::pipe();
    pipe.add_command(cmd).cmd("TIME").cmd("HGET");
    pipe.arg(keys.settings()).arg(settings::VISIBILITY);
    type Reply = (Value, (i64, i64), Option<i64>);
    let mut created = false;
    let asked = std::time::Instant::now();
    let (reply, (secs, micros), stored): Reply = loop {
        match pipe.query_async(conn).await {
            Err(e) if !created && e.to_string().contains("NOGROUP") => {
                create_group(conn, &keys.ready).await?;
                created = true;
            }
            Err(e) => {
                let wanted = [(&*keys.ready, "stream"), (&*keys.settings(), "hash")];
                return Err(naming_wrong_key(conn, e.into(), &wanted).await);
            }
            Ok(read) => break read,
        }
    };
    let mut deliveries = parse_read(reply, queue, shard)?;
    // Delivered within the millisecond before TIME answered (the same event-loop turn).
    let now = secs * 1000 + micros / 1000;
    let visibility =
        stored.unwrap_or(ReliableSettings::default().visibility_timeout.as_millis() as i64);
    for d in deliveries.iter_mut() {
        d.deadline.store(now + visibility, Ordering::Relaxed);
        d.lease_ms = visibility;
        d.asked = asked;
    }
    metrics::record_lateness(
        Reliable,
        queue.name(),
        deliveries.iter().map(|d| now - d.due_at),
    );
    Ok((!deliveries.is_empty()).then_some(deliveries))
}

/// How long a sharded receive waits for the bell before it looks at every shard again:
/// bounds the delay a lost bell can cause (the transfer tasks ring on every pass that
/// moved messages; the subscriber resubscribes after a disconnect).
const SWEEP_INTERVAL: Duration = Duration::from_millis(500);

/// How long a shard whose read failed is first left out of receives; the rest doubles
/// while the shard keeps failing, up to [`SHARD_REST_MAX`].
const SHARD_REST: Duration = Duration::from_millis(500);
const SHARD_REST_MAX: Duration = Duration::from_secs(4);

/// The longest a sweep waits for one shard's (non-blocking) read: a master that is down
/// must not hold up the others' shards for the client's whole response timeout.
const SHARD_READ_LIMIT: Duration = Duration::from_secs(1);

/// A receive on a sharded queue, for at most `wait`: reads the shards without blocking on
/// any, from the one after where the previous receive started (so that no shard is
/// starved); when none has any, waits for the queue's bell (one subscription per client,
/// whatever the number of shards and masters) and looks again. XREADGROUP can block on
/// several streams only within one cluster slot, and each shard is a slot of its own.
///
/// The reads of a sweep go out at once, in rounds ([`sweep_round`]), so that the shards
/// of a master that is down (a failover) cost the sweep one [`SHARD_READ_LIMIT`], not one
/// each; and a sweep ends within half of [`CALL_MARGIN`] past `wait`, so that the caller
/// never gives it up (and the messages it had read with it) for a connection that looks
/// dead.
async fn sweep_shards(
    conn: &Dedicated,
    queue: &ReliableQueue,
    n: usize,
    wait: Duration,
    mut bell: tokio::sync::watch::Receiver<u64>,
) -> Result<Option<Vec<Delivery>>> {
    let until = tokio::time::Instant::now() + wait;
    let stop = until + CALL_MARGIN / 2;
    let shards = queue.shard_count();
    let options = queue.inner.handle.client.inner.conn.options();
    let limit = options.response_timeout.min(SHARD_READ_LIMIT);
    loop {
        bell.borrow_and_update();
        let first = queue.inner.rotation.fetch_add(1, Ordering::Relaxed) as u32 % shards;
        let mut unread: std::collections::VecDeque<u32> = (0..shards)
            .map(|i| (first + i) % shards)
            .filter(|&s| !queue.shard_rests(s))
            .collect();
        let mut got: Vec<Delivery> = Vec::new();
        let mut failed: Option<Error> = None;
        let mut other: Option<Error> = None;
        let mut first_round = true;
        // A failed read cost this sweep up to `limit`: what it has goes out now.
        while got.len() < n && !unread.is_empty() && (failed.is_none() || got.is_empty()) {
            let left = stop.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            // The first shard is asked for everything (with a backlog, one read a call);
            // the next round asks the others at once, each for a share.
            let want = n - got.len();
            let width = if first_round { 1 } else { want };
            first_round = false;
            let round = sweep_round(conn, queue, &mut unread, want, width, limit.min(left));
            for (shard, asked, reply) in round.await {
                match reply {
                    Ok(deliveries) => {
                        queue.shard_answered(shard);
                        let deliveries = deliveries.unwrap_or_default();
                        if deliveries.len() == asked {
                            unread.push_back(shard); // it may hold more
                        }
                        got.extend(deliveries);
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout) => {
                        // The other shards go on; this one rests a while.
                        tracing::debug!(queue = ?queue.name(), shard, error = %Escaped(&e), "a shard could not be read; the others go on");
                        queue.shard_failed(shard);
                        failed.get_or_insert(e);
                    }
                    Err(e) => {
                        other.get_or_insert(e);
                    }
                }
            }
            if other.is_some() {
                break;
            }
        }
        if !got.is_empty() {
            return Ok(Some(got));
        }
        if let Some(e) = other {
            return Err(e);
        }
        if let Some(e) = failed {
            if (0..shards).all(|s| queue.shard_rests(s)) {
                // Every shard failed: the caller retries on a fresh connection.
                return Err(e);
            }
        }
        let now = tokio::time::Instant::now();
        if now >= until {
            return Ok(None);
        }
        tokio::select! {
            _ = bell.changed() => {}
            _ = tokio::time::sleep((until - now).min(SWEEP_INTERVAL)) => {}
        }
    }
}

/// One round of a sweep: reads, at once, up to `want` messages from the next `width`
/// shards of `unread` (at most one a message, each asked its share), each read given up
/// after `limit`. Returns each shard read, the count asked of it, and its reply.
async fn sweep_round(
    conn: &Dedicated,
    queue: &ReliableQueue,
    unread: &mut std::collections::VecDeque<u32>,
    want: usize,
    width: usize,
    limit: Duration,
) -> Vec<(u32, usize, Result<Option<Vec<Delivery>>>)> {
    let k = width.min(want).min(unread.len());
    let reads = (0..k).filter_map(|i| {
        let shard = unread.pop_front()?;
        let asked = want / k + usize::from(i < want % k);
        let mut conn = conn.clone();
        Some(async move {
            let read = read_ready(&mut conn, queue, shard, asked, None);
            let reply = tokio::time::timeout(limit, read).await.unwrap_or_else(|_| {
                Err(Error::Connection(format!(
                    "no reply from shard {shard} within {limit:?}"
                )))
            });
            (shard, asked, reply)
        })
    });
    let reads: Vec<_> = reads.collect();
    futures_util::future::join_all(reads).await
}

/// Parses an XREADGROUP reply (RESP2 array or RESP3 map) into deliveries.
fn parse_read(reply: Value, queue: &ReliableQueue, shard: u32) -> Result<Vec<Delivery>> {
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
    parse_entries(entries, queue, shard)
}

/// Parses stream entries (`[id, [field, value, ...]]` each) into deliveries.
fn parse_entries(entries: Vec<Value>, queue: &ReliableQueue, shard: u32) -> Result<Vec<Delivery>> {
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
            lease_ms: 0,
            asked: std::time::Instant::now(),
            ended: Arc::default(),
            receipt,
            shard,
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

/// `call`, failed as a reply that did not come when it has not answered by `by` (if any).
async fn within<T>(
    by: Option<Instant>,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(by) = by else { return call.await };
    // (Bounded: a host's blocking call reads on its own thread, where no timer cuts in.)
    let call = crate::connection::Bounded(by.into_std(), call);
    match tokio::time::timeout_at(by, call).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Error::Connection(
            "no reply from Redis before the call's time ran out; whether the request ran is unknown".into(),
        )),
    }
}
