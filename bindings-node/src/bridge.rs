//! Core's tasks to the JavaScript thread. One threadsafe function per environment, the
//! pump, carries every completion (napi's `async fn` makes one per call) through core's
//! [`Batch`]: one wake-up of the JavaScript thread runs every job queued meanwhile. The
//! pump keeps the event loop alive only while a promise is pending.
//!
//! `take`, `receive`, `receiveMany` and `consume` run as core [`Handover`]s registered in
//! core's [`Waits`] under an id chosen by JavaScript: the promise resolving is "claimed";
//! [`give_up`] (an AbortSignal) and [`exiting`] (the process exits) are "gone".

use std::cell::{Cell, OnceCell, RefCell};
use std::ffi::c_void;
use std::future::Future;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::sync::Arc;

use delayq::bridge::{Batch, Waits};
use delayq::handover::{Handover, Taken};
use delayq::Result as CoreResult;
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env, JsValue};
use napi_derive::napi;

use crate::error::{from_napi, Error, IntoJs, Result};

/// Work for the JavaScript thread.
pub type Job = Box<dyn FnOnce(&Env) + Send>;

/// The jobs of one environment and the threadsafe function that wakes its thread.
#[derive(Default)]
pub struct Pump {
    jobs: Batch<Job>,
    tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
}

impl Pump {
    /// Queues `job`, waking the JavaScript thread unless jobs are queued already.
    pub fn post(&self, job: Job) {
        let mode = sys::ThreadsafeFunctionCallMode::nonblocking;
        let tsfn = self.tsfn.load(Relaxed);
        self.jobs.push(job, || unsafe {
            sys::napi_call_threadsafe_function(tsfn, null_mut(), mode);
        });
    }
}

/// The environment's cleanup hook, run before Node frees the pump's threadsafe function
/// (hooks run last-added first): posting does nothing from now on. A runtime thread that
/// called the freed function (a log record as the process exits) aborted the process.
unsafe extern "C" fn torn_down(pump: *mut c_void) {
    let pump = unsafe { &*pump.cast::<Pump>() };
    pump.jobs.close();
    pump.tsfn.store(null_mut(), Relaxed); // napi refuses a null one: `hold` does nothing
}

thread_local! {
    /// The pump of this (JavaScript) thread's environment.
    static PUMP: OnceCell<Arc<Pump>> = const { OnceCell::new() };
    /// Promises pending: the pump holds the event loop while any is.
    static PENDING: Cell<usize> = const { Cell::new(0) };
    static WAITS: RefCell<Waits<Env>> = RefCell::default();
}

fn check(status: sys::napi_status) -> Result<()> {
    napi::check_status!(status).map_err(from_napi)
}

/// The pump of this (JavaScript) thread's environment.
pub fn pump(env: &Env) -> Result<Arc<Pump>> {
    if let Some(pump) = PUMP.with(|p| p.get().cloned()) {
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
    Ok(PUMP.with(|p| p.get_or_init(|| pump).clone()))
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
    for job in unsafe { &*pump.cast::<Pump>() }.jobs.drain() {
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
    let before = PENDING.replace(PENDING.get().wrapping_add_signed(delta));
    let tsfn = PUMP.with(|p| p.get().map_or(null_mut(), |p| p.tsfn.load(Relaxed)));
    match (before, delta > 0) {
        (0, true) => unsafe { sys::napi_ref_threadsafe_function(env.raw(), tsfn) },
        (1, false) => unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) },
        _ => 0,
    };
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
    F: Future<Output = CoreResult<T>> + Send + 'static,
{
    let (pump, (deferred, promise)) = (pump(env)?, deferred(env)?);
    napi::bindgen_prelude::spawn(async move {
        let out = call.await.js();
        pump.post(Box::new(move |env| deferred.settle(env, out)));
    });
    Ok(promise)
}

/// Registers `handover` under `id`; once claimed, the promise resolves to `js(outcome)`
/// (given up, to null: the wrapper rejected its own promise).
pub fn wait<'e, T: Taken, J: ToNapiValue + 'static>(
    env: &'e Env,
    id: u32,
    handover: Handover<T>,
    js: fn(T) -> J,
) -> Result<PromiseRaw<'e, J>> {
    let (pump, (deferred, promise)) = (pump(env)?, deferred(env)?);
    handover.on_ready(move || pump.post(Box::new(move |env| end(*env, id, true))));
    let finish = move |env: Env, out: Option<CoreResult<T>>| {
        let out = out.map(|out| out.js().map(js)).transpose();
        deferred.settle(&env, out);
    };
    WAITS.with_borrow_mut(|w| w.insert(id.into(), handover, finish));
    Ok(promise)
}

fn end(env: Env, id: u32, claimed: bool) {
    if let Some(wait) = WAITS.with_borrow_mut(|w| w.remove(id.into())) {
        wait.end(env, claimed);
    }
}

/// Gives up the wait `id` (its AbortSignal fired): what it took goes back to the queue.
#[napi]
pub fn give_up(env: &Env, id: u32) {
    end(*env, id, false);
}

/// The process exits (`process.on('exit')`): pending waits give back what they took, for
/// up to core's `EXIT_LIMIT`.
#[napi]
pub fn exiting() {
    let limit = delayq::bridge::EXIT_LIMIT;
    let all = WAITS.with_borrow_mut(|w| (!w.is_empty()).then(|| w.give_back_all(limit)));
    if let Some(all) = all {
        napi::bindgen_prelude::block_on(all);
    }
}
