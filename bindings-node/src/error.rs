//! The one mapping of core errors to JavaScript errors. The native error's message starts
//! with its stable code (`ERR_DELAYQ_<KIND>: ...`); the JavaScript wrapper (index.js) moves
//! it to the error's `code` property, since napi's own `code` is its status.

/// The error type of every exported call.
pub type JsError = napi::Error;

/// The stable `code` of an error kind.
pub fn code(kind: delayq::ErrorKind) -> &'static str {
    match kind {
        delayq::ErrorKind::InvalidArgument => "ERR_DELAYQ_INVALID_ARGUMENT",
        delayq::ErrorKind::Connection => "ERR_DELAYQ_CONNECTION",
        delayq::ErrorKind::Timeout => "ERR_DELAYQ_TIMEOUT",
        delayq::ErrorKind::WrongType => "ERR_DELAYQ_WRONG_TYPE",
        delayq::ErrorKind::Closed => "ERR_DELAYQ_CLOSED",
        delayq::ErrorKind::Server => "ERR_DELAYQ_SERVER",
    }
}

/// The JavaScript error for a core error.
pub fn to_js(e: delayq::Error) -> JsError {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{}: {e}", code(e.kind())),
    )
}

/// Maps core results in one call at the end of each method.
pub trait IntoJs<T> {
    /// Converts the error, keeping the value.
    fn js(self) -> napi::Result<T>;
}

impl<T> IntoJs<T> for delayq::Result<T> {
    fn js(self) -> napi::Result<T> {
        self.map_err(to_js)
    }
}
