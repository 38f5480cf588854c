//! [`ReliableQueue`] and [`Delivery`]; the facade's `ReliableQueue.kt` documents them.

use std::sync::Arc;
use std::time::Duration;

use delayq::handover::Handover;
use delayq::{Backoff, DeadLetter, OfferOutcome, ReliableQueueOptions, ReliableSettings};
use delayq::{ReliableStats, SchedulerOptions};

use crate::bridge::{ReceiveHandover, ReceiveManyHandover};

#[uniffi::remote(Enum)]
pub enum Backoff {
    Exponential { base: Duration, max: Duration },
    Schedule(Vec<Duration>),
}

#[uniffi::export]
pub fn default_backoff() -> Backoff {
    Backoff::default()
}

records! {
    #[uniffi::remote(Record)]
    ReliableQueueOptions {
        visibility_timeout: Option<Duration>, max_attempts: Option<u32>, backoff: Option<Backoff>,
        shards: Option<u32>, dead_letter_retention: Option<Duration>,
        idempotency_retention: Option<Duration>, update_settings: bool, scheduler: SchedulerOptions,
    }
    #[uniffi::remote(Record)]
    ReliableSettings {
        visibility_timeout: Duration, max_attempts: u32, backoff: Backoff, shards: u32,
        dead_letter_retention: Option<Duration>, idempotency_retention: Option<Duration>,
    }
    #[uniffi::remote(Record)] OfferOutcome { id: String, created: bool, due_at: Option<i64> }
    #[uniffi::remote(Record)] ReliableStats { delayed: u64, ready: u64, in_flight: u64, dead: u64 }
    #[uniffi::remote(Record)]
    DeadLetter { id: String, payload: Vec<u8>, attempts: u32, died_at: i64 }
    #[derive(uniffi::Record)]
    ReliableOfferEntry {
        payload: Vec<u8>, delay: Duration, id: Option<String>, shard_key: Option<String>,
    }
    /// What a delivery carries, read in one call.
    #[derive(uniffi::Record)]
    Message { id: String, payload: Vec<u8>, attempt: u32, due_at: i64, shard: u32 }
}

/// What `consume` runs for each delivery, on a blocking thread of its own: none on success
/// (ack), else the failure (nack). Implemented by the facade.
#[uniffi::export(foreign)]
pub trait DeliveryHandler: Send + Sync {
    fn handle(&self, delivery: Arc<Delivery>) -> Option<String>;
}

#[derive(uniffi::Object)]
pub struct ReliableQueue(pub(crate) delayq::ReliableQueue);

#[uniffi::export]
impl ReliableQueue {
    pub fn name(&self) -> String {
        self.0.name().to_owned()
    }

    pub fn close_handle(&self) {
        self.0.close();
    }

    pub fn lost_leases(&self) -> u64 {
        self.0.lost_leases()
    }

    pub fn receive_handover(&self, timeout: Option<Duration>) -> Arc<ReceiveHandover> {
        Arc::new(ReceiveHandover(Handover::receive(&self.0, timeout)))
    }

    pub fn receive_many_handover(&self, n: u32, t: Option<Duration>) -> Arc<ReceiveManyHandover> {
        let h = Handover::receive_many(&self.0, n as usize, t);
        Arc::new(ReceiveManyHandover(h))
    }
}

twins!(ReliableQueue.0 as q {
    fn offer_all / offer_all_blocking(entries: Vec<ReliableOfferEntry>) -> Vec<OfferOutcome> {
        let entries = entries.iter().map(|e| (&e.payload, e.delay, e.id.as_deref(), e.shard_key.as_deref()));
        q.offer_all_with_shard_keys(entries).await
    }
    fn cancel / cancel_blocking(id: String) -> bool { q.cancel(&id).await }
    fn reschedule / reschedule_blocking(id: String, delay: Duration) -> bool { q.reschedule(&id, delay).await }
    fn receive / receive_blocking(timeout: Option<Duration>) -> Option<Arc<Delivery>> {
        Ok(q.receive(timeout).await?.map(Delivery::new))
    }
    fn receive_many / receive_many_blocking(n: u32, timeout: Option<Duration>) -> Vec<Arc<Delivery>> {
        Ok(q.receive_many(n as usize, timeout).await?.into_iter().map(Delivery::new).collect())
    }
    fn ack_many / ack_many_blocking(deliveries: Vec<Arc<Delivery>>) -> Vec<bool> {
        q.ack_many(&deliveries.iter().map(|d| d.0.clone()).collect::<Vec<_>>()).await
    }
    fn settings / settings_blocking() -> ReliableSettings { q.settings().await }
    fn close_gracefully / close_gracefully_blocking(deadline: Duration) -> () {
        // Given up (a cancelled coroutine or future), even before it ran, it closes at once.
        q.close_gracefully(deadline).await
    }
    fn stats / stats_blocking() -> ReliableStats { q.stats().await }
    fn dead_letters / dead_letters_blocking(limit: Option<u32>) -> Vec<DeadLetter> {
        q.dead_letters(limit.map_or(delayq::DEAD_LETTERS_LIMIT, |n| n as usize)).await
    }
    fn requeue_dead / requeue_dead_blocking(ids: Option<Vec<String>>) -> u64 { q.requeue_dead(ids.as_deref()).await }
    fn purge_dead / purge_dead_blocking() -> u64 { q.purge_dead().await }
    fn consume / consume_blocking(concurrency: u32, handler: Arc<dyn DeliveryHandler>) -> () {
        let handle = move |d| {
            let handler = handler.clone();
            async move {
                let handled = tokio::task::spawn_blocking(move || handler.handle(Delivery::new(d)));
                handled.await.map_err(|e| format!("handler failed: {e}"))?.map_or(Ok(()), Err)
            }
        };
        q.consume(handle, concurrency as usize).await
    }
});

#[derive(uniffi::Object)]
pub struct Delivery(delayq::Delivery);

impl Delivery {
    pub(crate) fn new(d: delayq::Delivery) -> Arc<Self> {
        Arc::new(Delivery(d))
    }
}

#[uniffi::export]
impl Delivery {
    pub fn message(&self) -> Message {
        let d = &self.0;
        let (id, payload, shard) = (d.id.clone(), d.payload.clone(), d.shard());
        Message {
            id,
            payload,
            attempt: d.attempt,
            due_at: d.due_at,
            shard,
        }
    }

    pub fn deadline(&self) -> i64 {
        self.0.deadline()
    }
}

twins!(Delivery.0 as d {
    fn extend / extend_blocking(duration: Duration) -> bool { d.extend(duration).await }
    fn ack / ack_blocking() -> bool { d.ack().await }
    fn nack / nack_blocking(delay: Option<Duration>) -> bool { d.nack(delay).await }
});
