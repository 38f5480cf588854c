//! What a forked child must not inherit.
//!
//! A process forked while another thread held a lock (a transfer task counting a pass in
//! the metrics, a call registering its hand-over) has that lock held forever in the child,
//! where the thread that would release it does not exist: the child's first use of it
//! hung. Such state is per process: [`PerProcess`] makes a fresh one in a child, and
//! leaks the parent's (dropping it could release what the parent still uses).

use std::sync::atomic::{AtomicPtr, Ordering};

/// A value made on first use in each process: in a process forked since it was made,
/// another is made. No lock is taken to find or replace it, so threads that ask at once
/// for the first time may each make one: one is kept, the others are dropped unused.
pub struct PerProcess<T: 'static> {
    make: fn() -> T,
    /// `(forks when made, the value)`, leaked.
    current: AtomicPtr<(u64, T)>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    /// A value that `make` makes when this process first asks for it.
    pub const fn new(make: fn() -> T) -> Self {
        PerProcess {
            make,
            current: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's value.
    pub fn get(&self) -> &'static T {
        let forks = crate::random::forks();
        loop {
            let seen = self.current.load(Ordering::Acquire);
            // SAFETY: every pointer stored is from `Box::into_raw` and never freed.
            if let Some((made_at, value)) = unsafe { seen.as_ref() } {
                if *made_at == forks {
                    return value;
                }
            }
            let made = Box::into_raw(Box::new((forks, (self.make)())));
            match self
                .current
                .compare_exchange(seen, made, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: just made, and now never freed.
                Ok(_) => return unsafe { &(*made).1 },
                // Another thread made one first: ours was never shared.
                // SAFETY: `made` is ours alone.
                Err(_) => drop(unsafe { Box::from_raw(made) }),
            }
        }
    }
}

/// A lock held around work that awaits Redis (one connect, one first read of a queue's
/// settings), so that callers at once share one attempt. A task of the parent may have
/// held it at the fork, and no thread of the child would ever release it: in a process
/// forked since it was made, it is not taken (those callers each make their own attempt).
pub(crate) struct OneAtATime {
    lock: tokio::sync::Mutex<()>,
    made_at: u64,
}

impl Default for OneAtATime {
    fn default() -> Self {
        OneAtATime {
            lock: tokio::sync::Mutex::new(()),
            made_at: crate::random::forks(),
        }
    }
}

impl OneAtATime {
    /// Waits for the lock; None (at once) in a process forked since it was made.
    pub(crate) async fn lock(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.made_at != crate::random::forks() {
            return None;
        }
        Some(self.lock.lock().await)
    }
}
