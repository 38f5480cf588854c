//! What every queue handle shares: its client, its closed state, its share of the
//! transfer task, and the cancel-safe way to run a blocking command.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::connection::{Connection, Dedicated};
use crate::error::{Error, ErrorKind, Result};
use crate::logs::Escaped;
use crate::scheduler::SchedulerGuard;

pub(crate) struct Handle {
    pub(crate) client: Client,
    token: CancellationToken,
    /// The handle's shares of transfer tasks (a sharded reliable queue has one per shard).
    scheduler: Mutex<Vec<Arc<SchedulerGuard>>>,
}

impl Handle {
    pub(crate) fn new(client: Client, scheduler: Option<Arc<SchedulerGuard>>) -> Self {
        let token = client.inner.token.child_token();
        Handle {
            client,
            token,
            scheduler: Mutex::new(scheduler.into_iter().collect()),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.token.is_cancelled() {
            self.client.check_open()?;
            return Err(Error::Closed("the queue handle is closed"));
        }
        Ok(())
    }

    /// Whether this handle (or its client) was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves when this handle (or its client) is closed.
    pub(crate) async fn closed(&self) {
        self.token.cancelled().await
    }

    /// The error of a call on this handle once it is closed.
    pub(crate) fn closed_error(&self) -> Error {
        self.check_open()
            .err()
            .unwrap_or(Error::Closed("the queue handle is closed"))
    }

    /// The runtime that the client's background tasks run on.
    pub(crate) fn runtime(&self) -> tokio::runtime::Handle {
        self.client.runtime()
    }

    pub(crate) fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.client.inner.conn.commands()
    }

    /// Stops this handle's share of the transfer task; later calls fail with `Closed`.
    pub(crate) fn close(&self) {
        self.token.cancel();
        self.scheduler.lock().expect("scheduler lock").clear();
    }

    /// Holds one more transfer task for this handle (until it is closed or dropped).
    pub(crate) fn add_scheduler(&self, guard: Arc<SchedulerGuard>) {
        if self.is_closed() {
            return;
        }
        self.scheduler.lock().expect("scheduler lock").push(guard);
    }

    /// Runs a blocking command on a dedicated connection, in a task of its own, so that
    /// a caller who gives up (drops the future, closes the handle) cannot lose what the
    /// server hands over meanwhile: `give_back` returns it to the queue. That holds at any
    /// instant: while the command runs (the task finds nobody to send the value to), and
    /// after it sent the value but before the caller's future was polled again (the
    /// receiving end, dropped, finds the value in the channel).
    ///
    /// `op(conn, wait)` runs one blocking command that waits at most `wait` on the server;
    /// a zero `wait` (a timeout of zero) asks for a read that does not block. A long wait (or `None`: forever) is split into waits of at most [`WAIT_CHUNK`],
    /// each with a client-side deadline [`REPLY_MARGIN`] past its server-side one: a
    /// connection whose reply is later than that is taken for dead (a silent partition)
    /// and the wait goes on over a fresh one. Connection errors are retried the same way
    /// while time is left. The caller has its answer within `timeout` plus
    /// [`CALL_MARGIN`], whatever the network does (past that, a `connection` error while
    /// the task goes on reading, to give back what a late reply carries), and a wait with
    /// no timeout notices a dead connection within `WAIT_CHUNK + REPLY_MARGIN`.
    pub(crate) async fn blocking<T, Op, OpFut, Back, BackFut>(
        &self,
        what: &'static str,
        timeout: Option<Duration>,
        op: Op,
        give_back: Back,
    ) -> Result<Option<T>>
    where
        T: Send + 'static,
        Op: Fn(Dedicated, Duration) -> OpFut + Send + 'static,
        OpFut: Future<Output = (Dedicated, Result<Option<T>>)> + Send + 'static,
        Back: Fn(T) -> BackFut + Send + Sync + 'static,
        BackFut: Future<Output = ()> + Send + 'static,
    {
        self.check_open()?;
        let deadline = timeout.map(instant_after);
        let answer_by = deadline.map(|d| d + CALL_MARGIN);
        let unanswered = || {
            Error::Connection(format!(
                "no reply to the blocking {what} within {CALL_MARGIN:?} of its end"
            ))
        };
        let conn = self.client.inner.conn.clone();
        // The first connection is had here, so that a dead server fails the call at once.
        let first =
            conn.dedicated(timeout.map_or(Duration::MAX, |t| t.saturating_add(REPLY_MARGIN)));
        let first = match answer_by {
            Some(by) => tokio::time::timeout_at(by, first)
                .await
                .map_err(|_| unanswered())??,
            None => first.await?,
        };
        let (tx, rx) = oneshot::channel();
        let give_back = Arc::new(give_back);
        let task_give_back = give_back.clone();
        let token = self.token.clone();
        self.runtime().spawn(async move {
            let mut tx = tx;
            let reply = wait_in_chunks(
                what,
                &conn,
                first,
                deadline,
                op,
                &mut tx,
                &token,
                &task_give_back,
            )
            .await;
            if let Err(Ok(Some(value))) = tx.send(reply) {
                // Nobody waits any more: hand the value back.
                task_give_back(value).await;
            }
        });
        let mut receiving = Receiving {
            rx,
            give_back,
            runtime: self.runtime(),
        };
        let closed = || {
            self.client.check_open()?;
            Err(Error::Closed("the queue handle was closed while waiting"))
        };
        tokio::select! {
            reply = &mut receiving.rx => match reply {
                Ok(Ok(Some(value))) => Ok(Some(value)),
                // The task stops with nothing (or with the error of a connection the close
                // shut) when the handle or client closes: that is a close, not a timeout.
                _ if self.token.is_cancelled() => closed(),
                Ok(reply) => reply,
                Err(_) => Err(Error::Connection(format!("the blocking {what} was interrupted"))),
            },
            _ = self.token.cancelled() => closed(),
            _ = until(answer_by) => Err(unanswered()),
        }
    }
}

/// How late past its timeout a blocking call answers at the latest (SPEC: at most 3 s).
/// Less than [`REPLY_MARGIN`], so that a call whose connection went silent answers before
/// its task gives the connection up; not much less, since a round trip (hundreds of ms of
/// added latency each way) or a machine stalled that long turns a healthy wait's answer
/// into this error. 1.5 s failed every empty `take(2)` at 800 ms each way.
pub(crate) const CALL_MARGIN: Duration = Duration::from_millis(2000);

/// Sleeps until `at`, or forever.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The farthest deadline kept: a longer timeout (a caller's `Duration::MAX`, a Python
/// `take(2**62)`) waits as if it had none, instead of overflowing the clock.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The instant `d` from now, at most [`FOREVER`] ahead.
pub(crate) fn instant_after(d: Duration) -> Instant {
    Instant::now() + d.min(FOREVER)
}

/// The longest server-side wait of one blocking command.
pub(crate) const WAIT_CHUNK: Duration = Duration::from_secs(4);
/// How late past its server-side wait a blocking reply may be before its connection is
/// taken for dead.
pub(crate) const REPLY_MARGIN: Duration = Duration::from_millis(2500);

/// How long after a blocking command was sent its reply is awaited in all: past its
/// server-side wait plus [`REPLY_MARGIN`] the connection is taken for dead and replaced,
/// and the reply is still read in the background until this much time has passed, so that
/// a value the server handed over on a connection that was only slow (a big value over a
/// slow link) is given back. The connection is closed then: SPEC 10 wants a dead one gone
/// within 10 s, and nothing tells a silent connection from a slow one. 8.5 s: a value that
/// was ready at once arrives whole if it is up to about 400 KiB over a 50 KB/s link.
const LATE_REPLY_BUDGET: Duration = Duration::from_millis(8500);

/// The response limit of the dedicated connections of a cluster client: longer than any
/// blocking wait's reply is read ([`LATE_REPLY_BUDGET`]), so that it only ends a request
/// to a node that never answers.
pub(crate) const BLOCKING_RESPONSE_LIMIT: Duration = Duration::from_secs(10);

/// The loop of [`Handle::blocking`]'s task: blocking commands of at most [`WAIT_CHUNK`]
/// until one has a value, the deadline passes, the caller is gone or the handle closes.
#[allow(clippy::too_many_arguments)]
async fn wait_in_chunks<T, Op, OpFut, Back, BackFut>(
    what: &'static str,
    conn: &Connection,
    first: Dedicated,
    deadline: Option<Instant>,
    op: Op,
    tx: &mut oneshot::Sender<Result<Option<T>>>,
    token: &CancellationToken,
    give_back: &Arc<Back>,
) -> Result<Option<T>>
where
    T: Send + 'static,
    Op: Fn(Dedicated, Duration) -> OpFut,
    OpFut: Future<Output = (Dedicated, Result<Option<T>>)> + Send + 'static,
    Back: Fn(T) -> BackFut + Send + Sync + 'static,
    BackFut: Future<Output = ()> + Send + 'static,
{
    let mut current = Some(first);
    let mut last_error: Option<Error> = None;
    // A wait of this call whose reply never came: the server may have handed a value over
    // on it (a slow link, not a dead one). Later waits that find nothing do not make the
    // call's outcome known (SPEC 10: a call whose outcome is unknown says so).
    let mut unanswered: Option<Error> = None;
    let mut pause = Duration::from_millis(50);
    let mut attempted = false;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if attempted && left == Some(Duration::ZERO) {
            return match last_error.or(unanswered) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        // Nobody to hand a value to: stop before starting another wait.
        if tx.is_closed() || token.is_cancelled() {
            return Ok(None);
        }
        attempted = true;
        // At least 1 ms: a zero wait means "forever" to BLPOP and XREADGROUP (an op given
        // a zero wait below reads without blocking).
        let wait = left
            .map_or(WAIT_CHUNK, |l| l.min(WAIT_CHUNK))
            .max(Duration::from_millis(1));
        let dedicated = match current.take() {
            Some(c) => c,
            None => match conn.dedicated(wait + REPLY_MARGIN).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(what, error = %Escaped(&e), "no connection for a blocking wait; retrying");
                    last_error = Some(e);
                    sleep_within(&mut pause, deadline).await;
                    continue;
                }
            },
        };
        // A call that waits nothing (timeout 0) gets a zero wait: each op reads without
        // blocking then (`BLOCK 1` would wait for Redis's timer, 100 ms at its default hz).
        let op_wait = if left == Some(Duration::ZERO) {
            Duration::ZERO
        } else {
            wait
        };
        let mut pending = Box::pin(op(dedicated, op_wait));
        match tokio::time::timeout(wait + REPLY_MARGIN, &mut pending).await {
            Ok((dedicated, Ok(Some(value)))) => {
                conn.release(dedicated);
                return Ok(Some(value));
            }
            Ok((dedicated, Ok(None))) => {
                last_error = None;
                pause = Duration::from_millis(50);
                current = Some(dedicated);
            }
            // The server answered, and what it handed over could not be read: said at once,
            // not waited past (a take's value is lost with it; a receive's message comes
            // back after its visibility timeout).
            Ok((_, Err(e))) if e.reply_was_cut() => {
                tracing::warn!(what, error = %Escaped(&e), "a blocking reply was cut short: what it carried is lost");
                return Err(e.with_note(&format!(
                    "the blocking {what} may have taken a value that was lost with the reply"
                )));
            }
            Ok((_, Err(e))) if e.kind() == ErrorKind::Connection => {
                tracing::debug!(what, error = %Escaped(&e), "a blocking wait failed; waiting again on a new connection");
                last_error = Some(e);
                sleep_within(&mut pause, deadline).await;
            }
            Ok((dedicated, Err(e))) => {
                conn.release(dedicated);
                return Err(e);
            }
            Err(_) => {
                tracing::warn!(
                    what,
                    "no reply to a blocking wait within {:?} of its end; connection replaced",
                    REPLY_MARGIN
                );
                // The reply may only be late (a slow network, not a dead one), and may
                // carry what the server already took: keep reading it for a while in the
                // background and give back whatever arrives.
                let late = give_back.clone();
                tokio::spawn(async move {
                    let window = LATE_REPLY_BUDGET.saturating_sub(wait + REPLY_MARGIN);
                    match tokio::time::timeout(window, pending).await {
                        Ok((_, Ok(Some(value)))) => {
                            tracing::warn!(
                                what,
                                "a late blocking reply carried a value; it is given back"
                            );
                            late(value).await;
                        }
                        Ok((_, Ok(None))) => {}
                        Ok((_, Err(e))) if e.reply_was_cut() => {
                            tracing::warn!(what, error = %Escaped(&e), "a late blocking reply was cut short: what it carried is lost");
                        }
                        Ok((_, Err(_))) => {}
                        Err(_) => tracing::warn!(
                            what,
                            "no blocking reply within {LATE_REPLY_BUDGET:?} of its request; if the link was only slow, a value it carried is lost"
                        ),
                    }
                });
                let e = Error::Connection(format!(
                    "no reply to the blocking {what} within {REPLY_MARGIN:?} of its end; the connection was replaced (a value the server handed over on it, if any, is given back if the reply arrives within {LATE_REPLY_BUDGET:?} of the request)"
                ));
                unanswered = Some(e.clone());
                last_error = Some(e);
            }
        }
    }
}

/// Sleeps for the back-off (doubling it, up to 1 s), but not past the deadline.
async fn sleep_within(pause: &mut Duration, deadline: Option<Instant>) {
    let mut d = *pause;
    if let Some(deadline) = deadline {
        d = d.min(deadline.saturating_duration_since(Instant::now()));
    }
    tokio::time::sleep(d).await;
    *pause = (*pause * 2).min(Duration::from_secs(1));
}

/// The caller's end of a blocking call. Dropped with a value in it (sent after the
/// caller's last poll), it hands the value back.
struct Receiving<T, Back, BackFut>
where
    T: Send + 'static,
    Back: Fn(T) -> BackFut + Send + Sync + 'static,
    BackFut: Future<Output = ()> + Send + 'static,
{
    rx: oneshot::Receiver<Result<Option<T>>>,
    give_back: Arc<Back>,
    runtime: tokio::runtime::Handle,
}

impl<T, Back, BackFut> Drop for Receiving<T, Back, BackFut>
where
    T: Send + 'static,
    Back: Fn(T) -> BackFut + Send + Sync + 'static,
    BackFut: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        // No send succeeds after this: the task then gives the value back itself.
        self.rx.close();
        if let Ok(Ok(Some(value))) = self.rx.try_recv() {
            self.runtime.spawn((self.give_back)(value));
        }
    }
}
