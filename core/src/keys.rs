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

/// CRC16/XMODEM (polynomial 0x1021, initial 0), the hash of Redis Cluster, by table.
static CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, mod 16384.
pub fn cluster_slot(key: &str) -> u16 {
    crc16(hash_tag(key).as_bytes()) % 16384
}

/// CRC-32/IEEE (the CRC32 of zlib, Ethernet and `java.util.zip.CRC32`: reflected
/// polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF), by table.
static CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32/IEEE of `bytes` (`crc32(b"123456789") == 0xCBF43926`), as seed 002 computes a
/// message's slot.
pub fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |crc, &b| {
        (crc >> 8) ^ CRC32_TABLE[usize::from(crc as u8 ^ b)]
    })
}

/// The part of a message id that picks its shard: the 16 random hex digits of a generated
/// id (`<hex>-<16 hex digits>`, whose first part, the due second, the client does not know
/// before the server computed it), else the whole id.
pub fn id_shard_basis(id: &str) -> &str {
    let b = id.as_bytes();
    let n = b.len();
    let generated = n >= 18
        && b[n - 17] == b'-'
        && b[n - 16..]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        && b[..n - 17]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    if generated {
        &id[n - 16..]
    } else {
        id
    }
}

/// The shard of a message of a queue with `shards` sub-queues (a power of two): CRC-32/IEEE
/// of `basis` mod `shards`. `basis` is the caller's shard key, or else
/// [`id_shard_basis`] of the message id.
pub fn shard_for(basis: &str, shards: u32) -> u32 {
    if shards <= 1 {
        return 0;
    }
    crc32(basis.as_bytes()) % shards
}

/// The hash tag of shard `shard` of the reliable queue `name` split into `shards`
/// sub-queues (a power of two). One shard: `dq:N`, the layout of an unsharded queue.
/// Otherwise `dq:N:s`, or `dq:N:s~k` with the smallest `k >= 1` for which the tag's cluster
/// slot falls in the middle eighth of the `s`-th of `shards` equal slot ranges
/// (`[(s + 7/16) * 16384 / shards, (s + 9/16) * 16384 / shards)`, at least one slot wide;
/// `dq:N:s` itself when it already does). So the shards' slots are evenly spaced over
/// 0..16384, each near the middle of its range, and a cluster whose masters own equal
/// contiguous slot ranges (what `redis-cli --cluster create` makes) gets `shards / M`
/// shards per master, rounded up or down. See `docs/cluster.md`.
pub fn shard_tag(name: &str, shard: u32, shards: u32) -> String {
    if shards <= 1 {
        return format!("dq:{name}");
    }
    // The search costs up to thousands of CRC16s a shard at 1024 shards, and every handle
    // asks for every tag several times: each is found once per process.
    type Found = std::collections::HashMap<(String, u32, u32), String>;
    // (Per process: a child forked while a thread of its parent held the lock would wait.)
    static FOUND: crate::process::PerProcess<std::sync::Mutex<Found>> =
        crate::process::PerProcess::new(Default::default);
    let key = (name.to_owned(), shard, shards);
    if let Some(tag) = FOUND.get().lock().expect("shard tags").get(&key) {
        return tag.clone();
    }
    let tag = search_shard_tag(name, shard, shards);
    let mut found = FOUND.get().lock().expect("shard tags");
    if found.len() >= 100_000 {
        found.clear(); // a process that names that many shards finds them again
    }
    found.insert(key, tag.clone());
    tag
}

fn search_shard_tag(name: &str, shard: u32, shards: u32) -> String {
    let range = 16384.0 / f64::from(shards);
    let lo = (f64::from(shard) + 7.0 / 16.0) * range;
    let mut lo = lo.floor() as u32;
    let mut hi = ((f64::from(shard) + 9.0 / 16.0) * range).floor() as u32;
    if hi <= lo {
        hi = lo + 1;
    }
    lo = lo.min(16383);
    hi = hi.min(16384);
    let base = format!("dq:{name}:{shard}");
    let fits = |tag: &str| {
        let slot = u32::from(crc16(tag.as_bytes()) % 16384);
        lo <= slot && slot < hi
    };
    if fits(&base) {
        return base;
    }
    let mut k: u64 = 1;
    loop {
        let tag = format!("{base}~{k}");
        if fits(&tag) {
            return tag;
        }
        k += 1;
    }
}

/// The queue a key belongs to, as a key scan finds queues (see [`queue_of_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueOfKey<'a> {
    /// A reliable queue, by its ready stream, metadata, dead letters or settings (a shard's
    /// keys name the sharded queue), or a `{dq:N}:webhook` record of `delayq serve`.
    Reliable(&'a str),
    /// A Redisson-compatible delayed queue, by its timeout sorted set.
    Delayed(&'a str),
}

/// The queue that `key` shows exists, if any: one key of each queue's layout is enough
/// (the others would name it again).
pub fn queue_of_key(key: &str) -> Option<QueueOfKey<'_>> {
    if let Some(rest) = key.strip_prefix("{dq:") {
        let suffixes = ["}:ready", "}:meta", "}:dead", "}:settings", "}:webhook"];
        let tag = suffixes.iter().find_map(|s| rest.strip_suffix(s))?;
        return Some(QueueOfKey::Reliable(reliable_queue_of_tag(tag)));
    }
    let rest = key.strip_prefix("redisson_delay_queue_timeout:")?;
    let name = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
    Some(QueueOfKey::Delayed(name.unwrap_or(rest)))
}

/// The reliable queue whose keys carry the hash tag `{dq:T}`, given `T`: the queue `N`
/// when `T` is the tag of one of its shards (`N:s` or `N:s~k`, see [`shard_tag`]) for some
/// number of shards, else `T` itself (the queue named `T`, or a sharded queue's own
/// settings). For tools that find queues by their keys (`delayq serve`): a shard is not a
/// queue of its own. (A queue named like a shard of another, `a:0`, shares that shard's
/// keys anyway.)
pub fn reliable_queue_of_tag(t: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let head = match t.rsplit_once('~') {
        Some((head, k)) if digits(k) => head,
        _ => t,
    };
    let Some((name, shard)) = head.rsplit_once(':') else {
        return t;
    };
    let Some(shard) = shard.parse::<u32>().ok().filter(|_| digits(shard)) else {
        return t;
    };
    let tag = format!("dq:{t}");
    let is_shard = (1..=10)
        .map(|p| 1u32 << p)
        .any(|n| shard < n && shard_tag(name, shard, n) == tag);
    if is_shard {
        name
    } else {
        t
    }
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
    /// The keys for the reliable queue named `name` (validated): the whole queue when it
    /// has one shard, and the queue's settings whatever its shards.
    pub fn new(name: &str) -> Result<Self> {
        validate_queue_name(name)?;
        Ok(Self::with_tag(name, &format!("dq:{name}")))
    }

    /// The keys of shard `shard` of the reliable queue `name` split into `shards`
    /// sub-queues: under the hash tag [`shard_tag`] (`{dq:N}` itself for one shard).
    pub fn shard(name: &str, shard: u32, shards: u32) -> Result<Self> {
        validate_queue_name(name)?;
        if shards == 0 || !shards.is_power_of_two() || shard >= shards {
            return Err(Error::invalid(format!(
                "no shard {shard} of {shards} (shards are a power of two)"
            )));
        }
        if shards > 1 && name.contains(['{', '}']) {
            // Redis Cluster hashes a key by its text up to the first `}`: every shard's
            // keys would share one slot, and sharding would do nothing.
            return Err(Error::invalid(format!(
                "queue name {name:?} holds a brace: a queue split into shards must have none, \
                 or all its shards would hash to one cluster slot"
            )));
        }
        Ok(Self::with_tag(name, &shard_tag(name, shard, shards)))
    }

    fn with_tag(name: &str, tag: &str) -> Self {
        let prefix = format!("{{{tag}}}:");
        ReliableKeys {
            name: name.to_owned(),
            wheel: format!("{prefix}wheel"),
            near: format!("{prefix}near"),
            ready: format!("{prefix}ready"),
            ids: format!("{prefix}ids"),
            dead: format!("{prefix}dead"),
            meta: format!("{prefix}meta"),
            channel: format!("{prefix}wake"),
            prefix,
        }
    }

    /// The hash of the queue's settings (`{dq:N}:settings`; reliable_lib.lua names it too).
    pub fn settings(&self) -> String {
        format!("{}settings", self.prefix)
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
    fn crc32_is_ieee() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn generated_ids_shard_by_their_random_digits() {
        assert_eq!(
            id_shard_basis("6543a1f-0123456789abcdef"),
            "0123456789abcdef"
        );
        assert_eq!(id_shard_basis("order-17"), "order-17");
        assert_eq!(id_shard_basis("-0123456789abcdef"), "-0123456789abcdef");
        assert_eq!(id_shard_basis("x1-0123456789abcdef"), "x1-0123456789abcdef");
        assert_eq!(shard_for("anything", 1), 0);
        assert_eq!(shard_for("123456789", 8), 0xCBF4_3926 % 8);
    }

    #[test]
    fn a_sharded_queue_name_holds_no_brace() {
        for name in ["a}b", "x{y}z", "{t}"] {
            assert!(
                ReliableKeys::shard(name, 0, 1).is_ok(),
                "{name}: one shard is one slot"
            );
            let err = ReliableKeys::shard(name, 0, 4).unwrap_err().to_string();
            assert!(err.contains("holds a brace"), "{name}: {err}");
        }
        assert!(ReliableKeys::shard("a:b", 3, 4).is_ok());
    }

    #[test]
    fn a_shard_tag_names_its_queue() {
        for shards in [2, 4, 16, 1024] {
            for shard in [0, shards / 2, shards - 1] {
                let tag = shard_tag("orders:eu", shard, shards);
                let t = tag.strip_prefix("dq:").unwrap();
                assert_eq!(reliable_queue_of_tag(t), "orders:eu", "{tag}");
            }
        }
        for t in [
            "orders",
            "a:b",
            "a:1~",
            "a:x~3",
            "a:1~99999999",
            "a:",
            ":",
            "~",
            "a:01",
        ] {
            assert_eq!(reliable_queue_of_tag(t), t);
        }
    }

    #[test]
    fn a_key_names_its_queue() {
        let shard = format!("{{{}}}:ready", shard_tag("jobs", 3, 8));
        let cases = [
            ("{dq:jobs}:ready", Some(QueueOfKey::Reliable("jobs"))),
            ("{dq:a:b}:settings", Some(QueueOfKey::Reliable("a:b"))),
            (shard.as_str(), Some(QueueOfKey::Reliable("jobs"))),
            ("{dq:jobs}:delayed", None), // (its ready stream or meta names it)
            (
                "redisson_delay_queue_timeout:{orders}",
                Some(QueueOfKey::Delayed("orders")),
            ),
            (
                "redisson_delay_queue_timeout:a{b}",
                Some(QueueOfKey::Delayed("a{b}")),
            ),
            ("redisson_delay_queue:{orders}", None),
            ("orders", None),
        ];
        for (key, queue) in cases {
            assert_eq!(queue_of_key(key), queue, "{key}");
        }
    }

    #[test]
    fn shard_tags_spread_evenly_over_the_slots() {
        assert_eq!(shard_tag("orders", 0, 1), "dq:orders");
        assert_eq!(
            ReliableKeys::shard("orders", 0, 1).unwrap(),
            ReliableKeys::new("orders").unwrap()
        );
        for shards in [2u32, 4, 8, 16, 64, 256] {
            let range = 16384 / shards;
            for s in 0..shards {
                let tag = shard_tag("orders", s, shards);
                assert!(tag.starts_with(&format!("dq:orders:{s}")), "{tag}");
                let slot = u32::from(cluster_slot(&format!("{{{tag}}}:x")));
                assert_eq!(slot / range, s, "{tag} in slot {slot}");
                let middle = s * range + range / 2;
                assert!(
                    slot.abs_diff(middle) <= range / 16 + 1,
                    "{tag} in slot {slot}"
                );
            }
        }
        // 8 shards over the 3 masters `redis-cli --cluster create` makes: 3, 2, 3.
        let masters = [(0u32, 5460u32), (5461, 10922), (10923, 16383)];
        let mut per_master = [0; 3];
        for s in 0..8 {
            let slot = u32::from(cluster_slot(&format!("{{{}}}", shard_tag("q", s, 8))));
            let m = masters
                .iter()
                .position(|&(a, b)| a <= slot && slot <= b)
                .unwrap();
            per_master[m] += 1;
        }
        assert_eq!(per_master, [3, 2, 3]);
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
