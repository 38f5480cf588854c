//! [`DelayedQueue`]: Redisson's `RDelayedQueue` layout, over `delayq::DelayedQueue`.

use std::sync::Arc;

use delayq::handover::Handover;
use delayq::DelayedStats;

use crate::callbacks::spawn_then;
use crate::error::FfiError;
use crate::handover::TakeHandover;
use crate::time::DurationParts;

/// Counts of a delayed queue: see `delayq::DelayedStats`.
#[uniffi::remote(Record)]
pub struct DelayedStats {
    pub delayed: u64,
    pub ready: u64,
    pub corrupt: u64,
}

/// One value to offer and its delay.
#[derive(Debug, Clone, uniffi::Record)]
pub struct OfferEntry {
    pub value: Vec<u8>,
    pub delay: DurationParts,
}

/// One `offerAsync` call: its value, delay, and the token its outcome goes to.
#[derive(Debug, Clone, uniffi::Record)]
pub struct OfferThen {
    pub value: Vec<u8>,
    pub delay: DurationParts,
    pub token: i64,
}

/// A handle on one delayed queue; see `delayq::DelayedQueue`.
#[derive(uniffi::Object)]
pub struct DelayedQueue {
    inner: delayq::DelayedQueue,
}

impl DelayedQueue {
    pub(crate) fn new(inner: delayq::DelayedQueue) -> Self {
        DelayedQueue { inner }
    }
}

#[uniffi::export]
impl DelayedQueue {
    /// The queue's name.
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Closes this handle. Idempotent.
    pub fn close_handle(&self) {
        self.inner.close();
    }

    /// Offers each value after its delay; each due time (Unix ms, server clock) goes to the
    /// completions as its token's. The facade queues the `offerAsync` calls made while the
    /// previous batch crossed, so that one JNA call carries many (JNA's cost is per call).
    /// Core coalesces concurrent offers; each takes its place in order here, at the call.
    pub fn offer_all_then(&self, offers: Vec<OfferThen>) {
        for o in offers {
            let offered = o.delay.delay().map(|d| self.inner.offer(o.value, d));
            spawn_then(o.token, async move { offered?.await });
        }
    }

    /// Offers `value` after a delay (seconds and nanos); returns its due time, blocking.
    pub fn offer_blocking(
        &self,
        value: Vec<u8>,
        seconds: i64,
        nanos: u32,
    ) -> Result<i64, FfiError> {
        let delay = DurationParts { seconds, nanos }.delay()?;
        crate::runtime::block(self.inner.offer(value, delay))
    }

    /// Takes the oldest due value, waiting up to `timeout` (none: forever), through core's
    /// hand-over (nothing lost when the caller is gone).
    pub fn take_handover(
        &self,
        timeout: Option<DurationParts>,
    ) -> Result<Arc<TakeHandover>, FfiError> {
        let timeout = crate::time::timeout(timeout)?;
        Ok(Arc::new(TakeHandover(Handover::take(&self.inner, timeout))))
    }
}

twins!(DelayedQueue.inner as q {
    /// Offers many values; returns their due times in order. All are checked first.
    fn offer_all / offer_all_blocking(entries: Vec<OfferEntry>) -> Vec<i64> {
        let checked = entries.into_iter().map(|e| Ok((e.value, e.delay.delay()?)));
        q.offer_all(checked.collect::<delayq::Result<Vec<_>>>()?).await
    }
    /// Entries still waiting for their due time.
    fn size / size_blocking() -> u64 { q.size().await }
    /// Whether a waiting entry holds `value`.
    fn contains / contains_blocking(value: Vec<u8>) -> bool { q.contains(value).await }
    /// Removes the first waiting entry holding `value`.
    fn remove / remove_blocking(value: Vec<u8>) -> bool { q.remove(value).await }
    /// The values still waiting, in offer order.
    fn read_all / read_all_blocking() -> Vec<Vec<u8>> { q.read_all().await }
    /// Deletes every waiting entry.
    fn clear / clear_blocking() -> () { q.clear().await }
    /// The oldest due value, without waiting.
    fn poll / poll_blocking() -> Option<Vec<u8>> { q.poll().await }
    /// The oldest due value, waiting up to `timeout` (none: forever).
    fn take / take_blocking(timeout: Option<DurationParts>) -> Option<Vec<u8>> {
        q.take(crate::time::timeout(timeout)?).await
    }
    /// Counts of waiting, ready and corrupt entries.
    fn stats / stats_blocking() -> delayq::DelayedStats { q.stats().await }
});
