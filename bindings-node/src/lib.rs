//! The Node.js binding of delayq: a thin shell over the `delayq` crate. Calls return
//! Promises settled through one threadsafe function (bridge.rs); errors carry a stable
//! `code` (error.rs); core's logs reach a JavaScript hook (logs.rs). The JavaScript wrapper
//! (index.js) converts values and wires `AbortSignal`.
#![deny(clippy::all)]

/// Writes one `#[napi]` method returning a Promise per declaration
/// `"doc" name(arg: JsType => conversion, ...) -> T = |h| body;`: the arguments are
/// converted on the JavaScript thread (a bad one throws there), then `body` runs on the
/// runtime with `h`, a clone of the handle's core value, and the Promise settles with its
/// outcome.
macro_rules! calls {
    ($ty:ident { $($doc:literal $name:ident($($arg:ident: $js:ty $(=> $conv:expr)?),*)
        -> $ret:ty = |$h:ident| $body:expr;)* }) => {
        #[napi_derive::napi]
        impl $ty {
            $(#[doc = $doc]
            #[napi]
            pub fn $name<'e>(&self, env: &'e napi::Env $(, $arg: $js)*)
                -> $crate::error::Result<napi::bindgen_prelude::PromiseRaw<'e, $ret>> {
                $($(let $arg = $conv;)?)*
                let $h = self.inner.clone();
                $crate::bridge::promise(env, async move { $body })
            })*
        }
    };
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bridge;
mod client;
mod convert;
mod delayed_queue;
mod error;
mod logs;
mod metrics;
mod reliable_queue;

use napi::bindgen_prelude::{Buffer, BufferSlice};
use napi_derive::napi;

use error::{IntoJs, Result};

/// Packs an entry the way Redisson does (`struct.pack('Bc0Lc0', ...)`).
#[napi]
pub fn pack_entry(id: BufferSlice, value: BufferSlice) -> Result<Buffer> {
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
pub fn unpack_entry(packed: BufferSlice) -> Result<UnpackedEntry> {
    let bad = |e: delayq::codec::CodecError| delayq::Error::InvalidArgument(e.to_string());
    let (id, value) = delayq::codec::unpack(&packed).map_err(bad).js()?;
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
