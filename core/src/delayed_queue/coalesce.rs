//! Coalescing of concurrent [`DelayedQueue::offer`](super::DelayedQueue::offer) calls on
//! one handle into multi-entry offer script calls.
//!
//! Services offer one value per call, from many tasks or threads at once; sent one by one,
//! each offer would cost a script call and a round trip. Here at most one offer script call
//! per handle is in flight: the offers that arrive meanwhile wait in a list and go together
//! in the next call (at most [`OFFER_CHUNK`]), each with its own delay (the script computes
//! each due time). Nothing waits for a batch to fill.
//!
//! The design is flat combining, with a short-lived task for the batches:
//! - An offer that finds nobody sending takes the sending role and sends its own entry at
//!   once, from its own future: a lone offer costs what it did without coalescing (no task,
//!   no channel, no copy of the value).
//! - An offer that finds a call in flight copies its value into the list and waits.
//! - When the lone call ends, or its caller drops the future, whatever waits is handed to a
//!   task spawned on the client's runtime, which sends it batch after batch and ends when
//!   the list is empty. A batch carries the offers of many callers, so no caller may own
//!   it: one that drops its future must not take the others' call down with it, and none
//!   should be kept serving everybody else under steady load. A task per burst gives both
//!   without a hand-off protocol between callers and, unlike a task per handle, lives only
//!   while there are offers to send: nothing to stop, nothing to leak.
//!
//! Offers keep the order in which they joined. One whose caller gave up before its batch
//! went out is left out. Closing the handle fails the offers not yet sent with `Closed`;
//! one already in flight gets its real outcome.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use super::{QueueInner, OFFER_CHUNK};
use crate::error::{Error, Result};

/// The offers of one handle waiting to be sent, and whether someone is sending.
#[derive(Default)]
pub(super) struct Coalescer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Offers that arrived while a call was in flight, oldest first.
    waiting: VecDeque<Waiting>,
    /// Whether a caller or a task holds the sending role. Whoever holds it sends
    /// `waiting` before giving it up, so `waiting` is empty whenever this is false.
    sending: bool,
}

struct Waiting {
    value: Vec<u8>,
    delay_ms: u64,
    reply: oneshot::Sender<Result<i64>>,
}

enum Turn {
    /// Nobody was sending: this offer now holds the role.
    Send,
    /// The offer joined the list; its reply comes on this channel.
    Wait(oneshot::Receiver<Result<i64>>),
    /// A call is in flight; copy the value (outside the lock) and try again.
    CopyFirst,
}

impl Coalescer {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held, so the state is consistent even if a
        // panic elsewhere poisoned it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the sending role if nobody holds it, else adds the offer to the list (once
    /// its value was copied).
    fn join(&self, value: &mut Option<Vec<u8>>, delay_ms: u64) -> Turn {
        let mut state = self.lock();
        if !state.sending {
            state.sending = true;
            return Turn::Send;
        }
        let Some(value) = value.take() else {
            return Turn::CopyFirst;
        };
        let (reply, rx) = oneshot::channel();
        state.waiting.push_back(Waiting {
            value,
            delay_ms,
            reply,
        });
        Turn::Wait(rx)
    }

    /// Fails every offer not yet sent.
    fn fail_waiting(&self, err: &Error) {
        let waiting = std::mem::take(&mut self.lock().waiting);
        for w in waiting {
            let _ = w.reply.send(Err(err.clone()));
        }
    }

    /// The next batch to send, or `None` after giving up the sending role when nothing
    /// waits (in the same critical section, so that no offer joins a list nobody sends).
    fn next_batch(&self) -> Option<Vec<Waiting>> {
        let mut state = self.lock();
        if state.waiting.is_empty() {
            state.sending = false;
            return None;
        }
        let n = state.waiting.len().min(OFFER_CHUNK);
        Some(state.waiting.drain(..n).collect())
    }
}

/// Offers one checked entry, coalesced with the concurrent offers on the same handle.
pub(super) async fn offer(inner: &Arc<QueueInner>, value: &[u8], delay_ms: u64) -> Result<i64> {
    let mut owned = None;
    loop {
        match inner.offers.join(&mut owned, delay_ms) {
            Turn::Send => return Lead(inner).send(value, delay_ms).await,
            Turn::Wait(reply) => return wait(inner, reply).await,
            Turn::CopyFirst => owned = Some(value.to_vec()),
        }
    }
}

/// The sending role held by a caller whose offer found nobody sending. Dropped when its
/// call ends or its caller gives up; either way the role passes on.
struct Lead<'a>(&'a Arc<QueueInner>);

impl Lead<'_> {
    async fn send(self, value: &[u8], delay_ms: u64) -> Result<i64> {
        let due = self
            .0
            .send_offers(std::iter::once((value, delay_ms)))
            .await?;
        Ok(due[0])
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if let Some(first) = self.0.offers.next_batch() {
            let batches = Batches {
                inner: self.0.clone(),
                first: Some(first),
                done: false,
            };
            self.0.handle.runtime().spawn(batches.run());
        }
    }
}

/// The task that sends the waiting offers, batch after batch, until none is left. It holds
/// the sending role while it lives.
struct Batches {
    inner: Arc<QueueInner>,
    first: Option<Vec<Waiting>>,
    done: bool,
}

impl Batches {
    async fn run(mut self) {
        loop {
            if self.inner.handle.is_closed() {
                let err = self.inner.handle.closed_error();
                if let Some(batch) = self.first.take() {
                    for w in batch {
                        let _ = w.reply.send(Err(err.clone()));
                    }
                }
                self.inner.offers.fail_waiting(&err);
            }
            let batch = match self.first.take() {
                Some(batch) => batch,
                None => match self.inner.offers.next_batch() {
                    Some(batch) => batch,
                    None => break,
                },
            };
            // Leave out the offers whose callers gave up.
            let batch: Vec<Waiting> = batch.into_iter().filter(|w| !w.reply.is_closed()).collect();
            if batch.is_empty() {
                continue;
            }
            let sent = self
                .inner
                .send_offers(batch.iter().map(|w| (&w.value[..], w.delay_ms)))
                .await;
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
        self.done = true;
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Dropped before it finished: the client's runtime is shutting down (or was down
        // when the task was spawned). Nobody is left to send what waits.
        let waiting = {
            let mut state = self.inner.offers.lock();
            state.sending = false;
            std::mem::take(&mut state.waiting)
        };
        let err = Error::Closed("the client's runtime shut down");
        for w in self.first.take().into_iter().flatten().chain(waiting) {
            let _ = w.reply.send(Err(err.clone()));
        }
    }
}

/// Waits for the reply to an offer in the list. Closing the handle fails the offers not
/// yet sent at once; one in flight still gets its outcome.
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
