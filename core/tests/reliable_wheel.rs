//! The reliable queue's hierarchical timing wheel (docs/reliable-queue.md), against a real
//! redis-server: memory per waiting message at every spread of due times, a cascade through
//! every level (short widths), cancel and reschedule at each level and in a coarse bucket
//! whose cascade has not reached the message yet, cascades in batches, corrupt entries in a
//! coarse bucket, data of the one-level layout.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::RedisServer;
use delayq::{Client, ReliableQueue, ReliableQueueOptions, ReliableStats, SchedulerOptions};
use redis::aio::MultiplexedConnection;

/// Core's default levels, (width, lead) in ms, finest first.
const LEVELS: [(i64, i64); 4] = {
    let l = delayq::WHEEL_LEVELS;
    [
        (l[0].0 as i64, l[0].1 as i64),
        (l[1].0 as i64, l[1].1 as i64),
        (l[2].0 as i64, l[2].1 as i64),
        (l[3].0 as i64, l[3].1 as i64),
    ]
};
const DAY: i64 = 86_400_000;
const WAIT: Option<Duration> = Some(Duration::from_secs(5));

fn ms(x: i64) -> Duration {
    Duration::from_millis(x as u64)
}

fn levels(l: &[(i64, i64)]) -> Vec<(Duration, Duration)> {
    l.iter().map(|&(w, a)| (ms(w), ms(a))).collect()
}

fn no_transfer(batch: usize) -> ReliableQueueOptions {
    ReliableQueueOptions {
        scheduler: SchedulerOptions {
            enabled: false,
            batch_size: batch,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The level a message due at `due` is placed in at `now` (-1: `near`), as the scripts
/// decide it: the coarsest level whose bucket for `due` has not opened.
fn level_for(due: i64, now: i64) -> i32 {
    for (l, &(w, a)) in LEVELS.iter().enumerate().rev() {
        if due.div_euclid(w) * w - a > now {
            return l as i32;
        }
    }
    -1
}

/// A delay that puts a message in `level` whether it is offered at `now` or up to 2 s later.
fn delay_for_level(level: i32, now: i64) -> i64 {
    let mut d = 300;
    loop {
        if level_for(now + d, now) == level && level_for(now + 2000 + d, now + 2000) == level {
            return d;
        }
        d += if d < 120_000 { 100 } else { 60_000 };
    }
}

async fn raw(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn keys_matching(conn: &mut MultiplexedConnection, pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        out.extend(keys);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

fn escaped(prefix: &str) -> String {
    prefix.replace('{', "\\{").replace('}', "\\}")
}

/// The bucket lists and coarse wheels of a queue (`{dq:N}:b...`, `{dq:N}:wheel<l>`).
async fn wheel_keys(conn: &mut MultiplexedConnection, q: &ReliableQueue) -> Vec<String> {
    let p = escaped(&q.keys().prefix);
    let mut keys = keys_matching(conn, &format!("{p}b*")).await;
    keys.extend(keys_matching(conn, &format!("{p}wheel*")).await);
    keys.sort();
    keys
}

/// The list of bucket number `bucket` of level `level`.
fn bucket_key(q: &ReliableQueue, level: i32, bucket: i64) -> String {
    match level {
        0 => format!("{}b:{bucket:x}", q.keys().prefix),
        l => format!("{}b{l}:{bucket:x}", q.keys().prefix),
    }
}

/// The due second named by a generated id.
fn born(id: &str) -> i64 {
    i64::from_str_radix(id.split('-').next().unwrap(), 16).unwrap()
}

async fn location(conn: &mut MultiplexedConnection, q: &ReliableQueue, id: &str) -> String {
    let loc: Option<String> = redis::cmd("HGET")
        .arg(&q.keys().ids)
        .arg(id)
        .query_async(conn)
        .await
        .unwrap();
    loc.unwrap_or_default()
}

/// The level a caller's id is placed in according to `ids` (-1: near).
async fn level_of_caller_id(conn: &mut MultiplexedConnection, q: &ReliableQueue, id: &str) -> i32 {
    let loc = location(conn, q, id).await;
    if loc.starts_with('n') {
        -1
    } else if let Some((l, _)) = loc.strip_prefix('b').and_then(|r| r.split_once(':')) {
        l.parse().unwrap()
    } else {
        assert!(loc.starts_with('b'), "location {loc:?}");
        0
    }
}

/// Whether the generated id's message sits in its bucket of `level` (-1: near).
async fn holds(conn: &mut MultiplexedConnection, q: &ReliableQueue, level: i32, id: &str) -> bool {
    let due = born(id) * 1000;
    let entries: Vec<Vec<u8>> = if level < 0 {
        redis::cmd("ZRANGEBYSCORE")
            .arg(&q.keys().near)
            .arg(due)
            .arg(due + 999)
            .query_async(conn)
            .await
            .unwrap()
    } else {
        let width = LEVELS[level as usize].0;
        redis::cmd("LRANGE")
            .arg(bucket_key(q, level, due.div_euclid(width)))
            .arg(0)
            .arg(-1)
            .query_async(conn)
            .await
            .unwrap()
    };
    let random = id.split('-').nth(1).unwrap().as_bytes();
    entries.iter().any(|e| e.windows(16).any(|w| w == random))
}

async fn used_memory(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

async fn evalsha_calls(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map(|r| r.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// MEMORY USAGE of every key of the queue, and the `INFO used_memory` growth, per message,
/// for `n` waiting 44-byte messages with generated ids, due 10 minutes from now and after,
/// spread evenly over `spread` ms.
#[tokio::test(flavor = "multi_thread")]
async fn memory_per_waiting_message_is_at_most_100_bytes_at_every_spread() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let n: i64 = 20_000;
    let payload = [b'x'; 44];
    for (label, spread) in [
        ("1s", 1000),
        ("1h", 3_600_000),
        ("1d", DAY),
        ("30d", 30 * DAY),
    ] {
        let q = c
            .reliable_queue(&format!("memory-{label}"), no_transfer(1000))
            .unwrap();
        let before = used_memory(&mut conn).await;
        for from in (0..n).step_by(1000) {
            q.offer_all(
                (from..from + 1000).map(|i| (&payload[..], ms(600_000 + i * spread / n), None)),
            )
            .await
            .unwrap();
        }
        let after = used_memory(&mut conn).await;
        let mut usage = 0u64;
        let keys = keys_matching(&mut conn, &format!("{}*", escaped(&q.keys().prefix))).await;
        for key in &keys {
            let u: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut conn)
                .await
                .unwrap();
            usage += u.unwrap_or(0);
        }
        let per = usage as f64 / n as f64;
        println!(
            "spread {label}: {per:.1} B per waiting message by MEMORY USAGE ({} keys), {:.1} B by INFO used_memory",
            keys.len(),
            after.saturating_sub(before) as f64 / n as f64
        );
        assert_eq!(q.stats().await.unwrap().delayed, n as u64);
        assert!(
            per <= 100.0,
            "spread {label}: {per:.1} B per waiting message"
        );
    }
}

/// Short levels (50 ms, 200 ms, 800 ms, 3.2 s buckets) so that messages pass through every
/// level within seconds: each arrives once, never before its due time.
#[tokio::test(flavor = "multi_thread")]
async fn messages_cascade_through_every_level_once_and_never_early() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let name = "cascade";
    delayq::set_wheel_levels(
        name,
        Some(&levels(&[(50, 50), (200, 100), (800, 200), (3200, 400)])),
    )
    .unwrap();
    // Offered through a handle without a transfer task, so that the layout can be looked at.
    let offers = c.reliable_queue(name, no_transfer(1000)).unwrap();
    let start = c.server_time_ms().await.unwrap();
    let n = 400i64;
    let delays: Vec<i64> = (0..n).map(|i| (i * 7919) % 9000).collect();
    let messages: Vec<(String, Duration, Option<String>)> = (0..n)
        .map(|i| {
            let id = (i % 2 == 1).then(|| format!("caller-{i}"));
            (format!("p{i}"), ms(delays[i as usize]), id)
        })
        .collect();
    let ids = offers
        .offer_all(
            messages
                .iter()
                .map(|(p, d, id)| (p.as_bytes(), *d, id.as_deref())),
        )
        .await
        .unwrap();
    // Level 3 holds buckets now whatever the phase of the clock (some delays are longer
    // than its width plus lead); the finer levels at some instant while coarser ones
    // cascade into them (sampled below).
    let members: usize = redis::cmd("ZCARD")
        .arg(format!("{}wheel3", offers.keys().prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(members > 0, "level 3 holds buckets");
    let sampler = {
        let mut conn = raw(&server).await;
        let wheels = [
            offers.keys().wheel.clone(),
            format!("{}wheel1", offers.keys().prefix),
            format!("{}wheel2", offers.keys().prefix),
        ];
        tokio::spawn(async move {
            let mut seen = [0usize; 3];
            loop {
                for (i, w) in wheels.iter().enumerate() {
                    let n: usize = redis::cmd("ZCARD")
                        .arg(w)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    seen[i] = seen[i].max(n);
                }
                if seen.iter().all(|&n| n > 0) {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let expected: HashMap<String, (String, i64)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), (format!("p{i}"), start + delays[i])))
        .collect();
    let calls_before = evalsha_calls(&mut conn).await;

    // A handle with a transfer task, and one consumer.
    let q = c.reliable_queue(name, Default::default()).unwrap();
    let mut seen = HashMap::new();
    let mut latest = 0i64;
    while seen.len() < n as usize {
        let d = q
            .receive(WAIT)
            .await
            .unwrap()
            .expect("every message arrives");
        let now = c.server_time_ms().await.unwrap();
        let (payload, not_before) = &expected[&d.id];
        assert_eq!(d.payload, payload.as_bytes(), "{}", d.id);
        assert!(
            d.due_at >= *not_before,
            "{} due {} before {not_before}",
            d.id,
            d.due_at
        );
        assert!(now >= d.due_at, "{} delivered early", d.id);
        latest = latest.max(now - d.due_at);
        assert!(seen.insert(d.id.clone(), ()).is_none(), "{} twice", d.id);
        assert!(d.ack().await.unwrap());
    }
    assert!(q
        .receive(Some(Duration::from_millis(500)))
        .await
        .unwrap()
        .is_none());
    let seen = tokio::time::timeout(Duration::from_secs(1), sampler)
        .await
        .expect("levels 0, 1 and 2 held buckets at some instant")
        .unwrap();
    let calls = evalsha_calls(&mut conn).await - calls_before;
    println!("latest delivery {latest} ms after its due time; {calls} script calls in all; levels 0, 1, 2 held up to {seen:?} buckets");
    // About one transfer call per bucket opening and per due time, plus the acks: a task
    // that spun on work it could not do would make tens of thousands.
    assert!(calls < 4000, "{calls} script calls");
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    assert_eq!(wheel_keys(&mut conn, &q).await, Vec::<String>::new());
    delayq::set_wheel_levels(name, None).unwrap();
}

/// Default levels, no transfer: at each level (and in `near`), a generated id and a
/// caller's id are found by cancel and reschedule, moved, and counted.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_and_reschedule_find_messages_at_every_level() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let q = c.reliable_queue("levels", no_transfer(1000)).unwrap();
    for level in -1..=3 {
        let now = c.server_time_ms().await.unwrap();
        let delay = ms(delay_for_level(level, now));
        let generated = q.offer("g", delay, None).await.unwrap();
        let moved = q.offer("m", delay, None).await.unwrap();
        let caller = format!("caller-{level}");
        q.offer("c", delay, Some(&caller)).await.unwrap();
        assert!(
            holds(&mut conn, &q, level, &generated).await,
            "level {level}"
        );
        assert_eq!(level_of_caller_id(&mut conn, &q, &caller).await, level);
        assert_eq!(q.stats().await.unwrap().delayed, 3);

        assert!(q.cancel(&generated).await.unwrap(), "level {level}");
        assert!(!q.cancel(&generated).await.unwrap());
        assert!(!holds(&mut conn, &q, level, &generated).await);
        assert_eq!(q.stats().await.unwrap().delayed, 2);

        // Each to another level, then found there.
        let to = (level + 2) % 5 - 1;
        let now = c.server_time_ms().await.unwrap();
        let delay = ms(delay_for_level(to, now));
        assert!(q.reschedule(&caller, delay).await.unwrap(), "level {level}");
        assert!(q.reschedule(&moved, delay).await.unwrap(), "level {level}");
        assert!(!holds(&mut conn, &q, level, &moved).await);
        assert_eq!(level_of_caller_id(&mut conn, &q, &caller).await, to);
        assert_eq!(level_of_caller_id(&mut conn, &q, &moved).await, to);
        assert_eq!(q.stats().await.unwrap().delayed, 2);
        assert!(q.cancel(&caller).await.unwrap());
        assert!(q.cancel(&moved).await.unwrap());
        assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
        assert_eq!(
            wheel_keys(&mut conn, &q).await,
            Vec::<String>::new(),
            "level {level}"
        );
        let ids: usize = redis::cmd("HLEN")
            .arg(&q.keys().ids)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(ids, 0);
    }
}

/// A coarse bucket that has opened but whose cascade has not reached its messages (no
/// transfer ran): cancel and reschedule look there after the finer level they belong in.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_in_an_opened_coarse_bucket_not_yet_cascaded_is_found() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let name = "second-look";
    let q = c.reliable_queue(name, no_transfer(1000)).unwrap();
    let now = c.server_time_ms().await.unwrap();
    let in_day = q.offer("d", ms(3 * DAY), None).await.unwrap();
    let in_day_too = q.offer("d2", ms(3 * DAY), None).await.unwrap();
    let in_hour = q
        .offer("h", ms(delay_for_level(2, now)), None)
        .await
        .unwrap();
    assert!(holds(&mut conn, &q, 3, &in_day).await);
    assert!(holds(&mut conn, &q, 2, &in_hour).await);
    // Leads of days: the day and hour buckets have opened, so these messages belong in
    // minute buckets now, and are still where they were.
    let mut opened = LEVELS;
    opened[2].1 = 4 * DAY;
    opened[3].1 = 4 * DAY;
    delayq::set_wheel_levels(name, Some(&levels(&opened))).unwrap();
    assert!(q.cancel(&in_day).await.unwrap());
    assert!(q.cancel(&in_hour).await.unwrap());
    assert!(q.reschedule(&in_day_too, ms(5000)).await.unwrap());
    assert!(!holds(&mut conn, &q, 3, &in_day_too).await);
    assert_eq!(
        location(&mut conn, &q, &in_day_too).await.chars().next(),
        Some('b')
    );
    assert_eq!(q.stats().await.unwrap().delayed, 1);
    assert!(q.cancel(&in_day_too).await.unwrap());
    assert_eq!(wheel_keys(&mut conn, &q).await, Vec::<String>::new());
    delayq::set_wheel_levels(name, None).unwrap();
}

/// Offers `n` messages with generated ids into one day bucket three days ahead (noon), plus
/// one with a caller's id; returns the ids and the bucket's number.
async fn fill_day_bucket(c: &Client, q: &ReliableQueue, n: i64) -> (Vec<String>, i64) {
    let now = c.server_time_ms().await.unwrap();
    let day = now / DAY + 3;
    let noon = day * DAY + DAY / 2;
    let mut ids = Vec::new();
    for from in (0..n).step_by(1000) {
        let k = (n - from).min(1000);
        ids.extend(
            q.offer_all((from..from + k).map(|i| ("x", ms(noon + i - now), None)))
                .await
                .unwrap(),
        );
    }
    ids.push(q.offer("c", ms(noon - now), Some("caller")).await.unwrap());
    (ids, day)
}

/// A day bucket of 5000 messages cascades into hour buckets at most `batch` (100) entries
/// per script call, each message once, counted, caller ids re-indexed.
#[tokio::test(flavor = "multi_thread")]
async fn a_coarse_bucket_cascades_in_batches() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let name = "batches";
    let q = c.reliable_queue(name, no_transfer(100)).unwrap();
    let (ids, day) = fill_day_bucket(&c, &q, 5000).await;
    let day_key = bucket_key(&q, 3, day);
    let len: usize = redis::cmd("LLEN")
        .arg(&day_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 5001);
    let mut opened = LEVELS;
    opened[3].1 = 4 * DAY;
    delayq::set_wheel_levels(name, Some(&levels(&opened))).unwrap();
    let calls = evalsha_calls(&mut conn).await;
    let outcome = q.transfer_now().await.unwrap();
    let calls = evalsha_calls(&mut conn).await - calls;
    assert_eq!(outcome.moved, 5001);
    assert!(
        calls >= 51,
        "{calls} script calls for 5001 entries in batches of 100"
    );
    assert_eq!(q.stats().await.unwrap().delayed, 5001);
    let hour_key = bucket_key(&q, 2, (day * DAY + DAY / 2) / 3_600_000);
    let wheel = wheel_keys(&mut conn, &q).await;
    assert_eq!(
        wheel,
        vec![hour_key.clone(), format!("{}wheel2", q.keys().prefix)],
        "all in the noon hour bucket"
    );
    let len: usize = redis::cmd("LLEN")
        .arg(&hour_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 5001);
    assert!(location(&mut conn, &q, "caller").await.starts_with("b2:"));
    // A second pass finds nothing to do, and says when the hour bucket opens.
    let outcome = q.transfer_now().await.unwrap();
    assert_eq!(outcome.moved, 0);
    assert_eq!(
        outcome.next_due,
        Some((day * DAY + DAY / 2) / 3_600_000 * 3_600_000 - LEVELS[2].1)
    );
    for id in [&ids[0], &ids[2500], &ids[5000]] {
        assert!(q.cancel(id).await.unwrap(), "{id}");
    }
    assert_eq!(q.stats().await.unwrap().delayed, 4998);
    delayq::set_wheel_levels(name, None).unwrap();
}

/// Entries of a coarse bucket that cannot be unpacked (too short; an offset beyond the
/// bucket) go to `{dq:N}:corrupt` when the bucket cascades; the others go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_entry_in_a_coarse_bucket_is_set_aside() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let name = "corrupt";
    let q = c.reliable_queue(name, no_transfer(1000)).unwrap();
    let (ids, day) = fill_day_bucket(&c, &q, 2).await;
    let day_key = bucket_key(&q, 3, day);
    let mut beyond = vec![0u8, 0, 0xff, 0xff, 0xff, 0xff, 2, 0];
    beyond.extend_from_slice(b"idpayload");
    let _: () = redis::pipe()
        .cmd("LPUSH")
        .arg(&day_key)
        .arg("garbage")
        .ignore()
        .cmd("RPUSH")
        .arg(&day_key)
        .arg(&beyond)
        .ignore()
        .cmd("HINCRBY")
        .arg(&q.keys().meta)
        .arg("delayed")
        .arg(2)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut opened = LEVELS;
    opened[3].1 = 4 * DAY;
    delayq::set_wheel_levels(name, Some(&levels(&opened))).unwrap();
    let outcome = q.transfer_now().await.unwrap();
    assert_eq!(outcome.moved, 5);
    let corrupt: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(format!("{}corrupt", q.keys().prefix))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(corrupt, vec![b"garbage".to_vec(), beyond]);
    assert_eq!(q.stats().await.unwrap().delayed, 3);
    for id in &ids {
        assert!(q.cancel(id).await.unwrap(), "{id}");
    }
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    delayq::set_wheel_levels(name, None).unwrap();
}

/// Undecodable entries written by hand (never counted in by an offer) are set aside
/// without taking the delayed count below 0 (it read 2^64 - 4 after four of them).
#[tokio::test(flavor = "multi_thread")]
async fn entries_set_aside_never_take_the_delayed_count_below_zero() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let q = c.reliable_queue("uncounted", no_transfer(1000)).unwrap();
    let good = q.offer("good", ms(60_000), None).await.unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&q.keys().near)
        .arg(0)
        .arg("garbage")
        .arg(1)
        .arg("more garbage")
        .query_async(&mut conn)
        .await
        .unwrap();
    q.transfer_now().await.unwrap();
    let corrupt: u64 = redis::cmd("LLEN")
        .arg(format!("{}corrupt", q.keys().prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(corrupt, 2);
    let delayed = q.stats().await.unwrap().delayed;
    assert!(delayed <= 1, "{delayed}");
    // A count that under-reads does not let the shards change under the waiting message.
    let change = ReliableQueueOptions {
        shards: Some(4),
        update_settings: true,
        ..no_transfer(1000)
    };
    let refused = c.reliable_queue("uncounted", change).unwrap().stats().await;
    let err = refused.expect_err("the queue holds a message");
    assert!(err.to_string().contains("holds messages"), "{err}");
    assert!(q.cancel(&good).await.unwrap());
    assert_eq!(q.stats().await.unwrap().delayed, 0);
}

/// Messages waiting in the layout of one level of 1 s buckets (before the wheel had levels)
/// are found by cancel and reschedule and delivered by the hierarchical wheel.
#[tokio::test(flavor = "multi_thread")]
async fn messages_of_the_one_level_layout_are_still_found_and_delivered() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let name = "one-level";
    delayq::set_wheel_levels(name, Some(&levels(&[(1000, 1000)]))).unwrap();
    let old = c.reliable_queue(name, no_transfer(1000)).unwrap();
    let far = old.offer("far", ms(3_600_000), None).await.unwrap();
    let moved = old
        .offer("moved", ms(3_600_000), Some("moved"))
        .await
        .unwrap();
    let soon = old.offer("soon", ms(2500), None).await.unwrap();
    delayq::set_wheel_levels(name, None).unwrap();
    let q = c.reliable_queue(name, Default::default()).unwrap();
    assert!(q.cancel(&far).await.unwrap());
    assert!(q.reschedule(&moved, ms(300)).await.unwrap());
    let mut got = Vec::new();
    for _ in 0..2 {
        let d = q.receive(WAIT).await.unwrap().expect("delivered");
        got.push(d.id.clone());
        d.ack().await.unwrap();
    }
    assert_eq!(got, vec![moved, soon]);
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}
