//! How core's futures reach Kotlin: the runtime that runs them, [`twins!`] (each call async
//! and blocking), completions by token, and core's hand-overs of a take or receive.

use std::future::Future;
use std::pin::Pin;
use std::sync::{mpsc, Arc, LazyLock, OnceLock};
use std::task::{Context, Poll};

use delayq::handover::{Claim, Handover, TakenValue};
use tokio::runtime::Runtime;

use crate::reliable_queue::Delivery;
use crate::{FfiError, Res};

/// Core's `Client::connect` spawns the client's tasks on the runtime it runs on: one
/// long-lived multi-thread runtime runs every call.
pub(crate) static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("delayq-jvm")
        .build()
        .expect("cannot start the delayq tokio runtime")
});

/// A future polled by UniFFI's executor (for a Kotlin coroutine) with the runtime entered,
/// as `async-compat` does. Unlike a spawned task, dropping it (a cancelled coroutine) drops
/// core's future itself, whose cancel-safety then holds.
pub(crate) struct InRuntime<F>(pub(crate) Pin<Box<F>>);

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let _entered = RUNTIME.enter();
        self.0.as_mut().poll(cx)
    }
}

/// Runs `fut` on the calling (JVM) thread until it is done, with the runtime entered: as
/// core's `poll_for` does, so its requests go over the thread's own connection.
pub(crate) fn block<T: Send>(fut: impl Future<Output = delayq::Result<T>> + Send) -> Res<T> {
    if tokio::runtime::Handle::try_current().is_ok() {
        // A runtime thread (a consume handler, a coroutine resumed there) must not block.
        let joined = std::thread::scope(|s| s.spawn(|| block(fut)).join());
        return joined.unwrap_or_else(|panic| Err(FfiError::from_panic(panic)));
    }
    let mut fut = std::pin::pin!(delayq::caught(fut));
    loop {
        let slice = std::time::Duration::from_secs(60);
        if let Some(out) = delayq::host::blocking::poll_for(RUNTIME.handle(), fut.as_mut(), slice) {
            return out;
        }
    }
}

/// Exports each call of `$ty` twice from one body, core's future: `$name` (a Kotlin `suspend
/// fun`) and `$blocking`. The body owns the arguments and `$inner`, a clone of `$field`.
macro_rules! twins {
    ($ty:ident . $field:tt as $inner:ident { $(
        fn $name:ident / $blocking:ident ($($arg:ident: $argty:ty),*) -> $ret:ty $body:block
    )* }) => {
        #[uniffi::export]
        impl $ty { $(
            pub async fn $name(&self, $($arg: $argty),*) -> crate::Res<$ret> {
                let $inner = self.$field.clone();
                crate::bridge::InRuntime(Box::pin(async move $body)).await
            }
            pub fn $blocking(&self, $($arg: $argty),*) -> crate::Res<$ret> {
                let $inner = self.$field.clone();
                crate::bridge::block(async move $body)
            }
        )* }
    };
}

/// Where calls that report by token complete; implemented by the facade's `Bridge`.
#[uniffi::export(foreign)]
pub trait Completions: Send + Sync {
    /// Calls that succeeded, as pairs: token, value, token, value...
    fn completed(&self, pairs: Vec<i64>);
    fn failed(&self, token: i64, kind: String, message: String);
}

static QUEUED: OnceLock<mpsc::Sender<(i64, delayq::Result<i64>)>> = OnceLock::new();

/// Hands every completion to `sink` from now on (once per process): all that was queued
/// meanwhile in one upcall from the thread `delayq-callbacks`. A runtime thread never calls
/// into the JVM itself (JNA would attach it each time), and concurrent offers, which core
/// coalesces into one script call, cross into Kotlin together.
#[uniffi::export]
pub fn set_completions(sink: Arc<dyn Completions>) {
    let (tx, rx) = mpsc::channel();
    if QUEUED.set(tx).is_err() {
        return;
    }
    let deliver = move || {
        while let Ok(first) = rx.recv() {
            let mut pairs = Vec::new();
            for (token, outcome) in std::iter::once(first).chain(rx.try_iter()) {
                match outcome {
                    Ok(value) => pairs.extend([token, value]),
                    Err(e) => sink.failed(token, e.kind().as_str().into(), e.to_string()),
                }
            }
            if !pairs.is_empty() {
                sink.completed(pairs);
            }
        }
    };
    let thread = std::thread::Builder::new().name("delayq-callbacks".into());
    let started = thread.spawn(deliver);
    started.expect("cannot start delayq-callbacks");
}

pub(crate) fn complete(token: i64, outcome: delayq::Result<i64>) {
    if let Some(queued) = QUEUED.get() {
        let _ = queued.send((token, outcome));
    }
}

/// Core's hand-over of a take or receive: Kotlin waits for its ready signal (a token), then
/// claims the outcome, or gives up when its caller is gone (core gives back what it took).
macro_rules! handovers {
    ($($name:ident: $taken:ty => $out:ty, $convert:expr;)*) => { $(
        #[derive(uniffi::Object)]
        pub struct $name(pub(crate) Handover<$taken>);
        #[uniffi::export]
        impl $name {
            pub fn on_ready(&self, token: i64) {
                self.0.on_ready(move || complete(token, Ok(0)));
            }
            pub fn claim(&self) -> Res<$out> {
                match self.0.claim() {
                    Claim::Ready(outcome) => Ok(($convert)(outcome?)),
                    Claim::Pending | Claim::Ended => Err(FfiError::Closed("the call was given up")),
                }
            }
            pub fn give_up(&self) {
                self.0.give_up();
            }
        }
    )* };
}

handovers! {
    TakeHandover: Option<TakenValue> => Option<Vec<u8>>, |t: Option<TakenValue>| t.map(|t| t.value);
    ReceiveHandover: Option<delayq::Delivery> => Option<Arc<Delivery>>,
        |d: Option<_>| d.map(Delivery::new);
    ReceiveManyHandover: Vec<delayq::Delivery> => Vec<Arc<Delivery>>,
        |d: Vec<_>| d.into_iter().map(Delivery::new).collect();
}
