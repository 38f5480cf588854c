//! A host call that blocks on a core future: polled on the calling thread, in time slices
//! so that the host can check for signals between them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How long [`poll_for`] yields before it parks.
pub const SPIN: Duration = Duration::from_micros(50);

/// Wakes the thread that polls, and says it was woken.
struct Unpark(std::thread::Thread, AtomicBool);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.1.store(true, Ordering::Release);
        self.0.unpark();
    }
}

/// Polls `fut` on this thread, inside `runtime`'s context, until it is ready, for up to
/// `slice`: None when the slice ran out first (poll again later with the same `fut`).
/// Requests `fut` makes to one server are written and read by this thread itself, over a
/// connection of its own (`connection::direct`), unless they are in a `consume`.
///
/// Not the runtime's `block_on` with a timer: registering a timer earlier than the
/// runtime's next one wakes a runtime thread, once per call. After each poll that is not
/// ready the thread yields for up to [`SPIN`] before it parks: a reply over loopback
/// often comes within that, and waking a parked thread (a futex, on a VM an interrupt to
/// an idle CPU) costs more.
pub fn poll_for<F: Future + ?Sized>(
    runtime: &tokio::runtime::Handle,
    fut: Pin<&mut F>,
    slice: Duration,
) -> Option<F::Output> {
    crate::connection::on_this_thread(|| poll_in(runtime, fut, slice))
}

/// [`poll_for`] for a host whose signal handlers interrupt system calls (Python's): while
/// this thread waits for a reply on its own connection, asynchronous signals are held off
/// it, to be taken by another thread or once the reply is read (see
/// `connection::holding_signals`). A signal is then handled after the reply, or the
/// response timeout, as a synchronous client such as redis-py has it.
pub fn poll_for_holding_signals<F: Future + ?Sized>(
    runtime: &tokio::runtime::Handle,
    fut: Pin<&mut F>,
    slice: Duration,
) -> Option<F::Output> {
    crate::connection::holding_signals(|| poll_for(runtime, fut, slice))
}

fn poll_in<F: Future + ?Sized>(
    runtime: &tokio::runtime::Handle,
    mut fut: Pin<&mut F>,
    slice: Duration,
) -> Option<F::Output> {
    let _context = runtime.enter();
    let unpark = Arc::new(Unpark(std::thread::current(), AtomicBool::new(false)));
    let waker = Waker::from(unpark.clone());
    let until = Instant::now() + slice;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            return Some(out);
        }
        let spin_until = Instant::now() + SPIN;
        while !unpark.1.swap(false, Ordering::Acquire) {
            let now = Instant::now();
            if now < spin_until {
                std::thread::yield_now();
                continue;
            }
            match until.checked_duration_since(now) {
                Some(left) if !left.is_zero() => std::thread::park_timeout(left),
                _ => return None,
            }
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_ready_future_returns_at_once() {
        let rt = runtime();
        let fut = std::pin::pin!(async { 3 });
        assert_eq!(poll_for(rt.handle(), fut, Duration::ZERO), Some(3));
    }

    #[test]
    fn a_slice_ends_and_the_same_future_goes_on_in_the_next() {
        let rt = runtime();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut fut = std::pin::pin!(rx);
        let started = Instant::now();
        assert!(poll_for(rt.handle(), fut.as_mut(), Duration::from_millis(20)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(20));
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            tx.send(5).unwrap();
        });
        let out = poll_for(rt.handle(), fut, Duration::from_secs(10));
        assert_eq!(out.map(Result::unwrap), Some(5));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "woken, not timed out"
        );
        sender.join().unwrap();
    }

    #[test]
    fn the_runtime_s_timers_work_in_the_polled_future() {
        let rt = runtime();
        // Made at the first poll, in the runtime's context.
        let fut = std::pin::pin!(async { tokio::time::sleep(Duration::from_millis(5)).await });
        assert_eq!(
            poll_for(rt.handle(), fut, Duration::from_secs(10)),
            Some(())
        );
    }
}
