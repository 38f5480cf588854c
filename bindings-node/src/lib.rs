//! The Node.js binding of delayq: a thin shell over the `delayq` crate, wrapped by index.js
//! (which documents the API in index.d.ts). Calls return Promises settled through one
//! threadsafe function (bridge.rs); errors carry a stable `code` (error.rs).
#![deny(clippy::all)]

/// Writes one `#[napi]` method returning a Promise per declaration
/// `"doc"? name(arg: JsType => conversion, ...) -> T = |h| body;`: the arguments are
/// converted on the JavaScript thread (a bad one throws there), then `body` runs on the
/// runtime with `h`, a clone of the handle's core value, and the Promise settles with its
/// outcome.
macro_rules! calls {
    ($ty:ident { $($($doc:literal)? $name:ident($($arg:ident: $js:ty $(=> $conv:expr)?),*)
        -> $ret:ty = |$h:ident| $body:expr;)* }) => {
        #[napi_derive::napi]
        impl $ty {
            $($(#[doc = $doc])?
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

/// Writes `#[napi]` methods that start a core `Handover` registered as `id` (see bridge.rs),
/// per declaration `name(arg: JsType => conversion, ...) -> T = |h| handover, |outcome| js;`.
macro_rules! waits {
    ($ty:ident { $($name:ident($($arg:ident: $js:ty $(=> $conv:expr)?),*) -> $ret:ty
        = |$h:ident| $start:expr, $map:expr;)* }) => {
        #[napi_derive::napi]
        impl $ty {
            $(#[napi]
            pub fn $name<'e>(&self, env: &'e napi::Env, id: u32 $(, $arg: $js)*)
                -> $crate::error::Result<napi::bindgen_prelude::PromiseRaw<'e, $ret>> {
                $($(let $arg = $conv;)?)*
                let $h = &self.inner;
                $crate::bridge::wait(env, id, $start, $map)
            })*
        }
    };
}

/// The synchronous counterpart of `calls!`: `#[napi(getter)]`, if any, then
/// `name(arg: JsType, ...) -> T = |h| body;`, `h` borrowing the handle's core value (`?`
/// may end the body early).
macro_rules! sync {
    ($ty:ident { $($(#[napi($attr:ident)])? $name:ident($($arg:ident: $js:ty),*) -> $ret:ty
        = |$h:ident| $body:expr;)* }) => {
        #[napi_derive::napi]
        impl $ty {
            $(#[napi $(($attr))?]
            pub fn $name(&self $(, $arg: $js)*) -> $crate::error::Result<$ret> {
                let $h = &self.inner;
                Ok($body)
            })*
        }
    };
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bridge;
mod client;
mod error;
mod logs;
mod queues;

use napi::bindgen_prelude::{Buffer, BufferSlice};
use napi_derive::napi;

use error::{IntoJs, Result};

/// See index.d.ts.
#[napi]
pub fn pack_entry(id: BufferSlice, value: BufferSlice) -> Result<Buffer> {
    Ok(delayq::codec::pack(&id, &value).js()?.into())
}

/// See index.d.ts: `[id, value]`.
#[napi]
pub fn unpack_entry(packed: BufferSlice) -> Result<(Buffer, Buffer)> {
    let bad = |e: delayq::codec::CodecError| delayq::Error::InvalidArgument(e.to_string());
    let (id, value) = delayq::codec::unpack(&packed).map_err(bad).js()?;
    Ok((id.to_vec().into(), value.to_vec().into()))
}

/// See index.d.ts.
#[napi]
pub fn offer_script_source() -> String {
    delayq::offer_script_source()
}

/// Core's `metrics::snapshot` as JSON (snake_case); index.js shapes it.
#[napi]
pub fn metrics_json() -> String {
    delayq::metrics::snapshot().to_json()
}
