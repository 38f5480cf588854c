//! Handing what a blocking call took from Redis over to a caller in another language
//! without losing it.
//!
//! A caller in Python, Node or Kotlin may give up a `take` or `receive` at any instant:
//! before core's call returned (core's calls are cancel-safe: dropping the future gives
//! back what the server hands over for it), or after it returned but before the caller
//! read the value (an asyncio task cancelled while its future was being set, a Kotlin
//! continuation cancelled while resuming, an interpreter exiting). [`Handover`] closes the
//! second window: it runs core's call as a task on the client's runtime, keeps the outcome
//! until the caller [claims](Handover::claim) it, and gives it back to the queue (once,
//! logged once) when the caller is [gone](Handover::give_up) or the handover is dropped
//! unclaimed. A binding only says "claimed" or "gone" in its own way.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::logs::Escaped;
use crate::{DelayedQueue, Delivery, ReliableQueue, Result};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a handover holds: something taken from a queue that goes back when nobody claims
/// it.
pub trait Taken: Send + 'static {
    /// Whether it may hold something to give back (listed for [`give_back_unclaimed`]).
    const HOLDS: bool = true;

    /// Gives it back to its queue. Errors are logged, not returned: nobody is left to
    /// receive them.
    fn give_back(self) -> BoxFuture;
}

/// An outcome with nothing to give back (a call that takes nothing from a queue, run
/// through a handover so that a binding has one path for every call).
pub struct Plain<T>(pub T);

impl<T: Send + 'static> Taken for Plain<T> {
    const HOLDS: bool = false;

    fn give_back(self) -> BoxFuture {
        Box::pin(async {})
    }
}

/// A value taken from a [`DelayedQueue`] (`None`: the wait timed out).
pub struct TakenValue {
    queue: DelayedQueue,
    /// The value.
    pub value: Vec<u8>,
}

impl Taken for Option<TakenValue> {
    fn give_back(self) -> BoxFuture {
        Box::pin(async move {
            let Some(TakenValue { queue, value }) = self else {
                return;
            };
            match queue.give_back(&value).await {
                Ok(()) => {
                    tracing::debug!(queue = ?queue.name(), "gave back a value nobody received")
                }
                Err(e) => tracing::error!(
                    queue = ?queue.name(), error = %Escaped(&e),
                    "could not give back a value nobody received; it is lost"
                ),
            }
        })
    }
}

impl Taken for Option<Delivery> {
    fn give_back(self) -> BoxFuture {
        Box::pin(async move {
            if let Some(delivery) = self {
                release(delivery).await;
            }
        })
    }
}

impl Taken for Vec<Delivery> {
    fn give_back(self) -> BoxFuture {
        Box::pin(async move {
            for delivery in self {
                release(delivery).await;
            }
        })
    }
}

/// What [`Handover::consume`] hands over: nothing (core's consume gives back its own
/// deliveries when it stops).
impl Taken for () {
    const HOLDS: bool = false;

    fn give_back(self) -> BoxFuture {
        Box::pin(async {})
    }
}

async fn release(delivery: Delivery) {
    match delivery.release().await {
        Ok(_) => {
            tracing::debug!(id = ?delivery.id, "gave back a delivery nobody received")
        }
        Err(e) => tracing::warn!(
            id = ?delivery.id, error = %Escaped(&e),
            "could not give back a delivery nobody received; it returns when its lease ends"
        ),
    }
}

/// What [`Handover::claim`] found.
pub enum Claim<T> {
    /// Core's call still runs.
    Pending,
    /// The outcome, now the caller's.
    Ready(Result<T>),
    /// Claimed before, or given up.
    Ended,
}

type Notify = Box<dyn FnOnce() + Send + 'static>;

enum State<T> {
    /// Core's call runs; `notify` is called when it returns.
    Running(Option<Notify>),
    /// Core's call returned; the outcome waits for the caller.
    Ready(Result<T>),
    /// Claimed, or given up (and what was taken given back).
    Ended,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: tokio::sync::Notify,
    runtime: tokio::runtime::Handle,
}

impl<T> Shared<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handover's outcome, seen from [`give_back_unclaimed`].
trait Unclaimed: Send + Sync {
    /// Ends the handover if its outcome waits unclaimed: what it took, to give back.
    fn take_unclaimed(&self) -> Option<BoxFuture>;
}

impl<T: Taken> Unclaimed for Shared<T> {
    fn take_unclaimed(&self) -> Option<BoxFuture> {
        let mut state = self.lock();
        if !matches!(*state, State::Ready(Ok(_))) {
            return None;
        }
        let State::Ready(Ok(taken)) = std::mem::replace(&mut *state, State::Ended) else {
            unreachable!("checked above")
        };
        self.ready.notify_one();
        Some(taken.give_back())
    }
}

/// The handovers that may hold something, weakly: a host whose caller objects are never
/// freed (an asyncio task left on a loop closed without cancelling it) would keep what
/// they took until the process ends, and then lose it. Per process: a forked child gives
/// back nothing of its parent's (and a lock its parent held at the fork stays there).
type Live = Mutex<Vec<std::sync::Weak<dyn Unclaimed>>>;
static LIVE: crate::process::PerProcess<Live> = crate::process::PerProcess::new(Live::default);

fn register(shared: std::sync::Weak<dyn Unclaimed>) {
    let mut live = LIVE.get().lock().unwrap_or_else(PoisonError::into_inner);
    // Forget the ended ones now and then: the list stays about as long as the live ones.
    if live.len() >= 64 && live.len().is_power_of_two() {
        live.retain(|h| h.strong_count() > 0);
    }
    live.push(shared);
}

/// Whether any handover that may hold something was started and not yet seen by
/// [`give_back_unclaimed`]: a host with none has nothing to give back (and need not start a
/// runtime for it at exit).
pub fn any_started() -> bool {
    !LIVE
        .get()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}

/// Gives back what every handover still holds unclaimed, waiting up to `limit`: for a host
/// that exits (its callers will claim nothing now). A later claim finds [`Claim::Ended`].
pub async fn give_back_unclaimed(limit: Duration) {
    let live = std::mem::take(&mut *LIVE.get().lock().unwrap_or_else(PoisonError::into_inner));
    let backs: Vec<BoxFuture> = (live.iter())
        .filter_map(|h| h.upgrade()?.take_unclaimed())
        .collect();
    if backs.is_empty() {
        return;
    }
    let n = backs.len();
    if tokio::time::timeout(limit, futures_util::future::join_all(backs))
        .await
        .is_err()
    {
        tracing::warn!(
            count = n,
            ?limit,
            "could not give back in time what callers left unclaimed at exit"
        );
    }
}

/// A blocking call running for a caller in another language, whose outcome is held until
/// the caller claims it and given back if it never does. See the module docs.
pub struct Handover<T: Taken> {
    shared: Arc<Shared<T>>,
    task: tokio::task::AbortHandle,
}

impl Handover<Option<TakenValue>> {
    /// Starts [`DelayedQueue::take`] on the client's runtime.
    pub fn take(queue: &DelayedQueue, timeout: Option<Duration>) -> Self {
        let q = queue.clone();
        let runtime = queue.runtime().clone();
        Handover::start(runtime, async move {
            let value = q.take(timeout).await?;
            Ok(value.map(|value| TakenValue { queue: q, value }))
        })
    }
}

impl Handover<Option<Delivery>> {
    /// Starts [`ReliableQueue::receive`] on the client's runtime.
    pub fn receive(queue: &ReliableQueue, timeout: Option<Duration>) -> Self {
        let q = queue.clone();
        let runtime = queue.runtime().clone();
        Handover::start(runtime, async move { q.receive(timeout).await })
    }
}

impl Handover<Vec<Delivery>> {
    /// Starts [`ReliableQueue::receive_many`] on the client's runtime.
    pub fn receive_many(queue: &ReliableQueue, n: usize, timeout: Option<Duration>) -> Self {
        let q = queue.clone();
        let runtime = queue.runtime().clone();
        Handover::start(runtime, async move { q.receive_many(n, timeout).await })
    }
}

impl Handover<()> {
    /// Starts [`ReliableQueue::consume`] on the client's runtime: it runs until the queue
    /// is closed or the handover is given up.
    pub fn consume<F, Fut, E>(queue: &ReliableQueue, handler: F, concurrency: usize) -> Self
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let q = queue.clone();
        let runtime = queue.runtime().clone();
        Handover::start(
            runtime,
            async move { q.consume(handler, concurrency).await },
        )
    }
}

impl<T: Taken> Handover<T> {
    /// Runs `call` (a cancel-safe core call) as a task on `runtime`.
    pub fn start<F>(runtime: tokio::runtime::Handle, call: F) -> Self
    where
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::Running(None)),
            ready: tokio::sync::Notify::new(),
            runtime: runtime.clone(),
        });
        if T::HOLDS {
            let weak: std::sync::Weak<dyn Unclaimed> = Arc::downgrade(&shared) as _;
            register(weak);
        }
        let task_shared = shared.clone();
        let task = runtime.spawn(async move {
            let outcome = crate::error::caught(call).await;
            let notify = {
                let mut state = task_shared.lock();
                match std::mem::replace(&mut *state, State::Ended) {
                    State::Running(notify) => {
                        *state = State::Ready(outcome);
                        notify
                    }
                    // Given up meanwhile: this task is being aborted, so the give-back
                    // runs as a task of its own.
                    State::Ready(_) | State::Ended => {
                        drop(state);
                        if let Ok(taken) = outcome {
                            task_shared.runtime.spawn(taken.give_back());
                        }
                        return;
                    }
                }
            };
            task_shared.ready.notify_one();
            if let Some(notify) = notify {
                notify();
            }
        });
        Handover {
            shared,
            task: task.abort_handle(),
        }
    }

    /// Calls `notify` once the outcome is ready (at once, on this thread, if it is
    /// already; otherwise on a runtime thread, so it must not block). Replaces an
    /// earlier `notify` that was not called yet.
    pub fn on_ready(&self, notify: impl FnOnce() + Send + 'static) {
        let mut state = self.shared.lock();
        match &mut *state {
            State::Running(slot) => *slot = Some(Box::new(notify)),
            State::Ready(_) | State::Ended => {
                drop(state);
                notify();
            }
        }
    }

    /// Waits until the outcome is ready (or the handover ended).
    pub async fn ready(&self) {
        loop {
            let notified = self.shared.ready.notified();
            if !matches!(*self.shared.lock(), State::Running(_)) {
                return;
            }
            notified.await;
        }
    }

    /// Whether the outcome is ready to claim.
    pub fn is_ready(&self) -> bool {
        matches!(*self.shared.lock(), State::Ready(_))
    }

    /// Takes the outcome: from here on the value is the caller's.
    pub fn claim(&self) -> Claim<T> {
        let mut state = self.shared.lock();
        match std::mem::replace(&mut *state, State::Ended) {
            State::Ready(outcome) => Claim::Ready(outcome),
            running @ State::Running(_) => {
                *state = running;
                Claim::Pending
            }
            State::Ended => Claim::Ended,
        }
    }

    /// The caller is gone: stops core's call if it still runs (core gives back what the
    /// server hands over for it) or gives back what it took, in the background. Later
    /// claims find [`Claim::Ended`].
    pub fn give_up(&self) {
        let state = std::mem::replace(&mut *self.shared.lock(), State::Ended);
        match state {
            State::Running(_) => self.task.abort(),
            State::Ready(Ok(taken)) => {
                self.shared.runtime.spawn(taken.give_back());
            }
            State::Ready(Err(_)) | State::Ended => {}
        }
        self.shared.ready.notify_one();
    }

    /// [`give_up`](Self::give_up), then waits until what was taken is back (for a caller
    /// that must not return before, e.g. a thread that blocks until the call ends).
    pub async fn give_back(&self) {
        let state = std::mem::replace(&mut *self.shared.lock(), State::Ended);
        match state {
            State::Running(_) => self.task.abort(),
            State::Ready(Ok(taken)) => taken.give_back().await,
            State::Ready(Err(_)) | State::Ended => {}
        }
        self.shared.ready.notify_one();
    }
}

impl<T: Taken> Drop for Handover<T> {
    fn drop(&mut self) {
        self.give_up();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts give-backs.
    pub(crate) struct Counted(pub(crate) Arc<AtomicUsize>);

    impl Taken for Counted {
        fn give_back(self) -> BoxFuture {
            Box::pin(async move {
                self.0.fetch_add(1, Ordering::SeqCst);
            })
        }
    }

    fn started(
        given_back: &Arc<AtomicUsize>,
    ) -> (Handover<Counted>, tokio::sync::oneshot::Sender<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let counter = given_back.clone();
        let h = Handover::start(tokio::runtime::Handle::current(), async move {
            let _ = rx.await;
            Ok(Counted(counter))
        });
        (h, tx)
    }

    #[tokio::test]
    async fn a_claimed_outcome_is_not_given_back() {
        let given_back = Arc::new(AtomicUsize::new(0));
        let (h, tx) = started(&given_back);
        assert!(matches!(h.claim(), Claim::Pending));
        let (ntx, nrx) = tokio::sync::oneshot::channel();
        h.on_ready(move || ntx.send(()).unwrap());
        tx.send(()).unwrap();
        nrx.await.unwrap();
        h.ready().await;
        let Claim::Ready(Ok(taken)) = h.claim() else {
            panic!("not ready")
        };
        assert!(matches!(h.claim(), Claim::Ended));
        drop(h);
        tokio::task::yield_now().await;
        assert_eq!(given_back.load(Ordering::SeqCst), 0);
        drop(taken);
    }

    #[tokio::test]
    async fn an_unclaimed_outcome_goes_back_once() {
        let given_back = Arc::new(AtomicUsize::new(0));
        let (h, tx) = started(&given_back);
        tx.send(()).unwrap();
        h.ready().await;
        h.give_back().await;
        h.give_up();
        drop(h);
        tokio::task::yield_now().await;
        assert_eq!(given_back.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn giving_up_a_running_call_aborts_it() {
        let given_back = Arc::new(AtomicUsize::new(0));
        let (h, tx) = started(&given_back);
        h.give_up();
        h.ready().await; // ends at once
        assert!(matches!(h.claim(), Claim::Ended));
        // The call can no longer finish: its task was aborted.
        tokio::task::yield_now().await;
        assert!(tx.send(()).is_err() || given_back.load(Ordering::SeqCst) <= 1);
        assert_eq!(given_back.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn on_ready_after_the_outcome_runs_at_once() {
        let given_back = Arc::new(AtomicUsize::new(0));
        let (h, tx) = started(&given_back);
        tx.send(()).unwrap();
        h.ready().await;
        let called = Arc::new(AtomicUsize::new(0));
        let c = called.clone();
        h.on_ready(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(called.load(Ordering::SeqCst), 1);
        drop(h);
        for _ in 0..100 {
            if given_back.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            given_back.load(Ordering::SeqCst),
            1,
            "dropped unclaimed: given back"
        );
    }
}
