//! A subscription the server refuses (an ACL rule without the channel) is said once, as a
//! refusal, not as a lost connection at every attempt; the queue's due entries still move
//! at every reconcile interval, and the channels allowed stay subscribed. A test binary of its own: it installs core's log
//! forwarding.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::RedisServer;
use delayq::logs::{LogLevel, LogRecord};
use delayq::{Client, SchedulerOptions};

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_subscription_is_said_once_and_delivery_goes_on() {
    let records: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
    let sink = records.clone();
    assert!(delayq::logs::forward(move |r| sink.lock().unwrap().push(r)));
    delayq::logs::set_max_level(Some(LogLevel::Warn));
    let warnings = |about: &str| {
        let records = records.lock().unwrap();
        let about = records.iter().filter(|r| r.message.contains(about));
        about.count()
    };

    let server = RedisServer::start();
    // The channel of the queue "ok" only.
    let ok = "&redisson_delay_queue_channel:{ok}";
    let rule = [
        "ACL", "SETUSER", "app", "reset", "on", ">pw", "~*", ok, "+@all",
    ];
    assert_eq!(server.cli(&rule), "OK");
    let url = format!("redis://app:pw@127.0.0.1:{}", server.port);
    let client = Client::connect(&url).await.unwrap();
    let opts = SchedulerOptions {
        reconcile_interval: Duration::from_millis(200),
        ..Default::default()
    };
    let q = client.delayed_queue_with("refused", opts).unwrap();
    // (A user who may not publish there may not offer either: another one does.)
    let producer = Client::connect(&server.url()).await.unwrap();
    let off = SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let p = producer.delayed_queue_with("refused", off).unwrap();
    p.offer("v", Duration::from_millis(50)).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]), "moved by the reconcile");
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            warnings("refused the subscription") > 0
        })
        .await,
        "the refusal is said"
    );
    // The allowed channel keeps its subscription on the same connection.
    let allowed = client
        .delayed_queue_with("ok", SchedulerOptions::default())
        .unwrap();
    let numsub = || server.cli(&["PUBSUB", "NUMSUB", "redisson_delay_queue_channel:{ok}"]);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            numsub().lines().nth(1) == Some("1")
        })
        .await,
        "subscribed to the allowed channel"
    );
    allowed.offer("w", Duration::ZERO).await.unwrap();
    let got = allowed.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"w"[..]));
    // Not a synchronisation: the time in which a lost connection would be retried (50 ms
    // doubling up to 2 s) four times or more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(warnings("refused the subscription"), 1);
    assert_eq!(warnings("pub/sub connection lost"), 0);
    assert_eq!(numsub().lines().nth(1), Some("1"));
    client.close();
    producer.close();
}
