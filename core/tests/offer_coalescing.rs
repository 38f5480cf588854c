//! Concurrent `DelayedQueue::offer` calls coalesced into offer script calls, against a real
//! redis-server. `CLIENT PAUSE ... WRITE` holds the first offer's script call on the server
//! so that the offers made meanwhile deterministically wait and go together in the next.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::RedisServer;
use delayq::{Client, DelayedQueue, ErrorKind, SchedulerOptions};
use futures_util::future::join_all;

const LONG: Duration = Duration::from_secs(3600);

async fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.unwrap()
}

/// A queue without a transfer task (entries stay where the offers put them), its offer
/// script already loaded, and the server's command counters reset.
async fn queue(server: &RedisServer, c: &Client, name: &str) -> DelayedQueue {
    let q = c
        .delayed_queue_with(
            name,
            SchedulerOptions {
                enabled: false,
                ..Default::default()
            },
        )
        .unwrap();
    q.offer("warm-up", LONG).await.unwrap();
    q.clear().await.unwrap();
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    q
}

/// Holds write commands (scripts included) of every client for `ms`.
fn pause_writes(server: &RedisServer, ms: u64) {
    assert_eq!(
        server.cli(&["CLIENT", "PAUSE", &ms.to_string(), "WRITE"]),
        "OK"
    );
}

/// Offer script calls since the counters were reset.
fn script_calls(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Each stored value with its score (due time) in the sorted set.
async fn stored(server: &RedisServer, q: &DelayedQueue) -> HashMap<Vec<u8>, i64> {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let entries: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
        .arg(&q.keys().timeout_set)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await
        .unwrap();
    entries
        .into_iter()
        .map(|(packed, score)| {
            let (_, value) = delayq::codec::unpack(&packed).unwrap();
            (value.to_vec(), score as i64)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_offers_each_get_their_own_due_time() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "many").await;
    let before = c.server_time_ms().await.unwrap();
    pause_writes(&server, 500);
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let q = q.clone();
            // Distinct delays, in no particular order.
            let delay_ms = 60_000 + (i * 7_919) % 200 * 1_000 + i;
            tokio::spawn(async move {
                let due = q
                    .offer(format!("v{i}"), Duration::from_millis(delay_ms))
                    .await;
                (i, delay_ms, due)
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let after = c.server_time_ms().await.unwrap();

    let stored = stored(&server, &q).await;
    assert_eq!(stored.len(), 200, "every entry landed");
    assert_eq!(q.size().await.unwrap(), 200);
    let mut nows = Vec::new();
    for (i, delay_ms, due) in results {
        let due = due.unwrap();
        let now = due - delay_ms as i64;
        assert!(
            (before..=after).contains(&now),
            "v{i}: due {due} is not its delay {delay_ms} after a time between {before} and {after}"
        );
        assert_eq!(
            stored[format!("v{i}").as_bytes()],
            due,
            "v{i}: stored score"
        );
        nows.push(now);
    }
    nows.sort();
    nows.dedup();
    let calls = script_calls(&server);
    assert_eq!(
        calls, 2,
        "the first offer alone, the 199 made while it was held in one call"
    );
    assert_eq!(
        nows.len(),
        2,
        "one server time per script call, each entry's own delay added to it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn offers_beyond_a_chunk_go_in_several_calls() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "chunks").await;
    pause_writes(&server, 500);
    let tasks: Vec<_> = (0..2001)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { q.offer(format!("v{i}"), LONG).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(q.size().await.unwrap(), 2001);
    assert_eq!(
        script_calls(&server),
        3,
        "1 alone, then 2000 in two calls of at most 1000"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn offers_keep_the_order_of_the_calls() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "order").await;
    // An offer takes its place when called: these are polled last to first, and still
    // stored first to last, in one call.
    let offers: Vec<_> = (0..30).map(|i| q.offer(format!("a{i:02}"), LONG)).collect();
    let due = join_all(offers.into_iter().rev()).await;
    assert!(due.iter().all(Result::is_ok));
    assert_eq!(script_calls(&server), 1);
    // The same behind a call in flight, each offer in a task of its own, the tasks
    // started in reverse.
    pause_writes(&server, 300);
    let first = {
        let q = q.clone();
        tokio::spawn(async move { q.offer("b-first", LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let offers: Vec<_> = (0..30).map(|i| q.offer(format!("b{i:02}"), LONG)).collect();
    let tasks: Vec<_> = offers.into_iter().rev().map(tokio::spawn).collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    first.await.unwrap().unwrap();
    let expected: Vec<Vec<u8>> = (0..30)
        .map(|i| format!("a{i:02}"))
        .chain(["b-first".to_owned()])
        .chain((0..30).map(|i| format!("b{i:02}")))
        .map(String::into_bytes)
        .collect();
    assert_eq!(q.read_all().await.unwrap(), expected);
    assert_eq!(script_calls(&server), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_offer_among_good_ones_fails_alone_and_stores_nothing() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "bad").await;
    let big = vec![0u8; delayq::delay::MAX_VALUE_LEN + 1];
    pause_writes(&server, 300);
    let results = join_all((0..21).map(|i| {
        let q = q.clone();
        let big = &big;
        async move {
            match i {
                7 => q.offer("overflowing delay", Duration::MAX).await,
                14 => q.offer(big, LONG).await,
                _ => q.offer(format!("v{i}"), LONG).await,
            }
        }
    }))
    .await;
    for (i, r) in results.iter().enumerate() {
        match i {
            7 | 14 => assert_eq!(
                r.as_ref().unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "offer {i}"
            ),
            _ => assert!(r.is_ok(), "offer {i}: {r:?}"),
        }
    }
    let expected: Vec<Vec<u8>> = (0..21)
        .filter(|i| *i != 7 && *i != 14)
        .map(|i| format!("v{i}").into_bytes())
        .collect();
    assert_eq!(
        q.read_all().await.unwrap(),
        expected,
        "the good ones, in order"
    );
    assert_eq!(
        stored(&server, &q).await.len(),
        19,
        "nothing of the bad ones"
    );
    assert_eq!(script_calls(&server), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redis_error_fails_every_offer_of_its_call() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "typed").await;
    server.cli(&["SET", "typed", "a string"]);
    pause_writes(&server, 300);
    let first = {
        let q = q.clone();
        tokio::spawn(async move { q.offer("first", LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let results = join_all((0..10).map(|i| q.offer(format!("v{i}"), LONG))).await;
    for r in results {
        assert_eq!(r.unwrap_err().kind(), ErrorKind::WrongType);
    }
    assert_eq!(
        first.await.unwrap().unwrap_err().kind(),
        ErrorKind::WrongType
    );
    assert_eq!(server.cli(&["DBSIZE"]), "1", "nothing written");
    assert_eq!(script_calls(&server), 2, "one alone, then the ten together");
    // The batcher goes on.
    server.cli(&["DEL", "typed"]);
    q.offer("after", LONG).await.unwrap();
    assert_eq!(q.size().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_fails_waiting_and_new_offers_with_closed() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "closing").await;
    let tasks_before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    pause_writes(&server, 1000);
    let first = {
        let q = q.clone();
        tokio::spawn(async move { q.offer("first", LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiting: Vec<_> = (0..49)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { q.offer(format!("v{i}"), LONG).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    q.close();
    for t in waiting {
        let err = t.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    }
    // The one in flight when the handle closed gets its real outcome.
    first.await.unwrap().unwrap();
    assert_eq!(
        q.offer("late", LONG).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
    let other = c
        .delayed_queue_with(
            "closing",
            SchedulerOptions {
                enabled: false,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        other.read_all().await.unwrap(),
        vec![b"first".to_vec()],
        "only the offer in flight was written"
    );
    // No task is left behind.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
                <= tasks_before
        })
        .await,
        "a task outlived the offers"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_offers_do_not_break_the_batcher() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = queue(&server, &c, "dropped").await;
    pause_writes(&server, 500);
    let first = {
        let q = q.clone();
        tokio::spawn(async move { q.offer("first", LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Offers waiting behind the one in flight, given up by their callers.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        join_all((0..20).map(|i| q.offer(format!("v{i}"), LONG))),
    )
    .await;
    assert!(gave_up.is_err());
    first.await.unwrap().unwrap();
    q.offer("after", LONG).await.unwrap();
    assert_eq!(
        q.read_all().await.unwrap(),
        vec![b"first".to_vec(), b"after".to_vec()],
        "offers given up before they were sent are left out"
    );
    assert_eq!(script_calls(&server), 2);

    // The caller of the offer in flight gives up too, with others waiting behind it:
    // those are still sent.
    pause_writes(&server, 300);
    let lead = tokio::time::timeout(Duration::from_millis(50), q.offer("lead", LONG));
    let behind = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        join_all((0..5).map(|i| q.offer(format!("w{i}"), LONG))).await
    };
    let (lead, behind) = tokio::join!(lead, behind);
    assert!(lead.is_err(), "the first caller gave up");
    assert!(behind.iter().all(Result::is_ok), "{behind:?}");
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            q.size().await.unwrap() == 2 + 1 + 5
        })
        .await
    );

    // The caller whose future sends a batch holding offers of others (made before, not
    // yet polled) gives up mid-call: the call finishes anyway and they get their outcome.
    pause_writes(&server, 300);
    let others: Vec<_> = (0..5).map(|i| q.offer(format!("x{i}"), LONG)).collect();
    let sender = tokio::time::timeout(Duration::from_millis(50), q.offer("sender", LONG)).await;
    assert!(sender.is_err(), "the sending caller gave up");
    for r in join_all(others).await {
        r.unwrap();
    }
    assert_eq!(q.size().await.unwrap(), 8 + 5 + 1);
}
