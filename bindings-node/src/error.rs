//! The one mapping of core errors to JavaScript errors: each is an `Error` whose `code` is
//! `ERR_DELAYQ_<KIND>` (core's `ErrorKind`), set by napi when it creates the error.

/// A JavaScript error's `code`.
pub struct Code(String);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// napi's own argument conversions fail with a status: an invalid argument to delayq.
impl From<napi::Status> for Code {
    fn from(_: napi::Status) -> Self {
        code(delayq::ErrorKind::InvalidArgument)
    }
}

/// The stable code of an error kind, e.g. `ERR_DELAYQ_WRONG_TYPE`.
pub fn code(kind: delayq::ErrorKind) -> Code {
    Code(format!("ERR_DELAYQ_{}", kind.as_str().to_ascii_uppercase()))
}

/// The error of every exported call.
pub type Error = napi::Error<Code>;
/// The result of every exported call.
pub type Result<T> = std::result::Result<T, Error>;

/// The JavaScript error for a core error.
pub fn to_js(e: delayq::Error) -> Error {
    Error::new(code(e.kind()), e)
}

/// A napi error (a failed conversion) as an invalid argument.
pub fn from_napi(e: napi::Error) -> Error {
    Error::new(code(delayq::ErrorKind::InvalidArgument), e.reason)
}

/// Maps core results in one call at the end of each method.
pub trait IntoJs<T> {
    /// Converts the error, keeping the value.
    fn js(self) -> Result<T>;
}

impl<T> IntoJs<T> for delayq::Result<T> {
    fn js(self) -> Result<T> {
        self.map_err(to_js)
    }
}
