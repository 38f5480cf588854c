//! The Redis server's clock stepping back while messages wait (an NTP step, a failover to
//! a host whose clock is behind; SPEC 4): every call that finds a waiting message by its id
//! still finds it, wherever the wheel had put it by the clock as it was.

mod common;

use std::time::Duration;

use common::RedisServer;
use delayq::{Client, ReliableQueueOptions, SchedulerOptions};

#[tokio::test(flavor = "multi_thread")]
async fn a_clock_stepped_back_leaves_every_waiting_message_found_by_its_id() {
    let server = RedisServer::start_with_clock_shift();
    let c = Client::connect(&server.url()).await.unwrap();
    // No transfer task: the messages stay where their offers put them.
    let opts = ReliableQueueOptions {
        scheduler: SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let q = c.reliable_queue("stepped", opts).unwrap();
    // Generated ids, due in 0.5 s ('near': its level-0 bucket has opened), 5 s (a level-0
    // bucket) and 90 s (a level-1 bucket): where each goes follows from the bucket widths
    // and leads, whatever the time of day.
    let mut ids = Vec::new();
    for ms in [500, 5_000, 90_000] {
        ids.push(
            q.offer(ms.to_string(), Duration::from_millis(ms), None)
                .await
                .unwrap(),
        );
    }
    let keys = server.cli(&["KEYS", "{dq:stepped}:*"]);
    assert!(keys.contains("{dq:stepped}:near"), "{keys}");
    assert!(keys.contains("{dq:stepped}:wheel1"), "{keys}");
    // Two hours back: each message now looks an hour or more ahead, as if in a coarse bucket.
    server.shift_clock(-2 * 3_600_000);
    let hour = Duration::from_secs(3_600);
    for id in &ids {
        let again = q.offer_with_outcome("again", hour, Some(id)).await.unwrap();
        assert!(!again.created, "{id}: offered a second time");
        assert!(
            q.reschedule(id, hour).await.unwrap(),
            "{id}: not found to reschedule"
        );
    }
    assert!(q.cancel(&ids[0]).await.unwrap(), "not found to cancel");
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.delayed, stats.ready), (2, 0), "{stats:?}");
    c.close();
}
