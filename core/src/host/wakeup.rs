//! Handing items from any thread to a host's event loop with one wake-up per batch.
//!
//! The loop watches [`Wakeup::fd`] (asyncio's `add_reader`, libuv's poll handle) and
//! [`drains`](Wakeup::drain) all items queued when it becomes readable. A thread that
//! pushes never enters the host: it only writes a byte to a socket, and only when none is
//! on its way already, so a burst of items costs the loop one wake-up.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use crate::bridge::Batch;

/// Items for a host's event loop, queued from any thread. See the module docs.
pub struct Wakeup<T> {
    batch: Batch<T>,
    wake: UnixStream,
    woken: UnixStream,
}

impl<T> Wakeup<T> {
    /// An empty queue and its socket pair (both ends non-blocking).
    pub fn new() -> io::Result<Self> {
        let (wake, woken) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        woken.set_nonblocking(true)?;
        let batch = Batch::default();
        Ok(Wakeup { batch, wake, woken })
    }

    /// Queues `item`, waking the loop if this is the first of a batch.
    pub fn push(&self, item: T) {
        // Full socket buffer: a wake-up is pending anyway.
        self.batch.push(item, || drop((&self.wake).write(&[0])));
    }

    /// The descriptor the loop watches for reading.
    pub fn fd(&self) -> RawFd {
        self.woken.as_raw_fd()
    }

    /// Takes every item queued, and the wake-ups written for them.
    pub fn drain(&self) -> Vec<T> {
        while matches!((&self.woken).read(&mut [0; 64]), Ok(n) if n > 0) {}
        self.batch.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many wake-up bytes wait on the loop's end (reading them).
    fn pending_bytes<T>(w: &Wakeup<T>) -> usize {
        (&w.woken).read(&mut [0; 64]).unwrap_or(0)
    }

    #[test]
    fn a_batch_pushed_from_threads_wakes_once_and_drains_whole() {
        let w = Wakeup::new().unwrap();
        std::thread::scope(|s| {
            for i in 0..4 {
                let w = &w;
                s.spawn(move || w.push(i));
            }
        });
        assert_eq!(pending_bytes(&w), 1);
        let mut items = w.drain();
        items.sort();
        assert_eq!(items, vec![0, 1, 2, 3]);
        assert!(w.drain().is_empty());
    }

    #[test]
    fn the_next_batch_after_a_drain_wakes_again() {
        let w = Wakeup::new().unwrap();
        w.push("a");
        assert_eq!(w.drain(), vec!["a"]);
        assert_eq!(pending_bytes(&w), 0, "drain read the wake-up");
        w.push("b");
        w.push("c");
        assert_eq!(pending_bytes(&w), 1);
        assert_eq!(w.drain(), vec!["b", "c"]);
    }
}
