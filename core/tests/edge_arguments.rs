//! Arguments at the edges, as an audit against SPEC section 6 tried them: timeouts too long
//! for the clock, a durability wait too long for `WAIT`, an exponential back-off whose base
//! passes its max, query parameters of a `redis://` URL (redis-py's `?db=`), a server that
//! wants a password the URL lacks, and a `consume` handler that settles its delivery
//! itself.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::RedisServer;
use delayq::{Backoff, Client, ClientOptions, Durability, ErrorKind, ReliableQueueOptions};

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_too_long_for_the_clock_wait_as_if_they_had_none() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.delayed_queue("forever").unwrap();
    let r = c
        .reliable_queue("forever-r", ReliableQueueOptions::default())
        .unwrap();
    for far in [Duration::MAX, Duration::from_secs(i64::MAX as u64)] {
        // Each call waits (no panic, no error) until there is something to take.
        let taking = tokio::spawn({
            let q = q.clone();
            async move { q.take(Some(far)).await }
        });
        let receiving = tokio::spawn({
            let r = r.clone();
            async move { r.receive_many(2, Some(far)).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!taking.is_finished() && !receiving.is_finished());
        q.offer("v", Duration::ZERO).await.unwrap();
        r.offer("m", Duration::ZERO, None).await.unwrap();
        let taken = tokio::time::timeout(Duration::from_secs(5), taking).await;
        assert_eq!(taken.unwrap().unwrap().unwrap().as_deref(), Some(&b"v"[..]));
        let received = tokio::time::timeout(Duration::from_secs(5), receiving).await;
        let received = received.unwrap().unwrap().unwrap();
        assert_eq!(received.len(), 1);
        received[0].ack().await.unwrap();
    }
    // A graceful close with no deadline to speak of returns once nothing runs.
    let closing = r.close_gracefully(Duration::MAX);
    tokio::time::timeout(Duration::from_secs(5), closing)
        .await
        .expect("close returned")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_durability_wait_too_long_for_wait_is_refused_at_connect() {
    let server = RedisServer::start();
    let opts = ClientOptions {
        durability: Some(Durability {
            replicas: 0,
            aof: false,
            timeout: Duration::from_secs(i64::MAX as u64),
        }),
        ..ClientOptions::new(server.url())
    };
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("durability timeout"), "{err}");
    // Nor can a write ever be confirmed within less than WAIT's 1 ms (WAIT 0 waits forever).
    for short in [Duration::ZERO, Duration::from_micros(500)] {
        let opts = ClientOptions {
            durability: Some(Durability {
                replicas: 0,
                aof: false,
                timeout: short,
            }),
            ..ClientOptions::new(server.url())
        };
        let err = Client::connect_with(opts).await.expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("at least 1 ms"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exponential_backoff_whose_base_passes_its_max_is_refused() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let bad = ReliableQueueOptions {
        backoff: Some(Backoff::Exponential {
            base: Duration::from_secs(10),
            max: Duration::from_secs(1),
        }),
        ..Default::default()
    };
    let err = c.reliable_queue("backoff", bad).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("max"), "{err}");
    // Base alone above the default max (600 s) is refused too, and names the default.
    let err = Backoff::from_parts(None, Some(Duration::from_secs(700)), None)
        .and_then(|b| {
            c.reliable_queue(
                "backoff",
                ReliableQueueOptions {
                    backoff: b,
                    ..Default::default()
                },
            )
        })
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0", "nothing stored");
}

#[tokio::test(flavor = "multi_thread")]
async fn query_parameters_of_a_redis_url_are_honoured_or_refused() {
    let server = RedisServer::start();
    let base = format!("redis://127.0.0.1:{}", server.port);
    // redis-py's `?db=`: the queue lives in database 2.
    let c = Client::connect(&format!("{base}/?db=2")).await.unwrap();
    c.delayed_queue("db2")
        .unwrap()
        .offer("x", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(server.cli(&["-n", "2", "DBSIZE"]).trim(), "2");
    assert_eq!(server.cli(&["-n", "0", "DBSIZE"]).trim(), "0");
    c.close();
    // Two different databases, or an unknown parameter: refused, the secret not shown.
    for bad in [
        format!("{base}/1?db=2"),
        format!("{base}/?db=two"),
        format!("{base}/?dbb=2&token=hunter2"),
    ] {
        let err = Client::connect(&bad).await.expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad}: {err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
    // `?password=` authenticates; no password at all fails `connect` itself.
    server.cli(&["CONFIG", "SET", "requirepass", "s3cret"]);
    let c = Client::connect(&format!("{base}/?password=s3cret"))
        .await
        .unwrap();
    assert!(c.server_time_ms().await.unwrap() > 0);
    let err = Client::connect(&base).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("NOAUTH"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_that_settles_its_delivery_itself_is_not_settled_again() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let opts = ReliableQueueOptions {
        visibility_timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let q = c.reliable_queue("self-settled", opts).unwrap();
    q.offer("nack me", Duration::ZERO, Some("n")).await.unwrap();
    q.offer("ack me", Duration::ZERO, Some("a")).await.unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let consumer = {
        let (q, calls) = (q.clone(), calls.clone());
        tokio::spawn(async move {
            q.consume(
                move |d| {
                    let calls = calls.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        // Past a third of the lease: consume extends it meanwhile.
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        if d.id == "n" && d.attempt == 1 {
                            // Its own retry delay; then it fails anyway.
                            d.nack(Some(Duration::from_millis(400))).await.unwrap();
                            tokio::time::sleep(Duration::from_millis(150)).await;
                            return Err("failed after nacking".to_owned());
                        }
                        assert!(d.ack().await.unwrap(), "{} acked by its handler", d.id);
                        Ok(())
                    }
                },
                2,
            )
            .await
        })
    };
    // "n" again after its own delay (not the back-off), then acked; "a" once.
    let done = common::eventually(Duration::from_secs(10), || async {
        calls.load(Ordering::SeqCst) == 3 && q.stats().await.unwrap().in_flight == 0
    })
    .await;
    assert!(done, "handler calls: {}", calls.load(Ordering::SeqCst));
    let started = Instant::now();
    q.close_gracefully(Duration::from_secs(5)).await.unwrap();
    consumer.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(q.lost_leases(), 0, "no false lost-lease report");
    let again = c.reliable_queue("self-settled", ReliableQueueOptions::default());
    let s = again.unwrap().stats().await.unwrap();
    assert_eq!((s.delayed, s.ready, s.in_flight, s.dead), (0, 0, 0, 0));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A server that accepts connections and never answers (or answers a TLS handshake in
/// plain text): connecting fails with a `timeout` error that says what timed out, not
/// redis-rs's bare "timed out".
#[tokio::test(flavor = "multi_thread")]
async fn a_connect_that_times_out_says_so() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut opts = ClientOptions::new(format!("redis://127.0.0.1:{port}"));
    opts.connect_timeout = Duration::from_millis(300);
    let Err(err) = Client::connect_with(opts).await else {
        panic!("connected to a server that never answers")
    };
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(
        err.to_string()
            .contains("no answer from Redis within 300ms to connect"),
        "{err}"
    );
    // Where it tried: the URL may have come from a default or the environment.
    assert!(
        err.to_string()
            .contains(&format!("(connecting to redis://127.0.0.1:{port})")),
        "{err}"
    );
    drop(silent);
    // A refused connection says where, the password redacted.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let Err(err) = Client::connect(&format!("redis://u:s3cret@127.0.0.1:{port}")).await else {
        panic!("connected to a closed port")
    };
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("(connecting to redis://***:***@127.0.0.1:{port})")),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    // TLS to a server that speaks plain text: the handshake never ends.
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(server.url().replacen("redis://", "rediss://", 1));
    opts.connect_timeout = Duration::from_millis(300);
    let Err(err) = Client::connect_with(opts).await else {
        panic!("a TLS connect to a plain-text server succeeded")
    };
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(
        err.to_string()
            .contains("no answer from Redis within 300ms to connect"),
        "{err}"
    );
}

/// A request that sends a large value gets longer for its reply than the response
/// timeout (which is sized for small commands): with a 300 ms timeout, offers of 24 MiB,
/// which take Redis about a second to copy through the script, succeed and are stored
/// once.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_value_gets_time_for_its_reply() {
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(server.url());
    opts.response_timeout = Duration::from_millis(300);
    let c = Client::connect_with(opts).await.unwrap();
    let big = vec![7u8; 24 << 20];
    let no_scheduler = delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let dq = c.delayed_queue_with("big", no_scheduler.clone()).unwrap();
    dq.offer(big.clone(), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(dq.size().await.unwrap(), 1);
    let opts = ReliableQueueOptions {
        scheduler: no_scheduler,
        ..Default::default()
    };
    let rq = c.reliable_queue("big", opts).unwrap();
    rq.offer(big, Duration::ZERO, None).await.unwrap();
    assert_eq!(
        rq.stats().await.unwrap().delayed + rq.stats().await.unwrap().ready,
        1
    );
}

/// A reconcile interval under a millisecond (a unit mistake: nanoseconds for milliseconds)
/// would run transfer passes back to back: refused for both kinds of queue, 1 ms accepted.
#[tokio::test(flavor = "multi_thread")]
async fn a_reconcile_interval_under_a_millisecond_is_refused() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    for tiny in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
    ] {
        let opts = delayq::SchedulerOptions {
            reconcile_interval: tiny,
            ..Default::default()
        };
        let err = c.delayed_queue_with("tiny", opts.clone()).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("at least 1 ms"), "{err}");
        let reliable = ReliableQueueOptions {
            scheduler: opts,
            ..Default::default()
        };
        let err = c.reliable_queue("tiny-r", reliable).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    let ok = delayq::SchedulerOptions {
        reconcile_interval: Duration::from_millis(1),
        ..Default::default()
    };
    c.delayed_queue_with("tiny", ok).unwrap().close();
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0");
    c.close();
}

/// Settings out of range say which one, in milliseconds; a back-off schedule holds at most
/// `MAX_SCHEDULE` delays (it is stored with the settings and read by every nack).
#[tokio::test(flavor = "multi_thread")]
async fn settings_out_of_range_are_named_in_milliseconds() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let refused = |opts: ReliableQueueOptions, words: &'static str| {
        let c = c.clone();
        async move {
            let err = match c.reliable_queue("named", opts) {
                Err(e) => e,
                Ok(q) => q.stats().await.unwrap_err(),
            };
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(err.to_string().contains(words), "{words}: {err}");
        }
    };
    let far = Duration::from_secs(1 << 50);
    refused(
        ReliableQueueOptions {
            dead_letter_retention: Some(far),
            ..Default::default()
        },
        "dead-letter retention of 1125899906842624000 ms overflows",
    )
    .await;
    refused(
        ReliableQueueOptions {
            idempotency_retention: Some(far),
            ..Default::default()
        },
        "idempotency retention of",
    )
    .await;
    refused(
        ReliableQueueOptions {
            backoff: Some(Backoff::Exponential {
                base: Duration::from_secs(1),
                max: Duration::ZERO,
            }),
            ..Default::default()
        },
        "base (1000 ms) is longer than its max (0 ms; default 600000 ms)",
    )
    .await;
    let long = vec![Duration::from_secs(1); delayq::MAX_SCHEDULE + 1];
    refused(
        ReliableQueueOptions {
            backoff: Some(Backoff::Schedule(long)),
            ..Default::default()
        },
        "at most 1000 delays",
    )
    .await;
    let longest = vec![Duration::from_secs(1); delayq::MAX_SCHEDULE];
    let q = c
        .reliable_queue(
            "longest",
            ReliableQueueOptions {
                backoff: Some(Backoff::Schedule(longest)),
                ..Default::default()
            },
        )
        .unwrap();
    q.stats().await.unwrap();
    assert_eq!(server.cli(&["EXISTS", "{dq:named}:settings"]).trim(), "0");
    c.close();
}
