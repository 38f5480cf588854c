//! The JVM binding of delayq: UniFFI scaffolding that the Kotlin facade in
//! `src/main/kotlin` wraps. Thin: it converts types, bridges async and maps errors;
//! everything else is core's.
//!
//! Most calls exist twice ([`twins!`]): async (a Kotlin `suspend fun`) and `_blocking`
//! (for plain Java threads). The hottest async call (`DelayedQueue.offer_all_then`) and the
//! ready signal of core's hand-over report through [`callbacks`]: one upcall carries every
//! completion queued meanwhile. Modules mirror core's.

#[macro_use]
mod runtime;
mod callbacks;
mod client;
mod codec;
mod delayed_queue;
mod error;
mod handover;
mod logs;
mod metrics;
mod reliable_queue;
mod time;

uniffi::setup_scaffolding!();
