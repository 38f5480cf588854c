//! The settings of a reliable queue: stored in Redis with the queue (`{dq:N}:settings`, a
//! hash an operator can read with `HGETALL`), so that every handle and every transfer task
//! in every process uses the same visibility timeout, attempts and back-off (SPEC section
//! 11). A handle names some of them or none; the first to open the queue stores them (with
//! the defaults for the rest), later handles that name different ones get an error, unless
//! they ask to update (`ReliableQueueOptions::update_settings`).

use std::time::Duration;

use crate::error::{Error, Result};

use super::Backoff;

/// The settings of a reliable queue, as stored with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReliableSettings {
    /// How long a received message stays invisible (its lease) before it is delivered
    /// again unless acked, nacked or extended (default 30 s).
    pub visibility_timeout: Duration,
    /// Deliveries before a message goes to the dead letters (default 5, at most 255).
    pub max_attempts: u32,
    /// The delay before a retry when `nack` is called without one (default exponential
    /// from 1 s to 10 min).
    pub backoff: Backoff,
    /// Sub-queues the queue is split into (default 1).
    pub shards: u32,
    /// How long dead letters are kept; `None` (the default): until requeued or purged.
    pub dead_letter_retention: Option<Duration>,
    /// How long the id of an acked message is remembered, so that an offer of the same id
    /// (a producer retrying after the work was done) is de-duplicated; `None` (the
    /// default): forgotten at the ack.
    pub idempotency_retention: Option<Duration>,
}

impl Default for ReliableSettings {
    fn default() -> Self {
        ReliableSettings {
            visibility_timeout: Duration::from_secs(30),
            max_attempts: 5,
            backoff: Backoff::default(),
            shards: 1,
            dead_letter_retention: None,
            idempotency_retention: None,
        }
    }
}

/// The settings a handle names: each `None` is "whatever is stored".
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NamedSettings {
    pub(crate) visibility_timeout: Option<Duration>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) backoff: Option<Backoff>,
    pub(crate) shards: Option<u32>,
    pub(crate) dead_letter_retention: Option<Duration>,
    pub(crate) idempotency_retention: Option<Duration>,
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

fn backoff_text(b: &Backoff) -> String {
    match b {
        Backoff::Exponential { base, max } => format!("exponential {} {}", ms(*base), ms(*max)),
        Backoff::Schedule(delays) => {
            let mut s = "schedule".to_owned();
            for d in delays {
                s.push(' ');
                s.push_str(&ms(*d));
            }
            s
        }
    }
}

fn parse_backoff(text: &str) -> Option<Backoff> {
    let mut words = text.split_whitespace();
    let kind = words.next()?;
    let nums: Vec<Duration> = words
        .map(|w| w.parse::<u64>().ok().map(Duration::from_millis))
        .collect::<Option<_>>()?;
    match kind {
        "exponential" if nums.len() == 2 => Some(Backoff::Exponential {
            base: nums[0],
            max: nums[1],
        }),
        "schedule" if !nums.is_empty() => Some(Backoff::Schedule(nums)),
        _ => None,
    }
}

/// Field names in Redis.
pub(crate) const VISIBILITY: &str = "visibility_ms";
const MAX_ATTEMPTS: &str = "max_attempts";
const BACKOFF: &str = "backoff";
pub(super) const SHARDS: &str = "shards";
const DEAD_RETENTION: &str = "dead_letter_retention_ms";
const ID_RETENTION: &str = "idempotency_retention_ms";

impl NamedSettings {
    /// Checks every named value; nothing reaches Redis before this passed.
    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(v) = self.visibility_timeout {
            if v < Duration::from_millis(1) {
                return Err(Error::invalid("visibility timeout must be at least 1 ms"));
            }
            crate::delay::duration_to_millis(v, "visibility timeout")?;
        }
        if let Some(m) = self.max_attempts {
            if !(1..=255).contains(&m) {
                return Err(Error::invalid(format!(
                    "max_attempts must be between 1 and 255, got {m}"
                )));
            }
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        if let Some(s) = self.shards {
            if s == 0 || !s.is_power_of_two() || s > 1024 {
                return Err(Error::invalid(format!(
                    "shards must be a power of two from 1 to 1024, got {s}"
                )));
            }
        }
        let retentions = [
            (self.dead_letter_retention, "dead-letter retention"),
            (self.idempotency_retention, "idempotency retention"),
        ];
        for (d, what) in retentions {
            if let Some(d) = d {
                crate::delay::duration_to_millis(d, what)?;
            }
        }
        Ok(())
    }

    /// The named fields as (field, value) pairs, in Redis's text form.
    pub(crate) fn fields(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(v) = self.visibility_timeout {
            out.push((VISIBILITY, ms(v)));
        }
        if let Some(m) = self.max_attempts {
            out.push((MAX_ATTEMPTS, m.to_string()));
        }
        if let Some(b) = &self.backoff {
            out.push((BACKOFF, backoff_text(b)));
        }
        if let Some(s) = self.shards {
            out.push((SHARDS, s.to_string()));
        }
        if let Some(d) = self.dead_letter_retention {
            out.push((DEAD_RETENTION, ms(d)));
        }
        if let Some(d) = self.idempotency_retention {
            out.push((ID_RETENTION, ms(d)));
        }
        out
    }
}

impl ReliableSettings {
    /// Every field, in Redis's text form (the defaults a new queue gets).
    pub(crate) fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            (VISIBILITY, ms(self.visibility_timeout)),
            (MAX_ATTEMPTS, self.max_attempts.to_string()),
            (BACKOFF, backoff_text(&self.backoff)),
            (SHARDS, self.shards.to_string()),
            (
                DEAD_RETENTION,
                ms(self.dead_letter_retention.unwrap_or_default()),
            ),
            (
                ID_RETENTION,
                ms(self.idempotency_retention.unwrap_or_default()),
            ),
        ]
    }

    /// Reads the settings from the script's field/value pairs; unknown fields are skipped
    /// (a later version may add some), missing ones keep their defaults.
    pub(crate) fn from_fields(pairs: &[(String, String)]) -> Result<Self> {
        let mut s = ReliableSettings::default();
        let bad =
            |f: &str, v: &str| Error::Server(format!("stored setting {f} = {v:?} is not valid"));
        let num = |f: &str, v: &str| v.parse::<u64>().map_err(|_| bad(f, v));
        let retention = |n: u64| (n > 0).then(|| Duration::from_millis(n));
        for (f, v) in pairs {
            match f.as_str() {
                VISIBILITY => s.visibility_timeout = Duration::from_millis(num(f, v)?),
                MAX_ATTEMPTS => s.max_attempts = num(f, v)? as u32,
                BACKOFF => s.backoff = parse_backoff(v).ok_or_else(|| bad(f, v))?,
                SHARDS => s.shards = num(f, v)? as u32,
                DEAD_RETENTION => s.dead_letter_retention = retention(num(f, v)?),
                ID_RETENTION => s.idempotency_retention = retention(num(f, v)?),
                _ => {}
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip() {
        let s = ReliableSettings {
            visibility_timeout: Duration::from_millis(1500),
            max_attempts: 7,
            backoff: Backoff::Schedule(vec![Duration::from_secs(15), Duration::from_secs(180)]),
            shards: 8,
            dead_letter_retention: Some(Duration::from_secs(86400)),
            idempotency_retention: None,
        };
        let pairs: Vec<(String, String)> = s
            .fields()
            .into_iter()
            .map(|(f, v)| (f.to_owned(), v))
            .collect();
        assert_eq!(ReliableSettings::from_fields(&pairs).unwrap(), s);
    }

    #[test]
    fn lua_defaults_mirror_the_rust_ones() {
        // reliable_lib.lua's DEFAULT_SETTINGS apply when the hash is gone; they must say
        // what ReliableSettings::default() says.
        let lua = include_str!("../scripts/reliable_lib.lua");
        for (field, value) in ReliableSettings::default().fields() {
            let expected = match value.parse::<u64>() {
                Ok(n) => format!("{field} = {n},"),
                Err(_) => format!("{field} = '{value}',"),
            };
            assert!(
                lua.contains(&expected),
                "reliable_lib.lua lacks `{expected}`"
            );
        }
    }
}
