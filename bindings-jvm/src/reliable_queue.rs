//! [`ReliableQueue`] and [`Delivery`]: at-least-once delivery, over `delayq::ReliableQueue`.
//!
//! As in `delayed_queue.rs`, each call is a private method returning core's future, exported
//! twice: async (a Kotlin `suspend fun`), and `_blocking`. `consume` hands each delivery to a
//! [`DeliveryHandler`] that the Kotlin facade implements around the user's handler.

use std::future::Future;
use std::sync::Arc;

use crate::error::FfiError;
use crate::handover::{self, PendingCall, ReceiveHandler, ReceiveManyHandler};
use crate::runtime::{block, run};
use crate::time::DurationParts;

type Res<T> = Result<T, FfiError>;

/// How long to wait before a retry; see `delayq::Backoff`.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum BackoffSpec {
    /// `base * 2^(attempt-1)`, capped at `max`, with jitter.
    Exponential {
        base: DurationParts,
        max: DurationParts,
    },
    /// Explicit delays after the 1st, 2nd, ... failed attempt; the last one repeats.
    Schedule { delays: Vec<DurationParts> },
}

/// Options of a reliable queue handle; see `delayq::ReliableQueueOptions`. A setting left
/// out (none) uses the one stored with the queue.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReliableOptions {
    pub visibility_timeout: Option<DurationParts>,
    pub max_attempts: Option<u32>,
    pub backoff: Option<BackoffSpec>,
    pub shards: Option<u32>,
    pub dead_letter_retention: Option<DurationParts>,
    pub idempotency_retention: Option<DurationParts>,
    /// Overwrite the stored settings with the named ones instead of failing.
    pub update_settings: bool,
    /// Run this process's transfer task for the queue.
    pub scheduler: bool,
    /// Longest pause between two transfer passes.
    pub reconcile_interval: DurationParts,
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

impl From<delayq::Backoff> for BackoffSpec {
    fn from(b: delayq::Backoff) -> Self {
        match b {
            delayq::Backoff::Exponential { base, max } => BackoffSpec::Exponential {
                base: base.into(),
                max: max.into(),
            },
            delayq::Backoff::Schedule(delays) => BackoffSpec::Schedule {
                delays: delays.into_iter().map(Into::into).collect(),
            },
        }
    }
}

impl ReliableOptions {
    /// Core's options; every duration is checked by core (`delayq::delay`).
    pub(crate) fn to_core(&self) -> delayq::Result<delayq::ReliableQueueOptions> {
        let delay = |d: Option<DurationParts>| d.map(DurationParts::delay).transpose();
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
            scheduler: delayq::SchedulerOptions {
                enabled: self.scheduler,
                reconcile_interval: self.reconcile_interval.timeout()?,
                ..Default::default()
            },
        })
    }
}

/// The settings of a reliable queue as stored with it; see `delayq::ReliableSettings`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReliableSettings {
    pub visibility_timeout: DurationParts,
    pub max_attempts: u32,
    pub backoff: BackoffSpec,
    pub shards: u32,
    /// None: dead letters are kept until requeued or purged.
    pub dead_letter_retention: Option<DurationParts>,
    /// None: acked ids are not remembered.
    pub idempotency_retention: Option<DurationParts>,
}

impl From<delayq::ReliableSettings> for ReliableSettings {
    fn from(s: delayq::ReliableSettings) -> Self {
        ReliableSettings {
            visibility_timeout: s.visibility_timeout.into(),
            max_attempts: s.max_attempts,
            backoff: s.backoff.into(),
            shards: s.shards,
            dead_letter_retention: s.dead_letter_retention.map(Into::into),
            idempotency_retention: s.idempotency_retention.map(Into::into),
        }
    }
}

/// What `offer_with_outcome` did: the id, and whether this call created the message.
#[derive(Debug, Clone, uniffi::Record)]
pub struct OfferOutcome {
    pub id: String,
    pub created: bool,
}

impl From<delayq::OfferOutcome> for OfferOutcome {
    fn from(o: delayq::OfferOutcome) -> Self {
        OfferOutcome {
            id: o.id,
            created: o.created,
        }
    }
}

/// Counts of a reliable queue.
#[derive(Debug, Clone, Copy, uniffi::Record)]
pub struct ReliableStats {
    pub delayed: u64,
    pub ready: u64,
    pub in_flight: u64,
    pub dead: u64,
}

/// A message in the dead letters.
#[derive(Debug, Clone, uniffi::Record)]
pub struct DeadLetter {
    pub id: String,
    pub payload: Vec<u8>,
    pub attempts: u32,
    pub died_at: i64,
}

impl From<delayq::ReliableStats> for ReliableStats {
    fn from(s: delayq::ReliableStats) -> Self {
        ReliableStats {
            delayed: s.delayed,
            ready: s.ready,
            in_flight: s.in_flight,
            dead: s.dead,
        }
    }
}

impl From<delayq::DeadLetter> for DeadLetter {
    fn from(d: delayq::DeadLetter) -> Self {
        DeadLetter {
            id: d.id,
            payload: d.payload,
            attempts: d.attempts,
            died_at: d.died_at,
        }
    }
}

/// One message for `offer_all`: its payload, delay and optional id.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReliableOfferEntry {
    pub payload: Vec<u8>,
    pub delay: DurationParts,
    pub id: Option<String>,
}

/// What `consume` calls for each delivery; implemented by the Kotlin facade. It runs on a
/// thread of its own (one per concurrent delivery), so it may block.
#[uniffi::export(foreign)]
pub trait DeliveryHandler: Send + Sync {
    /// Handles one delivery: returns `None` on success (the delivery is acked), or the
    /// failure's description (the delivery is nacked with the queue's back-off).
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
    fn new(inner: delayq::Delivery) -> Arc<Self> {
        Arc::new(Delivery { inner })
    }
}

impl ReliableQueue {
    pub(crate) fn new(inner: delayq::ReliableQueue) -> Self {
        ReliableQueue { inner }
    }

    fn offer_fut(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> impl Future<Output = delayq::Result<String>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.offer(payload, delay.delay()?, id.as_deref()).await }
    }

    fn offer_with_outcome_fut(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> impl Future<Output = delayq::Result<OfferOutcome>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let out = q
                .offer_with_outcome(payload, delay.delay()?, id.as_deref())
                .await?;
            Ok(out.into())
        }
    }

    fn offer_all_fut(
        &self,
        entries: Vec<ReliableOfferEntry>,
    ) -> impl Future<Output = delayq::Result<Vec<String>>> + Send + 'static {
        let outcomes = self.offer_all_with_outcome_fut(entries);
        async move { Ok(outcomes.await?.into_iter().map(|o| o.id).collect()) }
    }

    fn offer_all_with_outcome_fut(
        &self,
        entries: Vec<ReliableOfferEntry>,
    ) -> impl Future<Output = delayq::Result<Vec<OfferOutcome>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let checked = entries
                .into_iter()
                .map(|e| Ok((e.payload, e.delay.delay()?, e.id)))
                .collect::<delayq::Result<Vec<_>>>()?;
            let out = q
                .offer_all_with_outcome(checked.iter().map(|(p, d, id)| (p, *d, id.as_deref())))
                .await?;
            Ok(out.into_iter().map(Into::into).collect())
        }
    }

    fn cancel_fut(
        &self,
        id: String,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.cancel(&id).await }
    }

    fn reschedule_fut(
        &self,
        id: String,
        delay: DurationParts,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.reschedule(&id, delay.delay()?).await }
    }

    fn receive_fut(
        &self,
        timeout: Option<DurationParts>,
    ) -> impl Future<Output = delayq::Result<Option<Arc<Delivery>>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let timeout = timeout.map(DurationParts::timeout).transpose()?;
            Ok(q.receive(timeout).await?.map(Delivery::new))
        }
    }

    fn receive_many_fut(
        &self,
        n: u32,
        timeout: Option<DurationParts>,
    ) -> impl Future<Output = delayq::Result<Vec<Arc<Delivery>>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let timeout = timeout.map(DurationParts::timeout).transpose()?;
            let got = q.receive_many(n as usize, timeout).await?;
            Ok(got.into_iter().map(Delivery::new).collect())
        }
    }

    fn ack_many_fut(
        &self,
        deliveries: Vec<Arc<Delivery>>,
    ) -> impl Future<Output = delayq::Result<Vec<bool>>> + Send + 'static {
        let q = self.inner.clone();
        let list: Vec<delayq::Delivery> = deliveries.iter().map(|d| d.inner.clone()).collect();
        async move { q.ack_many(&list).await }
    }

    fn settings_fut(
        &self,
    ) -> impl Future<Output = delayq::Result<ReliableSettings>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.settings().await.map(Into::into) }
    }

    fn close_gracefully_fut(
        &self,
        deadline: DurationParts,
    ) -> impl Future<Output = delayq::Result<()>> + Send + 'static {
        // Owned by the future from the start: given up (a cancelled coroutine or future),
        // even before it ran, the handle closes at once.
        let guard = CloseOnDrop(self.inner.clone());
        async move {
            let guard = guard;
            guard.0.close_gracefully(deadline.timeout()?).await
        }
    }

    fn stats_fut(&self) -> impl Future<Output = delayq::Result<ReliableStats>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.stats().await.map(Into::into) }
    }

    fn dead_letters_fut(
        &self,
        limit: u32,
    ) -> impl Future<Output = delayq::Result<Vec<DeadLetter>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let list = q.dead_letters(limit as usize).await?;
            Ok(list.into_iter().map(Into::into).collect())
        }
    }

    fn requeue_dead_fut(
        &self,
        ids: Option<Vec<String>>,
    ) -> impl Future<Output = delayq::Result<u64>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.requeue_dead(ids.as_deref()).await }
    }

    fn purge_dead_fut(&self) -> impl Future<Output = delayq::Result<u64>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.purge_dead().await }
    }

    /// Core's `consume`, with each delivery handed to `handler` on a blocking thread.
    fn consume_fut(
        &self,
        concurrency: u32,
        handler: Arc<dyn DeliveryHandler>,
    ) -> impl Future<Output = delayq::Result<()>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            q.consume(
                move |d| {
                    let handler = handler.clone();
                    async move {
                        let delivery = Delivery::new(d);
                        match tokio::task::spawn_blocking(move || handler.handle(delivery)).await {
                            Ok(None) => Ok(()),
                            Ok(Some(failure)) => Err(failure),
                            Err(e) => Err(format!("handler failed: {e}")),
                        }
                    }
                },
                concurrency as usize,
            )
            .await
        }
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

    /// Offers `payload` due after `delay`; returns its id (generated, or `id`). An `id`
    /// still waiting or in flight is not offered twice.
    pub async fn offer(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> Res<String> {
        run(self.offer_fut(payload, delay, id)).await
    }
    pub fn offer_blocking(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> Res<String> {
        block(self.offer_fut(payload, delay, id))
    }

    /// Like `offer`; tells whether this call created the message or found one with its id.
    pub async fn offer_with_outcome(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> Res<OfferOutcome> {
        run(self.offer_with_outcome_fut(payload, delay, id)).await
    }
    pub fn offer_with_outcome_blocking(
        &self,
        payload: Vec<u8>,
        delay: DurationParts,
        id: Option<String>,
    ) -> Res<OfferOutcome> {
        block(self.offer_with_outcome_fut(payload, delay, id))
    }

    /// Offers many messages; returns their ids in order. All are checked first.
    pub async fn offer_all(&self, entries: Vec<ReliableOfferEntry>) -> Res<Vec<String>> {
        run(self.offer_all_fut(entries)).await
    }
    pub fn offer_all_blocking(&self, entries: Vec<ReliableOfferEntry>) -> Res<Vec<String>> {
        block(self.offer_all_fut(entries))
    }

    /// Like `offer_all`; an outcome per message, in order.
    pub async fn offer_all_with_outcome(
        &self,
        entries: Vec<ReliableOfferEntry>,
    ) -> Res<Vec<OfferOutcome>> {
        run(self.offer_all_with_outcome_fut(entries)).await
    }
    pub fn offer_all_with_outcome_blocking(
        &self,
        entries: Vec<ReliableOfferEntry>,
    ) -> Res<Vec<OfferOutcome>> {
        block(self.offer_all_with_outcome_fut(entries))
    }

    /// Removes a message that has not come due; returns whether there was one.
    pub async fn cancel(&self, id: String) -> Res<bool> {
        run(self.cancel_fut(id)).await
    }
    pub fn cancel_blocking(&self, id: String) -> Res<bool> {
        block(self.cancel_fut(id))
    }

    /// Moves a message that has not come due to `delay` from now.
    pub async fn reschedule(&self, id: String, delay: DurationParts) -> Res<bool> {
        run(self.reschedule_fut(id, delay)).await
    }
    pub fn reschedule_blocking(&self, id: String, delay: DurationParts) -> Res<bool> {
        block(self.reschedule_fut(id, delay))
    }

    /// The next ready message, waiting up to `timeout` (none: forever) on the server,
    /// handed to `handler` (see `crate::handover`: the suspending `receive` without losing a
    /// delivery on cancel).
    pub fn receive_then(
        &self,
        timeout: Option<DurationParts>,
        handler: Arc<dyn ReceiveHandler>,
    ) -> Arc<PendingCall> {
        let on_error = handler.clone();
        handover::run_then(
            self.receive_fut(timeout),
            move |delivery| handler.on_delivery(delivery),
            move |kind, message| on_error.on_error(kind, message),
        )
    }
    pub fn receive_blocking(&self, timeout: Option<DurationParts>) -> Res<Option<Arc<Delivery>>> {
        block(self.receive_fut(timeout))
    }

    /// Up to `n` ready messages in one round trip, waiting up to `timeout` (none: forever)
    /// for the first, handed to `handler` (as `receive_then`); empty when the time passes.
    pub fn receive_many_then(
        &self,
        n: u32,
        timeout: Option<DurationParts>,
        handler: Arc<dyn ReceiveManyHandler>,
    ) -> Arc<PendingCall> {
        let on_error = handler.clone();
        handover::run_then(
            self.receive_many_fut(n, timeout),
            move |deliveries| handler.on_deliveries(deliveries),
            move |kind, message| on_error.on_error(kind, message),
        )
    }
    pub fn receive_many_blocking(
        &self,
        n: u32,
        timeout: Option<DurationParts>,
    ) -> Res<Vec<Arc<Delivery>>> {
        block(self.receive_many_fut(n, timeout))
    }

    /// Acks many deliveries in one round trip; for each, whether its lease was still held.
    pub async fn ack_many(&self, deliveries: Vec<Arc<Delivery>>) -> Res<Vec<bool>> {
        run(self.ack_many_fut(deliveries)).await
    }
    pub fn ack_many_blocking(&self, deliveries: Vec<Arc<Delivery>>) -> Res<Vec<bool>> {
        block(self.ack_many_fut(deliveries))
    }

    /// The queue's settings as stored in Redis.
    pub async fn settings(&self) -> Res<ReliableSettings> {
        run(self.settings_fut()).await
    }
    pub fn settings_blocking(&self) -> Res<ReliableSettings> {
        block(self.settings_fut())
    }

    /// Acks through this handle that found their delivery already ended (lease lost).
    pub fn lost_leases(&self) -> u64 {
        self.inner.lost_leases()
    }

    /// Closes this handle gracefully: consumers stop receiving, running handlers get up to
    /// `deadline` to finish and are settled, prefetched deliveries go back, then it closes.
    pub async fn close_gracefully(&self, deadline: DurationParts) -> Res<()> {
        run(self.close_gracefully_fut(deadline)).await
    }
    pub fn close_gracefully_blocking(&self, deadline: DurationParts) -> Res<()> {
        block(self.close_gracefully_fut(deadline))
    }

    /// Counts of delayed, ready, in-flight and dead messages.
    pub async fn stats(&self) -> Res<ReliableStats> {
        run(self.stats_fut()).await
    }
    pub fn stats_blocking(&self) -> Res<ReliableStats> {
        block(self.stats_fut())
    }

    /// Up to `limit` dead letters.
    pub async fn dead_letters(&self, limit: u32) -> Res<Vec<DeadLetter>> {
        run(self.dead_letters_fut(limit)).await
    }
    pub fn dead_letters_blocking(&self, limit: u32) -> Res<Vec<DeadLetter>> {
        block(self.dead_letters_fut(limit))
    }

    /// Makes dead letters ready again (those with `ids`, or all); returns how many.
    pub async fn requeue_dead(&self, ids: Option<Vec<String>>) -> Res<u64> {
        run(self.requeue_dead_fut(ids)).await
    }
    pub fn requeue_dead_blocking(&self, ids: Option<Vec<String>>) -> Res<u64> {
        block(self.requeue_dead_fut(ids))
    }

    /// Deletes every dead letter; returns how many there were.
    pub async fn purge_dead(&self) -> Res<u64> {
        run(self.purge_dead_fut()).await
    }
    pub fn purge_dead_blocking(&self) -> Res<u64> {
        block(self.purge_dead_fut())
    }

    /// Runs `handler` on deliveries, `concurrency` at a time, until the handle or its
    /// client is closed: acks on success, nacks on failure (core's consume: it receives
    /// ahead, extends the leases of running handlers, batches acks).
    pub async fn consume(&self, concurrency: u32, handler: Arc<dyn DeliveryHandler>) -> Res<()> {
        run(self.consume_fut(concurrency, handler)).await
    }
    pub fn consume_blocking(&self, concurrency: u32, handler: Arc<dyn DeliveryHandler>) -> Res<()> {
        block(self.consume_fut(concurrency, handler))
    }
}

/// Closes the handle when dropped (a graceful close given up).
struct CloseOnDrop(delayq::ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Delivery {
    fn extend_fut(
        &self,
        duration: DurationParts,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let d = self.inner.clone();
        async move { d.extend(duration.delay()?).await }
    }

    fn ack_fut(&self) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let d = self.inner.clone();
        async move { d.ack().await }
    }

    fn nack_fut(
        &self,
        delay: Option<DurationParts>,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let d = self.inner.clone();
        async move {
            let delay = delay.map(DurationParts::delay).transpose()?;
            d.nack(delay).await
        }
    }
}

#[uniffi::export]
impl Delivery {
    /// Gives the message back untouched, in the background: for a delivery the facade could
    /// not hand over (its coroutine or future was cancelled meanwhile).
    pub fn release(&self) {
        handover::release(self.inner.clone());
    }

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

    /// When this delivery's lease ends (server Unix ms); moved by `extend`.
    pub fn deadline(&self) -> i64 {
        self.inner.deadline()
    }

    /// Moves the end of the lease to `duration` from now; false when it was already lost.
    pub async fn extend(&self, duration: DurationParts) -> Res<bool> {
        run(self.extend_fut(duration)).await
    }
    pub fn extend_blocking(&self, duration: DurationParts) -> Res<bool> {
        block(self.extend_fut(duration))
    }

    /// Acknowledges; false when this delivery had already ended.
    pub async fn ack(&self) -> Res<bool> {
        run(self.ack_fut()).await
    }
    pub fn ack_blocking(&self) -> Res<bool> {
        block(self.ack_fut())
    }

    /// Retries after `delay` (none: the queue's back-off), or buries the message after its
    /// last attempt; false when this delivery had already ended.
    pub async fn nack(&self, delay: Option<DurationParts>) -> Res<bool> {
        run(self.nack_fut(delay)).await
    }
    pub fn nack_blocking(&self, delay: Option<DurationParts>) -> Res<bool> {
        block(self.nack_fut(delay))
    }
}
