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
    /// Core's check of a negative duration (in whole, floored milliseconds), or the duration.
    fn checked(self, negative: fn(i64) -> delayq::Result<Duration>) -> delayq::Result<Duration> {
        if self.seconds < 0 {
            let ms = self
                .seconds
                .saturating_mul(1000)
                .saturating_add(i64::from(self.nanos / 1_000_000));
            return negative(ms.min(-1));
        }
        Ok(Duration::new(
            self.seconds as u64,
            self.nanos.min(999_999_999),
        ))
    }

    /// A delay, checked by core: not negative, not overflowing.
    pub(crate) fn delay(self) -> delayq::Result<Duration> {
        let d = self.checked(delay_from_millis)?;
        delay_to_millis(d)?;
        Ok(d)
    }

    /// A timeout, checked by core: not negative.
    pub(crate) fn timeout(self) -> delayq::Result<Duration> {
        self.checked(timeout_from_millis)
    }
}

/// An optional delay or timeout, checked.
pub(crate) fn delay(d: Option<DurationParts>) -> delayq::Result<Option<Duration>> {
    d.map(DurationParts::delay).transpose()
}

pub(crate) fn timeout(d: Option<DurationParts>) -> delayq::Result<Option<Duration>> {
    d.map(DurationParts::timeout).transpose()
}

/// A queue handle's transfer task: core's defaults but for what the caller named.
pub(crate) fn scheduler(
    enabled: bool,
    reconcile: Option<DurationParts>,
) -> delayq::Result<delayq::SchedulerOptions> {
    let mut opts = delayq::SchedulerOptions {
        enabled,
        ..Default::default()
    };
    if let Some(r) = timeout(reconcile)? {
        opts.reconcile_interval = r;
    }
    Ok(opts)
}
