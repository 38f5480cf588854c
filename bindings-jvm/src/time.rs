//! `java.time.Duration` as it crosses over: whole seconds (signed) and nanoseconds.
//! Validation is core's (`delayq::delay`).

use std::time::Duration;

use delayq::delay::{delay_from_millis, delay_to_millis, timeout_from_millis};

/// A `java.time.Duration`: `seconds` (may be negative) plus `nanos` in `0..1e9`.
#[derive(Debug, Clone, Copy, uniffi::Record)]
pub struct DurationParts {
    pub seconds: i64,
    pub nanos: u32,
}

impl DurationParts {
    /// Negative durations in whole (floored) milliseconds, for core's error message.
    fn negative_millis(self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos / 1_000_000))
            .min(-1)
    }

    fn to_std(self) -> Duration {
        Duration::new(self.seconds as u64, self.nanos.min(999_999_999))
    }

    /// A delay, checked by core: not negative, not overflowing.
    pub(crate) fn delay(self) -> delayq::Result<Duration> {
        if self.seconds < 0 {
            return delay_from_millis(self.negative_millis());
        }
        let d = self.to_std();
        delay_to_millis(d)?;
        Ok(d)
    }

    /// A timeout, checked by core: not negative.
    pub(crate) fn timeout(self) -> delayq::Result<Duration> {
        if self.seconds < 0 {
            return timeout_from_millis(self.negative_millis());
        }
        Ok(self.to_std())
    }
}

impl From<Duration> for DurationParts {
    /// A stored duration going out (a queue setting); saturates past `i64::MAX` seconds.
    fn from(d: Duration) -> Self {
        DurationParts {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: d.subsec_nanos(),
        }
    }
}
