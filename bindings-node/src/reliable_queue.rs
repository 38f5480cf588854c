//! `ReliableQueue` and `Delivery`: every call returns a Promise.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use delayq::handover::Handover;
use napi::bindgen_prelude::{Buffer, BufferSlice, FunctionRef, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use tokio::sync::oneshot;

use crate::bridge::{self, wait, Nothing};
use crate::convert::{count, delay, timeout};
use crate::error::Result;

/// Counts of a reliable queue.
#[napi(object)]
pub struct ReliableStats {
    pub delayed: i64,
    pub ready: i64,
    pub in_flight: i64,
    pub dead: i64,
}

/// A message in the dead letters.
#[napi(object)]
pub struct DeadLetter {
    pub id: String,
    pub payload: Buffer,
    pub attempts: u32,
    pub died_at: i64,
}

/// One message to offer.
#[napi(object)]
pub struct ReliableOfferEntry {
    pub payload: Buffer,
    pub delay_ms: f64,
    pub id: Option<String>,
    pub shard_key: Option<String>,
}

/// The settings of a reliable queue as stored in Redis with it, named as the options that
/// set them, in ms: a back-off is a schedule (`backoffMs`) or exponential (base and max);
/// a retention of 0 keeps dead letters until requeued or purged, and acked ids not at all.
#[napi(object)]
pub struct ReliableSettings {
    pub visibility_timeout_ms: i64,
    pub max_attempts: u32,
    pub backoff_ms: Option<Vec<i64>>,
    pub backoff_base_ms: Option<i64>,
    pub backoff_max_ms: Option<i64>,
    pub shards: u32,
    pub dead_letter_retention_ms: i64,
    pub idempotency_retention_ms: i64,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl From<delayq::ReliableSettings> for ReliableSettings {
    fn from(s: delayq::ReliableSettings) -> Self {
        let (list, base, max) = match s.backoff {
            delayq::Backoff::Schedule(d) => (Some(d.into_iter().map(millis).collect()), None, None),
            delayq::Backoff::Exponential { base, max } => {
                (None, Some(millis(base)), Some(millis(max)))
            }
        };
        ReliableSettings {
            visibility_timeout_ms: millis(s.visibility_timeout),
            max_attempts: s.max_attempts,
            backoff_ms: list,
            backoff_base_ms: base,
            backoff_max_ms: max,
            shards: s.shards,
            dead_letter_retention_ms: s.dead_letter_retention.map_or(0, millis),
            idempotency_retention_ms: s.idempotency_retention.map_or(0, millis),
        }
    }
}

/// What an offer did: the id, and whether this call created the message (false: one with
/// this id was already waiting, ready, in flight, or acked within the idempotency
/// retention).
#[napi(object)]
pub struct OfferOutcome {
    pub id: String,
    pub created: bool,
    /// When the message is due (server Unix ms); absent when it was de-duplicated.
    pub due_at: Option<i64>,
}

fn outcome(o: delayq::OfferOutcome) -> OfferOutcome {
    OfferOutcome {
        id: o.id,
        created: o.created,
        due_at: o.due_at,
    }
}

/// A handle on a reliable queue: at-least-once delivery with acknowledgement.
#[napi]
pub struct ReliableQueue {
    pub(crate) inner: delayq::ReliableQueue,
}

/// What a consume handler reports: `Err(failure)` nacks.
type Outcome = std::result::Result<(), String>;

/// A received message: `ack()` when done, `nack(delayMs?)` to retry, `extend(ms)` to keep
/// it longer.
#[napi]
pub struct Delivery {
    inner: delayq::Delivery,
    /// Where a consume handler's outcome goes (`finish`).
    done: Mutex<Option<oneshot::Sender<Outcome>>>,
}

impl From<delayq::Delivery> for Delivery {
    fn from(inner: delayq::Delivery) -> Self {
        Delivery {
            inner,
            done: Mutex::default(),
        }
    }
}

type Offers = Vec<(Vec<u8>, Duration, Option<String>, Option<String>)>;

fn offers(list: Vec<ReliableOfferEntry>) -> Result<Offers> {
    list.into_iter()
        .map(|m| Ok((m.payload.to_vec(), delay(m.delay_ms)?, m.id, m.shard_key)))
        .collect()
}

calls! { ReliableQueue {
    "Offers `payload` due after `delayMs` (with `id`, once; in the shard of `shardKey`); resolves to its outcome."
    offer(payload: BufferSlice => payload.to_vec(), delay_ms: f64 => delay(delay_ms)?,
        id: Option<String>, shard_key: Option<String>) -> OfferOutcome = |q| {
        let (id, key) = (id.as_deref(), shard_key.as_deref());
        Ok(outcome(q.offer_with_shard_key(payload, delay_ms, id, key).await?))
    };
    "Offers many messages; resolves to an outcome per message, in order."
    offer_all(list: Vec<ReliableOfferEntry> => offers(list)?) -> Vec<OfferOutcome> = |q| {
        let list = list.iter().map(|(p, d, id, key)| (p, *d, id.as_deref(), key.as_deref()));
        Ok(q.offer_all_with_shard_keys(list).await?.into_iter().map(outcome).collect())
    };
    "Removes a message that has not come due; resolves to whether there was one."
    cancel(id: String) -> bool = |q| q.cancel(&id).await;
    "Moves a message that has not come due to `delayMs` from now."
    reschedule(id: String, delay_ms: f64 => delay(delay_ms)?) -> bool =
        |q| q.reschedule(&id, delay_ms).await;
    "Acks many deliveries in one round trip; for each, whether its lease was still held."
    ack_many(list: Vec<&Delivery> => list.iter().map(|d| d.inner.clone()).collect::<Vec<_>>())
        -> Vec<bool> = |q| q.ack_many(&list).await;
    "The queue's settings as stored in Redis."
    settings() -> ReliableSettings = |q| Ok(q.settings().await?.into());
    "Counts: delayed, ready, inFlight, dead."
    stats() -> ReliableStats = |q| {
        let s = q.stats().await?;
        let (delayed, ready, in_flight, dead) = (s.delayed, s.ready, s.in_flight, s.dead);
        Ok(ReliableStats { delayed: delayed as i64, ready: ready as i64, in_flight: in_flight as i64, dead: dead as i64 })
    };
    "Up to `limit` dead letters (default: core's `DEAD_LETTERS_LIMIT`, 100)."
    dead_letters(limit: Option<f64> => limit.map(|n| count(n, "limit")).transpose()?)
        -> Vec<DeadLetter> = |q| {
        let list = q.dead_letters(limit.unwrap_or(delayq::DEAD_LETTERS_LIMIT)).await?.into_iter();
        Ok(list.map(|d| DeadLetter { id: d.id, payload: d.payload.into(), attempts: d.attempts, died_at: d.died_at }).collect())
    };
    "Makes dead letters ready again (the given ids, or all); resolves to how many."
    requeue_dead(ids: Option<Vec<String>>) -> i64 = |q| Ok(q.requeue_dead(ids.as_deref()).await? as i64);
    "Deletes every dead letter; resolves to how many there were."
    purge_dead() -> i64 = |q| Ok(q.purge_dead().await? as i64);
    "Closes gracefully: consumers stop receiving, running handlers get up to `deadlineMs` to finish and are settled, prefetched deliveries go back, then the handle closes."
    close_gracefully(deadline: f64 => timeout(Some(deadline))?.unwrap_or_default())
        -> () = |q| q.close_gracefully(deadline).await;
}}

#[napi]
impl ReliableQueue {
    /// The queue's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Up to `n` ready messages (1 to 1000) in one round trip, waiting up to `timeoutMs`
    /// (none: forever) for the first; empty when the time passes. Core's handover,
    /// registered as `id` (`giveUp(id)` gives them back).
    #[napi]
    pub fn receive_many<'e>(
        &self,
        env: &'e Env,
        id: u32,
        n: f64,
        timeout_ms: Option<f64>,
    ) -> Result<PromiseRaw<'e, Vec<Delivery>>> {
        let handover = Handover::receive_many(&self.inner, count(n, "n")?, timeout(timeout_ms)?);
        wait(env, id, handover, |list| {
            list.into_iter().map(Into::into).collect()
        })
    }

    /// `receiveMany` of one: the next ready message, or null when the time passes.
    #[napi]
    pub fn receive<'e>(
        &self,
        env: &'e Env,
        id: u32,
        timeout_ms: Option<f64>,
    ) -> Result<PromiseRaw<'e, Option<Delivery>>> {
        let handover = Handover::receive(&self.inner, timeout(timeout_ms)?);
        wait(env, id, handover, |d| d.map(Into::into))
    }

    /// Core's `consume`, registered as `id` (`giveUp(id)` stops it): `handler` is called on
    /// the JavaScript thread with each delivery, `concurrency` at a time, and reports its
    /// outcome with `delivery.finish(failure)`. Resolves when the handle or client is
    /// closed (after a graceful close, once the running handlers were settled).
    #[napi]
    pub fn consume<'e>(
        &self,
        env: &'e Env,
        id: u32,
        handler: FunctionRef<Delivery, ()>,
        concurrency: f64,
    ) -> Result<PromiseRaw<'e, ()>> {
        let concurrency = count(concurrency, "concurrency")?;
        let (pump, handler, q) = (bridge::pump(env)?, Arc::new(handler), self.inner.clone());
        let run = move |inner| {
            let (tx, rx) = oneshot::channel();
            let (handler, done) = (handler.clone(), Mutex::new(Some(tx)));
            pump.post(Box::new(move |env| {
                if let Ok(f) = handler.borrow_back(env) {
                    let _ = f.call(Delivery { inner, done });
                }
            }));
            async move {
                rx.await
                    .unwrap_or_else(|_| Err("the handler never finished".into()))
            }
        };
        let call = async move { q.consume(run, concurrency).await.map(|()| Nothing) };
        wait(env, id, Handover::start(bridge::runtime(), call), |_| ())
    }

    /// Acks through this handle that found their delivery already ended (lease lost).
    #[napi]
    pub fn lost_leases(&self) -> i64 {
        self.inner.lost_leases() as i64
    }

    /// Closes this handle at once.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

calls! { Delivery {
    "Moves the end of the lease to `ms` from now; false when the lease was already lost."
    extend(ms: f64 => delay(ms)?) -> bool = |d| d.extend(ms).await;
    "Acknowledges; resolves to false when this delivery had already ended."
    ack() -> bool = |d| d.ack().await;
    "Retries after `delayMs` (default: the queue's back-off), or buries the message after its last attempt."
    nack(delay_ms: Option<f64> => delay_ms.map(delay).transpose()?) -> bool =
        |d| d.nack(delay_ms).await;
}}

#[napi]
impl Delivery {
    /// The message id.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id.clone()
    }

    /// The payload.
    #[napi(getter)]
    pub fn payload(&self) -> Buffer {
        self.inner.payload.clone().into()
    }

    /// Which delivery this is: 1 for the first.
    #[napi(getter)]
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// When the message came due (server Unix ms).
    #[napi(getter)]
    pub fn due_at(&self) -> i64 {
        self.inner.due_at
    }

    /// The shard the message lives in (0 for a queue of one shard).
    #[napi(getter)]
    pub fn shard(&self) -> u32 {
        self.inner.shard()
    }

    /// When this delivery's lease ends (server Unix ms); moved by `extend`.
    #[napi(getter)]
    pub fn deadline(&self) -> i64 {
        self.inner.deadline()
    }

    /// Reports the outcome of the consume handler given this delivery: `failure` null
    /// acks it, a description nacks it.
    #[napi]
    pub fn finish(&self, failure: Option<String>) {
        if let Some(tx) = self
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = tx.send(failure.map_or(Ok(()), Err));
        }
    }
}
