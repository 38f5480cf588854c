//! [`DelayedQueue`] over `delayq::DelayedQueue`; the facade's `DelayedQueue.kt` documents it.

use std::sync::Arc;
use std::time::Duration;

use delayq::handover::Handover;
use delayq::DelayedStats;

use crate::bridge::{block, complete, TakeHandover, RUNTIME};
use crate::Res;

records! {
    #[uniffi::remote(Record)] DelayedStats { delayed: u64, ready: u64, corrupt: u64 }
    #[derive(uniffi::Record)] OfferEntry { value: Vec<u8>, delay: Duration }
}

#[derive(uniffi::Object)]
pub struct DelayedQueue(pub(crate) delayq::DelayedQueue);

#[uniffi::export]
impl DelayedQueue {
    pub fn name(&self) -> String {
        self.0.name().to_owned()
    }

    pub fn close_handle(&self) {
        self.0.close();
    }

    /// The `offerAsync` calls queued while the previous batch crossed, in one JNA call (its
    /// cost is per call); each outcome goes to the completions as its token's. Each offer
    /// takes its place in core's order here, at the call; core coalesces concurrent ones.
    pub fn offer_all_then(&self, offers: Vec<OfferEntry>, tokens: Vec<i64>) {
        for (o, token) in offers.into_iter().zip(tokens) {
            let offered = self.0.offer(o.value, o.delay);
            RUNTIME.spawn(async move { complete(token, delayq::caught(offered).await) });
        }
    }

    /// `offer`, blocking, with the delay as numbers: no buffer to allocate on a hot call.
    pub fn offer_blocking(&self, value: Vec<u8>, seconds: u64, nanos: u32) -> Res<i64> {
        block(self.0.offer(value, Duration::new(seconds, nanos)))
    }

    pub fn take_handover(&self, timeout: Option<Duration>) -> Arc<TakeHandover> {
        Arc::new(TakeHandover(Handover::take(&self.0, timeout)))
    }
}

twins!(DelayedQueue.0 as q {
    fn offer_all / offer_all_blocking(entries: Vec<OfferEntry>) -> Vec<i64> {
        q.offer_all(entries.into_iter().map(|e| (e.value, e.delay))).await
    }
    fn size / size_blocking() -> u64 { q.size().await }
    fn contains / contains_blocking(value: Vec<u8>) -> bool { q.contains(value).await }
    fn remove / remove_blocking(value: Vec<u8>) -> bool { q.remove(value).await }
    fn read_all / read_all_blocking() -> Vec<Vec<u8>> { q.read_all().await }
    fn clear / clear_blocking() -> () { q.clear().await }
    fn poll / poll_blocking() -> Option<Vec<u8>> { q.poll().await }
    fn take / take_blocking(timeout: Option<Duration>) -> Option<Vec<u8>> { q.take(timeout).await }
    fn stats / stats_blocking() -> DelayedStats { q.stats().await }
});
