//! The reliable queue under real workloads (SPEC section 11): settings that belong to the
//! queue, leases that extend, graceful close, batch receive, idempotent offers, dead
//! letters that keep every death, and a group that does not grow.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::RedisServer;
use delayq::{Backoff, Client, ErrorKind, ReliableQueueOptions, ReliableStats};

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

fn named(visibility_ms: u64, max_attempts: u32) -> ReliableQueueOptions {
    ReliableQueueOptions {
        visibility_timeout: Some(Duration::from_millis(visibility_ms)),
        max_attempts: Some(max_attempts),
        backoff: Some(Backoff::Schedule(vec![Duration::from_millis(20)])),
        ..Default::default()
    }
}

async fn server_ms(c: &Client) -> i64 {
    c.server_time_ms().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_belong_to_the_queue_not_to_a_handle() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let qa = a.reliable_queue("jobs", named(40_000, 2)).unwrap();
    qa.offer("x", Duration::ZERO, Some("job-1")).await.unwrap();
    // A second process names nothing: it uses what the first stored, its transfer task too.
    let qb = b
        .reliable_queue("jobs", ReliableQueueOptions::default())
        .unwrap();
    let s = qb.settings().await.unwrap();
    assert_eq!(s.visibility_timeout, Duration::from_secs(40));
    assert_eq!(s.max_attempts, 2);
    assert_eq!(
        s.backoff,
        Backoff::Schedule(vec![Duration::from_millis(20)])
    );
    // Its nacks bury after the stored 2 attempts, not the default 5.
    for attempt in 1..=2 {
        let d = qb.receive(WAIT).await.unwrap().expect("a delivery");
        assert_eq!(d.attempt, attempt);
        let deadline = d.deadline() - server_ms(&b).await;
        assert!(
            (39_000..=40_100).contains(&deadline),
            "lease of the stored 40 s, {deadline} ms left"
        );
        assert!(d.nack(None).await.unwrap());
    }
    assert_eq!(qb.stats().await.unwrap().dead, 1);

    // A handle that names other settings gets a clear error on its first call...
    let c = Client::connect(&server.url()).await.unwrap();
    let qc = c.reliable_queue("jobs", named(30_000, 2)).unwrap();
    let err = qc.stats().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("visibility timeout is 40000 ms"),
        "names the difference: {err}"
    );
    assert!(
        err.to_string()
            .contains("the settings of {dq:jobs} differ: "),
        "{err}"
    );
    // ...unless it updates them explicitly, which every handle then sees.
    let update = ReliableQueueOptions {
        update_settings: true,
        ..named(30_000, 3)
    };
    let qd = c.reliable_queue("jobs", update).unwrap();
    assert_eq!(
        qd.settings().await.unwrap().visibility_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(qb.settings().await.unwrap().max_attempts, 3);
    for client in [a, b, c] {
        client.close();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_extends_and_a_lost_one_says_so() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("leases", named(800, 5)).unwrap();
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    let before = d.deadline();
    assert!(d.extend(Duration::from_secs(3)).await.unwrap());
    assert!(d.deadline() >= before + 2000, "the deadline moved");
    // Past the visibility timeout, but inside the extended lease: nobody else gets it.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    q.transfer_now().await.unwrap();
    assert!(q
        .receive(Some(Duration::from_millis(100)))
        .await
        .unwrap()
        .is_none());
    assert!(d.ack().await.unwrap(), "the lease was held");

    // A lease shortened to nothing ends: the message comes back, and the old delivery
    // can neither extend nor ack.
    q.offer("y", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert!(d.extend(Duration::ZERO).await.unwrap());
    q.transfer_now().await.unwrap();
    let again = q.receive(WAIT).await.unwrap().expect("taken back");
    assert_eq!(again.attempt, 2);
    assert!(!d.extend(Duration::from_secs(5)).await.unwrap());
    assert!(!d.ack().await.unwrap());
    assert_eq!(q.lost_leases(), 1);
    assert!(again.ack().await.unwrap());

    // A delivery ended here (acked, or nacked) acks false again without a lost lease: no
    // lease was lost, and no work will be done twice.
    assert!(!again.ack().await.unwrap(), "acked twice");
    q.offer("z", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert!(d.nack(Some(Duration::from_secs(60))).await.unwrap());
    assert!(!d.clone().ack().await.unwrap(), "acked after a nack");
    assert_eq!(q.ack_many(&[again, d]).await.unwrap(), vec![false, false]);
    assert_eq!(q.lost_leases(), 1, "only the lease that was lost");
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reaper_finds_ended_leases_behind_many_extended_ones() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("behind", named(500, 5)).unwrap();
    for i in 0..130 {
        q.offer(format!("m{i}"), Duration::ZERO, None)
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 130 {
        got.extend(q.receive_many(130 - got.len(), WAIT).await.unwrap());
    }
    // The 120 received first hold long leases; the last 10 keep the visibility timeout.
    // The reaper reads the pending list a page (100) at a time: the 10 are on its second.
    for d in &got[..120] {
        assert!(d.extend(Duration::from_secs(60)).await.unwrap());
    }
    let expected: std::collections::BTreeSet<_> = got[120..].iter().map(|d| d.id.clone()).collect();
    let mut again = std::collections::BTreeSet::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while again.len() < 10 {
        assert!(std::time::Instant::now() < until, "taken back: {again:?}");
        q.transfer_now().await.unwrap();
        for d in q
            .receive_many(20, Some(Duration::from_millis(100)))
            .await
            .unwrap()
        {
            assert_eq!(d.attempt, 2);
            assert!(again.insert(d.id.clone()), "{} twice", d.id);
            assert!(d.ack().await.unwrap());
        }
    }
    assert_eq!(again, expected);
    q.transfer_now().await.unwrap();
    assert!(q
        .receive(Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .is_none());
    for d in &got[..120] {
        assert!(d.ack().await.unwrap(), "{} kept its extended lease", d.id);
    }
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_consumers_delivery_comes_back_behind_any_number_of_extended_leases() {
    // The reaper used to page the group's pending list from its start, at most 10 pages
    // of 100 a pass, past extended leases: behind 1,000 of them a dead consumer's delivery
    // stayed in flight for good. Now each pass goes on where the last one stopped.
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("crowd", named(5000, 5)).unwrap();
    let payloads: Vec<_> = (0..3000)
        .map(|i| (format!("m{i}").into_bytes(), Duration::ZERO, None))
        .collect();
    q.offer_all(payloads).await.unwrap();
    let mut held = Vec::new();
    while held.len() < 3000 {
        held.extend(
            q.receive_many((3000 - held.len()).min(1000), WAIT)
                .await
                .unwrap(),
        );
    }
    for d in &held {
        assert!(d.extend(Duration::from_secs(120)).await.unwrap());
    }
    // A consumer that then dies holding one delivery: a bare XREADGROUP, never acked.
    q.offer("victim", Duration::ZERO, Some("victim"))
        .await
        .unwrap();
    let read = server.cli(&[
        "XREADGROUP",
        "GROUP",
        "delayq",
        "dead-process",
        "COUNT",
        "1",
        "STREAMS",
        "{dq:crowd}:ready",
        ">",
    ]);
    assert!(read.contains("victim"), "the dead consumer got it: {read}");
    // Its visibility timeout (5 s) plus a few passes (1 s apart; 1,000 entries of the
    // pending list a pass), with room: no transfer_now, the task's own passes bring it
    // back.
    let started = std::time::Instant::now();
    let again = q
        .receive(Some(Duration::from_secs(12)))
        .await
        .unwrap()
        .expect("the dead consumer's delivery came back");
    assert_eq!((again.id.as_str(), again.attempt), ("victim", 2));
    assert!(again.ack().await.unwrap());
    eprintln!("back after {:?}", started.elapsed());
    for d in &held[..10] {
        assert!(d.ack().await.unwrap(), "{} kept its extended lease", d.id);
    }
    assert_eq!(q.stats().await.unwrap().in_flight, 2990);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_whose_recorded_end_was_lost_ends_a_visibility_timeout_after_its_extension() {
    // `leases` evicted (a maxmemory policy of allkeys-*) or deleted by hand: the delivery
    // still comes back, by its idle time.
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("forgot", named(1000, 5)).unwrap();
    q.offer("x", Duration::ZERO, Some("x")).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert!(d.extend(Duration::from_secs(60)).await.unwrap());
    server.cli(&["DEL", "{dq:forgot}:leases"]);
    let again = q
        .receive(Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("back by its idle time");
    assert_eq!(again.attempt, 2);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shortened_lease_ends_on_time_between_reconcile_passes() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut options = named(30_000, 5);
    options.scheduler.reconcile_interval = Duration::from_secs(20);
    let q = c.reliable_queue("shorten", options).unwrap();
    q.offer("x", Duration::ZERO, Some("x")).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    // Shortened to 300 ms: the transfer task, asleep until the old end or the next
    // reconcile (20 s), is woken to take it back then.
    assert!(d.extend(Duration::from_millis(300)).await.unwrap());
    let started = std::time::Instant::now();
    let again = q
        .receive(Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("back after the shortened lease");
    let took = started.elapsed();
    assert_eq!(again.attempt, 2);
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "back after {took:?}"
    );
    assert!(!d.ack().await.unwrap(), "the shortened lease was lost");
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_whose_lease_ended_while_its_process_stood_still_is_not_run() {
    // Process A's runtime stands still (a handler that blocks its thread, as a stopped or
    // starved process) while its read is on its way: the read's reply brings "second",
    // whose lease then ends before A runs again, and B takes it over. A must not start a
    // handler on it when it runs again: its lease counts from when the read was sent, not
    // from when A got round to the reply.
    let server = RedisServer::start();
    let b = Client::connect(&server.url()).await.unwrap();
    let qb = b.reliable_queue("still", named(1000, 5)).unwrap();
    qb.offer("first", Duration::ZERO, Some("first"))
        .await
        .unwrap();

    let ran = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (started, first_started) = std::sync::mpsc::channel::<()>();
    let (go, stand_still) = tokio::sync::oneshot::channel::<()>();
    let stand_still = Arc::new(std::sync::Mutex::new(Some(stand_still)));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let url = server.url();
    let ran_in_a = ran.clone();
    let a = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let a = Client::connect(&url).await.unwrap();
            let mut options = named(1000, 5);
            options.scheduler.enabled = false;
            let qa = a.reliable_queue("still", options).unwrap();
            let consuming = qa.consume(
                move |d| {
                    let (ran, started) = (ran_in_a.clone(), started.clone());
                    let stand_still = stand_still.lock().unwrap().take();
                    async move {
                        ran.lock().unwrap().push(d.id.clone());
                        if let Some(stand_still) = stand_still {
                            started.send(()).unwrap();
                            stand_still.await.unwrap();
                            std::thread::sleep(Duration::from_millis(2500));
                        }
                        Ok::<(), String>(())
                    }
                },
                1,
            );
            tokio::select! {
                r = consuming => panic!("consume returned {r:?}"),
                _ = stopped => {}
            }
            a.close();
        });
    });
    first_started
        .recv_timeout(Duration::from_secs(10))
        .expect("A runs first");
    // A's next read waits on the server; A then stands still, and "second" comes to it.
    let blocked = || async { server.cli(&["CLIENT", "LIST"]).contains("cmd=xreadgroup") };
    assert!(common::eventually(Duration::from_secs(5), blocked).await);
    go.send(()).unwrap();
    qb.offer("second", Duration::ZERO, Some("second"))
        .await
        .unwrap();
    let in_a = || async { qb.stats().await.unwrap().in_flight == 2 };
    assert!(common::eventually(Duration::from_secs(5), in_a).await);
    // B gets both once their 1 s leases end.
    let mut got = std::collections::BTreeSet::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 2 {
        assert!(std::time::Instant::now() < until, "B got {got:?}");
        if let Some(d) = qb.receive(Some(Duration::from_millis(200))).await.unwrap() {
            assert_eq!(d.attempt, 2, "{d:?}");
            got.insert(d.id.clone());
            assert!(d.ack().await.unwrap());
        }
    }
    // A runs again 2.5 s after it stood still (before its read would time out) and handles the read's reply at once; a
    // second after that, it has decided.
    tokio::time::sleep(Duration::from_millis(2500 + 1000)).await;
    stop.send(()).unwrap();
    a.join().unwrap();
    assert_eq!(*ran.lock().unwrap(), vec!["first".to_string()], "A ran");
    b.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consume_dropped_while_it_runs_gives_back_what_it_holds_and_sends_its_acks() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("dropped", named(30_000, 5)).unwrap();
    q.offer_all([
        ("quick", Duration::ZERO, None),
        ("stuck", Duration::ZERO, None),
    ])
    .await
    .unwrap();
    q.offer_all([
        ("waiting1", Duration::ZERO, None),
        ("waiting2", Duration::ZERO, None),
    ])
    .await
    .unwrap();
    q.transfer_now().await.unwrap();
    // Two workers: one acks "quick" and runs on; the other is stuck in its handler. The
    // consume is dropped (a cancelled task) while "stuck" runs.
    let (started, mut stuck) = tokio::sync::mpsc::unbounded_channel::<String>();
    let consuming = q.consume(
        move |d| {
            let started = started.clone();
            async move {
                let payload = String::from_utf8(d.payload.clone()).unwrap();
                started.send(payload.clone()).unwrap();
                if payload != "quick" {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(())
            }
        },
        2,
    );
    let dropped = tokio::time::timeout(Duration::from_secs(10), async {
        let mut seen = Vec::new();
        while !(seen.iter().any(|p| p == "quick") && seen.len() >= 3) {
            seen.push(stuck.recv().await.unwrap());
        }
    });
    tokio::select! {
        _ = consuming => panic!("consume returned"),
        r = dropped => r.expect("the handlers started"),
    }
    // Given back at once (not after the 30 s lease); "quick" acked, not given back.
    let mut back = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while back.len() < 3 && tokio::time::Instant::now() < until {
        for d in q
            .receive_many(10, Some(Duration::from_millis(200)))
            .await
            .unwrap()
        {
            back.push(String::from_utf8(d.payload.clone()).unwrap());
            d.ack().await.unwrap();
        }
    }
    back.sort();
    assert_eq!(back, ["stuck", "waiting1", "waiting2"]);
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn handlers_that_end_soon_after_their_consume_was_dropped_are_settled() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("grace", named(30_000, 5)).unwrap();
    q.offer_all([
        ("ok", Duration::ZERO, None),
        ("fails", Duration::ZERO, None),
    ])
    .await
    .unwrap();
    q.transfer_now().await.unwrap();
    // Both handlers wait for `go`, sent only after the consume was dropped (as a host's
    // handler returns, or is cancelled, just after its consume was cancelled).
    let (go, wait) = tokio::sync::watch::channel(false);
    let (started, mut running) = tokio::sync::mpsc::unbounded_channel::<()>();
    let consuming = q.consume(
        move |d| {
            let (mut wait, started) = (wait.clone(), started.clone());
            async move {
                started.send(()).unwrap();
                wait.wait_for(|go| *go).await.unwrap();
                match d.payload.as_slice() {
                    b"ok" => Ok(()),
                    _ => Err("cancelled"),
                }
            }
        },
        2,
    );
    let both = async {
        running.recv().await.unwrap();
        running.recv().await.unwrap();
    };
    tokio::select! {
        _ = consuming => panic!("consume returned"),
        _ = tokio::time::timeout(Duration::from_secs(10), both) => {}
    }
    // The handlers end 200 ms after the drop (the scenario, not a synchronisation): inside
    // the grace a dropped consume gives its running handlers.
    tokio::time::sleep(Duration::from_millis(200)).await;
    go.send(true).unwrap();
    // "ok" is acked; "fails" comes back at once, its attempt not counted.
    let mut back = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while back.is_empty() && tokio::time::Instant::now() < until {
        back = q
            .receive_many(10, Some(Duration::from_millis(200)))
            .await
            .unwrap();
    }
    let got: Vec<_> = back
        .iter()
        .map(|d| (d.payload.clone(), d.attempt))
        .collect();
    assert_eq!(got, [(b"fails".to_vec(), 1)]);
    assert!(back[0].ack().await.unwrap());
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats::default(),
        "ok was acked"
    );
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_keeps_a_long_handler_leased_so_it_runs_once() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    // Two processes consume; the handler takes 3.5 times the visibility timeout.
    let q = c.reliable_queue("long", named(1000, 5)).unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let q2 = other
        .reliable_queue("long", ReliableQueueOptions::default())
        .unwrap();
    q.offer("slow", Duration::ZERO, None).await.unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let spawn = |q: delayq::ReliableQueue, runs: Arc<AtomicU32>| {
        tokio::spawn(async move {
            q.consume(
                move |_d| {
                    let runs = runs.clone();
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(3500)).await;
                        Ok::<_, String>(())
                    }
                },
                2,
            )
            .await
        })
    };
    let t1 = spawn(q.clone(), runs.clone());
    let t2 = spawn(q2.clone(), runs.clone());
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            q.stats().await.unwrap() == ReliableStats::default()
        })
        .await,
        "acked"
    );
    q.close();
    q2.close();
    t1.await.unwrap().unwrap();
    t2.await.unwrap().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    assert_eq!(q.lost_leases() + q2.lost_leases(), 0);
    c.close();
    other.close();
}

/// The visibility timeout lowered (30 s to 600 ms) while a consume runs: a message received
/// after the change has a 600 ms lease, which consume keeps from the first third of it on
/// (not from a third of the 30 s its handle read at start), so a handler of 2.5 s runs once.
#[tokio::test(flavor = "multi_thread")]
async fn consume_keeps_the_lease_of_a_visibility_lowered_while_it_runs() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("lowered", named(30_000, 5)).unwrap();
    assert_eq!(
        q.settings().await.unwrap().visibility_timeout,
        Duration::from_secs(30)
    );
    let runs = Arc::new(AtomicU32::new(0));
    let consumer = {
        let (q, runs) = (q.clone(), runs.clone());
        tokio::spawn(async move {
            let handler = move |_d| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    Ok::<_, String>(())
                }
            };
            q.consume(handler, 2).await
        })
    };
    let admin = c
        .reliable_queue(
            "lowered",
            ReliableQueueOptions {
                update_settings: true,
                ..named(600, 5)
            },
        )
        .unwrap();
    assert_eq!(
        admin.settings().await.unwrap().visibility_timeout,
        Duration::from_millis(600)
    );
    admin.offer("slow", Duration::ZERO, None).await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            runs.load(Ordering::SeqCst) > 0 && q.stats().await.unwrap() == ReliableStats::default()
        })
        .await,
        "acked"
    );
    q.close();
    consumer.await.unwrap().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    assert_eq!(q.lost_leases(), 0);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_close_settles_running_handlers_and_gives_back_the_rest() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("graceful", named(30_000, 5)).unwrap();
    let n = 10;
    for i in 0..n {
        q.offer(format!("m{i}"), Duration::ZERO, None)
            .await
            .unwrap();
    }
    let (started, finished) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let consumer = {
        let (q, started, finished) = (q.clone(), started.clone(), finished.clone());
        tokio::spawn(async move {
            q.consume(
                move |_d| {
                    let (started, finished) = (started.clone(), finished.clone());
                    async move {
                        started.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(700)).await;
                        finished.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, String>(())
                    }
                },
                3,
            )
            .await
        })
    };
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            started.load(Ordering::SeqCst) == 3
        })
        .await
    );
    q.close_gracefully(Duration::from_secs(5)).await.unwrap();
    consumer.await.unwrap().unwrap();
    let done = finished.load(Ordering::SeqCst);
    assert_eq!(
        done,
        started.load(Ordering::SeqCst),
        "every started handler finished"
    );
    // What finished was acked; what no handler started is ready again, none in flight.
    let check = c
        .reliable_queue("graceful", ReliableQueueOptions::default())
        .unwrap();
    let s = check.stats().await.unwrap();
    assert_eq!(s.in_flight, 0, "{s:?}");
    assert_eq!(s.ready, n as u64 - u64::from(done), "{s:?}");
    let rest = check.receive_many(n, WAIT).await.unwrap();
    assert!(
        rest.iter().all(|d| d.attempt == 1),
        "given back, not counted"
    );
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn close_within_none_closes_at_once_and_a_deadline_closes_gracefully() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("within", named(30_000, 5)).unwrap();
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    // No deadline: closed before the future is even polled.
    let closing = q.close_within(None);
    let err = q
        .receive(Some(Duration::from_millis(10)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    closing.await.unwrap();
    assert!(
        d.ack().await.unwrap(),
        "a delivery still settles on a closed handle"
    );
    // A deadline: open until the future runs, closed once it finished.
    let q = c
        .reliable_queue("within", ReliableQueueOptions::default())
        .unwrap();
    let closing = q.close_within(Some(Duration::from_secs(1)));
    assert!(q.stats().await.is_ok(), "not closed before it runs");
    closing.await.unwrap();
    assert_eq!(q.stats().await.unwrap_err().kind(), ErrorKind::Closed);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn receive_many_takes_a_batch_and_ack_many_settles_it() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("batch", named(30_000, 5)).unwrap();
    q.offer_all((0..25).map(|i| (format!("m{i}"), Duration::ZERO, None)))
        .await
        .unwrap();
    let first = q.receive_many(10, WAIT).await.unwrap();
    assert_eq!(first.len(), 10);
    let now = server_ms(&c).await;
    assert!(first
        .iter()
        .all(|d| (d.deadline() - now - 30_000).abs() < 1000));
    let rest = q.receive_many(100, WAIT).await.unwrap();
    assert_eq!(rest.len(), 15);
    let all: Vec<_> = first.into_iter().chain(rest).collect();
    assert!(q.ack_many(&all).await.unwrap().into_iter().all(|a| a));
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    assert!(q
        .receive_many(5, Some(Duration::from_millis(50)))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        q.receive_many(0, WAIT).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ack_batch_tells_each_delivery_apart_and_deletes_only_what_it_acked() {
    // One script call acks a batch with one XDEL, one ZREM and one HDEL for all: what it
    // says per delivery, and what it removes, must still be per delivery.
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("ackbatch", named(30_000, 5)).unwrap();
    let ids: Vec<String> = (0..6).map(|i| format!("id{i}")).collect();
    q.offer_all(
        ids.iter()
            .map(|id| (id.as_bytes(), Duration::ZERO, Some(id.as_str()))),
    )
    .await
    .unwrap();
    let got = q.receive_many(5, WAIT).await.unwrap();
    assert_eq!(got.len(), 5);
    // Two end before the batch: one acked, one nacked (it is ready again, attempt 2).
    assert!(got[0].ack().await.unwrap());
    assert!(got[1].nack(Some(Duration::ZERO)).await.unwrap());
    let mut batch = got.clone();
    batch.push(got[4].clone()); // the same delivery twice in one batch
    let acked = q.ack_many(&batch).await.unwrap();
    assert_eq!(acked, vec![false, false, true, true, true, false]);
    assert_eq!(
        q.lost_leases(),
        0,
        "no lease was lost: one delivery came twice"
    );
    // Left: m1 (nacked, ready) and m5 (never received); nothing in flight.
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.in_flight, s.delayed), (2, 0, 0), "{s:?}");
    let keys = q.keys().clone();
    assert_eq!(server.cli(&["XLEN", &keys.ready]), "2");
    assert_eq!(
        server.cli(&["HLEN", &keys.ids]),
        "2",
        "the acked ids are forgotten"
    );
    assert_eq!(server.cli(&["ZCARD", "{dq:ackbatch}:leases"]), "0");
    let rest = q.receive_many(10, WAIT).await.unwrap();
    let mut ids: Vec<_> = rest.iter().map(|d| (d.id.clone(), d.attempt)).collect();
    ids.sort();
    assert_eq!(ids, vec![("id1".to_string(), 2), ("id5".to_string(), 1)]);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_has_every_handed_over_ack_landed_before_it_returns() {
    // A worker hands its ack to the batcher and goes on: the consume call (and the
    // graceful close) must still return only after those acks landed.
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("acklanded", named(30_000, 5)).unwrap();
    let n = 3000u32;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        q.offer_all(
            chunk
                .iter()
                .map(|i| (format!("m{i}"), Duration::ZERO, None)),
        )
        .await
        .unwrap();
    }
    let handled = Arc::new(AtomicU32::new(0));
    let consumer = {
        let (q, handled) = (q.clone(), handled.clone());
        tokio::spawn(async move {
            q.consume(
                move |_d| {
                    let handled = handled.clone();
                    async move {
                        handled.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, String>(())
                    }
                },
                50,
            )
            .await
        })
    };
    assert!(
        common::eventually(Duration::from_secs(60), || async {
            handled.load(Ordering::SeqCst) == n
        })
        .await,
        "handled {} of {n}",
        handled.load(Ordering::SeqCst)
    );
    q.close_gracefully(Duration::from_secs(10)).await.unwrap();
    consumer.await.unwrap().unwrap();
    let check = c
        .reliable_queue("acklanded", ReliableQueueOptions::default())
        .unwrap();
    assert_eq!(check.stats().await.unwrap(), ReliableStats::default());
    assert_eq!(handled.load(Ordering::SeqCst), n, "none handled twice");
    assert_eq!(q.lost_leases(), 0);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn offers_tell_created_from_deduplicated_and_acked_ids_can_be_remembered() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let opts = ReliableQueueOptions {
        idempotency_retention: Some(Duration::from_secs(60)),
        ..named(30_000, 5)
    };
    let q = c.reliable_queue("idem", opts).unwrap();
    let first = q
        .offer_with_outcome("pay", Duration::ZERO, Some("invoice-7"))
        .await
        .unwrap();
    assert!(first.created);
    let again = q
        .offer_with_outcome("pay", Duration::ZERO, Some("invoice-7"))
        .await
        .unwrap();
    assert_eq!((again.id.as_str(), again.created), ("invoice-7", false));
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert!(d.ack().await.unwrap());
    // The producer retries after the work was done: still de-duplicated.
    let retry = q
        .offer_with_outcome("pay", Duration::ZERO, Some("invoice-7"))
        .await
        .unwrap();
    assert!(!retry.created);
    assert!(q
        .receive(Some(Duration::from_millis(100)))
        .await
        .unwrap()
        .is_none());

    // Without the retention an acked id is forgotten.
    let plain = c.reliable_queue("plain", named(30_000, 5)).unwrap();
    plain.offer("a", Duration::ZERO, Some("k")).await.unwrap();
    assert!(plain
        .receive(WAIT)
        .await
        .unwrap()
        .unwrap()
        .ack()
        .await
        .unwrap());
    assert!(
        plain
            .offer_with_outcome("a", Duration::ZERO, Some("k"))
            .await
            .unwrap()
            .created
    );
    c.close();
}

/// The retentions end on time with no transfer task running: an acked id is offered anew
/// once its idempotency retention is over, and a dead letter past its retention is neither
/// listed, nor counted, nor requeued.
#[tokio::test(flavor = "multi_thread")]
async fn retentions_end_on_time_without_a_transfer_task() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let opts = ReliableQueueOptions {
        idempotency_retention: Some(Duration::from_millis(300)),
        dead_letter_retention: Some(Duration::from_millis(300)),
        scheduler: delayq::SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
        ..named(30_000, 1)
    };
    let q = c.reliable_queue("retained", opts).unwrap();
    q.offer("done", Duration::ZERO, Some("k")).await.unwrap();
    assert!(q.receive(WAIT).await.unwrap().unwrap().ack().await.unwrap());
    let acked_at = server_ms(&c).await;
    q.offer("dies", Duration::ZERO, Some("d")).await.unwrap();
    assert!(q
        .receive(WAIT)
        .await
        .unwrap()
        .unwrap()
        .nack(None)
        .await
        .unwrap());
    let again = q.offer_with_outcome("done", Duration::ZERO, Some("k"));
    assert!(!again.await.unwrap().created, "within the retention");
    assert_eq!(q.stats().await.unwrap().dead, 1);

    let past = || async { server_ms(&c).await > acked_at + 400 };
    assert!(common::eventually(Duration::from_secs(5), past).await);
    let again = q.offer_with_outcome("done", Duration::ZERO, Some("k"));
    assert!(again.await.unwrap().created, "past the retention");
    assert_eq!(q.stats().await.unwrap().dead, 0);
    assert!(q.dead_letters(10).await.unwrap().is_empty());
    assert_eq!(q.requeue_dead(Some(&["d".to_owned()])).await.unwrap(), 0);
    let d = q.receive(WAIT).await.unwrap().expect("the new offer");
    assert_eq!((d.id.as_str(), d.payload.as_slice()), ("k", &b"done"[..]));
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_keep_every_death_and_requeue_spares_live_ids() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("graves", named(30_000, 1)).unwrap();
    let lives = ["first life", "second life", "third life"];
    for payload in lives {
        q.offer(payload, Duration::ZERO, Some("x")).await.unwrap();
        let d = q.receive(WAIT).await.unwrap().unwrap();
        assert!(d.nack(None).await.unwrap());
        // Each death in a millisecond of its own: dead letters come in no particular
        // order, and they are put in order by `died_at` below (three deaths took under a
        // millisecond on a fast machine, and the test failed 6 runs in 10 there).
        let died = server_ms(&c).await;
        let later = || async { server_ms(&c).await > died };
        assert!(common::eventually(Duration::from_secs(5), later).await);
    }
    let mut dead = q.dead_letters(10).await.unwrap();
    dead.sort_by_key(|d| d.died_at);
    assert_eq!(dead.len(), 3, "every death kept");
    assert!(dead.iter().all(|d| d.id == "x"));
    let payloads: Vec<_> = dead.iter().map(|d| d.payload.as_slice()).collect();
    assert_eq!(payloads, lives.map(str::as_bytes));

    // A live message holds the id now: requeueing the dead one would make two of it.
    q.offer("alive", Duration::from_secs(3600), Some("x"))
        .await
        .unwrap();
    assert_eq!(q.requeue_dead(Some(&["x".to_owned()])).await.unwrap(), 0);
    assert_eq!(q.stats().await.unwrap().delayed, 1);
    assert!(q.cancel("x").await.unwrap());
    // With the id free again, the latest death is requeued; once that one is done, the
    // death before it, by id or with all the others.
    for (i, life) in lives.iter().rev().enumerate() {
        let ids = ["x".to_owned()];
        let requeued = q.requeue_dead((i % 2 == 0).then_some(&ids[..])).await;
        assert_eq!(requeued.unwrap(), 1, "{life}");
        assert_eq!(q.requeue_dead(None).await.unwrap(), 0, "x lives: {life}");
        let d = q.receive(WAIT).await.unwrap().unwrap();
        assert_eq!(
            (d.id.as_str(), d.payload.as_slice()),
            ("x", life.as_bytes())
        );
        assert!(d.ack().await.unwrap());
        assert_eq!(q.stats().await.unwrap().dead, 2 - i as u64);
    }
    assert!(q.dead_letters(10).await.unwrap().is_empty());
    assert_eq!(server.cli(&["EXISTS", "{dq:graves}:dead_earlier"]), "0");
    assert_eq!(q.purge_dead().await.unwrap(), 0);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_earlier_dead_letter_that_takes_the_place_of_a_requeued_one_keeps_its_retention() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let opts = ReliableQueueOptions {
        dead_letter_retention: Some(Duration::from_secs(3600)),
        ..named(30_000, 1)
    };
    let q = c.reliable_queue("kept", opts).unwrap();
    for payload in ["first", "second"] {
        q.offer(payload, Duration::ZERO, Some("x")).await.unwrap();
        let d = q.receive(WAIT).await.unwrap().unwrap();
        assert!(d.nack(None).await.unwrap());
    }
    let mut dead = q.dead_letters(10).await.unwrap();
    dead.sort_by_key(|d| d.died_at);
    assert_eq!(q.requeue_dead(None).await.unwrap(), 1);
    let d = q.receive(WAIT).await.unwrap().unwrap();
    assert_eq!(d.payload, b"second");
    assert!(d.ack().await.unwrap());
    let until = ["ZRANGE", "{dq:kept}:dead_until", "0", "-1", "WITHSCORES"];
    let expected = format!("x\n{}", dead[0].died_at + 3_600_000);
    assert_eq!(
        server.cli(&until),
        expected,
        "the first death's end, under its id"
    );
    assert_eq!(q.requeue_dead(None).await.unwrap(), 1);
    assert_eq!(server.cli(&["ZCARD", "{dq:kept}:dead_until"]), "0");
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_typed_key_fails_a_call_before_it_writes() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("typed", named(30_000, 5)).unwrap();
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    server.cli(&["SET", "{dq:typed}:leases", "oops"]);
    assert_eq!(d.nack(None).await.unwrap_err().kind(), ErrorKind::WrongType);
    assert_eq!(d.ack().await.unwrap_err().kind(), ErrorKind::WrongType);
    // Nothing was lost: the delivery is still in flight.
    server.cli(&["DEL", "{dq:typed}:leases"]);
    assert_eq!(q.stats().await.unwrap().in_flight, 1);
    assert!(d.ack().await.unwrap());
    // stats reads counters, yet says when a key that holds messages has another type.
    for key in ["{dq:typed}:near", "{dq:typed}:wheel", "{dq:typed}:wheel2"] {
        server.cli(&["SET", key, "oops"]);
        let err = q.stats().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{key}: {err}");
        assert!(
            err.to_string()
                .contains(&format!("key {key} holds a string")),
            "{err}"
        );
        server.cli(&["DEL", key]);
    }
    assert_eq!(q.stats().await.unwrap().in_flight, 0);
    // receive reads the ready stream and the settings outside a script: it names them too.
    for (key, was) in [
        ("{dq:typed}:ready", "stream"),
        ("{dq:typed}:settings", "hash"),
    ] {
        server.cli(&["RENAME", key, "kept"]);
        server.cli(&["SET", key, "oops"]);
        for err in [
            q.receive(Some(Duration::ZERO)).await.unwrap_err(),
            q.receive_many(5, Some(Duration::from_millis(200)))
                .await
                .unwrap_err(),
        ] {
            assert_eq!(err.kind(), ErrorKind::WrongType, "{key}: {err}");
            let named = format!("key {key} holds a string, not a {was}");
            assert!(err.to_string().contains(&named), "{err}");
        }
        server.cli(&["DEL", key]);
        server.cli(&["RENAME", "kept", key]);
    }
    c.close();
}

/// The coarser wheels and the settings are keys a script computes, not ones it is given:
/// each call that may write checks them first too, so that a WRONGTYPE never comes after a
/// write (Redis keeps what a script wrote before an error) and always names its key.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_typed_wheel_or_settings_fails_every_call_before_it_writes() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("outer", named(30_000, 5)).unwrap();
    // A message in each coarser wheel: level 1 (minutes), 2 (hours), 3 (days).
    for (id, secs) in [("m", 120), ("h", 7_200), ("d", 3 * 86_400)] {
        q.offer(id, Duration::from_secs(secs), Some(id))
            .await
            .unwrap();
    }
    q.offer("r", Duration::ZERO, None).await.unwrap();
    let d = q.receive(WAIT).await.unwrap().unwrap();
    let snapshot = || {
        let mut keys: Vec<String> = server
            .cli(&["KEYS", "*"])
            .lines()
            .map(String::from)
            .collect();
        keys.sort();
        let dumps: Vec<String> = keys.iter().map(|k| server.cli(&["DUMP", k])).collect();
        (keys, dumps)
    };
    for key in ["wheel1", "wheel2", "wheel3", "settings"].map(|k| format!("{{dq:outer}}:{k}")) {
        server.cli(&["RENAME", &key, "kept"]);
        server.cli(&["SET", &key, "oops"]);
        let before = snapshot();
        let hour = Duration::from_secs(3_600);
        let failed = [
            ("cancel m", q.cancel("m").await.map(drop)),
            ("cancel h", q.cancel("h").await.map(drop)),
            ("cancel d", q.cancel("d").await.map(drop)),
            ("reschedule h", q.reschedule("h", hour).await.map(drop)),
            (
                "reschedule d",
                q.reschedule("d", Duration::ZERO).await.map(drop),
            ),
            ("offer", q.offer("new", hour, None).await.map(drop)),
            (
                "offer id",
                q.offer("new", 3 * hour, Some("new")).await.map(drop),
            ),
            ("nack", d.nack(Some(hour)).await.map(drop)),
            ("requeue_dead", q.requeue_dead(None).await.map(drop)),
            ("stats", q.stats().await.map(drop)),
        ];
        for (call, outcome) in failed {
            let err = outcome.expect_err(call);
            assert_eq!(err.kind(), ErrorKind::WrongType, "{key} {call}: {err}");
            let named = format!("key {key} holds a string");
            assert!(err.to_string().contains(&named), "{key} {call}: {err}");
        }
        assert!(before == snapshot(), "{key}: a failing call wrote");
        server.cli(&["DEL", &key]);
        server.cli(&["RENAME", "kept", &key]);
    }
    // A stray key of another type where a finer bucket of a message's time would be (one
    // no wheel names, so the transfer never meets it) hides nothing: calls by id look past it.
    let mid = q.offer("g", Duration::from_secs(90), None).await.unwrap(); // level 1
    let born = u64::from_str_radix(mid.split('-').next().unwrap(), 16).unwrap();
    let stray = format!("{{dq:outer}}:b:{born:x}"); // its level-0 bucket, not there yet
    server.cli(&["SET", &stray, "oops"]);
    let again = q
        .offer_with_outcome("g", Duration::from_secs(3_600), Some(&mid))
        .await
        .unwrap();
    assert!(!again.created, "the stray key hid the waiting message");
    assert!(
        q.cancel(&mid).await.unwrap(),
        "the stray key hid the waiting message"
    );
    server.cli(&["DEL", &stray]);
    // Everything is where it was.
    assert!(q.cancel("d").await.unwrap());
    assert!(q.reschedule("h", Duration::ZERO).await.unwrap());
    assert!(d.ack().await.unwrap());
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.delayed + stats.ready, stats.in_flight),
        (2, 0),
        "{stats:?}"
    );
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn consumers_leave_the_group_when_their_handle_closes() {
    let server = RedisServer::start();
    let consumers = || {
        server
            .cli(&["XINFO", "CONSUMERS", "{dq:members}:ready", "delayq"])
            .lines()
            .filter(|l| l.starts_with("delayq-"))
            .count()
    };
    for _ in 0..5 {
        let c = Client::connect(&server.url()).await.unwrap();
        let q = c.reliable_queue("members", named(30_000, 5)).unwrap();
        q.offer("x", Duration::ZERO, None).await.unwrap();
        assert!(q.receive(WAIT).await.unwrap().unwrap().ack().await.unwrap());
        q.close();
        assert!(common::eventually(Duration::from_secs(5), || async { consumers() == 0 }).await);
        c.close();
    }
    // A consumer that holds a delivery stays (its delivery must come back by its lease).
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("members", named(30_000, 5)).unwrap();
    q.offer("x", Duration::ZERO, None).await.unwrap();
    let _held = q.receive(WAIT).await.unwrap().unwrap();
    q.close();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(consumers(), 1);
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_typed_bucket_is_set_aside_not_a_queue_wide_stop() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("buckets", named(30_000, 5)).unwrap();
    // A message an hour ahead waits in a bucket list; something overwrites that key.
    q.offer("doomed", Duration::from_secs(3600), None)
        .await
        .unwrap();
    let keys = server.cli(&["KEYS", "{dq:buckets}:b*:*"]);
    let bucket = keys.lines().next().expect("a bucket key").to_owned();
    server.cli(&["DEL", &bucket]);
    server.cli(&["SET", &bucket, "not a list"]);
    // Offers into that bucket and everything else go on; the key is moved aside.
    q.offer("same bucket", Duration::from_secs(3600), None)
        .await
        .unwrap();
    let aside = bucket.replacen("{dq:buckets}:", "{dq:buckets}:corrupt:", 1);
    assert_eq!(server.cli(&["TYPE", &aside]), "string");
    assert_eq!(server.cli(&["TYPE", &bucket]), "list");
    q.offer("soon", Duration::from_millis(200), None)
        .await
        .unwrap();
    let d = q.receive(WAIT).await.unwrap().expect("delivered");
    assert_eq!(d.payload, b"soon");
    assert!(d.ack().await.unwrap());
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handle_that_names_no_settings_does_not_store_them() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    // A consumer starts first and names nothing: it works on the defaults, stores nothing.
    let consumer = c
        .reliable_queue("late-producer", ReliableQueueOptions::default())
        .unwrap();
    assert!(consumer
        .receive(Some(Duration::from_millis(50)))
        .await
        .unwrap()
        .is_none());
    assert_eq!(server.cli(&["EXISTS", "{dq:late-producer}:settings"]), "0");
    // The producer that names settings then stores them, and the consumer uses them.
    let producer = c.reliable_queue("late-producer", named(40_000, 3)).unwrap();
    producer.offer("x", Duration::ZERO, None).await.unwrap();
    let d = consumer.receive(WAIT).await.unwrap().unwrap();
    let left = d.deadline() - server_ms(&c).await;
    assert!((39_000..=40_100).contains(&left), "{left}");
    assert_eq!(consumer.settings().await.unwrap().max_attempts, 3);
    c.close();
}

/// `ack_many` with a delivery of another queue acks nothing: the receipt (a stream entry
/// id, which two queues may share when they got a message in the same millisecond) would
/// ack this queue's own message, never processed.
#[tokio::test(flavor = "multi_thread")]
async fn ack_many_refuses_a_delivery_of_another_queue() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let a = c.reliable_queue("xa", named(30_000, 5)).unwrap();
    let b = c.reliable_queue("xb", named(30_000, 5)).unwrap();
    a.offer("A", Duration::ZERO, Some("A1")).await.unwrap();
    b.offer("B", Duration::ZERO, Some("B1")).await.unwrap();
    let da = a.receive(WAIT).await.unwrap().unwrap();
    let db = b.receive(WAIT).await.unwrap().unwrap();
    let err = a.ack_many(&[da.clone(), db.clone()]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("\"xb\""), "{err}");
    // Nothing was acked, in either queue, and no lease counts as lost.
    assert_eq!(a.stats().await.unwrap().in_flight, 1);
    assert_eq!(b.stats().await.unwrap().in_flight, 1);
    assert!(da.ack().await.unwrap());
    assert!(db.ack().await.unwrap());
    assert_eq!(a.lost_leases(), 0);
    c.close();
}

/// A producer that retries with the id its first offer returned (a generated one) gets the
/// same message back, not a second one with the same id, wherever the first one waits:
/// `near`, a bucket of each level of the wheel, ready, in flight; and in each shard.
#[tokio::test(flavor = "multi_thread")]
async fn offering_again_with_a_generated_id_creates_nothing() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    for shards in [1, 4] {
        let opts = ReliableQueueOptions {
            shards: Some(shards),
            scheduler: delayq::SchedulerOptions {
                enabled: false,
                ..Default::default()
            },
            ..named(30_000, 5)
        };
        let q = c.reliable_queue(&format!("regen-{shards}"), opts).unwrap();
        let delays = [1, 30, 600, 7_200, 172_800].map(Duration::from_secs);
        let mut ids = Vec::new();
        for d in delays {
            let first = q.offer_with_outcome("first", d, None).await.unwrap();
            assert!(first.created);
            let again = q
                .offer_with_outcome("again", d, Some(&first.id))
                .await
                .unwrap();
            assert_eq!(
                (again.id.as_str(), again.created),
                (first.id.as_str(), false),
                "delay {d:?}"
            );
            ids.push(first.id);
        }
        assert_eq!(q.stats().await.unwrap().delayed, delays.len() as u64);
        // Ready, then in flight.
        let ready = q.offer("now", Duration::ZERO, None).await.unwrap();
        assert!(
            !q.offer_with_outcome("x", Duration::ZERO, Some(&ready))
                .await
                .unwrap()
                .created
        );
        let d = q.receive(WAIT).await.unwrap().unwrap();
        assert_eq!(d.id, ready);
        assert!(
            !q.offer_with_outcome("x", Duration::from_secs(5), Some(&ready))
                .await
                .unwrap()
                .created
        );
        assert!(d.ack().await.unwrap());
        // Each id names one message: one cancel each finds it, a second finds nothing.
        for id in &ids {
            assert!(q.cancel(id).await.unwrap(), "{id}");
            assert!(!q.cancel(id).await.unwrap(), "{id}");
        }
        assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
        // An id of that form that names no message creates one, found by that id.
        let made_up = format!("{:x}-0123456789abcdef", 1u64 << 20);
        assert!(
            q.offer_with_outcome("m", Duration::from_secs(60), Some(&made_up))
                .await
                .unwrap()
                .created
        );
        assert!(q.cancel(&made_up).await.unwrap());
    }
    c.close();
}
