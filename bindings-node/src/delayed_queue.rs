//! `DelayedQueue`: Redisson's layout; every call returns a Promise.

use napi::bindgen_prelude::{AsyncBlock, AsyncBlockBuilder, BigInt, Buffer, Either};
use napi::Env;
use napi_derive::napi;

use crate::convert;
use crate::error::IntoJs;
use crate::{cancellable, CancelHandle};
use napi::Result;

/// Counts of a delayed queue.
#[napi(object)]
pub struct DelayedStats {
    /// Entries waiting for their due time.
    pub delayed: i64,
    /// Values ready in the destination list.
    pub ready: i64,
    /// Undecodable entries moved aside.
    pub corrupt: i64,
}

/// One value to offer and its delay in ms.
#[napi(object)]
pub struct OfferEntry {
    pub value: Buffer,
    pub delay_ms: Either<f64, BigInt>,
}

/// A handle on a Redisson-compatible delayed queue.
#[napi]
pub struct DelayedQueue {
    pub(crate) inner: delayq::DelayedQueue,
}

#[napi]
impl DelayedQueue {
    /// The queue's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Offers `value` due after `delayMs`; resolves to the due time (server Unix ms).
    // Not an `async fn`: core's `offer` must be called here, on the JavaScript thread, so
    // that the offer takes its place in the queue's order at the call (napi-rs would start
    // each call's task in any order). Core coalesces concurrent offers into script calls.
    #[napi]
    pub fn offer(
        &self,
        env: &Env,
        value: Buffer,
        delay_ms: Either<f64, BigInt>,
    ) -> Result<AsyncBlock<i64>> {
        let delay = convert::delay(delay_ms)?;
        let offered = self.inner.offer(value, delay);
        AsyncBlockBuilder::new(async move { offered.await.js() }).build(env)
    }

    /// Offers many values, one round trip per thousand; resolves to their due times.
    #[napi]
    pub async fn offer_all(&self, entries: Vec<OfferEntry>) -> Result<Vec<i64>> {
        let mut checked = Vec::with_capacity(entries.len());
        for e in entries {
            checked.push((e.value.to_vec(), convert::delay(e.delay_ms)?));
        }
        self.inner.offer_all(checked).await.js()
    }

    /// The number of entries still waiting.
    #[napi]
    pub async fn size(&self) -> Result<i64> {
        Ok(self.inner.size().await.js()? as i64)
    }

    /// Whether a waiting entry holds `value`.
    #[napi]
    pub async fn contains(&self, value: Buffer) -> Result<bool> {
        self.inner.contains(value.to_vec()).await.js()
    }

    /// Removes the first waiting entry holding `value`.
    #[napi]
    pub async fn remove(&self, value: Buffer) -> Result<bool> {
        self.inner.remove(value.to_vec()).await.js()
    }

    /// The waiting values, in offer order.
    #[napi]
    pub async fn read_all(&self) -> Result<Vec<Buffer>> {
        Ok(self
            .inner
            .read_all()
            .await
            .js()?
            .into_iter()
            .map(Buffer::from)
            .collect())
    }

    /// Deletes every waiting entry.
    #[napi]
    pub async fn clear(&self) -> Result<()> {
        self.inner.clear().await.js()
    }

    /// Takes the oldest due value, waiting up to `timeoutMs` (none: forever); resolves to
    /// null when the time passes. `cancel` aborts the wait without losing a value.
    #[napi]
    pub async fn take(
        &self,
        timeout_ms: Option<Either<f64, BigInt>>,
        cancel: Option<&CancelHandle>,
    ) -> Result<Option<Buffer>> {
        let timeout = convert::timeout(timeout_ms)?;
        let token = cancel.map(|c| c.token.clone());
        let q = self.inner.clone();
        cancellable(token, async move {
            Ok(q.take(timeout).await.js()?.map(Buffer::from))
        })
        .await
    }

    /// Takes a due value if there is one, without waiting.
    #[napi]
    pub async fn poll(&self) -> Result<Option<Buffer>> {
        Ok(self.inner.poll().await.js()?.map(Buffer::from))
    }

    /// Counts: delayed, ready, corrupt.
    #[napi]
    pub async fn stats(&self) -> Result<DelayedStats> {
        let s = self.inner.stats().await.js()?;
        Ok(DelayedStats {
            delayed: s.delayed as i64,
            ready: s.ready as i64,
            corrupt: s.corrupt as i64,
        })
    }

    /// Closes this handle.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}
