//! JavaScript numbers to core types; the checks are core's (`delayq::delay`). index.js
//! turns bigints into numbers: every valid value converts exactly, an invalid one stays
//! invalid.

use std::time::Duration;

use crate::error::{IntoJs, Result};

/// A delay in milliseconds: whole, finite, not negative.
pub fn delay(ms: f64) -> Result<Duration> {
    delayq::delay::delay_from_millis_f64(ms).js()
}

/// A duration option in milliseconds (a lease, a back-off), rounded to whole milliseconds.
pub fn option_ms(ms: f64) -> Result<Duration> {
    delay(ms.round())
}

/// A count (a limit, a number of attempts) named `what`: whole, not negative.
pub fn count<T: TryFrom<u64>>(n: f64, what: &str) -> Result<T> {
    delayq::delay::count_from_f64(n, what).js()
}

/// A timeout in milliseconds (fractions allowed), or none for no limit.
pub fn timeout(ms: Option<f64>) -> Result<Option<Duration>> {
    ms.map(|ms| delayq::delay::timeout_from_secs_f64(ms / 1000.0))
        .transpose()
        .js()
}
