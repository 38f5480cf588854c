//! The durability option (WAIT after offers and acks) and offer scripts that are safe to
//! run twice (SPEC section 10).

mod common;

use std::time::Duration;

use common::RedisServer;
use delayq::{Client, ClientOptions, Durability, ErrorKind, ReliableQueueOptions};

/// A master with one replica, replication in sync.
fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = RedisServer::start();
    replica.cli(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !replica
        .cli(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(std::time::Instant::now() < deadline, "replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    (master, replica)
}

fn durable(url: String, replicas: u32, timeout: Duration) -> ClientOptions {
    let mut opts = ClientOptions::new(url);
    opts.durability = Some(Durability {
        replicas,
        aof: false,
        timeout,
    });
    opts
}

#[tokio::test(flavor = "multi_thread")]
async fn offers_and_acks_return_once_a_replica_has_them() {
    let (master, replica) = master_and_replica();
    // A generous wait: a loaded machine may take a while to replicate, and the write must
    // not be reported before the replica has it.
    let c = Client::connect_with(durable(master.url(), 1, Duration::from_secs(10)))
        .await
        .unwrap();
    let q = c.delayed_queue("durable").unwrap();
    for i in 0..20 {
        q.offer(format!("v{i}"), Duration::from_secs(60))
            .await
            .unwrap();
        // WAIT returned: the replica holds the entry already, no polling needed.
        assert_eq!(
            replica.cli(&["LLEN", "redisson_delay_queue:{durable}"]),
            (i + 1).to_string()
        );
    }
    let r = c
        .reliable_queue("durable-r", ReliableQueueOptions::default())
        .unwrap();
    r.offer("job", Duration::ZERO, Some("job-1")).await.unwrap();
    let d = r
        .receive(Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("a delivery");
    assert!(d.ack().await.unwrap());
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_fewer_replicas_confirm_fails_with_timeout() {
    let (master, _replica) = master_and_replica();
    let c = Client::connect_with(durable(master.url(), 2, Duration::from_millis(500)))
        .await
        .unwrap();
    let q = c.delayed_queue("thin").unwrap();
    let err = q.offer("v", Duration::from_secs(60)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("only 1 replica"), "{err}");
    // The write itself was applied on the master, as the message says.
    assert_eq!(master.cli(&["LLEN", "redisson_delay_queue:{thin}"]), "1");
    c.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_offer_script_run_twice_offers_once() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(&delayq::offer_script_source());
    let keys = delayq::keys::DelayedKeys::new("twice").unwrap();
    let token_key = format!("{}:tok1", keys.offer_token_prefix);
    let run = |delay: u64| {
        let mut call = script.prepare_invoke();
        call.key(&keys.timeout_set)
            .key(&keys.queue_list)
            .key(&keys.channel)
            .key(&keys.destination)
            .key(&token_key)
            .arg(delay)
            .arg("id-1")
            .arg("value")
            .arg(delay + 5)
            .arg("id-2")
            .arg("other")
            .arg("tok1");
        call
    };
    let first: Vec<i64> = run(60_000).invoke_async(&mut conn).await.unwrap();
    // A resend after a lost reply: same arguments, a little later.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second: Vec<i64> = run(60_000).invoke_async(&mut conn).await.unwrap();
    assert_eq!(
        first, second,
        "the second run reports the first run's due times"
    );
    assert_eq!(server.cli(&["LLEN", &keys.queue_list]), "2");
    assert_eq!(server.cli(&["ZCARD", &keys.timeout_set]), "2");

    // Without a token (single-server calls), an entry already there is not listed twice.
    let mut call = script.prepare_invoke();
    call.key(&keys.timeout_set)
        .key(&keys.queue_list)
        .key(&keys.channel)
        .key(&keys.destination)
        .arg(60_000)
        .arg("id-1")
        .arg("value");
    let again: Vec<i64> = call.invoke_async(&mut conn).await.unwrap();
    assert_eq!(again[0], first[0], "the stored due time is kept");
    assert_eq!(server.cli(&["LLEN", &keys.queue_list]), "2");
}

/// `aof` waits with WAITAOF (Redis 7.2+): a server without it is refused at connect, before
/// anything is written, rather than failing every offer after applying it.
#[tokio::test(flavor = "multi_thread")]
async fn the_aof_option_needs_a_server_with_waitaof() {
    let server = RedisServer::start();
    let has_waitaof = !server
        .cli(&["COMMAND", "INFO", "WAITAOF"])
        .trim()
        .is_empty();
    let mut opts = durable(server.url(), 0, Duration::from_secs(1));
    opts.durability.as_mut().unwrap().aof = true;
    match Client::connect_with(opts).await {
        Ok(c) => {
            assert!(has_waitaof, "connected without WAITAOF on the server");
            let q = c.delayed_queue("aof").unwrap();
            q.offer("v", Duration::from_secs(60)).await.unwrap();
        }
        Err(e) => {
            assert!(!has_waitaof, "refused although the server has WAITAOF: {e}");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("WAITAOF"), "{e}");
            assert_eq!(server.cli(&["DBSIZE"]).trim(), "0");
        }
    }
}
