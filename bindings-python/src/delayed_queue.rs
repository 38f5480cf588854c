//! `DelayedQueue`: each call blocking (GIL released) and `*_async`, written once (`twins!`).

use delayq::handover::Handover;
use pyo3::prelude::*;

use crate::convert::{self, Bytes};
use crate::runtime::{claim_blocking, twins, Taking};

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
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        convert::repr(slf, "delayed ready corrupt")
    }
}

impl DelayedQueue {
    fn q(&self) -> delayq::DelayedQueue {
        self.inner.clone()
    }
}

twins! {
impl DelayedQueue {
    /// Offers `value` to be delivered after `delay` seconds; returns the due time in Unix
    /// ms, computed from the Redis server's clock.
    fn offer / offer_async(&self, value: &Bound<'_, PyAny>, delay: &Bound<'_, PyAny>) =
        // The offer takes its place in the handle's order now, at the call.
        self.inner.offer(convert::value(value)?, convert::delay(delay)?);

    /// Offers many `(value, delay)` pairs, one round trip per thousand; returns their due
    /// times. Every pair is checked before anything is sent.
    fn offer_all / offer_all_async(&self, entries: &Bound<'_, PyAny>) = {
        let mut checked = Vec::new();
        for item in entries.try_iter()? {
            let (value, delay): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            checked.push((convert::value(&value)?, convert::delay(&delay)?));
        }
        let q = self.q();
        async move { q.offer_all(checked).await }
    };

    /// The number of entries still waiting for their due time.
    fn size / size_async(&self) = { let q = self.q(); async move { q.size().await } };

    /// Whether a waiting entry holds `value`.
    fn contains / contains_async(&self, value: &Bound<'_, PyAny>) = {
        let (value, q) = (convert::value(value)?, self.q());
        async move { q.contains(value).await }
    };

    /// Removes the first waiting entry holding `value`; returns whether there was one.
    fn remove / remove_async(&self, value: &Bound<'_, PyAny>) = {
        let (value, q) = (convert::value(value)?, self.q());
        async move { q.remove(value).await }
    };

    /// The values still waiting, in offer order.
    fn read_all / read_all_async(&self) = {
        let q = self.q();
        async move { Ok(q.read_all().await?.into_iter().map(Bytes).collect::<Vec<_>>()) }
    };

    /// Deletes every waiting entry (values already due stay in the destination).
    fn clear / clear_async(&self) = { let q = self.q(); async move { q.clear().await } };

    /// Takes the oldest due value, waiting up to `timeout` seconds (None: forever);
    /// returns None when the time passes. Ctrl-C, or cancelling the awaitable,
    /// interrupts the wait; nothing is lost.
    #[pyo3(signature = (timeout = None))]
    fn take / take_async(&self, timeout: Option<&Bound<'_, PyAny>>) =
        Taking(Handover::take(&self.inner, convert::timeout(timeout)?));

    /// Takes a due value if there is one, without waiting.
    fn poll / poll_async(&self) = {
        let q = self.q();
        async move { Ok(q.poll().await?.map(Bytes)) }
    };

    /// Counts: delayed, ready, corrupt.
    fn stats / stats_async(&self) = {
        let q = self.q();
        async move {
            let delayq::DelayedStats { delayed, ready, corrupt, .. } = q.stats().await?;
            Ok(DelayedStats { delayed, ready, corrupt })
        }
    };
}

    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
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
        let timeout = convert::timeout(timeout)?;
        Ok(TakeIter { queue: self.q(), timeout })
    }
}

/// The iterator of `DelayedQueue.iter`.
#[pyclass(module = "delayq", frozen)]
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
        let taken = claim_blocking(py, Handover::take(&self.queue, self.timeout))?;
        Ok(taken.map(|t| Bytes(t.value)))
    }
}
