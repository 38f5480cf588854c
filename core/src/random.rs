//! Random numbers that a forked process does not repeat.
//!
//! rand 0.9's thread RNG carries over a fork unchanged (rand leaves reseeding to the
//! caller). A child forked after its parent drew from it, as a pre-forking server's
//! workers are once the parent made a client, would draw the parent's numbers, and every
//! sibling the same ones: equal Redisson entries would merge into one, equal message ids
//! would be taken as repeats of one offer, and equal consumer names would share a pending
//! list. So the RNG is reseeded from the OS whenever this thread's process changed.

use std::cell::Cell;

use rand::distr::{Distribution, StandardUniform};
use rand::Rng;

/// A random value, as `rand::random`, never one a parent or sibling process drew.
pub fn random<T>() -> T
where
    StandardUniform: Distribution<T>,
{
    thread_local! {
        /// The process this thread's RNG was last reseeded in.
        static SEEDED_IN: Cell<u32> = const { Cell::new(0) };
    }
    let mut rng = rand::rng();
    let pid = std::process::id();
    if SEEDED_IN.replace(pid) != pid {
        // On failure the RNG keeps its state, as rand's own periodic reseeding does.
        let _ = rng.reseed();
    }
    rng.random()
}
