//! Both queues on a three-node Redis Cluster started by the test.

mod common;

use std::time::Duration;

use common::Cluster;
use delayq::{Client, ClientOptions, ReliableQueueOptions};

#[tokio::test(flavor = "multi_thread")]
async fn delayed_and_reliable_queues_work_on_a_cluster() {
    let cluster = Cluster::start();
    let client = Client::connect_with(ClientOptions::cluster(cluster.seeds()))
        .await
        .unwrap();
    // Names chosen to land on different nodes.
    for name in ["orders", "invoices", "emails", "a{b}c"] {
        let q = client.delayed_queue(name).unwrap();
        q.offer_all([("x", Duration::from_millis(200)), ("y", Duration::ZERO)])
            .await
            .unwrap();
        assert!(q.contains("x").await.unwrap());
        let mut got = vec![
            q.take(Some(Duration::from_secs(5))).await.unwrap().unwrap(),
            q.take(Some(Duration::from_secs(5))).await.unwrap().unwrap(),
        ];
        got.sort();
        assert_eq!(got, vec![b"x".to_vec(), b"y".to_vec()], "{name}");

        let r = client
            .reliable_queue(name, ReliableQueueOptions::default())
            .unwrap();
        let id = r
            .offer("job", Duration::from_millis(1500), None)
            .await
            .unwrap();
        let d = r
            .receive(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.id, id);
        assert!(d.ack().await.unwrap());
        assert_eq!(r.stats().await.unwrap(), Default::default());
    }
    // Names whose keys Redisson's naming would spread over slots are refused up front.
    for bad in ["a}b", "{x", "x{}y", "a{b"] {
        let err = client.delayed_queue(bad).unwrap_err();
        assert_eq!(err.kind(), delayq::ErrorKind::InvalidArgument, "{bad}");
        assert!(err.to_string().contains("cluster slots"), "{err}");
    }
    // Offers in cluster mode carry a token key that expires by itself.
    let q = client.delayed_queue("tokens").unwrap();
    q.offer("v", Duration::from_secs(60)).await.unwrap();
    assert!(q.contains("v").await.unwrap());
    assert_eq!(q.size().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_node_reached_as_one_server_says_to_use_the_cluster_option() {
    let cluster = Cluster::start();
    let mut moved = None;
    // A key on another node than the first seed answers MOVED there.
    for seed in cluster.seeds() {
        let client = Client::connect(&seed).await.unwrap();
        for n in 0..16 {
            let q = client.delayed_queue(&format!("q{n}")).unwrap();
            if let Err(e) = q.size().await {
                moved = Some(e);
                break;
            }
        }
        if moved.is_some() {
            break;
        }
    }
    let e = moved.expect("some key lives on another node");
    assert_eq!(e.kind(), delayq::ErrorKind::Server, "{e}");
    assert!(
        e.to_string().contains("a cluster needs the cluster option"),
        "{e}"
    );
}

/// The reverse mistake: the cluster option with a server that is no cluster node.
#[tokio::test(flavor = "multi_thread")]
async fn the_cluster_option_with_a_plain_server_says_it_is_no_cluster() {
    let server = common::RedisServer::start();
    let e = match Client::connect_with(delayq::ClientOptions::cluster([server.url()])).await {
        Ok(_) => panic!("a plain server accepted as a cluster"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), delayq::ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("not in cluster mode"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_calls_on_a_cluster_outlast_the_response_time_limit() {
    let cluster = Cluster::start();
    let mut opts = ClientOptions::cluster(cluster.seeds());
    opts.response_timeout = Duration::from_millis(200);
    let client = Client::connect_with(opts).await.unwrap();
    let q = client.delayed_queue("slow-take").unwrap();
    let r = client
        .reliable_queue("slow-receive", ReliableQueueOptions::default())
        .unwrap();
    // Waits of 1 s, five times the reply limit of ordinary commands: a timeout is no error.
    assert_eq!(q.take(Some(Duration::from_secs(1))).await.unwrap(), None);
    assert!(r
        .receive(Some(Duration::from_secs(1)))
        .await
        .unwrap()
        .is_none());
    // And a value that comes after the limit is still delivered.
    q.offer("late", Duration::from_millis(600)).await.unwrap();
    assert_eq!(
        q.take(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"late"[..])
    );
}

/// A replica that accepts connections but never answers (a paused VM; an address this
/// client cannot reach) stops nothing: delayq reads and writes masters only. A client
/// connects within its connect time, and both queues offer and deliver, with shards on
/// every master.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_never_answers_stops_no_connect_and_no_call() {
    let cluster = Cluster::start();
    let replica = cluster.add_replica();
    let _frozen = replica.freeze();
    let opts = ClientOptions::cluster(cluster.seeds());
    let limit = opts.connect_timeout;
    let started = std::time::Instant::now();
    let client = Client::connect_with(opts).await.expect("connect");
    assert!(
        started.elapsed() < limit,
        "connect took {:?}",
        started.elapsed()
    );

    let q = client.delayed_queue("paused-replica").unwrap();
    q.offer("v", Duration::ZERO).await.unwrap();
    let got = q.take(Some(Duration::from_secs(10))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
    let opts = ReliableQueueOptions {
        shards: Some(4),
        ..Default::default()
    };
    let r = client.reliable_queue("paused-replica-r", opts).unwrap();
    for i in 0..8 {
        r.offer(format!("m{i}"), Duration::ZERO, None)
            .await
            .unwrap();
    }
    for _ in 0..8 {
        let d = r.receive(Some(Duration::from_secs(10))).await.unwrap();
        assert!(d.expect("a message").ack().await.unwrap());
    }
    client.close();
}

/// A reply later than the response time limit, on a cluster: the call fails with a
/// `connection` error (its outcome unknown, as on one server) within the limit and the
/// margin, not a `timeout`, and the offer is not sent again (a reliable offer with a
/// generated id, and a delayed offer, are stored at most once).
#[tokio::test(flavor = "multi_thread")]
async fn a_late_reply_on_a_cluster_is_a_connection_error_and_the_offer_is_not_sent_again() {
    let cluster = Cluster::start();
    let mut opts = ClientOptions::cluster(cluster.seeds());
    opts.response_timeout = Duration::from_millis(500);
    let client = Client::connect_with(opts).await.unwrap();
    let off = delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let r = client
        .reliable_queue(
            "late-reply",
            ReliableQueueOptions {
                scheduler: off.clone(),
                ..Default::default()
            },
        )
        .unwrap();
    let q = client.delayed_queue_with("late-reply-d", off).unwrap();
    // Both handles ready (settings stored), so that each call below is one script call.
    assert_eq!(r.stats().await.unwrap(), Default::default());
    assert_eq!(q.size().await.unwrap(), 0);

    let pause = |ms: &str| {
        for n in &cluster.nodes {
            assert_eq!(n.cli(&["CLIENT", "PAUSE", ms, "ALL"]), "OK");
        }
    };
    pause("2500");
    let started = std::time::Instant::now();
    let offered = r.offer("job", Duration::from_secs(600), None).await;
    let late = started.elapsed();
    let err = offered.expect_err("no reply while the master is paused");
    assert_eq!(err.kind(), delayq::ErrorKind::Connection, "{err}");
    assert!(
        late < Duration::from_millis(500) + Duration::from_secs(3),
        "{late:?}"
    );
    let offered = q.offer("v", Duration::from_secs(600)).await;
    let err = offered.expect_err("no reply while the master is paused");
    assert_eq!(err.kind(), delayq::ErrorKind::Connection, "{err}");

    // Once the pause ends (a PING waits for it), what was sent ran at most once.
    for n in &cluster.nodes {
        assert_eq!(n.cli(&["PING"]), "PONG");
    }
    assert!(r.stats().await.unwrap().delayed <= 1);
    assert!(q.size().await.unwrap() <= 1);
    client.close();
}

/// A reply lost after the script ran (the node closes the connection: its reply exceeds
/// the output buffer limit): the call fails with a `connection` error and the script is
/// not sent again, so the batch is stored once (redis-rs's own resend stored it again and
/// again: a reliable offer without ids has nothing to de-duplicate).
#[tokio::test(flavor = "multi_thread")]
async fn a_reply_lost_on_a_cluster_does_not_run_the_script_twice() {
    let cluster = Cluster::start();
    let client = Client::connect_with(ClientOptions::cluster(cluster.seeds()))
        .await
        .unwrap();
    let off = delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    };
    let opts = ReliableQueueOptions {
        scheduler: off,
        ..Default::default()
    };
    let r = client.reliable_queue("lost-reply", opts).unwrap();
    assert_eq!(r.stats().await.unwrap(), Default::default());
    let limit = |spec: &str| {
        for n in &cluster.nodes {
            let set = n.cli(&["CONFIG", "SET", "client-output-buffer-limit", spec]);
            assert_eq!(set, "OK");
        }
    };
    // Small replies pass; the batch's (an id and more per message) does not.
    limit("normal 4kb 4kb 0");
    let n = 300;
    let batch = (0..n).map(|i| (format!("m{i}"), Duration::from_secs(600), None));
    let offered = r.offer_all(batch).await;
    limit("normal 0 0 0");
    let err = offered.expect_err("the node closed the connection instead of replying");
    assert_eq!(err.kind(), delayq::ErrorKind::Connection, "{err}");
    assert_eq!(r.stats().await.unwrap().delayed, n, "stored once");
    client.close();
}
