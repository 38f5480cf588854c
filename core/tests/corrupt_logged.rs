//! An undecodable entry moved aside, a failed handler and a burial are logged where the
//! application sees it (SPEC section
//! 5: "moved aside ... and logged"; section 6: a failing transfer task is never silent):
//! through `tracing`, which each binding forwards to its language's logging, not only the
//! Redis server's log. A test binary of its own: it installs core's log forwarding.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::RedisServer;
use delayq::logs::{LogLevel, LogRecord};
use delayq::{Client, ReliableQueueOptions};

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_entries_failed_handlers_and_burials_are_logged_as_warnings() {
    let records: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
    let sink = records.clone();
    assert!(delayq::logs::forward(move |r| sink.lock().unwrap().push(r)));
    delayq::logs::set_max_level(Some(LogLevel::Warn));
    let warned = |queue: &str| {
        records.lock().unwrap().iter().any(|r| {
            r.level == LogLevel::Warn
                && r.message.contains("moved undecodable entries aside")
                && r.message.contains(&format!("queue={queue:?}"))
        })
    };

    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    server.cli(&["ZADD", "redisson_delay_queue_timeout:{cq}", "0", "garbage"]);
    server.cli(&["RPUSH", "redisson_delay_queue:{cq}", "garbage"]);
    let q = c.delayed_queue("cq").unwrap();
    q.offer("good", Duration::ZERO).await.unwrap();
    let taken = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(taken.as_deref(), Some(&b"good"[..]));

    let r = c
        .reliable_queue("rq", ReliableQueueOptions::default())
        .unwrap();
    r.offer("first", Duration::ZERO, None).await.unwrap();
    server.cli(&["ZADD", "{dq:rq}:near", "0", "garbage"]);
    r.transfer_now().await.unwrap();
    assert_eq!(
        server.cli(&["LRANGE", "{dq:rq}:corrupt", "0", "-1"]),
        "garbage"
    );
    let d = r.receive(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(d.expect("the good message").payload, b"first");

    // Records travel through core's logs thread: wait for them.
    let logged = common::eventually(Duration::from_secs(5), || async {
        warned("cq") && warned("rq")
    })
    .await;
    let seen = messages(&records);
    assert!(logged, "records: {seen:?}");

    // A handler that fails, and the message that goes to the dead letters after its last
    // attempt, are warnings too: at the level an application sees by default.
    let opts = ReliableQueueOptions {
        max_attempts: Some(1),
        ..Default::default()
    };
    // (Its name holds a line feed, written escaped: one record stays one line.)
    let buried_name = "buried\n2026-11-27T00:00:00Z ERROR forged";
    let dq = c.reliable_queue(buried_name, opts).unwrap();
    let id = dq.offer("doomed", Duration::ZERO, None).await.unwrap();
    let consuming = dq.clone();
    let consumer = tokio::spawn(async move {
        let failing = |_d| async { Err::<(), _>("no luck") };
        consuming.consume(failing, 1).await
    });
    let warned_of = |words: &'static str| {
        let id = id.clone();
        let records = records.clone();
        move || {
            let (records, id) = (records.clone(), id.clone());
            async move {
                records.lock().unwrap().iter().any(|r| {
                    r.level == LogLevel::Warn
                        && r.message.contains(words)
                        && r.message.contains(&format!("id={id:?}"))
                        && r.message.contains(&format!("queue={buried_name:?}"))
                })
            }
        }
    };
    let failed = common::eventually(Duration::from_secs(10), warned_of("handler failed")).await;
    let buried = common::eventually(
        Duration::from_secs(10),
        warned_of("moved to the dead letters"),
    )
    .await;
    dq.close();
    consumer.await.unwrap().unwrap();
    let again = c
        .reliable_queue(buried_name, ReliableQueueOptions::default())
        .unwrap();
    assert_eq!(again.stats().await.unwrap().dead, 1);
    let seen = messages(&records);
    assert!(failed && buried, "records: {seen:?}");

    // Names come from callers and from Redis: a line feed in one is escaped, so that one
    // record stays one line (a name must not forge records of its own).
    let forged = "ev\n2026-11-27T00:00:00Z ERROR forged";
    server.cli(&[
        "SET",
        &format!("redisson_delay_queue_timeout:{{{forged}}}"),
        "x",
    ]);
    let fq = c.delayed_queue(forged).unwrap();
    let escaped = r#"queue="ev\n2026-11-27T00:00:00Z ERROR forged""#;
    let logged = common::eventually(Duration::from_secs(10), || async {
        messages(&records)
            .iter()
            .any(|m| m.contains("transfer failed") && m.contains(escaped))
    })
    .await;
    let seen = messages(&records);
    assert!(logged, "records: {seen:?}");
    assert!(seen.iter().all(|m| !m.contains('\n')), "records: {seen:?}");
    drop(fq);

    // A client closed while its consume's handlers finish: the acks it refuses are told in
    // one warning, not one per batch of acks.
    let closing = Client::connect(&server.url()).await.unwrap();
    let cq = closing
        .reliable_queue("closing", ReliableQueueOptions::default())
        .unwrap();
    let items = (0..400).map(|i| (i.to_string(), Duration::ZERO, None));
    cq.offer_all(items).await.unwrap();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let consumer = tokio::spawn({
        let (cq, ran) = (cq.clone(), ran.clone());
        async move {
            let handler = move |_d| {
                let ran = ran.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok::<(), String>(())
                }
            };
            cq.consume(handler, 32).await
        }
    });
    let busy = || async { ran.load(std::sync::atomic::Ordering::SeqCst) >= 64 };
    assert!(common::eventually(Duration::from_secs(10), busy).await);
    closing.close();
    consumer.await.unwrap().unwrap();
    let told = common::eventually(Duration::from_secs(5), || async {
        messages(&records)
            .iter()
            .any(|m| m.contains("finished after the client was closed"))
    })
    .await;
    let seen = messages(&records);
    let per_batch = seen
        .iter()
        .filter(|m| m.contains("could not ack deliveries"))
        .count();
    assert!(told && per_batch == 0, "records: {seen:?}");
    let once = seen
        .iter()
        .filter(|m| m.contains("finished after the client was closed"));
    assert_eq!(once.count(), 1, "records: {seen:?}");
}

/// The messages of the records forwarded so far.
fn messages(records: &Mutex<Vec<LogRecord>>) -> Vec<String> {
    let records = records.lock().unwrap();
    records.iter().map(|r| r.message.clone()).collect()
}
