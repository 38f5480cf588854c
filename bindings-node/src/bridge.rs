//! Core's tasks to the JavaScript thread. One threadsafe function per environment, the
//! pump, carries every completion (napi's `async fn` makes one per call): a task that
//! finishes queues a job, and one wake-up of the JavaScript thread runs every job queued
//! meanwhile. The pump keeps the event loop alive only while a promise is pending.
//!
//! `take`, `receive`, `receiveMany` and `consume` run as core [`Handover`]s registered under
//! an id chosen by JavaScript: the promise resolving is "claimed"; [`give_up`] (an
//! AbortSignal) and [`exiting`] (the process exits) are "gone".

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use delayq::handover::{Claim, Handover, Taken};
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env, JsValue};
use napi_derive::napi;

use crate::error::{from_napi, Error, IntoJs, Result};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
/// Work for the JavaScript thread.
pub type Job = Box<dyn FnOnce(&Env) + Send>;

/// The jobs of one environment and the threadsafe function that wakes its thread.
#[derive(Default)]
pub struct Pump {
    jobs: Mutex<Vec<Job>>,
    tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
}

impl Pump {
    /// Queues `job`, waking the JavaScript thread unless jobs are queued already.
    pub fn post(&self, job: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let tsfn = self.tsfn.load(Relaxed);
        if tsfn.is_null() {
            // The environment is gone (`torn_down`): nothing would run the job, and
            // dropping it could call into the environment.
            std::mem::forget(job);
            return;
        }
        jobs.push(job);
        if jobs.len() == 1 {
            let mode = sys::ThreadsafeFunctionCallMode::nonblocking;
            unsafe { sys::napi_call_threadsafe_function(tsfn, null_mut(), mode) };
        }
    }
}

/// The environment's cleanup hook, run before Node frees the pump's threadsafe function
/// (hooks run last-added first): posting does nothing from now on. A runtime thread that
/// called the freed function (a log record as the process exits) aborted the process.
/// Under the jobs lock, so that a post in progress finishes first.
unsafe extern "C" fn torn_down(pump: *mut c_void) {
    let pump = unsafe { &*pump.cast::<Pump>() };
    let mut jobs = pump.jobs.lock().unwrap_or_else(PoisonError::into_inner);
    pump.tsfn.store(null_mut(), Relaxed);
    std::mem::forget(std::mem::take(&mut *jobs));
}

/// The JavaScript thread's pump, promises pending and handovers waiting.
#[derive(Default)]
struct Local {
    pump: Option<Arc<Pump>>,
    pending: usize,
    waits: HashMap<u32, Box<dyn Waiting>>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::default();
}

fn check(status: sys::napi_status) -> Result<()> {
    napi::check_status!(status).map_err(from_napi)
}

/// The pump of this (JavaScript) thread's environment.
pub fn pump(env: &Env) -> Result<Arc<Pump>> {
    if let Some(pump) = LOCAL.with_borrow(|l| l.pump.clone()) {
        return Ok(pump);
    }
    let (pump, e, mut tsfn) = (Arc::new(Pump::default()), env.raw(), null_mut());
    let name = env.create_string("delayq").map_err(from_napi)?.raw();
    let context = Arc::into_raw(pump.clone()).cast_mut().cast(); // as long as the environment
    let (js, no, run) = (null_mut(), null_mut(), Some(run_jobs as _));
    check(unsafe {
        sys::napi_create_threadsafe_function(
            e, js, js, name, 0, 1, no, None, context, run, &mut tsfn,
        )
    })?;
    check(unsafe { sys::napi_unref_threadsafe_function(e, tsfn) })?;
    pump.tsfn.store(tsfn, Relaxed);
    check(unsafe { sys::napi_add_env_cleanup_hook(e, Some(torn_down), context) })?;
    LOCAL.with_borrow_mut(|l| l.pump = Some(pump.clone()));
    Ok(pump)
}

/// The pump's callback: runs the jobs queued so far, each in a handle scope; one that
/// threw is reported like any uncaught exception.
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
    for job in jobs {
        let (mut scope, mut thrown, mut error) = (null_mut(), false, null_mut());
        unsafe { sys::napi_open_handle_scope(e, &mut scope) };
        job(&Env::from_raw(e));
        unsafe {
            sys::napi_is_exception_pending(e, &mut thrown);
            if thrown && sys::napi_get_and_clear_last_exception(e, &mut error) == 0 {
                sys::napi_fatal_exception(e, error);
            }
            sys::napi_close_handle_scope(e, scope);
        }
    }
}

/// Counts a pending promise in (`+1`) or out (`-1`); the pump holds the event loop while
/// any is pending.
fn hold(env: &Env, delta: isize) {
    LOCAL.with_borrow_mut(|l| {
        let before = l.pending;
        l.pending = before.wrapping_add_signed(delta);
        let tsfn = l.pump.as_ref().map_or(null_mut(), |p| p.tsfn.load(Relaxed));
        match (before, delta > 0) {
            (0, true) => unsafe { sys::napi_ref_threadsafe_function(env.raw(), tsfn) },
            (1, false) => unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) },
            _ => 0,
        };
    });
}

/// A promise, settled on the JavaScript thread.
struct Deferred(sys::napi_deferred);
// SAFETY: only settled on the JavaScript thread (by a job of the pump).
unsafe impl Send for Deferred {}

fn deferred<'e, T>(env: &'e Env) -> Result<(Deferred, PromiseRaw<'e, T>)> {
    let (mut deferred, mut promise) = (null_mut(), null_mut());
    check(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
    hold(env, 1);
    Ok((Deferred(deferred), PromiseRaw::new(env.raw(), promise)))
}

impl Deferred {
    fn settle<T: ToNapiValue>(self, env: &Env, out: Result<T>) {
        hold(env, -1);
        let env = env.raw();
        match out.and_then(|v| unsafe { T::to_napi_value(env, v) }.map_err(from_napi)) {
            Ok(v) => unsafe { sys::napi_resolve_deferred(env, self.0, v) },
            Err(e) => unsafe {
                let e = Error::to_napi_value(env, e).unwrap_or(null_mut());
                sys::napi_reject_deferred(env, self.0, e)
            },
        };
    }
}

/// Runs `call` on the runtime; the promise settles with its outcome.
pub fn promise<'e, T, F>(env: &'e Env, call: F) -> Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = delayq::Result<T>> + Send + 'static,
{
    let (pump, (deferred, promise)) = (pump(env)?, deferred(env)?);
    napi::bindgen_prelude::spawn(async move {
        let out = call.await.js();
        pump.post(Box::new(move |env| deferred.settle(env, out)));
    });
    Ok(promise)
}

/// A handover waiting for its promise, as the JavaScript thread sees it.
trait Waiting {
    /// Core's call returned (`claimed`: the promise resolves to the outcome) or an
    /// AbortSignal fired (what was taken goes back; the wrapper rejected its own promise).
    fn end(self: Box<Self>, env: &Env, claimed: bool);
    /// The process exits: gives back what was taken.
    fn give_back(self: Box<Self>) -> BoxFuture;
}

struct Wait<T: Taken, J>(Handover<T>, Deferred, fn(T) -> J);

impl<T: Taken, J: ToNapiValue> Waiting for Wait<T, J> {
    fn end(self: Box<Self>, env: &Env, claimed: bool) {
        let Wait(handover, deferred, js) = *self;
        let out = match claimed.then(|| handover.claim()) {
            Some(Claim::Ready(out)) => out.js().map(|v| Some(js(v))),
            _ => Ok(None), // dropping the handover gives up
        };
        deferred.settle(env, out);
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        let handover = self.0;
        Box::pin(async move { handover.give_back().await })
    }
}

fn end(env: &Env, id: u32, claimed: bool) {
    if let Some(w) = LOCAL.with_borrow_mut(|l| l.waits.remove(&id)) {
        w.end(env, claimed);
    }
}

/// Registers `handover` under `id`; the promise resolves to `js(outcome)` once claimed.
pub fn wait<'e, T: Taken, J: ToNapiValue + 'static>(
    env: &'e Env,
    id: u32,
    handover: Handover<T>,
    js: fn(T) -> J,
) -> Result<PromiseRaw<'e, J>> {
    let (pump, (deferred, promise)) = (pump(env)?, deferred(env)?);
    handover.on_ready(move || pump.post(Box::new(move |env| end(env, id, true))));
    let wait = Box::new(Wait(handover, deferred, js));
    LOCAL.with_borrow_mut(|l| l.waits.insert(id, wait));
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
    end(env, id, false);
}

/// The process exits (`process.on('exit')`): pending waits give back what they took, for
/// up to 2 s.
#[napi]
pub fn exiting() {
    let waits: Vec<_> = LOCAL.with_borrow_mut(|l| l.waits.drain().map(|(_, w)| w).collect());
    if !waits.is_empty() {
        let all = async move {
            for w in waits {
                w.give_back().await;
            }
        };
        let limit = std::time::Duration::from_secs(2);
        let _ = napi::bindgen_prelude::block_on(async { tokio::time::timeout(limit, all).await });
    }
}
