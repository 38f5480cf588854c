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

/// The slots `node` serves, from its `CLUSTER NODES` line ("myself").
fn own_slots(node: &common::RedisServer) -> Vec<(u16, u16)> {
    let nodes = node.cli(&["CLUSTER", "NODES"]);
    let mine = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .expect("myself");
    let range = |r: &str| match r.split_once('-') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?).into(),
        None => r.parse().ok().map(|s| (s, s)),
    };
    mine.split_whitespace().skip(8).filter_map(range).collect()
}

/// A client given one seed only, a master that then dies: once its replica takes over,
/// the client goes on with the nodes it learned at connect (redis-rs rebuilds a lost
/// cluster from its initial nodes only, so the seed alone left it refused for good).
#[tokio::test(flavor = "multi_thread")]
async fn a_client_whose_only_seed_died_goes_on_with_the_rest_of_the_cluster() {
    let mut cluster = Cluster::start();
    let replica = cluster.add_replica();
    let slots = own_slots(&cluster.nodes[0]);
    let on_seed = (0..1000)
        .map(|i| format!("only-seed-{i}"))
        .find(|name| {
            let slot: u16 = cluster.nodes[0]
                .cli(&["CLUSTER", "KEYSLOT", name])
                .parse()
                .unwrap();
            slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
        })
        .expect("a name on the seed's slots");
    let client = Client::connect_with(ClientOptions::cluster(vec![cluster.nodes[0].url()]))
        .await
        .unwrap();
    let q = client.delayed_queue(&on_seed).unwrap();
    let shards = ReliableQueueOptions {
        shards: Some(4),
        ..Default::default()
    };
    let r = client.reliable_queue("only-seed-r", shards).unwrap();
    q.offer("before", Duration::ZERO).await.unwrap();
    assert_eq!(
        q.take(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"before"[..])
    );

    cluster.nodes[0].stop();
    assert_eq!(replica.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]), "OK");
    let port = replica.port.to_string();
    let taken_over = common::eventually(Duration::from_secs(20), || async {
        cluster.nodes[1..].iter().all(|n| {
            let nodes = n.cli(&["CLUSTER", "NODES"]);
            nodes
                .lines()
                .any(|l| l.contains(&format!(":{port}@")) && l.contains("master"))
        })
    })
    .await;
    assert!(taken_over, "the replica did not take over");

    // Delivering again within 10 s (SPEC section 10), on the seed's slots and the others.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut last = None;
    let offered = loop {
        match q.offer("after", Duration::from_millis(100)).await {
            Ok(_) => break true,
            Err(e) if std::time::Instant::now() < deadline => last = Some(e),
            Err(_) => break false,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        offered,
        "no offer went through after the takeover: {last:?}"
    );
    assert_eq!(
        q.take(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"after"[..])
    );
    // Waits at once, more than the connections it had: new ones are opened.
    let receives: Vec<_> = (0..8)
        .map(|_| {
            let r = r.clone();
            tokio::spawn(async move { r.receive(Some(Duration::from_secs(10))).await })
        })
        .collect();
    for i in 0..8 {
        r.offer(format!("m{i}"), Duration::ZERO, None)
            .await
            .unwrap();
    }
    for received in receives {
        let d = received.await.unwrap().expect("a connection for the wait");
        assert!(d.expect("a message").ack().await.unwrap());
    }
    client.close();
}

/// A key scan runs on one node: `scan_queues` asks every master, so that queues on any of
/// them are found (`delayq serve` lists them).
#[tokio::test(flavor = "multi_thread")]
async fn scan_queues_finds_the_queues_of_every_master() {
    let cluster = Cluster::start();
    let client = Client::connect_with(ClientOptions::cluster(cluster.seeds()))
        .await
        .unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("found-{i}")).collect();
    let owners: std::collections::BTreeSet<String> = names
        .iter()
        .map(|n| {
            let slot = cluster.nodes[0].cli(&["CLUSTER", "KEYSLOT", n]);
            let owner = cluster.nodes.iter().position(|node| {
                own_slots(node)
                    .iter()
                    .any(|&(a, b)| (a..=b).contains(&slot.parse().unwrap()))
            });
            format!("{owner:?}")
        })
        .collect();
    assert_eq!(owners.len(), 3, "the names land on every master");
    for name in &names {
        let q = client.delayed_queue(name).unwrap();
        q.offer("v", Duration::from_secs(600)).await.unwrap();
        let r = client
            .reliable_queue(name, ReliableQueueOptions::default())
            .unwrap();
        r.offer("v", Duration::from_secs(600), None).await.unwrap();
    }
    let sharded = ReliableQueueOptions {
        shards: Some(4),
        ..Default::default()
    };
    let s = client.reliable_queue("found-sharded", sharded).unwrap();
    s.offer("v", Duration::ZERO, None).await.unwrap();

    let found = client.scan_queues().await.unwrap();
    let mut reliable = names.clone();
    reliable.push("found-sharded".into());
    assert_eq!(found.reliable, reliable.into_iter().collect());
    assert_eq!(found.delayed, names.into_iter().collect());
    client.close();
}
