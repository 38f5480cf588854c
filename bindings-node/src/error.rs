//! The one mapping of core errors to JavaScript errors (each an `Error` whose `code` is
//! `ERR_DELAYQ_<KIND>`, core's `ErrorKind`, set by napi when it creates the error), and of
//! JavaScript numbers to core types, with core's checks (`delayq::delay`). index.js turns
//! bigints into numbers: every valid value converts exactly, an invalid one stays invalid.

use std::time::Duration;

use delayq::{delay, ErrorKind};

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
        code(ErrorKind::InvalidArgument)
    }
}

fn code(kind: ErrorKind) -> Code {
    Code(format!("ERR_DELAYQ_{}", kind.as_str().to_ascii_uppercase()))
}

pub type Error = napi::Error<Code>;
pub type Result<T> = std::result::Result<T, Error>;

/// A napi error (a failed conversion) as an invalid argument.
pub fn from_napi(e: napi::Error) -> Error {
    Error::new(e.status.into(), e.reason)
}

/// Maps core results (`.js()`).
pub trait IntoJs<T> {
    fn js(self) -> Result<T>;
}

impl<T> IntoJs<T> for delayq::Result<T> {
    fn js(self) -> Result<T> {
        self.map_err(|e| Error::new(code(e.kind()), e))
    }
}

/// A value, at most 512 MiB (checked before it is copied).
pub fn value_in(v: &[u8]) -> Result<Vec<u8>> {
    delay::check_value_len(v.len()).js()?;
    Ok(v.to_vec())
}

/// A delay in milliseconds: finite, not negative; a fraction rounds up.
pub fn delay(ms: f64) -> Result<Duration> {
    delay::delay_from_millis_f64(ms).js()
}

/// A duration option named `what` in milliseconds (a lease, a back-off), rounded to whole
/// milliseconds.
pub fn option_ms(ms: f64, what: &str) -> Result<Duration> {
    delay::duration_from_millis_f64(ms.round(), what).js()
}

/// An optional [`option_ms`].
pub fn opt_ms(ms: Option<f64>, what: &str) -> Result<Option<Duration>> {
    ms.map(|ms| option_ms(ms, what)).transpose()
}

/// A count (a limit, a number of attempts) named `what`: whole, not negative.
pub fn count<T: TryFrom<u64>>(n: f64, what: &str) -> Result<T> {
    delay::count_from_f64(n, what).js()
}

/// An optional [`count`].
pub fn opt_count<T: TryFrom<u64>>(n: Option<f64>, what: &str) -> Result<Option<T>> {
    n.map(|n| count(n, what)).transpose()
}

/// A timeout in milliseconds (fractions allowed), or none for no limit.
pub fn timeout(ms: Option<f64>) -> Result<Option<Duration>> {
    ms.map(|ms| delay::timeout_from_millis_f64(ms, "timeout"))
        .transpose()
        .js()
}
