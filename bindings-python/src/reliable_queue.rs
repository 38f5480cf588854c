//! The native handles of a reliable queue and of a delivery (their classes are
//! `delayq.ReliableQueue` and `delayq.Delivery`, in Python).

use std::sync::Arc;
use std::time::Duration;

use delayq::bridge::replying;
use delayq::handover::Handover;
use pyo3::call::PyCallArgs;
use pyo3::prelude::*;

use crate::convert::{count, delay, items, opt_delay, opt_string, string, strings};
use crate::convert::{delay_named, duration, timeout, tuple, value, wrong, Obj};
use crate::error::described;
use crate::exit;
use crate::runtime::{calls, claim_blocking, none, run, Aio, Made, Taking, R};

#[pyclass(frozen)]
pub struct ReliableQueue(pub delayq::ReliableQueue);

#[pyclass(frozen)]
pub struct Delivery(delayq::Delivery);

/// A `delayq.Delivery(id, payload, attempt, due_at, shard, handle)`.
pub type MadeDelivery = Made<(String, Vec<u8>, u32, i64, u32, Delivery)>;

/// The `delayq.Delivery` of `d`.
pub fn delivery(d: delayq::Delivery) -> MadeDelivery {
    let (id, payload, shard) = (d.id.clone(), d.payload.clone(), d.shard());
    let fields = (id, payload, d.attempt, d.due_at, shard, Delivery(d));
    Made("Delivery", fields)
}

/// What an offer returns: its id, or a `delayq.OfferOutcome` when the caller asked `full`.
#[derive(IntoPyObject)]
enum Offered {
    Id(String),
    Full(Made<(String, bool, Option<i64>)>),
}

impl Offered {
    fn new(full: bool) -> impl Fn(delayq::OfferOutcome) -> Offered {
        move |o| match full {
            true => Offered::Full(Made("OfferOutcome", (o.id, o.created, o.due_at))),
            false => Offered::Id(o.id),
        }
    }
}

/// A `delayq.ReliableSettings`: durations in float seconds, the back-off a schedule or
/// exponential bounds (core's `Backoff::parts`).
fn settings(s: delayq::ReliableSettings) -> Made<impl for<'py> PyCallArgs<'py> + Send> {
    let secs = |d: Duration| d.as_secs_f64();
    let (schedule, base, max) = s.backoff.parts();
    let fields = (
        secs(s.visibility_timeout),
        s.max_attempts,
        schedule.map(|delays| delays.into_iter().map(secs).collect::<Vec<_>>()),
        base.map(secs),
        max.map(secs),
        s.shards,
        s.dead_letter_retention.map(secs),
        s.idempotency_retention.map(secs),
    );
    Made("ReliableSettings", fields)
}

/// The handles of `deliveries` (each a `delayq.Delivery`'s).
fn handles(deliveries: Obj<'_>) -> PyResult<Vec<delayq::Delivery>> {
    let what = "ack_many takes an iterable of Delivery objects";
    let handle = |d: Obj<'_>| match d.cast::<Delivery>() {
        Ok(d) => Ok(d.get().0.clone()),
        Err(_) => Err(wrong(what, &d)),
    };
    items(&deliveries, what)?.into_iter().map(handle).collect()
}

/// A message of `offer_all`: `(payload, delay[, id[, shard_key]])`.
type Checked = (Vec<u8>, Duration, Option<String>, Option<String>);

fn message(item: &Obj<'_>) -> PyResult<Checked> {
    let shape = "each message must be a (payload, delay[, id[, shard_key]]) tuple of 2 to 4 items";
    let [payload, d, id, key] = tuple(item, shape)?;
    let (id, key) = (opt_string(&id, "id")?, opt_string(&key, "shard_key")?);
    // A delay of None is 0, as in `offer`.
    let d = opt_delay((!d.is_none()).then_some(d))?.unwrap_or_default();
    Ok((value(&payload)?, d, id, key))
}

calls! { ReliableQueue(q) {
    fn cancel(id: Obj<'_>) = { let id = string(&id, "id")?; async move { q.cancel(&id).await } };
    fn reschedule(id: Obj<'_>, d: Obj<'_>) = {
        let (id, d) = (string(&id, "id")?, delay(&d)?);
        async move { q.reschedule(&id, d).await }
    };
    fn receive(t: Option<Obj<'_>>) = Taking(Handover::receive(&q, timeout(t)?));
    fn receive_many(n: Obj<'_>, t: Option<Obj<'_>>) = Taking(Handover::receive_many(&q, count(&n, "n")?, timeout(t)?));
    fn ack_many(deliveries: Obj<'_>) = { let list = handles(deliveries)?; async move { q.ack_many(&list).await } };
    fn settings() = async move { q.settings().await.map(settings) };
    fn stats() = async move {
        let delayq::ReliableStats { delayed, ready, in_flight, dead } = q.stats().await?;
        Ok(Made("ReliableStats", (delayed, ready, in_flight, dead)))
    };
    fn dead_letters(limit: Obj<'_>) = {
        let limit = count(&limit, "limit")?;
        async move {
            let letters = q.dead_letters(limit).await?.into_iter();
            Ok(letters.map(|d| Made("DeadLetter", (d.id, d.payload, d.attempts, d.died_at))).collect::<Vec<_>>())
        }
    };
    fn offer(
        full: bool, payload: Obj<'_>, d: Option<Obj<'_>>, id: Obj<'_>, key: Obj<'_>
    ) = {
        let (payload, d) = (value(&payload)?, opt_delay(d)?.unwrap_or_default());
        let (id, key) = (opt_string(&id, "id")?, opt_string(&key, "shard_key")?);
        let offered = Offered::new(full);
        async move {
            let (id, key) = (id.as_deref(), key.as_deref());
            q.offer_with_shard_key(payload, d, id, key).await.map(offered)
        }
    };
    fn offer_all(full: bool, messages: Obj<'_>) = {
        let list = items(&messages, "messages must be an iterable of tuples")?;
        let checked = list.iter().map(message).collect::<PyResult<Vec<_>>>()?;
        async move {
            let list = checked.iter().map(|(p, d, id, k)| (p, *d, id.as_deref(), k.as_deref()));
            let offered = q.offer_all_with_shard_keys(list).await?.into_iter();
            Ok(offered.map(Offered::new(full)).collect::<Vec<_>>())
        }
    };
    fn requeue_dead(ids: Obj<'_>) = {
        let ids = (!ids.is_none()).then(|| strings(&ids, "ids")).transpose()?;
        async move { q.requeue_dead(ids.as_deref()).await }
    };
    fn purge_dead() = async move { q.purge_dead().await };
    // Given up, a graceful close closes at once.
    fn close(deadline: Option<Obj<'_>>) = {
        let deadline = deadline.map(|d| duration(&d, "deadline")).transpose()?;
        let closing = q.close_within(deadline);
        async move { closing.await.map(none) }
    };
}

    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    #[getter]
    fn lost_leases(&self) -> u64 {
        self.0.lost_leases()
    }

    fn iter(&self, t: Option<Obj<'_>>) -> PyResult<ReceiveIter> {
        Ok(ReceiveIter(self.0.clone(), timeout(t)?))
    }

    /// Core's `consume`, each handler run in a worker thread, or as a task on the caller's
    /// event loop when awaited.
    fn consume(&self, py: Python<'_>, aio: Aio<'_>, handler: Py<PyAny>, concurrency: Obj<'_>) -> R {
        let concurrency = count(&concurrency, "concurrency")?;
        let _in = crate::runtime::runtime().enter();
        let (q, handler) = (self.0.clone(), Arc::new(handler));
        if let Some(completer) = &aio {
            // The loop runs each handler as a task and reports its outcome.
            let on_loop = completer.clone().unbind();
            let call = replying(move |d, reply| on_loop.get().handle(handler.clone(), d, reply));
            return run(py, aio, async move { q.consume(call, concurrency).await.map(none) });
        }
        // (A PyErr is described, with its traceback, while the GIL is held.)
        let call = move |d| {
            let handler = handler.clone();
            let called = tokio::task::spawn_blocking(move || {
                exit::attach(|py| handler.call1(py, (delivery(d),)).map(drop).map_err(|e| described(py, &e)))
                    .unwrap_or_else(exit::exiting)
            });
            async move { called.await.map_err(|e| e.to_string())? }
        };
        run(py, aio, async move { q.consume(call, concurrency).await.map(none) })
    }
}

calls! { Delivery(d) {
    fn extend(duration: Obj<'_>) = {
        let duration = delay_named(&duration, "duration")?;
        async move { d.extend(duration).await }
    };
    fn ack() = async move { d.ack().await };
    fn nack(t: Option<Obj<'_>>) = { let t = opt_delay(t)?; async move { d.nack(t).await } };
}

    #[getter]
    fn deadline(&self) -> i64 {
        self.0.deadline()
    }
}

/// The iterator of `ReliableQueue.iter`: a `receive` per item, until one times out.
#[pyclass(module = "delayq", frozen)]
pub struct ReceiveIter(delayq::ReliableQueue, Option<Duration>);

#[pymethods]
impl ReceiveIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<MadeDelivery>> {
        let _in = crate::runtime::runtime().enter();
        let received = claim_blocking(py, Handover::receive(&self.0, self.1))?;
        Ok(received.map(delivery))
    }
}
