//! Core's log records to a JavaScript hook (`setLogger`), called on the JavaScript thread
//! through the pump; the `delayq-logs` thread never waits for it, and it never keeps the
//! process alive.

use std::sync::{Arc, Mutex, Once, PoisonError};

use napi::bindgen_prelude::{FnArgs, FunctionRef};
use napi::Env;
use napi_derive::napi;

use crate::bridge::{self, Pump};
use crate::error::{IntoJs, Result};

/// The hook, called with a record's level, target and message.
type Hook = FunctionRef<FnArgs<(String, String, String)>, ()>;

static HOOK: Mutex<Option<(Arc<Pump>, Arc<Hook>)>> = Mutex::new(None);

/// Hands core's log records at `level` (default `warn`) or more severe to `hook`; none:
/// stops forwarding.
#[napi(
    ts_args_type = "hook?: (level: string, target: string, message: string) => void, level?: string"
)]
pub fn set_logger(env: &Env, hook: Option<Hook>, level: Option<String>) -> Result<()> {
    let level = level.as_deref().unwrap_or("warn").parse().js()?;
    let hook = hook.map(|h| Ok::<_, crate::error::Error>((bridge::pump(env)?, Arc::new(h))));
    let hook = hook.transpose()?;
    delayq::logs::set_max_level(hook.as_ref().map(|_| level));
    *HOOK.lock().unwrap_or_else(PoisonError::into_inner) = hook;
    static FORWARD: Once = Once::new();
    FORWARD.call_once(|| {
        delayq::logs::forward(|r| {
            let hook = HOOK.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let Some((pump, hook)) = hook else { return };
            pump.post(Box::new(move |env| {
                if let Ok(f) = hook.borrow_back(env) {
                    let _ = f.call((r.level.as_str().to_owned(), r.target, r.message).into());
                }
            }));
        });
    });
    Ok(())
}
