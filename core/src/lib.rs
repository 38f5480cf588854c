//! delayq: a delayed queue on Redis, written once in Rust and shared by Python, Node.js
//! and the JVM.
//!
//! [`DelayedQueue`] is wire-compatible with Redisson's `RDelayedQueue`: the same keys,
//! the same packed entries, the same pub/sub channel, so a Java service on Redisson and
//! services using delayq share one queue. Due times come from the Redis server's clock.
//!
//! ```no_run
//! # async fn demo() -> delayq::Result<()> {
//! use std::time::Duration;
//! let client = delayq::Client::connect("redis://127.0.0.1:6379").await?;
//! let queue = client.delayed_queue("orders")?;
//! queue.offer("hello", Duration::from_secs(2)).await?;
//! let value = queue.take(Some(Duration::from_secs(5))).await?;
//! assert_eq!(value.as_deref(), Some(&b"hello"[..]));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod bridge;
mod client;
pub mod codec;
mod connection;
pub mod delay;
mod delayed_queue;
mod error;
mod handle;
pub mod handover;
pub mod host;
pub mod keys;
pub mod logs;
pub mod metrics;
pub mod process;
mod pubsub;
pub mod random;
mod reliable_queue;
mod scheduler;
mod scripts;

pub use client::{check_delayed_queue, check_reliable_queue, Client, FoundQueues};
pub use connection::{redact_url, redact_url_keeping, ClientOptions, Durability, TlsOptions};
pub use delayed_queue::{DelayedQueue, DelayedStats};
pub use error::{caught, Error, ErrorKind, Result};
#[doc(hidden)]
pub use reliable_queue::set_wheel_levels;
pub use reliable_queue::{
    check_id, check_message, Backoff, DeadLetter, Delivery, OfferOutcome, ReliableQueue,
    ReliableQueueOptions, ReliableSettings, ReliableStats, BUCKET_WIDTH_MS, CONSUMER_IDLE_LIMIT,
    DEAD_LETTERS_LIMIT, MAX_ID_LEN, MAX_RECEIVE, MAX_SCHEDULE, WHEEL_LEVELS,
};
pub use scheduler::{SchedulerOptions, TransferOutcome};
pub use scripts::offer_script_source;
