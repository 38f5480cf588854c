//! Pieces that bridge core's async calls to a host language's own thread, the same for
//! every host: a binding keeps only what is specific to its language (how to wake its
//! thread, how to settle a promise or a future, how to call a function).
//!
//! - [`Batch`]: completions queued from runtime threads, the host woken once per batch;
//!   once the host is gone, nothing is posted or dropped.
//! - [`Waits`]: [`Handover`](crate::handover::Handover)s known by an id, ended as
//!   "claimed" or "gone", all given back (with a time limit) when the host exits.
//! - [`replying`] and [`Reply`]: a consume handler that runs in the host and reports its
//!   outcome later.
//! - [`scheduler`] and [`durability`]: options with core's defaults for what the host
//!   left out.

mod batch;
mod options;
mod reply;
mod waits;

pub use batch::Batch;
pub use options::{durability, scheduler};
pub use reply::{replying, HandlerOutcome, Replied, Reply};
pub use waits::{Wait, Waits, EXIT_LIMIT};
