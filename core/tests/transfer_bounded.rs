//! Transfer script calls stay short however the waiting entries come due (SPEC sections 2,
//! 5 and 9).
//!
//! Redisson's queue list holds every waiting entry in offer order, and a list can only be
//! searched by scanning it; `scripts/transfer.lua` bounds the time of each call instead of
//! running one scan per due entry. These tests fill a queue through the Redis protocol (in
//! Redisson's layout, as Redisson or delayq would have written it), make its entries come
//! due in an order unrelated to their offer order, and check that no transfer call kept
//! Redis busy for 50 ms, that every value arrives exactly once and none early, and that the
//! list keeps the waiting entries in offer order.
//!
//! A call is measured by the CPU time of Redis's main thread across it (`INFO cpu` on
//! either side, in one pipeline): what the call costs the server, whatever else the machine
//! runs. SLOWLOG's wall-clock durations, printed beside, also count the moments the
//! operating system gave Redis's CPU to another process; on a loaded two-core machine that
//! alone reaches tens of milliseconds, which would make a wall-clock assertion flaky.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::RedisServer;
use delayq::keys::DelayedKeys;
use delayq::{Client, DelayedQueue, SchedulerOptions};
use redis::aio::MultiplexedConnection;
use redis::Value;

/// The bound of SPEC section 9 for one call, in microseconds.
const LIMIT_US: i64 = 50_000;
const HOUR_MS: i64 = 3_600_000;

/// A small deterministic generator (splitmix64), so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// The value of entry `i`: 44 bytes, the size the benchmarks use.
fn value(i: usize) -> Vec<u8> {
    format!("value-{i:038}").into_bytes()
}

/// Entry `i` packed as Redisson packs it, with an id of its own.
fn entry(i: usize) -> Vec<u8> {
    delayq::codec::pack(&(i as u64).to_be_bytes(), &value(i)).unwrap()
}

/// A plain connection that waits for long replies, so that a long call is measured and
/// reported rather than cut short.
async fn raw(server: &RedisServer) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(120)));
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

fn queue(client: &Client, name: &str) -> DelayedQueue {
    client
        .delayed_queue_with(
            name,
            SchedulerOptions {
                enabled: false,
                ..Default::default()
            },
        )
        .unwrap()
}

/// Appends entries (index, due time) to the list and the sorted set, in the given order.
async fn fill(conn: &mut MultiplexedConnection, keys: &DelayedKeys, entries: &[(usize, i64)]) {
    for chunk in entries.chunks(1000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&keys.timeout_set);
        let mut rpush = redis::cmd("RPUSH");
        rpush.arg(&keys.queue_list);
        for &(i, due) in chunk {
            zadd.arg(due).arg(entry(i));
            rpush.arg(entry(i));
        }
        let mut pipe = redis::pipe();
        pipe.add_command(zadd).ignore().add_command(rpush).ignore();
        let () = pipe.query_async(conn).await.unwrap();
    }
}

/// Sets the due time of existing entries (what time passing does to them).
async fn set_due(conn: &mut MultiplexedConnection, keys: &DelayedKeys, entries: &[(usize, i64)]) {
    for chunk in entries.chunks(1000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&keys.timeout_set).arg("XX");
        for &(i, due) in chunk {
            zadd.arg(due).arg(entry(i));
        }
        let _: i64 = zadd.query_async(conn).await.unwrap();
    }
}

async fn llen(conn: &mut MultiplexedConnection, key: &str) -> usize {
    redis::cmd("LLEN").arg(key).query_async(conn).await.unwrap()
}

/// Elements `from..` of a list, read in slices so that no read is a long command itself.
async fn read_list(conn: &mut MultiplexedConnection, key: &str, from: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let start = from + out.len();
        let part: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(start)
            .arg(start + 4999)
            .query_async(conn)
            .await
            .unwrap();
        if part.is_empty() {
            return out;
        }
        out.extend(part);
    }
}

/// Runs transfer passes until the destination holds `target` values.
async fn transfer_until(
    q: &DelayedQueue,
    conn: &mut MultiplexedConnection,
    target: usize,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    loop {
        q.transfer_now().await.unwrap();
        let arrived = llen(conn, &q.keys().destination).await;
        assert!(
            arrived <= target,
            "{arrived} values arrived, {target} expected"
        );
        if arrived == target {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {arrived} of {target} values arrived within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The transfer script, as the crate sends it.
const TRANSFER_SCRIPT: &str = concat!(
    include_str!("../src/scripts/lib.lua"),
    include_str!("../src/scripts/transfer.lua")
);
/// The time budget the transfer task gives each call (`scheduler::TRANSFER_BUDGET_US`).
const BUDGET_US: u64 = 20_000;

/// The transfer script's reply: moved, next due, now, the sweep state, entries set aside,
/// the popped head (none: this test does not ask for one).
type Reply = (u64, i64, i64, i64, i64, i64, i64, u64, Option<Vec<u8>>);

/// Runs transfer passes the way `scheduler::transfer_due` does, call after call with the
/// sweep state handed back, and measures each call by the CPU time of Redis's main thread.
struct Transfer {
    sha: String,
    keys: DelayedKeys,
    calls: u64,
    longest_cpu_us: i64,
}

fn main_thread_cpu_us(info: &str) -> i64 {
    info.lines()
        .filter(|l| {
            l.starts_with("used_cpu_sys_main_thread:")
                || l.starts_with("used_cpu_user_main_thread:")
        })
        .map(|l| {
            let secs: f64 = l.split(':').nth(1).unwrap().trim().parse().unwrap();
            (secs * 1e6) as i64
        })
        .sum()
}

impl Transfer {
    async fn new(conn: &mut MultiplexedConnection, keys: &DelayedKeys) -> Self {
        let sha = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(TRANSFER_SCRIPT)
            .query_async(conn)
            .await
            .unwrap();
        Transfer {
            sha,
            keys: keys.clone(),
            calls: 0,
            longest_cpu_us: 0,
        }
    }

    /// One pass: calls until no entry is due; returns the entries moved.
    async fn pass(&mut self, conn: &mut MultiplexedConnection) -> u64 {
        let mut state = [0i64; 4];
        let mut moved = 0;
        loop {
            let (before, out, after): (String, Reply, String) = redis::pipe()
                .cmd("INFO")
                .arg("cpu")
                .cmd("EVALSHA")
                .arg(&self.sha)
                .arg(4)
                .arg(&self.keys.destination)
                .arg(&self.keys.timeout_set)
                .arg(&self.keys.queue_list)
                .arg(&self.keys.corrupt_list)
                .arg(1000)
                .arg(BUDGET_US)
                .arg(&state[..])
                .cmd("INFO")
                .arg("cpu")
                .query_async(conn)
                .await
                .unwrap();
            let cpu = main_thread_cpu_us(&after) - main_thread_cpu_us(&before);
            self.calls += 1;
            self.longest_cpu_us = self.longest_cpu_us.max(cpu);
            moved += out.0;
            state = [out.3, out.4, out.5, out.6];
            if !(out.1 >= 0 && out.1 <= out.2) {
                return moved;
            }
        }
    }

    /// Passes until the destination holds `target` values.
    async fn until(&mut self, conn: &mut MultiplexedConnection, target: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            self.pass(conn).await;
            let arrived = llen(conn, &self.keys.destination).await;
            assert!(
                arrived <= target,
                "{arrived} values arrived, {target} expected"
            );
            if arrived == target {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "only {arrived} of {target} values arrived within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Records every command that runs 10 ms or more (wall clock), from now on.
async fn start_slowlog(conn: &mut MultiplexedConnection) {
    for (name, v) in [
        ("slowlog-log-slower-than", "10000"),
        ("slowlog-max-len", "100000"),
    ] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(v)
            .query_async(conn)
            .await
            .unwrap();
    }
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(conn)
        .await
        .unwrap();
}

/// Wall-clock durations (µs) of the script calls on `keys` that SLOWLOG recorded.
async fn slow_transfer_calls(conn: &mut MultiplexedConnection, keys: &DelayedKeys) -> Vec<i64> {
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap();
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for e in entries {
        let Value::Array(fields) = e else { continue };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let args: Vec<String> = args.iter().map(text).collect();
        let script = args
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case("evalsha") || c.eq_ignore_ascii_case("eval"));
        if script && args.contains(&keys.queue_list) {
            out.push(*us);
        }
    }
    out
}

async fn print_slowlog(conn: &mut MultiplexedConnection, keys: &DelayedKeys) {
    let slow = slow_transfer_calls(conn, keys).await;
    println!(
        "SLOWLOG (wall clock, machine load included): {} transfer calls of 10 ms or more, longest {:.1} ms",
        slow.len(),
        slow.iter().copied().max().unwrap_or(0) as f64 / 1000.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_call_blocks_redis_for_50_ms_and_every_value_arrives_once() {
    const N: usize = 200_000;
    let started = Instant::now();
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let q = queue(&client, "bounded");
    let keys = q.keys().clone();
    let mut conn = raw(&server).await;
    start_slowlog(&mut conn).await;
    let mut transfer = Transfer::new(&mut conn, &keys).await;

    // In offer order: a quarter due already, a quarter coming due over the next two
    // seconds, half an hour ahead; each quarter scattered through the list at random.
    let mut rng = Rng(7);
    let now = client.server_time_ms().await.unwrap();
    let mut entries = Vec::with_capacity(N);
    let (mut soon, mut long) = (HashSet::new(), Vec::new());
    for i in 0..N {
        let due = match rng.below(4) {
            0 => now - 1 - rng.below(60_000) as i64,
            1 => now + 500 + rng.below(2_000) as i64,
            _ => now + HOUR_MS + rng.below(60_000) as i64,
        };
        if due < now + HOUR_MS {
            soon.insert(value(i));
        } else {
            long.push(i);
        }
        entries.push((i, due));
    }
    fill(&mut conn, &keys, &entries).await;
    println!(
        "filled {N} entries in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The first half arrives, exactly once; none of the others.
    let t = Instant::now();
    transfer
        .until(&mut conn, soon.len(), Duration::from_secs(60))
        .await;
    println!(
        "{} entries due within 2.5 s moved in {:.1} s",
        soon.len(),
        t.elapsed().as_secs_f64()
    );
    let arrived = read_list(&mut conn, &keys.destination, 0).await;
    let distinct: HashSet<_> = arrived.iter().cloned().collect();
    assert_eq!(distinct.len(), arrived.len(), "a value arrived twice");
    assert!(
        distinct == soon,
        "the values that arrived are not the due ones"
    );

    // The list still holds exactly the waiting entries, in offer order, as Redisson reads it.
    let waiting = read_list(&mut conn, &keys.queue_list, 0).await;
    let expected: Vec<Vec<u8>> = long.iter().map(|&i| entry(i)).collect();
    assert!(
        waiting == expected,
        "the list is not the waiting entries in offer order"
    );
    assert_eq!(q.size().await.unwrap(), long.len() as u64);

    // Then the rest comes due in an order unrelated to the list's: half of it, then all.
    let now = client.server_time_ms().await.unwrap();
    rng.shuffle(&mut long);
    let mut due: Vec<(usize, i64)> = long
        .iter()
        .map(|&i| (i, now - 1 - rng.below(60_000) as i64))
        .collect();
    let half = due.len() / 2;
    let t = Instant::now();
    set_due(&mut conn, &keys, &due[..half]).await;
    transfer
        .until(&mut conn, soon.len() + half, Duration::from_secs(60))
        .await;
    let remaining_in_order = read_list(&mut conn, &keys.queue_list, 0).await;
    let mut rest: Vec<usize> = long[half..].to_vec();
    rest.sort_unstable();
    assert!(
        remaining_in_order == rest.iter().map(|&i| entry(i)).collect::<Vec<_>>(),
        "the list is not the waiting entries in offer order"
    );
    // The last ones through the crate's own loop (`transfer_due`).
    set_due(&mut conn, &keys, &due.split_off(half)).await;
    transfer_until(&q, &mut conn, N, Duration::from_secs(60)).await;
    println!(
        "{} entries made due at random moved in {:.1} s",
        long.len(),
        t.elapsed().as_secs_f64()
    );

    let all = read_list(&mut conn, &keys.destination, 0).await;
    let distinct: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), N, "values arrived more or less than once");
    assert_eq!(distinct.len(), N, "a value arrived twice");
    assert!((0..N).all(|i| distinct.contains(&value(i))));
    let (list, zset, corrupt): (usize, usize, usize) = redis::pipe()
        .cmd("EXISTS")
        .arg(&keys.queue_list)
        .cmd("EXISTS")
        .arg(&keys.timeout_set)
        .cmd("LLEN")
        .arg(&keys.corrupt_list)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        (list, zset, corrupt),
        (0, 0, 0),
        "list, set and corrupt list end empty"
    );

    println!(
        "{} transfer calls measured, longest {:.1} ms of Redis CPU time (limit {} ms)",
        transfer.calls,
        transfer.longest_cpu_us as f64 / 1000.0,
        LIMIT_US / 1000
    );
    print_slowlog(&mut conn, &keys).await;
    assert!(
        transfer.longest_cpu_us < LIMIT_US,
        "a transfer call kept Redis busy {} µs",
        transfer.longest_cpu_us
    );
    println!("test ran {:.1} s", started.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread")]
async fn due_entries_missing_from_the_list_or_undecodable_do_not_stall_the_transfer() {
    const N: usize = 20_000;
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let q = queue(&client, "stray");
    let keys = q.keys().clone();
    let mut conn = raw(&server).await;
    start_slowlog(&mut conn).await;

    // Waiting entries with due ones scattered among them, plus an undecodable due entry
    // in the middle of the list and due entries in the sorted set alone, which no sweep of
    // the list can find (Redisson's scripts never leave that state; it must not stall).
    let now = client.server_time_ms().await.unwrap();
    let mut rng = Rng(11);
    let mut entries = Vec::new();
    let mut due_in_list = HashSet::new();
    for i in 0..N {
        if rng.below(500) == 0 {
            due_in_list.insert(value(i));
            entries.push((i, now - 1 - rng.below(1000) as i64));
        } else {
            entries.push((i, now + HOUR_MS));
        }
    }
    fill(&mut conn, &keys, &entries).await;
    let garbage = b"not a packed entry".to_vec();
    let () = redis::pipe()
        .cmd("ZADD")
        .arg(&keys.timeout_set)
        .arg(now - 5)
        .arg(&garbage)
        .ignore()
        .cmd("LINSERT")
        .arg(&keys.queue_list)
        .arg("BEFORE")
        .arg(entry(N / 2))
        .arg(&garbage)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let orphans: Vec<(usize, i64)> = (N..N + 40).map(|i| (i, now - 10)).collect();
    for &(i, due) in &orphans {
        let _: i64 = redis::cmd("ZADD")
            .arg(&keys.timeout_set)
            .arg(due)
            .arg(entry(i))
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    let outcome = tokio::time::timeout(Duration::from_secs(30), q.transfer_now())
        .await
        .expect("the pass ends")
        .unwrap();
    let expected = due_in_list.len() + orphans.len();
    assert_eq!(outcome.moved as usize, expected + 1, "{outcome:?}");
    assert!(outcome.next_due.unwrap() > outcome.now, "{outcome:?}");

    let arrived: HashSet<Vec<u8>> = read_list(&mut conn, &keys.destination, 0)
        .await
        .into_iter()
        .collect();
    assert_eq!(arrived.len(), expected);
    assert!(due_in_list.iter().all(|v| arrived.contains(v)));
    assert!(orphans.iter().all(|&(i, _)| arrived.contains(&value(i))));
    let corrupt = read_list(&mut conn, &keys.corrupt_list, 0).await;
    assert_eq!(corrupt, vec![garbage]);
    let waiting = read_list(&mut conn, &keys.queue_list, 0).await;
    let expected_list: Vec<Vec<u8>> = entries
        .iter()
        .filter(|&&(_, due)| due > now)
        .map(|&(i, _)| entry(i))
        .collect();
    assert!(
        waiting == expected_list,
        "the list is not the waiting entries in offer order"
    );
    assert_eq!(q.size().await.unwrap(), expected_list.len() as u64);
    // A second pass finds nothing to do.
    assert_eq!(q.transfer_now().await.unwrap().moved, 0);
    print_slowlog(&mut conn, &keys).await;
}

/// A steady stream: a few entries come due at the head of a long list. A call reads the
/// due times of those few from the sorted set and asks for no score entry by entry: it once
/// read a window of 1,000 list entries and asked the sorted set for the score of each
/// (`ZMSCORE`), half a millisecond of Redis's time per call to move five entries, which
/// doubled the lateness of `delayq bench lateness` at 5,000 offers/s.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_moves_a_few_entries_off_the_head_scores_no_other_entry() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let q = queue(&client, "steady");
    let keys = q.keys().clone();
    let mut conn = raw(&server).await;
    // Ten entries due long ago, all in the same millisecond, offered in an order that is not
    // the sorted set's order among equal scores; then 20,000 due in about 70 years.
    let mut entries: Vec<(usize, i64)> = (0..10).rev().map(|i| (i, 1_000)).collect();
    entries.extend((10..20_010).map(|i| (i, 4_000_000_000_000)));
    fill(&mut conn, &keys, &entries).await;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(q.transfer_now().await.unwrap().moved, 10);
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!stats.contains("cmdstat_zmscore"), "{stats}");
    let arrived = read_list(&mut conn, &keys.destination, 0).await;
    let expected: Vec<Vec<u8>> = (0..10).rev().map(value).collect();
    assert_eq!(arrived, expected, "the due entries, in offer order");
    assert_eq!(llen(&mut conn, &keys.queue_list).await, 20_000);
}

/// Transfer passes until nothing is due.
async fn drain(q: &DelayedQueue) {
    while q.transfer_now().await.unwrap().moved > 0 {}
}

/// The members of a sorted set, lowest score first.
async fn zrange(conn: &mut MultiplexedConnection, key: &str) -> Vec<Vec<u8>> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap()
}

/// A backlog due in offer order leaves the sorted set by rank (one ZREMRANGEBYRANK per run
/// at the head of the list that is the earliest due entries): exactly the entries moved
/// leave it, whether other due entries come due after the run's or before.
#[tokio::test(flavor = "multi_thread")]
async fn a_backlog_due_in_offer_order_leaves_exactly_the_waiting_entries() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut conn = raw(&server).await;
    let future = 4_000_000_000_000;

    // 2,500 due in offer order (three calls' worth of head runs), in groups of 100 with one
    // due time each, offered in the reverse of the sorted set's order among equal scores;
    // then one waiting, 50 due after all of those, one waiting.
    let q = queue(&client, "after");
    let keys = q.keys().clone();
    let mut entries: Vec<(usize, i64)> = (0..2_500)
        .map(|i| (i / 100 * 100 + 99 - i % 100, 10_000 + (i / 100) as i64))
        .collect();
    entries.push((2_500, future));
    entries.extend((2_501..2_551).map(|i| (i, 20_000 + i as i64)));
    entries.push((2_551, future + 1));
    fill(&mut conn, &keys, &entries).await;
    drain(&q).await;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        stats.contains("cmdstat_zremrangebyrank"),
        "the path under test was not taken: {stats}"
    );
    // Oldest due first, equal due times in offer order.
    let expected: Vec<Vec<u8>> = entries[..2_500]
        .iter()
        .map(|e| e.0)
        .chain(2_501..2_551)
        .map(value)
        .collect();
    let arrived = read_list(&mut conn, &keys.destination, 0).await;
    assert_eq!(arrived.len(), expected.len(), "every due value, once");
    assert!(
        arrived == expected,
        "every due value once, oldest due first"
    );
    let waiting = vec![entry(2_500), entry(2_551)];
    assert_eq!(read_list(&mut conn, &keys.queue_list, 0).await, waiting);
    assert_eq!(zrange(&mut conn, &keys.timeout_set).await, waiting);

    // 1,500 due in offer order, one waiting, then 5 due before all of them: the head's
    // runs are due, but are not the earliest due entries.
    let q = queue(&client, "before");
    let keys = q.keys().clone();
    let mut entries: Vec<(usize, i64)> = (0..1_500).map(|i| (i, 30_000 + i as i64)).collect();
    entries.push((1_500, future));
    entries.extend((1_501..1_506).map(|i| (i, 1_000 + i as i64)));
    fill(&mut conn, &keys, &entries).await;
    drain(&q).await;
    let mut arrived = read_list(&mut conn, &keys.destination, 0).await;
    arrived.sort();
    let mut expected: Vec<Vec<u8>> = (0..1_500).chain(1_501..1_506).map(value).collect();
    expected.sort();
    assert_eq!(arrived.len(), expected.len(), "every due value, once");
    assert!(arrived == expected, "every due value, once");
    let waiting = vec![entry(1_500)];
    assert_eq!(read_list(&mut conn, &keys.queue_list, 0).await, waiting);
    assert_eq!(zrange(&mut conn, &keys.timeout_set).await, waiting);

    // An entry twice at the head of the list (Redisson never writes one twice) is one
    // member of the sorted set, not the first two.
    let q = queue(&client, "twice");
    let keys = q.keys().clone();
    fill(&mut conn, &keys, &[(0, 1_000), (1, 1_001), (2, future)]).await;
    let () = redis::cmd("LPUSH")
        .arg(&keys.queue_list)
        .arg(entry(0))
        .query_async(&mut conn)
        .await
        .unwrap();
    drain(&q).await;
    let arrived = read_list(&mut conn, &keys.destination, 0).await;
    assert_eq!(arrived, vec![value(0), value(1)]);
    let waiting = vec![entry(2)];
    assert_eq!(read_list(&mut conn, &keys.queue_list, 0).await, waiting);
    assert_eq!(zrange(&mut conn, &keys.timeout_set).await, waiting);
}
