//! A sharded ReliableQueue (SPEC section 12) on one redis-server, where the shards share
//! the node: every message delivered once and never early whatever its shard, calls that
//! take an id find its shard, counts and dead letters add the shards up, receives are
//! fair, one shard keeps the unsharded layout, and the shard count of a queue holding
//! messages cannot change. The cluster runs are in tests/faults (`shards.rs`).

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::RedisServer;
use delayq::keys::{shard_for, ReliableKeys};
use delayq::{Backoff, Client, ErrorKind, ReliableQueueOptions, ReliableStats};

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

/// Payload, delay, id, shard key.
type Offer<'a> = (Vec<u8>, Duration, Option<&'a str>, Option<&'a str>);

fn sharded(shards: u32) -> ReliableQueueOptions {
    ReliableQueueOptions {
        shards: Some(shards),
        visibility_timeout: Some(Duration::from_secs(30)),
        max_attempts: Some(3),
        backoff: Some(Backoff::Schedule(vec![Duration::from_millis(20)])),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_message_is_delivered_once_and_on_time_from_eight_shards() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("spread", sharded(8)).unwrap();
    let total = 2000usize;
    let ids: Vec<String> = (0..total).map(|i| format!("job-{i}")).collect();
    let before = c.server_time_ms().await.unwrap();
    // Half with the caller's ids, a quarter generated, a quarter generated with shard keys;
    // due now or up to 1.5 s ahead.
    let mut expected: HashMap<String, u64> = HashMap::new();
    let batch: Vec<Offer> = (0..total)
        .map(|i| {
            let delay = Duration::from_millis((i as u64 * 7) % 1500);
            let id = (i % 2 == 0).then(|| ids[i].as_str());
            let key = (i % 4 == 3).then_some(if i % 8 == 3 { "tenant-a" } else { "tenant-b" });
            (format!("p{i}").into_bytes(), delay, id, key)
        })
        .collect();
    let outcomes = q.offer_all_with_shard_keys(batch.clone()).await.unwrap();
    for ((_, delay, _, _), o) in batch.iter().zip(&outcomes) {
        assert!(o.created);
        expected.insert(o.id.clone(), delay.as_millis() as u64);
    }
    // One shard key's messages share a shard.
    let keyed: HashSet<u32> = batch
        .iter()
        .zip(&outcomes)
        .filter(|((.., k), _)| *k == Some("tenant-a"))
        .map(|(_, o)| shard_for(delayq::keys::id_shard_basis(&o.id), 8))
        .collect();
    assert_eq!(keyed.len(), 1, "generated ids name their shard key's shard");
    let mut per_shard = [0usize; 8];
    let mut seen: HashSet<String> = HashSet::new();
    while seen.len() < total {
        let got = q.receive_many(100, WAIT).await.unwrap();
        assert!(!got.is_empty(), "stalled at {} of {total}", seen.len());
        let now = c.server_time_ms().await.unwrap();
        for d in &got {
            let delay = expected[&d.id];
            assert!(
                d.due_at >= before + delay as i64 && now >= d.due_at,
                "early"
            );
            assert!(seen.insert(d.id.clone()), "{} delivered twice", d.id);
            assert_eq!(d.shard(), shard_for(delayq::keys::id_shard_basis(&d.id), 8));
            per_shard[d.shard() as usize] += 1;
        }
        assert!(q.ack_many(&got).await.unwrap().iter().all(|a| *a));
    }
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    // CRC32 spreads 2,000 ids over 8 shards: 250 each on average.
    assert!(per_shard.iter().all(|&n| n > 150), "{per_shard:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_reschedule_and_deduplication_find_the_message_in_its_shard() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("byid", sharded(4)).unwrap();
    let hour = Duration::from_secs(3600);
    let mut ids = Vec::new();
    for i in 0..40 {
        ids.push(q.offer(format!("g{i}"), hour, None).await.unwrap());
        let mine = format!("mine-{i}");
        assert!(
            q.offer_with_outcome("m", hour, Some(&mine))
                .await
                .unwrap()
                .created
        );
        assert!(
            !q.offer_with_outcome("m", hour, Some(&mine))
                .await
                .unwrap()
                .created
        );
        ids.push(mine);
        let keyed = format!("keyed-{i}");
        let o = q
            .offer_with_shard_key("k", hour, Some(&keyed), Some("customer-7"))
            .await
            .unwrap();
        assert!(o.created);
        let again = q
            .offer_with_shard_key("k", hour, Some(&keyed), Some("customer-7"))
            .await
            .unwrap();
        assert!(!again.created, "de-duplicated in the key's shard");
        ids.push(keyed);
    }
    assert_eq!(q.stats().await.unwrap().delayed, 120);
    // Reschedule a third to now, cancel a third.
    for (i, id) in ids.iter().enumerate() {
        match i % 3 {
            0 => assert!(q.reschedule(id, Duration::ZERO).await.unwrap(), "{id}"),
            1 => assert!(q.cancel(id).await.unwrap(), "{id}"),
            _ => {}
        }
    }
    assert!(!q.cancel("nobody").await.unwrap());
    assert!(!q.reschedule("nobody", hour).await.unwrap());
    let mut got = HashSet::new();
    while got.len() < 40 {
        for d in q.receive_many(50, WAIT).await.unwrap() {
            assert!(got.insert(d.id.clone()));
            assert!(d.ack().await.unwrap());
        }
    }
    let rescheduled: HashSet<String> = ids.iter().step_by(3).cloned().collect();
    assert_eq!(got, rescheduled);
    assert_eq!(q.stats().await.unwrap().delayed, 40);
}

#[tokio::test(flavor = "multi_thread")]
async fn stats_dead_letters_requeue_and_purge_add_up_the_shards() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut o = sharded(8);
    o.max_attempts = Some(1);
    let q = c.reliable_queue("dead", o).unwrap();
    let ids: Vec<String> = (0..64).map(|i| format!("d{i}")).collect();
    q.offer_all(
        ids.iter()
            .map(|id| ("x", Duration::ZERO, Some(id.as_str()))),
    )
    .await
    .unwrap();
    let mut n = 0;
    while n < 64 {
        for d in q.receive_many(64, WAIT).await.unwrap() {
            assert!(d.nack(None).await.unwrap());
            n += 1;
        }
    }
    assert_eq!(
        q.stats().await.unwrap(),
        ReliableStats {
            dead: 64,
            ..Default::default()
        }
    );
    let listed: HashSet<String> = q
        .dead_letters(1000)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(listed.len(), 64);
    assert_eq!(q.dead_letters(10).await.unwrap().len(), 10);
    assert_eq!(
        q.requeue_dead(Some(&ids[..16])).await.unwrap(),
        16,
        "requeued by id"
    );
    assert_eq!(q.stats().await.unwrap().dead, 48);
    assert_eq!(q.requeue_dead(None).await.unwrap(), 48);
    let mut back = 0;
    while back < 64 {
        let got = q.receive_many(100, WAIT).await.unwrap();
        back += got.len();
        for d in got {
            d.nack(None).await.unwrap();
        }
    }
    assert_eq!(q.purge_dead().await.unwrap(), 64);
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn receive_takes_from_every_shard_in_turn() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("fair", sharded(8)).unwrap();
    // 500 ready messages in one shard, one in each of the others.
    let busy: Vec<(String, Duration, Option<&str>, Option<&str>)> = (0..500)
        .map(|i| (format!("busy{i}"), Duration::ZERO, None, Some("hot")))
        .collect();
    q.offer_all_with_shard_keys(busy).await.unwrap();
    let hot = shard_for("hot", 8);
    let mut lone = HashSet::new();
    let mut k = 0;
    while lone.len() < 7 {
        let key = format!("cold-{k}");
        k += 1;
        if shard_for(&key, 8) == hot || lone.iter().any(|(_, s)| *s == shard_for(&key, 8)) {
            continue;
        }
        q.offer_with_shard_key("lone", Duration::ZERO, None, Some(&key))
            .await
            .unwrap();
        lone.insert((key.clone(), shard_for(&key, 8)));
    }
    // Eight single receives reach all eight shards, whatever the backlog of one.
    let mut shards = HashSet::new();
    for _ in 0..8 {
        let d = q.receive(WAIT).await.unwrap().expect("a message");
        shards.insert(d.shard());
        d.ack().await.unwrap();
    }
    assert_eq!(shards.len(), 8, "{shards:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_consumer_gets_messages_of_any_shard_and_consume_runs_over_all() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("wait", sharded(8)).unwrap();
    // The queue's settings are stored before the producer, which names none, starts.
    assert_eq!(q.settings().await.unwrap().shards, 8);
    let producer = Client::connect(&server.url()).await.unwrap();
    let p = producer
        .reliable_queue("wait", ReliableQueueOptions::default())
        .unwrap();
    // A receive already waiting on an empty queue gets messages due later, from any shard.
    for i in 0..16 {
        let waiting = {
            let q = q.clone();
            tokio::spawn(async move { q.receive(Some(Duration::from_secs(10))).await })
        };
        p.offer(format!("w{i}"), Duration::from_millis(50), None)
            .await
            .unwrap();
        let d = waiting.await.unwrap().unwrap().expect("woken by the bell");
        assert_eq!(d.payload, format!("w{i}").into_bytes());
        d.ack().await.unwrap();
    }
    // consume over all shards.
    let done = Arc::new(Mutex::new(HashSet::new()));
    let total = 1000;
    p.offer_all((0..total).map(|i| (format!("c{i}"), Duration::from_millis(i % 300), None)))
        .await
        .unwrap();
    let consumer = {
        let (q, done) = (q.clone(), done.clone());
        tokio::spawn(async move {
            q.consume(
                move |d| {
                    let done = done.clone();
                    async move {
                        assert!(done.lock().unwrap().insert(d.id.clone()), "twice");
                        Ok::<(), String>(())
                    }
                },
                20,
            )
            .await
        })
    };
    assert!(
        common::eventually(Duration::from_secs(20), || {
            let q = q.clone();
            async move { q.stats().await.unwrap() == ReliableStats::default() }
        })
        .await
    );
    assert_eq!(done.lock().unwrap().len(), total as usize);
    q.close_gracefully(Duration::from_secs(5)).await.unwrap();
    consumer.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_shard_keeps_the_unsharded_layout_and_shards_stay_while_messages_do() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.reliable_queue("layout", sharded(1)).unwrap();
    q.offer("x", Duration::ZERO, Some("a")).await.unwrap();
    let keys = server.cli(&["KEYS", "*"]);
    assert!(
        keys.lines().all(|k| k.starts_with("{dq:layout}:")),
        "{keys}"
    );
    // Four shards on a queue that holds a message: refused, naming why.
    let mut change = sharded(4);
    change.update_settings = true;
    let err = c
        .reliable_queue("layout", change.clone())
        .unwrap()
        .stats()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("cannot change to 4"), "{err}");
    // A handle that only names 4 (no update) is told to name the stored count or none.
    let err = c
        .reliable_queue("layout", sharded(4))
        .unwrap()
        .stats()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("name 1 or none"), "{err}");
    // Never stored, the count of a queue used without settings cannot change either.
    let bare = c
        .reliable_queue("bare", ReliableQueueOptions::default())
        .unwrap();
    bare.offer("x", Duration::ZERO, None).await.unwrap();
    server.cli(&["DEL", "{dq:bare}:settings"]);
    let err = c
        .reliable_queue("bare", sharded(4))
        .unwrap()
        .stats()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("holds messages"), "{err}");
    assert!(bare.receive(WAIT).await.unwrap().is_some());
    // Emptied: allowed; every shard gets a copy of the settings.
    q.transfer_now().await.unwrap();
    q.receive(WAIT).await.unwrap().unwrap().ack().await.unwrap();
    let q4 = c.reliable_queue("layout", change).unwrap();
    assert_eq!(q4.settings().await.unwrap().shards, 4);
    for s in 0..4 {
        let k = ReliableKeys::shard("layout", s, 4).unwrap();
        assert!(k.prefix.starts_with("{dq:layout:"), "{}", k.prefix);
        assert_eq!(
            server
                .cli(&["HGET", &format!("{}settings", k.prefix), "max_attempts"])
                .trim(),
            "3"
        );
    }
    assert_eq!(
        server
            .cli(&["HGET", "{dq:layout}:settings", "shards"])
            .trim(),
        "4"
    );
    // A handle naming nothing uses the stored four shards.
    let plain = c
        .reliable_queue("layout", ReliableQueueOptions::default())
        .unwrap();
    plain.offer("y", Duration::ZERO, Some("b")).await.unwrap();
    let d = q4.receive(WAIT).await.unwrap().expect("from a shard");
    assert_eq!(d.shard(), shard_for("b", 4));
}

/// A handle that read the shard count before another handle changed it (on the empty
/// queue) cannot offer into its old layout, where no consumer would read: its offers fail
/// with an invalid-argument error that says so, and write nothing; one that names no
/// number of shards follows the new one at once. From one shard to four
/// (the queue's own settings say 4) and from four to two (the old shards' copies say 2).
#[tokio::test(flavor = "multi_thread")]
async fn a_handle_whose_shard_count_changed_under_it_cannot_offer() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let old = c
        .reliable_queue("moved", ReliableQueueOptions::default())
        .unwrap();
    assert_eq!(old.stats().await.unwrap(), ReliableStats::default());
    let q4 = c.reliable_queue("moved", sharded(4)).unwrap();
    assert_eq!(q4.settings().await.unwrap().shards, 4);
    let err = old
        .offer("x", Duration::ZERO, Some("dup"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("has 4 shard(s) now"), "{err}");
    assert!(err.to_string().contains("this handle used 1"), "{err}");
    assert!(err.to_string().contains("offer again"), "{err}");
    // Nothing written: the id is free in the four shards.
    let created = q4
        .offer_with_outcome("y", Duration::ZERO, Some("dup"))
        .await
        .unwrap();
    assert!(created.created);
    q4.transfer_now().await.unwrap();
    q4.receive(WAIT)
        .await
        .unwrap()
        .unwrap()
        .ack()
        .await
        .unwrap();
    // The handle that names no number of shards follows the four from now on.
    old.offer("again", Duration::ZERO, Some("again"))
        .await
        .unwrap();
    q4.transfer_now().await.unwrap();
    let d = q4.receive(WAIT).await.unwrap().expect("in the four shards");
    assert_eq!((d.id.as_str(), d.shard()), ("again", shard_for("again", 4)));
    d.ack().await.unwrap();

    let mut two = sharded(2);
    two.update_settings = true;
    let q2 = c.reliable_queue("moved", two).unwrap();
    assert_eq!(q2.settings().await.unwrap().shards, 2);
    let err = q4.offer("z", Duration::ZERO, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("has 2 shard(s) now"), "{err}");
    assert!(err.to_string().contains("open a new handle"), "{err}");
    q2.offer("w", Duration::ZERO, None).await.unwrap();
    assert_eq!(q2.stats().await.unwrap().ready, 1);
    // Its stats would count the old layout, which nobody uses: refused as its offers are
    // (they read all zeros before 2026-11-28).
    let err = q4.stats().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("has 2 shard(s) now"), "{err}");
    assert!(err.to_string().contains("nothing was counted"), "{err}");
}

/// A handle that names no number of shards (a `delayq transfer --reliable` process)
/// started before the queue was configured moves the shards configured after it: it
/// reads the stored number again. Only it runs transfer tasks here.
#[tokio::test(flavor = "multi_thread")]
async fn a_transfer_started_before_the_queue_was_sharded_moves_every_shard() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let transfer = c
        .reliable_queue("late", ReliableQueueOptions::default())
        .unwrap();
    let quiet = |mut o: ReliableQueueOptions| {
        o.scheduler.enabled = false;
        o
    };
    let q = c.reliable_queue("late", quiet(sharded(4))).unwrap();
    let n = 12;
    for i in 0..n {
        let id = format!("m{i}");
        q.offer(id.clone(), Duration::from_millis(200), Some(&id))
            .await
            .unwrap();
    }
    let mut got = HashSet::new();
    while got.len() < n {
        let d = q.receive(Some(Duration::from_secs(15))).await.unwrap();
        let d = d.unwrap_or_else(|| panic!("only {got:?} moved"));
        d.ack().await.unwrap();
        got.insert(d.id.clone());
    }
    assert_eq!(q.stats().await.unwrap(), ReliableStats::default());
    transfer.close();
}

/// A queue split into shards cannot have a brace in its name (its shards would share
/// one cluster slot): refused before anything reaches Redis.
#[tokio::test(flavor = "multi_thread")]
async fn a_sharded_queue_name_with_a_brace_is_refused() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    for name in ["a}b", "x{y}z"] {
        let err = c.reliable_queue(name, sharded(8)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("holds a brace"), "{err}");
    }
    assert_eq!(server.cli(&["DBSIZE"]), "0");
    c.reliable_queue("a}b", ReliableQueueOptions::default())
        .unwrap()
        .close();
}

/// A consumer whose first call came before the queue was split into shards (it started
/// before its producers, which configure the queue) follows the stored layout: it
/// receives from every shard within the re-read interval, also with a receive already
/// waiting, and with no transfer task of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_that_started_before_the_queue_was_sharded_receives_from_every_shard() {
    let server = RedisServer::start();
    let consumers = Client::connect(&server.url()).await.unwrap();
    let mut quiet = ReliableQueueOptions::default();
    quiet.scheduler.enabled = false;
    let early = consumers.reliable_queue("early", quiet.clone()).unwrap();
    let waiting = consumers.reliable_queue("early", quiet).unwrap();
    assert!(early.receive(Some(Duration::ZERO)).await.unwrap().is_none());
    assert!(waiting
        .receive(Some(Duration::ZERO))
        .await
        .unwrap()
        .is_none());
    let waits = tokio::spawn(async move {
        let d = waiting.receive(Some(Duration::from_secs(30))).await;
        (d.unwrap().expect("a message within 30 s"), waiting)
    });

    let producers = Client::connect(&server.url()).await.unwrap();
    let q = producers.reliable_queue("early", sharded(4)).unwrap();
    // First one message in the last shard, for the receive already waiting.
    let last = (0..)
        .map(|i| format!("w{i}"))
        .find(|id| delayq::keys::shard_for(delayq::keys::id_shard_basis(id), 4) == 3)
        .unwrap();
    q.offer(last.clone(), Duration::ZERO, Some(&last))
        .await
        .unwrap();
    let (first, waiting) = waits.await.unwrap();
    assert_eq!((first.id.as_str(), first.shard()), (last.as_str(), 3));
    first.ack().await.unwrap();
    let n = 16;
    for i in 1..n {
        let id = format!("m{i}");
        q.offer(id.clone(), Duration::ZERO, Some(&id))
            .await
            .unwrap();
    }
    let mut got = HashSet::from([first.id.clone()]);
    let mut shards = HashSet::from([first.shard()]);
    while got.len() < n {
        let d = early.receive(Some(Duration::from_secs(15))).await.unwrap();
        let d = d.unwrap_or_else(|| panic!("only {got:?} received"));
        d.ack().await.unwrap();
        shards.insert(d.shard());
        got.insert(d.id.clone());
    }
    assert_eq!(shards.len(), 4, "from every shard: {shards:?}");
    assert_eq!(early.stats().await.unwrap(), ReliableStats::default());
    waiting.close();
    consumers.close();
    producers.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_that_fails_on_one_shard_says_what_the_others_did() {
    let server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let mut options = sharded(2);
    options.max_attempts = Some(1);
    options.scheduler.enabled = false;
    let q = c.reliable_queue("part", options).unwrap();
    let key = |shard| {
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| shard_for(k, 2) == shard)
            .unwrap()
    };
    let (k0, k1) = (key(0), key(1));
    let batch: Vec<Offer> = vec![
        (
            b"a".to_vec(),
            Duration::ZERO,
            Some("on-0"),
            Some(k0.as_str()),
        ),
        (
            b"b".to_vec(),
            Duration::ZERO,
            Some("on-1"),
            Some(k1.as_str()),
        ),
    ];
    // Shard 1's stream is a string: its offer fails, shard 0's is stored. (The settings
    // are read first: that reading checks every shard's keys.)
    q.stats().await.unwrap();
    let ready1 = ReliableKeys::shard("part", 1, 2).unwrap().ready;
    server.cli(&["SET", &ready1, "not a stream"]);
    let err = q
        .offer_all_with_shard_keys(batch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(
        err.to_string()
            .contains("; but 1 of the 2 messages of this batch were stored by calls that answered"),
        "{err}"
    );
    // Offered again with the same ids once the key is mended: the stored one is not
    // created twice.
    server.cli(&["DEL", &ready1]);
    let again = q.offer_all_with_shard_keys(batch).await.unwrap();
    let created: Vec<_> = again.iter().map(|o| (o.id.as_str(), o.created)).collect();
    assert_eq!(created, [("on-0", false), ("on-1", true)]);

    // Both die (one attempt each); shard 1's dead letters become a string: a requeue of
    // all says how many it requeued on shard 0 before it failed.
    q.transfer_now().await.unwrap();
    for _ in 0..2 {
        let d = q.receive(WAIT).await.unwrap().expect("a delivery");
        assert!(d.nack(None).await.unwrap());
    }
    assert_eq!(q.stats().await.unwrap().dead, 2);
    let dead1 = ReliableKeys::shard("part", 1, 2).unwrap().dead;
    server.cli(&["DEL", &dead1]);
    server.cli(&["SET", &dead1, "not a hash"]);
    let err = q.requeue_dead(None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(
        err.to_string()
            .contains("1 dead letters were requeued before it"),
        "{err}"
    );
    server.cli(&["DEL", &dead1]);
    assert_eq!(q.stats().await.unwrap().ready, 1, "shard 0's was requeued");
    c.close();
}
