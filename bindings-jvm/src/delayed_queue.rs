//! [`DelayedQueue`]: Redisson's `RDelayedQueue` layout, over `delayq::DelayedQueue`.
//!
//! Each call is a private method returning core's future (`'static`, on a clone of the
//! handle), exported twice: async, and `_blocking`.

use std::future::Future;
use std::sync::Arc;

use crate::error::FfiError;
use crate::handover::{self, PendingCall, TakeHandler};
use crate::runtime::{block, run};
use crate::time::DurationParts;

/// Counts of a delayed queue.
#[derive(Debug, Clone, Copy, uniffi::Record)]
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

/// A handle on one delayed queue; see `delayq::DelayedQueue`.
#[derive(uniffi::Object)]
pub struct DelayedQueue {
    inner: delayq::DelayedQueue,
}

type Res<T> = Result<T, FfiError>;

impl DelayedQueue {
    pub(crate) fn new(inner: delayq::DelayedQueue) -> Self {
        DelayedQueue { inner }
    }

    fn offer_fut(
        &self,
        value: Vec<u8>,
        delay_seconds: i64,
        delay_nanos: u32,
    ) -> impl Future<Output = delayq::Result<i64>> + Send + 'static {
        // Core coalesces concurrent offers on one handle into offer script calls; the offer
        // takes its place in the handle's order here, at the call.
        let delay = DurationParts {
            seconds: delay_seconds,
            nanos: delay_nanos,
        };
        let offered = delay.delay().map(|d| self.inner.offer(value, d));
        async move { offered?.await }
    }

    fn offer_all_fut(
        &self,
        entries: Vec<OfferEntry>,
    ) -> impl Future<Output = delayq::Result<Vec<i64>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let checked = entries
                .into_iter()
                .map(|e| Ok((e.value, e.delay.delay()?)))
                .collect::<delayq::Result<Vec<_>>>()?;
            q.offer_all(checked).await
        }
    }

    fn size_fut(&self) -> impl Future<Output = delayq::Result<u64>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.size().await }
    }

    fn contains_fut(
        &self,
        value: Vec<u8>,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.contains(value).await }
    }

    fn remove_fut(
        &self,
        value: Vec<u8>,
    ) -> impl Future<Output = delayq::Result<bool>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.remove(value).await }
    }

    fn read_all_fut(&self) -> impl Future<Output = delayq::Result<Vec<Vec<u8>>>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.read_all().await }
    }

    fn clear_fut(&self) -> impl Future<Output = delayq::Result<()>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.clear().await }
    }

    fn poll_fut(&self) -> impl Future<Output = delayq::Result<Option<Vec<u8>>>> + Send + 'static {
        let q = self.inner.clone();
        async move { q.poll().await }
    }

    fn take_fut(
        &self,
        timeout: Option<DurationParts>,
    ) -> impl Future<Output = delayq::Result<Option<Vec<u8>>>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let timeout = timeout.map(DurationParts::timeout).transpose()?;
            q.take(timeout).await
        }
    }

    fn stats_fut(&self) -> impl Future<Output = delayq::Result<DelayedStats>> + Send + 'static {
        let q = self.inner.clone();
        async move {
            let s = q.stats().await?;
            Ok(DelayedStats {
                delayed: s.delayed,
                ready: s.ready,
                corrupt: s.corrupt,
            })
        }
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

    /// Offers `value` after a delay (a `java.time.Duration`'s seconds and nanos, passed
    /// as two numbers: the hottest call crosses the FFI with one buffer, not two); returns
    /// the due time in Unix ms (server clock).
    pub async fn offer(&self, value: Vec<u8>, delay_seconds: i64, delay_nanos: u32) -> Res<i64> {
        run(self.offer_fut(value, delay_seconds, delay_nanos)).await
    }
    pub fn offer_blocking(&self, value: Vec<u8>, delay_seconds: i64, delay_nanos: u32) -> Res<i64> {
        block(self.offer_fut(value, delay_seconds, delay_nanos))
    }

    /// Offers many values; returns their due times in order. All are checked first.
    pub async fn offer_all(&self, entries: Vec<OfferEntry>) -> Res<Vec<i64>> {
        run(self.offer_all_fut(entries)).await
    }
    pub fn offer_all_blocking(&self, entries: Vec<OfferEntry>) -> Res<Vec<i64>> {
        block(self.offer_all_fut(entries))
    }

    /// Entries still waiting for their due time.
    pub async fn size(&self) -> Res<u64> {
        run(self.size_fut()).await
    }
    pub fn size_blocking(&self) -> Res<u64> {
        block(self.size_fut())
    }

    /// Whether a waiting entry holds `value`.
    pub async fn contains(&self, value: Vec<u8>) -> Res<bool> {
        run(self.contains_fut(value)).await
    }
    pub fn contains_blocking(&self, value: Vec<u8>) -> Res<bool> {
        block(self.contains_fut(value))
    }

    /// Removes the first waiting entry holding `value`.
    pub async fn remove(&self, value: Vec<u8>) -> Res<bool> {
        run(self.remove_fut(value)).await
    }
    pub fn remove_blocking(&self, value: Vec<u8>) -> Res<bool> {
        block(self.remove_fut(value))
    }

    /// The values still waiting, in offer order.
    pub async fn read_all(&self) -> Res<Vec<Vec<u8>>> {
        run(self.read_all_fut()).await
    }
    pub fn read_all_blocking(&self) -> Res<Vec<Vec<u8>>> {
        block(self.read_all_fut())
    }

    /// Deletes every waiting entry.
    pub async fn clear(&self) -> Res<()> {
        run(self.clear_fut()).await
    }
    pub fn clear_blocking(&self) -> Res<()> {
        block(self.clear_fut())
    }

    /// The oldest due value, without waiting.
    pub async fn poll(&self) -> Res<Option<Vec<u8>>> {
        run(self.poll_fut()).await
    }
    pub fn poll_blocking(&self) -> Res<Option<Vec<u8>>> {
        block(self.poll_fut())
    }

    /// The oldest due value, waiting up to `timeout` (none: forever).
    /// The oldest due value, waiting up to `timeout` (none: forever), handed to `handler`
    /// (see `crate::handover`: the suspending `take` without losing a value on cancel).
    pub fn take_then(
        &self,
        timeout: Option<DurationParts>,
        handler: Arc<dyn TakeHandler>,
    ) -> Arc<PendingCall> {
        let on_error = handler.clone();
        handover::run_then(
            self.take_fut(timeout),
            move |value| handler.on_value(value),
            move |kind, message| on_error.on_error(kind, message),
        )
    }
    pub fn take_blocking(&self, timeout: Option<DurationParts>) -> Res<Option<Vec<u8>>> {
        block(self.take_fut(timeout))
    }

    /// Puts `value` back at the head of the queue, in the background: for a taken value
    /// the facade could not hand over (its coroutine or future was cancelled meanwhile).
    pub fn give_back(&self, value: Vec<u8>) {
        handover::give_back(self.inner.clone(), value);
    }

    /// Counts of waiting, ready and corrupt entries.
    pub async fn stats(&self) -> Res<DelayedStats> {
        run(self.stats_fut()).await
    }
    pub fn stats_blocking(&self) -> Res<DelayedStats> {
        block(self.stats_fut())
    }
}
