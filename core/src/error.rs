//! One error taxonomy for every language. Bindings map [`ErrorKind`] to their own
//! exception classes or error codes; nothing else about errors is decided there.

use std::fmt;

/// The kind of an [`Error`], stable across languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument (negative or overflowing delay, empty name, oversized value...).
    /// Raised before anything reaches Redis.
    InvalidArgument,
    /// Redis could not be reached, or the connection broke or went silent. When the
    /// request may have been sent, its outcome is unknown and the message says so: an
    /// offer that failed may be stored (offer again with the same id: it is not created
    /// twice), an ack that failed may have happened (at-least-once: the message may come
    /// back). See docs/faults.md, "What a caller may assume when a call fails".
    Connection,
    /// An operation took longer than its time limit (with the durability option: a write
    /// applied on the master that replicas did not confirm in time).
    Timeout,
    /// A key of the queue holds another Redis type (`WRONGTYPE`). Nothing was written.
    WrongType,
    /// The queue handle or the client was closed.
    Closed,
    /// Any other error reported by the server (for example `OOM`, `NOPERM`).
    Server,
}

impl ErrorKind {
    /// A short, stable, machine-readable name (`invalid_argument`, `connection`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Connection => "connection",
            ErrorKind::Timeout => "timeout",
            ErrorKind::WrongType => "wrong_type",
            ErrorKind::Closed => "closed",
            ErrorKind::Server => "server",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error from delayq. The message never contains credentials.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// See [`ErrorKind::InvalidArgument`].
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// See [`ErrorKind::Connection`].
    #[error("connection error: {0}")]
    Connection(String),
    /// See [`ErrorKind::Timeout`].
    #[error("timed out: {0}")]
    Timeout(String),
    /// See [`ErrorKind::WrongType`].
    #[error("wrong type: {0}")]
    WrongType(String),
    /// See [`ErrorKind::Closed`].
    #[error("closed: {0}")]
    Closed(&'static str),
    /// See [`ErrorKind::Server`].
    #[error("server error: {0}")]
    Server(String),
}

/// Result with a delayq [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Connection(_) => ErrorKind::Connection,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::WrongType(_) => ErrorKind::WrongType,
            Error::Closed(_) => ErrorKind::Closed,
            Error::Server(_) => ErrorKind::Server,
        }
    }

    /// A panic caught in delayq's code, as a `server` error that says it is a bug.
    pub fn from_panic(panic: Box<dyn std::any::Any + Send>) -> Self {
        let text = panic.downcast_ref::<&str>().map_or("", |s| *s);
        let text = panic.downcast_ref::<String>().map_or(text, String::as_str);
        Error::Server(format!("internal error (a bug in delayq): {text}"))
    }

    /// The message without the kind's prefix (for an error wrapped in another).
    pub(crate) fn detail(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::Connection(m)
            | Error::Timeout(m)
            | Error::WrongType(m)
            | Error::Server(m) => m,
            Error::Closed(m) => m,
        }
    }

    /// Whether the server refused the client's credentials (a wrong or missing password or
    /// user): a `connection` error that waiting will not cure, unlike an unreachable server.
    pub fn is_auth_failure(&self) -> bool {
        let Error::Connection(m) = self else {
            return false;
        };
        [
            "NOAUTH",
            "WRONGPASS",
            "authentication failed",
            "Authentication failed",
        ]
        .iter()
        .any(|t| m.contains(t))
    }

    /// This error, as seen by a call that waited for another call's attempt (a connection,
    /// a first reading of the settings) and shares its outcome: a time limit it names was
    /// the other call's, counted from before this call began.
    pub(crate) fn joined(&self) -> Self {
        match self {
            Error::Timeout(m) => Error::Timeout(format!(
                "{m} (an attempt that another call began earlier, which this call waited for)"
            )),
            e => e.clone(),
        }
    }

    /// This error with `note` appended to its message (same kind): what a call that did
    /// part of its work before failing had done.
    pub(crate) fn with_note(&self, note: &str) -> Self {
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(format!("{m}; {note}")),
            Error::Connection(m) => Error::Connection(format!("{m}; {note}")),
            Error::Timeout(m) => Error::Timeout(format!("{m}; {note}")),
            Error::WrongType(m) => Error::WrongType(format!("{m}; {note}")),
            Error::Server(m) => Error::Server(format!("{m}; {note}")),
            Error::Closed(m) => Error::Closed(m),
        }
    }

    /// Whether this is a reply that arrived cut short or unreadable: the server answered,
    /// so a command that hands something over (BLPOP, XREADGROUP) did.
    pub(crate) fn reply_was_cut(&self) -> bool {
        matches!(self, Error::Connection(m) if m.contains(REPLY_CUT))
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

/// `e`, and when it is a WRONGTYPE of a command (a script's names its key itself), the
/// first of `keys` (each with the type it should be) that holds another type, read with
/// `TYPE` on `conn`: "WRONGTYPE: key K holds a string, not a list".
pub(crate) async fn naming_wrong_key(
    conn: &mut (impl redis::aio::ConnectionLike + Send),
    e: Error,
    keys: &[(&str, &str)],
) -> Error {
    match &e {
        Error::WrongType(m) if !m.contains(" holds a ") => {}
        _ => return e,
    }
    for (key, want) in keys {
        let found: redis::RedisResult<String> =
            redis::cmd("TYPE").arg(*key).query_async(conn).await;
        match found {
            Ok(t) if t != "none" && t != *want => {
                return Error::WrongType(format!(
                    "\"WRONGTYPE\": key {key} holds a {t}, not a {want}"
                ));
            }
            _ => {}
        }
    }
    e
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        // Messages from redis-rs never carry the URL or the password; server
        // replies cannot either, since we never send credentials as data.
        let msg = e.to_string();
        if e.code() == Some("WRONGTYPE") || msg.contains("WRONGTYPE") {
            return Error::WrongType(msg);
        }
        if e.is_timeout() {
            crate::metrics::record_connection_error(true);
            return Error::Timeout(msg);
        }
        if e.is_io_error()
            // No password given to a server that wants one; a wrong one, answered to a
            // RESP3 `HELLO 3 AUTH` as a plain reply (RESP2's AUTH is AuthenticationFailed).
            || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
            || matches!(
                e.kind(),
                redis::ErrorKind::AuthenticationFailed
                    | redis::ErrorKind::InvalidClientConfig
                    | redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
            )
        {
            crate::metrics::record_connection_error(false);
            return Error::Connection(outcome_said(&e, msg));
        }
        if matches!(e.code(), Some("MOVED" | "ASK")) {
            // A node of a cluster reached as one server: redis-rs says only "Moved".
            return Error::Server(format!(
                "{msg}: {}",
                "a Redis Cluster node redirected the request; a cluster needs the cluster option or a list of seed URLs"
            ));
        }
        Error::Server(msg)
    }
}

/// How a `connection` error whose reply was cut short begins its text.
const REPLY_CUT: &str = "the reply from Redis was cut short or could not be read";

/// A `connection` error's text, saying what the caller may assume (SPEC 10): a reply cut
/// short reads as redis-rs's parser's (several lines, as if the data were at fault), and
/// a closed connection as the operating system's ("broken pipe", "connection reset"),
/// neither of which says that a command on its way may have run. A refused connection
/// ran nothing; delayq's own texts say it already.
fn outcome_said(e: &redis::RedisError, msg: String) -> String {
    if msg.contains("unknown") || msg.contains("did not run") || msg.contains("not sent") {
        return msg;
    }
    if e.kind() == redis::ErrorKind::Parse {
        // (redis-rs's own text names a parser position, as if the data were at fault.)
        return format!("{REPLY_CUT}; whether the command ran is unknown");
    }
    // Connecting, not a request: refused (also when a layer above redis-rs carried the
    // refusal as text), no master to connect to, no node to start from.
    let connecting = [
        "refused",
        "no master from the sentinels",
        "initial connections",
    ];
    if connecting.iter().any(|t| msg.contains(t)) {
        return msg;
    }
    if (e.is_io_error() || e.is_connection_dropped()) && !e.is_connection_refusal() {
        return format!("{msg} (if a command was on its way, whether it ran is unknown)");
    }
    msg
}

/// Runs `fut`; a panic in it becomes its error ([`Error::from_panic`]) rather than a
/// task that never answers (a binding's future would wait forever).
pub async fn caught<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use futures_util::FutureExt;
    let fut = std::panic::AssertUnwindSafe(fut).catch_unwind();
    fut.await
        .unwrap_or_else(|panic| Err(Error::from_panic(panic)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_error_says_the_outcome_may_be_unknown() {
        let io = |kind, text| redis::RedisError::from(std::io::Error::new(kind, text));
        let reset = Error::from(io(std::io::ErrorKind::ConnectionReset, "reset by peer"));
        assert_eq!(reset.kind(), ErrorKind::Connection);
        assert!(
            reset.to_string().contains("whether it ran is unknown"),
            "{reset}"
        );
        let refused = Error::from(io(std::io::ErrorKind::ConnectionRefused, "refused"));
        assert_eq!(refused.kind(), ErrorKind::Connection);
        assert!(!refused.to_string().contains("unknown"), "{refused}");
        // A refusal carried as text by a layer above redis-rs ran nothing either.
        let text = io(
            std::io::ErrorKind::Other,
            "Connection refused (os error 111)",
        );
        assert!(!Error::from(text).to_string().contains("unknown"));
        let cut = redis::RedisError::from((
            redis::ErrorKind::Parse,
            "Incompatible type - Parse error at 9",
            "Unexpected end of input\nexpected 4 more elements".to_owned(),
        ));
        let cut = Error::from(cut);
        assert_eq!(cut.kind(), ErrorKind::Connection);
        assert!(cut.to_string().contains("cut short"), "{cut}");
        assert!(cut.reply_was_cut());
        assert!(!cut.to_string().contains('\n'), "{cut}");
        assert!(!cut.to_string().contains("Parse error"), "{cut}");
    }

    #[tokio::test]
    async fn a_panic_in_a_caught_future_is_a_server_error_naming_a_bug() {
        let panicking = async {
            if true {
                panic!("went wrong");
            }
            Ok(())
        };
        let e = caught(panicking).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Server);
        assert!(
            e.to_string().contains("a bug in delayq): went wrong"),
            "{e}"
        );
        assert_eq!(caught(async { Ok(7) }).await.unwrap(), 7);
    }
}
