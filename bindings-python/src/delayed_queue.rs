//! `DelayedQueue`: each call blocking (GIL released) and `*_async` (awaitable). Each pair
//! shares one `*_fut` that converts the arguments (with the GIL) and returns core's future.

use std::future::Future;

use pyo3::prelude::*;

use crate::convert::{self, Bytes};
use crate::handover::{handover, Handover, Value};
use crate::runtime::{awaitable, block, block_taking};

type Fut<T> = std::pin::Pin<Box<dyn Future<Output = delayq::Result<T>> + Send + 'static>>;

fn boxed<T>(f: impl Future<Output = delayq::Result<T>> + Send + 'static) -> Fut<T> {
    Box::pin(f)
}

/// Core's `take`, keeping the queue with the value to give it back if the caller is gone.
async fn take(
    queue: delayq::DelayedQueue,
    timeout: Option<std::time::Duration>,
) -> delayq::Result<Option<Value>> {
    let value = queue.take(timeout).await?;
    Ok(value.map(|value| Value { queue, value }))
}

/// A handle on a Redisson-compatible delayed queue. Values in are `bytes`, `bytearray`,
/// `memoryview` or `str` (UTF-8); values out are `bytes`. Delays are seconds (`int`,
/// `float`, `timedelta`).
#[pyclass(module = "delayq", frozen)]
pub struct DelayedQueue {
    pub(crate) inner: delayq::DelayedQueue,
}

/// Counts of a delayed queue.
#[pyclass(module = "delayq", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct DelayedStats {
    /// Entries waiting for their due time.
    pub delayed: u64,
    /// Values ready in the destination list.
    pub ready: u64,
    /// Undecodable entries moved aside.
    pub corrupt: u64,
}

#[pymethods]
impl DelayedStats {
    fn __repr__(&self) -> String {
        format!(
            "DelayedStats(delayed={}, ready={}, corrupt={})",
            self.delayed, self.ready, self.corrupt
        )
    }
}

impl DelayedQueue {
    fn q(&self) -> delayq::DelayedQueue {
        self.inner.clone()
    }

    fn offer_fut(&self, value: &Bound<'_, PyAny>, delay: &Bound<'_, PyAny>) -> PyResult<Fut<i64>> {
        let (value, delay) = (convert::value(value)?, convert::delay(delay)?);
        // The offer takes its place in the handle's order now, at the call (core coalesces
        // concurrent offers into offer script calls).
        Ok(boxed(self.inner.offer(value, delay)))
    }

    fn offer_all_fut(&self, entries: &Bound<'_, PyAny>) -> PyResult<Fut<Vec<i64>>> {
        let mut checked = Vec::new();
        for item in entries.try_iter()? {
            let (value, delay): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            checked.push((convert::value(&value)?, convert::delay(&delay)?));
        }
        let q = self.q();
        Ok(boxed(async move { q.offer_all(checked).await }))
    }

    fn contains_fut(&self, value: &Bound<'_, PyAny>) -> PyResult<Fut<bool>> {
        let (value, q) = (convert::value(value)?, self.q());
        Ok(boxed(async move { q.contains(value).await }))
    }

    fn remove_fut(&self, value: &Bound<'_, PyAny>) -> PyResult<Fut<bool>> {
        let (value, q) = (convert::value(value)?, self.q());
        Ok(boxed(async move { q.remove(value).await }))
    }

    fn read_all_fut(&self) -> Fut<Vec<Bytes>> {
        let q = self.q();
        boxed(async move { Ok(q.read_all().await?.into_iter().map(Bytes).collect()) })
    }

    fn take_fut(&self, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Fut<Option<Value>>> {
        let (timeout, q) = (convert::timeout(timeout)?, self.q());
        Ok(boxed(take(q, timeout)))
    }

    fn poll_fut(&self) -> Fut<Option<Bytes>> {
        let q = self.q();
        boxed(async move { Ok(q.poll().await?.map(Bytes)) })
    }

    fn stats_fut(&self) -> Fut<DelayedStats> {
        let q = self.q();
        boxed(async move {
            let s = q.stats().await?;
            Ok(DelayedStats {
                delayed: s.delayed,
                ready: s.ready,
                corrupt: s.corrupt,
            })
        })
    }
}

#[pymethods]
impl DelayedQueue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Offers `value` to be delivered after `delay` seconds; returns the due time in Unix
    /// ms, computed from the Redis server's clock.
    fn offer(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        block(py, self.offer_fut(value, delay)?)
    }

    /// Awaitable `offer`.
    fn offer_async<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.offer_fut(value, delay)?)
    }

    /// Offers many `(value, delay)` pairs, one round trip per thousand; returns their due
    /// times. Every pair is checked before anything is sent.
    fn offer_all(&self, py: Python<'_>, entries: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
        block(py, self.offer_all_fut(entries)?)
    }

    /// Awaitable `offer_all`.
    fn offer_all_async<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.offer_all_fut(entries)?)
    }

    /// The number of entries still waiting for their due time.
    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        let q = self.q();
        block(py, async move { q.size().await })
    }

    /// Awaitable `size`.
    fn size_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let q = self.q();
        awaitable(py, async move { q.size().await })
    }

    /// Whether a waiting entry holds `value`.
    fn contains(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        block(py, self.contains_fut(value)?)
    }

    /// Awaitable `contains`.
    fn contains_async<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.contains_fut(value)?)
    }

    /// Removes the first waiting entry holding `value`; returns whether there was one.
    fn remove(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        block(py, self.remove_fut(value)?)
    }

    /// Awaitable `remove`.
    fn remove_async<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.remove_fut(value)?)
    }

    /// The values still waiting, in offer order.
    fn read_all(&self, py: Python<'_>) -> PyResult<Vec<Bytes>> {
        block(py, self.read_all_fut())
    }

    /// Awaitable `read_all`.
    fn read_all_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.read_all_fut())
    }

    /// Deletes every waiting entry (values already due stay in the destination).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let q = self.q();
        block(py, async move { q.clear().await })
    }

    /// Awaitable `clear`.
    fn clear_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let q = self.q();
        awaitable(py, async move { q.clear().await })
    }

    /// Takes the oldest due value, waiting up to `timeout` seconds (None: forever);
    /// returns None when the time passes. Ctrl-C interrupts the wait; nothing is lost.
    #[pyo3(signature = (timeout = None))]
    fn take(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Bytes>> {
        Ok(block_taking(py, self.take_fut(timeout)?)?.map(|v| Bytes(v.value)))
    }

    /// Awaitable `take`; cancelling it loses nothing.
    #[pyo3(signature = (timeout = None))]
    fn take_async(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Handover> {
        handover(py, self.take_fut(timeout)?)
    }

    /// Takes a due value if there is one, without waiting.
    fn poll(&self, py: Python<'_>) -> PyResult<Option<Bytes>> {
        block(py, self.poll_fut())
    }

    /// Awaitable `poll`.
    fn poll_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.poll_fut())
    }

    /// Counts: delayed, ready, corrupt.
    fn stats(&self, py: Python<'_>) -> PyResult<DelayedStats> {
        block(py, self.stats_fut())
    }

    /// Awaitable `stats`.
    fn stats_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.stats_fut())
    }

    /// Closes this handle (its share of the transfer task stops). Idempotent.
    fn close(&self) {
        self.inner.close();
    }

    fn __repr__(&self) -> String {
        format!("<delayq.DelayedQueue {:?}>", self.inner.name())
    }

    /// Iterates over values as they come due: `for value in q.iter(timeout=5)` ends when
    /// no value came within `timeout` seconds (None: never ends).
    #[pyo3(signature = (timeout = None))]
    fn iter(&self, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<TakeIter> {
        Ok(TakeIter {
            queue: self.q(),
            timeout: convert::timeout(timeout)?,
        })
    }
}

/// The iterator of `DelayedQueue.iter`.
#[pyclass(module = "delayq")]
pub struct TakeIter {
    queue: delayq::DelayedQueue,
    timeout: Option<std::time::Duration>,
}

#[pymethods]
impl TakeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Bytes>> {
        let taken = block_taking(py, take(self.queue.clone(), self.timeout))?;
        Ok(taken.map(|v| Bytes(v.value)))
    }
}
