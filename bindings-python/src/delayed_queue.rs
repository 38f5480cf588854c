//! The native handle of a delayed queue (its class is `delayq.DelayedQueue`, in Python).

use std::time::Duration;

use delayq::handover::Handover;
use pyo3::prelude::*;

use crate::convert::{delay, items, timeout, tuple, value, Obj};
use crate::runtime::{calls, claim_blocking, none, Made, Taking};

#[pyclass(frozen)]
pub struct DelayedQueue(pub delayq::DelayedQueue);

calls! { DelayedQueue(q) {
    // The offer takes its place in the handle's order now, at the call.
    fn offer(v: Obj<'_>, d: Obj<'_>) = q.offer(value(&v)?, delay(&d)?);
    fn offer_all(entries: Obj<'_>) = {
        let mut checked = Vec::new();
        for item in items(&entries, "entries must be an iterable of (value, delay) tuples")? {
            let [v, d] = tuple(&item, "each entry must be a (value, delay) tuple")?;
            checked.push((value(&v)?, delay(&d)?));
        }
        async move { q.offer_all(checked).await }
    };
    fn size() = async move { q.size().await };
    fn contains(v: Obj<'_>) = { let v = value(&v)?; async move { q.contains(v).await } };
    fn remove(v: Obj<'_>) = { let v = value(&v)?; async move { q.remove(v).await } };
    fn read_all() = async move { q.read_all().await };
    fn clear() = async move { q.clear().await.map(none) };
    fn take(t: Option<Obj<'_>>) = Taking(Handover::take(&q, timeout(t)?));
    fn poll() = async move { q.poll().await };
    fn stats() = async move {
        let delayq::DelayedStats { delayed, ready, corrupt, .. } = q.stats().await?;
        Ok(Made("DelayedStats", (delayed, ready, corrupt)))
    };
}

    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    fn close(&self) {
        self.0.close();
    }

    fn iter(&self, t: Option<Obj<'_>>) -> PyResult<TakeIter> {
        Ok(TakeIter(self.0.clone(), timeout(t)?))
    }
}

/// The iterator of `DelayedQueue.iter`.
#[pyclass(module = "delayq", frozen)]
pub struct TakeIter(delayq::DelayedQueue, Option<Duration>);

#[pymethods]
impl TakeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Vec<u8>>> {
        let _in = crate::runtime::runtime().enter();
        let taken = claim_blocking(py, Handover::take(&self.0, self.1))?;
        Ok(taken.map(|t| t.value))
    }
}
