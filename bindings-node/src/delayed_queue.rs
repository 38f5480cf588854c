//! `DelayedQueue`: Redisson's layout; every call returns a Promise.

use delayq::handover::Handover;
use napi::bindgen_prelude::{BigInt, Buffer, BufferSlice, Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge::{promise, wait};
use crate::convert;
use crate::error::Result;

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
    /// Core's `offer` is called here, on the JavaScript thread, so that offers keep the
    /// order of the calls; core coalesces concurrent offers into script calls.
    #[napi]
    pub fn offer<'e>(
        &self,
        env: &'e Env,
        value: BufferSlice,
        delay_ms: Either<f64, BigInt>,
    ) -> Result<PromiseRaw<'e, i64>> {
        let offered = self.inner.offer(value.to_vec(), convert::delay(delay_ms)?);
        promise(env, offered)
    }

    /// Offers many values, one round trip per thousand; resolves to their due times.
    #[napi]
    pub fn offer_all<'e>(
        &self,
        env: &'e Env,
        entries: Vec<OfferEntry>,
    ) -> Result<PromiseRaw<'e, Vec<i64>>> {
        let mut checked = Vec::with_capacity(entries.len());
        for e in entries {
            checked.push((e.value.to_vec(), convert::delay(e.delay_ms)?));
        }
        let q = self.inner.clone();
        promise(env, async move { q.offer_all(checked).await })
    }

    /// The number of entries still waiting.
    #[napi]
    pub fn size<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, i64>> {
        let q = self.inner.clone();
        promise(env, async move { Ok(q.size().await? as i64) })
    }

    /// Whether a waiting entry holds `value`.
    #[napi]
    pub fn contains<'e>(&self, env: &'e Env, value: BufferSlice) -> Result<PromiseRaw<'e, bool>> {
        let (q, v) = (self.inner.clone(), value.to_vec());
        promise(env, async move { q.contains(v).await })
    }

    /// Removes the first waiting entry holding `value`.
    #[napi]
    pub fn remove<'e>(&self, env: &'e Env, value: BufferSlice) -> Result<PromiseRaw<'e, bool>> {
        let (q, v) = (self.inner.clone(), value.to_vec());
        promise(env, async move { q.remove(v).await })
    }

    /// The waiting values, in offer order.
    #[napi]
    pub fn read_all<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, Vec<Buffer>>> {
        let q = self.inner.clone();
        promise(env, async move {
            Ok(q.read_all().await?.into_iter().map(Buffer::from).collect())
        })
    }

    /// Deletes every waiting entry.
    #[napi]
    pub fn clear<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let q = self.inner.clone();
        promise(env, async move { q.clear().await })
    }

    /// Takes the oldest due value, waiting up to `timeoutMs` (none: forever); resolves to
    /// null when the time passes. Runs as core's handover registered as `id` (`giveUp(id)`
    /// gives the value back).
    #[napi]
    pub fn take<'e>(
        &self,
        env: &'e Env,
        id: u32,
        timeout_ms: Option<Either<f64, BigInt>>,
    ) -> Result<PromiseRaw<'e, Option<Buffer>>> {
        let handover = Handover::take(&self.inner, convert::timeout(timeout_ms)?);
        wait(env, id, handover, |v| v.map(|t| t.value.into()))
    }

    /// Takes a due value if there is one, without waiting.
    #[napi]
    pub fn poll<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, Option<Buffer>>> {
        let q = self.inner.clone();
        promise(env, async move { Ok(q.poll().await?.map(Buffer::from)) })
    }

    /// Counts: delayed, ready, corrupt.
    #[napi]
    pub fn stats<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, DelayedStats>> {
        let q = self.inner.clone();
        promise(env, async move {
            let s = q.stats().await?;
            Ok(DelayedStats {
                delayed: s.delayed as i64,
                ready: s.ready as i64,
                corrupt: s.corrupt as i64,
            })
        })
    }

    /// Closes this handle.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}
