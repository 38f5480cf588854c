//! Random numbers that a forked process does not repeat.
//!
//! rand 0.9's thread RNG carries over a fork unchanged (rand leaves reseeding to the
//! caller). A child forked after its parent drew from it, as a pre-forking server's
//! workers are once the parent made a client, would draw the parent's numbers, and every
//! sibling the same ones: equal Redisson entries would merge into one, equal message ids
//! would be taken as repeats of one offer, and equal consumer names would share a pending
//! list. So the RNG is reseeded from the OS after every fork.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use rand::distr::{Distribution, StandardUniform};
use rand::Rng;

/// Forks this process went through (counted in the child by a `pthread_atfork` hook: a
/// load per draw, where asking the process id is a system call, 0.17 us here).
static FORKS: AtomicU64 = AtomicU64::new(0);

extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// How many forks lie between the process that started counting and this one: a value
/// kept from before a fork (an RNG state, a socket) compares unequal after it.
pub(crate) fn forks() -> u64 {
    static HOOK: Once = Once::new();
    // SAFETY: the hook only adds to an atomic, which is safe in a forked child.
    HOOK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forked));
    });
    FORKS.load(Ordering::Relaxed)
}

/// A random value, as `rand::random`, never one a parent or sibling process drew.
pub fn random<T>() -> T
where
    StandardUniform: Distribution<T>,
{
    thread_local! {
        /// `FORKS` when this thread's RNG was last reseeded (none yet: `u64::MAX`).
        static SEEDED_AT: Cell<u64> = const { Cell::new(u64::MAX) };
    }
    let mut rng = rand::rng();
    let forks = forks();
    if SEEDED_AT.replace(forks) != forks {
        // On failure the RNG keeps its state, as rand's own periodic reseeding does.
        let _ = rng.reseed();
    }
    rng.random()
}
