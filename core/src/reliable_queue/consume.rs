//! [`ReliableQueue::consume`] and [`ReliableQueue::close_gracefully`].
//!
//! One consume call runs a receiver and `concurrency` workers:
//! - the receiver keeps a buffer of up to `concurrency` deliveries filled with
//!   `receive_many`, so that workers never wait a round trip for their next message and
//!   one round trip brings many (prefetch); a delivery that waits in the buffer longer
//!   than a third of the visibility timeout has its lease extended (one keeper task per
//!   consume call), so that it does not run out before a worker is free;
//! - a worker runs the handler on one delivery at a time and, once it has run for a third
//!   of the visibility timeout, extends the delivery's lease every third of the timeout,
//!   so a handler may run longer than the timeout while its process lives; a lease found
//!   lost is logged;
//! - a worker hands a finished delivery to its shard's ack batcher and goes on to the next
//!   message: the acks handed over while one is in flight go together in the next script
//!   call (a consume returns only after every ack handed over was sent).
//!
//! A graceful close stops the receiver, lets running handlers finish (up to the deadline),
//! settles them, gives back the buffered deliveries no handler started, then closes. A
//! close at once does the same with a grace of [`DROP_GRACE`] (the handle is closed at
//! once; only the settling goes on), and so does a consume call dropped before it returns
//! (a cancelled task), in a task of its own.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Delivery, ReliableQueue, MAX_RECEIVE};
use crate::error::{Error, ErrorKind, Result};
use crate::logs::Escaped;

/// Acks of one consume call, batched: one batcher task per shard (so that a shard whose
/// master is down, in a failover, does not hold up the acks of the others). A worker hands
/// its delivery over and goes on to the next message; the batcher acks everything handed
/// over while its previous call was in flight in one script call, and logs a failure.
#[derive(Clone)]
struct Acker {
    queue: ReliableQueue,
    batchers: Arc<Mutex<AckBatchers>>,
}

#[derive(Default)]
struct AckBatchers {
    senders: HashMap<u32, mpsc::UnboundedSender<Delivery>>,
    running: JoinSet<()>,
}

impl Acker {
    fn new(queue: ReliableQueue) -> Self {
        Acker {
            queue,
            batchers: Arc::default(),
        }
    }

    fn ack(&self, delivery: Delivery) {
        let mut batchers = self.batchers.lock().expect("ack batchers lock");
        let AckBatchers { senders, running } = &mut *batchers;
        let tx = senders.entry(delivery.shard()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            running.spawn(batch_acks(self.queue.clone(), rx));
            tx
        });
        if let Err(mpsc::error::SendError(delivery)) = tx.send(delivery) {
            // Only after `finish`, which runs once no worker is left.
            tracing::warn!(queue = ?self.queue.name(), id = ?delivery.id, "ack after the consumer stopped; the message returns after its lease ends");
        }
    }

    /// Waits until every ack handed over was sent (or failed and was logged).
    async fn finish(&self) {
        let mut running = {
            let mut batchers = self.batchers.lock().expect("ack batchers lock");
            batchers.senders.clear();
            std::mem::take(&mut batchers.running)
        };
        drain(&mut running).await;
    }
}

/// Acks the deliveries of one shard: the acks handed over while one call is in flight go
/// together in the next script call.
async fn batch_acks(queue: ReliableQueue, mut rx: mpsc::UnboundedReceiver<Delivery>) {
    let mut batch = Vec::new();
    // Acks refused because the client closed, told once at the end rather than per batch.
    let mut after_close = 0;
    while rx.recv_many(&mut batch, 1000).await > 0 {
        match queue.ack_many(&batch).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Closed => after_close += batch.len(),
            Err(e) => {
                tracing::warn!(queue = ?queue.name(), count = batch.len(), error = %Escaped(&e), "could not ack deliveries (the acks may or may not have landed); unacked ones return after their lease ends");
            }
        }
        batch.clear();
    }
    if after_close > 0 {
        tracing::warn!(queue = ?queue.name(), count = after_close, "handlers finished after the client was closed: their deliveries were not acked and return after their lease ends");
    }
}

/// A delivery received ahead: when its lease last (re)started, and whether the keeper
/// found it lost.
type Waiting = (Delivery, Instant, bool);

/// What a worker finds of a delivery it takes from the buffer.
enum Claimed {
    Held,
    Stale,
    Lost,
}

/// The deliveries of one consume call received ahead and not yet started, by receipt.
#[derive(Clone, Default)]
struct Buffered(Arc<Mutex<HashMap<String, Waiting>>>);

impl Buffered {
    fn add(&self, d: &Delivery) {
        // Its lease started after the read was sent, not when the reply was handled (which
        // may be much later in a process that stood still).
        let mut list = self.0.lock().expect("buffered lock");
        list.insert(d.receipt.clone(), (d.clone(), d.asked.into(), false));
    }

    /// Takes `d` out of the buffer, not for a worker.
    fn forget(&self, d: &Delivery) {
        self.0.lock().expect("buffered lock").remove(&d.receipt);
    }

    /// Takes `d` out of the buffer for a worker: whether its lease was found lost, or
    /// may have ended (half of it passed since it last (re)started: the keeper extends at
    /// a third, so it did not run, e.g. while the process was stopped).
    fn claim(&self, d: &Delivery, visibility: Duration) -> Claimed {
        let mut list = self.0.lock().expect("buffered lock");
        match list.remove(&d.receipt) {
            Some((_, _, true)) => Claimed::Lost,
            Some((_, since, false)) if since.elapsed() >= d.lease(visibility) / 2 => Claimed::Stale,
            _ => Claimed::Held,
        }
    }

    /// Extends the lease of each delivery that has waited a third of it since its lease
    /// last (re)started, looking every sixth of the shortest lease waiting (each
    /// delivery's own: the queue's visibility timeout when it was received, `visibility`
    /// the handle's when unknown).
    fn keep(&self, queue: &ReliableQueue, visibility: Duration) -> tokio::task::JoinHandle<()> {
        let (list, queue) = (self.0.clone(), queue.clone());
        let third = |lease: Duration| (lease / 3).max(Duration::from_millis(10));
        queue.inner.handle.runtime().clone().spawn(async move {
            loop {
                let shortest = {
                    let list = list.lock().expect("buffered lock");
                    let leases = list.values().map(|(d, _, _)| d.lease(visibility));
                    leases.min().unwrap_or(visibility)
                };
                tokio::time::sleep(third(shortest) / 2).await;
                let due: Vec<Delivery> = {
                    let list = list.lock().expect("buffered lock");
                    let waited = |(d, since, lost): &Waiting| {
                        let every = third(d.lease(visibility));
                        (!lost && since.elapsed() >= every).then(|| d.clone())
                    };
                    list.values().filter_map(waited).collect()
                };
                let extended = due.iter().map(|d| d.extend(d.lease(visibility)));
                let outcomes = futures_util::future::join_all(extended).await;
                let now = Instant::now();
                let mut list = list.lock().expect("buffered lock");
                for (d, outcome) in due.iter().zip(outcomes) {
                    let Some(entry) = list.get_mut(&d.receipt) else { continue };
                    match outcome {
                        Ok(true) => entry.1 = now,
                        Ok(false) => entry.2 = true,
                        Err(e) => {
                            tracing::debug!(queue = ?queue.name(), error = %Escaped(&e), "could not extend a prefetched delivery's lease; trying again")
                        }
                    }
                }
            }
        })
    }
}

/// What a worker is running, so that a close past its deadline can give it back.
type Current = Arc<Mutex<Option<Delivery>>>;

impl ReliableQueue {
    /// Runs `handler` on received messages, `concurrency` at a time: acks each message
    /// whose handler returns `Ok`, nacks (with the stored back-off) each that returns `Err`
    /// or panics. Receives ahead (up to `concurrency` messages wait in a buffer, many per
    /// round trip), extends the lease of a running handler by itself, batches acks. Returns
    /// when the handle or its client is closed; with [`ReliableQueue::close_gracefully`],
    /// after the running handlers finished and were settled.
    pub async fn consume<F, Fut, E>(&self, handler: F, concurrency: usize) -> Result<()>
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        // Its requests run concurrently: never over a host's calling thread's own
        // connection, even when a blocking call polls this (`connection::direct`).
        crate::connection::Indirect(self.consume_loop(handler, concurrency)).await
    }

    async fn consume_loop<F, Fut, E>(&self, handler: F, concurrency: usize) -> Result<()>
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        if concurrency == 0 || concurrency > MAX_RECEIVE {
            return Err(Error::invalid(format!(
                "concurrency must be between 1 and {MAX_RECEIVE}, got {concurrency}"
            )));
        }
        self.check_open()?;
        let visibility = self.ensure_settings().await?.visibility_timeout;
        self.inner.consumers.fetch_add(1, Ordering::SeqCst);
        let _done = ConsumerGuard(self.clone());

        let handler = Arc::new(handler);
        let (tx, rx) = mpsc::channel::<Delivery>(concurrency);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let acker = Acker::new(self.clone());
        let buffered = Buffered::default();
        let _keeper = AbortOnDrop(buffered.keep(self, visibility));
        let mut workers = JoinSet::new();
        let mut current = Vec::new();
        let dropped = CancellationToken::new();
        for _ in 0..concurrency {
            let slot: Current = Arc::default();
            current.push(slot.clone());
            workers.spawn(worker(
                self.clone(),
                handler.clone(),
                (rx.clone(), buffered.clone()),
                acker.clone(),
                visibility,
                (slot, dropped.clone()),
            ));
        }
        // Dropped before it returns (a cancelled task, a binding's Ctrl-C or given-up
        // call), this consume still settles or gives back what it holds and sends its acks
        // (`Held::after_drop`).
        let mut on_drop = GiveBackOnDrop(Some(Held {
            queue: self.clone(),
            running: current,
            rx,
            acker,
            workers,
            dropped,
        }));
        let received = self.receive_into(&tx, &buffered, concurrency).await;
        drop(tx);

        // Stopping: let the workers finish their handlers, up to the graceful deadline; a
        // close at once gives them [`DROP_GRACE`], so that an outcome already on its way (a
        // host's handler that just returned) is acked, not processed again.
        let mut held = on_drop.0.take().expect("held until now");
        let deadline = *self.inner.graceful_deadline.lock().expect("deadline lock");
        let deadline = deadline.unwrap_or_else(|| Instant::now() + DROP_GRACE);
        let finished = tokio::time::timeout_at(deadline, drain(&mut held.workers))
            .await
            .is_ok();
        if !finished {
            held.workers.abort_all();
            drain(&mut held.workers).await;
        }
        held.give_back(!finished, "at close").await;
        received
    }

    /// Fills the buffer until the handle stops. Receive errors are retried with back-off
    /// (logged); only a closed handle or client ends the loop.
    async fn receive_into(
        &self,
        tx: &mpsc::Sender<Delivery>,
        buffered: &Buffered,
        buffer: usize,
    ) -> Result<()> {
        let mut pause = Duration::from_millis(50);
        loop {
            // Wait for room in the buffer, then take as many as there is room for.
            let permit = tokio::select! {
                biased;
                _ = self.inner.stopping.cancelled() => return Ok(()),
                // The client closed: the workers take nothing more from the buffer.
                _ = self.inner.handle.closed() => return Ok(()),
                p = tx.reserve() => match p { Ok(p) => p, Err(_) => return Ok(()) },
            };
            let room = tx.capacity() + 1;
            drop(permit);
            let got = tokio::select! {
                biased;
                _ = self.inner.stopping.cancelled() => return Ok(()),
                r = self.receive_many(room.min(buffer), Some(Duration::from_secs(1))) => r,
            };
            match got {
                Ok(deliveries) => {
                    pause = Duration::from_millis(50);
                    for d in deliveries {
                        buffered.add(&d);
                        if let Err(mpsc::error::SendError(d)) = tx.send(d).await {
                            buffered.forget(&d);
                            let _ = d.release().await;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::Closed => return Ok(()),
                Err(e) => {
                    tracing::warn!(queue = ?self.name(), error = %Escaped(&e), "receive failed; retrying");
                    tokio::select! {
                        _ = self.inner.stopping.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Closes this handle gracefully: consumers stop receiving, handlers already running
    /// get up to `deadline` to finish and are acked or nacked, deliveries received but not
    /// started are given back (not counted as attempts), then the handle closes. Nothing
    /// a handler finished is processed again because of the shutdown. Handlers still
    /// running at the deadline are abandoned and their messages given back, their attempt
    /// not counted (so a handler that is still running at every shutdown never takes its
    /// message to `max_attempts`: a timeout of its own ends it). The future
    /// owns the handle from the start: dropped before it finishes (a cancelled task, a
    /// binding's Ctrl-C), even before its first poll, it closes the handle at once.
    pub fn close_gracefully(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let guard = CloseOnDrop(self.clone());
        async move {
            let queue = &guard.0;
            if queue.inner.handle.is_closed() {
                return Ok(());
            }
            let until = crate::handle::instant_after(deadline);
            *queue.inner.graceful_deadline.lock().expect("deadline lock") = Some(until);
            queue.inner.stopping.cancel();
            // Each consume call returns once it settled its handlers (or gave them up at
            // the deadline); give them a moment past it to give back what they held.
            let limit = until + Duration::from_secs(2);
            while queue.inner.consumers.load(Ordering::SeqCst) > 0 {
                let idle = queue.inner.consumers_idle.notified();
                if queue.inner.consumers.load(Ordering::SeqCst) == 0 {
                    break;
                }
                if tokio::time::timeout_at(limit, idle).await.is_err() {
                    break;
                }
            }
            Ok(()) // the guard closes the handle
        }
    }

    /// Closes this handle at once when `deadline` is `None` (as
    /// [`close`](ReliableQueue::close), before this returns), else gracefully within it (as
    /// [`close_gracefully`](ReliableQueue::close_gracefully)): the one `close(deadline?)`
    /// the bindings offer.
    pub fn close_within(
        &self,
        deadline: Option<Duration>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let closing = deadline.map(|deadline| self.close_gracefully(deadline));
        if closing.is_none() {
            self.close();
        }
        async move {
            match closing {
                Some(closing) => closing.await,
                None => Ok(()),
            }
        }
    }
}

/// What a consume call holds when it stops: its workers and their deliveries, those
/// received and not started, the acks handed over and not yet sent.
struct Held {
    queue: ReliableQueue,
    running: Vec<Current>,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Delivery>>>,
    acker: Acker,
    workers: JoinSet<()>,
    /// Cancelled when the consume call was dropped: workers take no more deliveries, and
    /// a handler that fails from then on gives its message back (see `worker`).
    dropped: CancellationToken,
}

/// How long the handlers running when a consume call is dropped may still end and be
/// settled: an outcome already on its way (a host's handler that just returned) is
/// acked, not lost with its worker.
const DROP_GRACE: Duration = Duration::from_secs(1);

impl Held {
    /// After the consume call was dropped: gives back the deliveries not started, lets the
    /// running handlers end for up to [`DROP_GRACE`] (settled as usual, but a failure gives
    /// the message back), then abandons the rest as a close past its deadline does.
    async fn after_drop(mut self) {
        self.dropped.cancel();
        let finished = tokio::time::timeout(DROP_GRACE, async {
            self.give_back_buffered().await;
            drain(&mut self.workers).await;
        })
        .await
        .is_ok();
        if !finished {
            self.workers.abort_all();
            drain(&mut self.workers).await;
        }
        self.give_back(!finished, "when its consume was cancelled")
            .await;
    }

    async fn give_back_buffered(&self) {
        let mut rx = self.rx.lock().await;
        rx.close();
        while let Ok(d) = rx.try_recv() {
            if let Err(e) = d.release().await {
                tracing::warn!(queue = ?self.queue.name(), error = %Escaped(&e), "could not give back a prefetched delivery; it returns after its lease ends");
            }
        }
    }

    /// Gives back the messages of handlers still running (when `abandoned`: their workers
    /// were stopped) and of deliveries not started, and sends the acks handed over.
    async fn give_back(self, abandoned: bool, when: &str) {
        let name = self.queue.name();
        if abandoned {
            for slot in &self.running {
                let taken = slot.lock().expect("slot lock").take();
                if let Some(d) = taken {
                    tracing::warn!(queue = ?name, id = ?d.id, "delivery not settled {when} (its handler still running, or just ended); its message is given back and may be processed again");
                    let _ = d.release().await;
                }
            }
        }
        // Deliveries received but not started go back at once.
        self.give_back_buffered().await;
        self.acker.finish().await;
    }
}

/// Settles or gives back what a consume call holds when it is dropped before it returned
/// ([`Held::after_drop`], in a task of its own).
struct GiveBackOnDrop(Option<Held>);

impl Drop for GiveBackOnDrop {
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            let runtime = held.queue.inner.handle.runtime().clone();
            runtime.spawn(held.after_drop());
        }
    }
}

/// Closes a handle when dropped: a graceful close that ended, or was given up.
struct CloseOnDrop(ReliableQueue);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

async fn drain<T: 'static>(set: &mut JoinSet<T>) {
    while set.join_next().await.is_some() {}
}

/// Counts a running consume call; wakes `close_gracefully` when the last one returns.
struct ConsumerGuard(ReliableQueue);

impl Drop for ConsumerGuard {
    fn drop(&mut self) {
        if self.0.inner.consumers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.inner.consumers_idle.notify_waiters();
        }
    }
}

async fn worker<F, Fut, E>(
    queue: ReliableQueue,
    handler: Arc<F>,
    (rx, buffered): (Arc<tokio::sync::Mutex<mpsc::Receiver<Delivery>>>, Buffered),
    acker: Acker,
    visibility: Duration,
    (current, dropped): (Current, CancellationToken),
) where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    loop {
        let delivery = {
            let mut rx = rx.lock().await;
            tokio::select! {
                biased;
                _ = queue.inner.stopping.cancelled() => None,
                _ = dropped.cancelled() => None,
                // The client closed (not only this handle): a handler started now could
                // not have its message acked, which would then be processed again.
                _ = queue.inner.handle.closed() => None,
                d = rx.recv() => d,
            }
        };
        let Some(delivery) = delivery else { return };
        let lease = delivery.lease(visibility);
        let held = match buffered.claim(&delivery, visibility) {
            Claimed::Held => true,
            // It may have ended: an extension tells (true: still pending, nobody else has
            // it). Failing to ask, it is not run: it comes back when its lease ends.
            Claimed::Stale => match delivery.extend(lease).await {
                Ok(held) => held,
                Err(e) => {
                    tracing::warn!(queue = ?queue.name(), id = ?delivery.id, error = %Escaped(&e), "could not tell whether a prefetched delivery still holds its lease; it is not run here and comes back when its lease ends");
                    continue;
                }
            },
            Claimed::Lost => false,
        };
        if !held {
            // Its lease ran out while it waited: the message is someone else's now, or
            // will be.
            tracing::warn!(queue = ?queue.name(), id = ?delivery.id, "a prefetched delivery's lease was lost before its handler started; it is not run here");
            continue;
        }
        *current.lock().expect("slot lock") = Some(delivery.clone());
        let outcome = run_leased(&queue, &delivery, handler(delivery.clone()), lease).await;
        let settled = match outcome {
            // The handler acked or nacked it itself (to choose a retry delay, say).
            _ if delivery.has_ended() => Ok(true),
            Ok(Ok(())) => {
                acker.ack(delivery.clone());
                Ok(true)
            }
            // Failed once its consume was dropped (a host cancels its handlers then): the
            // message goes back, not counted as an attempt.
            _ if dropped.is_cancelled() => {
                tracing::debug!(queue = ?queue.name(), id = ?delivery.id, "handler ended without success after its consume was cancelled; its message is given back");
                delivery.release().await
            }
            Ok(Err(e)) => {
                // The failure as the application's language prints it, a stack trace over
                // several lines: the application's own text, not a name from outside.
                tracing::warn!(queue = ?queue.name(), id = ?delivery.id, attempt = delivery.attempt, error = %e, "handler failed; nacking");
                delivery.nack(None).await
            }
            Err(_) => {
                tracing::warn!(queue = ?queue.name(), id = ?delivery.id, "handler panicked; nacking");
                delivery.nack(None).await
            }
        };
        current.lock().expect("slot lock").take();
        if let Err(e) = settled {
            tracing::warn!(queue = ?queue.name(), id = ?delivery.id, error = %Escaped(&e), "could not settle a delivery; it returns after its lease ends");
        }
    }
}

/// Runs a handler on `delivery` with its lease kept ([`lease_kept`]), a panic caught.
async fn run_leased<Fut, E>(
    queue: &ReliableQueue,
    delivery: &Delivery,
    handler: Fut,
    visibility: Duration,
) -> std::thread::Result<std::result::Result<(), E>>
where
    Fut: Future<Output = std::result::Result<(), E>>,
{
    let run = std::panic::AssertUnwindSafe(handler).catch_unwind();
    lease_kept(queue, delivery, run, visibility).await
}

/// Runs `work`; once it has run for a third of the visibility timeout, a task of its own
/// extends the lease of `delivery` every third of the timeout until `work` ends or the
/// lease is found lost. (Most work ends sooner: it costs one timer, no task.)
async fn lease_kept<T>(
    queue: &ReliableQueue,
    delivery: &Delivery,
    work: impl Future<Output = T>,
    visibility: Duration,
) -> T {
    let every = (visibility / 3).max(Duration::from_millis(10));
    let mut work = std::pin::pin!(work);
    tokio::select! {
        biased;
        outcome = &mut work => return outcome,
        _ = tokio::time::sleep(every) => {}
    }
    let _extender = AbortOnDrop(keep_leased(queue, delivery, visibility, every));
    work.await
}

impl Delivery {
    /// Runs `work` (what is done with this delivery) while keeping its lease, as `consume`
    /// keeps a running handler's: past a third of its lease (the queue's visibility timeout
    /// when it was received), the lease is extended every third of it until `work` ends or the lease is found lost
    /// (logged). For a caller that handles deliveries without `consume` (the service's
    /// webhooks) and may take longer than the visibility timeout. When the queue's
    /// settings cannot be read, `work` runs without.
    pub async fn while_leased<T>(&self, work: impl Future<Output = T>) -> T {
        match self.queue.ensure_settings().await {
            Ok(s) => {
                let lease = self.lease(s.visibility_timeout);
                lease_kept(&self.queue, self, work, lease).await
            }
            Err(_) => work.await,
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Extends the lease of a running handler's delivery now and then every `every`, until
/// aborted or the lease is found lost.
fn keep_leased(
    queue: &ReliableQueue,
    delivery: &Delivery,
    visibility: Duration,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    let (queue, delivery) = (queue.clone(), delivery.clone());
    queue.inner.handle.runtime().clone().spawn(async move {
        loop {
            match delivery.extend(visibility).await {
                Ok(true) => {}
                Ok(false) if delivery.has_ended() => return, // settled by its handler
                Ok(false) => {
                    tracing::warn!(queue = ?queue.name(), id = ?delivery.id, "lease lost while its handler runs: the message may be processed again");
                    return;
                }
                Err(e) => {
                    tracing::debug!(queue = ?queue.name(), error = %Escaped(&e), "could not extend a lease; trying again");
                }
            }
            tokio::time::sleep(every).await;
        }
    })
}
