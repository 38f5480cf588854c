//! Core's error taxonomy, mapped once. The Kotlin facade turns each variant into its
//! exception class (`InvalidArgumentException`, ...), all subclasses of `DelayqException`.

/// A delayq error as it crosses into Kotlin (`FfiException.InvalidArgument`, ...).
#[derive(Debug, thiserror::Error, uniffi::Error)]
#[uniffi(flat_error)]
pub enum FfiError {
    /// A bad argument; nothing reached Redis.
    #[error("{0}")]
    InvalidArgument(String),
    /// Redis could not be reached, or the connection broke.
    #[error("{0}")]
    Connection(String),
    /// An operation took longer than its time limit.
    #[error("{0}")]
    Timeout(String),
    /// A key of the queue holds another Redis type.
    #[error("{0}")]
    WrongType(String),
    /// The queue handle or the client was closed.
    #[error("{0}")]
    Closed(String),
    /// Any other error reported by the server.
    #[error("{0}")]
    Server(String),
}

impl From<delayq::Error> for FfiError {
    fn from(e: delayq::Error) -> Self {
        let message = e.to_string();
        match e.kind() {
            delayq::ErrorKind::InvalidArgument => FfiError::InvalidArgument(message),
            delayq::ErrorKind::Connection => FfiError::Connection(message),
            delayq::ErrorKind::Timeout => FfiError::Timeout(message),
            delayq::ErrorKind::WrongType => FfiError::WrongType(message),
            delayq::ErrorKind::Closed => FfiError::Closed(message),
            delayq::ErrorKind::Server => FfiError::Server(message),
        }
    }
}
