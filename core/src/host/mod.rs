//! Generic pieces for the bindings that host core in another language's process: what
//! bridges the host's threads, event loop and exit to core, with nothing of any one
//! language in it (each binding adds its own lock, signals and hooks).
//!
//! - [`exit`]: a gate that the host's exit hook closes, so that no runtime thread
//!   enters the host while it exits, and the clients still open are closed;
//! - [`blocking`]: polling a core future on the calling thread, in time slices, for a
//!   host call that blocks but must check for signals now and then;
//! - [`wakeup`]: items queued from any thread, and one wake-up per batch written to a
//!   socket the host's event loop watches.

pub mod blocking;
pub mod exit;
#[cfg(unix)]
pub mod wakeup;

/// Forks between the process that started counting and this one (a `pthread_atfork`
/// hook counts them): a value kept from before a fork compares unequal after it.
pub fn forks() -> u64 {
    crate::random::forks()
}

/// The tokio runtime of a host process: built on first use, and again in a process forked
/// since. A forked child has none of its parent's runtime threads, so nothing spawned
/// there would run; and the runtime's I/O driver polls an epoll instance that the child
/// shares with its parent, so a socket the child registered there broke the parent's
/// driver (a panic in the parent, then an abort). The parent's runtime is leaked in the
/// child, never dropped: dropping it would take the parent's sockets out of that instance.
pub type ProcessRuntime = crate::process::PerProcess<tokio::runtime::Runtime>;
