//! `ReliableQueue` and `Delivery`: each call blocking (GIL released) and `*_async`, written
//! once (`twins!`).

use std::sync::Arc;
use std::time::Duration;

use delayq::handover::Handover;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{self, Arg, Bytes};
use crate::error::invalid;
use crate::exit;
use crate::runtime::{twins, Call, Taking};

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
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        convert::repr(slf, "delayed ready in_flight dead")
    }
}

/// A message in the dead letters.
#[pyclass(module = "delayq", frozen, get_all)]
pub struct DeadLetter {
    /// The message id.
    pub id: String,
    /// The payload.
    pub payload: Py<PyBytes>,
    /// Deliveries it had.
    pub attempts: u32,
    /// When it was buried (server Unix ms).
    pub died_at: i64,
}

/// Dead letters on their way to Python (a list of `DeadLetter`).
struct DeadLetters(Vec<delayq::DeadLetter>);

impl<'py> IntoPyObject<'py> for DeadLetters {
    type Target = pyo3::types::PyList;
    type Output = Bound<'py, Self::Target>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let letters = self.0.into_iter().map(|d| DeadLetter {
            payload: PyBytes::new(py, &d.payload).unbind(),
            id: d.id,
            attempts: d.attempts,
            died_at: d.died_at,
        });
        pyo3::types::PyList::new(py, letters)
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
        let secs = |d: Duration| d.as_secs_f64();
        let (backoff, backoff_base, backoff_max) = match s.backoff {
            delayq::Backoff::Schedule(delays) => {
                (Some(delays.into_iter().map(secs).collect()), None, None)
            }
            delayq::Backoff::Exponential { base, max } => (None, Some(secs(base)), Some(secs(max))),
        };
        ReliableSettings {
            visibility_timeout: secs(s.visibility_timeout),
            max_attempts: s.max_attempts,
            backoff,
            backoff_base,
            backoff_max,
            shards: s.shards,
            dead_letter_retention: s.dead_letter_retention.map(secs),
            idempotency_retention: s.idempotency_retention.map(secs),
        }
    }
}

#[pymethods]
impl ReliableSettings {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let fields = "visibility_timeout max_attempts backoff backoff_base backoff_max shards \
                      dead_letter_retention idempotency_retention";
        convert::repr(slf, fields)
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
    /// When the message is due (server Unix ms); None when it was de-duplicated.
    pub due_at: Option<i64>,
}

#[pymethods]
impl OfferOutcome {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        convert::repr(slf, "id created due_at")
    }
}

fn outcome(o: delayq::OfferOutcome) -> OfferOutcome {
    OfferOutcome {
        id: o.id,
        created: o.created,
        due_at: o.due_at,
    }
}

/// Closes the handle if the graceful close was given up (Ctrl-C, a cancelled task).
struct CloseOnDrop(delayq::ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The deliveries of a call of `ack_many`: each a `Delivery`.
fn deliveries(list: &Bound<'_, PyAny>) -> PyResult<Vec<delayq::Delivery>> {
    let mut out = Vec::new();
    for item in list.try_iter()? {
        let item = item?;
        let Ok(d) = item.cast::<Delivery>() else {
            let name = item.get_type().name()?;
            return Err(invalid(format!(
                "ack_many takes Delivery objects, not {name}"
            )));
        };
        out.push(d.get().inner.clone());
    }
    Ok(out)
}

impl ReliableQueue {
    fn q(&self) -> delayq::ReliableQueue {
        self.inner.clone()
    }

    fn offer_one(
        &self,
        payload: &Bound<'_, PyAny>,
        delay: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        shard_key: Option<String>,
    ) -> PyResult<impl std::future::Future<Output = delayq::Result<delayq::OfferOutcome>>> {
        let delay = convert::opt_delay(delay)?.unwrap_or_default();
        let (payload, q) = (convert::value(payload)?, self.q());
        Ok(async move {
            q.offer_with_shard_key(payload, delay, id.as_deref(), shard_key.as_deref())
                .await
        })
    }

    fn offer_many(
        &self,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<impl std::future::Future<Output = delayq::Result<Vec<delayq::OfferOutcome>>>>
    {
        let mut checked = Vec::new();
        for item in messages.try_iter()? {
            let item = item?;
            type Message<'py> = (
                Bound<'py, PyAny>,
                Bound<'py, PyAny>,
                Option<String>,
                Option<String>,
            );
            let (payload, delay, id, key): Message<'_> = match item.len()? {
                4 => item.extract()?,
                3 => item.extract().map(|(p, d, id)| (p, d, id, None))?,
                _ => item.extract().map(|(p, d)| (p, d, None, None))?,
            };
            checked.push((convert::value(&payload)?, convert::delay(&delay)?, id, key));
        }
        let q = self.q();
        Ok(async move {
            let list = checked.iter();
            q.offer_all_with_shard_keys(
                list.map(|(p, d, id, key)| (p, *d, id.as_deref(), key.as_deref())),
            )
            .await
        })
    }

    /// Closes the handle: at once without a deadline, else gracefully.
    fn close_call(
        &self,
        deadline: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl std::future::Future<Output = delayq::Result<()>>> {
        let (deadline, q) = (convert::timeout(deadline)?, self.q());
        // Owned by the future from the start: dropped before its first poll, it closes too.
        let guard = CloseOnDrop(q.clone());
        Ok(async move {
            let _guard = guard;
            match deadline {
                Some(deadline) => q.close_gracefully(deadline).await,
                None => Ok(()),
            }
        })
    }

    /// Core's `consume` with `call(handler, delivery)` running each handler.
    fn consume_call<Fut>(
        &self,
        handler: Py<PyAny>,
        concurrency: Arg<'_>,
        call: impl Fn(Arc<Py<PyAny>>, Delivery) -> Fut + Send + Sync + 'static,
    ) -> PyResult<impl std::future::Future<Output = delayq::Result<()>>>
    where
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        let concurrency = convert::count(concurrency, "concurrency", 1)?;
        let (q, handler) = (self.q(), Arc::new(handler));
        Ok(async move {
            q.consume(
                move |d| call(handler.clone(), Delivery { inner: d }),
                concurrency,
            )
            .await
        })
    }
}

twins! {
impl ReliableQueue {
    /// Offers `payload` due after `delay` seconds; returns its id. With `id`, a message
    /// with that id still waiting, ready or in flight (or acked within the queue's
    /// idempotency retention) is not offered again: the call returns the id and changes
    /// nothing.
    ///
    /// With `shard_key`, the message goes to the shard of the key instead of the shard of
    /// its id (a queue of several shards): messages with one key stay in one shard.
    #[pyo3(signature = (payload, delay = None, id = None, *, shard_key = None))]
    fn offer / offer_async(&self, payload: &Bound<'_, PyAny>, delay: Option<&Bound<'_, PyAny>>, id: Option<String>, shard_key: Option<String>) = {
        let offer = self.offer_one(payload, delay, id, shard_key)?;
        async move { Ok(offer.await?.id) }
    };

    /// Like `offer`; returns an `OfferOutcome`: the id, and whether this call created
    /// the message (False when it was de-duplicated).
    #[pyo3(signature = (payload, delay = None, id = None, *, shard_key = None))]
    fn offer_with_outcome / offer_with_outcome_async(&self, payload: &Bound<'_, PyAny>, delay: Option<&Bound<'_, PyAny>>, id: Option<String>, shard_key: Option<String>) = {
        let offer = self.offer_one(payload, delay, id, shard_key)?;
        async move { offer.await.map(outcome) }
    };

    /// Offers many `(payload, delay)`, `(payload, delay, id)` or
    /// `(payload, delay, id, shard_key)` tuples; returns their ids.
    fn offer_all / offer_all_async(&self, messages: &Bound<'_, PyAny>) = {
        let offers = self.offer_many(messages)?;
        async move { Ok(offers.await?.into_iter().map(|o| o.id).collect::<Vec<_>>()) }
    };

    /// Like `offer_all`; returns an `OfferOutcome` for each message, in order.
    fn offer_all_with_outcome / offer_all_with_outcome_async(&self, messages: &Bound<'_, PyAny>) = {
        let offers = self.offer_many(messages)?;
        async move { Ok(offers.await?.into_iter().map(outcome).collect::<Vec<_>>()) }
    };

    /// Removes a message that has not come due yet; returns whether there was one.
    fn cancel / cancel_async(&self, id: String) = {
        let q = self.q();
        async move { q.cancel(&id).await }
    };

    /// Moves a message that has not come due yet to `delay` seconds from now; returns
    /// whether there was one.
    fn reschedule / reschedule_async(&self, id: String, delay: &Bound<'_, PyAny>) = {
        let (delay, q) = (convert::delay(delay)?, self.q());
        async move { q.reschedule(&id, delay).await }
    };

    /// Receives the next ready message, waiting up to `timeout` seconds (None: forever)
    /// on the server; returns a `Delivery`, or None when the time passes. Ctrl-C, or
    /// cancelling the awaitable, gives the message back untouched.
    #[pyo3(signature = (timeout = None))]
    fn receive / receive_async(&self, timeout: Option<&Bound<'_, PyAny>>) =
        Taking(Handover::receive(&self.inner, convert::timeout(timeout)?));

    /// Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
    /// `timeout` seconds (None: forever) for the first; returns a list of `Delivery`,
    /// empty when the time passes. Ctrl-C, or cancelling the awaitable, gives the
    /// messages back untouched.
    #[pyo3(signature = (n, timeout = None), text_signature = "($self, n, timeout=None)")]
    fn receive_many / receive_many_async(&self, n: Arg<'_>, timeout: Option<&Bound<'_, PyAny>>) = {
        let n = convert::count(n, "n", 0usize)?;
        Taking(Handover::receive_many(&self.inner, n, convert::timeout(timeout)?))
    };

    /// Acks many deliveries in one round trip; returns, for each, whether its lease was
    /// still held (as `Delivery.ack`).
    fn ack_many / ack_many_async(&self, deliveries: &Bound<'_, PyAny>) = {
        let (list, q) = (self::deliveries(deliveries)?, self.q());
        async move { q.ack_many(&list).await }
    };

    /// The queue's settings as stored in Redis now (stored from this handle's options if
    /// the queue had none); a `ReliableSettings`.
    fn settings / settings_async(&self) = {
        let q = self.q();
        async move { q.settings().await.map(ReliableSettings::from) }
    };

    /// Counts: delayed, ready, in_flight, dead.
    fn stats / stats_async(&self) = {
        let q = self.q();
        async move {
            let delayq::ReliableStats { delayed, ready, in_flight, dead } = q.stats().await?;
            Ok(ReliableStats { delayed, ready, in_flight, dead })
        }
    };

    /// Up to `limit` dead letters.
    #[pyo3(signature = (limit = Arg::Default), text_signature = "($self, limit=100)")]
    fn dead_letters / dead_letters_async(&self, limit: Arg<'_>) = {
        let (q, limit) = (self.q(), convert::count(limit, "limit", delayq::DEAD_LETTERS_LIMIT)?);
        async move { Ok(DeadLetters(q.dead_letters(limit).await?)) }
    };

    /// Makes dead letters ready again (attempts reset): those with the given ids, or all.
    /// Returns how many.
    #[pyo3(signature = (ids = None))]
    fn requeue_dead / requeue_dead_async(&self, ids: Option<Vec<String>>) = {
        let q = self.q();
        async move { q.requeue_dead(ids.as_deref()).await }
    };

    /// Deletes every dead letter; returns how many there were.
    fn purge_dead / purge_dead_async(&self) = {
        let q = self.q();
        async move { q.purge_dead().await }
    };

    /// Closes this handle. Without `deadline`, at once: later calls (and a pending
    /// receive) raise `ClosedError`, a running `consume` returns, deliveries already
    /// received can still be acked or nacked. With `deadline` (seconds), gracefully and
    /// blocking until done: consumers stop receiving, handlers already running get up to
    /// `deadline` to finish and are acked or nacked, messages received but not handed to
    /// a handler go back untouched, then the handle closes (a cancelled `close_async`
    /// closes at once). Idempotent.
    #[pyo3(signature = (deadline = None))]
    fn close / close_async(&self, deadline: Option<&Bound<'_, PyAny>>) = self.close_call(deadline)?;
}

    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Acks through this handle (`ack`, `ack_many`, `consume`) that found their delivery
    /// already ended, its lease lost: each means that message may be processed twice.
    #[getter]
    fn lost_leases(&self) -> u64 {
        self.inner.lost_leases()
    }

    /// Calls `handler(delivery)` on received messages, `concurrency` at a time, each in a
    /// worker thread: acks when it returns, nacks (with the queue's back-off) when it
    /// raises. Receives ahead (up to `concurrency` messages), extends the lease of a
    /// running handler by itself (a handler may run longer than the visibility timeout),
    /// batches acks. Runs until the queue or its client is closed (or Ctrl-C); after
    /// `close(deadline=...)`, once the running handlers finished and were settled.
    #[pyo3(signature = (handler, concurrency = Arg::Default), text_signature = "($self, handler, concurrency=1)")]
    fn consume(&self, py: Python<'_>, handler: Py<PyAny>, concurrency: Arg<'_>) -> PyResult<Py<PyAny>> {
        let consume = self.consume_call(handler, concurrency, |handler, d| async move {
            let call = tokio::task::spawn_blocking(move || {
                // (A PyErr is described with the GIL.)
                exit::attach(|py| handler.call1(py, (d,)).map(drop).map_err(|e| e.to_string()))
                    .unwrap_or_else(|| Err(exit::EXITING.to_owned()))
            });
            call.await.map_err(|e| e.to_string())?
        })?;
        consume.block(py)
    }

    /// Awaitable `consume` for `async def handler(delivery)`, run on the caller's event
    /// loop. Cancelling it stops the workers; `close_async(deadline)` lets the running
    /// handlers finish first.
    #[pyo3(signature = (handler, concurrency = Arg::Default), text_signature = "($self, handler, concurrency=1)")]
    fn consume_async(&self, py: Python<'_>, handler: Py<PyAny>, concurrency: Arg<'_>) -> PyResult<crate::runtime::Awaiting> {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let consume = self.consume_call(handler, concurrency, move |handler, d| {
            // (A PyErr is described with the GIL.)
            let fut = exit::attach(|py| {
                let coro = handler.bind(py).call1((d,));
                coro.and_then(|c| pyo3_async_runtimes::into_future_with_locals(&locals, c))
                    .map_err(|e| e.to_string())
            });
            // Polling it may enter Python, and so may describing a PyErr.
            exit::polled(async move {
                let fut = fut.unwrap_or_else(|| Err(exit::EXITING.to_owned()))?;
                fut.await.map(drop).map_err(|e| e.to_string())
            })
        })?;
        consume.start(py)
    }

    fn __repr__(&self) -> String {
        format!("<delayq.ReliableQueue {:?}>", self.inner.name())
    }
}

twins! {
impl Delivery {
    /// Moves the end of the lease to `duration` seconds from now (shorter than what is
    /// left shortens it). False when the lease was already lost (the message went back
    /// to the queue, or this delivery was acked or nacked).
    fn extend / extend_async(&self, duration: &Bound<'_, PyAny>) = {
        let (d, duration) = (self.inner.clone(), convert::delay(duration)?);
        async move { d.extend(duration).await }
    };

    /// Acknowledges: the message is done. False when this delivery had already ended.
    fn ack / ack_async(&self) = {
        let d = self.inner.clone();
        async move { d.ack().await }
    };

    /// Gives the message back for a retry after `delay` seconds (default: the queue's
    /// back-off), or to the dead letters after its last attempt.
    #[pyo3(signature = (delay = None))]
    fn nack / nack_async(&self, delay: Option<&Bound<'_, PyAny>>) = {
        let (d, delay) = (self.inner.clone(), convert::opt_delay(delay)?);
        async move { d.nack(delay).await }
    };
}

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

    /// The shard the message lives in (0 for a queue of one shard).
    #[getter]
    fn shard(&self) -> u32 {
        self.inner.shard()
    }

    /// When this delivery's lease ends (server Unix ms): past it, the message may be
    /// delivered to another consumer. Moved by `extend`.
    #[getter]
    fn deadline(&self) -> i64 {
        self.inner.deadline()
    }

    fn __repr__(&self) -> String {
        format!("<delayq.Delivery id={:?} attempt={}>", self.inner.id, self.inner.attempt)
    }
}
