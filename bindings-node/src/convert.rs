//! JavaScript values to core types. Validation itself is core's (`delayq::delay`).

use std::time::Duration;

use delayq::delay::Integer;
use napi::bindgen_prelude::{BigInt, Either};

use crate::error::{IntoJs, Result};

/// A bigint as core takes integers of any size: exact when it fits in an `i64`.
fn integer(b: &BigInt) -> Integer {
    match b.get_i64() {
        (n, true) => Integer::Exact(n),
        _ if b.sign_bit => Integer::Below,
        _ => Integer::Above,
    }
}

/// A delay in milliseconds: a number (whole, finite, non-negative) or a bigint.
pub fn delay(ms: Either<f64, BigInt>) -> Result<Duration> {
    match ms {
        Either::A(n) => delayq::delay::delay_from_millis_f64(n),
        Either::B(b) => delayq::delay::delay_from_millis_integer(integer(&b)),
    }
    .js()
}

/// A duration option in milliseconds (a visibility timeout, a back-off, the reconcile
/// interval): a number, rounded to whole milliseconds, or a bigint; checked like a delay.
pub fn option_ms(ms: Either<f64, BigInt>) -> Result<Duration> {
    match ms {
        Either::A(n) => delay(Either::A(n.round())),
        b => delay(b),
    }
}

/// A count (a limit, a number of attempts) named `what`: a whole number or a bigint, not
/// negative.
pub fn count<T: TryFrom<u64>>(n: Either<f64, BigInt>, what: &str) -> Result<T> {
    match n {
        Either::A(n) => delayq::delay::count_from_f64(n, what),
        Either::B(b) => delayq::delay::count_from_integer(integer(&b), what),
    }
    .js()
}

/// A timeout in milliseconds (a number, fractions allowed, or a bigint), or none for no
/// limit.
pub fn timeout(ms: Option<Either<f64, BigInt>>) -> Result<Option<Duration>> {
    ms.map(|ms| match ms {
        Either::A(n) => delayq::delay::timeout_from_secs_f64(n / 1000.0),
        Either::B(b) => delayq::delay::timeout_from_millis_integer(integer(&b)),
    })
    .transpose()
    .js()
}
