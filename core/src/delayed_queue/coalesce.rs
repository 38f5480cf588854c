//! Coalescing of concurrent [`DelayedQueue::offer`](super::DelayedQueue::offer) calls on
//! one handle into multi-entry offer script calls.
//!
//! Services offer one value per call, from many tasks or threads at once; sent one by one,
//! each offer would cost a script call and a round trip. Here at most one offer script call
//! per handle is in flight: the offers made meanwhile wait in a list and go together in the
//! next call (at most [`OFFER_CHUNK`]), each with its own delay (the script computes each
//! due time). Nothing waits for a batch to fill.
//!
//! The design is flat combining, with a short-lived task to carry on:
//! - `offer` puts the offer in the list when it is called, not when its future is first
//!   polled: bindings spawn a task per call, and tasks may start in any order, but offers
//!   keep the order of the calls.
//! - A future that, when polled, finds nobody sending takes the sending role and sends the
//!   head of the list itself, at once: a lone offer costs no task and no thread hop.
//! - When that call ends, whatever waits is handed to a task spawned on the client's
//!   runtime, which sends it batch after batch and ends when the list is empty. A batch
//!   carries the offers of many callers, so no caller should be kept serving everybody else
//!   under steady load, and a caller that drops its future must not take the others' call
//!   down with it: its unfinished call also moves to that task. A task per burst does both
//!   without a hand-off protocol between callers and, unlike a task per handle, lives only
//!   while there are offers to send: nothing to stop, nothing to leak.
//!
//! An offer whose future is dropped before its batch went out is left out. Closing the
//! handle fails the offers not yet sent with `Closed`; those in flight get their outcome.
//! The price of sending from the caller's future: a caller that keeps its future, in
//! flight, without polling it (a `select!` arm left pending) holds back the offers made
//! after its own until it polls or drops it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{QueueInner, OFFER_CHUNK};
use crate::error::{Error, ErrorKind, Result};

/// The offers of one handle not yet sent, and whether someone is sending.
#[derive(Default)]
pub(super) struct Coalescer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Offers not yet sent, in the order `offer` was called.
    waiting: VecDeque<Waiting>,
    /// Whether a caller or a task holds the sending role (and so has a call in flight, or
    /// is about to). The holder sends what waits before giving the role up.
    sending: bool,
    /// `random::forks()` when `waiting` and `sending` were last set: in a process forked
    /// since, they are the parent's offers and senders, which no thread of the child
    /// serves or ends, so they are forgotten there.
    forks: u64,
}

struct Waiting {
    value: Vec<u8>,
    delay_ms: u64,
    reply: oneshot::Sender<Result<i64>>,
    /// When `offer` was called.
    joined: Instant,
}

impl State {
    /// Takes the next batch (and the sending role); or gives the role up when nothing
    /// waits, in the same critical section, so that no offer waits with nobody to send it.
    fn next_batch(&mut self) -> Option<Vec<Waiting>> {
        while !self.waiting.is_empty() {
            let n = self.waiting.len().min(OFFER_CHUNK);
            // Offers whose callers gave up are left out.
            let batch: Vec<Waiting> = self
                .waiting
                .drain(..n)
                .filter(|w| !w.reply.is_closed())
                .collect();
            if !batch.is_empty() {
                self.sending = true;
                return Some(batch);
            }
        }
        self.sending = false;
        None
    }
}

impl Coalescer {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held, so the state is consistent even if a
        // panic elsewhere poisoned it.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let forks = crate::random::forks();
        if state.forks != forks {
            // (Forgotten, not dropped: their replies are the parent's callers'.)
            std::mem::forget(std::mem::take(&mut state.waiting));
            (state.sending, state.forks) = (false, forks);
        }
        state
    }

    /// Takes the sending role and the next batch, if nobody holds the role.
    fn take_role(&self) -> Option<Vec<Waiting>> {
        let mut state = self.lock();
        if state.sending {
            return None;
        }
        state.next_batch()
    }

    /// Fails every offer not yet sent.
    fn fail_waiting(&self, err: &Error) {
        let waiting = std::mem::take(&mut self.lock().waiting);
        for w in waiting {
            let _ = w.reply.send(Err(err.clone()));
        }
    }

    /// Fails the offers not yet sent that joined before `before`, with `err`.
    fn fail_joined_before(&self, before: Instant, err: &Error) {
        let failed: VecDeque<Waiting> = {
            let mut state = self.lock();
            let (failed, kept) = std::mem::take(&mut state.waiting)
                .into_iter()
                .partition(|w| w.joined < before);
            state.waiting = kept;
            failed
        };
        for w in failed {
            let _ = w.reply.send(Err(err.clone()));
        }
    }

    /// Gives up the role with nobody to take it over: what waits fails.
    fn abandon(&self, err: &Error) {
        let waiting = {
            let mut state = self.lock();
            state.sending = false;
            std::mem::take(&mut state.waiting)
        };
        for w in waiting {
            let _ = w.reply.send(Err(err.clone()));
        }
    }
}

/// An offer in its handle's list, until its outcome is known. Dropping it withdraws the
/// offer if it was not sent yet.
pub(super) struct Joined {
    inner: Arc<QueueInner>,
    reply: oneshot::Receiver<Result<i64>>,
}

/// Puts a checked offer at the end of the handle's list.
pub(super) fn join(inner: &Arc<QueueInner>, value: &[u8], delay_ms: u64) -> Joined {
    let value = value.to_vec();
    let (reply, rx) = oneshot::channel();
    inner.offers.lock().waiting.push_back(Waiting {
        value,
        delay_ms,
        reply,
        joined: Instant::now(),
    });
    Joined {
        inner: inner.clone(),
        reply: rx,
    }
}

impl Joined {
    /// Sends the offer, or waits for the call that does; returns its due time.
    pub(super) async fn outcome(self) -> Result<i64> {
        let Joined { inner, reply } = self;
        if let Some(batch) = inner.offers.take_role() {
            // Nobody was sending: send the head of the list (this offer and those made
            // before it that nobody sent yet) from this future, now.
            Call::new(&inner, batch).finish().await;
        }
        wait(&inner, reply).await
    }
}

type BatchCall = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A batch sent from a caller's future, with the sending role. Dropped, it hands what is
/// left (its own call if unfinished, and what waits) to a task.
struct Call {
    inner: Arc<QueueInner>,
    call: Option<BatchCall>,
}

impl Call {
    fn new(inner: &Arc<QueueInner>, batch: Vec<Waiting>) -> Self {
        Call {
            inner: inner.clone(),
            call: Some(Box::pin(send_batch(inner.clone(), batch))),
        }
    }

    async fn finish(mut self) {
        if let Some(call) = self.call.as_mut() {
            call.await;
        }
        self.call = None;
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let first = match self.call.take() {
            Some(unfinished) => unfinished,
            None => match self.inner.offers.lock().next_batch() {
                Some(batch) => Box::pin(send_batch(self.inner.clone(), batch)),
                None => return,
            },
        };
        let batches = Batches {
            inner: self.inner.clone(),
            first: Some(first),
            done: false,
        };
        self.inner.handle.runtime().spawn(batches.run());
    }
}

/// The task that sends the waiting offers, batch after batch, until none is left. It holds
/// the sending role while it lives.
struct Batches {
    inner: Arc<QueueInner>,
    first: Option<BatchCall>,
    done: bool,
}

impl Batches {
    async fn run(mut self) {
        if let Some(first) = self.first.as_mut() {
            first.await;
        }
        self.first = None;
        loop {
            if self.inner.handle.is_closed() {
                self.inner
                    .offers
                    .fail_waiting(&self.inner.handle.closed_error());
            }
            let Some(batch) = self.inner.offers.lock().next_batch() else {
                break;
            };
            send_batch(self.inner.clone(), batch).await;
        }
        self.done = true;
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        if !self.done {
            // Dropped before it finished: the client's runtime is shutting down (or was
            // down when the task was spawned). Nobody is left to send what waits.
            self.inner
                .offers
                .abandon(&Error::Closed("the client's runtime shut down"));
        }
    }
}

/// One script call for a batch; each offer of it gets its due time, or the call's error.
/// A call that failed on the network (no reply or no connection in time, a connection
/// lost) fails, as not sent, the offers that have waited behind it for longer than
/// `CALL_MARGIN`: an attempt of their own (up to the response or connect timeout) would
/// end past their time (SPEC 10). Under a silent partition they took twice the timeout.
async fn send_batch(inner: Arc<QueueInner>, batch: Vec<Waiting>) {
    let sent = if inner.handle.is_closed() {
        Err(inner.handle.closed_error())
    } else {
        inner
            .send_offers(batch.iter().map(|w| (&w.value[..], w.delay_ms)))
            .await
    };
    if let Err(e) = &sent {
        if matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout) {
            let margin = crate::handle::CALL_MARGIN;
            if let Some(before) = Instant::now().checked_sub(margin) {
                inner.offers.fail_joined_before(
                    before,
                    &Error::Timeout(format!(
                        "this offer waited more than {margin:?} behind an earlier offer call of this queue handle, which failed ({e}); it was not sent, since an attempt of its own would end past its time"
                    )),
                );
            }
        }
    }
    match sent {
        Ok(due) => {
            for (w, due) in batch.into_iter().zip(due) {
                let _ = w.reply.send(Ok(due));
            }
        }
        Err(e) => {
            for w in batch {
                let _ = w.reply.send(Err(e.clone()));
            }
        }
    }
}

/// Waits for the outcome of an offer. Closing the handle fails the offers not yet sent at
/// once; one in flight still gets its outcome.
async fn wait(inner: &QueueInner, mut reply: oneshot::Receiver<Result<i64>>) -> Result<i64> {
    let reply = tokio::select! {
        biased;
        reply = &mut reply => reply,
        () = inner.handle.closed() => {
            inner.offers.fail_waiting(&inner.handle.closed_error());
            reply.await
        }
    };
    reply.unwrap_or_else(|_| {
        Err(Error::Connection(
            "the offer was interrupted: the task sending it ended".into(),
        ))
    })
}
