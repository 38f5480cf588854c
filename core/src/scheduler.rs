//! The transfer task: moves due entries of a delayed queue to its destination.
//!
//! One task per queue and process, shared by every handle on that queue. It wakes for
//! three reasons, all visible in one `select!`: a due time published on the queue's
//! channel (through the client's shared subscriber, `pubsub.rs`), a timer set to the
//! earliest due time, and a periodic reconcile that bounds the damage of a lost pub/sub
//! message or subscription. Each pass runs over the client's command connection, whose
//! response timeout replaces a silent connection, so a pass never hangs. Errors are logged and retried with
//! back-off; the task ends only when its last handle is closed or dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::error::Result;
use crate::keys::{DelayedKeys, ReliableKeys};
use crate::logs::Escaped;
use crate::pubsub::{Subscriber, Subscription};
use crate::scripts;

/// Options of a queue handle's transfer task.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Run the transfer task at all (default `true`). A handle that opts out relies on
    /// another process (or `delayq transfer`) to move due entries.
    pub enabled: bool,
    /// Upper bound on the time between two transfer passes (default 1 s). Handles of one
    /// client on one queue share one transfer task, which reconciles at the shortest
    /// interval any of them asked for.
    pub reconcile_interval: Duration,
    /// Entries moved per script call (default 1000).
    pub batch_size: usize,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            enabled: true,
            reconcile_interval: Duration::from_secs(1),
            batch_size: 1000,
        }
    }
}

/// What one transfer pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferOutcome {
    /// Entries moved (or set aside as corrupt) in this pass.
    pub moved: u64,
    /// The earliest due time still waiting (server ms), if any.
    pub next_due: Option<i64>,
    /// The server clock at the end of the pass (ms).
    pub now: i64,
}

/// The time one transfer script call may spend moving entries, in microseconds. A call
/// stops about there, leaving what it did not reach due for the next call, so that no call
/// blocks Redis for long whatever the size of the queue and the order in which its entries
/// come due; on a queue list far over a million entries, a call may take half of it plus
/// one scan of half the list (see `scripts/transfer.lua`).
pub(crate) const TRANSFER_BUDGET_US: u64 = 20_000;

/// Where the transfer script's sweep of the queue list stands between two calls of one
/// pass: opaque here, handed back to the script as it returned it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SweepState([i64; 4]);

/// One script call: moves at most `batch` due entries, within [`TRANSFER_BUDGET_US`].
pub(crate) async fn transfer_batch(
    conn: &mut (impl ConnectionLike + Send),
    keys: &DelayedKeys,
    batch: usize,
    state: SweepState,
) -> Result<(TransferOutcome, SweepState)> {
    let (outcome, state, _) = transfer_call(conn, keys, batch, state, false).await?;
    Ok((outcome, state))
}

/// One transfer call from a fresh sweep, then the head of the destination popped in the
/// same script call (a poll: nothing moved meanwhile by another process's transfer is
/// missed); returns the head, if any.
pub(crate) async fn transfer_and_pop(
    conn: &mut (impl ConnectionLike + Send),
    keys: &DelayedKeys,
    batch: usize,
) -> Result<Option<Vec<u8>>> {
    let (_, _, popped) = transfer_call(conn, keys, batch, SweepState::default(), true).await?;
    Ok(popped)
}

async fn transfer_call(
    conn: &mut (impl ConnectionLike + Send),
    keys: &DelayedKeys,
    batch: usize,
    state: SweepState,
    pop: bool,
) -> Result<(TransferOutcome, SweepState, Option<Vec<u8>>)> {
    type Reply = (u64, i64, i64, i64, i64, i64, i64, u64, Option<Vec<u8>>);
    let (moved, next_due, now, a, b, c, d, set_aside, popped): Reply = scripts::TRANSFER
        .key(&keys.destination)
        .key(&keys.timeout_set)
        .key(&keys.queue_list)
        .key(&keys.corrupt_list)
        .arg(batch)
        .arg(TRANSFER_BUDGET_US)
        .arg(&state.0[..])
        .arg(if pop { "1" } else { "0" })
        .invoke_async(conn)
        .await?;
    if set_aside > 0 {
        // SPEC 5: never silent (the script's redis.log reaches only the server's log).
        tracing::warn!(queue = ?keys.destination, count = set_aside, to = ?keys.corrupt_list, "moved undecodable entries aside");
    }
    let outcome = TransferOutcome {
        moved,
        next_due: (next_due >= 0).then_some(next_due),
        now,
    };
    Ok((outcome, SweepState([a, b, c, d]), popped))
}

/// Moves every due entry, call after call, until none is due.
///
/// It ends: each call either moves entries or advances the sweep of the queue list, and
/// after a list's worth of sweeping without finding anything the script moves due entries
/// one by one (SPEC section 5: nothing is left stuck). Should a call ever return without
/// having changed anything, the pass stops there rather than spin.
pub(crate) async fn transfer_due(
    conn: &mut (impl ConnectionLike + Send),
    keys: &DelayedKeys,
    batch: usize,
) -> Result<TransferOutcome> {
    let mut total = 0;
    let mut state = SweepState::default();
    loop {
        let (mut outcome, next) = transfer_batch(conn, keys, batch, state).await?;
        total += outcome.moved;
        let due_left = outcome.next_due.is_some_and(|due| due <= outcome.now);
        let stuck = outcome.moved == 0 && next == state;
        if !due_left || stuck {
            outcome.moved = total;
            return Ok(outcome);
        }
        state = next;
    }
}

/// What a transfer task moves: a Redisson-compatible delayed queue or a reliable queue.
#[derive(Clone)]
pub(crate) enum Job {
    Delayed(DelayedKeys),
    /// The visibility timeout and max attempts come from the queue's stored settings.
    Reliable {
        keys: ReliableKeys,
        /// When idle consumers were last removed from the group.
        tidied: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
        /// A shard of a sharded queue: the queue's channel on which a pass that moved
        /// messages rings, so that consumers waiting on every shard look again.
        bell: Option<String>,
    },
}

impl Job {
    /// The channel that announces new work; also the job's identity within a client.
    pub(crate) fn channel(&self) -> &str {
        match self {
            Job::Delayed(keys) => &keys.channel,
            Job::Reliable { keys, .. } => &keys.channel,
        }
    }

    fn name(&self) -> &str {
        match self {
            Job::Delayed(keys) => &keys.destination,
            Job::Reliable { keys, .. } => &keys.name,
        }
    }

    /// Counts one pass in [`crate::metrics`].
    fn record(&self, took: Duration, ok: bool) {
        use crate::metrics::{self, QueueKind};
        let kind = match self {
            Job::Delayed(_) => QueueKind::Delayed,
            Job::Reliable { .. } => QueueKind::Reliable,
        };
        metrics::record_transfer(kind, self.name(), took);
        if !ok {
            metrics::record(kind, self.name(), metrics::Event::TransferError);
        }
    }

    /// Does all the work due now.
    pub(crate) async fn pass(
        &self,
        conn: &mut (impl ConnectionLike + Send),
        batch: usize,
    ) -> Result<TransferOutcome> {
        match self {
            Job::Delayed(keys) => transfer_due(conn, keys, batch).await,
            Job::Reliable { keys, tidied, bell } => {
                let outcome = crate::reliable_queue::transfer_due(conn, keys, batch).await?;
                if let (Some(bell), true) = (bell, outcome.moved > 0) {
                    redis::cmd("PUBLISH")
                        .arg(bell)
                        .arg("")
                        .query_async::<()>(conn)
                        .await?;
                }
                let due = {
                    let mut last = tidied.lock().expect("tidy lock");
                    let due =
                        last.is_none_or(|t| t.elapsed() >= crate::reliable_queue::TIDY_INTERVAL);
                    if due {
                        *last = Some(tokio::time::Instant::now());
                    }
                    due
                };
                if due {
                    crate::reliable_queue::remove_idle_consumers(conn, keys).await?;
                }
                Ok(outcome)
            }
        }
    }
}

/// Stops the transfer task when dropped (when the last handle on the queue goes away).
pub(crate) struct SchedulerGuard {
    token: CancellationToken,
    /// The reconcile interval in ms: the shortest any handle sharing the task asked for.
    reconcile_ms: Arc<AtomicU64>,
    /// Wakes the task (as the channel does), so that a shorter interval applies at once.
    wake: Arc<tokio::sync::Notify>,
}

impl SchedulerGuard {
    /// Another handle shares the task: it reconciles at least as often as that one asks.
    pub(crate) fn share(&self, opts: &SchedulerOptions) {
        let ms = opts.reconcile_interval.as_millis().min(u64::MAX as u128) as u64;
        if self.reconcile_ms.fetch_min(ms, Ordering::Relaxed) > ms {
            self.wake.notify_one();
        }
    }
}

impl Drop for SchedulerGuard {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Exponential back-off between 50 ms and 2 s.
struct Backoff(Duration);

impl Backoff {
    const MIN: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(2);
    fn new() -> Self {
        Backoff(Self::MIN)
    }
    fn reset(&mut self) {
        self.0 = Self::MIN;
    }
    fn next(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        d
    }
}

pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    conn: Connection,
    subscriber: &Subscriber,
    job: Job,
    opts: SchedulerOptions,
    parent: &CancellationToken,
) -> Arc<SchedulerGuard> {
    let token = parent.child_token();
    let subscription = subscriber.subscribe(job.channel());
    let reconcile_ms = Arc::new(AtomicU64::new(u64::MAX));
    let wake = subscription.notify().clone();
    let guard = SchedulerGuard {
        token,
        reconcile_ms,
        wake,
    };
    guard.share(&opts);
    let (token, reconcile) = (guard.token.clone(), guard.reconcile_ms.clone());
    runtime.spawn(run(conn, job, opts, reconcile, subscription, token));
    Arc::new(guard)
}

async fn run(
    conn: Connection,
    job: Job,
    opts: SchedulerOptions,
    reconcile: Arc<AtomicU64>,
    subscription: Subscription,
    token: CancellationToken,
) {
    let wake = subscription.notify().clone();
    let mut commands = conn.commands();
    let mut backoff = Backoff::new();
    tracing::debug!(queue = ?job.name(), "transfer task started");
    loop {
        // A panic in a pass (a bug, or a reply we did not expect) must not end the task.
        // Closing stops a pass in flight: its script either ran whole or not at all.
        let started = std::time::Instant::now();
        let pass = tokio::select! {
            biased;
            _ = token.cancelled() => break,
            r = crate::error::caught(job.pass(&mut commands, opts.batch_size)) => r,
        };
        job.record(started.elapsed(), pass.is_ok());
        // After a failure the back-off holds: a wake-up (one stored while the pass ran,
        // a resubscription) would retry at once.
        let backing_off = pass.is_err();
        let reconcile_interval = Duration::from_millis(reconcile.load(Ordering::Relaxed));
        let pause = match pass {
            Ok(outcome) => {
                backoff.reset();
                if outcome.moved > 0 {
                    tracing::debug!(queue = ?job.name(), moved = outcome.moved, "moved due entries");
                }
                match outcome.next_due {
                    // Work due that a pass left undone without doing any: no spinning.
                    Some(due) if due <= outcome.now && outcome.moved == 0 => {
                        let pause = backoff.next();
                        tracing::debug!(queue = ?job.name(), retry_in = ?pause, "due work left undone");
                        pause
                    }
                    Some(due) => Duration::from_millis((due - outcome.now).max(0) as u64)
                        .min(reconcile_interval),
                    None => reconcile_interval,
                }
            }
            // A pass cut short by the handle closing is no failure worth a warning.
            Err(_) if token.is_cancelled() => break,
            Err(e) => {
                let pause = backoff.next();
                tracing::warn!(queue = ?job.name(), error = %Escaped(&e), retry_in = ?pause, "transfer failed");
                pause
            }
        };
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = wake.notified(), if !backing_off => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
    drop(subscription);
    tracing::debug!(queue = ?job.name(), "transfer task stopped");
}
