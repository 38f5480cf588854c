//! The Node.js binding of delayq: a thin shell over the `delayq` crate. Every call returns
//! a Promise run on napi's tokio runtime; errors carry a stable `code` (error.rs). The
//! JavaScript wrapper (index.js) converts values and wires `AbortSignal`.
#![deny(clippy::all)]

mod client;
mod convert;
mod delayed_queue;
mod error;
mod reliable_queue;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use error::IntoJs;
use napi::Result;

pub use client::{connect, Client, ClientOptions};
pub use delayed_queue::{DelayedQueue, DelayedStats};
pub use reliable_queue::{
    DeadLetter, Delivery, OfferOutcome, ReliableQueue, ReliableSettings, ReliableStats,
};

/// Packs an entry the way Redisson does (`struct.pack('Bc0Lc0', ...)`).
#[napi]
pub fn pack_entry(id: Buffer, value: Buffer) -> Result<Buffer> {
    Ok(delayq::codec::pack(&id, &value).js()?.into())
}

/// A packed entry split into its id and value.
#[napi(object)]
pub struct UnpackedEntry {
    pub id: Buffer,
    pub value: Buffer,
}

/// Splits a packed entry into its id and value.
#[napi]
pub fn unpack_entry(packed: Buffer) -> Result<UnpackedEntry> {
    let (id, value) = delayq::codec::unpack(&packed)
        .map_err(|e| delayq::Error::InvalidArgument(e.to_string()))
        .js()?;
    Ok(UnpackedEntry {
        id: id.to_vec().into(),
        value: value.to_vec().into(),
    })
}

/// The Lua source of the offer script (for benchmarks against other clients).
#[napi]
pub fn offer_script_source() -> String {
    delayq::offer_script_source()
}

/// A handle that cancels one pending `take` or `receive` (used for `AbortSignal`).
#[napi]
pub struct CancelHandle {
    token: tokio_util::sync::CancellationToken,
}

#[napi]
impl CancelHandle {
    /// A new handle.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        CancelHandle {
            token: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Cancels the call this handle was given to; its value is not lost.
    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }
}

/// Runs `fut` unless `cancel` fires first (then the future is dropped, which core's
/// blocking calls survive without losing a value).
pub(crate) async fn cancellable<T>(
    cancel: Option<tokio_util::sync::CancellationToken>,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match cancel {
        None => fut.await,
        Some(token) => tokio::select! {
            r = fut => r,
            _ = token.cancelled() => Err(napi::Error::new(napi::Status::Cancelled, "ABORT_ERR: The operation was aborted")),
        },
    }
}
