//! Validation of delays, timeouts, counts and values, shared by every binding so that a
//! bad argument is refused the same way everywhere, before anything reaches Redis.

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
    duration_to_millis(delay, "delay")
}

/// [`delay_to_millis`] for a duration named `what` in the errors (a queue setting).
pub fn duration_to_millis(delay: Duration, what: &str) -> Result<u64> {
    let ms = delay.as_nanos().div_ceil(1_000_000);
    if ms > MAX_DELAY_MS as u128 {
        return Err(Error::invalid(format!(
            "{what} of {ms} ms overflows: at most {MAX_DELAY_MS} ms"
        )));
    }
    Ok(ms as u64)
}

/// A number as an error shows it: `1e300`, not three hundred digits.
fn shown(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_992.0 {
        format!("{x:.0}") // a whole number (exact up to 2^53) in digits, as it was written
    } else if x.is_finite() && x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
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

/// A delay from milliseconds as a float (JavaScript numbers): finite and non-negative; a
/// fraction rounds up to the next whole millisecond, so that nothing is delivered early.
pub fn delay_from_millis_f64(ms: f64) -> Result<Duration> {
    duration_from_millis_f64(ms, "delay")
}

/// [`delay_from_millis_f64`] for a duration that is not a delay but follows its rules (a
/// queue setting: a visibility timeout, a back-off), named `what` in the errors.
pub fn duration_from_millis_f64(ms: f64, what: &str) -> Result<Duration> {
    if !ms.is_finite() {
        return Err(Error::invalid(format!(
            "{what} must be a finite number, got {}",
            shown(ms)
        )));
    }
    if ms < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must not be negative, got {} ms",
            shown(ms)
        )));
    }
    if ms.ceil() > MAX_DELAY_MS as f64 {
        return Err(Error::invalid(format!(
            "{what} of {} ms overflows: at most {MAX_DELAY_MS} ms",
            shown(ms)
        )));
    }
    Ok(Duration::from_millis(ms.ceil() as u64))
}

/// A delay from seconds as a float (Python): finite and non-negative.
pub fn delay_from_secs_f64(secs: f64) -> Result<Duration> {
    duration_from_secs_f64(secs, "delay")
}

/// [`delay_from_secs_f64`] for a duration named `what` (see [`duration_from_millis_f64`]).
pub fn duration_from_secs_f64(secs: f64, what: &str) -> Result<Duration> {
    if !secs.is_finite() {
        return Err(Error::invalid(format!(
            "{what} must be a finite number of seconds, got {}",
            shown(secs)
        )));
    }
    if secs < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must not be negative, got {} s",
            shown(secs)
        )));
    }
    let d = Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::invalid(format!("{what} of {} s overflows", shown(secs))))?;
    duration_to_millis(d, what)?;
    Ok(d)
}

/// A timeout from seconds as a float: like a delay, finite and non-negative. `what` names
/// it in the errors (`"timeout"`, or the option that is a duration: `"reconcile_interval"`).
pub fn timeout_from_secs_f64(secs: f64, what: &str) -> Result<Duration> {
    if secs.is_nan() {
        return Err(Error::invalid(format!(
            "{what} must be a non-negative number of seconds, got {}",
            shown(secs)
        )));
    }
    if secs < 0.0 {
        // As an integer's (`timeout_from_secs_integer`): one message for -1 and -0.5.
        return Err(Error::invalid(format!(
            "{what} must not be negative, got {} s",
            shown(secs)
        )));
    }
    if secs.is_infinite() {
        let forever = if what == "timeout" {
            "; pass None to wait forever"
        } else {
            ""
        };
        return Err(Error::invalid(format!("{what} must be finite{forever}")));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::invalid(format!("{what} of {} s overflows", shown(secs))))
}

/// A timeout from milliseconds as a float (JavaScript numbers): fractions allowed, finite
/// and non-negative. `what` names it in the errors (`"timeout"`, or a close's deadline);
/// the messages name no language's way to wait forever.
pub fn timeout_from_millis_f64(ms: f64, what: &str) -> Result<Duration> {
    if ms.is_nan() || ms < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a non-negative number of milliseconds, got {}",
            shown(ms)
        )));
    }
    if ms.is_infinite() {
        let forever = if what == "timeout" {
            "; pass no timeout to wait forever"
        } else {
            ""
        };
        return Err(Error::invalid(format!("{what} must be finite{forever}")));
    }
    Duration::try_from_secs_f64(ms / 1000.0)
        .map_err(|_| Error::invalid(format!("{what} of {} ms overflows", shown(ms))))
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

/// An integer from a language whose integers have no fixed size (a Python `int`, a
/// JavaScript `bigint`), as a binding hands it over: exact when it fits in an `i64`, else
/// only which way it left that range (no delay, timeout or count is that large).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integer {
    /// The value itself.
    Exact(i64),
    /// Above `i64::MAX`.
    Above,
    /// Below `i64::MIN`.
    Below,
}

impl From<i64> for Integer {
    fn from(n: i64) -> Self {
        Integer::Exact(n)
    }
}

impl std::fmt::Display for Integer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Integer::Exact(n) => write!(f, "{n}"),
            Integer::Above => write!(f, "more than {}", i64::MAX),
            Integer::Below => write!(f, "less than {}", i64::MIN),
        }
    }
}

impl Integer {
    /// The value if it is not negative; `what` and `unit` name it in the errors.
    fn non_negative(self, what: &str, unit: &str) -> Result<u64> {
        match self {
            Integer::Exact(n) if n >= 0 => Ok(n as u64),
            Integer::Exact(_) | Integer::Below => Err(Error::invalid(format!(
                "{what} must not be negative, got {self}{unit}"
            ))),
            Integer::Above => Err(Error::invalid(format!("{what} of {self}{unit} overflows"))),
        }
    }
}

/// A delay from whole milliseconds of any size (a JavaScript `bigint`).
pub fn delay_from_millis_integer(ms: Integer) -> Result<Duration> {
    let ms = ms.non_negative("delay", " ms")?;
    let d = Duration::from_millis(ms);
    delay_to_millis(d)?;
    Ok(d)
}

/// A delay from whole seconds of any size (a Python `int`).
pub fn delay_from_secs_integer(secs: Integer) -> Result<Duration> {
    duration_from_secs_integer(secs, "delay")
}

/// [`delay_from_secs_integer`] for a duration named `what` (see [`duration_from_millis_f64`]).
pub fn duration_from_secs_integer(secs: Integer, what: &str) -> Result<Duration> {
    let secs = secs.non_negative(what, " s")?;
    let d = Duration::from_secs(secs);
    duration_to_millis(d, what)?;
    Ok(d)
}

/// A timeout from whole milliseconds of any size: not negative.
pub fn timeout_from_millis_integer(ms: Integer) -> Result<Duration> {
    Ok(Duration::from_millis(ms.non_negative("timeout", " ms")?))
}

/// A timeout from whole seconds of any size: not negative. `what` names it in the errors,
/// as in [`timeout_from_secs_f64`].
pub fn timeout_from_secs_integer(secs: Integer, what: &str) -> Result<Duration> {
    Ok(Duration::from_secs(secs.non_negative(what, " s")?))
}

/// A count (a limit, a concurrency, a number of attempts) named `what`: not negative and
/// small enough for `T`. Whether zero is allowed is up to the call that takes it.
pub fn count_from_integer<T: TryFrom<u64>>(n: Integer, what: &str) -> Result<T> {
    if n == Integer::Above {
        return Err(Error::invalid(format!("{what} of {n} is too large")));
    }
    let n = n.non_negative(what, "")?;
    T::try_from(n).map_err(|_| Error::invalid(format!("{what} of {n} is too large")))
}

/// A count named `what` from a floating-point number (a JavaScript `number`): whole,
/// finite, not negative and small enough for `T`.
pub fn count_from_f64<T: TryFrom<u64>>(n: f64, what: &str) -> Result<T> {
    if !n.is_finite() || n.fract() != 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a whole number, got {n}"
        )));
    }
    let n = if n >= 9.223_372_036_854_776e18 {
        Integer::Above
    } else if n < -9.223_372_036_854_776e18 {
        Integer::Below
    } else {
        Integer::Exact(n as i64)
    };
    count_from_integer(n, what)
}

/// Checks the size of a value.
pub fn check_value(value: &[u8]) -> Result<()> {
    check_value_len(value.len())
}

/// Checks the size of a value of `len` bytes, before a binding copies it.
pub fn check_value_len(len: usize) -> Result<()> {
    if len > MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {len} bytes is over the limit of {MAX_VALUE_LEN} bytes (512 MiB)"
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
        assert!(delay_from_millis_f64(-0.0).is_ok());
        assert!(delay_from_secs_f64(f64::INFINITY).is_err());
        assert!(delay_from_secs_f64(-0.5).is_err());
        assert_eq!(
            delay_from_secs_f64(1.5).unwrap(),
            Duration::from_millis(1500)
        );
        assert!(delay_from_secs_f64(1e300).is_err());
    }

    #[test]
    fn fractional_millis_round_up_and_bad_ones_are_refused() {
        let ms = Duration::from_millis;
        assert_eq!(delay_from_millis_f64(1.5).unwrap(), ms(2));
        assert_eq!(delay_from_millis_f64(0.0001).unwrap(), ms(1));
        assert_eq!(delay_from_millis_f64(2.0).unwrap(), ms(2));
        let max = MAX_DELAY_MS as f64;
        assert_eq!(delay_from_millis_f64(max).unwrap(), ms(MAX_DELAY_MS));
        assert!(delay_from_millis_f64(max - 0.5).is_ok());
        for bad in [
            f64::NAN,
            -0.5,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            max + 1.0,
            1e300,
        ] {
            let err = delay_from_millis_f64(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn timeouts_from_millis_f64_speak_milliseconds() {
        assert_eq!(
            timeout_from_millis_f64(1.5, "timeout").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(
            timeout_from_millis_f64(-0.0, "timeout").unwrap(),
            Duration::ZERO
        );
        let err = timeout_from_millis_f64(-1.0, "timeout")
            .unwrap_err()
            .to_string();
        assert!(err.contains("milliseconds, got -1"), "{err}");
        assert!(timeout_from_millis_f64(f64::NAN, "timeout").is_err());
        let err = timeout_from_millis_f64(f64::INFINITY, "timeout")
            .unwrap_err()
            .to_string();
        assert!(err.contains("pass no timeout to wait forever"), "{err}");
        let err = timeout_from_millis_f64(1e300, "timeout")
            .unwrap_err()
            .to_string();
        assert!(err.ends_with(" ms overflows"), "{err}");
    }

    #[test]
    fn an_overflowing_delay_is_shown_as_written() {
        let err = |r: Result<Duration>| r.unwrap_err().to_string();
        let over = (MAX_DELAY_MS + 1) as f64;
        let text = err(delay_from_millis_f64(over));
        assert!(
            text.contains("delay of 1125899906842625 ms overflows"),
            "{text}"
        );
        let text = delay_to_millis(Duration::from_millis(MAX_DELAY_MS + 1));
        let text = text.unwrap_err().to_string();
        assert!(
            text.contains("delay of 1125899906842625 ms overflows"),
            "{text}"
        );
        let text = err(delay_from_millis_f64(1e300));
        assert!(text.contains("delay of 1e300 ms overflows"), "{text}");
        let text = err(delay_from_millis_f64(-2.5));
        assert!(text.contains("got -2.5 ms"), "{text}");
    }

    #[test]
    fn counts_from_numbers_are_whole_and_not_negative() {
        assert_eq!(count_from_f64::<u32>(10.0, "limit").unwrap(), 10);
        assert_eq!(count_from_f64::<u32>(0.0, "limit").unwrap(), 0);
        for bad in [-1.0, 1.5, f64::NAN, f64::INFINITY, 1e20, 4_294_967_296.0] {
            assert!(count_from_f64::<u32>(bad, "limit").is_err(), "{bad}");
        }
    }

    #[test]
    fn integers_of_any_size_are_checked() {
        use Integer::{Above, Below, Exact};
        let ms = MAX_DELAY_MS as i64;
        assert_eq!(
            delay_from_millis_integer(Exact(1500)).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            delay_from_millis_integer(Exact(ms)).unwrap(),
            Duration::from_millis(ms as u64)
        );
        assert!(delay_from_millis_integer(Exact(ms + 1)).is_err());
        assert!(delay_from_millis_integer(Exact(-1)).is_err());
        assert!(delay_from_millis_integer(Above).is_err());
        assert!(delay_from_millis_integer(Below).is_err());

        assert_eq!(
            delay_from_secs_integer(Exact(2)).unwrap(),
            Duration::from_secs(2)
        );
        assert!(delay_from_secs_integer(Exact(ms / 1000 + 1)).is_err());
        assert!(delay_from_secs_integer(Exact(i64::MAX)).is_err());
        assert!(delay_from_secs_integer(Exact(-1)).is_err());
        assert!(delay_from_secs_integer(Above).is_err());

        assert_eq!(
            timeout_from_millis_integer(Exact(0)).unwrap(),
            Duration::ZERO
        );
        assert_eq!(
            timeout_from_secs_integer(Exact(3), "timeout").unwrap(),
            Duration::from_secs(3)
        );
        assert_eq!(
            timeout_from_secs_integer(Exact(i64::MAX), "timeout").unwrap(),
            Duration::from_secs(i64::MAX as u64)
        );
        for bad in [Exact(-1), Above, Below] {
            assert!(timeout_from_millis_integer(bad).is_err());
            assert!(timeout_from_secs_integer(bad, "timeout").is_err());
        }

        assert_eq!(count_from_integer::<u32>(Exact(7), "limit").unwrap(), 7);
        assert_eq!(count_from_integer::<usize>(Exact(0), "limit").unwrap(), 0);
        let err = count_from_integer::<u32>(Exact(-1), "max_attempts").unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(err
            .to_string()
            .contains("max_attempts must not be negative, got -1"));
        let err = count_from_integer::<u32>(Exact(1 << 40), "max_attempts").unwrap_err();
        assert!(err.to_string().contains("is too large"), "{err}");
        let err = count_from_integer::<u64>(Below, "limit").unwrap_err();
        assert!(
            err.to_string().contains("less than -9223372036854775808"),
            "{err}"
        );
        let err = count_from_integer::<u64>(Above, "shards").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid argument: shards of more than 9223372036854775807 is too large"
        );
    }
}
