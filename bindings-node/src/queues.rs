//! `DelayedQueue`, `ReliableQueue` and `Delivery`, documented in index.d.ts. Objects come
//! out as arrays, which index.js names.

use std::sync::Arc;
use std::time::Duration;

use delayq::bridge::{replying, Reply};
use delayq::handover::Handover;
use napi::bindgen_prelude::{Buffer, BufferSlice, FunctionRef, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use crate::bridge;
use crate::error::{count, delay, opt_count, timeout, value_in, IntoJs, Result};

#[napi]
pub struct DelayedQueue {
    pub(crate) inner: delayq::DelayedQueue,
}

methods! { DelayedQueue {
    promise {
        offer_all(list: Vec<(Buffer, f64)> => list.into_iter()
            .map(|(v, ms)| Ok((value_in(&v)?, delay(ms)?))).collect::<Result<Vec<_>>>()?)
            -> Vec<i64> = |q| q.offer_all(list).await;
        size() -> i64 = |q| Ok(q.size().await? as i64);
        contains(value: BufferSlice => value_in(&value)?) -> bool = |q| q.contains(value).await;
        remove(value: BufferSlice => value_in(&value)?) -> bool = |q| q.remove(value).await;
        read_all() -> Vec<Buffer> =
            |q| Ok(q.read_all().await?.into_iter().map(Into::into).collect());
        clear() -> () = |q| q.clear().await;
        poll() -> Option<Buffer> = |q| Ok(q.poll().await?.map(Into::into));
        "`[delayed, ready, corrupt]`"
        stats() -> (i64, i64, i64) = |q| {
            let s = q.stats().await?;
            Ok((s.delayed as i64, s.ready as i64, s.corrupt as i64))
        };
    }
    wait {
        take(ms: Option<f64> => timeout(ms)?) -> Option<Buffer> =
            |q| Handover::take(q, ms), |v| v.map(|t| t.value.into());
    }
    sync {
        #[napi(getter)] name() -> String = |q| q.name().to_owned();
        close() -> () = |q| q.close();
    }
}}

#[napi]
impl DelayedQueue {
    /// Core's `offer` is called here, on the JavaScript thread, so that offers keep the
    /// order of the calls; core coalesces concurrent offers into script calls.
    #[napi]
    pub fn offer<'e>(
        &self,
        env: &'e Env,
        value: BufferSlice,
        ms: f64,
    ) -> Result<PromiseRaw<'e, i64>> {
        let offered = self.inner.offer(value_in(&value)?, delay(ms)?);
        bridge::promise(env, offered)
    }
}

#[napi]
pub struct ReliableQueue {
    pub(crate) inner: delayq::ReliableQueue,
}

#[napi]
pub struct Delivery {
    inner: delayq::Delivery,
    /// Where a consume handler's outcome goes (`finish`).
    done: Reply,
}

fn delivery(inner: delayq::Delivery) -> Delivery {
    let done = Reply::default();
    Delivery { inner, done }
}

type Offer = (Vec<u8>, Duration, Option<String>, Option<String>);

/// `[id, created, dueAt]`.
fn outcome(o: delayq::OfferOutcome) -> (String, bool, Option<i64>) {
    (o.id, o.created, o.due_at)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `[[visibilityTimeoutMs, maxAttempts, backoffBaseMs, backoffMaxMs, shards,
/// deadLetterRetentionMs, idempotencyRetentionMs], backoffMs]`, absent ones null
/// (retentions: 0).
fn settings(s: delayq::ReliableSettings) -> (Vec<Option<i64>>, Option<Vec<i64>>) {
    let (list, base, max) = s.backoff.parts();
    let retention = |r: Option<Duration>| Some(r.map_or(0, millis));
    let numbers = vec![
        Some(millis(s.visibility_timeout)),
        Some(s.max_attempts.into()),
        base.map(millis),
        max.map(millis),
        Some(s.shards.into()),
        retention(s.dead_letter_retention),
        retention(s.idempotency_retention),
    ];
    (numbers, list.map(|l| l.into_iter().map(millis).collect()))
}

methods! { ReliableQueue {
    promise {
        "`[id, created, dueAt]`"
        offer(payload: BufferSlice => value_in(&payload)?, ms: f64 => delay(ms)?,
            id: Option<String>, shard_key: Option<String>) -> (String, bool, Option<i64>) = |q| {
            let (id, key) = (id.as_deref(), shard_key.as_deref());
            Ok(outcome(q.offer_with_shard_key(payload, ms, id, key).await?))
        };
        "`[payload, delayMs, id, shardKey]` each"
        offer_all(list: Vec<(Buffer, f64, Option<String>, Option<String>)> => list.into_iter()
            .map(|(p, ms, id, key)| Ok((value_in(&p)?, delay(ms)?, id, key)))
            .collect::<Result<Vec<Offer>>>()?) -> Vec<(String, bool, Option<i64>)> = |q| {
            let list = list.iter().map(|(p, d, id, key)| (p, *d, id.as_deref(), key.as_deref()));
            Ok(q.offer_all_with_shard_keys(list).await?.into_iter().map(outcome).collect())
        };
        cancel(id: String) -> bool = |q| q.cancel(&id).await;
        reschedule(id: String, ms: f64 => delay(ms)?) -> bool = |q| q.reschedule(&id, ms).await;
        ack_many(list: Vec<&Delivery> => list.iter().map(|d| d.inner.clone()).collect::<Vec<_>>())
            -> Vec<bool> = |q| q.ack_many(&list).await;
        settings() -> (Vec<Option<i64>>, Option<Vec<i64>>) = |q| Ok(settings(q.settings().await?));
        "`[delayed, ready, inFlight, dead]`"
        stats() -> (i64, i64, i64, i64) = |q| {
            let s = q.stats().await?;
            Ok((s.delayed as i64, s.ready as i64, s.in_flight as i64, s.dead as i64))
        };
        "`[id, payload, attempts, diedAt]` each (default: core's limit)"
        dead_letters(limit: Option<f64> => opt_count(limit, "limit")?)
            -> Vec<(String, Buffer, u32, i64)> = |q| {
            let list = q.dead_letters(limit.unwrap_or(delayq::DEAD_LETTERS_LIMIT)).await?;
            Ok(list.into_iter().map(|d| (d.id, d.payload.into(), d.attempts, d.died_at)).collect())
        };
        requeue_dead(ids: Option<Vec<String>>) -> i64 =
            |q| Ok(q.requeue_dead(ids.as_deref()).await? as i64);
        purge_dead() -> i64 = |q| Ok(q.purge_dead().await? as i64);
        close_gracefully(deadline: f64 => delayq::delay::timeout_from_millis_f64(deadline, "deadlineMs").js()?)
            -> () = |q| q.close_gracefully(deadline).await;
    }
    wait {
        receive_many(n: f64 => count(n, "n")?, ms: Option<f64> => timeout(ms)?) -> Vec<Delivery> =
            |q| Handover::receive_many(q, n, ms), |list| list.into_iter().map(delivery).collect();
        receive(ms: Option<f64> => timeout(ms)?) -> Option<Delivery> =
            |q| Handover::receive(q, ms), |d| d.map(delivery);
        "Core's consume: `handler` gets each delivery, reports with `finish`; `giveUp(id)` stops"
        consume(handler: FunctionRef<Delivery, ()>,
            concurrency: f64 => count(concurrency, "concurrency")?) -> () =
            |q, env| Handover::consume(q, replying(handing(env, handler)?), concurrency), |()| ();
    }
    sync {
        #[napi(getter)] name() -> String = |q| q.name().to_owned();
        lost_leases() -> i64 = |q| q.lost_leases() as i64;
        close() -> () = |q| q.close();
    }
}}

/// Hands each delivery of a `consume` to `handler`, on the JavaScript thread.
fn handing(
    env: &Env,
    handler: FunctionRef<Delivery, ()>,
) -> Result<impl Fn(delayq::Delivery, Reply)> {
    let (pump, handler) = (bridge::pump(env)?, Arc::new(handler));
    Ok(move |inner, done| {
        let handler = handler.clone();
        pump.post(Box::new(move |env| {
            if let Ok(f) = handler.borrow_back(env) {
                let _ = f.call(Delivery { inner, done });
            }
        }));
    })
}

methods! { Delivery {
    promise {
        extend(ms: f64 => delayq::delay::duration_from_millis_f64(ms, "duration").js()?) -> bool = |d| d.extend(ms).await;
        ack() -> bool = |d| d.ack().await;
        nack(ms: Option<f64> => ms.map(delay).transpose()?) -> bool = |d| d.nack(ms).await;
    }
    sync {
        #[napi(getter)] id() -> String = |d| d.id.clone();
        #[napi(getter)] payload() -> Buffer = |d| d.payload.clone().into();
        #[napi(getter)] attempt() -> u32 = |d| d.attempt;
        #[napi(getter)] due_at() -> i64 = |d| d.due_at;
        #[napi(getter)] shard() -> u32 = |d| d.shard();
        #[napi(getter)] deadline() -> i64 = |d| d.deadline();
    }
}}

#[napi]
impl Delivery {
    /// Reports the outcome of the consume handler given this delivery: `failure` null
    /// acks it, a description nacks it.
    #[napi]
    pub fn finish(&self, failure: Option<String>) {
        self.done.send(failure.map_or(Ok(()), Err));
    }
}
