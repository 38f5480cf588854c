//! delayq's fault suite: one test per fault of SPEC section 10, each printing one line
//! `fault=NAME delivered=.. lost=.. duplicated=.. early=.. worst_late_ms=.. detect_ms=..
//! recover_ms=..` and then asserting the promises of that section.
//!
//! The tests are `#[ignore]`d so that a plain `cargo test --workspace` does not run a
//! suite that installs Toxiproxy and Sentinel and takes minutes; `scripts/test-faults.sh`
//! installs the tools and runs them (`-- --include-ignored`). See docs/faults.md.

// The scenarios are long async functions over delayq's futures.
#![recursion_limit = "256"]

mod failover;
mod network;
mod partition;
mod restart;
mod shards;

use std::time::{Duration, Instant};

use delayq::{DelayedQueue, ReliableQueue, ReliableQueueOptions, SchedulerOptions};
use delayq_faults::observe::{Observer, ServerClock};
use delayq_faults::procs::Redis;
use delayq_faults::toxiproxy::{Proxy, Toxiproxy};

/// Slack for measurements made by polling and for a busy two-core machine, added to the
/// detection bound of SPEC section 10 where the test checks it.
pub const SLACK: Duration = Duration::from_secs(1);

/// One Redis server, a Toxiproxy server with one proxy in front of it, the server clock,
/// and a direct observer.
pub struct Proxied {
    pub redis: Redis,
    pub toxiproxy: Toxiproxy,
    pub proxy: Proxy,
    pub clock: ServerClock,
    pub observer: Observer,
}

impl Proxied {
    pub async fn start() -> Proxied {
        delayq_faults::init_tracing();
        let redis = Redis::start(&[]);
        let toxiproxy = Toxiproxy::start();
        let proxy = toxiproxy.proxy("redis", &redis.proxy_upstream());
        let clock = ServerClock::calibrate(&redis.url()).await;
        let observer = Observer::connect(&redis.url()).await;
        Proxied {
            redis,
            toxiproxy,
            proxy,
            clock,
            observer,
        }
    }
}

/// Scheduler options with the transfer task off (a producer that moves nothing).
pub fn no_scheduler() -> SchedulerOptions {
    SchedulerOptions {
        enabled: false,
        ..SchedulerOptions::default()
    }
}

/// Reliable queue options with a short visibility timeout, so that a delivery whose reply
/// was lost comes back soon.
pub fn reliable_opts(visibility: Duration, scheduler: bool) -> ReliableQueueOptions {
    ReliableQueueOptions {
        visibility_timeout: Some(visibility),
        scheduler: if scheduler {
            SchedulerOptions::default()
        } else {
            no_scheduler()
        },
        ..ReliableQueueOptions::default()
    }
}

/// Runs `fut` for at most `limit`; returns how long it ran and its output (`None` when it
/// did not finish).
pub async fn timed<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = T>,
) -> (Duration, Option<T>) {
    let start = Instant::now();
    let out = tokio::time::timeout(limit, fut).await.ok();
    (start.elapsed(), out)
}

/// Checks that the handles through a proxy work before a fault: a value offered on the
/// direct handles is taken and received through the proxied ones. Also leaves a
/// dedicated connection of each kind open, so that the fault meets existing connections.
pub async fn warm_up(
    proxied: (&DelayedQueue, &ReliableQueue),
    direct: (&DelayedQueue, &ReliableQueue),
) {
    direct
        .0
        .offer("warm-up", Duration::ZERO)
        .await
        .expect("warm-up offer");
    direct.0.transfer_now().await.expect("warm-up transfer");
    let got = proxied.0.take(Some(Duration::from_secs(5))).await;
    assert_eq!(
        got.expect("warm-up take").as_deref(),
        Some(&b"warm-up"[..]),
        "warm-up value not taken through the proxy"
    );
    direct
        .1
        .offer("warm-up", Duration::ZERO, None)
        .await
        .expect("warm-up offer");
    direct.1.transfer_now().await.expect("warm-up transfer");
    let d = proxied
        .1
        .receive(Some(Duration::from_secs(5)))
        .await
        .expect("warm-up receive")
        .expect("warm-up message not received through the proxy");
    assert_eq!(d.payload, b"warm-up");
    assert!(d.ack().await.expect("warm-up ack"));
}

/// Sleeps until `at` (the planned end of a fault: its duration is part of the injection,
/// not a wait for a condition).
pub async fn until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}
