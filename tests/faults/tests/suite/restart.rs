//! Redis killed (SIGKILL) and started again on its append-only file (fsync always) while
//! producers offer and consumers take: nothing acknowledged before the kill is lost.

use std::time::{Duration, Instant};

use delayq::Client;
use delayq_faults::observe::ServerClock;
use delayq_faults::procs::Redis;
use delayq_faults::tally::{check_counts, report, Tally};
use delayq_faults::workers::{offer_delayed, offer_reliable, spawn_receiver, spawn_taker, value};
use delayq_faults::{wait_for, Checks, DETECT};
use tokio_util::sync::CancellationToken;

use crate::{reliable_opts, SLACK};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn restart_with_aof_loses_nothing_acknowledged() {
    delayq_faults::init_tracing();
    let fault = "restart-aof";
    let mut redis = Redis::start_aof();
    let clock = ServerClock::calibrate(&redis.url()).await;
    let client = Client::connect(&redis.url()).await.expect("connect");
    let vis = Duration::from_secs(3);
    let dq = client.delayed_queue("rs-delayed").unwrap();
    let rq = client
        .reliable_queue("rs-reliable", reliable_opts(vis, true))
        .unwrap();
    let (td, tr) = (Tally::new(clock), Tally::new(clock));
    let stop = CancellationToken::new();
    let wait = Some(Duration::from_secs(2));
    let consumers = [
        spawn_taker(dq.clone(), td.clone(), wait, stop.clone()),
        spawn_receiver(rq.clone(), tr.clone(), wait, stop.clone()),
    ];
    // Offers every 100 ms for 6 s, due 0.5 to 3 s later, through the kill and the restart.
    let producer = {
        let (dq, rq, td, tr) = (dq.clone(), rq.clone(), td.clone(), tr.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let mut i = 0;
            while start.elapsed() < Duration::from_secs(6) {
                let delay = Duration::from_millis(500 + (i as u64 * 170) % 2500);
                offer_delayed(&dq, &td, &value("d", i, 0), delay).await;
                offer_reliable(&rq, &tr, &value("r", i, 0), delay).await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let killed = Instant::now();
    tokio::task::block_in_place(|| redis.kill());
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(|| redis.start_again());
    let back = Instant::now();
    producer.await.expect("producer");
    let delivered = wait_for(vis + DETECT + SLACK, Duration::from_millis(20), || async {
        td.all_delivered() && tr.all_delivered()
    })
    .await;
    stop.cancel();
    for c in consumers {
        c.abort();
    }

    let mut checks = Checks::default();
    checks.check(
        delivered.is_some(),
        format!(
            "not everything acknowledged was delivered within {:?} of the restart",
            vis + DETECT + SLACK
        ),
    );
    let first_error = td
        .errors_between(killed, back)
        .into_iter()
        .chain(tr.errors_between(killed, back))
        .map(|(t, ..)| t)
        .min();
    let first_after = td
        .first_receipt_after(back)
        .into_iter()
        .chain(tr.first_receipt_after(back))
        .min();
    for (name, tally, reliable) in [
        ("restart-aof-delayed", &td, false),
        ("restart-aof-reliable", &tr, true),
    ] {
        let s = tally.summary();
        check_counts(
            &mut checks,
            name,
            &s,
            if reliable { s.acks_failed as usize } else { 0 },
        );
        report(
            name,
            &s,
            first_error.map(|t| t.duration_since(killed)),
            first_after.map(|t| t.duration_since(back)),
            &[(
                "down_ms",
                back.duration_since(killed).as_millis().to_string(),
            )],
        );
    }
    checks.finish(fault);
}
