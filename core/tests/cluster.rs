//! Both queues on a three-node Redis Cluster started by the test.

mod common;

use std::process::Command;
use std::time::Duration;

use common::RedisServer;
use delayq::{Client, ClientOptions, ReliableQueueOptions};

struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_cluster_node()).collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        {
            assert!(std::time::Instant::now() < deadline, "cluster did not form");
            std::thread::sleep(Duration::from_millis(50));
        }
        Cluster { nodes }
    }

    fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }
}

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
