//! `ReliableQueue` and `Delivery`: every call returns a Promise.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Buffer, Either, Promise, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{Env, Status};
use napi_derive::napi;

use crate::convert;
use crate::error::IntoJs;
use crate::{cancellable, CancelHandle};
use napi::Result;

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

/// The handler of `consume` as the JavaScript wrapper gives it: it resolves to null when
/// the user's handler succeeded, or to the failure's description (it never rejects).
type Handler = ThreadsafeFunction<Delivery, Promise<Option<String>>, Delivery, Status, false>;

/// A handle on a reliable queue: at-least-once delivery with acknowledgement.
#[napi]
pub struct ReliableQueue {
    pub(crate) inner: delayq::ReliableQueue,
}

/// A received message: `ack()` when done, `nack(delayMs?)` to retry, `extend(ms)` to keep
/// it longer.
#[napi]
pub struct Delivery {
    inner: delayq::Delivery,
}

#[napi]
impl ReliableQueue {
    /// The queue's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Offers `payload` due after `delayMs`; resolves to its id. A given `id` still
    /// waiting or in flight is not offered twice (resolves to the id, changes nothing).
    #[napi]
    pub async fn offer(
        &self,
        payload: Buffer,
        delay_ms: Either<f64, BigInt>,
        id: Option<String>,
    ) -> Result<String> {
        let delay = convert::delay(delay_ms)?;
        self.inner
            .offer(payload.to_vec(), delay, id.as_deref())
            .await
            .js()
    }

    /// Like `offer`; resolves to the id and whether this call created the message.
    #[napi]
    pub async fn offer_with_outcome(
        &self,
        payload: Buffer,
        delay_ms: Either<f64, BigInt>,
        id: Option<String>,
    ) -> Result<OfferOutcome> {
        let delay = convert::delay(delay_ms)?;
        let out = self
            .inner
            .offer_with_outcome(payload.to_vec(), delay, id.as_deref())
            .await
            .js()?;
        Ok(out.into())
    }

    /// Offers many messages; resolves to their ids.
    #[napi]
    pub async fn offer_all(&self, messages: Vec<ReliableOfferEntry>) -> Result<Vec<String>> {
        let out = self.offer_all_outcomes(messages).await?;
        Ok(out.into_iter().map(|o| o.id).collect())
    }

    /// Like `offerAll`; resolves to an outcome per message, in order.
    #[napi]
    pub async fn offer_all_with_outcome(
        &self,
        messages: Vec<ReliableOfferEntry>,
    ) -> Result<Vec<OfferOutcome>> {
        let out = self.offer_all_outcomes(messages).await?;
        Ok(out.into_iter().map(Into::into).collect())
    }

    /// Removes a message that has not come due; resolves to whether there was one.
    #[napi]
    pub async fn cancel(&self, id: String) -> Result<bool> {
        self.inner.cancel(&id).await.js()
    }

    /// Moves a message that has not come due to `delayMs` from now.
    #[napi]
    pub async fn reschedule(&self, id: String, delay_ms: Either<f64, BigInt>) -> Result<bool> {
        let delay = convert::delay(delay_ms)?;
        self.inner.reschedule(&id, delay).await.js()
    }

    /// Receives the next ready message, waiting up to `timeoutMs` (none: forever) on the
    /// server; resolves to null when the time passes.
    #[napi]
    pub async fn receive(
        &self,
        timeout_ms: Option<Either<f64, BigInt>>,
        cancel: Option<&CancelHandle>,
    ) -> Result<Option<Delivery>> {
        let timeout = convert::timeout(timeout_ms)?;
        let token = cancel.map(|c| c.token.clone());
        let q = self.inner.clone();
        cancellable(token, async move {
            Ok(q.receive(timeout)
                .await
                .js()?
                .map(|inner| Delivery { inner }))
        })
        .await
    }

    /// Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
    /// `timeoutMs` (none: forever) for the first; resolves to an empty list when the time
    /// passes.
    #[napi]
    pub async fn receive_many(
        &self,
        n: Either<f64, BigInt>,
        timeout_ms: Option<Either<f64, BigInt>>,
        cancel: Option<&CancelHandle>,
    ) -> Result<Vec<Delivery>> {
        let n = convert::count(n, "n")?;
        let timeout = convert::timeout(timeout_ms)?;
        let token = cancel.map(|c| c.token.clone());
        let q = self.inner.clone();
        cancellable(token, async move {
            Ok(q.receive_many(n, timeout)
                .await
                .js()?
                .into_iter()
                .map(|inner| Delivery { inner })
                .collect())
        })
        .await
    }

    /// Acks many deliveries in one round trip; resolves, for each, to whether its lease
    /// was still held.
    #[napi(ts_return_type = "Promise<Array<boolean>>")]
    pub fn ack_many<'env>(
        &self,
        env: &'env Env,
        deliveries: Vec<&Delivery>,
    ) -> Result<PromiseRaw<'env, Vec<bool>>> {
        let list: Vec<delayq::Delivery> = deliveries.iter().map(|d| d.inner.clone()).collect();
        let q = self.inner.clone();
        env.spawn_future(async move { q.ack_many(&list).await.js() })
    }

    /// The queue's settings as stored in Redis.
    #[napi]
    pub async fn settings(&self) -> Result<ReliableSettings> {
        Ok(self.inner.settings().await.js()?.into())
    }

    /// Acks through this handle that found their delivery already ended (lease lost).
    #[napi]
    pub fn lost_leases(&self) -> i64 {
        self.inner.lost_leases() as i64
    }

    /// Core's `consume`: `handler` runs on the JavaScript thread for each delivery,
    /// `concurrency` at a time. Resolves when the handle or client is closed (after a
    /// graceful close, once the running handlers were settled), or when `cancel` fires.
    #[napi(
        ts_args_type = "handler: (delivery: Delivery) => Promise<string | null>, concurrency: number, cancel?: CancelHandle | undefined | null"
    )]
    pub async fn consume(
        &self,
        handler: Handler,
        concurrency: u32,
        cancel: Option<&CancelHandle>,
    ) -> Result<()> {
        let token = cancel.map(|c| c.token.clone());
        let handler = Arc::new(handler);
        let q = self.inner.clone();
        cancellable(token, async move {
            q.consume(
                move |d| {
                    let handler = handler.clone();
                    async move {
                        let promise = handler
                            .call_async_catch(Delivery { inner: d })
                            .await
                            .map_err(|e| e.to_string())?;
                        match promise.await {
                            Ok(None) => Ok(()),
                            Ok(Some(failure)) => Err(failure),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                },
                concurrency as usize,
            )
            .await
            .js()
        })
        .await
    }

    /// Counts: delayed, ready, inFlight, dead.
    #[napi]
    pub async fn stats(&self) -> Result<ReliableStats> {
        let s = self.inner.stats().await.js()?;
        Ok(ReliableStats {
            delayed: s.delayed as i64,
            ready: s.ready as i64,
            in_flight: s.in_flight as i64,
            dead: s.dead as i64,
        })
    }

    /// Up to `limit` dead letters.
    #[napi]
    pub async fn dead_letters(
        &self,
        limit: Option<Either<f64, BigInt>>,
    ) -> Result<Vec<DeadLetter>> {
        let limit = match limit {
            Some(n) => convert::count(n, "limit")?,
            None => 100,
        };
        let list = self.inner.dead_letters(limit).await.js()?;
        Ok(list
            .into_iter()
            .map(|d| DeadLetter {
                id: d.id,
                payload: d.payload.into(),
                attempts: d.attempts,
                died_at: d.died_at,
            })
            .collect())
    }

    /// Makes dead letters ready again (the given ids, or all); resolves to how many.
    #[napi]
    pub async fn requeue_dead(&self, ids: Option<Vec<String>>) -> Result<i64> {
        Ok(self.inner.requeue_dead(ids.as_deref()).await.js()? as i64)
    }

    /// Deletes every dead letter; resolves to how many there were.
    #[napi]
    pub async fn purge_dead(&self) -> Result<i64> {
        Ok(self.inner.purge_dead().await.js()? as i64)
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
    pub async fn close_gracefully(&self, deadline_ms: Either<f64, BigInt>) -> Result<()> {
        let deadline = convert::timeout(Some(deadline_ms))?.unwrap_or_default();
        let q = self.inner.clone();
        // Closed at once if the graceful close is given up (the runtime shuts down).
        let guard = CloseOnDrop(q.clone());
        q.close_gracefully(deadline).await.js()?;
        drop(guard);
        Ok(())
    }
}

impl ReliableQueue {
    async fn offer_all_outcomes(
        &self,
        messages: Vec<ReliableOfferEntry>,
    ) -> Result<Vec<delayq::OfferOutcome>> {
        let mut checked = Vec::with_capacity(messages.len());
        for m in messages {
            checked.push((m.payload.to_vec(), convert::delay(m.delay_ms)?, m.id));
        }
        self.inner
            .offer_all_with_outcome(checked.iter().map(|(p, d, id)| (p, *d, id.as_deref())))
            .await
            .js()
    }
}

struct CloseOnDrop(delayq::ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
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
    pub async fn extend(&self, ms: Either<f64, BigInt>) -> Result<bool> {
        let duration = convert::delay(ms)?;
        self.inner.extend(duration).await.js()
    }

    /// Acknowledges; resolves to false when this delivery had already ended.
    #[napi]
    pub async fn ack(&self) -> Result<bool> {
        self.inner.ack().await.js()
    }

    /// Retries after `delayMs` (default: the queue's back-off), or buries the message
    /// after its last attempt.
    #[napi]
    pub async fn nack(&self, delay_ms: Option<Either<f64, BigInt>>) -> Result<bool> {
        let delay = delay_ms.map(convert::delay).transpose()?;
        self.inner.nack(delay).await.js()
    }
}
