//! The DelayedQueue API against a real redis-server: every call, every error.

mod common;

use std::time::Duration;

use common::RedisServer;
use delayq::{Client, ErrorKind, SchedulerOptions};

const LONG: Duration = Duration::from_secs(3600);

async fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn offer_returns_server_due_time_and_take_waits_for_it() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("due").unwrap();
    let before = c.server_time_ms().await.unwrap();
    let due = q.offer("hello", Duration::from_millis(300)).await.unwrap();
    assert!(
        due >= before + 300 && due <= before + 300 + 1000,
        "due {due} vs now {before}"
    );
    assert_eq!(
        q.poll().await.unwrap(),
        None,
        "nothing is ready before its time"
    );
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    let at = c.server_time_ms().await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"hello"[..]));
    assert!(at >= due, "delivered at {at}, before its due time {due}");
}

#[tokio::test(flavor = "multi_thread")]
async fn size_contains_remove_read_all_clear_agree() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("calls").unwrap();
    let due = q
        .offer_all([("a", LONG), ("b", LONG), ("c", LONG), ("b", LONG)])
        .await
        .unwrap();
    assert_eq!(due.len(), 4);
    assert_eq!(q.size().await.unwrap(), 4);
    assert!(q.contains("b").await.unwrap());
    assert!(!q.contains("z").await.unwrap());
    assert!(q.remove("b").await.unwrap());
    assert!(!q.remove("z").await.unwrap());
    assert_eq!(q.size().await.unwrap(), 3);
    assert_eq!(
        q.read_all().await.unwrap(),
        vec![b"a".to_vec(), b"c".to_vec(), b"b".to_vec()]
    );
    assert_eq!(
        server.cli(&["ZCARD", "redisson_delay_queue_timeout:{calls}"]),
        "3"
    );
    q.clear().await.unwrap();
    assert_eq!(q.size().await.unwrap(), 0);
    assert_eq!(
        server.cli(&["EXISTS", "redisson_delay_queue_timeout:{calls}"]),
        "0"
    );
    assert!(q
        .offer_all(Vec::<(Vec<u8>, Duration)>::new())
        .await
        .unwrap()
        .is_empty());
}

/// Values that come due while no transfer runs (consumers start later, an outage) reach
/// the destination oldest due first, as Redisson's transfer (due order) would hand them
/// over, not in the order they were offered (here an order unrelated to their due times).
#[tokio::test(flavor = "multi_thread")]
async fn a_backlog_is_handed_over_oldest_due_first() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let q = c.delayed_queue_with("backlog", off).unwrap();
    let mut offers = Vec::new();
    for (value, ms) in [
        ("a", 600),
        ("b", 400),
        ("c", 200),
        ("d", 500),
        ("e", 300),
        ("f", 100),
    ] {
        offers.push((
            value,
            q.offer(value, Duration::from_millis(ms)).await.unwrap(),
        ));
    }
    let last_due = offers.iter().map(|(_, due)| *due).max().unwrap();
    while c.server_time_ms().await.unwrap() <= last_due {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    q.transfer_now().await.unwrap();
    let mut got = Vec::new();
    while let Some(v) = q.poll().await.unwrap() {
        got.push(String::from_utf8(v).unwrap());
    }
    offers.sort_by_key(|(_, due)| *due);
    let by_due: Vec<&str> = offers.iter().map(|(v, _)| *v).collect();
    assert_eq!(got, by_due);
}

#[tokio::test(flavor = "multi_thread")]
async fn take_times_out_with_none_and_poll_returns_ready_values() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("poll").unwrap();
    assert_eq!(
        q.take(Some(Duration::from_millis(100))).await.unwrap(),
        None
    );
    assert_eq!(q.take(Some(Duration::ZERO)).await.unwrap(), None);
    q.offer(b"\x00bin\xff", Duration::ZERO).await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(3), || async {
            q.stats().await.unwrap().ready == 1
        })
        .await
    );
    assert_eq!(
        q.poll().await.unwrap().as_deref(),
        Some(&b"\x00bin\xff"[..])
    );
    assert_eq!(q.poll().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_take_loses_nothing() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("cancel").unwrap();
    for _ in 0..20 {
        // A take abandoned mid-wait, then a value arriving: the value must stay takeable.
        let _ = tokio::time::timeout(Duration::from_millis(20), q.take(None)).await;
    }
    q.offer("kept", Duration::ZERO).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"kept"[..]));
    // Values handed to abandoned takes came back to the queue: nothing else is there.
    assert_eq!(q.poll().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn takes_abandoned_at_any_instant_lose_nothing() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("abandoned").unwrap();
    let n = 400;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::ZERO)))
        .await
        .unwrap();
    q.transfer_now().await.unwrap();
    // Each take is dropped after a random wait, often while the server is handing its value
    // over: every value is either taken or back in the queue.
    let mut taken = 0;
    for i in 0..2000u64 {
        let wait = Duration::from_micros((i * 7919) % 1500);
        // The timer is checked first: a take whose value arrived is dropped without
        // another poll, as a `select!` whose other branch wins drops it.
        tokio::select! {
            biased;
            _ = tokio::time::sleep(wait) => {}
            r = q.take(Some(Duration::from_secs(1))) => {
                if r.unwrap().is_some() {
                    taken += 1;
                }
            }
        }
    }
    // Give-backs of dropped takes run in the background: wait until the count settles.
    let left = || async {
        server
            .cli(&["LLEN", "abandoned"])
            .trim()
            .parse::<usize>()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while taken + left().await != n && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(taken + left().await, n, "taken {taken}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_reaching_redis() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("bad").unwrap();
    assert_eq!(
        delayq::delay::delay_from_millis(-1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        delayq::delay::delay_from_secs_f64(f64::NAN)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    let err = q.offer("x", Duration::MAX).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // One bad entry in a batch: nothing of the batch is written.
    let err = q
        .offer_all([("ok", LONG), ("overflow", Duration::MAX)])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        c.delayed_queue("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let big = vec![0u8; delayq::delay::MAX_VALUE_LEN + 1];
    assert_eq!(
        q.offer(&big, LONG).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    drop(big);
    assert_eq!(server.cli(&["DBSIZE"]), "0", "nothing reached Redis");
}

/// `call`'s outcome, which must come within 10 s.
async fn ending<T>(call: impl std::future::Future<Output = T>) -> T {
    let limit = Duration::from_secs(10);
    tokio::time::timeout(limit, call)
        .await
        .expect("the call ended")
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_type_is_its_own_error_and_writes_nothing() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let unscheduled = |name| {
        let no_transfer = SchedulerOptions {
            enabled: false,
            ..Default::default()
        };
        c.delayed_queue_with(name, no_transfer).unwrap()
    };
    server.cli(&["SET", "taken", "a string"]);
    let q = unscheduled("taken");
    let err = q.offer("x", Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert_eq!(server.cli(&["DBSIZE"]), "1", "offer wrote nothing");
    // poll and take (waiting or not) name the key, as the scripts' errors do.
    for err in [
        q.poll().await.unwrap_err(),
        q.take(Some(Duration::ZERO)).await.unwrap_err(),
        q.take(Some(Duration::from_millis(200))).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let named = "key taken holds a string, not a list";
        assert!(err.to_string().contains(named), "{err}");
    }
    assert_eq!(
        q.transfer_now().await.unwrap_err().kind(),
        ErrorKind::WrongType
    );
    // stats names the key and what it holds (not redis-rs's "Pipeline failure").
    let err = q.stats().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(
        err.to_string()
            .contains("key taken holds a string, not a list"),
        "{err}"
    );
    server.cli(&["SET", "redisson_delay_queue:{other}", "x"]);
    let o = unscheduled("other");
    for err in [
        o.offer("x", LONG).await.unwrap_err(),
        o.size().await.unwrap_err(),
        o.contains("x").await.unwrap_err(),
        o.remove("x").await.unwrap_err(),
        o.read_all().await.unwrap_err(),
        o.clear().await.unwrap_err(),
        ending(o.take(None)).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    }
    // The timeout set of another type: calls that read the list alone say so too.
    server.cli(&["SET", "redisson_delay_queue_timeout:{third}", "x"]);
    let t = unscheduled("third");
    for err in [
        t.offer("x", LONG).await.unwrap_err(),
        t.size().await.unwrap_err(),
        t.contains("x").await.unwrap_err(),
        t.remove("x").await.unwrap_err(),
        t.read_all().await.unwrap_err(),
        t.clear().await.unwrap_err(),
        t.stats().await.unwrap_err(),
        t.poll().await.unwrap_err(),
        // A take waits on the destination, which no transfer could ever fill: it ends.
        ending(t.take(None)).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let named = "key redisson_delay_queue_timeout:{third} holds a string, not a zset";
        assert!(err.to_string().contains(named), "{err}");
    }
    assert_eq!(
        server.cli(&["DBSIZE"]),
        "3",
        "nothing was written or deleted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_handles_and_clients_refuse_calls() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("closing").unwrap();
    let other = c.delayed_queue("closing").unwrap();
    let pending = {
        let q = q.clone();
        tokio::spawn(async move { q.take(None).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    q.close();
    q.close();
    let err = pending.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(
        q.offer("x", LONG).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
    assert_eq!(q.size().await.unwrap_err().kind(), ErrorKind::Closed);
    // Another handle on the same queue is unaffected.
    other.offer("y", LONG).await.unwrap();
    c.close();
    assert_eq!(other.size().await.unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(c.delayed_queue("x").unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(
        c.server_time_ms().await.unwrap_err().kind(),
        ErrorKind::Closed
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_errors_are_clear_and_hide_credentials() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = Client::connect(&format!("redis://alice:s3cretpw@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("s3cretpw"));
    let err = Client::connect("http://127.0.0.1:1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = Client::connect("redis://user:pw%zz@[bad")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(!err.to_string().contains("pw%zz"));
}

#[tokio::test(flavor = "multi_thread")]
async fn password_in_url_authenticates() {
    let server = RedisServer::start();
    server.cli(&["CONFIG", "SET", "requirepass", "s3cret"]);
    let bad = Client::connect(&format!("redis://:wrong@127.0.0.1:{}", server.port)).await;
    let err = bad.unwrap_err();
    assert!(!err.to_string().contains("wrong@"), "{err}");
    let c = Client::connect(&format!("redis://:s3cret@127.0.0.1:{}", server.port))
        .await
        .unwrap();
    let q = c.delayed_queue("auth").unwrap();
    q.offer("x", LONG).await.unwrap();
    assert_eq!(q.size().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn unix_socket_urls_work() {
    let server = RedisServer::start_with_unix_socket();
    let sock = server.dir.join("redis.sock");
    let c = Client::connect(&format!("redis+unix://{}", sock.display()))
        .await
        .unwrap();
    let q = c.delayed_queue("unix").unwrap();
    q.offer("x", Duration::ZERO).await.unwrap();
    assert_eq!(
        q.take(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"x"[..])
    );
    // redis-py's parameter names work on a socket too, and an unknown one is refused.
    let base = format!("redis+unix://{}", sock.display());
    server.cli(&[
        "ACL",
        "SETUSER",
        "sock-user",
        "on",
        ">s3cret",
        "~*",
        "&*",
        "+@all",
    ]);
    server.cli(&["CONFIG", "SET", "requirepass", "s3cret"]);
    for url in [
        format!("{base}?db=3&password=s3cret"),
        format!("{base}?db=3&pass=s3cret"),
        format!(
            "unix://{}?db=3&username=sock-user&password=s3cret",
            sock.display()
        ),
        format!("{base}?db=3&user=sock-user&pass=s3cret"),
    ] {
        let c = Client::connect(&url).await.expect(&url);
        let q = c.delayed_queue("unix-auth").unwrap();
        q.offer("y", LONG).await.unwrap();
        c.close();
    }
    let n = server.cli(&[
        "-a",
        "s3cret",
        "--no-auth-warning",
        "-n",
        "3",
        "ZCARD",
        "redisson_delay_queue_timeout:{unix-auth}",
    ]);
    assert_eq!(n.trim(), "4", "each offer went to database 3");
    let err = Client::connect(&format!("{base}?passwd=hunter2"))
        .await
        .expect_err("an unknown parameter is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn poll_and_an_instant_take_find_a_value_that_just_came_due() {
    let server = RedisServer::start();
    let c = client(&server).await;
    // No transfer task: only the call itself can move what is due.
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let q = c.delayed_queue_with("instant", off).unwrap();
    q.offer("first", Duration::ZERO).await.unwrap();
    q.offer("later", LONG).await.unwrap();
    assert_eq!(q.poll().await.unwrap().as_deref(), Some(&b"first"[..]));
    assert_eq!(q.poll().await.unwrap(), None, "the other is not due");
    q.offer("second", Duration::ZERO).await.unwrap();
    let taken = q.take(Some(Duration::ZERO)).await.unwrap();
    assert_eq!(taken.as_deref(), Some(&b"second"[..]));
    assert_eq!(q.size().await.unwrap(), 1, "the delayed one stays");
    c.close();
}

/// Redis answers a connection's requests in order: a request sent behind one that got no
/// reply fails as soon as that one does (its outcome unknown, a `connection` error), so
/// the silent connection closes then, not when the last request sent over it runs out of
/// time too (SPEC 10: a dead connection is replaced and gone within 10 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_request_sent_behind_one_that_got_no_reply_fails_with_it() {
    let server = RedisServer::start();
    let opts = delayq::ClientOptions {
        response_timeout: Duration::from_secs(2),
        ..delayq::ClientOptions::new(server.url())
    };
    let client = Client::connect_with(opts).await.unwrap();
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let q = client.delayed_queue_with("behind", off).unwrap();
    q.size().await.unwrap();

    let frozen = server.freeze();
    let first = tokio::spawn({
        let q = q.clone();
        async move { (q.size().await, std::time::Instant::now()) }
    });
    // The scenario, not a synchronisation: the second request goes 1.5 s after the first,
    // so on its own it would fail 1.5 s after it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second = q.size().await;
    let second_at = std::time::Instant::now();
    let (first, first_at) = first.await.unwrap();
    drop(frozen);

    for e in [first.unwrap_err(), second.unwrap_err()] {
        assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
        assert!(e.to_string().contains("unknown"), "{e}");
    }
    let after = second_at.saturating_duration_since(first_at);
    assert!(
        after < Duration::from_millis(750),
        "the second request failed {after:?} after the first"
    );
    // A new connection serves the next request once the server answers again.
    assert_eq!(q.size().await.unwrap(), 0);
    client.close();
}

/// A call that waits for another call's connection attempt, and shares its failure, says
/// so: the time limit in the message was the other call's, and began before this one.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_joined_another_calls_connect_attempt_says_so() {
    let server = RedisServer::start();
    let opts = delayq::ClientOptions {
        response_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_millis(1500),
        ..delayq::ClientOptions::new(server.url())
    };
    let client = Client::connect_with(opts).await.unwrap();
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let q = client.delayed_queue_with("joined", off).unwrap();
    q.size().await.unwrap();

    let frozen = server.freeze();
    // The reply is lost: the connection is dropped, and the next call opens another.
    let lost = q.size().await.unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::Connection, "{lost}");
    let first = tokio::spawn({
        let q = q.clone();
        async move { q.size().await }
    });
    // The scenario, not a synchronisation: the second call begins 700 ms into the first
    // one's attempt to connect.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let started = std::time::Instant::now();
    let second = q.size().await.unwrap_err();
    let waited = started.elapsed();
    let first = first.await.unwrap().unwrap_err();
    drop(frozen);

    assert_eq!(first.kind(), ErrorKind::Timeout, "{first}");
    assert!(!first.to_string().contains("another call"), "{first}");
    assert_eq!(second.kind(), ErrorKind::Timeout, "{second}");
    assert!(
        second.to_string().contains("another call began earlier"),
        "{second}"
    );
    assert!(waited < Duration::from_millis(1500), "waited {waited:?}");
    assert_eq!(q.size().await.unwrap(), 0);
    client.close();
}

/// Offers made at once on one handle go in one script call at a time; those that waited
/// behind a call that got no reply do not then begin an attempt of their own: each ends
/// within the response timeout plus SPEC 10's margin of 3 s (they took twice the timeout).
#[tokio::test(flavor = "multi_thread")]
async fn offers_behind_one_that_got_no_reply_end_within_their_limit() {
    let server = RedisServer::start();
    let limit = delayq::ClientOptions::new(server.url()).response_timeout;
    let client = client(&server).await;
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let q = client.delayed_queue_with("behind", off).unwrap();
    q.offer("warm", Duration::from_secs(600)).await.unwrap();

    let frozen = server.freeze();
    let offers: Vec<_> = (0..8)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let offered = q.offer(format!("v{i}"), Duration::from_secs(600)).await;
                (offered, started.elapsed())
            })
        })
        .collect();
    let mut ended = Vec::new();
    for offer in offers {
        let (offered, took) = offer.await.unwrap();
        let err = offered.expect_err("no reply while the server is frozen");
        assert!(
            matches!(err.kind(), ErrorKind::Timeout | ErrorKind::Connection),
            "{err}"
        );
        ended.push((took, err.to_string()));
    }
    drop(frozen);
    for (took, err) in &ended {
        assert!(*took < limit + Duration::from_secs(3), "{took:?}: {err}");
    }
    // Those that waited behind the first call say they were not sent, and none of them is
    // stored: besides the first offer, only offers whose outcome is unknown may be.
    let not_sent = ended
        .iter()
        .filter(|(_, e)| e.contains("it was not sent"))
        .count();
    assert!(not_sent >= 1, "{ended:?}");
    let unknown = (ended.len() - not_sent) as u64;
    let stored = q.size().await.unwrap();
    assert!(stored <= 1 + unknown, "{stored} stored, {unknown} unknown");
    client.close();
}

/// A value offered with no delay is there to poll at once, even while the handle's own
/// transfer task (woken by that offer) moves it between the poll's steps.
#[tokio::test(flavor = "multi_thread")]
async fn poll_and_a_zero_take_find_a_value_offered_with_no_delay_at_once() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let q = c.delayed_queue("at-once").unwrap();
    let mut missed = Vec::new();
    for i in 0..400 {
        let value = format!("v{i}");
        q.offer(value.clone(), Duration::ZERO).await.unwrap();
        let got = match i % 2 {
            0 => q.poll().await.unwrap(),
            _ => q.take(Some(Duration::ZERO)).await.unwrap(),
        };
        if got.as_deref() != Some(value.as_bytes()) {
            missed.push((i, got.map(|g| String::from_utf8_lossy(&g).into_owned())));
        }
    }
    // (After one miss, each poll gets the value before its own.)
    let first: Vec<_> = missed.iter().take(3).collect();
    assert!(
        missed.is_empty(),
        "{} of 400 missed, first (offer, then got): {first:?}",
        missed.len()
    );
}
