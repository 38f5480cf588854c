//! Exiting the host process while core's threads still run.
//!
//! A host may forbid its threads to run once its exit has begun: CPython terminates a
//! thread that takes the GIL while it finalizes (bpo-36427), a JVM in shutdown or a Node
//! environment being torn down must not be called back either. The binding's exit hook,
//! which runs before that, closes an [`ExitGate`]:
//! - [`ExitGate::enter`] (how a runtime thread calls into the host) runs nothing from
//!   then on;
//! - a thread that left the host for a blocking call ([`ExitGate::detach`]) learns that
//!   it may not come back ([`Detached::may_return`]), unless it runs the hook or is one
//!   the hook waits for (inside [`ExitGate::enter`]);
//! - the clients registered with [`ExitGate::track`] are closed (their tasks stop, a
//!   blocked take ends at once);
//! - the hook then waits, with the host's lock released, until the threads inside and the
//!   blocking calls started before have left ([`ExitGate::wait_until_left`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::thread::{self, ThreadId};

use crate::Client;

type Closer = Box<dyn FnOnce() + Send>;

struct State {
    /// The thread that closed the gate, once closed.
    closed_by: Option<ThreadId>,
    /// Threads in the host (or on their way in) and blocking calls: what closing waits for.
    inside: usize,
    /// The threads in [`ExitGate::enter`], once per level (a handful at a time).
    entered: Vec<ThreadId>,
    /// What closing runs, by registration number.
    closers: BTreeMap<u64, Closer>,
    next: u64,
}

/// The gate between core's threads and a host that is exiting. See the module docs; a
/// binding keeps one in a `static`. Its state is per process: a forked child starts with
/// an open gate, nothing counted in and no clients to close (its parent's threads in
/// blocking calls at the fork are not in the child, and would hold its exit forever).
pub struct ExitGate {
    inner: crate::process::PerProcess<Inner>,
}

struct Inner {
    state: Mutex<State>,
    left: Condvar,
}

impl Inner {
    fn new() -> Inner {
        Inner {
            state: Mutex::new(State {
                closed_by: None,
                inside: 0,
                entered: Vec::new(),
                closers: BTreeMap::new(),
                next: 0,
            }),
            left: Condvar::new(),
        }
    }
}

impl Default for ExitGate {
    fn default() -> Self {
        Self::new()
    }
}

impl ExitGate {
    /// An open gate.
    pub const fn new() -> Self {
        ExitGate {
            inner: crate::process::PerProcess::new(Inner::new),
        }
    }

    fn lock(&self) -> MutexGuard<'static, State> {
        let inner = self.inner.get();
        inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells [`wait_until_left`](Self::wait_until_left) that a thread left.
    fn left(&self) -> &'static Condvar {
        &self.inner.get().left
    }

    /// Counts the calling thread in (listed as entered when `entered`), unless closed.
    fn count_in(&self, entered: bool) -> Option<Inside<'_>> {
        let mut state = self.lock();
        if state.closed_by.is_some() {
            return None;
        }
        state.inside += 1;
        let entered = entered.then(|| thread::current().id());
        state.entered.extend(entered);
        Some(Inside {
            gate: self,
            entered,
        })
    }

    /// Runs `f`, which enters the host, as a thread that closing waits for; None (and `f`
    /// not run) once the gate is closed.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _inside = self.count_in(true)?;
        Some(f())
    }

    /// Polls `fut`, which may enter the host, each poll as [`enter`](Self::enter) runs
    /// it; None once the gate is closed.
    pub async fn polled<F: Future>(&self, fut: F) -> Option<F::Output> {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| match self.enter(|| fut.as_mut().poll(cx)) {
            Some(Poll::Ready(out)) => Poll::Ready(Some(out)),
            Some(Poll::Pending) => Poll::Pending,
            None => Poll::Ready(None),
        })
        .await
    }

    /// A blocking call that left the host (released its lock) and will want back in:
    /// closing waits for it if it started before. Ask [`Detached::may_return`] before
    /// going back.
    pub fn detach(&self) -> Detached<'_> {
        Detached {
            gate: self,
            _inside: self.count_in(false),
        }
    }

    /// Runs `f`, a blocking call made with the host's lock released, as [`detach`]
    /// counts it in; returns what `f` returned and the guard to drop once the thread is
    /// back in the host. If the thread may not go back (the gate closed meanwhile), it
    /// hands what `f` returned to `abandon` (to give back what was taken) and waits for
    /// the process to end instead.
    ///
    /// [`detach`]: Self::detach
    pub fn outside<T>(&self, f: impl FnOnce() -> T, abandon: impl FnOnce(T)) -> (T, Detached<'_>) {
        let detached = self.detach();
        let value = f();
        if !detached.may_return() {
            abandon(value);
            drop(detached);
            wait_for_the_end();
        }
        (value, detached)
    }

    /// Runs `close` when the gate closes, unless the returned registration was dropped
    /// before.
    pub fn at_close(&self, close: impl FnOnce() + Send + 'static) -> Registered<'_> {
        let mut state = self.lock();
        let id = state.next;
        state.next += 1;
        state.closers.insert(id, Box::new(close));
        Registered { gate: self, id }
    }

    /// Closes `client` when the gate closes, as long as the registration lives.
    pub fn track(&self, client: &Client) -> Registered<'_> {
        let client = client.clone();
        self.at_close(move || client.close())
    }

    /// Closes the gate (the host's exit hook): nothing enters from now on, and what was
    /// registered to close is closed. The calling thread may still go on in the host.
    pub fn close(&self) {
        let closers = {
            let mut state = self.lock();
            state.closed_by = Some(thread::current().id());
            std::mem::take(&mut state.closers)
        };
        closers.into_values().for_each(|close| close());
    }

    /// Waits until the threads inside and the blocking calls counted in have left (call it
    /// with the host's lock released).
    pub fn wait_until_left(&self) {
        let mut state = self.lock();
        while state.inside > 0 {
            state = self
                .left()
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A thread counted in by an [`ExitGate`].
struct Inside<'g> {
    gate: &'g ExitGate,
    entered: Option<ThreadId>,
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        // (Saturating: a thread counted in before a fork leaves in the child too.)
        state.inside = state.inside.saturating_sub(1);
        if let Some(me) = self.entered {
            if let Some(at) = state.entered.iter().rposition(|t| *t == me) {
                state.entered.swap_remove(at);
            }
        }
        if state.inside == 0 {
            self.gate.left().notify_all();
        }
    }
}

/// A blocking call outside the host, from [`ExitGate::detach`] until dropped.
pub struct Detached<'g> {
    gate: &'g ExitGate,
    _inside: Option<Inside<'g>>,
}

impl Detached<'_> {
    /// Whether the thread may go back into the host: not once the gate is closed, unless
    /// it closed it or is inside [`ExitGate::enter`] (closing waits for it).
    pub fn may_return(&self) -> bool {
        let me = thread::current().id();
        let state = self.gate.lock();
        state.closed_by.is_none_or(|t| t == me) || state.entered.contains(&me)
    }
}

/// What [`ExitGate::at_close`] registered, unregistered when dropped.
pub struct Registered<'g> {
    gate: &'g ExitGate,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let closer = self.gate.lock().closers.remove(&self.id);
        drop(closer);
    }
}

/// For a thread that may not go back into an exiting host: waits for the process to end
/// (as a host thread blocked in native code does).
pub fn wait_for_the_end() -> ! {
    loop {
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    #[test]
    fn a_closed_gate_runs_nothing_and_closes_what_is_registered_once() {
        let gate = ExitGate::new();
        assert_eq!(gate.enter(|| 1), Some(1));
        let closed = Arc::new(AtomicUsize::new(0));
        let (c1, c2) = (closed.clone(), closed.clone());
        let _kept = gate.at_close(move || {
            c1.fetch_add(1, Ordering::SeqCst);
        });
        drop(gate.at_close(move || {
            c2.fetch_add(10, Ordering::SeqCst);
        }));
        gate.close();
        gate.close();
        assert_eq!(
            closed.load(Ordering::SeqCst),
            1,
            "the dropped one did not run"
        );
        assert_eq!(gate.enter(|| 1), None);
        gate.wait_until_left(); // nobody inside: returns at once
    }

    #[test]
    fn closing_waits_for_the_threads_inside() {
        let gate = ExitGate::new();
        let left = AtomicBool::new(false);
        let (inside_tx, inside_rx) = mpsc::channel();
        thread::scope(|s| {
            s.spawn(|| {
                gate.enter(|| {
                    inside_tx.send(()).unwrap();
                    thread::sleep(Duration::from_millis(30));
                    left.store(true, Ordering::SeqCst);
                });
            });
            inside_rx.recv().unwrap();
            gate.close();
            gate.wait_until_left();
            assert!(left.load(Ordering::SeqCst));
        });
    }

    #[test]
    fn only_the_closer_and_the_threads_inside_may_return_once_closed() {
        let gate = ExitGate::new();
        let (inside_tx, inside_rx) = mpsc::channel();
        let (closed_tx, closed_rx) = mpsc::channel();
        let (handler_closed_tx, handler_closed_rx) = mpsc::channel();
        let gate = &gate;
        thread::scope(|s| {
            // A blocking call started before the close, on a thread of its own.
            let started_tx = inside_tx.clone();
            let plain = s.spawn(move || {
                let detached = gate.detach();
                assert!(detached.may_return());
                started_tx.send(()).unwrap();
                closed_rx.recv().unwrap();
                detached.may_return()
            });
            // A blocking call made by a thread inside (a handler that acks).
            let handler = s.spawn(move || {
                gate.enter(|| {
                    let detached = gate.detach();
                    inside_tx.send(()).unwrap();
                    handler_closed_rx.recv().unwrap();
                    detached.may_return()
                })
            });
            inside_rx.recv().unwrap();
            inside_rx.recv().unwrap(); // both
            gate.close();
            closed_tx.send(()).unwrap();
            handler_closed_tx.send(()).unwrap();
            assert!(gate.detach().may_return(), "the closer goes on");
            assert!(!plain.join().unwrap());
            assert_eq!(handler.join().unwrap(), Some(true));
            gate.wait_until_left();
        });
    }

    #[test]
    fn a_call_that_may_not_return_is_abandoned_and_its_thread_waits_for_the_end() {
        static GATE: ExitGate = ExitGate::new();
        let (abandoned_tx, abandoned_rx) = mpsc::channel();
        let (closed_tx, closed_rx) = mpsc::channel::<()>();
        let (value, back) = GATE.outside(|| 1, |_| unreachable!("may return"));
        assert_eq!(value, 1);
        drop(back);
        let stuck = thread::spawn(move || {
            let call = || closed_rx.recv().map(|()| 2);
            drop(GATE.outside(call, |v| abandoned_tx.send(v).unwrap()));
        });
        GATE.close();
        closed_tx.send(()).unwrap();
        assert_eq!(abandoned_rx.recv().unwrap(), Ok(2));
        thread::sleep(Duration::from_millis(20));
        assert!(!stuck.is_finished(), "it waits for the process to end");
        GATE.wait_until_left();
    }

    #[test]
    fn a_polled_future_ends_once_the_gate_closes() {
        let gate = ExitGate::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ready = runtime.block_on(gate.polled(async { 7 }));
        assert_eq!(ready, Some(7));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let waiting = runtime.block_on(async {
            let polled = gate.polled(async move { rx.await.is_ok() });
            let mut polled = std::pin::pin!(polled);
            let first = std::future::poll_fn(|cx| Poll::Ready(polled.as_mut().poll(cx))).await;
            assert!(first.is_pending());
            gate.close();
            tx.send(()).unwrap();
            polled.await
        });
        assert_eq!(waiting, None);
    }
}
