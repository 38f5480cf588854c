//! Validation of delays and values, shared by every binding so that a bad argument is
//! refused the same way everywhere, before anything reaches Redis.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest delay accepted: 2^50 ms (about 35,000 years). Due times are doubles in
/// Redis sorted sets; this keeps `server time + delay` an exact integer there.
pub const MAX_DELAY_MS: u64 = 1 << 50;

/// The largest value accepted: 512 MiB, Redis's limit for one string.
pub const MAX_VALUE_LEN: usize = 512 * 1024 * 1024;

/// Checks a delay and returns it in whole milliseconds (rounded up, so that nothing is
/// delivered early).
pub fn delay_to_millis(delay: Duration) -> Result<u64> {
    let ms = delay.as_nanos().div_ceil(1_000_000);
    if ms > MAX_DELAY_MS as u128 {
        return Err(Error::invalid(format!(
            "delay of {delay:?} overflows: at most {MAX_DELAY_MS} ms"
        )));
    }
    Ok(ms as u64)
}

/// A delay from signed milliseconds, as JavaScript and the JVM hand them over.
pub fn delay_from_millis(ms: i64) -> Result<Duration> {
    if ms < 0 {
        return Err(Error::invalid(format!(
            "delay must not be negative, got {ms} ms"
        )));
    }
    let d = Duration::from_millis(ms as u64);
    delay_to_millis(d)?;
    Ok(d)
}

/// A delay from milliseconds as a float (JavaScript numbers): finite, non-negative, whole.
pub fn delay_from_millis_f64(ms: f64) -> Result<Duration> {
    if !ms.is_finite() {
        return Err(Error::invalid(format!(
            "delay must be a finite number, got {ms}"
        )));
    }
    if ms.fract() != 0.0 {
        return Err(Error::invalid(format!(
            "delay must be whole milliseconds, got {ms}"
        )));
    }
    if ms < 0.0 {
        return Err(Error::invalid(format!(
            "delay must not be negative, got {ms} ms"
        )));
    }
    if ms > MAX_DELAY_MS as f64 {
        return Err(Error::invalid(format!(
            "delay of {ms} ms overflows: at most {MAX_DELAY_MS} ms"
        )));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A delay from seconds as a float (Python): finite and non-negative.
pub fn delay_from_secs_f64(secs: f64) -> Result<Duration> {
    if !secs.is_finite() {
        return Err(Error::invalid(format!(
            "delay must be a finite number of seconds, got {secs}"
        )));
    }
    if secs < 0.0 {
        return Err(Error::invalid(format!(
            "delay must not be negative, got {secs} s"
        )));
    }
    let d = Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::invalid(format!("delay of {secs} s overflows")))?;
    delay_to_millis(d)?;
    Ok(d)
}

/// A timeout from seconds as a float: like a delay, finite and non-negative.
pub fn timeout_from_secs_f64(secs: f64) -> Result<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return Err(Error::invalid(format!(
            "timeout must be a non-negative number of seconds, got {secs}"
        )));
    }
    if secs.is_infinite() {
        return Err(Error::invalid(
            "timeout must be finite; pass None to wait forever",
        ));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::invalid(format!("timeout of {secs} s overflows")))
}

/// A timeout from signed milliseconds.
pub fn timeout_from_millis(ms: i64) -> Result<Duration> {
    if ms < 0 {
        return Err(Error::invalid(format!(
            "timeout must not be negative, got {ms} ms"
        )));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// Checks the size of a value.
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {} bytes is over the limit of {MAX_VALUE_LEN} bytes (512 MiB)",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_checked() {
        assert_eq!(delay_to_millis(Duration::from_micros(1500)).unwrap(), 2);
        assert!(delay_to_millis(Duration::MAX).is_err());
        assert!(delay_from_millis(-1).is_err());
        assert!(delay_from_millis_f64(f64::NAN).is_err());
        assert!(delay_from_millis_f64(1.5).is_err());
        assert!(delay_from_millis_f64(-0.0).is_ok());
        assert!(delay_from_secs_f64(f64::INFINITY).is_err());
        assert!(delay_from_secs_f64(-0.5).is_err());
        assert_eq!(
            delay_from_secs_f64(1.5).unwrap(),
            Duration::from_millis(1500)
        );
        assert!(delay_from_secs_f64(1e300).is_err());
    }
}
