//! [`ReliableQueue`] and [`Delivery`]: at-least-once delivery, over `delayq::ReliableQueue`.

use std::sync::Arc;

use delayq::handover::Handover;
use std::time::Duration;

use delayq::{Backoff, DeadLetter, OfferOutcome, ReliableSettings, ReliableStats};

use crate::error::FfiError;
use crate::handover::{ReceiveHandover, ReceiveManyHandover};
use crate::time::{self, delay, DurationParts};

type Res<T> = Result<T, FfiError>;

/// How long to wait before a retry; see `delayq::Backoff`.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum BackoffSpec {
    Exponential {
        base: DurationParts,
        max: DurationParts,
    },
    Schedule {
        delays: Vec<DurationParts>,
    },
}

impl BackoffSpec {
    fn to_core(&self) -> delayq::Result<delayq::Backoff> {
        Ok(match self {
            BackoffSpec::Exponential { base, max } => delayq::Backoff::Exponential {
                base: base.delay()?,
                max: max.delay()?,
            },
            BackoffSpec::Schedule { delays } => delayq::Backoff::Schedule(
                delays
                    .iter()
                    .map(|d| d.delay())
                    .collect::<delayq::Result<_>>()?,
            ),
        })
    }
}

/// How long to wait before a retry, as stored; see `delayq::Backoff`.
#[uniffi::remote(Enum)]
pub enum Backoff {
    Exponential { base: Duration, max: Duration },
    Schedule(Vec<Duration>),
}

/// The default back-off of a reliable queue (core's).
#[uniffi::export]
pub fn default_backoff() -> Backoff {
    Backoff::default()
}

/// Options of a reliable queue handle; see `delayq::ReliableQueueOptions`. A setting left
/// out (none) uses the one stored with the queue; `reconcile_interval` none: core's default.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReliableOptions {
    pub visibility_timeout: Option<DurationParts>,
    pub max_attempts: Option<u32>,
    pub backoff: Option<BackoffSpec>,
    pub shards: Option<u32>,
    pub dead_letter_retention: Option<DurationParts>,
    pub idempotency_retention: Option<DurationParts>,
    pub update_settings: bool,
    pub scheduler: bool,
    pub reconcile_interval: Option<DurationParts>,
}

impl ReliableOptions {
    /// Core's options; every duration is checked by core (`delayq::delay`).
    pub(crate) fn to_core(&self) -> delayq::Result<delayq::ReliableQueueOptions> {
        Ok(delayq::ReliableQueueOptions {
            visibility_timeout: delay(self.visibility_timeout)?,
            max_attempts: self.max_attempts,
            backoff: self
                .backoff
                .as_ref()
                .map(BackoffSpec::to_core)
                .transpose()?,
            shards: self.shards,
            dead_letter_retention: delay(self.dead_letter_retention)?,
            idempotency_retention: delay(self.idempotency_retention)?,
            update_settings: self.update_settings,
            scheduler: time::scheduler(self.scheduler, self.reconcile_interval)?,
        })
    }
}

/// The settings of a reliable queue as stored with it; see `delayq::ReliableSettings`.
#[uniffi::remote(Record)]
pub struct ReliableSettings {
    pub visibility_timeout: Duration,
    pub max_attempts: u32,
    pub backoff: Backoff,
    pub shards: u32,
    pub dead_letter_retention: Option<Duration>,
    pub idempotency_retention: Option<Duration>,
}

/// See `delayq::OfferOutcome`.
#[uniffi::remote(Record)]
pub struct OfferOutcome {
    pub id: String,
    pub created: bool,
    pub due_at: Option<i64>,
}

/// See `delayq::ReliableStats`.
#[uniffi::remote(Record)]
pub struct ReliableStats {
    pub delayed: u64,
    pub ready: u64,
    pub in_flight: u64,
    pub dead: u64,
}

/// See `delayq::DeadLetter`.
#[uniffi::remote(Record)]
pub struct DeadLetter {
    pub id: String,
    pub payload: Vec<u8>,
    pub attempts: u32,
    pub died_at: i64,
}

/// One message for `offer_all`: its payload, delay, optional id and optional shard key.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReliableOfferEntry {
    pub payload: Vec<u8>,
    pub delay: DurationParts,
    pub id: Option<String>,
    pub shard_key: Option<String>,
}

type Checked<'a> = (&'a [u8], Duration, Option<&'a str>, Option<&'a str>);

fn checked(entries: &[ReliableOfferEntry]) -> delayq::Result<Vec<Checked<'_>>> {
    let checked = entries.iter().map(|e| {
        let (id, key) = (e.id.as_deref(), e.shard_key.as_deref());
        Ok((&e.payload[..], e.delay.delay()?, id, key))
    });
    checked.collect()
}

/// What `consume` calls for each delivery, on a thread of its own (so it may block);
/// implemented by the facade. Returns none on success (ack), or the failure (nack).
#[uniffi::export(foreign)]
pub trait DeliveryHandler: Send + Sync {
    fn handle(&self, delivery: Arc<Delivery>) -> Option<String>;
}

/// A handle on one reliable queue; see `delayq::ReliableQueue`.
#[derive(uniffi::Object)]
pub struct ReliableQueue {
    inner: delayq::ReliableQueue,
}

/// A received message; see `delayq::Delivery`.
#[derive(uniffi::Object)]
pub struct Delivery {
    inner: delayq::Delivery,
}

impl Delivery {
    pub(crate) fn new(inner: delayq::Delivery) -> Arc<Self> {
        Arc::new(Delivery { inner })
    }
}

impl ReliableQueue {
    pub(crate) fn new(inner: delayq::ReliableQueue) -> Self {
        ReliableQueue { inner }
    }
}

#[uniffi::export]
impl ReliableQueue {
    /// The queue's name.
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Closes this handle; a running `consume` returns. Idempotent.
    pub fn close_handle(&self) {
        self.inner.close();
    }

    /// Acks through this handle that found their delivery already ended (lease lost).
    pub fn lost_leases(&self) -> u64 {
        self.inner.lost_leases()
    }

    /// The next ready message, waiting up to `timeout` (none: forever), through core's
    /// hand-over (nothing lost when the caller is gone).
    pub fn receive_handover(&self, timeout: Option<DurationParts>) -> Res<Arc<ReceiveHandover>> {
        let h = Handover::receive(&self.inner, time::timeout(timeout)?);
        Ok(Arc::new(ReceiveHandover(h)))
    }

    /// Up to `n` ready messages in one round trip, as `receive_handover`.
    pub fn receive_many_handover(
        &self,
        n: u32,
        timeout: Option<DurationParts>,
    ) -> Res<Arc<ReceiveManyHandover>> {
        let h = Handover::receive_many(&self.inner, n as usize, time::timeout(timeout)?);
        Ok(Arc::new(ReceiveManyHandover(h)))
    }
}

twins!(ReliableQueue.inner as q {
    /// Offers `payload` due after `delay` (in the shard of `shard_key`, if given); tells
    /// whether this call created the message.
    fn offer / offer_blocking(payload: Vec<u8>, delay: DurationParts, id: Option<String>, shard_key: Option<String>) -> OfferOutcome {
        q.offer_with_shard_key(&payload, delay.delay()?, id.as_deref(), shard_key.as_deref()).await
    }
    /// Offers many messages; an outcome per message, in order. All are checked first.
    fn offer_all / offer_all_blocking(entries: Vec<ReliableOfferEntry>) -> Vec<OfferOutcome> {
        q.offer_all_with_shard_keys(checked(&entries)?).await
    }
    /// Removes a message that has not come due; returns whether there was one.
    fn cancel / cancel_blocking(id: String) -> bool { q.cancel(&id).await }
    /// Moves a message that has not come due to `delay` from now.
    fn reschedule / reschedule_blocking(id: String, delay: DurationParts) -> bool { q.reschedule(&id, delay.delay()?).await }
    /// The next ready message, waiting up to `timeout` (none: forever).
    fn receive / receive_blocking(timeout: Option<DurationParts>) -> Option<Arc<Delivery>> {
        Ok(q.receive(time::timeout(timeout)?).await?.map(Delivery::new))
    }
    /// Up to `n` ready messages in one round trip.
    fn receive_many / receive_many_blocking(n: u32, timeout: Option<DurationParts>) -> Vec<Arc<Delivery>> {
        let got = q.receive_many(n as usize, time::timeout(timeout)?).await?;
        Ok(got.into_iter().map(Delivery::new).collect())
    }
    /// Acks many deliveries in one round trip; for each, whether its lease was still held.
    fn ack_many / ack_many_blocking(deliveries: Vec<Arc<Delivery>>) -> Vec<bool> {
        let list: Vec<delayq::Delivery> = deliveries.iter().map(|d| d.inner.clone()).collect();
        q.ack_many(&list).await
    }
    /// The queue's settings as stored in Redis.
    fn settings / settings_blocking() -> ReliableSettings { q.settings().await }
    /// Closes this handle gracefully (see `delayq::ReliableQueue::close_gracefully`); given
    /// up (a cancelled coroutine or future), even before it ran, it closes at once.
    fn close_gracefully / close_gracefully_blocking(deadline: DurationParts) -> () {
        let guard = CloseOnDrop(q);
        guard.0.close_gracefully(deadline.timeout()?).await
    }
    /// Counts of delayed, ready, in-flight and dead messages.
    fn stats / stats_blocking() -> ReliableStats { q.stats().await }
    /// Up to `limit` dead letters (none: core's default).
    fn dead_letters / dead_letters_blocking(limit: Option<u32>) -> Vec<DeadLetter> {
        q.dead_letters(limit.map_or(delayq::DEAD_LETTERS_LIMIT, |n| n as usize)).await
    }
    /// Makes dead letters ready again (those with `ids`, or all); returns how many.
    fn requeue_dead / requeue_dead_blocking(ids: Option<Vec<String>>) -> u64 { q.requeue_dead(ids.as_deref()).await }
    /// Deletes every dead letter; returns how many there were.
    fn purge_dead / purge_dead_blocking() -> u64 { q.purge_dead().await }
    /// Runs `handler` on deliveries, `concurrency` at a time, until the handle or its client
    /// is closed (core's consume), each handler on a blocking thread.
    fn consume / consume_blocking(concurrency: u32, handler: Arc<dyn DeliveryHandler>) -> () {
        let handle = move |d| {
            let handler = handler.clone();
            async move {
                match tokio::task::spawn_blocking(move || handler.handle(Delivery::new(d))).await {
                    Ok(None) => Ok(()),
                    Ok(Some(failure)) => Err(failure),
                    Err(e) => Err(format!("handler failed: {e}")),
                }
            }
        };
        q.consume(handle, concurrency as usize).await
    }
});

/// Closes the handle when dropped (a graceful close given up).
struct CloseOnDrop(delayq::ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[uniffi::export]
impl Delivery {
    /// The message id.
    pub fn id(&self) -> String {
        self.inner.id.clone()
    }

    /// The payload.
    pub fn payload(&self) -> Vec<u8> {
        self.inner.payload.clone()
    }

    /// Which delivery this is: 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// When the message came due (server Unix ms).
    pub fn due_at(&self) -> i64 {
        self.inner.due_at
    }

    /// The shard the message lives in (0 for a queue of one shard).
    pub fn shard(&self) -> u32 {
        self.inner.shard()
    }

    /// When this delivery's lease ends (server Unix ms); moved by `extend`.
    pub fn deadline(&self) -> i64 {
        self.inner.deadline()
    }
}

twins!(Delivery.inner as d {
    /// Moves the end of the lease to `duration` from now; false when it was already lost.
    fn extend / extend_blocking(duration: DurationParts) -> bool { d.extend(duration.delay()?).await }
    /// Acknowledges; false when this delivery had already ended.
    fn ack / ack_blocking() -> bool { d.ack().await }
    /// Retries after `delay` (none: the queue's back-off); false when already ended.
    fn nack / nack_blocking(delay: Option<DurationParts>) -> bool { d.nack(time::delay(delay)?).await }
});
