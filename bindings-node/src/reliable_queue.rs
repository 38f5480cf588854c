//! `ReliableQueue` and `Delivery`: every call returns a Promise.

use napi::bindgen_prelude::{BigInt, Buffer, Either};
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

/// A handle on a reliable queue: at-least-once delivery with acknowledgement.
#[napi]
pub struct ReliableQueue {
    pub(crate) inner: delayq::ReliableQueue,
}

/// A received message: `ack()` when done, `nack(delayMs?)` to retry.
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

    /// Offers many messages; resolves to their ids.
    #[napi]
    pub async fn offer_all(&self, messages: Vec<ReliableOfferEntry>) -> Result<Vec<String>> {
        let mut checked = Vec::with_capacity(messages.len());
        for m in messages {
            checked.push((m.payload.to_vec(), convert::delay(m.delay_ms)?, m.id));
        }
        self.inner
            .offer_all(checked.iter().map(|(p, d, id)| (p, *d, id.as_deref())))
            .await
            .js()
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

    /// Closes this handle.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
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
