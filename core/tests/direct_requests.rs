//! Requests of a host's blocking call go over the calling thread's own connection
//! (`connection::direct`, SPEC sections 1 and 10): the thread writes and reads them itself,
//! keeps one connection per client, replaces it after a late reply without sending the
//! request twice, and drops it once its client closed.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::RedisServer;
use delayq::host::blocking::poll_for;
use delayq::{Client, ClientOptions, ErrorKind, SchedulerOptions};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Blocks this thread on `fut` as a host's blocking call does.
fn block<F: Future>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Some(out) = poll_for(rt.handle(), fut.as_mut(), Duration::from_millis(50)) {
            return out;
        }
    }
}

/// The server's `connected_clients`.
fn connected(server: &RedisServer) -> usize {
    let info = server.cli(&["INFO", "clients"]);
    let line = info.lines().find(|l| l.starts_with("connected_clients:"));
    line.unwrap()["connected_clients:".len()..]
        .trim()
        .parse()
        .unwrap()
}

/// Waits (up to 5 s) until the server counts `n` clients; the count it saw last.
fn until_connected(server: &RedisServer, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = connected(server);
        if now == n || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn no_scheduler() -> SchedulerOptions {
    SchedulerOptions {
        enabled: false,
        ..SchedulerOptions::default()
    }
}

#[test]
fn a_blocking_call_sends_over_one_connection_of_its_thread_until_the_client_closes() {
    let server = RedisServer::start();
    let rt = runtime();
    let opts = ClientOptions::new(server.url());
    let client = rt.block_on(Client::connect_with(opts.clone())).unwrap();
    let q = client.delayed_queue_with("direct", no_scheduler()).unwrap();
    // (`redis-cli` itself is one client while it asks.)
    let shared = connected(&server);

    for i in 0..10 {
        block(&rt, q.offer(format!("v{i}"), Duration::from_secs(60))).unwrap();
    }
    assert_eq!(rt.block_on(q.size()).unwrap(), 10, "every offer stored");
    assert_eq!(
        connected(&server),
        shared + 1,
        "one connection of the thread's own"
    );

    // Another thread has one of its own while it lives; async calls keep to the shared one.
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(block(&rt, q.size()).unwrap(), 10);
            assert_eq!(connected(&server), shared + 2);
        });
    });
    rt.block_on(q.offer("async", Duration::from_secs(60)))
        .unwrap();
    assert_eq!(until_connected(&server, shared + 1), shared + 1);

    // Closed, its connections go: the shared one at once, a thread's own at that thread's
    // next direct request (here on another client).
    client.close();
    let other = rt.block_on(Client::connect_with(opts)).unwrap();
    let q2 = other.delayed_queue_with("direct", no_scheduler()).unwrap();
    assert_eq!(block(&rt, q2.size()).unwrap(), 11);
    // Left: the second client's shared and direct ones (the first client's direct one
    // too, had its closing not dropped it).
    assert_eq!(until_connected(&server, shared + 1), shared + 1);
    other.close();
}

#[test]
fn a_late_reply_fails_the_call_within_the_response_timeout_and_the_next_one_reconnects() {
    let server = RedisServer::start();
    let rt = runtime();
    let opts = ClientOptions {
        response_timeout: Duration::from_millis(300),
        ..ClientOptions::new(server.url())
    };
    let client = rt.block_on(Client::connect_with(opts)).unwrap();
    let q = client.delayed_queue_with("late", no_scheduler()).unwrap();
    block(&rt, q.offer("before", Duration::from_secs(60))).unwrap();

    // The server stops answering for 3 s, the connection stays open.
    server.cli(&["CLIENT", "PAUSE", "3000", "ALL"]);
    let started = Instant::now();
    let late = block(&rt, q.offer("late", Duration::from_secs(60))).unwrap_err();
    let waited = started.elapsed();
    assert_eq!(late.kind(), ErrorKind::Connection, "{late}");
    assert!(late.to_string().contains("unknown"), "{late}");
    assert!(
        waited < Duration::from_millis(2500),
        "failed after {waited:?}"
    );

    // Once the server answers again, the next call works over a new connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        match block(&rt, q.offer("after", Duration::from_secs(60))) {
            Ok(_) => break true,
            Err(_) if Instant::now() < deadline => continue,
            Err(_) => break false,
        }
    };
    assert!(after, "no offer went through after the pause");
    // The late offer was sent once: it ran when the pause ended, or not at all.
    let values = rt.block_on(q.read_all()).unwrap();
    let late_ones = values.iter().filter(|v| v.as_slice() == b"late").count();
    assert!(late_ones <= 1, "the late offer ran {late_ones} times");
    assert!(values.iter().any(|v| v.as_slice() == b"before"));
    client.close();
}

#[test]
fn a_connection_opened_while_the_server_stalls_fails_in_the_connect_timeout_and_says_so() {
    let server = RedisServer::start();
    let rt = runtime();
    let opts = ClientOptions {
        response_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_millis(500),
        ..ClientOptions::new(server.url())
    };
    let client = rt.block_on(Client::connect_with(opts)).unwrap();
    let q = client.delayed_queue_with("stall", no_scheduler()).unwrap();
    block(&rt, q.offer("before", Duration::from_secs(60))).unwrap();

    let frozen = server.freeze();
    // The first call loses its reply; the next one opens a connection the kernel accepts
    // but nothing answers on.
    let lost = block(&rt, q.offer("lost", Duration::from_secs(60))).unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::Connection, "{lost}");
    let started = Instant::now();
    let opening = block(&rt, q.offer("opening", Duration::from_secs(60))).unwrap_err();
    let waited = started.elapsed();
    assert_eq!(opening.kind(), ErrorKind::Timeout, "{opening}");
    assert!(opening.to_string().contains("to connect"), "{opening}");
    assert!(
        waited < Duration::from_millis(1500),
        "failed after {waited:?}"
    );
    drop(frozen);
    client.close();
}

/// A connection the server closed while it was idle (a restart, its `timeout` setting, a
/// proxy, `CLIENT KILL`) is found closed by a `PING` before the next request, and replaced:
/// the request is sent once, over the new one, on the shared connection and on a host
/// thread's own alike. (Before, it failed as a connection error, though never sent.)
#[test]
fn a_connection_the_server_closed_while_idle_is_replaced_before_the_next_request() {
    let server = RedisServer::start();
    let rt = runtime();
    let client = rt.block_on(Client::connect(&server.url())).unwrap();
    let q = client.delayed_queue_with("idle", no_scheduler()).unwrap();
    rt.block_on(q.size()).unwrap(); // the shared connection
    block(&rt, q.size()).unwrap(); // this thread's own
    let killed = server.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(killed.trim().parse::<u32>().unwrap() >= 2, "{killed}");
    std::thread::sleep(Duration::from_millis(1200));
    rt.block_on(q.offer("shared", Duration::from_secs(60)))
        .expect("the shared connection was replaced before the offer");
    block(&rt, q.offer("own", Duration::from_secs(60)))
        .expect("the thread's connection was replaced before the offer");
    assert_eq!(block(&rt, q.size()).unwrap(), 2, "each offer ran once");
    client.close();
}

/// A handle's first take checks its keys beside its wait; on a host's blocking call that
/// check goes over the multiplexed connection, never a read of the calling thread that the
/// take's bound cannot cut short: a take of 0 on a frozen server ends within 3 s (it took
/// 10.3 s when the check read over the thread's own connection).
#[test]
fn a_first_take_on_a_frozen_server_keeps_its_bound() {
    let rt = runtime();
    let server = RedisServer::start();
    let c = rt.block_on(Client::connect(&server.url())).unwrap();
    let warm = c.delayed_queue_with("warm", no_scheduler()).unwrap();
    let q = c.delayed_queue_with("first", no_scheduler()).unwrap();
    block(&rt, warm.size()).unwrap(); // this thread's own connection is open
    let frozen = server.freeze();
    let started = Instant::now();
    let out = block(&rt, q.take(Some(Duration::ZERO)));
    let took = started.elapsed();
    drop(frozen);
    assert!(took <= Duration::from_secs(3), "{took:?}: {out:?}");
    c.close();
}
