//! [`Batch`]: work for a host thread, queued from any thread and run in batches.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Items for one host thread (completions, log records, handler calls), pushed from any
/// thread and drained by the host in batches.
///
/// The first item of a batch wakes the host; items pushed before it drains ride along, so
/// a host thread is woken once per batch, not once per item. Once the host is gone
/// ([`close`](Batch::close)), nothing is queued or woken any more, and items are leaked
/// rather than dropped: dropping one could call into the host that is gone, and the
/// process is ending anyway.
pub struct Batch<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    items: Vec<T>,
    closed: bool,
}

impl<T> Default for Batch<T> {
    fn default() -> Self {
        Batch {
            state: Mutex::new(State {
                items: Vec::new(),
                closed: false,
            }),
        }
    }
}

impl<T> Batch<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item`, calling `wake` if it is the first of a batch. `wake` runs under the
    /// batch's lock, so that [`close`](Batch::close) waits for a wake-up in progress: the
    /// host may free what `wake` uses once it closed the batch. Once closed, the item is
    /// leaked and nothing is woken.
    pub fn push(&self, item: T, wake: impl FnOnce()) {
        let mut state = self.lock();
        if state.closed {
            std::mem::forget(item);
            return;
        }
        state.items.push(item);
        if state.items.len() == 1 {
            wake();
        }
    }

    /// Takes every item queued so far, oldest first; the next push starts a new batch.
    pub fn drain(&self) -> Vec<T> {
        std::mem::take(&mut self.lock().items)
    }

    /// The host is gone: leaks the items queued, and those pushed later, without waking.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        std::mem::forget(std::mem::take(&mut state.items));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Counts drops.
    struct Dropped(Arc<AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_the_host_once_per_batch_and_drains_in_order() {
        let (batch, wakes) = (Batch::default(), AtomicUsize::new(0));
        let wake = || {
            wakes.fetch_add(1, Ordering::SeqCst);
        };
        for i in 0..3 {
            batch.push(i, wake);
        }
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        assert_eq!(batch.drain(), [0, 1, 2]);
        assert!(batch.drain().is_empty());
        batch.push(3, wake);
        assert_eq!(wakes.load(Ordering::SeqCst), 2, "a new batch wakes again");
        assert_eq!(batch.drain(), [3]);
    }

    #[test]
    fn a_closed_batch_drops_nothing_and_wakes_nobody() {
        let (batch, dropped) = (Batch::default(), Arc::new(AtomicUsize::new(0)));
        batch.push(Dropped(dropped.clone()), || {});
        batch.close();
        let woken = AtomicBool::new(false);
        batch.push(Dropped(dropped.clone()), || {
            woken.store(true, Ordering::SeqCst)
        });
        assert!(batch.drain().is_empty());
        drop(batch);
        assert!(!woken.load(Ordering::SeqCst));
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn close_waits_for_a_wake_up_in_progress() {
        let batch = Arc::new(Batch::default());
        let woke = Arc::new(AtomicBool::new(false));
        let (started, waking) = std::sync::mpsc::channel();
        let pusher = {
            let (batch, woke) = (batch.clone(), woke.clone());
            std::thread::spawn(move || {
                batch.push(1, || {
                    started.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                    woke.store(true, Ordering::SeqCst);
                })
            })
        };
        waking.recv().unwrap();
        batch.close();
        assert!(
            woke.load(Ordering::SeqCst),
            "close returned during a wake-up"
        );
        pusher.join().unwrap();
    }
}
