//! ReliableQueue against a real redis-server: at-least-once delivery, visibility timeout,
//! retries, dead letters, cancel, reschedule, de-duplication, restarts.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::RedisServer;
use delayq::{Backoff, Client, ErrorKind, ReliableQueueOptions, ReliableStats};

const LONG: Duration = Duration::from_secs(3600);
const WAIT: Option<Duration> = Some(Duration::from_secs(5));

fn opts(visibility_ms: u64, max_attempts: u32) -> ReliableQueueOptions {
    ReliableQueueOptions {
        visibility_timeout: Some(Duration::from_millis(visibility_ms)),
        max_attempts: Some(max_attempts),
        backoff: Some(Backoff::Schedule(vec![Duration::from_millis(50)])),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn offer_receive_ack_delivers_once_on_time() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("basic", opts(30_000, 5)).unwrap();
    let before = c.server_time_ms().await.unwrap();
    let id = q
        .offer("hello", Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(!id.is_empty());
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats {
            delayed: 1,
            ..Default::default()
        }
    );
    let d = q.receive(WAIT).await.unwrap().expect("delivered");
    let at = c.server_time_ms().await.unwrap();
    assert_eq!(
        (d.id.as_str(), d.payload.as_slice(), d.attempt),
        (id.as_str(), &b"hello"[..], 1)
    );
    assert!(
        d.due_at >= before + 300 && at >= d.due_at,
        "due {} at {at}",
        d.due_at
    );
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats {
            in_flight: 1,
            ..Default::default()
        }
    );
    assert!(d.ack().await.unwrap());
    assert!(!d.ack().await.unwrap(), "a second ack finds nothing");
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    assert!(q
        .receive(Some(Duration::from_millis(100)))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn long_and_short_delays_come_due_in_order() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("order", opts(30_000, 5)).unwrap();
    // Spread over several buckets of the wheel, offered out of order.
    for ms in [2500u64, 0, 1200, 300, 1900] {
        q.offer(
            ms.to_string(),
            Duration::from_millis(ms),
            Some(&format!("m{ms}")),
        )
        .await
        .unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        let d = q.receive(WAIT).await.unwrap().unwrap();
        let now = c.server_time_ms().await.unwrap();
        assert!(now >= d.due_at, "early");
        got.push(String::from_utf8(d.payload.clone()).unwrap());
        d.ack().await.unwrap();
    }
    assert_eq!(got, ["0", "300", "1200", "1900", "2500"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_id_still_waiting_or_in_flight_is_not_offered_twice() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("dedup", opts(30_000, 5)).unwrap();
    assert_eq!(
        q.offer("first", LONG, Some("order-1")).await.unwrap(),
        "order-1"
    );
    assert_eq!(
        q.offer("second", Duration::ZERO, Some("order-1"))
            .await
            .unwrap(),
        "order-1"
    );
    assert_eq!(q.stats().await.unwrap().delayed, 1, "no second message");
    assert!(q.reschedule("order-1", Duration::ZERO).await.unwrap());
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.payload, b"first", "the first offer is kept as it was");
    assert_eq!(
        q.offer("third", Duration::ZERO, Some("order-1"))
            .await
            .unwrap(),
        "order-1"
    );
    assert_eq!(
        q.stats().await.unwrap().ready,
        0,
        "in flight: still no second message"
    );
    d.ack().await.unwrap();
    q.offer("fourth", Duration::ZERO, Some("order-1"))
        .await
        .unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.payload, b"fourth", "after the ack the id is free again");
    d.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_message_is_never_delivered() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("cancel", opts(30_000, 5)).unwrap();
    let generated_far = q.offer("far", LONG, None).await.unwrap();
    let generated_near = q
        .offer("near", Duration::from_millis(400), None)
        .await
        .unwrap();
    q.offer("mine", Duration::from_millis(600), Some("mine"))
        .await
        .unwrap();
    q.offer("kept", Duration::from_millis(700), Some("kept"))
        .await
        .unwrap();
    assert!(q.cancel(&generated_far).await.unwrap());
    assert!(q.cancel(&generated_near).await.unwrap());
    assert!(q.cancel("mine").await.unwrap());
    assert!(!q.cancel("mine").await.unwrap());
    assert!(!q.cancel("never-offered").await.unwrap());
    assert_eq!(q.stats().await.unwrap().delayed, 1);
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.id, "kept");
    d.ack().await.unwrap();
    assert!(q
        .receive(Some(Duration::from_millis(1500)))
        .await
        .unwrap()
        .is_none());
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn reschedule_moves_a_waiting_message() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("resched", opts(30_000, 5)).unwrap();
    let id = q.offer("x", LONG, None).await.unwrap();
    let soon = q
        .offer("y", Duration::from_millis(200), None)
        .await
        .unwrap();
    assert!(q.reschedule(&id, Duration::from_millis(100)).await.unwrap());
    assert!(q.reschedule(&soon, LONG).await.unwrap());
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.id, id);
    d.ack().await.unwrap();
    assert!(
        !q.reschedule(&id, LONG).await.unwrap(),
        "done messages cannot be rescheduled"
    );
    assert!(q
        .receive(Some(Duration::from_millis(500)))
        .await
        .unwrap()
        .is_none());
    assert!(
        q.cancel(&soon).await.unwrap(),
        "the rescheduled message is still found by id"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ready_message_nobody_received_can_be_cancelled_or_rescheduled() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    // No transfer task needed: messages due now go straight to the ready stream.
    let q = c.reliable_queue("ready-cancel", opts(30_000, 5)).unwrap();
    let generated = q.offer("g", Duration::ZERO, None).await.unwrap();
    q.offer("c", Duration::ZERO, Some("caller")).await.unwrap();
    let moved = q.offer("m", Duration::ZERO, None).await.unwrap();
    q.offer("r", Duration::ZERO, Some("received"))
        .await
        .unwrap();
    assert_eq!(q.stats().await.unwrap().ready, 4);
    assert!(q.cancel(&generated).await.unwrap());
    assert!(q.cancel("caller").await.unwrap());
    assert!(!q.cancel("caller").await.unwrap());
    assert!(q.reschedule(&moved, LONG).await.unwrap());
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats {
            delayed: 1,
            ready: 1,
            ..Default::default()
        }
    );
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.id, "received");
    assert!(!q.cancel("received").await.unwrap(), "in flight");
    assert!(!q.reschedule("received", LONG).await.unwrap(), "in flight");
    assert!(q
        .receive(Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .is_none());
    assert!(d.ack().await.unwrap());
    // the caller's id is free again once cancelled
    q.offer("c2", Duration::ZERO, Some("caller")).await.unwrap();
    let again = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(
        (again.id.as_str(), again.payload.as_slice()),
        ("caller", &b"c2"[..])
    );
    again.ack().await.unwrap();
    assert!(q.cancel(&moved).await.unwrap(), "rescheduled, found by id");
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn ids_of_256_bytes_survive_every_layout() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("long-ids", opts(30_000, 5)).unwrap();
    let long = |c: char| std::iter::repeat_n(c, 128).collect::<String>() + &"é".repeat(64);
    let (a, b, n) = (long('a'), long('b'), long('n'));
    assert_eq!(a.len(), 256);
    // a bucket list, then reschedule; a bucket list, then cancel; 'near'
    assert_eq!(q.offer("pa", LONG, Some(&a)).await.unwrap(), a);
    assert_eq!(q.offer("pb", LONG, Some(&b)).await.unwrap(), b);
    q.offer("pn", Duration::from_millis(300), Some(&n))
        .await
        .unwrap();
    assert!(q.reschedule(&a, Duration::from_millis(500)).await.unwrap());
    assert!(q.cancel(&b).await.unwrap());
    let mut got = Vec::new();
    for _ in 0..2 {
        let d = q.receive(WAIT).await.unwrap().expect("delivered");
        got.push((d.id.clone(), d.payload.clone()));
        d.ack().await.unwrap();
    }
    assert_eq!(got, vec![(n, b"pn".to_vec()), (a, b"pa".to_vec())]);
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unacked_message_comes_back_after_the_visibility_timeout() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("visibility", opts(300, 5)).unwrap();
    q.offer("x", Duration::ZERO, Some("x")).await.unwrap();
    let first = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(first.attempt, 1);
    assert!(
        q.receive(Some(Duration::from_millis(100)))
            .await
            .unwrap()
            .is_none(),
        "invisible meanwhile"
    );
    let second = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!((second.id.as_str(), second.attempt), ("x", 2));
    assert!(
        !first.ack().await.unwrap(),
        "the expired delivery cannot be acked"
    );
    assert!(second.ack().await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_max_attempts_times_buries_and_requeue_dead_brings_back() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("dead", opts(30_000, 3)).unwrap();
    q.offer("poison", Duration::ZERO, Some("p")).await.unwrap();
    for attempt in 1..=3 {
        let d = q.receive(WAIT).await.unwrap().unwrap();
        assert_eq!(d.attempt, attempt);
        assert!(d.nack(None).await.unwrap());
    }
    assert!(q
        .receive(Some(Duration::from_millis(300)))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats {
            dead: 1,
            ..Default::default()
        }
    );
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].id.as_str(),
            dead[0].payload.as_slice(),
            dead[0].attempts
        ),
        ("p", &b"poison"[..], 3)
    );
    assert_eq!(q.requeue_dead(None).await.unwrap(), 1);
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!((d.id.as_str(), d.attempt), ("p", 1));
    // Failing again: three more nacks (attempts 1 to 3) bury it again; then purge.
    d.nack(Some(Duration::ZERO)).await.unwrap();
    for _ in 0..2 {
        let d = q.receive(WAIT).await.unwrap().unwrap();
        d.nack(Some(Duration::ZERO)).await.unwrap();
    }
    assert_eq!(q.stats().await.unwrap().dead, 1);
    assert_eq!(
        q.requeue_dead(Some(&["nope".to_string()])).await.unwrap(),
        0
    );
    assert_eq!(q.purge_dead().await.unwrap(), 1);
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_ending_on_the_last_attempt_is_counted_dead_in_metrics() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c
        .reliable_queue("lease-dead-metrics", opts(200, 1))
        .unwrap();
    q.offer("x", Duration::ZERO, Some("x")).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    // Never acked: the transfer task buries it when the lease ends (one attempt allowed),
    // and counts the burial once the script's reply is back, which may be after a `stats`
    // call already sees the dead letter: wait for the count itself.
    let metrics = || delayq::metrics::queue(delayq::metrics::QueueKind::Reliable, q.name());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metrics().dead == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let m = metrics();
    assert_eq!((m.delivered, m.acked, m.dead), (1, 0, 1));
    assert_eq!(q.stats().await.unwrap().dead, 1, "buried once");
    assert!(
        !d.ack().await.unwrap(),
        "the buried delivery cannot be acked"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn offer_and_reschedule_return_the_due_time_the_server_computed() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("due-times", opts(30_000, 5)).unwrap();
    let before = c.server_time_ms().await.unwrap();
    let o = q
        .offer_with_outcome("a", Duration::from_secs(60), Some("a"))
        .await
        .unwrap();
    let after = c.server_time_ms().await.unwrap();
    let due = o.due_at.expect("created: a due time");
    assert!(
        (before + 60_000..=after + 60_000).contains(&due),
        "{before} {due} {after}"
    );
    let again = q
        .offer_with_outcome("b", Duration::ZERO, Some("a"))
        .await
        .unwrap();
    assert_eq!((again.created, again.due_at), (false, None));
    let moved = q
        .reschedule_due_at("a", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("waiting");
    let now = c.server_time_ms().await.unwrap();
    assert!(moved <= now + 5_000 && moved > now + 4_000, "{moved} {now}");
    assert_eq!(
        q.reschedule_due_at("none", Duration::ZERO).await.unwrap(),
        None
    );
}

/// A client closed while a take and receives wait: each wait fails with `Closed`, never
/// ends as if its time had passed (the Node exit test saw a receive resolve to null once in
/// a few hundred closes). Repeated, since the close races the wait's own loop.
#[tokio::test(flavor = "multi_thread")]
async fn closing_the_client_fails_every_pending_wait_with_closed() {
    let server = RedisServer::start();
    for round in 0..100 {
        let c = Client::connect(&server.url()).await.unwrap();
        let d = c.delayed_queue(&format!("close-d-{round}")).unwrap();
        let r = c
            .reliable_queue(&format!("close-r-{round}"), opts(30_000, 5))
            .unwrap();
        let (d2, r2, r3) = (d.clone(), r.clone(), r.clone());
        let waits = [
            tokio::spawn(async move { d2.take(None).await.map(|v| v.is_some()) }),
            tokio::spawn(async move { r2.receive(None).await.map(|v| v.is_some()) }),
            tokio::spawn(async move {
                r3.receive_many(5, Some(Duration::from_secs(60)))
                    .await
                    .map(|v| !v.is_empty())
            }),
        ];
        d.size().await.unwrap();
        if round % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(round % 7)).await;
        }
        c.close();
        for (i, w) in waits.into_iter().enumerate() {
            let got = tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .expect("the wait ends after the close")
                .unwrap();
            assert!(
                matches!(&got, Err(e) if e.kind() == ErrorKind::Closed),
                "round {round}, wait {i}: {got:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn nack_waits_for_the_back_off_schedule() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let o = ReliableQueueOptions {
        backoff: Some(Backoff::Schedule(vec![
            Duration::from_millis(400),
            Duration::from_millis(800),
        ])),
        ..opts(30_000, 5)
    };
    let q = c.reliable_queue("backoff", o).unwrap();
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    let t0 = c.server_time_ms().await.unwrap();
    d.nack(None).await.unwrap();
    assert_eq!(q.stats().await.unwrap().delayed, 1);
    let d = q.receive(WAIT).await.unwrap().unwrap();
    let t1 = c.server_time_ms().await.unwrap();
    assert!(t1 - t0 >= 400, "retried after {} ms", t1 - t0);
    assert_eq!(d.attempt, 2);
    assert!(d.due_at >= t0 + 400);
    d.ack().await.unwrap();
    let b = Backoff::Schedule(vec![Duration::from_secs(15), Duration::from_secs(180)]);
    assert_eq!(b.delay_for(1), Duration::from_secs(15));
    assert_eq!(b.delay_for(9), Duration::from_secs(180));
    let e = Backoff::default();
    assert!(e.delay_for(3) >= Duration::from_secs(2) && e.delay_for(3) <= Duration::from_secs(4));
    assert!(e.delay_for(100) <= Duration::from_secs(600));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_receive_gives_the_message_back() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("abandon", opts(30_000, 5)).unwrap();
    for _ in 0..20 {
        let _ = tokio::time::timeout(Duration::from_millis(10), q.receive(None)).await;
    }
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let d = q
        .receive(WAIT)
        .await
        .unwrap()
        .expect("not stranded in a dropped receive");
    assert_eq!(d.attempt, 1);
    d.ack().await.unwrap();
}

/// A delivery given back untouched (its caller was gone) keeps its due time: the next
/// delivery reports when the message really came due, not when it was given back.
#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_given_back_untouched_keeps_its_due_time() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("keep-due", opts(30_000, 5)).unwrap();
    let due = q
        .offer_with_outcome("x", Duration::ZERO, None)
        .await
        .unwrap()
        .due_at;
    let first = q.receive(WAIT).await.unwrap().expect("delivered");
    assert_eq!(Some(first.due_at), due);
    // The give-back comes later than the due time by the server's clock.
    let now = c.server_time_ms().await.unwrap();
    let later = || async { c.server_time_ms().await.unwrap() > now + 5 };
    assert!(common::eventually(Duration::from_secs(5), later).await);
    assert!(first.release().await.unwrap());
    let again = q.receive(WAIT).await.unwrap().expect("given back");
    assert_eq!((again.attempt, again.due_at), (1, first.due_at));
    again.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn receives_abandoned_at_any_instant_lose_nothing() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("abandoned", opts(60_000, 5)).unwrap();
    let n = 300u64;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::ZERO, None)))
        .await
        .unwrap();
    let mut received = 0;
    for i in 0..1500u64 {
        let wait = Duration::from_micros((i * 7919) % 1500);
        // The timer first: a receive whose delivery arrived is dropped without another poll.
        tokio::select! {
            biased;
            _ = tokio::time::sleep(wait) => {}
            r = q.receive(Some(Duration::from_secs(1))) => {
                if let Some(d) = r.unwrap() {
                    assert!(d.ack().await.unwrap());
                    received += 1;
                }
            }
        }
    }
    // Abandoned deliveries go back to ready in the background (never left in flight for the
    // visibility timeout): wait until the counts settle.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = q.stats().await.unwrap();
        if (received + s.ready == n && s.in_flight == 0) || std::time::Instant::now() > deadline {
            assert_eq!(
                (received + s.ready, s.in_flight),
                (n, 0),
                "received {received}, {s:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_acks_on_success_and_retries_failures() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("consume", opts(30_000, 5)).unwrap();
    let n = 200u64;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::from_millis(i % 500), None)))
        .await
        .unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let done = Arc::new(std::sync::Mutex::new(HashMap::<String, u32>::new()));
    let runner = {
        let (q, calls, done) = (q.clone(), calls.clone(), done.clone());
        tokio::spawn(async move {
            q.consume(
                move |d| {
                    let (calls, done) = (calls.clone(), done.clone());
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        // Every tenth message fails on its first attempt.
                        let i: u64 = String::from_utf8_lossy(&d.payload).parse().unwrap();
                        if i.is_multiple_of(10) && d.attempt == 1 {
                            return Err("first attempt fails");
                        }
                        *done.lock().unwrap().entry(d.id.clone()).or_default() += 1;
                        Ok(())
                    }
                },
                8,
            )
            .await
        })
    };
    assert!(
        common::eventually(Duration::from_secs(15), || async {
            q.stats().await.unwrap() == ReliableStats::default()
                && done.lock().unwrap().len() == n as usize
        })
        .await,
        "all handled: {:?}",
        q.stats().await
    );
    assert_eq!(calls.load(Ordering::SeqCst), n + n / 10);
    q.close();
    runner.await.unwrap().unwrap();
}

/// A close at once while handlers run: a handler whose work is done and whose outcome is
/// on its way (a host's handler that returned, its reply crossing to the worker) is acked,
/// not given back to be processed again.
#[tokio::test(flavor = "multi_thread")]
async fn a_close_at_once_acks_the_handlers_that_just_finished() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("close-now", opts(30_000, 5)).unwrap();
    let n = 400u64;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::ZERO, None)))
        .await
        .unwrap();
    let finished = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let runner = {
        let (q, finished) = (q.clone(), finished.clone());
        tokio::spawn(async move {
            let handler = move |d: delayq::Delivery| {
                let finished = finished.clone();
                async move {
                    finished.lock().unwrap().push(d.id.clone());
                    // The outcome's way to the worker (a host's reply crossing threads).
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<(), String>(())
                }
            };
            q.consume(handler, 32).await
        })
    };
    let some = || async { finished.lock().unwrap().len() >= 64 };
    assert!(common::eventually(Duration::from_secs(10), some).await);
    q.close();
    runner.await.unwrap().unwrap();

    let done: std::collections::HashSet<String> =
        finished.lock().unwrap().iter().cloned().collect();
    let other = c.reliable_queue("close-now", opts(30_000, 5)).unwrap();
    let (mut again, mut rest) = (Vec::new(), 0);
    while let Some(d) = other.receive(Some(Duration::ZERO)).await.unwrap() {
        if done.contains(&d.id) {
            again.push(d.id.clone());
        }
        rest += 1;
        d.ack().await.unwrap();
    }
    assert!(
        again.is_empty(),
        "finished before the close, yet back: {again:?}"
    );
    // Nothing else is held: every message was handled once or is back in the queue.
    assert_eq!(rest + done.len(), n as usize);
    c.close();
}

/// The client (not the handle) closed while every worker of a consume runs a handler and
/// more deliveries wait in its buffer: no handler starts after the close (its ack could
/// not be sent, and the message would be processed again after its lease), and every
/// message not handled is still in the queue for the next consumer.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_closed_during_consume_starts_no_more_handlers() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("client-close", opts(2_000, 5)).unwrap();
    let n = 40u64;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::ZERO, None)))
        .await
        .unwrap();
    let concurrency = 4;
    let (started, after_close) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let runner = {
        let (q, c) = (q.clone(), c.clone());
        let (started, after_close, release) =
            (started.clone(), after_close.clone(), release.clone());
        tokio::spawn(async move {
            let handler = move |_: delayq::Delivery| {
                let closed = c.is_closed();
                let (started, after_close, release) =
                    (started.clone(), after_close.clone(), release.clone());
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    if closed {
                        after_close.fetch_add(1, Ordering::SeqCst);
                    }
                    release.acquire().await.unwrap().forget();
                    Ok::<(), String>(())
                }
            };
            q.consume(handler, concurrency).await
        })
    };
    // Every worker busy, and the buffer filled behind them.
    let busy = || async { started.load(Ordering::SeqCst) == concurrency as u64 };
    assert!(common::eventually(Duration::from_secs(10), busy).await);
    let other = Client::connect(&server.url()).await.unwrap();
    let probe = other
        .reliable_queue("client-close", opts(2_000, 5))
        .unwrap();
    let buffered = || async { probe.stats().await.unwrap().in_flight >= 2 * concurrency as u64 };
    assert!(common::eventually(Duration::from_secs(10), buffered).await);

    c.close();
    release.add_permits(n as usize);
    runner.await.unwrap().unwrap();
    assert_eq!(
        after_close.load(Ordering::SeqCst),
        0,
        "handlers started after the client closed"
    );
    assert_eq!(started.load(Ordering::SeqCst), concurrency as u64);

    // Every message comes back: those waiting in the buffer given back at the close, the
    // running ones after their lease (their acks could not be sent).
    let mut back = 0;
    while let Some(d) = probe.receive(Some(Duration::from_secs(5))).await.unwrap() {
        d.ack().await.unwrap();
        back += 1;
        if back == n {
            break;
        }
    }
    assert_eq!(back, n, "messages back");
    other.close();
}

/// Handlers slower than the visibility timeout, one at a time: the messages received
/// ahead wait in consume's buffer longer than their lease, which is kept while they wait.
/// Each message is handled once, on its first attempt, and no lease is lost.
#[tokio::test(flavor = "multi_thread")]
async fn prefetched_deliveries_keep_their_lease_while_they_wait() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("prefetch", opts(600, 5)).unwrap();
    let n = 4u64;
    q.offer_all((0..n).map(|i| (i.to_string(), Duration::ZERO, None)))
        .await
        .unwrap();
    let handled = Arc::new(std::sync::Mutex::new(Vec::<(String, u32)>::new()));
    let runner = {
        let (q, handled) = (q.clone(), handled.clone());
        tokio::spawn(async move {
            q.consume(
                move |d| {
                    let handled = handled.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(900)).await;
                        handled.lock().unwrap().push((d.id.clone(), d.attempt));
                        Ok::<(), String>(())
                    }
                },
                1,
            )
            .await
        })
    };
    assert!(
        common::eventually(Duration::from_secs(15), || async {
            q.stats().await.unwrap() == ReliableStats::default()
        })
        .await,
        "all handled: {:?}",
        q.stats().await
    );
    let handled = handled.lock().unwrap().clone();
    assert_eq!(handled.len(), n as usize, "each once: {handled:?}");
    assert!(
        handled.iter().all(|(_, a)| *a == 1),
        "first attempts: {handled:?}"
    );
    assert_eq!(q.lost_leases(), 0);
    q.close();
    runner.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_messages_through_eight_consumers_none_lost() {
    let server = RedisServer::start();
    let producer = Client::connect(&server.url()).await.unwrap();
    let p = producer.reliable_queue("many", opts(500, 10)).unwrap();
    let n = 10_000usize;
    let ids = p
        .offer_all((0..n).map(|i| {
            (
                i.to_string(),
                Duration::from_millis((i % 2000) as u64),
                None,
            )
        }))
        .await
        .unwrap();
    let mut workers = Vec::new();
    for w in 0..8 {
        let c = Client::connect(&server.url()).await.unwrap();
        workers.push(tokio::spawn(async move {
            let q = c.reliable_queue("many", opts(500, 10)).unwrap();
            let mut seen = Vec::new();
            let mut abandoned = 0;
            while let Some(d) = q.receive(Some(Duration::from_secs(3))).await.unwrap() {
                // Worker 0 "crashes" on every 50th message: never acks it.
                if w == 0 && seen.len() % 50 == 0 && d.attempt == 1 {
                    abandoned += 1;
                } else {
                    assert!(d.ack().await.unwrap() || d.attempt > 1);
                }
                seen.push((d.id.clone(), d.attempt));
            }
            (seen, abandoned)
        }));
    }
    let mut count: HashMap<String, Vec<u32>> = HashMap::new();
    let mut abandoned = 0;
    for w in workers {
        let (seen, a) = w.await.unwrap();
        abandoned += a;
        for (id, attempt) in seen {
            count.entry(id).or_default().push(attempt);
        }
    }
    assert_eq!(count.len(), n, "no message lost");
    for id in &ids {
        let attempts = &count[id];
        // Every duplicate is a redelivery after an expired visibility timeout.
        let mut sorted = attempts.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (1..=attempts.len() as u32).collect::<Vec<_>>(),
            "{id}: {attempts:?}"
        );
    }
    let redelivered: usize = count.values().map(|a| a.len() - 1).sum();
    assert!(
        redelivered >= abandoned,
        "{redelivered} redeliveries for {abandoned} abandoned"
    );
    assert_eq!(p.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_reaching_redis() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("bad", opts(1000, 5)).unwrap();
    assert_eq!(
        q.offer("x", Duration::MAX, None).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        q.offer("x", LONG, Some("")).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let long_id = "x".repeat(257);
    assert_eq!(
        q.offer("x", LONG, Some(&long_id)).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        q.cancel("").await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        q.reschedule("a", Duration::MAX).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    for bad in [opts(0, 5), opts(1000, 0), opts(1000, 256)] {
        assert_eq!(
            c.reliable_queue("bad2", bad).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    let empty = ReliableQueueOptions {
        backoff: Some(Backoff::Schedule(vec![])),
        ..opts(1000, 5)
    };
    assert_eq!(
        c.reliable_queue("bad3", empty).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        c.reliable_queue("", opts(1000, 5)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(server.cli(&["DBSIZE"]), "0");
    server.cli(&["SET", "{dq:typed}:ready", "x"]);
    let t = c.reliable_queue("typed", opts(1000, 5)).unwrap();
    assert_eq!(
        t.offer("x", Duration::ZERO, None).await.unwrap_err().kind(),
        ErrorKind::WrongType
    );
    assert_eq!(
        t.receive(Some(Duration::from_millis(50)))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::WrongType
    );
    assert_eq!(server.cli(&["DBSIZE"]), "1");
    q.close();
    assert_eq!(q.stats().await.unwrap_err().kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_lost_across_a_redis_restart() {
    let mut server = RedisServer::start_with(true);
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("restart", opts(1000, 10)).unwrap();
    let n = 300usize;
    q.offer_all((0..n).map(|i| {
        (
            i.to_string(),
            Duration::from_millis(300 + (i as u64) * 8),
            None,
        )
    }))
    .await
    .unwrap();
    // Counts deliveries, not acks whose reply came back: an ack whose reply the restart
    // cut off may still have run. Every message must be delivered, and the queue must end
    // empty (an ack that did not run lets its message come back, to be acked again).
    let consumer = {
        let q = q.clone();
        tokio::spawn(async move {
            let mut delivered = HashMap::<Vec<u8>, u32>::new();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while tokio::time::Instant::now() < deadline {
                if delivered.len() == n {
                    match q.stats().await {
                        Ok(s) if s.delayed + s.ready + s.in_flight + s.dead == 0 => break,
                        _ => {}
                    }
                }
                match q.receive(Some(Duration::from_millis(500))).await {
                    Ok(Some(d)) => {
                        *delivered.entry(d.payload.clone()).or_default() += 1;
                        let _ = d.ack().await;
                    }
                    Ok(None) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            delivered
        })
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    server.restart();
    let delivered = consumer.await.unwrap();
    assert_eq!(
        delivered.len(),
        n,
        "every message delivered after the restart"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        stats.delayed + stats.ready + stats.in_flight + stats.dead,
        0,
        "every delivered message acked in the end: {stats:?}"
    );
}

/// `Delivery::while_leased` keeps the lease of work that outlasts the visibility timeout
/// (three timeouts here): no other receive gets the message meanwhile, and the ack after
/// it finds its lease. The same work outside `while_leased` loses its lease.
#[tokio::test(flavor = "multi_thread")]
async fn work_done_while_leased_keeps_its_lease() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("kept", opts(400, 5)).unwrap();
    for kept in [true, false] {
        q.offer("slow", Duration::ZERO, None).await.unwrap();
        let d = q
            .receive(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .unwrap();
        let other = q.clone();
        // The work: waits for the message for three visibility timeouts.
        let work = async move { other.receive(Some(Duration::from_millis(1200))).await };
        let stolen = match kept {
            true => d.while_leased(work).await,
            false => work.await,
        }
        .unwrap();
        assert_eq!(stolen.is_none(), kept, "kept {kept}: {stolen:?}");
        assert_eq!(d.ack().await.unwrap(), kept, "kept {kept}");
        if let Some(s) = stolen {
            s.ack().await.unwrap();
        }
    }
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receive_that_waits_nothing_reads_without_blocking() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("zero", opts(30_000, 5)).unwrap();
    q.stats().await.unwrap();
    // On an empty queue: an answer at once, not after Redis's timer for `BLOCK 1` (100 ms
    // each at its default hz, 1 s for the ten).
    let started = std::time::Instant::now();
    for _ in 0..10 {
        assert!(q.receive(Some(Duration::ZERO)).await.unwrap().is_none());
        assert!(q
            .receive_many(5, Some(Duration::ZERO))
            .await
            .unwrap()
            .is_empty());
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "20 empty reads took {took:?}"
    );
    q.offer("x", Duration::ZERO, None).await.unwrap();
    q.transfer_now().await.unwrap();
    let d = q
        .receive(Some(Duration::ZERO))
        .await
        .unwrap()
        .expect("ready");
    assert!(d.ack().await.unwrap());
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receive_that_waits_nothing_finds_messages_that_just_came_due() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut o = opts(30_000, 5);
    o.scheduler.enabled = false; // only the call itself can move what is due
    let soon = Duration::from_millis(20);
    // Waits for the server's clock to pass `due` (ms).
    let past = |due: i64| {
        let c = c.clone();
        async move {
            while c.server_time_ms().await.unwrap() <= due {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    for shards in [1, 4] {
        o.shards = Some(shards);
        let q = c
            .reliable_queue(&format!("instant-{shards}"), o.clone())
            .unwrap();
        let first = q.offer_with_outcome("soon", soon, None).await.unwrap();
        q.offer("later", Duration::from_secs(3600), None)
            .await
            .unwrap();
        past(first.due_at.unwrap()).await;
        let d = q.receive(Some(Duration::ZERO)).await.unwrap();
        let d = d.expect("the message that came due");
        assert_eq!(d.payload, b"soon");
        assert!(d.ack().await.unwrap());
        let more = q.receive_many(5, Some(Duration::ZERO)).await.unwrap();
        assert!(more.is_empty(), "the other is not due");
        let ids: Vec<String> = (0..3).map(|i| format!("m{i}")).collect();
        let mut due = 0;
        for id in &ids {
            let o = q
                .offer_with_outcome(id.as_str(), soon, Some(id))
                .await
                .unwrap();
            due = due.max(o.due_at.unwrap());
        }
        past(due).await;
        let got = q.receive_many(5, Some(Duration::ZERO)).await.unwrap();
        let mut got_ids: Vec<String> = got.iter().map(|d| d.id.clone()).collect();
        got_ids.sort();
        assert_eq!(got_ids, ids, "{shards} shard(s)");
    }
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reliable_queue_is_found_by_its_name() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    assert!(!c.reliable_queue_exists("found").await.unwrap());
    let delayed = c.delayed_queue("found").unwrap();
    delayed.offer("x", Duration::from_secs(60)).await.unwrap();
    assert!(
        !c.reliable_queue_exists("found").await.unwrap(),
        "a delayed queue of that name is not one"
    );
    let q = c.reliable_queue("found", opts(30_000, 5)).unwrap();
    q.offer("y", Duration::from_secs(60), None).await.unwrap();
    assert!(c.reliable_queue_exists("found").await.unwrap());
    let err = c.reliable_queue_exists("").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    c.close();
}
