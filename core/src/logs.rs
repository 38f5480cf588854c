//! Forwarding core's `tracing` events to a host language's logging.
//!
//! Core logs through `tracing` (a transfer task that keeps failing, a value given back, a
//! lease lost). A Rust program installs its own subscriber; a binding calls [`forward`]
//! once with a sink that hands each [`LogRecord`] to Python's `logging`, SLF4J or a Node
//! hook. Events are queued (bounded, never blocking the thread that logs) and the sink runs
//! on one thread of its own, `delayq-logs`, so that a runtime thread never waits for a
//! GIL or a JavaScript thread, and a host that is shutting down only stalls that thread.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// Displays `T` with `\` doubled and every control character (line feed, carriage return,
/// escape...) and line or paragraph separator escaped (`\n`, `\u{1b}`), so that one record
/// is always one line: queue names, ids and errors (which may quote a name or a reply of
/// Redis) come from callers and from Redis, and a line feed in one would start a line that
/// reads as a record of its own (log forging). Core logs them through this; so does serve.
pub struct Escaped<T>(pub T);

impl<T: std::fmt::Display> std::fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Escaper<'a, 'b>(&'a mut std::fmt::Formatter<'b>);
        impl std::fmt::Write for Escaper<'_, '_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                for c in s.chars() {
                    if c == '\\' {
                        self.0.write_str("\\\\")?;
                    } else if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                        write!(self.0, "{}", c.escape_default())?;
                    } else {
                        self.0.write_char(c)?;
                    }
                }
                Ok(())
            }
        }
        write!(Escaper(f), "{}", self.0)
    }
}

/// Events queued for the sink beyond which new ones are dropped (and counted).
pub const QUEUE_LIMIT: usize = 10_000;

/// One event, ready for a host language's logger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Its level.
    pub level: LogLevel,
    /// Where it comes from, e.g. `delayq::scheduler`.
    pub target: String,
    /// The message followed by the event's fields as `key=value`.
    pub message: String,
}

/// The level of a [`LogRecord`], most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Something failed.
    Error = 1,
    /// Something may be wrong.
    Warn = 2,
    /// What happened.
    Info = 3,
    /// Details for debugging.
    Debug = 4,
    /// Every step.
    Trace = 5,
}

impl LogLevel {
    /// The level's lowercase name (`error`, `warn`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }

    fn of(level: &Level) -> LogLevel {
        match *level {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            Level::DEBUG => LogLevel::Debug,
            Level::TRACE => LogLevel::Trace,
        }
    }
}

impl std::str::FromStr for LogLevel {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<LogLevel> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(LogLevel::Error),
            "warn" | "warning" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" => Ok(LogLevel::Debug),
            "trace" => Ok(LogLevel::Trace),
            _ => Err(crate::Error::InvalidArgument(format!(
                "log level must be error, warn, info, debug or trace, got {s:?}"
            ))),
        }
    }
}

/// The most detailed level forwarded (a `LogLevel` as u8; 0: none).
static MAX_LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Warn as u8);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Where the forwarder hands records: the host's, set once.
static SINK: OnceLock<Box<dyn Fn(LogRecord) + Send + Sync>> = OnceLock::new();
/// The channel to this process's `delayq-logs` thread, started at the first record: a
/// forked child starts its own (its parent's thread is not there).
static CHANNEL: crate::process::PerProcess<Option<mpsc::SyncSender<LogRecord>>> =
    crate::process::PerProcess::new(start_sink_thread);

fn start_sink_thread() -> Option<mpsc::SyncSender<LogRecord>> {
    let sink = SINK.get()?;
    let (tx, rx) = mpsc::sync_channel::<LogRecord>(QUEUE_LIMIT);
    let spawned = std::thread::Builder::new()
        .name("delayq-logs".into())
        .spawn(move || {
            for record in rx {
                sink(record);
            }
        });
    spawned.ok().map(|_| tx)
}

/// Sets the most detailed level forwarded (default [`LogLevel::Warn`]); `None` forwards
/// nothing. Cheap: call it whenever the host's logger level may have changed.
pub fn set_max_level(level: Option<LogLevel>) {
    MAX_LEVEL.store(level.map_or(0, |l| l as u8), Ordering::Relaxed);
}

/// The most detailed level forwarded.
pub fn max_level() -> Option<LogLevel> {
    match MAX_LEVEL.load(Ordering::Relaxed) {
        1 => Some(LogLevel::Error),
        2 => Some(LogLevel::Warn),
        3 => Some(LogLevel::Info),
        4 => Some(LogLevel::Debug),
        5 => Some(LogLevel::Trace),
        _ => None,
    }
}

/// Events dropped because the sink fell more than [`QUEUE_LIMIT`] behind.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Installs the process-wide forwarder: every `tracing` event of delayq (and of the
/// crates it uses) at [`max_level`] or more severe goes to `sink`, on the `delayq-logs`
/// thread of the process (a forked child starts its own). Returns false, installing
/// nothing, when a forwarder or another global `tracing` subscriber is installed already.
pub fn forward(sink: impl Fn(LogRecord) + Send + Sync + 'static) -> bool {
    if SINK.set(Box::new(sink)).is_err() {
        return false;
    }
    let subscriber = tracing_subscriber::registry().with(Forwarder);
    tracing::subscriber::set_global_default(subscriber).is_ok()
}

/// The `tracing` layer that queues events for the sink.
struct Forwarder;

impl<S: Subscriber> Layer<S> for Forwarder {
    fn register_callsite(
        &self,
        _metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // The level can change at any time: ask `enabled` each time.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        (LogLevel::of(metadata.level()) as u8) <= MAX_LEVEL.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(tx) = CHANNEL.get() else { return };
        let mut text = Text::default();
        event.record(&mut text);
        let record = LogRecord {
            level: LogLevel::of(event.metadata().level()),
            target: event.metadata().target().to_owned(),
            message: text.message + &text.fields,
        };
        if tx.try_send(record).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// An event's message and its other fields as ` key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_order() {
        assert_eq!("WARNING".parse::<LogLevel>().unwrap(), LogLevel::Warn);
        assert!(LogLevel::Error < LogLevel::Debug);
        assert!("loud".parse::<LogLevel>().is_err());
    }

    // One test owns the process-wide forwarder.
    #[test]
    fn events_reach_the_sink_at_the_level_set() {
        let (tx, rx) = mpsc::channel();
        assert!(forward(move |r| {
            let _ = tx.send(r);
        }));
        assert!(!forward(|_| {}), "installed once");
        set_max_level(Some(LogLevel::Warn));
        tracing::info!("not forwarded");
        tracing::warn!(queue = "q", error = %"boom", "transfer failed");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(got.level, LogLevel::Warn);
        assert_eq!(got.message, "transfer failed queue=q error=boom");
        assert!(got.target.starts_with("delayq"));
        set_max_level(Some(LogLevel::Debug));
        tracing::debug!("now forwarded");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(got.message, "now forwarded");
        set_max_level(Some(LogLevel::Warn));
    }
}

#[cfg(test)]
#[test]
fn control_characters_are_escaped() {
    assert_eq!(
        Escaped("a\nb\r\u{1b}[31mc\\d\u{2028}é").to_string(),
        r"a\nb\r\u{1b}[31mc\\d\u{2028}é"
    );
    assert_eq!(Escaped("plain text: ok").to_string(), "plain text: ok");
}
