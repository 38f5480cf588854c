//! `DelayedQueue`: Redisson's layout; every call returns a Promise.

use delayq::handover::Handover;
use napi::bindgen_prelude::{Buffer, BufferSlice, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::convert::{delay, timeout};
use crate::error::Result;

/// Counts of a delayed queue: entries waiting, values ready, undecodable entries set aside.
#[napi(object)]
pub struct DelayedStats {
    pub delayed: i64,
    pub ready: i64,
    pub corrupt: i64,
}

/// One value to offer and its delay in ms.
#[napi(object)]
pub struct OfferEntry {
    pub value: Buffer,
    pub delay_ms: f64,
}

/// A handle on a Redisson-compatible delayed queue.
#[napi]
pub struct DelayedQueue {
    pub(crate) inner: delayq::DelayedQueue,
}

fn entries(list: Vec<OfferEntry>) -> Result<Vec<(Vec<u8>, std::time::Duration)>> {
    list.into_iter()
        .map(|e| Ok((e.value.to_vec(), delay(e.delay_ms)?)))
        .collect()
}

calls! { DelayedQueue {
    "Offers many values, one round trip per thousand; resolves to their due times."
    offer_all(list: Vec<OfferEntry> => entries(list)?) -> Vec<i64> = |q| q.offer_all(list).await;
    "The number of entries still waiting."
    size() -> i64 = |q| Ok(q.size().await? as i64);
    "Whether a waiting entry holds `value`."
    contains(value: BufferSlice => value.to_vec()) -> bool = |q| q.contains(value).await;
    "Removes the first waiting entry holding `value`."
    remove(value: BufferSlice => value.to_vec()) -> bool = |q| q.remove(value).await;
    "The waiting values, in offer order."
    read_all() -> Vec<Buffer> = |q| Ok(q.read_all().await?.into_iter().map(Into::into).collect());
    "Deletes every waiting entry."
    clear() -> () = |q| q.clear().await;
    "Takes a due value if there is one, without waiting."
    poll() -> Option<Buffer> = |q| Ok(q.poll().await?.map(Into::into));
    "Counts: delayed, ready, corrupt."
    stats() -> DelayedStats = |q| {
        let s = q.stats().await?;
        Ok(DelayedStats { delayed: s.delayed as i64, ready: s.ready as i64, corrupt: s.corrupt as i64 })
    };
}}

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
        delay_ms: f64,
    ) -> Result<PromiseRaw<'e, i64>> {
        let offered = self.inner.offer(value.to_vec(), delay(delay_ms)?);
        crate::bridge::promise(env, offered)
    }

    /// Takes the oldest due value, waiting up to `timeoutMs` (none: forever); null when the
    /// time passes. Core's handover, registered as `id` (`giveUp(id)` gives the value back).
    #[napi]
    pub fn take<'e>(
        &self,
        env: &'e Env,
        id: u32,
        timeout_ms: Option<f64>,
    ) -> Result<PromiseRaw<'e, Option<Buffer>>> {
        let handover = Handover::take(&self.inner, timeout(timeout_ms)?);
        crate::bridge::wait(env, id, handover, |v| v.map(|t| t.value.into()))
    }

    /// Closes this handle.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}
