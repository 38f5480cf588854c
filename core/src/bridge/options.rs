//! Options as a host passes them: each one it leaves out takes core's default, so that no
//! binding writes a default of its own.

use std::time::Duration;

use crate::{Durability, SchedulerOptions};

/// A queue handle's transfer task: whether it runs (default: it does) and its reconcile
/// interval (default 1 s); the rest is core's default.
pub fn scheduler(enabled: Option<bool>, reconcile_interval: Option<Duration>) -> SchedulerOptions {
    let default = SchedulerOptions::default();
    SchedulerOptions {
        enabled: enabled.unwrap_or(default.enabled),
        reconcile_interval: reconcile_interval.unwrap_or(default.reconcile_interval),
        ..default
    }
}

/// Waiting for replicas after writes: `replicas` (default none), `aof` (default no),
/// `timeout` (default [`Durability::DEFAULT_TIMEOUT`]).
pub fn durability(
    replicas: Option<u32>,
    aof: Option<bool>,
    timeout: Option<Duration>,
) -> Durability {
    Durability {
        aof: aof.unwrap_or(false),
        timeout: timeout.unwrap_or(Durability::DEFAULT_TIMEOUT),
        ..Durability::replicas(replicas.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_left_out_take_cores_defaults() {
        let default = SchedulerOptions::default();
        let s = scheduler(None, None);
        assert_eq!(
            (s.enabled, s.reconcile_interval),
            (true, default.reconcile_interval)
        );
        let s = scheduler(Some(false), Some(Duration::from_millis(250)));
        assert_eq!(
            (s.enabled, s.reconcile_interval),
            (false, Duration::from_millis(250))
        );
        assert_eq!(s.batch_size, default.batch_size);

        assert_eq!(durability(None, None, None), Durability::replicas(0));
        let d = durability(Some(2), Some(true), Some(Duration::from_secs(3)));
        assert_eq!(
            (d.replicas, d.aof, d.timeout),
            (2, true, Duration::from_secs(3))
        );
    }
}
