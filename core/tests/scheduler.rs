//! The guarantees of the transfer task (SPEC section 5), each shown against real servers.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::RedisServer;
use delayq::{Client, SchedulerOptions};

fn no_scheduler() -> SchedulerOptions {
    SchedulerOptions {
        enabled: false,
        ..Default::default()
    }
}

/// Takes until `n` values arrived or `limit` passed; returns (value, server ms at arrival).
async fn take_n(client: &Client, queue: &str, n: usize, limit: Duration) -> Vec<(Vec<u8>, i64)> {
    let q = client.delayed_queue_with(queue, no_scheduler()).unwrap();
    let deadline = tokio::time::Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match q.take(Some(left)).await {
            Ok(Some(v)) => got.push((v, client.server_time_ms().await.unwrap_or(0))),
            Ok(None) => break,
            // A restart in progress: try again.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn delivers_within_the_reconcile_interval_after_pubsub_is_killed() {
    common::init_tracing();
    let server = RedisServer::start();
    let producer = Client::connect(&server.url()).await.unwrap();
    let consumer = Client::connect(&server.url()).await.unwrap();
    let reconcile = Duration::from_millis(500);
    let _scheduler = consumer
        .delayed_queue_with(
            "killed",
            SchedulerOptions {
                reconcile_interval: reconcile,
                ..Default::default()
            },
        )
        .unwrap();
    let p = producer
        .delayed_queue_with("killed", no_scheduler())
        .unwrap();
    // Keep killing every subscriber while the messages wait.
    let killer = {
        let port = server.port;
        tokio::spawn(async move {
            loop {
                let _ = tokio::process::Command::new("redis-cli")
                    .args(["-p", &port.to_string(), "CLIENT", "KILL", "TYPE", "pubsub"])
                    .output()
                    .await;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };
    let mut due = HashMap::new();
    for i in 0..20u64 {
        let value = format!("m{i}");
        let at = p
            .offer(&value, Duration::from_millis(200 + i * 60))
            .await
            .unwrap();
        due.insert(value.into_bytes(), at);
    }
    let got = take_n(&consumer, "killed", 20, Duration::from_secs(10)).await;
    killer.abort();
    assert_eq!(got.len(), 20, "every message delivered");
    for (value, at) in got {
        let d = due[&value];
        assert!(at >= d, "early: {at} < {d}");
        assert!(
            at - d <= reconcile.as_millis() as i64 + 300,
            "{} ms late, more than the reconcile interval",
            at - d
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_schedulers_deliver_each_of_10000_messages_once() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..3 {
        let c = Client::connect(&server.url()).await.unwrap();
        handles.push(c.delayed_queue("three").unwrap());
        clients.push(c);
    }
    let producer = Client::connect(&server.url()).await.unwrap();
    let p = producer
        .delayed_queue_with("three", no_scheduler())
        .unwrap();
    let n = 10_000u64;
    let entries: Vec<(String, Duration)> = (0..n)
        .map(|i| (format!("{i}"), Duration::from_millis(i % 2000)))
        .collect();
    let due = p
        .offer_all(entries.iter().map(|(v, d)| (v.as_bytes(), *d)))
        .await
        .unwrap();
    let due: HashMap<Vec<u8>, i64> = entries
        .iter()
        .map(|(v, _)| v.as_bytes().to_vec())
        .zip(due)
        .collect();
    // Three consumers, one per client, take concurrently until all n are taken between
    // them (or 60 s pass: on a loaded 2-core machine 10,000 takes can need well over 8 s).
    let taken = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in &clients {
        let (c, taken) = (c.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let q = c.delayed_queue_with("three", no_scheduler()).unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            let mut got = Vec::new();
            while taken.load(Ordering::SeqCst) < n as usize
                && tokio::time::Instant::now() < deadline
            {
                if let Some(v) = q.take(Some(Duration::from_millis(500))).await.unwrap() {
                    taken.fetch_add(1, Ordering::SeqCst);
                    got.push((v, c.server_time_ms().await.unwrap()));
                }
            }
            got
        }));
    }
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    for t in tasks {
        for (v, at) in t.await.unwrap() {
            assert!(at >= due[&v], "delivered early");
            *seen.entry(v).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), n as usize, "every message delivered");
    assert!(seen.values().all(|&c| c == 1), "no message delivered twice");
    assert_eq!(p.stats().await.unwrap(), delayq::DelayedStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undecodable_entry_is_moved_aside_and_never_blocks_the_rest() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    // A corrupt member due first, as a format change or a foreign writer might leave.
    server.cli(&[
        "ZADD",
        "redisson_delay_queue_timeout:{corrupt}",
        "0",
        "not a packed entry",
    ]);
    server.cli(&[
        "RPUSH",
        "redisson_delay_queue:{corrupt}",
        "not a packed entry",
    ]);
    let q = c.delayed_queue("corrupt").unwrap();
    q.offer_all([("a", Duration::ZERO), ("b", Duration::from_millis(100))])
        .await
        .unwrap();
    let got = take_n(&c, "corrupt", 2, Duration::from_secs(5)).await;
    let mut values: Vec<_> = got.into_iter().map(|(v, _)| v).collect();
    values.sort();
    assert_eq!(values, vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(
        server.cli(&["LRANGE", "delayq_corrupt:{corrupt}", "0", "-1"]),
        "not a packed entry"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.delayed, stats.corrupt), (0, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn delivery_resumes_after_a_redis_restart_with_nothing_lost() {
    common::init_tracing();
    let mut server = RedisServer::start_with(true);
    let consumer = Client::connect(&server.url()).await.unwrap();
    let _scheduler = consumer.delayed_queue("restart").unwrap();
    let producer = Client::connect(&server.url()).await.unwrap();
    let p = producer
        .delayed_queue_with("restart", no_scheduler())
        .unwrap();
    let n = 300usize;
    p.offer_all((0..n).map(|i| (format!("{i}"), Duration::from_millis(500 + (i as u64 * 10)))))
        .await
        .unwrap();
    // The transfer task is mid-run (some entries moved, most still waiting) when Redis is
    // killed and restarted. Nobody takes meanwhile: a BLPOP served at the instant of the kill
    // is the classic queue's at-most-once window, not what this test is about.
    let moved_some = common::eventually(Duration::from_secs(5), || async {
        p.stats().await.map(|s| s.ready).unwrap_or(0) > 0
    })
    .await;
    assert!(
        moved_some,
        "the transfer task moved entries before the restart"
    );
    server.restart();
    let got = take_n(&consumer, "restart", n, Duration::from_secs(20)).await;
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    for (v, _) in got {
        *seen.entry(v).or_default() += 1;
    }
    assert_eq!(seen.len(), n, "every message delivered after the restart");
    assert!(seen.values().all(|&c| c == 1), "none twice");
}

/// Counts the server's clients subscribed to at least one channel.
fn subscribers(server: &RedisServer) -> usize {
    server
        .cli(&["CLIENT", "LIST"])
        .lines()
        .filter(|l| l.split(' ').any(|f| f.starts_with("sub=") && f != "sub=0"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_pubsub_connection_serves_every_queue_of_a_client() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let queues: Vec<_> = (0..50)
        .map(|i| client.delayed_queue(&format!("idle-{i}")).unwrap())
        .collect();
    let subscribed = |n: usize| {
        let server = &server;
        async move {
            server
                .cli(&["PUBSUB", "NUMSUB", "redisson_delay_queue_channel:{idle-49}"])
                .ends_with(&n.to_string())
        }
    };
    assert!(common::eventually(Duration::from_secs(5), || subscribed(1)).await);
    assert_eq!(subscribers(&server), 1, "50 queues, one pub/sub connection");
    // Every queue is woken through it: an offer on the last queue arrives at once.
    let last = queues.last().unwrap();
    last.offer("wake", Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(
        last.take(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"wake"[..])
    );
    // Closing the queues unsubscribes their channels; the connection goes when none is left.
    for q in &queues {
        q.close();
    }
    drop(queues);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            subscribers(&server) == 0
        })
        .await
    );
    client.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_sharing_a_transfer_task_reconcile_at_the_shortest_interval_asked() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    // The first handle asks for a long interval; a second one of the same client, 100 ms.
    let long = SchedulerOptions {
        reconcile_interval: Duration::from_secs(30),
        ..SchedulerOptions::default()
    };
    let short = SchedulerOptions {
        reconcile_interval: Duration::from_millis(100),
        ..SchedulerOptions::default()
    };
    let _first = c.delayed_queue_with("shared", long).unwrap();
    let _second = c.delayed_queue_with("shared", short).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for i in 0u64..5 {
        // Written as a foreign writer might, without the PUBLISH that wakes the task: only
        // the reconcile moves it.
        let entry = delayq::codec::pack(&i.to_be_bytes(), b"quiet").unwrap();
        let written = std::time::Instant::now();
        redis::pipe()
            .cmd("ZADD")
            .arg("redisson_delay_queue_timeout:{shared}")
            .arg(0)
            .arg(&entry)
            .cmd("RPUSH")
            .arg("redisson_delay_queue:{shared}")
            .arg(&entry)
            .query_async::<()>(&mut conn)
            .await
            .unwrap();
        let moved = common::eventually(Duration::from_secs(10), || async {
            server.cli(&["LLEN", "shared"]) == (i + 1).to_string()
        })
        .await;
        assert!(moved, "entry {i} never moved");
        let waited = written.elapsed();
        assert!(
            waited < Duration::from_millis(900),
            "entry {i} moved after {waited:?}"
        );
    }
}
