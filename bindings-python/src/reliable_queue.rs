//! `ReliableQueue` and `Delivery`: each call blocking (GIL released) and `*_async`.

use std::future::Future;
use std::sync::Arc;

use pyo3::prelude::*;

use crate::convert::{self, Arg, Bytes};
use crate::exit;
use crate::handover::{handover, Handover};
use crate::runtime::{awaitable, block, block_taking};

type Fut<T> = std::pin::Pin<Box<dyn Future<Output = delayq::Result<T>> + Send + 'static>>;

fn boxed<T>(f: impl Future<Output = delayq::Result<T>> + Send + 'static) -> Fut<T> {
    Box::pin(f)
}

/// A handle on a reliable queue: at-least-once delivery with acknowledgement.
#[pyclass(module = "delayq", frozen)]
pub struct ReliableQueue {
    pub(crate) inner: delayq::ReliableQueue,
}

/// A received message. `ack()` when done, `nack(delay=None)` to retry; otherwise it is
/// delivered again after the visibility timeout.
#[pyclass(module = "delayq", frozen)]
pub struct Delivery {
    pub(crate) inner: delayq::Delivery,
}

/// Counts of a reliable queue.
#[pyclass(module = "delayq", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct ReliableStats {
    /// Messages waiting for their due time.
    pub delayed: u64,
    /// Messages due and not yet received.
    pub ready: u64,
    /// Messages received and not yet acked, nacked or timed out.
    pub in_flight: u64,
    /// Messages in the dead letters.
    pub dead: u64,
}

#[pymethods]
impl ReliableStats {
    fn __repr__(&self) -> String {
        format!(
            "ReliableStats(delayed={}, ready={}, in_flight={}, dead={})",
            self.delayed, self.ready, self.in_flight, self.dead
        )
    }
}

/// A message in the dead letters.
#[pyclass(module = "delayq", frozen, get_all)]
pub struct DeadLetter {
    /// The message id.
    pub id: String,
    /// The payload.
    pub payload: Py<pyo3::types::PyBytes>,
    /// Deliveries it had.
    pub attempts: u32,
    /// When it was buried (server Unix ms).
    pub died_at: i64,
}

struct DeadLetters(Vec<delayq::DeadLetter>);

impl<'py> IntoPyObject<'py> for DeadLetters {
    type Target = pyo3::types::PyList;
    type Output = Bound<'py, pyo3::types::PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let items = self
            .0
            .into_iter()
            .map(|d| {
                Py::new(
                    py,
                    DeadLetter {
                        id: d.id,
                        payload: pyo3::types::PyBytes::new(py, &d.payload).unbind(),
                        attempts: d.attempts,
                        died_at: d.died_at,
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        pyo3::types::PyList::new(py, items)
    }
}

impl ReliableQueue {
    fn q(&self) -> delayq::ReliableQueue {
        self.inner.clone()
    }

    fn offer_fut(
        &self,
        payload: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        id: Option<String>,
    ) -> PyResult<Fut<String>> {
        let (payload, delay, q) = (convert::value(payload)?, convert::delay(delay)?, self.q());
        Ok(boxed(async move {
            q.offer(payload, delay, id.as_deref()).await
        }))
    }

    fn offer_all_fut(&self, messages: &Bound<'_, PyAny>) -> PyResult<Fut<Vec<String>>> {
        let mut checked = Vec::new();
        for item in messages.try_iter()? {
            let item = item?;
            let (payload, delay, id): (Bound<'_, PyAny>, Bound<'_, PyAny>, Option<String>) =
                match item.extract() {
                    Ok(triple) => triple,
                    Err(_) => {
                        let (p, d): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
                        (p, d, None)
                    }
                };
            checked.push((convert::value(&payload)?, convert::delay(&delay)?, id));
        }
        let q = self.q();
        Ok(boxed(async move {
            q.offer_all(checked.iter().map(|(p, d, id)| (p, *d, id.as_deref())))
                .await
        }))
    }

    fn reschedule_fut(&self, id: String, delay: &Bound<'_, PyAny>) -> PyResult<Fut<bool>> {
        let (delay, q) = (convert::delay(delay)?, self.q());
        Ok(boxed(async move { q.reschedule(&id, delay).await }))
    }

    fn receive_fut(
        &self,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Fut<Option<delayq::Delivery>>> {
        let (timeout, q) = (convert::timeout(timeout)?, self.q());
        Ok(boxed(async move { q.receive(timeout).await }))
    }

    fn stats_fut(&self) -> Fut<ReliableStats> {
        let q = self.q();
        boxed(async move {
            let s = q.stats().await?;
            Ok(ReliableStats {
                delayed: s.delayed,
                ready: s.ready,
                in_flight: s.in_flight,
                dead: s.dead,
            })
        })
    }
}

#[pymethods]
impl ReliableQueue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Offers `payload` due after `delay` seconds; returns its id. With `id`, a message
    /// with that id still waiting or in flight is not offered again (the call returns
    /// the id and changes nothing).
    #[pyo3(signature = (payload, delay = None, id = None))]
    fn offer(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<String> {
        let zero = 0i64.into_pyobject(py)?.into_any();
        block(py, self.offer_fut(payload, delay.unwrap_or(&zero), id)?)
    }

    /// Awaitable `offer`.
    #[pyo3(signature = (payload, delay = None, id = None))]
    fn offer_async<'py>(
        &self,
        py: Python<'py>,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let zero = 0i64.into_pyobject(py)?.into_any();
        awaitable(py, self.offer_fut(payload, delay.unwrap_or(&zero), id)?)
    }

    /// Offers many `(payload, delay)` or `(payload, delay, id)` tuples; returns their ids.
    fn offer_all(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        block(py, self.offer_all_fut(messages)?)
    }

    /// Awaitable `offer_all`.
    fn offer_all_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.offer_all_fut(messages)?)
    }

    /// Removes a message that has not come due yet; returns whether there was one.
    fn cancel(&self, py: Python<'_>, id: String) -> PyResult<bool> {
        let q = self.q();
        block(py, async move { q.cancel(&id).await })
    }

    /// Awaitable `cancel`.
    fn cancel_async<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let q = self.q();
        awaitable(py, async move { q.cancel(&id).await })
    }

    /// Moves a message that has not come due yet to `delay` seconds from now; returns
    /// whether there was one.
    fn reschedule(&self, py: Python<'_>, id: String, delay: &Bound<'_, PyAny>) -> PyResult<bool> {
        block(py, self.reschedule_fut(id, delay)?)
    }

    /// Awaitable `reschedule`.
    fn reschedule_async<'py>(
        &self,
        py: Python<'py>,
        id: String,
        delay: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.reschedule_fut(id, delay)?)
    }

    /// Receives the next ready message, waiting up to `timeout` seconds (None: forever)
    /// on the server; returns a `Delivery`, or None when the time passes.
    #[pyo3(signature = (timeout = None))]
    fn receive(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Delivery>> {
        let received = block_taking(py, self.receive_fut(timeout)?)?;
        Ok(received.map(|inner| Delivery { inner }))
    }

    /// Awaitable `receive`; cancelling it gives the message back untouched.
    #[pyo3(signature = (timeout = None))]
    fn receive_async(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Handover> {
        handover(py, self.receive_fut(timeout)?)
    }

    /// Counts: delayed, ready, in_flight, dead.
    fn stats(&self, py: Python<'_>) -> PyResult<ReliableStats> {
        block(py, self.stats_fut())
    }

    /// Awaitable `stats`.
    fn stats_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.stats_fut())
    }

    /// Up to `limit` dead letters.
    #[pyo3(signature = (limit = Arg::Default), text_signature = "($self, limit=100)")]
    fn dead_letters(&self, py: Python<'_>, limit: Arg<'_>) -> PyResult<Py<PyAny>> {
        let (q, limit) = (self.q(), convert::count(limit, "limit", 100)?);
        let list = block(
            py,
            async move { Ok(DeadLetters(q.dead_letters(limit).await?)) },
        )?;
        Ok(list.into_pyobject(py)?.into_any().unbind())
    }

    /// Awaitable `dead_letters`.
    #[pyo3(signature = (limit = Arg::Default), text_signature = "($self, limit=100)")]
    fn dead_letters_async<'py>(
        &self,
        py: Python<'py>,
        limit: Arg<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (q, limit) = (self.q(), convert::count(limit, "limit", 100)?);
        awaitable(
            py,
            async move { Ok(DeadLetters(q.dead_letters(limit).await?)) },
        )
    }

    /// Makes dead letters ready again (attempts reset): those with the given ids, or all.
    /// Returns how many.
    #[pyo3(signature = (ids = None))]
    fn requeue_dead(&self, py: Python<'_>, ids: Option<Vec<String>>) -> PyResult<u64> {
        let q = self.q();
        block(py, async move { q.requeue_dead(ids.as_deref()).await })
    }

    /// Awaitable `requeue_dead`.
    #[pyo3(signature = (ids = None))]
    fn requeue_dead_async<'py>(
        &self,
        py: Python<'py>,
        ids: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = self.q();
        awaitable(py, async move { q.requeue_dead(ids.as_deref()).await })
    }

    /// Deletes every dead letter; returns how many there were.
    fn purge_dead(&self, py: Python<'_>) -> PyResult<u64> {
        let q = self.q();
        block(py, async move { q.purge_dead().await })
    }

    /// Awaitable `purge_dead`.
    fn purge_dead_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let q = self.q();
        awaitable(py, async move { q.purge_dead().await })
    }

    /// Calls `handler(delivery)` on received messages, `concurrency` at a time, each in a
    /// worker thread: acks when it returns, nacks (with the back-off) when it raises.
    /// Runs until the queue or its client is closed (or Ctrl-C).
    #[pyo3(
        signature = (handler, concurrency = Arg::Default),
        text_signature = "($self, handler, concurrency=1)"
    )]
    fn consume(&self, py: Python<'_>, handler: Py<PyAny>, concurrency: Arg<'_>) -> PyResult<()> {
        let concurrency = convert::count(concurrency, "concurrency", 1)?;
        let (q, handler) = (self.q(), Arc::new(handler));
        block(py, async move {
            q.consume(
                move |d| {
                    let handler = handler.clone();
                    async move {
                        let call = tokio::task::spawn_blocking(move || {
                            exit::attach(|py| {
                                // (A PyErr is described with the GIL.)
                                handler
                                    .call1(py, (Delivery { inner: d },))
                                    .map(|_| ())
                                    .map_err(|e| e.to_string())
                            })
                            .unwrap_or_else(|| Err(exit::EXITING.to_owned()))
                        });
                        call.await.map_err(|e| e.to_string())?
                    }
                },
                concurrency,
            )
            .await
        })
    }

    /// Awaitable `consume` for `async def handler(delivery)`, run on the caller's event
    /// loop. Cancelling it stops the workers.
    #[pyo3(
        signature = (handler, concurrency = Arg::Default),
        text_signature = "($self, handler, concurrency=1)"
    )]
    fn consume_async<'py>(
        &self,
        py: Python<'py>,
        handler: Py<PyAny>,
        concurrency: Arg<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let concurrency = convert::count(concurrency, "concurrency", 1)?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let (q, handler) = (self.q(), Arc::new(handler));
        awaitable(py, async move {
            q.consume(
                move |d| {
                    let (handler, locals) = (handler.clone(), locals.clone());
                    async move {
                        // (A PyErr is described with the GIL.)
                        let fut = exit::attach(|py| {
                            handler
                                .bind(py)
                                .call1((Delivery { inner: d },))
                                .and_then(|coro| {
                                    pyo3_async_runtimes::into_future_with_locals(&locals, coro)
                                })
                                .map_err(|e| e.to_string())
                        })
                        .unwrap_or_else(|| Err(exit::EXITING.to_owned()))?;
                        // Polling it may enter Python, and so may describing a PyErr.
                        exit::polled(
                            async move { fut.await.map(|_| ()).map_err(|e| e.to_string()) },
                        )
                        .await
                    }
                },
                concurrency,
            )
            .await
        })
    }

    /// Closes this handle. Idempotent.
    fn close(&self) {
        self.inner.close();
    }

    fn __repr__(&self) -> String {
        format!("<delayq.ReliableQueue {:?}>", self.inner.name())
    }
}

#[pymethods]
impl Delivery {
    /// The message id.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// The payload.
    #[getter]
    fn payload(&self) -> Bytes {
        Bytes(self.inner.payload.clone())
    }

    /// Which delivery this is: 1 for the first.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// When the message came due (server Unix ms).
    #[getter]
    fn due_at(&self) -> i64 {
        self.inner.due_at
    }

    /// Acknowledges: the message is done. False when this delivery had already ended.
    fn ack(&self, py: Python<'_>) -> PyResult<bool> {
        let d = self.inner.clone();
        block(py, async move { d.ack().await })
    }

    /// Awaitable `ack`.
    fn ack_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = self.inner.clone();
        awaitable(py, async move { d.ack().await })
    }

    /// Gives the message back for a retry after `delay` seconds (default: the queue's
    /// back-off), or to the dead letters after its last attempt.
    #[pyo3(signature = (delay = None))]
    fn nack(&self, py: Python<'_>, delay: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let (d, delay) = (
            self.inner.clone(),
            delay
                .filter(|d| !d.is_none())
                .map(convert::delay)
                .transpose()?,
        );
        block(py, async move { d.nack(delay).await })
    }

    /// Awaitable `nack`.
    #[pyo3(signature = (delay = None))]
    fn nack_async<'py>(
        &self,
        py: Python<'py>,
        delay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (d, delay) = (
            self.inner.clone(),
            delay
                .filter(|d| !d.is_none())
                .map(convert::delay)
                .transpose()?,
        );
        awaitable(py, async move { d.nack(delay).await })
    }

    fn __repr__(&self) -> String {
        format!(
            "<delayq.Delivery id={:?} attempt={}>",
            self.inner.id, self.inner.attempt
        )
    }
}
