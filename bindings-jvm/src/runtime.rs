//! The tokio runtime that runs every delayq future of this process, and [`twins!`].
//!
//! Core's `Client::connect` captures the runtime it runs on and spawns its connection
//! drivers and transfer tasks there, so the client must be created on a long-lived
//! multi-thread runtime. The JVM side then polls core's futures with that runtime entered,
//! or blocks on them.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;

use crate::error::FfiError;

pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("delayq-jvm")
            .build()
            .expect("cannot start the delayq tokio runtime")
    })
}

/// A future polled by whatever executor awaits it (UniFFI's, for a Kotlin coroutine) with
/// this library's runtime entered on every poll (as the `async-compat` crate does). Unlike
/// a spawned task, dropping it (a cancelled coroutine) drops core's future itself, whose
/// cancel-safety then holds.
struct InRuntime<F>(Pin<Box<F>>);

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let _entered = runtime().enter();
        self.0.as_mut().poll(cx)
    }
}

/// Runs `fut` in the runtime's context, awaited from whatever executor polls the result.
pub(crate) async fn run<T>(fut: impl Future<Output = delayq::Result<T>>) -> Result<T, FfiError> {
    InRuntime(Box::pin(fut)).await.map_err(FfiError::from)
}

/// Runs `fut` on the runtime, blocking the calling (JVM) thread until it is done.
pub(crate) fn block<T: Send>(
    fut: impl Future<Output = delayq::Result<T>> + Send,
) -> Result<T, FfiError> {
    if tokio::runtime::Handle::try_current().is_ok() {
        // Called from a runtime thread (a coroutine resumed there): blocking it would
        // stall the runtime, so wait on a plain thread instead.
        return std::thread::scope(|s| s.spawn(|| block(fut)).join())
            .unwrap_or_else(|_| Err(FfiError::Connection("delayq call panicked".into())));
    }
    runtime().block_on(fut).map_err(FfiError::from)
}

/// Exports each call of `$ty` twice from one body: `$name`, async (a Kotlin `suspend
/// fun`), and `$blocking`. The body is core's future, built from `$inner` (a clone of the
/// field `$field`) and the arguments, which it owns.
macro_rules! twins {
    ($ty:ident . $field:ident as $inner:ident { $(
        $(#[doc = $doc:literal])*
        fn $name:ident / $blocking:ident ($($arg:ident: $argty:ty),*) -> $ret:ty $body:block
    )* }) => {
        #[uniffi::export]
        impl $ty { $(
            $(#[doc = $doc])*
            pub async fn $name(&self, $($arg: $argty),*) -> Result<$ret, crate::error::FfiError> {
                let $inner = self.$field.clone();
                crate::runtime::run(async move $body).await
            }
            $(#[doc = $doc])*
            pub fn $blocking(&self, $($arg: $argty),*) -> Result<$ret, crate::error::FfiError> {
                let $inner = self.$field.clone();
                crate::runtime::block(async move $body)
            }
        )* }
    };
}
