//! The JVM binding of delayq: UniFFI scaffolding that the Kotlin facade in
//! `src/main/kotlin` wraps. Thin: it converts types, bridges async and maps errors;
//! everything else is core's.
//!
//! Every call exists twice: `foo` is async (a Kotlin `suspend fun`) and `foo_blocking`
//! blocks the calling thread (for plain Java threads, without a coroutine per call). Both
//! run the core's future on this library's own tokio runtime (see [`runtime`]).
//!
//! Modules mirror core's: `client`, `delayed_queue`, `reliable_queue`, `codec`, `error`.

mod client;
mod codec;
mod delayed_queue;
mod error;
mod handover;
mod reliable_queue;
mod runtime;
mod time;

pub use client::{
    connect, connect_blocking, connect_with_options, connect_with_options_blocking, Client,
    ConnectOptions, DurabilitySpec,
};
pub use codec::{pack_entry, unpack_entry, UnpackedEntry};
pub use delayed_queue::{DelayedQueue, DelayedStats, OfferEntry};
pub use error::FfiError;
pub use reliable_queue::{
    BackoffSpec, DeadLetter, Delivery, DeliveryHandler, OfferOutcome, ReliableOfferEntry,
    ReliableOptions, ReliableQueue, ReliableSettings, ReliableStats,
};
pub use time::DurationParts;

uniffi::setup_scaffolding!();
