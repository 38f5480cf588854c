//! Requests written and read by the thread that waits for them.
//!
//! A host's blocking call (`host::blocking::poll_for`) polls its core future on the
//! calling thread. Sent through the multiplexed connection, each request of it costs four
//! thread switches: the caller wakes the connection's task on a runtime thread, which
//! writes, is woken by the reply and wakes the caller. Inside such a call ([`on_this_thread`])
//! a request to one server goes instead over the calling thread's own connection, which
//! that thread writes and reads itself, as a synchronous client does: two switches, the
//! server's. (Blocking offers one at a time: 14k-16k a second instead of 9k-10k in a Rust
//! probe here; from Python 1.7-2.5x redis-py instead of 1.4-1.7x; docs/python.md.)
//!
//! A request goes direct only when no other request of its client is in flight: many
//! threads at once are better served by the multiplexed connection, which pipelines them.
//! Each thread keeps one connection per client ([`Owner`]), opened on first use, replaced
//! after an I/O error or a late reply like the multiplexed one, and closed by the next
//! direct request of that thread once its client closed (or by the thread's exit). A
//! process forked from the one that opened it opens its own (the socket is shared). A long
//! loop that a blocking call polls (`consume`) is wrapped in [`Indirect`]: its requests run
//! concurrently, so they go through the multiplexed connection.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

thread_local! {
    /// Whether this thread is inside a host's blocking call (and not in an [`Indirect`]).
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// This thread's connections, one per live client that used one here.
    static OWN: RefCell<Vec<Own>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread holds off asynchronous signals while it waits for a reply
    /// (see [`holding_signals`]).
    static HOLD_SIGNALS: Cell<bool> = const { Cell::new(false) };
    /// The end of the [`Bounded`] call this thread is polling, if any.
    static BOUND: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A thread's connection of one client, and the read timeout it has now.
struct Own {
    owner: Arc<AtomicBool>,
    /// `random::forks()` when it was opened: a child forked since shares its socket with
    /// the parent, and must not read the parent's replies.
    forks: u64,
    /// The connection, its read timeout, and when it was last put back after a request.
    conn: Option<(redis::Connection, Duration, Instant)>,
}

/// Marks one client's connections on every thread: closed, each is dropped at its
/// thread's next direct request. Counts the client's requests in flight.
pub(super) struct Owner {
    closed: Arc<AtomicBool>,
    in_flight: AtomicUsize,
    /// `random::forks()` when it was made: in a process forked since, `in_flight` may
    /// count requests of the parent's threads, which never end here, so a forked child's
    /// requests all go direct (a reset of the count would race with its first requests).
    forks: u64,
}

/// A request counted in flight until dropped.
pub(super) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Owner {
    pub(super) fn new() -> Owner {
        Owner {
            closed: Arc::new(AtomicBool::new(false)),
            in_flight: AtomicUsize::new(0),
            forks: crate::random::forks(),
        }
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Counts a request in; whether it goes over this thread's own connection: inside a
    /// host's blocking call, when no other request of the client is in flight. Requests of
    /// many threads at once go together over the multiplexed connection instead, which
    /// writes them in one go and Redis answers in one pass (with 16 JVM threads offering,
    /// a connection each gave fewer offers a second in most rounds).
    pub(super) fn start(&self) -> (bool, InFlight<'_>) {
        let others = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let forked = self.forks != crate::random::forks();
        (
            active() && (others == 0 || forked),
            InFlight(&self.in_flight),
        )
    }

    /// Takes this thread's connection out (None: there is none yet), dropping the
    /// connections of closed clients on the way.
    pub(super) fn take(&self) -> Option<(redis::Connection, Duration, Instant)> {
        OWN.with_borrow_mut(|own| {
            let forks = crate::random::forks();
            own.retain(|o| !o.owner.load(Ordering::Acquire) && o.forks == forks);
            let mine = own
                .iter_mut()
                .find(|o| Arc::ptr_eq(&o.owner, &self.closed))?;
            mine.conn.take()
        })
    }

    /// Puts this thread's connection back after a request that left it usable.
    pub(super) fn put(&self, conn: redis::Connection, read_timeout: Duration) {
        if self.is_closed() {
            return;
        }
        OWN.with_borrow_mut(|own| {
            let conn = Some((conn, read_timeout, Instant::now()));
            match own.iter_mut().find(|o| Arc::ptr_eq(&o.owner, &self.closed)) {
                Some(mine) => mine.conn = conn,
                None => own.push(Own {
                    owner: self.closed.clone(),
                    forks: crate::random::forks(),
                    conn,
                }),
            }
        })
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether a request made now may go over this thread's own connection.
fn active() -> bool {
    ACTIVE.get()
}

/// Runs `f` (a host's blocking call polling a core future) with the requests of that
/// future made directly by this thread.
pub fn on_this_thread<R>(f: impl FnOnce() -> R) -> R {
    let _restore = Set(ACTIVE.replace(true));
    f()
}

/// Runs `f` with asynchronous signals held off this thread while it writes a request of
/// its own and reads the reply: for a host whose signal handlers interrupt system calls
/// (Python installs them without `SA_RESTART`). An interrupted read failed the request
/// (EINTR), and redis-rs cannot take up a read it left: the reply, when it comes, is
/// skipped. A signal sent meanwhile is taken by another thread (the runtime's), or by this
/// one once the reply is read; the host then handles it as after any call.
pub fn holding_signals<R>(f: impl FnOnce() -> R) -> R {
    let before = HOLD_SIGNALS.replace(true);
    let _restore = Restore(|| HOLD_SIGNALS.set(before));
    f()
}

/// Restores [`ACTIVE`] when dropped (also when `f` panics).
struct Set(bool);

impl Drop for Set {
    fn drop(&mut self) {
        ACTIVE.set(self.0);
    }
}

/// Runs its closure when dropped.
struct Restore<F: FnMut()>(F);

impl<F: FnMut()> Drop for Restore<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// Asynchronous signals blocked on this thread until dropped (the synchronous ones, which
/// a fault raises on the thread itself, stay deliverable).
pub(super) struct SignalsHeld(#[cfg(unix)] Option<libc::sigset_t>);

impl SignalsHeld {
    /// Holds them off, on this thread.
    pub(super) fn now() -> SignalsHeld {
        #[cfg(unix)]
        // SAFETY: plain libc calls on sets owned here.
        unsafe {
            let (mut set, mut before) = (std::mem::zeroed(), std::mem::zeroed());
            libc::sigfillset(&mut set);
            for sync in [
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGFPE,
                libc::SIGILL,
                libc::SIGTRAP,
                libc::SIGSYS,
            ] {
                libc::sigdelset(&mut set, sync);
            }
            let held = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut before) == 0;
            SignalsHeld(held.then_some(before))
        }
        #[cfg(not(unix))]
        SignalsHeld()
    }

    /// Holds them off if this thread is in [`holding_signals`].
    fn if_asked() -> Option<SignalsHeld> {
        HOLD_SIGNALS.get().then(SignalsHeld::now)
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(before) = &self.0 {
            // SAFETY: restores the mask saved by `now`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, before, std::ptr::null_mut()) };
        }
    }
}

/// A future whose direct requests end by a time: their connect, writes and reads are cut
/// to what is left of it. A timer around a call cannot cut a direct request short, since
/// the thread that would notice it is the one blocked in the read.
pub struct Bounded<F>(pub Instant, pub F);

impl<F: Future> Future for Bounded<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let by = self.0;
        let outer = BOUND.get();
        BOUND.set(Some(outer.map_or(by, |o| o.min(by))));
        let _restore = Restore(move || BOUND.set(outer));
        // SAFETY: the inner future is never moved out of its pin.
        unsafe { self.map_unchecked_mut(|s| &mut s.1) }.poll(cx)
    }
}

/// `limit`, cut to what is left of the [`Bounded`] call being polled; a timeout error
/// when nothing is left.
pub(super) fn within_bound(limit: Duration) -> redis::RedisResult<Duration> {
    let Some(by) = BOUND.get() else {
        return Ok(limit);
    };
    match by.checked_duration_since(Instant::now()) {
        Some(left) if left >= Duration::from_millis(1) => Ok(limit.min(left)),
        _ => Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
    }
}

/// A future whose requests go through the multiplexed connection even when a host's
/// blocking call polls it: a loop of concurrent requests (`consume`).
pub struct Indirect<F>(pub F);

impl<F: Future> Future for Indirect<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = Set(ACTIVE.replace(false));
        // SAFETY: the inner future is never moved out of its pin.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll(cx)
    }
}

/// Asks `conn` a `PING` (an idle connection, before a request goes over it).
pub(super) fn ping(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    let _held = SignalsHeld::if_asked();
    redis::cmd("PING").query(conn)
}

/// A synchronous connection used as an async one: each request is written and its reply
/// read at once, inside the poll, by the polling thread.
pub(super) struct Blocking(pub redis::Connection);

impl ConnectionLike for Blocking {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let _held = SignalsHeld::if_asked();
        let reply = redis::ConnectionLike::req_command(&mut self.0, cmd);
        Box::pin(std::future::ready(reply))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let packed = pipeline.get_packed_pipeline();
        let _held = SignalsHeld::if_asked();
        let replies =
            redis::ConnectionLike::req_packed_commands(&mut self.0, &packed, offset, count);
        Box::pin(std::future::ready(replies))
    }

    fn get_db(&self) -> i64 {
        redis::ConnectionLike::get_db(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_blocking_call_outside_an_indirect_future_requests_directly() {
        assert!(!active());
        let inside = on_this_thread(|| {
            let mut indirect = std::pin::pin!(Indirect(async { active() }));
            let waker = std::task::Waker::noop();
            let polled = indirect.as_mut().poll(&mut Context::from_waker(waker));
            (active(), polled)
        });
        assert_eq!(inside, (true, Poll::Ready(false)));
        assert!(!active(), "restored after the call");
    }

    #[test]
    fn a_request_goes_direct_only_when_none_of_its_client_is_in_flight() {
        let owner = Owner::new();
        assert!(!owner.start().0, "outside a blocking call");
        on_this_thread(|| {
            let (first, in_flight) = owner.start();
            assert!(first);
            assert!(!owner.start().0, "another request is in flight");
            drop(in_flight);
            assert!(owner.start().0);
        });
    }
}
