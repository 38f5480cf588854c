//! JavaScript values to core types. Validation itself is core's (`delayq::delay`).

use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Either};

use crate::error::IntoJs;
use napi::Result;

/// A delay in milliseconds: a number (whole, finite, non-negative) or a bigint.
pub fn delay(ms: Either<f64, BigInt>) -> Result<Duration> {
    match ms {
        Either::A(n) => delayq::delay::delay_from_millis_f64(n).js(),
        Either::B(b) => {
            let (negative, value, lossless) = b.get_u64();
            if negative {
                return Err(crate::error::to_js(delayq::Error::InvalidArgument(
                    "delay must not be negative".into(),
                )));
            }
            if !lossless || value > i64::MAX as u64 {
                return Err(crate::error::to_js(delayq::Error::InvalidArgument(
                    "delay overflows".into(),
                )));
            }
            delayq::delay::delay_from_millis(value as i64).js()
        }
    }
}

/// A timeout in milliseconds (fractions allowed), or none for no limit.
pub fn timeout(ms: Option<f64>) -> Result<Option<Duration>> {
    ms.map(|ms| delayq::delay::timeout_from_secs_f64(ms / 1000.0))
        .transpose()
        .js()
}
