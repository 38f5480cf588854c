//! `ReliableQueue` and `Delivery`: each call blocking (GIL released) and `*_async`.

use std::future::Future;
use std::sync::Arc;

use pyo3::prelude::*;

use crate::convert::{self, Arg, Bytes};
use crate::exit;
use crate::handover::{handover, Batch, Handover};
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
/// delivered again when its lease ends (`deadline`, moved by `extend(seconds)`).
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

/// The settings of a reliable queue, as stored in Redis with it (see
/// `Client.reliable_queue`). Durations are float seconds; the back-off is either
/// `backoff` (a list of delays, the last one repeats) or exponential from `backoff_base`
/// to `backoff_max` (the fields of the other kind are None).
#[pyclass(module = "delayq", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct ReliableSettings {
    /// The lease of a delivery, in seconds.
    pub visibility_timeout: f64,
    /// Deliveries before the dead letters.
    pub max_attempts: u32,
    /// The back-off schedule in seconds, or None when it is exponential.
    pub backoff: Option<Vec<f64>>,
    /// The first delay of an exponential back-off, in seconds (None for a schedule).
    pub backoff_base: Option<f64>,
    /// The longest delay of an exponential back-off, in seconds (None for a schedule).
    pub backoff_max: Option<f64>,
    /// Sub-queues.
    pub shards: u32,
    /// How long dead letters are kept, in seconds; None: until requeued or purged.
    pub dead_letter_retention: Option<f64>,
    /// How long acked ids are remembered for de-duplication, in seconds; None: not at all.
    pub idempotency_retention: Option<f64>,
}

impl From<delayq::ReliableSettings> for ReliableSettings {
    fn from(s: delayq::ReliableSettings) -> Self {
        let (backoff, backoff_base, backoff_max) = match s.backoff {
            delayq::Backoff::Schedule(delays) => (
                Some(delays.iter().map(|d| d.as_secs_f64()).collect()),
                None,
                None,
            ),
            delayq::Backoff::Exponential { base, max } => {
                (None, Some(base.as_secs_f64()), Some(max.as_secs_f64()))
            }
        };
        ReliableSettings {
            visibility_timeout: s.visibility_timeout.as_secs_f64(),
            max_attempts: s.max_attempts,
            backoff,
            backoff_base,
            backoff_max,
            shards: s.shards,
            dead_letter_retention: s.dead_letter_retention.map(|d| d.as_secs_f64()),
            idempotency_retention: s.idempotency_retention.map(|d| d.as_secs_f64()),
        }
    }
}

fn py_opt<T: std::fmt::Debug>(v: &Option<T>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "None".to_owned(),
    }
}

#[pymethods]
impl ReliableSettings {
    fn __repr__(&self) -> String {
        format!(
            "ReliableSettings(visibility_timeout={:?}, max_attempts={}, backoff={}, \
             backoff_base={}, backoff_max={}, shards={}, dead_letter_retention={}, \
             idempotency_retention={})",
            self.visibility_timeout,
            self.max_attempts,
            py_opt(&self.backoff),
            py_opt(&self.backoff_base),
            py_opt(&self.backoff_max),
            self.shards,
            py_opt(&self.dead_letter_retention),
            py_opt(&self.idempotency_retention),
        )
    }
}

/// What `offer_with_outcome` did: the message `id`, and whether this call `created` the
/// message (False: a message with that id was already waiting, ready, in flight, or
/// acked within the idempotency retention).
#[pyclass(module = "delayq", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct OfferOutcome {
    /// The message id.
    pub id: String,
    /// Whether this call created the message.
    pub created: bool,
}

impl From<delayq::OfferOutcome> for OfferOutcome {
    fn from(o: delayq::OfferOutcome) -> Self {
        OfferOutcome {
            id: o.id,
            created: o.created,
        }
    }
}

#[pymethods]
impl OfferOutcome {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "OfferOutcome(id={}, created={})",
            pyo3::types::PyString::new(py, &self.id).repr()?,
            if self.created { "True" } else { "False" }
        ))
    }
}

/// Closes the handle if the graceful close was given up (Ctrl-C, a cancelled task).
struct CloseOnDrop(delayq::ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Closes `q`: at once without a deadline, else gracefully (see `ReliableQueue.close`).
fn close_fut(q: delayq::ReliableQueue, deadline: Option<std::time::Duration>) -> Fut<()> {
    // Owned by the future from the start: dropped before its first poll, it closes too.
    let guard = CloseOnDrop(q.clone());
    boxed(async move {
        let guard = guard;
        if let Some(deadline) = deadline {
            q.close_gracefully(deadline).await?;
        }
        drop(guard);
        Ok(())
    })
}

/// The deliveries of a call of `ack_many`: each a `Delivery`.
fn deliveries(list: &Bound<'_, PyAny>) -> PyResult<Vec<delayq::Delivery>> {
    let mut out = Vec::new();
    for item in list.try_iter()? {
        let item = item?;
        let d = item.cast::<Delivery>().map_err(|_| {
            crate::error::invalid(format!(
                "ack_many takes Delivery objects, not {}",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        out.push(d.get().inner.clone());
    }
    Ok(out)
}

impl ReliableQueue {
    fn q(&self) -> delayq::ReliableQueue {
        self.inner.clone()
    }

    fn offer_fut(
        &self,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<Fut<delayq::OfferOutcome>> {
        let delay = match delay {
            Some(d) => convert::delay(d)?,
            None => std::time::Duration::ZERO,
        };
        let (payload, q) = (convert::value(payload)?, self.q());
        Ok(boxed(async move {
            q.offer_with_outcome(payload, delay, id.as_deref()).await
        }))
    }

    fn offer_all_fut(
        &self,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Fut<Vec<delayq::OfferOutcome>>> {
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
            q.offer_all_with_outcome(checked.iter().map(|(p, d, id)| (p, *d, id.as_deref())))
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

    fn receive_many_fut(
        &self,
        n: Arg<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Fut<Option<Batch>>> {
        let n = convert::count(n, "n", 0usize)?;
        let (timeout, q) = (convert::timeout(timeout)?, self.q());
        Ok(boxed(async move {
            Ok(Some(Batch(q.receive_many(n, timeout).await?)))
        }))
    }

    fn ack_many_fut(&self, list: &Bound<'_, PyAny>) -> PyResult<Fut<Vec<bool>>> {
        let (list, q) = (deliveries(list)?, self.q());
        Ok(boxed(async move { q.ack_many(&list).await }))
    }

    fn settings_fut(&self) -> Fut<ReliableSettings> {
        let q = self.q();
        boxed(async move { Ok(q.settings().await?.into()) })
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
    /// with that id still waiting, ready or in flight (or acked within the queue's
    /// idempotency retention) is not offered again: the call returns the id and changes
    /// nothing.
    #[pyo3(signature = (payload, delay = None, id = None))]
    fn offer(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<String> {
        Ok(block(py, self.offer_fut(payload, delay, id)?)?.id)
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
        let fut = self.offer_fut(payload, delay, id)?;
        awaitable(py, async move { Ok(fut.await?.id) })
    }

    /// Like `offer`; returns an `OfferOutcome`: the id, and whether this call created
    /// the message (False when it was de-duplicated).
    #[pyo3(signature = (payload, delay = None, id = None))]
    fn offer_with_outcome(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<OfferOutcome> {
        Ok(block(py, self.offer_fut(payload, delay, id)?)?.into())
    }

    /// Awaitable `offer_with_outcome`.
    #[pyo3(signature = (payload, delay = None, id = None))]
    fn offer_with_outcome_async<'py>(
        &self,
        py: Python<'py>,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fut = self.offer_fut(payload, delay, id)?;
        awaitable(py, async move { Ok(OfferOutcome::from(fut.await?)) })
    }

    /// Offers many `(payload, delay)` or `(payload, delay, id)` tuples; returns their ids.
    fn offer_all(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let out = block(py, self.offer_all_fut(messages)?)?;
        Ok(out.into_iter().map(|o| o.id).collect())
    }

    /// Awaitable `offer_all`.
    fn offer_all_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fut = self.offer_all_fut(messages)?;
        awaitable(py, async move {
            Ok(fut.await?.into_iter().map(|o| o.id).collect::<Vec<_>>())
        })
    }

    /// Like `offer_all`; returns an `OfferOutcome` for each message, in order.
    fn offer_all_with_outcome(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<OfferOutcome>> {
        let out = block(py, self.offer_all_fut(messages)?)?;
        Ok(out.into_iter().map(Into::into).collect())
    }

    /// Awaitable `offer_all_with_outcome`.
    fn offer_all_with_outcome_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fut = self.offer_all_fut(messages)?;
        awaitable(py, async move {
            Ok(fut
                .await?
                .into_iter()
                .map(OfferOutcome::from)
                .collect::<Vec<_>>())
        })
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

    /// Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
    /// `timeout` seconds (None: forever) for the first; returns a list of `Delivery`,
    /// empty when the time passes.
    #[pyo3(
        signature = (n, timeout = None),
        text_signature = "($self, n, timeout=None)"
    )]
    fn receive_many(
        &self,
        py: Python<'_>,
        n: Arg<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Delivery>> {
        let received = block_taking(py, self.receive_many_fut(n, timeout)?)?;
        Ok(received
            .map(|b| b.0)
            .unwrap_or_default()
            .into_iter()
            .map(|inner| Delivery { inner })
            .collect())
    }

    /// Awaitable `receive_many`; cancelling it gives the messages back untouched.
    #[pyo3(
        signature = (n, timeout = None),
        text_signature = "($self, n, timeout=None)"
    )]
    fn receive_many_async(
        &self,
        py: Python<'_>,
        n: Arg<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Handover> {
        handover(py, self.receive_many_fut(n, timeout)?)
    }

    /// Acks many deliveries in one round trip; returns, for each, whether its lease was
    /// still held (as `Delivery.ack`).
    fn ack_many(&self, py: Python<'_>, deliveries: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        block(py, self.ack_many_fut(deliveries)?)
    }

    /// Awaitable `ack_many`.
    fn ack_many_async<'py>(
        &self,
        py: Python<'py>,
        deliveries: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.ack_many_fut(deliveries)?)
    }

    /// The queue's settings as stored in Redis now (stored from this handle's options if
    /// the queue had none); a `ReliableSettings`.
    fn settings(&self, py: Python<'_>) -> PyResult<ReliableSettings> {
        block(py, self.settings_fut())
    }

    /// Awaitable `settings`.
    fn settings_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, self.settings_fut())
    }

    /// Acks through this handle (`ack`, `ack_many`, `consume`) that found their delivery
    /// already ended, its lease lost: each means that message may be processed twice.
    #[getter]
    fn lost_leases(&self) -> u64 {
        self.inner.lost_leases()
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
    /// worker thread: acks when it returns, nacks (with the queue's back-off) when it
    /// raises. Receives ahead (up to `concurrency` messages), extends the lease of a
    /// running handler by itself (a handler may run longer than the visibility timeout),
    /// batches acks. Runs until the queue or its client is closed (or Ctrl-C); after
    /// `close(deadline=...)`, once the running handlers finished and were settled.
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
    /// loop. Cancelling it stops the workers; `close_async(deadline)` lets the running
    /// handlers finish first.
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

    /// Closes this handle. Without `deadline`, at once: later calls (and a pending
    /// receive) raise `ClosedError`, a running `consume` returns, deliveries already
    /// received can still be acked or nacked. With `deadline` (seconds), gracefully and
    /// blocking until done: consumers stop receiving, handlers already running get up to
    /// `deadline` to finish and are acked or nacked, messages received but not handed to
    /// a handler go back untouched, then the handle closes. Idempotent.
    #[pyo3(signature = (deadline = None))]
    fn close(&self, py: Python<'_>, deadline: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let deadline = convert::timeout(deadline)?;
        match deadline {
            None => {
                self.inner.close();
                Ok(())
            }
            Some(_) => block(py, close_fut(self.q(), deadline)),
        }
    }

    /// Awaitable `close`: with `deadline`, the graceful close (cancelling it closes the
    /// handle at once).
    #[pyo3(signature = (deadline = None))]
    fn close_async<'py>(
        &self,
        py: Python<'py>,
        deadline: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let deadline = convert::timeout(deadline)?;
        awaitable(py, close_fut(self.q(), deadline))
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

    /// When this delivery's lease ends (server Unix ms): past it, the message may be
    /// delivered to another consumer. Moved by `extend`.
    #[getter]
    fn deadline(&self) -> i64 {
        self.inner.deadline()
    }

    /// Moves the end of the lease to `duration` seconds from now (shorter than what is
    /// left shortens it). False when the lease was already lost (the message went back
    /// to the queue, or this delivery was acked or nacked).
    fn extend(&self, py: Python<'_>, duration: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (d, duration) = (self.inner.clone(), convert::delay(duration)?);
        block(py, async move { d.extend(duration).await })
    }

    /// Awaitable `extend`.
    fn extend_async<'py>(
        &self,
        py: Python<'py>,
        duration: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (d, duration) = (self.inner.clone(), convert::delay(duration)?);
        awaitable(py, async move { d.extend(duration).await })
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
