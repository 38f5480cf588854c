//! Key names in Redis. Redisson's names for the delayed queue are part of the wire
//! contract (SPEC section 2); every key of one queue hashes to one cluster slot.

use crate::error::{Error, Result};

/// The keys of one Redisson-compatible delayed queue named `N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayedKeys {
    /// `N`: the destination list of values whose time has come.
    pub destination: String,
    /// `redisson_delay_queue_timeout:{N}`: packed entries scored by due time (ms).
    pub timeout_set: String,
    /// `redisson_delay_queue:{N}`: the packed entries in offer order.
    pub queue_list: String,
    /// `redisson_delay_queue_channel:{N}`: where a new earliest due time is published.
    pub channel: String,
    /// `delayq_corrupt:{N}`: entries that could not be decoded, moved aside.
    pub corrupt_list: String,
    /// `delayq_offer:{N}`: the prefix of the short-lived keys that make a resent offer
    /// call (cluster mode) return the first run's result.
    pub offer_token_prefix: String,
}

/// Redisson's rule: `prefix:{N}`, unless `N` already has a `{`, then `prefix:N`.
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Checks a queue name: non-empty, at most 64 KiB.
pub fn validate_queue_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("queue name must not be empty"));
    }
    if name.len() > 65_536 {
        return Err(Error::invalid("queue name longer than 65536 bytes"));
    }
    Ok(())
}

/// The part of a key that Redis Cluster hashes: the hash tag (the text between the first
/// `{` and the first `}` after it, when not empty), else the whole key.
pub fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, mod 16384.
pub fn cluster_slot(key: &str) -> u16 {
    let mut crc: u16 = 0;
    for &b in hash_tag(key).as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

impl DelayedKeys {
    /// Checks that every key of the queue hashes to one cluster slot, as its scripts need.
    /// Redisson's naming splits names such as `a}b`, `{x`, `x{}y` or `a{b` over slots
    /// (`N` is hashed whole, `prefix:{N}` by its tag); a name with braces must hold a
    /// non-empty hash tag, `{tag}`, and a name without `{` must not hold `}`.
    pub fn check_one_slot(&self) -> Result<()> {
        let tag = hash_tag(&self.destination);
        let keys = [
            &self.timeout_set,
            &self.queue_list,
            &self.channel,
            &self.corrupt_list,
        ];
        if keys.iter().all(|k| hash_tag(k) == tag) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "queue name {:?} would put the queue's keys in different cluster slots: \
             in cluster mode a name must hold no braces, or a non-empty hash tag such as {{tag}}",
            self.destination
        )))
    }

    /// The keys for the queue named `name` (validated).
    pub fn new(name: &str) -> Result<Self> {
        validate_queue_name(name)?;
        Ok(DelayedKeys {
            destination: name.to_owned(),
            timeout_set: prefixed("redisson_delay_queue_timeout", name),
            queue_list: prefixed("redisson_delay_queue", name),
            channel: prefixed("redisson_delay_queue_channel", name),
            corrupt_list: prefixed("delayq_corrupt", name),
            offer_token_prefix: prefixed("delayq_offer", name),
        })
    }
}

/// The keys of one reliable queue named `N`: all under the hash tag `{dq:N}`, so the
/// whole queue lives in one cluster slot. See `docs/reliable-queue.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReliableKeys {
    /// The queue's name.
    pub name: String,
    /// `{dq:N}:`: the prefix of every key, including the bucket lists of the timing wheel
    /// (`{dq:N}:b:<hex>` at level 0, `{dq:N}:b<level>:<hex>` above) and the sorted sets of
    /// the coarser levels' buckets (`{dq:N}:wheel<level>`).
    pub prefix: String,
    /// Sorted set of the wheel's level-0 (1 s) buckets (bucket number in hex, scored by its
    /// start in ms).
    pub wheel: String,
    /// Sorted set of packed entries due within the next bucket width, scored by due ms.
    pub near: String,
    /// Stream of ready and in-flight messages, consumer group `delayq`.
    pub ready: String,
    /// Hash: id -> location, for caller ids and moved messages (de-duplication, cancel).
    pub ids: String,
    /// Hash: id -> dead letter.
    pub dead: String,
    /// Hash of counters.
    pub meta: String,
    /// Pub/sub channel announcing a new earliest wake-up time.
    pub channel: String,
}

impl ReliableKeys {
    /// The keys for the reliable queue named `name` (validated).
    pub fn new(name: &str) -> Result<Self> {
        validate_queue_name(name)?;
        let prefix = format!("{{dq:{name}}}:");
        Ok(ReliableKeys {
            name: name.to_owned(),
            wheel: format!("{prefix}wheel"),
            near: format!("{prefix}near"),
            ready: format!("{prefix}ready"),
            ids: format!("{prefix}ids"),
            dead: format!("{prefix}dead"),
            meta: format!("{prefix}meta"),
            channel: format!("{prefix}wake"),
            prefix,
        })
    }

    /// The six fixed keys every reliable script takes, in order.
    pub(crate) fn script_keys(&self) -> [&str; 6] {
        [
            &self.wheel,
            &self.near,
            &self.ready,
            &self.ids,
            &self.dead,
            &self.meta,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redisson() {
        let k = DelayedKeys::new("orders").unwrap();
        assert_eq!(k.destination, "orders");
        assert_eq!(k.timeout_set, "redisson_delay_queue_timeout:{orders}");
        assert_eq!(k.queue_list, "redisson_delay_queue:{orders}");
        assert_eq!(k.channel, "redisson_delay_queue_channel:{orders}");
        assert_eq!(k.corrupt_list, "delayq_corrupt:{orders}");
        let k = DelayedKeys::new("{a}b").unwrap();
        assert_eq!(k.timeout_set, "redisson_delay_queue_timeout:{a}b");
        assert!(DelayedKeys::new("").is_err());
    }

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT on Redis 7.
        assert_eq!(cluster_slot("foo"), 12182);
        assert_eq!(cluster_slot("{user1000}.following"), 3443);
        assert_eq!(cluster_slot("123456789"), 0x31C3);
    }

    #[test]
    fn names_that_split_slots_are_refused() {
        for bad in ["a}b", "{x", "x{}y", "a{b", "}", "{}", "a{}b}c"] {
            let k = DelayedKeys::new(bad).unwrap();
            assert!(k.check_one_slot().is_err(), "{bad}");
        }
        for good in ["orders", "{a}b", "x{tag}y", "a-b.c:d", "{a}}"] {
            let k = DelayedKeys::new(good).unwrap();
            assert!(k.check_one_slot().is_ok(), "{good}");
        }
    }
}
