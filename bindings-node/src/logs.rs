//! Core's log records to a JavaScript hook (`setLogger`), called on the JavaScript thread
//! through the pump; the `delayq-logs` thread never waits for it, and it never keeps the
//! process alive.

use std::sync::{Arc, Mutex, Once, PoisonError};

use napi::bindgen_prelude::FunctionRef;
use napi::Env;
use napi_derive::napi;

use crate::bridge::{self, Pump};
use crate::error::{IntoJs, Result};

/// One of core's log records.
#[napi(object)]
pub struct LogRecord {
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub level: String,
    /// Where it comes from, e.g. `delayq::scheduler`.
    pub target: String,
    /// The message and its fields as `key=value`.
    pub message: String,
}

type Hook = Arc<FunctionRef<LogRecord, ()>>;

static HOOK: Mutex<Option<(Arc<Pump>, Hook)>> = Mutex::new(None);

/// Hands core's log records at `level` (default `warn`) or more severe to `hook`; none:
/// stops forwarding.
#[napi]
pub fn set_logger(
    env: &Env,
    hook: Option<FunctionRef<LogRecord, ()>>,
    level: Option<String>,
) -> Result<()> {
    let level = level.as_deref().unwrap_or("warn").parse().js()?;
    let hook = hook.map(|h| Ok::<_, crate::error::Error>((bridge::pump(env)?, Arc::new(h))));
    let hook = hook.transpose()?;
    delayq::logs::set_max_level(hook.as_ref().map(|_| level));
    *HOOK.lock().unwrap_or_else(PoisonError::into_inner) = hook;
    static FORWARD: Once = Once::new();
    FORWARD.call_once(|| {
        delayq::logs::forward(|record| {
            let Some((pump, hook)) = HOOK.lock().unwrap_or_else(PoisonError::into_inner).clone()
            else {
                return;
            };
            pump.post(Box::new(move |env| {
                let record = LogRecord {
                    level: record.level.as_str().to_owned(),
                    target: record.target,
                    message: record.message,
                };
                if let Ok(f) = hook.borrow_back(env) {
                    let _ = f.call(record);
                }
            }));
        });
    });
    Ok(())
}
