//! Silent partitions: Toxiproxy's `timeout` toxic with timeout 0 on both directions.
//! Connections stay open and hear nothing, new ones are accepted and hear nothing; when
//! the toxic is removed they pass data again, but what was sent meanwhile is gone, so a
//! request/reply connection kept through the partition is out of step. The client must
//! have discarded its connections by then: each test checks on the server (the proxy
//! connects to 127.0.0.2, so `CLIENT LIST`'s `laddr` marks proxied connections) that every
//! connection the client had when the partition began was closed within the detection
//! bound, and that the client works correctly afterwards.

use std::cell::Cell;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use delayq::{Client, ClientOptions, ErrorKind, SchedulerOptions};
use delayq_faults::observe::{ClientInfo, Observer};
use delayq_faults::tally::{check_counts, report, Tally};
use delayq_faults::workers::{offer_delayed, offer_reliable, spawn_receiver, spawn_taker, value};
use delayq_faults::{ms, wait_for, Checks, DETECT, MARGIN, PARTITION};
use tokio_util::sync::CancellationToken;

use crate::{no_scheduler, reliable_opts, timed, until, warm_up, Proxied, SLACK};

/// Longest a test lets one call run before calling it hung.
const HUNG: Duration = Duration::from_secs(15);

/// Watches, from the start of a partition, for every proxied connection open at that
/// moment to be closed. Returns how long that took (`None`: not within `limit`) and the
/// connections still open at the end.
async fn watch_old_connections(
    observer: &Observer,
    before: &[ClientInfo],
    limit: Duration,
) -> (Option<Duration>, Vec<ClientInfo>) {
    let start = Instant::now();
    let mut left = before.to_vec();
    loop {
        let now: HashSet<u64> = observer.clients().await.iter().map(|c| c.id).collect();
        left.retain(|c| now.contains(&c.id));
        if left.is_empty() {
            return (Some(start.elapsed()), left);
        }
        if start.elapsed() >= limit {
            return (None, left);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn describe(clients: &[ClientInfo]) -> String {
    if clients.is_empty() {
        return "none".to_owned();
    }
    clients
        .iter()
        .map(ClientInfo::describe)
        .collect::<Vec<_>>()
        .join(",")
}

/// Outcome of a call with a timeout during a partition, checked against SPEC section 10:
/// it returns within its timeout plus the margin, with no value, or a timeout or
/// connection error.
fn check_timed_call<T: std::fmt::Debug>(
    checks: &mut Checks,
    what: &str,
    limit: Duration,
    (took, out): &(Duration, Option<delayq::Result<Option<T>>>),
) {
    match out {
        None => checks.fail(format!(
            "{what} did not return within {HUNG:?} during a silent partition (promise: within {limit:?} + {MARGIN:?})"
        )),
        Some(r) => {
            checks.check(
                *took <= limit + MARGIN,
                format!("{what} returned after {took:?} during a silent partition (promise: within {limit:?} + {MARGIN:?})"),
            );
            match r {
                Ok(None) => {}
                Err(e) if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Connection) => {}
                other => checks.fail(format!("{what} during a silent partition gave {other:?}")),
            }
        }
    }
}

/// A client through the proxy whose commands wait 2 s for a reply.
async fn client_with_2s_replies(env: &Proxied) -> Client {
    let mut opts = ClientOptions::new(env.proxy.url());
    opts.response_timeout = Duration::from_secs(2);
    Client::connect_with(opts)
        .await
        .expect("connect through the proxy")
}

/// Polls `fut` on this thread as a host's blocking call does (Python's, the JVM's): its
/// requests go over this thread's own connection.
fn block_as_host<T>(
    runtime: &tokio::runtime::Handle,
    fut: impl std::future::Future<Output = T>,
) -> T {
    let mut fut = std::pin::pin!(fut);
    loop {
        let slice = Duration::from_secs(60);
        if let Some(out) = delayq::host::blocking::poll_for(runtime, fut.as_mut(), slice) {
            return out;
        }
    }
}

/// `call` made by a host's thread of its own ([`block_as_host`]) once `go` says so; with
/// `warm`, the thread makes that call first (so it has a connection of its own), then says
/// `ready`. Returns how long `call` took, and its output.
fn host_call<W, F>(
    warm: Option<W>,
    ready: tokio::sync::oneshot::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
    call: F,
) -> std::thread::JoinHandle<(Duration, F::Output)>
where
    W: std::future::Future + Send + 'static,
    F: std::future::Future + Send + 'static,
    F::Output: Send,
{
    let runtime = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        if let Some(warm) = warm {
            block_as_host(&runtime, warm);
        }
        let _ = ready.send(());
        go.recv().expect("the test ended");
        let start = Instant::now();
        let out = block_as_host(&runtime, call);
        (start.elapsed(), out)
    })
}

/// Blocking calls with a timeout (`take(2 s)`, `receive(2 s)`) and a command under a 2 s
/// response timeout (`size`) return within their time plus the margin during a silent
/// partition; after it, values offered directly are taken through the proxy within the
/// detection bound, and commands answer correctly (not out of step).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn partition_calls_with_a_timeout_return_in_time() {
    let fault = "partition-timeout-calls";
    let env = Proxied::start().await;
    let client = client_with_2s_replies(&env).await;
    let direct = Client::connect(&env.redis.url())
        .await
        .expect("connect directly");
    let dq = client.delayed_queue("pt-delayed").unwrap();
    let rq = client
        .reliable_queue("pt-reliable", reliable_opts(Duration::from_secs(5), true))
        .unwrap();
    let probe_q = client
        .delayed_queue_with("pt-probe", no_scheduler())
        .unwrap();
    let ddq = direct.delayed_queue("pt-delayed").unwrap();
    let drq = direct
        .reliable_queue("pt-reliable", reliable_opts(Duration::from_secs(5), true))
        .unwrap();
    warm_up((&dq, &rq), (&ddq, &drq)).await;
    // `take(0)` on a client with the default 5 s response timeout: its bound is the
    // margin, not that timeout.
    let plain = Client::connect(&env.proxy.url())
        .await
        .expect("connect through the proxy");
    let pq = plain
        .delayed_queue_with("pt-delayed", no_scheduler())
        .unwrap();
    assert_eq!(pq.take(Some(Duration::ZERO)).await.unwrap(), None);
    // A reliable handle whose settings were never read: its first receive reads them
    // within the call's bound too (not the client's 5 s response timeout).
    let fresh = plain
        .reliable_queue("pt-fresh", reliable_opts(Duration::from_secs(5), false))
        .unwrap();
    // Another one, whose first calls (with no timeout of their own) are made together:
    // they share one reading of the settings, and its failure, rather than each waiting
    // out the client's 5 s timeout in turn.
    let crowded = plain
        .reliable_queue("pt-crowded", reliable_opts(Duration::from_secs(5), false))
        .unwrap();
    // Fresh handles' first receive(1 s) as a host's blocking call makes it, on a thread
    // whose requests go over a connection of its own: one thread that has no connection
    // yet (it connects), one whose connection is already open (its read waits).
    let mut host_calls = Vec::new();
    for (what, warm) in [
        ("with no connection yet", false),
        ("with its connection open", true),
    ] {
        let c = Client::connect(&env.proxy.url())
            .await
            .expect("connect through the proxy");
        let q = c
            .reliable_queue("pt-host", reliable_opts(Duration::from_secs(5), false))
            .unwrap();
        let warm_q = c
            .delayed_queue_with("pt-host-warm", no_scheduler())
            .unwrap();
        let warm = warm.then_some(async move { warm_q.size().await.expect("warm-up size") });
        let (go, wait_for_go) = std::sync::mpsc::channel();
        let (ready, warmed) = tokio::sync::oneshot::channel();
        let receive = async move {
            q.receive(Some(Duration::from_secs(1)))
                .await
                .map(|d| d.map(|d| d.id))
        };
        let thread = host_call(warm, ready, wait_for_go, receive);
        warmed.await.expect("a host thread's warm-up failed");
        host_calls.push((what, go, c, thread));
    }
    let mut checks = Checks::default();

    env.proxy.partition();
    for (_, go, _, _) in &host_calls {
        go.send(()).expect("a host thread ended early");
    }
    let crowd: Vec<_> = (0..6)
        .map(|_| {
            let q = crowded.clone();
            tokio::spawn(async move { timed(HUNG, async { q.stats().await.map(Some) }).await })
        })
        .collect();
    let two = Duration::from_secs(2);
    let one = Duration::from_secs(1);
    let (take, receive, size, take_0, first_receive) = tokio::join!(
        timed(HUNG, dq.take(Some(two))),
        timed(HUNG, async {
            rq.receive(Some(two)).await.map(|d| d.map(|d| d.id))
        }),
        timed(HUNG, async { dq.size().await.map(Some) }),
        timed(HUNG, pq.take(Some(Duration::ZERO))),
        timed(HUNG, async {
            fresh.receive(Some(one)).await.map(|d| d.map(|d| d.id))
        }),
    );
    check_timed_call(
        &mut checks,
        "a fresh handle's first receive(Some(1 s))",
        one,
        &first_receive,
    );
    check_timed_call(&mut checks, "take(Some(0))", Duration::ZERO, &take_0);
    for (what, _, _client, thread) in host_calls {
        let (took, out) = tokio::task::spawn_blocking(move || thread.join())
            .await
            .expect("join a host thread")
            .expect("a host thread panicked");
        let what = format!("a fresh handle's first receive(Some(1 s)) on a host's thread {what}");
        check_timed_call(&mut checks, &what, one, &(took, Some(out)));
    }
    for (i, call) in crowd.into_iter().enumerate() {
        let stats = call.await.expect("a stats task panicked");
        let what = format!("first call {i} of 6 together (stats(), 5 s response timeout)");
        check_timed_call(&mut checks, &what, Duration::from_secs(5), &stats);
    }
    check_timed_call(&mut checks, "take(Some(2 s))", two, &take);
    check_timed_call(&mut checks, "receive(Some(2 s))", two, &receive);
    check_timed_call(
        &mut checks,
        "size() with a 2 s response timeout",
        two,
        &size,
    );
    let stale = env.observer.proxied_clients().await;
    env.proxy.heal();
    let healed = Instant::now();

    // Later calls through the proxy work: values offered on the direct handles are taken.
    let (td, tr) = (Tally::new(env.clock), Tally::new(env.clock));
    offer_delayed(&ddq, &td, b"after-heal", Duration::ZERO).await;
    offer_reliable(&drq, &tr, b"after-heal", Duration::ZERO).await;
    let stop = CancellationToken::new();
    let consumers = [
        spawn_taker(dq.clone(), td.clone(), Some(two), stop.clone()),
        spawn_receiver(rq.clone(), tr.clone(), Some(two), stop.clone()),
    ];
    let delivered = wait_for(DETECT + SLACK, Duration::from_millis(20), || async {
        td.all_delivered() && tr.all_delivered()
    })
    .await;
    // Commands answer correctly: an offer an hour ahead (a different hour each time, so
    // an answer meant for another call shows) returns its own due time.
    let mut probe = 0u64;
    let probing = Instant::now();
    let answered = wait_for(DETECT + SLACK, Duration::from_millis(10), || {
        probe += 1;
        let (q, clock, n) = (&probe_q, env.clock, probe);
        async move {
            let delay = Duration::from_secs(3600 * n);
            let before = clock.now_ms();
            match q.offer(format!("probe-{n}"), delay).await {
                Ok(due) => (due - before - delay.as_millis() as i64).abs() < 2000,
                Err(_) => false,
            }
        }
    })
    .await;
    stop.cancel();
    for c in consumers {
        let _ = c.await;
    }

    checks.check(
        delivered.is_some(),
        format!(
            "values offered after the partition were not taken through the proxy within {:?}",
            DETECT + SLACK
        ),
    );
    checks.check(
        answered.is_some(),
        format!("commands through the proxy did not answer correctly within {:?} of the heal (a connection kept through the partition is out of step)", DETECT + SLACK),
    );
    let (sd, sr) = (td.summary(), tr.summary());
    check_counts(&mut checks, "delayed", &sd, 0);
    check_counts(&mut checks, "reliable", &sr, sr.acks_failed as usize);
    let longest = [take.0, receive.0, size.0].into_iter().max();
    let recover = td
        .last_receipt()
        .max(tr.last_receipt())
        .map(|t| t.duration_since(healed));
    let extra = [
        ("take_ms", ms(take.1.as_ref().map(|_| take.0))),
        ("receive_ms", ms(receive.1.as_ref().map(|_| receive.0))),
        ("size_ms", ms(size.1.as_ref().map(|_| size.0))),
        (
            "commands_ok_ms",
            ms(answered.map(|d| probing.duration_since(healed) + d)),
        ),
        ("proxied_at_heal", describe(&stale)),
    ];
    let total = sd.merge(&sr);
    report(fault, &total, longest, recover, &extra);
    checks.finish(fault);
}

/// Waits with no timeout (`take(None)`, `receive(None)`) through a 12 s silent partition:
/// the client notices the dead connections within 10 s (it closes every connection it
/// had), and after the heal a value offered on a direct connection is taken within the
/// detection bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn partition_waits_without_timeout_wait_again_on_fresh_connections() {
    let fault = "partition-wait-forever";
    let env = Proxied::start().await;
    let client = Client::connect(&env.proxy.url())
        .await
        .expect("connect through the proxy");
    let direct = Client::connect(&env.redis.url())
        .await
        .expect("connect directly");
    let dq = client.delayed_queue("pw-delayed").unwrap();
    let rq = client
        .reliable_queue("pw-reliable", reliable_opts(Duration::from_secs(5), true))
        .unwrap();
    let ddq = direct.delayed_queue("pw-delayed").unwrap();
    let drq = direct
        .reliable_queue("pw-reliable", reliable_opts(Duration::from_secs(5), true))
        .unwrap();
    warm_up((&dq, &rq), (&ddq, &drq)).await;
    let mut checks = Checks::default();

    let (td, tr) = (Tally::new(env.clock), Tally::new(env.clock));
    let stop = CancellationToken::new();
    let consumers = [
        spawn_taker(dq.clone(), td.clone(), None, stop.clone()),
        spawn_receiver(rq.clone(), tr.clone(), None, stop.clone()),
    ];
    // Both waits are blocked on the server before the partition begins.
    let observer = &env.observer;
    let blocked = wait_for(
        Duration::from_secs(5),
        Duration::from_millis(20),
        || async {
            let clients = observer.proxied_clients().await;
            ["blpop", "xreadgroup"].iter().all(|cmd| {
                clients
                    .iter()
                    .any(|c| c.cmd == *cmd && c.flags.contains('b'))
            })
        },
    )
    .await;
    assert!(blocked.is_some(), "the waits did not block on the server");
    let before = env.observer.proxied_clients().await;

    env.proxy.partition();
    let cut = Instant::now();
    let (gone, left) = watch_old_connections(&env.observer, &before, PARTITION).await;
    until(cut + PARTITION).await;
    env.proxy.heal();
    let healed = Instant::now();

    offer_delayed(&ddq, &td, b"after-heal", Duration::ZERO).await;
    offer_reliable(&drq, &tr, b"after-heal", Duration::ZERO).await;
    let delivered = wait_for(DETECT + SLACK, Duration::from_millis(20), || async {
        td.all_delivered() && tr.all_delivered()
    })
    .await;
    stop.cancel();
    for c in consumers {
        c.abort();
    }

    checks.check(
        gone.is_some_and(|g| g <= DETECT),
        format!(
            "connections open when the partition began were not all closed within {DETECT:?} (after {}): still open: {}",
            ms(gone),
            describe(&left)
        ),
    );
    checks.check(
        delivered.is_some(),
        format!(
            "a wait with no timeout did not get a value offered after the partition within {:?} (delayed: {}, reliable: {})",
            DETECT + SLACK,
            td.all_delivered(),
            tr.all_delivered()
        ),
    );
    let (sd, sr) = (td.summary(), tr.summary());
    check_counts(&mut checks, "delayed", &sd, 0);
    check_counts(&mut checks, "reliable", &sr, sr.acks_failed as usize);
    let recover = td
        .last_receipt()
        .max(tr.last_receipt())
        .map(|t| t.duration_since(healed));
    let extra = [
        ("connections_before", before.len().to_string()),
        ("still_open", describe(&left)),
    ];
    let total = sd.merge(&sr);
    report(fault, &total, gone, recover, &extra);
    checks.finish(fault);
}

/// A consumer-only process (through the proxy, its transfer task on) and a producer on a
/// direct connection with its transfer task off: entries come due during a 12 s silent
/// partition, so only the consumer's transfer task can move them. All are delivered
/// within the detection bound after the heal; none lost, none twice, none early.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn partition_during_transfer_delays_nothing_beyond_the_bound() {
    let env = Proxied::start().await;
    let consumer = Client::connect(&env.proxy.url())
        .await
        .expect("connect through the proxy");
    let producer = Client::connect(&env.redis.url())
        .await
        .expect("connect directly");
    let vis = Duration::from_secs(5);
    let cdq = consumer.delayed_queue("tr-delayed").unwrap();
    let crq = consumer
        .reliable_queue("tr-reliable", reliable_opts(vis, true))
        .unwrap();
    let pdq = producer
        .delayed_queue_with("tr-delayed", no_scheduler())
        .unwrap();
    let prq = producer
        .reliable_queue("tr-reliable", reliable_opts(vis, false))
        .unwrap();
    let mut checks = Checks::default();

    let (td, tr) = (Tally::new(env.clock), Tally::new(env.clock));
    let stop = CancellationToken::new();
    let wait = Some(Duration::from_secs(2));
    let consumers = [
        spawn_taker(cdq.clone(), td.clone(), wait, stop.clone()),
        spawn_receiver(crq.clone(), tr.clone(), wait, stop.clone()),
    ];
    // The consumer's transfer task is what moves the producer's entries.
    offer_delayed(&pdq, &td, b"warm", Duration::from_millis(200)).await;
    offer_reliable(&prq, &tr, b"warm", Duration::from_millis(200)).await;
    let warm = wait_for(
        Duration::from_secs(5),
        Duration::from_millis(20),
        || async { td.all_delivered() && tr.all_delivered() },
    )
    .await;
    assert!(
        warm.is_some(),
        "the consumer's transfer task did not move the warm-up entries"
    );

    // Due during the partition: 15 offered just before it, 10 during it.
    for i in 0..15 {
        let delay = Duration::from_millis(1000 + 700 * i as u64);
        offer_delayed(&pdq, &td, &value("d", i, 0), delay).await;
        offer_reliable(&prq, &tr, &value("r", i, 0), delay).await;
    }
    let before = env.observer.proxied_clients().await;
    env.proxy.partition();
    let cut = Instant::now();
    let observe_old = async {
        let (gone, left) = watch_old_connections(&env.observer, &before, PARTITION).await;
        (gone, left)
    };
    let offer_more = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        for i in 0..10 {
            let delay = Duration::from_millis(1000 + 700 * i as u64);
            offer_delayed(&pdq, &td, &value("d-during", i, 0), delay).await;
            offer_reliable(&prq, &tr, &value("r-during", i, 0), delay).await;
        }
    };
    let ((gone, left), ()) = tokio::join!(observe_old, offer_more);
    until(cut + PARTITION).await;
    env.proxy.heal();
    let healed = Instant::now();

    // The transfer task moves everything due within the bound (seen on the server), and
    // the consumers get it.
    let timeout_set = pdq.keys().timeout_set.clone();
    let moved: Cell<Option<Duration>> = Cell::new(None);
    let observer = &env.observer;
    let delivered = wait_for(DETECT + SLACK, Duration::from_millis(50), || {
        let (moved, timeout_set, prq) = (&moved, &timeout_set, &prq);
        let (td, tr) = (&td, &tr);
        async move {
            if moved.get().is_none() {
                let waiting: Option<u64> = observer
                    .query(redis::cmd("ZCARD").arg(timeout_set).to_owned())
                    .await
                    .ok();
                let delayed = prq.stats().await.ok().map(|s| s.delayed);
                if waiting == Some(0) && delayed == Some(0) {
                    moved.set(Some(healed.elapsed()));
                }
            }
            td.all_delivered() && tr.all_delivered()
        }
    })
    .await;
    // Anything still missing gets a last chance, to tell late from lost.
    if delivered.is_none() {
        wait_for(
            Duration::from_secs(10),
            Duration::from_millis(50),
            || async { td.all_delivered() && tr.all_delivered() },
        )
        .await;
    }
    stop.cancel();
    for c in consumers {
        c.abort();
    }
    let moved = moved.get();

    checks.check(
        gone.is_some_and(|g| g <= DETECT),
        format!(
            "connections open when the partition began were not all closed within {DETECT:?} (after {}): still open: {}",
            ms(gone),
            describe(&left)
        ),
    );
    checks.check(
        moved.is_some_and(|m| m <= DETECT + SLACK),
        format!("the transfer task had not moved the entries due during the partition {:?} after the heal (moved after {})", DETECT + SLACK, ms(moved)),
    );
    checks.check(
        delivered.is_some(),
        format!(
            "not everything due during the partition was delivered within {:?} of the heal",
            DETECT + SLACK
        ),
    );
    for (name, tally, reliable) in [
        ("partition-transfer-delayed", &td, false),
        ("partition-transfer-reliable", &tr, true),
    ] {
        let s = tally.summary();
        check_counts(
            &mut checks,
            name,
            &s,
            if reliable { s.acks_failed as usize } else { 0 },
        );
        let recover = tally
            .last_receipt()
            .map(|t| t.saturating_duration_since(healed));
        report(
            name,
            &s,
            gone,
            recover,
            &[("transfer_ms", ms(moved)), ("still_open", describe(&left))],
        );
    }
    checks.finish("partition-transfer");
}

/// The pub/sub connection through a silent partition. It cannot be partitioned alone
/// behind one URL, so the whole proxy is; the consumer's reconcile interval is 60 s, so
/// that only its subscription (and its due-time timer) wakes its transfer task. The
/// subscriber connection is closed within the detection bound, a fresh subscription is
/// made within the bound after the heal, and entries offered after that (the producer's
/// transfer task off) are delivered on time, not at the next reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn partition_of_the_subscriber_is_detected_and_it_resubscribes() {
    let fault = "partition-pubsub";
    let env = Proxied::start().await;
    let consumer = Client::connect(&env.proxy.url())
        .await
        .expect("connect through the proxy");
    let producer = Client::connect(&env.redis.url())
        .await
        .expect("connect directly");
    let slow_reconcile = SchedulerOptions {
        reconcile_interval: Duration::from_secs(60),
        ..SchedulerOptions::default()
    };
    let cdq = consumer
        .delayed_queue_with("ps-delayed", slow_reconcile)
        .unwrap();
    let pdq = producer
        .delayed_queue_with("ps-delayed", no_scheduler())
        .unwrap();
    let channel = cdq.keys().channel.clone();
    let mut checks = Checks::default();

    let observer = &env.observer;
    let subscribed = wait_for(
        Duration::from_secs(5),
        Duration::from_millis(20),
        || async {
            observer
                .proxied_clients()
                .await
                .iter()
                .any(|c| c.flags.contains('P'))
        },
    )
    .await;
    assert!(
        subscribed.is_some(),
        "the consumer's transfer task did not subscribe to {channel}"
    );

    let (warm, after) = (Tally::new(env.clock), Tally::new(env.clock));
    let stop = CancellationToken::new();
    let wait = Some(Duration::from_secs(2));
    let taker = spawn_taker(cdq.clone(), warm.clone(), wait, stop.clone());
    offer_delayed(&pdq, &warm, b"warm", Duration::from_millis(300)).await;
    let ok = wait_for(
        Duration::from_secs(3),
        Duration::from_millis(10),
        || async { warm.all_delivered() },
    )
    .await;
    assert!(
        ok.is_some(),
        "the warm-up entry was not delivered through the subscription"
    );
    stop.cancel();
    let _ = taker.await;

    let before: Vec<ClientInfo> = env
        .observer
        .proxied_clients()
        .await
        .into_iter()
        .filter(|c| c.flags.contains('P'))
        .collect();
    env.proxy.partition();
    let cut = Instant::now();
    let (gone, left) = watch_old_connections(&env.observer, &before, PARTITION).await;
    until(cut + PARTITION).await;
    env.proxy.heal();

    let old: HashSet<u64> = before.iter().map(|c| c.id).collect();
    let observer = &env.observer;
    let resubscribed = wait_for(DETECT + SLACK, Duration::from_millis(50), || {
        let old = &old;
        async move {
            observer
                .proxied_clients()
                .await
                .iter()
                .any(|c| c.flags.contains('P') && !old.contains(&c.id))
        }
    })
    .await;

    let stop = CancellationToken::new();
    let taker = spawn_taker(cdq.clone(), after.clone(), wait, stop.clone());
    for i in 0..5 {
        let delay = Duration::from_millis(300 + 100 * i as u64);
        offer_delayed(&pdq, &after, &value("after", i, 0), delay).await;
    }
    let delivered = wait_for(
        Duration::from_secs(10),
        Duration::from_millis(10),
        || async { after.all_delivered() },
    )
    .await;
    stop.cancel();
    taker.abort();

    checks.check(
        gone.is_some_and(|g| g <= DETECT),
        format!(
            "the subscriber connection open when the partition began was not closed within {DETECT:?} (after {}): still open: {}",
            ms(gone),
            describe(&left)
        ),
    );
    checks.check(
        resubscribed.is_some(),
        format!(
            "no fresh subscription within {:?} of the heal",
            DETECT + SLACK
        ),
    );
    let s = after.summary();
    check_counts(&mut checks, fault, &s, 0);
    checks.check(
        delivered.is_some() && s.worst_late_ms.is_some_and(|w| w < 1000),
        format!(
            "entries offered after the heal were not delivered on time through the subscription (worst lateness {:?} ms; the reconcile interval is 60 s)",
            s.worst_late_ms
        ),
    );
    report(
        fault,
        &s,
        gone,
        resubscribed,
        &[
            ("still_open", describe(&left)),
            ("reconcile_s", "60".to_owned()),
        ],
    );
    checks.finish(fault);
}

/// A host's blocking call (`poll_for` on a thread of its own, as Python's and the JVM's
/// blocking calls run) makes its requests over that thread's own connection: through a
/// silent partition a command under a 2 s response timeout returns within its time plus
/// the margin with a timeout or connection error, and after the heal the thread's next
/// calls answer correctly (the connection kept through the partition was not reused).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn partition_of_a_blocking_call_on_its_own_connection_returns_in_time() {
    use std::sync::mpsc;
    let fault = "partition-blocking-call";
    let env = Proxied::start().await;
    let client = client_with_2s_replies(&env).await;
    let q = client
        .delayed_queue_with("pb-probe", no_scheduler())
        .unwrap();
    let mut checks = Checks::default();

    // The host's thread: each message is a call to make; it answers with the outcome.
    type Outcome = (Duration, Option<delayq::Result<Option<i64>>>);
    let (calls, todo) = mpsc::channel::<Option<Duration>>();
    let (done, outcomes) = mpsc::channel::<Outcome>();
    let (handle, clock) = (tokio::runtime::Handle::current(), env.clock);
    let (fresh_q, fresh_handle) = (q.clone(), handle.clone());
    let host = std::thread::spawn(move || {
        // None: `size()`; Some(delay): an offer that far ahead, answered with the delay
        // its due time shows (an answer meant for another call shows as a wrong one).
        for call in todo {
            let started = Instant::now();
            let before = clock.now_ms();
            let fut = async {
                match call {
                    None => q.size().await.map(|n| Some(n as i64)),
                    Some(d) => q.offer("probe", d).await.map(|due| Some(due - before)),
                }
            };
            let mut fut = std::pin::pin!(fut);
            let out = delayq::host::blocking::poll_for(&handle, fut.as_mut(), HUNG);
            if done.send((started.elapsed(), out)).is_err() {
                return;
            }
        }
    });
    let ask = |call| {
        calls.send(call).unwrap();
        outcomes.recv().unwrap()
    };
    let warm = tokio::task::block_in_place(|| ask(None));
    checks.check(
        matches!(warm.1, Some(Ok(_))),
        format!("the blocking call before the partition gave {:?}", warm.1),
    );

    env.proxy.partition();
    let two = Duration::from_secs(2);
    let during = tokio::task::block_in_place(|| ask(None));
    check_timed_call(
        &mut checks,
        "a blocking size() with a 2 s response timeout",
        two,
        &during,
    );
    // A thread with no connection yet opens one through the partition: the whole opening
    // (connect and setup commands) is bounded by the connect timeout, not each read of it.
    let fresh = std::thread::spawn(move || {
        let started = Instant::now();
        let fut = async { fresh_q.size().await.map(|n| Some(n as i64)) };
        let mut fut = std::pin::pin!(fut);
        let out = delayq::host::blocking::poll_for(&fresh_handle, fut.as_mut(), HUNG);
        (started.elapsed(), out)
    });
    let fresh = tokio::task::block_in_place(|| fresh.join().expect("the fresh thread"));
    check_timed_call(
        &mut checks,
        "a blocking size() on a thread opening its connection (5 s connect timeout)",
        ClientOptions::new("redis://unused").connect_timeout,
        &fresh,
    );
    env.proxy.heal();
    let healed = Instant::now();

    // After the heal the thread's calls answer correctly, each its own answer.
    let mut answered = None;
    for n in 1u64.. {
        let delay = Duration::from_secs(3600 * n);
        let (_, out) = tokio::task::block_in_place(|| ask(Some(delay)));
        if let Some(Ok(Some(shown))) = out {
            if (shown - delay.as_millis() as i64).abs() < 2000 {
                answered = Some(healed.elapsed());
                break;
            }
        }
        if healed.elapsed() > DETECT + SLACK {
            break;
        }
    }
    drop(calls);
    let _ = host.join();
    checks.check(
        answered.is_some(),
        format!(
            "the blocking thread's calls did not answer correctly within {:?} of the heal",
            DETECT + SLACK
        ),
    );
    let total = Tally::new(env.clock).summary();
    let extra = [
        ("size_ms", ms(during.1.as_ref().map(|_| during.0))),
        ("fresh_size_ms", ms(fresh.1.as_ref().map(|_| fresh.0))),
        ("answered_ms", ms(answered)),
    ];
    report(fault, &total, Some(during.0), answered, &extra);
    checks.finish(fault);
}
