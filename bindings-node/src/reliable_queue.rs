//! `ReliableQueue` and `Delivery`: every call returns a Promise.

use std::sync::{Arc, Mutex, PoisonError};

use delayq::handover::Handover;
use napi::bindgen_prelude::{BigInt, Buffer, BufferSlice, Either, FunctionRef, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use tokio::sync::oneshot;

use crate::bridge::{self, promise, wait, Nothing};
use crate::convert;
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
    pub delay_ms: Either<f64, BigInt>,
    pub id: Option<String>,
}

/// The settings of a reliable queue, as stored in Redis with it (the same names as the
/// options that set them).
#[napi(object)]
pub struct ReliableSettings {
    /// The lease of a delivery, in ms.
    pub visibility_timeout_ms: i64,
    /// Deliveries before the dead letters.
    pub max_attempts: u32,
    /// The back-off schedule in ms, when the back-off is one (the last delay repeats).
    pub backoff_ms: Option<Vec<i64>>,
    /// The first delay of an exponential back-off, in ms.
    pub backoff_base_ms: Option<i64>,
    /// The longest delay of an exponential back-off, in ms.
    pub backoff_max_ms: Option<i64>,
    /// Sub-queues.
    pub shards: u32,
    /// How long dead letters are kept, in ms; 0: until requeued or purged.
    pub dead_letter_retention_ms: i64,
    /// How long acked ids are remembered for de-duplication, in ms; 0: not at all.
    pub idempotency_retention_ms: i64,
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl From<delayq::ReliableSettings> for ReliableSettings {
    fn from(s: delayq::ReliableSettings) -> Self {
        let (backoff_ms, backoff_base_ms, backoff_max_ms) = match s.backoff {
            delayq::Backoff::Schedule(delays) => {
                (Some(delays.into_iter().map(millis).collect()), None, None)
            }
            delayq::Backoff::Exponential { base, max } => {
                (None, Some(millis(base)), Some(millis(max)))
            }
        };
        ReliableSettings {
            visibility_timeout_ms: millis(s.visibility_timeout),
            max_attempts: s.max_attempts,
            backoff_ms,
            backoff_base_ms,
            backoff_max_ms,
            shards: s.shards,
            dead_letter_retention_ms: s.dead_letter_retention.map(millis).unwrap_or(0),
            idempotency_retention_ms: s.idempotency_retention.map(millis).unwrap_or(0),
        }
    }
}

/// What `offerWithOutcome` did.
#[napi(object)]
pub struct OfferOutcome {
    /// The message id.
    pub id: String,
    /// Whether this call created the message (false: one with this id was already
    /// waiting, ready, in flight, or acked within the idempotency retention).
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

#[napi]
impl ReliableQueue {
    /// The queue's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Offers `payload` due after `delayMs`; resolves to its id and whether this call
    /// created the message (false: one with this id was already waiting, ready, in flight,
    /// or acked within the idempotency retention).
    #[napi]
    pub fn offer<'e>(
        &self,
        env: &'e Env,
        payload: BufferSlice,
        delay_ms: Either<f64, BigInt>,
        id: Option<String>,
    ) -> Result<PromiseRaw<'e, OfferOutcome>> {
        let (q, p, delay) = (
            self.inner.clone(),
            payload.to_vec(),
            convert::delay(delay_ms)?,
        );
        promise(env, async move {
            Ok(q.offer_with_outcome(p, delay, id.as_deref()).await?.into())
        })
    }

    /// Offers many messages; resolves to an outcome per message, in order.
    #[napi]
    pub fn offer_all<'e>(
        &self,
        env: &'e Env,
        messages: Vec<ReliableOfferEntry>,
    ) -> Result<PromiseRaw<'e, Vec<OfferOutcome>>> {
        let mut checked = Vec::with_capacity(messages.len());
        for m in messages {
            checked.push((m.payload.to_vec(), convert::delay(m.delay_ms)?, m.id));
        }
        let q = self.inner.clone();
        promise(env, async move {
            let list = checked.iter().map(|(p, d, id)| (p, *d, id.as_deref()));
            Ok(q.offer_all_with_outcome(list)
                .await?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// Removes a message that has not come due; resolves to whether there was one.
    #[napi]
    pub fn cancel<'e>(&self, env: &'e Env, id: String) -> Result<PromiseRaw<'e, bool>> {
        let q = self.inner.clone();
        promise(env, async move { q.cancel(&id).await })
    }

    /// Moves a message that has not come due to `delayMs` from now.
    #[napi]
    pub fn reschedule<'e>(
        &self,
        env: &'e Env,
        id: String,
        delay_ms: Either<f64, BigInt>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let (q, delay) = (self.inner.clone(), convert::delay(delay_ms)?);
        promise(env, async move { q.reschedule(&id, delay).await })
    }

    /// Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
    /// `timeoutMs` (none: forever) for the first; resolves to an empty list when the time
    /// passes. Runs as core's handover registered as `id` (`giveUp(id)` gives them back).
    #[napi]
    pub fn receive_many<'e>(
        &self,
        env: &'e Env,
        id: u32,
        n: Either<f64, BigInt>,
        timeout_ms: Option<Either<f64, BigInt>>,
    ) -> Result<PromiseRaw<'e, Vec<Delivery>>> {
        let (n, timeout) = (convert::count(n, "n")?, convert::timeout(timeout_ms)?);
        let handover = Handover::receive_many(&self.inner, n, timeout);
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
        timeout_ms: Option<Either<f64, BigInt>>,
    ) -> Result<PromiseRaw<'e, Option<Delivery>>> {
        let handover = Handover::receive(&self.inner, convert::timeout(timeout_ms)?);
        wait(env, id, handover, |d| d.map(Into::into))
    }

    /// Acks many deliveries in one round trip; resolves, for each, to whether its lease
    /// was still held.
    #[napi]
    pub fn ack_many<'e>(
        &self,
        env: &'e Env,
        deliveries: Vec<&Delivery>,
    ) -> Result<PromiseRaw<'e, Vec<bool>>> {
        let list: Vec<delayq::Delivery> = deliveries.iter().map(|d| d.inner.clone()).collect();
        let q = self.inner.clone();
        promise(env, async move { q.ack_many(&list).await })
    }

    /// The queue's settings as stored in Redis.
    #[napi]
    pub fn settings<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ReliableSettings>> {
        let q = self.inner.clone();
        promise(env, async move { Ok(q.settings().await?.into()) })
    }

    /// Acks through this handle that found their delivery already ended (lease lost).
    #[napi]
    pub fn lost_leases(&self) -> i64 {
        self.inner.lost_leases() as i64
    }

    /// Core's `consume`, registered as `id` (`giveUp(id)` stops it): `handler` is called
    /// on the JavaScript thread with each delivery, `concurrency` at a time, and reports
    /// its outcome with `delivery.finish(failure)`. Resolves when the handle or client is
    /// closed (after a graceful close, once the running handlers were settled).
    #[napi]
    pub fn consume<'e>(
        &self,
        env: &'e Env,
        id: u32,
        handler: FunctionRef<Delivery, ()>,
        concurrency: Either<f64, BigInt>,
    ) -> Result<PromiseRaw<'e, ()>> {
        let concurrency = convert::count(concurrency, "concurrency")?;
        let (pump, handler, q) = (bridge::pump(env)?, Arc::new(handler), self.inner.clone());
        let run = move |d: delayq::Delivery| {
            let (tx, rx) = oneshot::channel();
            let handler = handler.clone();
            pump.post(Box::new(move |env| {
                let delivery = Delivery {
                    inner: d,
                    done: Mutex::new(Some(tx)),
                };
                if let Ok(f) = handler.borrow_back(env) {
                    let _ = f.call(delivery);
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

    /// Counts: delayed, ready, inFlight, dead.
    #[napi]
    pub fn stats<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ReliableStats>> {
        let q = self.inner.clone();
        promise(env, async move {
            let s = q.stats().await?;
            Ok(ReliableStats {
                delayed: s.delayed as i64,
                ready: s.ready as i64,
                in_flight: s.in_flight as i64,
                dead: s.dead as i64,
            })
        })
    }

    /// Up to `limit` dead letters (default: core's `DEAD_LETTERS_LIMIT`).
    #[napi]
    pub fn dead_letters<'e>(
        &self,
        env: &'e Env,
        limit: Option<Either<f64, BigInt>>,
    ) -> Result<PromiseRaw<'e, Vec<DeadLetter>>> {
        let limit = limit.map(|n| convert::count(n, "limit")).transpose()?;
        let q = self.inner.clone();
        promise(env, async move {
            let list = q
                .dead_letters(limit.unwrap_or(100))
                .await?;
            Ok(list
                .into_iter()
                .map(|d| DeadLetter {
                    id: d.id,
                    payload: d.payload.into(),
                    attempts: d.attempts,
                    died_at: d.died_at,
                })
                .collect())
        })
    }

    /// Makes dead letters ready again (the given ids, or all); resolves to how many.
    #[napi]
    pub fn requeue_dead<'e>(
        &self,
        env: &'e Env,
        ids: Option<Vec<String>>,
    ) -> Result<PromiseRaw<'e, i64>> {
        let q = self.inner.clone();
        promise(env, async move {
            Ok(q.requeue_dead(ids.as_deref()).await? as i64)
        })
    }

    /// Deletes every dead letter; resolves to how many there were.
    #[napi]
    pub fn purge_dead<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, i64>> {
        let q = self.inner.clone();
        promise(env, async move { Ok(q.purge_dead().await? as i64) })
    }

    /// Closes this handle at once.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    /// Closes this handle gracefully: consumers stop receiving, running handlers get up to
    /// `deadlineMs` to finish and are settled, prefetched deliveries go back, then the
    /// handle closes.
    #[napi]
    pub fn close_gracefully<'e>(
        &self,
        env: &'e Env,
        deadline_ms: Either<f64, BigInt>,
    ) -> Result<PromiseRaw<'e, ()>> {
        let deadline = convert::timeout(Some(deadline_ms))?.unwrap_or_default();
        let q = self.inner.clone();
        promise(env, async move { q.close_gracefully(deadline).await })
    }
}

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

    /// When this delivery's lease ends (server Unix ms); moved by `extend`.
    #[napi(getter)]
    pub fn deadline(&self) -> i64 {
        self.inner.deadline()
    }

    /// Moves the end of the lease to `ms` from now; resolves to false when the lease was
    /// already lost.
    #[napi]
    pub fn extend<'e>(
        &self,
        env: &'e Env,
        ms: Either<f64, BigInt>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let (d, duration) = (self.inner.clone(), convert::delay(ms)?);
        promise(env, async move { d.extend(duration).await })
    }

    /// Acknowledges; resolves to false when this delivery had already ended.
    #[napi]
    pub fn ack<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, bool>> {
        let d = self.inner.clone();
        promise(env, async move { d.ack().await })
    }

    /// Retries after `delayMs` (default: the queue's back-off), or buries the message
    /// after its last attempt.
    #[napi]
    pub fn nack<'e>(
        &self,
        env: &'e Env,
        delay_ms: Option<Either<f64, BigInt>>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let (d, delay) = (
            self.inner.clone(),
            delay_ms.map(convert::delay).transpose()?,
        );
        promise(env, async move { d.nack(delay).await })
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
