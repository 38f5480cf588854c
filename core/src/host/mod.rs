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
