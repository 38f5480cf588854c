//! Core's tasks to the JavaScript thread.
//!
//! One threadsafe function per environment, the pump, carries every completion (napi's
//! `async fn` makes one per call): a task that finishes queues a job, and one wake-up of
//! the JavaScript thread runs every job queued meanwhile (settling promises, calling a
//! consume handler, handing a log record to the hook). The pump keeps the event loop alive
//! only while a promise is pending.
//!
//! `take`, `receive`, `receiveMany` and `consume` run as core [`Handover`]s registered under
//! an id chosen by JavaScript: the promise resolving into JavaScript is "claimed";
//! [`give_up`] (an AbortSignal) and [`exiting`] (the process exits) are "gone".

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use delayq::handover::{Claim, Handover, Taken};
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env};
use napi_derive::napi;

use crate::error::{from_napi, Error, IntoJs, Result};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Work for the JavaScript thread.
pub type Job = Box<dyn FnOnce(&Env) + Send>;

/// The jobs of one environment and the threadsafe function that wakes its thread.
pub struct Pump {
    jobs: Mutex<Vec<Job>>,
    tsfn: OnceLock<Tsfn>,
}

struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function is made to be called from any thread.
unsafe impl Send for Tsfn {}
unsafe impl Sync for Tsfn {}

impl Pump {
    /// Queues `job`, waking the JavaScript thread unless jobs are queued already.
    pub fn post(&self, job: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.push(job);
        if let (1, Some(t)) = (jobs.len(), self.tsfn.get()) {
            // Fails only while the environment closes, when nothing would run the jobs.
            let nonblocking = sys::ThreadsafeFunctionCallMode::nonblocking;
            unsafe { sys::napi_call_threadsafe_function(t.0, ptr::null_mut(), nonblocking) };
        }
    }
}

thread_local! {
    static PUMP: RefCell<Option<Arc<Pump>>> = const { RefCell::new(None) };
    /// Promises pending: the pump keeps the event loop alive while there are any.
    static PENDING: Cell<usize> = const { Cell::new(0) };
    static WAITS: RefCell<HashMap<u32, Box<dyn Waiting>>> = RefCell::new(HashMap::new());
}

/// The pump of this (JavaScript) thread's environment.
pub fn pump(env: &Env) -> Result<Arc<Pump>> {
    if let Some(pump) = PUMP.with(|p| p.borrow().clone()) {
        return Ok(pump);
    }
    let pump = Arc::new(Pump {
        jobs: Mutex::default(),
        tsfn: OnceLock::new(),
    });
    let (e, context) = (env.raw(), Arc::into_raw(pump.clone()).cast_mut().cast());
    let (mut name, mut raw, null) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    unsafe {
        check(sys::napi_create_string_utf8(
            e,
            c"delayq".as_ptr(),
            6,
            &mut name,
        ))?;
        let run = Some(run_jobs as _);
        check(sys::napi_create_threadsafe_function(
            e,
            null,
            null,
            name,
            0,
            1,
            ptr::null_mut(),
            None,
            context,
            run,
            &mut raw,
        ))?;
        check(sys::napi_unref_threadsafe_function(e, raw))?;
    }
    let _ = pump.tsfn.set(Tsfn(raw));
    PUMP.with(|p| *p.borrow_mut() = Some(pump.clone()));
    Ok(pump)
}

/// The pump's callback, on the JavaScript thread: runs the jobs queued so far, each in a
/// handle scope; one that threw is reported like any uncaught exception.
unsafe extern "C" fn run_jobs(
    e: sys::napi_env,
    _: sys::napi_value,
    pump: *mut c_void,
    _: *mut c_void,
) {
    if e.is_null() {
        return; // the environment is being torn down
    }
    let pump = unsafe { &*pump.cast::<Pump>() };
    let jobs = std::mem::take(&mut *pump.jobs.lock().unwrap_or_else(PoisonError::into_inner));
    let env = Env::from_raw(e);
    for job in jobs {
        let (mut scope, mut thrown, mut error) = (ptr::null_mut(), false, ptr::null_mut());
        unsafe { sys::napi_open_handle_scope(e, &mut scope) };
        job(&env);
        unsafe {
            sys::napi_is_exception_pending(e, &mut thrown);
            if thrown && sys::napi_get_and_clear_last_exception(e, &mut error) == 0 {
                sys::napi_fatal_exception(e, error);
            }
            sys::napi_close_handle_scope(e, scope);
        }
    }
}

fn check(status: sys::napi_status) -> Result<()> {
    match status {
        sys::Status::napi_ok => Ok(()),
        s => Err(from_napi(napi::Error::new(s.into(), "napi call failed"))),
    }
}

/// Counts a pending promise in (`+1`) or out (`-1`); the pump holds the event loop while
/// any is pending.
fn hold(env: &Env, delta: isize) {
    let before = PENDING.with(|p| p.replace(p.get().wrapping_add_signed(delta)));
    if (before == 0) == (before.wrapping_add_signed(delta) == 0) {
        return;
    }
    let tsfn = PUMP.with(|p| p.borrow().as_ref().and_then(|p| p.tsfn.get().map(|t| t.0)));
    if let Some(t) = tsfn {
        unsafe {
            match delta > 0 {
                true => sys::napi_ref_threadsafe_function(env.raw(), t),
                false => sys::napi_unref_threadsafe_function(env.raw(), t),
            }
        };
    }
}

/// A promise to settle on the JavaScript thread.
struct Deferred(sys::napi_deferred);
// SAFETY: only settled on the JavaScript thread (by a job of the pump).
unsafe impl Send for Deferred {}

fn deferred<'e, T>(env: &'e Env) -> Result<(Deferred, PromiseRaw<'e, T>)> {
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    check(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
    hold(env, 1);
    Ok((Deferred(deferred), PromiseRaw::new(env.raw(), promise)))
}

impl Deferred {
    fn settle<T: ToNapiValue>(self, env: &Env, out: Result<T>) {
        hold(env, -1);
        let env = env.raw();
        let value = out.and_then(|v| unsafe { T::to_napi_value(env, v) }.map_err(from_napi));
        unsafe {
            match value {
                Ok(v) => sys::napi_resolve_deferred(env, self.0, v),
                Err(e) => match Error::to_napi_value(env, e) {
                    Ok(e) => sys::napi_reject_deferred(env, self.0, e),
                    Err(_) => sys::napi_reject_deferred(env, self.0, ptr::null_mut()),
                },
            }
        };
    }
}

/// Runs `call` on the runtime; the promise settles with its outcome.
pub fn promise<'e, T, F>(env: &'e Env, call: F) -> Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    let pump = pump(env)?;
    let (deferred, promise) = deferred(env)?;
    napi::bindgen_prelude::spawn(async move {
        let out = call.await.js();
        pump.post(Box::new(move |env| deferred.settle(env, out)));
    });
    Ok(promise)
}

/// A handover waiting for its promise, as the JavaScript thread sees it.
trait Waiting {
    /// Core's call returned: the outcome is claimed and resolves the promise.
    fn claim(self: Box<Self>, env: &Env);
    /// An AbortSignal fired: the handover gives back what it took; the promise resolves to
    /// undefined (the wrapper has rejected its own with an AbortError).
    fn give_up(self: Box<Self>, env: &Env);
    /// The process exits: gives back what was taken.
    fn give_back(self: Box<Self>) -> BoxFuture;
}

struct Wait<T: Taken, J> {
    handover: Handover<T>,
    deferred: Deferred,
    js: fn(T) -> J,
}

impl<T: Taken, J: ToNapiValue> Waiting for Wait<T, J> {
    fn claim(self: Box<Self>, env: &Env) {
        let out = match self.handover.claim() {
            Claim::Ready(out) => out.js().map(|v| Some((self.js)(v))),
            Claim::Pending | Claim::Ended => Ok(None),
        };
        self.deferred.settle(env, out);
    }

    fn give_up(self: Box<Self>, env: &Env) {
        self.handover.give_up();
        self.deferred.settle(env, Ok(()));
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        let handover = self.handover;
        Box::pin(async move { handover.give_back().await })
    }
}

fn take_wait(id: u32) -> Option<Box<dyn Waiting>> {
    WAITS.with(|w| w.borrow_mut().remove(&id))
}

/// Registers `handover` under `id`; the promise resolves to `js(outcome)` once claimed.
pub fn wait<'e, T: Taken, J: ToNapiValue + 'static>(
    env: &'e Env,
    id: u32,
    handover: Handover<T>,
    js: fn(T) -> J,
) -> Result<PromiseRaw<'e, J>> {
    let pump = pump(env)?;
    let (deferred, promise) = deferred(env)?;
    handover.on_ready(move || {
        pump.post(Box::new(move |env| {
            if let Some(w) = take_wait(id) {
                w.claim(env);
            }
        }))
    });
    let wait = Box::new(Wait {
        handover,
        deferred,
        js,
    });
    WAITS.with(|w| w.borrow_mut().insert(id, wait));
    Ok(promise)
}

/// The client's runtime (napi's), for handovers.
pub fn runtime() -> tokio::runtime::Handle {
    napi::bindgen_prelude::within_runtime_if_available(tokio::runtime::Handle::current)
}

/// What `consume` hands over: nothing (core's consume gives back its own deliveries).
pub struct Nothing;

impl Taken for Nothing {
    fn give_back(self) -> BoxFuture {
        Box::pin(async {})
    }
}

/// Gives up the wait `id` (its AbortSignal fired): what it took goes back to the queue.
#[napi]
pub fn give_up(env: &Env, id: u32) {
    if let Some(w) = take_wait(id) {
        w.give_up(env);
    }
}

/// The process exits (`process.on('exit')`): pending waits give back what they took, for
/// up to 2 s.
#[napi]
pub fn exiting() {
    let waits: Vec<_> = WAITS.with(|w| w.borrow_mut().drain().map(|(_, w)| w).collect());
    if !waits.is_empty() {
        let all = async move {
            for w in waits {
                w.give_back().await;
            }
        };
        let limit = std::time::Duration::from_secs(2);
        let _ =
            napi::bindgen_prelude::block_on(async move { tokio::time::timeout(limit, all).await });
    }
}
