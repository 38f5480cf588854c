//! The JVM binding of delayq: UniFFI scaffolding that the Kotlin facade in `src/main/kotlin`
//! wraps, and whose KDoc documents every call. Thin: it moves values across, bridges async
//! ([`bridge`]) and maps errors; everything else is core's. Modules mirror core's.

/// Declares the records that cross, one line each: core's own (`#[uniffi::remote(Record)]`,
/// whose fields UniFFI needs restated) and this binding's (`#[derive(uniffi::Record)]`).
macro_rules! records {
    ($($(#[$attr:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? })*) => {
        $($(#[$attr])* pub struct $name { $(pub $field: $ty),* })*
    };
}

#[macro_use]
mod bridge;
mod client;
mod delayed_queue;
mod reliable_queue;
mod telemetry;

uniffi::setup_scaffolding!();

use delayq::delay::{delay_from_millis, timeout_from_millis};
use delayq::Error as FfiError;

type Res<T> = Result<T, FfiError>;

/// Core's errors cross as themselves (`FfiException.InvalidArgument`, ..., with core's
/// message); the facade turns each into its exception class.
#[uniffi::remote(Error)]
#[uniffi(flat_error)]
pub enum FfiError {
    InvalidArgument(String),
    Connection(String),
    Timeout(String),
    WrongType(String),
    Closed(&'static str),
    Server(String),
}

/// Core's error for a negative `java.time.Duration` (`ms`, floored), which the facade
/// cannot hand over: a Rust `Duration` is never negative.
#[uniffi::export]
pub fn refuse_negative(ms: i64, timeout: bool) -> Res<()> {
    if timeout {
        timeout_from_millis(ms).map(drop)
    } else {
        delay_from_millis(ms).map(drop)
    }
}

records! {
    #[derive(uniffi::Record)] UnpackedEntry { id: Vec<u8>, value: Vec<u8> }
}

#[uniffi::export]
pub fn pack_entry(id: Vec<u8>, value: Vec<u8>) -> Res<Vec<u8>> {
    delayq::codec::pack(&id, &value)
}

#[uniffi::export]
pub fn unpack_entry(packed: Vec<u8>) -> Res<UnpackedEntry> {
    let unpacked = delayq::codec::unpack(&packed);
    let (id, value) = unpacked.map_err(|e| FfiError::InvalidArgument(e.to_string()))?;
    let (id, value) = (id.to_vec(), value.to_vec());
    Ok(UnpackedEntry { id, value })
}
