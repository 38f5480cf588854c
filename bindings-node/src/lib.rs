//! The Node.js binding of delayq: a thin shell over the `delayq` crate, wrapped by index.js
//! (which documents the API in index.d.ts). Calls return Promises settled through one
//! threadsafe function (bridge.rs); errors carry a stable `code` (error.rs).
#![deny(clippy::all)]
// napi registers the exports only outside tests: unit tests would find them unused.
#![cfg_attr(test, allow(dead_code))]

/// Writes a handle's `#[napi]` methods, one declaration each, in up to three sections;
/// `h` stands for the handle's core value (`self.inner`):
/// - `promise { "doc"? name(arg: JsType => conversion, ...) -> T = |h| body; }`: the arguments
///   are converted on the JavaScript thread (a bad one throws there), then `body` runs on
///   the runtime with a clone of the core value, and the Promise settles with its outcome;
/// - `wait { "doc"? name(...) -> T = |h, env?| handover, |outcome| js; }`: takes an `id`
///   first and starts a core `Handover` registered under it (see bridge.rs);
/// - `sync { name(arg: JsType, ...) -> T = |h| body; }`: `h` borrows the core value (`?`
///   may end the body early); `#[napi(getter)]` before one makes it a getter.
macro_rules! methods {
    ($ty:ident {
        $(promise { $($($doc:literal)? $p:ident($($pa:ident: $pjs:ty $(=> $pconv:expr)?),*)
            -> $pret:ty = |$ph:ident| $pbody:expr;)* })?
        $(wait { $($($wdoc:literal)? $w:ident($($wa:ident: $wjs:ty $(=> $wconv:expr)?),*)
            -> $wret:ty = |$wh:ident $(, $env:ident)?| $start:expr, $map:expr;)* })?
        $(sync { $($(#[napi($attr:ident)])? $s:ident($($sa:ident: $sjs:ty),*)
            -> $sret:ty = |$sh:ident| $sbody:expr;)* })?
    }) => {
        $(#[napi_derive::napi]
        impl $ty {
            $($(#[doc = $doc])?
            #[napi]
            pub fn $p<'e>(&self, env: &'e napi::Env $(, $pa: $pjs)*)
                -> $crate::error::Result<napi::bindgen_prelude::PromiseRaw<'e, $pret>> {
                $($(let $pa = $pconv;)?)*
                let $ph = self.inner.clone();
                $crate::bridge::promise(env, async move { $pbody })
            })*
        })?
        $(#[napi_derive::napi]
        impl $ty {
            $($(#[doc = $wdoc])?
            #[napi]
            pub fn $w<'e>(&self, env: &'e napi::Env, id: u32 $(, $wa: $wjs)*)
                -> $crate::error::Result<napi::bindgen_prelude::PromiseRaw<'e, $wret>> {
                $($(let $wa = $wconv;)?)*
                let $wh = &self.inner;
                $(let $env = env;)?
                $crate::bridge::wait(env, id, $start, $map)
            })*
        })?
        $(#[napi_derive::napi]
        impl $ty {
            $(#[napi $(($attr))?]
            pub fn $s(&self $(, $sa: $sjs)*) -> $crate::error::Result<$sret> {
                let $sh = &self.inner;
                Ok($sbody)
            })*
        })?
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
