//! Failovers: the master killed (SIGKILL) and a replica promoted, by Sentinel (1 master,
//! 1 replica, 3 sentinels, quorum 2) or by a Redis Cluster (3 masters, 3 replicas).
//!
//! One client produces and consumes on both queues through the failover, with the
//! durability option on (`WAIT 1` after offers and acks): every offer acknowledged before
//! the kill, right up to it, must be delivered after it. Once the promotion is seen, the
//! killed master is started again (empty, as a node without persistence restarts) as a
//! replica of the promoted one (Sentinel: started with `--replicaof`, as an orchestrator
//! does; Cluster: it rejoins and is made a replica by the cluster), so that offers and
//! acks can be confirmed again. Until then the durability option cannot confirm them
//! (no replica), and they fail with a `timeout` error that says they were applied.
//! Duplicates are counted, not failed: a pop or a delivery the old master made may not
//! have reached the replica (the durability option waits after offers and acks only).
//! The calls of the consumers may fail during the failover, but only with a `connection`
//! or `timeout` error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq::{Client, ClientOptions, DelayedQueue, Durability, ErrorKind, ReliableQueue};
use delayq_faults::observe::ServerClock;
use delayq_faults::procs::{redis_cli, Cluster, Redis, Sentinel};
use delayq_faults::tally::{check_counts, report, Tally};
use delayq_faults::workers::{offer_delayed, offer_reliable, spawn_receiver, spawn_taker, value};
use delayq_faults::{wait_for, Checks, DETECT};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{reliable_opts, SLACK};

const VIS: Duration = Duration::from_secs(3);

/// How long the producer offers: through the kill (at 2.5 s), the promotion and the old
/// master's return.
const PRODUCING: Duration = Duration::from_secs(15);

/// The durability option of these tests: one replica confirms each offer and ack.
fn durable(mut opts: ClientOptions) -> ClientOptions {
    opts.durability = Some(Durability {
        replicas: 1,
        aof: false,
        timeout: Duration::from_secs(1),
    });
    opts
}

/// Consumers of both queues, and a producer offering to both every 100 ms (due 0.5 to
/// 4 s later) for [`PRODUCING`]. Offers that fail have an unknown outcome; those
/// acknowledged must arrive.
struct Run {
    td: Arc<Tally>,
    tr: Arc<Tally>,
    stop: CancellationToken,
    workers: Vec<JoinHandle<()>>,
    producer: JoinHandle<()>,
}

impl Run {
    fn start(clock: ServerClock, dq: DelayedQueue, rq: ReliableQueue) -> Run {
        let (td, tr) = (Tally::new(clock), Tally::new(clock));
        let stop = CancellationToken::new();
        let wait = Some(Duration::from_secs(2));
        let workers = vec![
            spawn_taker(dq.clone(), td.clone(), wait, stop.clone()),
            spawn_receiver(rq.clone(), tr.clone(), wait, stop.clone()),
        ];
        let producer = {
            let (td, tr) = (td.clone(), tr.clone());
            tokio::spawn(async move {
                let start = Instant::now();
                let mut i = 0;
                while start.elapsed() < PRODUCING {
                    let delay = Duration::from_millis(500 + (i as u64 * 170) % 3500);
                    offer_delayed(&dq, &td, &value("d", i, 0), delay).await;
                    offer_reliable(&rq, &tr, &value("r", i, 0), delay).await;
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Run {
            td,
            tr,
            stop,
            workers,
            producer,
        }
    }

    /// Waits for the producer and everything acknowledged, then checks and reports.
    async fn finish(
        self,
        checks: &mut Checks,
        fault: &str,
        killed: Instant,
        promoted: Option<Instant>,
    ) {
        let _ = self.producer.await;
        let from = promoted.unwrap_or(killed);
        let (td, tr) = (&self.td, &self.tr);
        let delivered = wait_for(
            VIS + DETECT + SLACK + Duration::from_secs(4),
            Duration::from_millis(20),
            || async { td.all_delivered() && tr.all_delivered() },
        )
        .await;
        self.stop.cancel();
        for w in self.workers {
            w.abort();
        }
        checks.check(
            promoted.is_some(),
            "no replica was promoted within 30 s of the kill",
        );
        checks.check(
            delivered.is_some(),
            "not everything acknowledged was delivered after the failover",
        );
        let outage = from.duration_since(killed);
        let first_after = td
            .first_receipt_after(from)
            .into_iter()
            .chain(tr.first_receipt_after(from))
            .min();
        checks.check(
            first_after.is_some_and(|t| t.duration_since(from) <= DETECT + SLACK),
            format!(
                "delivery did not resume within {:?} of the promotion",
                DETECT + SLACK
            ),
        );
        let acked_after = |t: &Tally| t.summary().expected;
        for (suffix, tally) in [("delayed", td), ("reliable", tr)] {
            let wrong: Vec<String> = tally
                .errors_between(killed, Instant::now())
                .into_iter()
                .filter(|(_, _, kind, _)| {
                    !matches!(kind, ErrorKind::Connection | ErrorKind::Timeout)
                })
                .map(|(_, what, kind, msg)| format!("{what}: {kind}: {msg}"))
                .collect();
            checks.check(
                wrong.is_empty(),
                format!("{fault}-{suffix}: calls failed during the failover with another kind than `connection` or `timeout`: {} (first: {:?})", wrong.len(), wrong.first()),
            );
        }
        for (suffix, tally) in [("delayed", td), ("reliable", tr)] {
            let name = format!("{fault}-{suffix}");
            let s = tally.summary();
            // Duplicates are reported, not failed (see the module docs).
            check_counts(checks, &name, &s, usize::MAX);
            let bound = (outage + DETECT + SLACK).as_millis() as i64;
            checks.check(
                s.worst_late_ms.is_none_or(|w| w <= bound),
                format!("{name}: worst lateness {:?} ms, more than the outage plus {DETECT:?} ({bound} ms)", s.worst_late_ms),
            );
            for sample in tally.error_samples() {
                println!("note: {name}: {sample}");
            }
            report(
                &name,
                &s,
                promoted.map(|p| p.duration_since(killed)),
                first_after.map(|t| t.duration_since(from)),
                &[
                    ("outage_ms", outage.as_millis().to_string()),
                    ("acknowledged", acked_after(tally).to_string()),
                ],
            );
        }
    }
}

fn report_no_client(fault: &str, checks: &mut Checks, e: delayq::Error) {
    for suffix in ["delayed", "reliable"] {
        report(
            &format!("{fault}-{suffix}"),
            &Default::default(),
            None,
            None,
            &[("connect", "failed".to_owned())],
        );
    }
    checks.fail(format!("cannot connect: {e}"));
}

/// Sentinel: the client connects with `redis+sentinel://s1,s2,s3/mymaster`; the master is
/// killed mid-run; delivery resumes on the promoted replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn sentinel_failover_resumes_delivery_on_the_promoted_replica() {
    delayq_faults::init_tracing();
    let fault = "sentinel-failover";
    let mut master = Redis::start(&[]);
    let replica = Redis::start_replica_of(master.port);
    let sentinels: Vec<Sentinel> = (0..3)
        .map(|_| Sentinel::start("mymaster", master.port, 2, 1000, 3000))
        .collect();
    tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let linked = replica
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up");
            let known = sentinels.iter().all(|s| {
                let info = s.master_info("mymaster");
                let get = |k: &str| info.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                get("num-other-sentinels").as_deref() == Some("2")
                    && get("num-slaves").as_deref() == Some("1")
            });
            if linked && known {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not discover each other and the replica within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let clock = ServerClock::calibrate(&master.url()).await;
    let url = format!(
        "redis+sentinel://{}/mymaster",
        sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut checks = Checks::default();
    let client = match Client::connect_with(durable(ClientOptions::new(url))).await {
        Ok(c) => c,
        Err(e) => {
            report_no_client(fault, &mut checks, e);
            checks.finish(fault);
            return;
        }
    };
    let dq = client.delayed_queue("sn-delayed").unwrap();
    let rq = client
        .reliable_queue("sn-reliable", reliable_opts(VIS, true))
        .unwrap();
    let run = Run::start(clock, dq, rq);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let killed = Instant::now();
    tokio::task::block_in_place(|| master.kill());
    let promoted = wait_for(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            tokio::task::block_in_place(|| sentinels[0].master_port("mymaster"))
                == Some(replica.port)
        },
    )
    .await
    .map(|d| killed + d);
    if promoted.is_some() {
        // The old master comes back (empty) as a replica of the new one, as an
        // orchestrator restarts a failed node; the sentinels take it in. With replica
        // priority 0: an empty node must never be promoted. (Seen without it: on a busy
        // machine a sentinel took the new master for down 1 s after the switch, a second
        // failover promoted the empty node, and the sentinels made the node with the
        // data its replica: everything acknowledged was wiped.)
        tokio::task::block_in_place(|| {
            master.start_again_as_replica_of(replica.port, &["--replica-priority", "0"])
        });
    }
    run.finish(&mut checks, fault, killed, promoted).await;
    checks.finish(fault);
}

/// Cluster: three masters with a replica each; the master holding both queues (the
/// Redisson-layout delayed queue lives in one slot; a reliable queue name is picked whose
/// hash tag lands on the same master) is killed mid-run, and listed first among the seeds,
/// so that the client also loses its first seed; delivery resumes once its replica is
/// promoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn cluster_master_killed_resumes_delivery_on_the_promoted_replica() {
    delayq_faults::init_tracing();
    let fault = "cluster-failover";
    let mut cluster = tokio::task::block_in_place(|| Cluster::start(2000));
    let any = cluster.nodes[0].port;
    let keyslot = |key: &str| -> u16 {
        redis_cli(any, &["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("CLUSTER KEYSLOT")
    };
    let delayed_name = "cl-delayed";
    let slot = keyslot(delayed_name);
    let doomed = cluster
        .master_of_slot(any, slot)
        .expect("a master for the slot");
    let reliable_name = (0..500)
        .map(|i| format!("cl-reliable-{i}"))
        .find(|name| {
            let keys = delayq::keys::ReliableKeys::new(name).expect("name");
            cluster
                .master_of_slot(any, keyslot(&keys.ready))
                .is_some_and(|m| m.id == doomed.id)
        })
        .expect("a reliable queue name on the doomed master");
    let (replica_port, survivor) = cluster.replica_and_survivor(any, &doomed.id);
    let mut seeds = vec![format!("redis://127.0.0.1:{}", doomed.port)];
    seeds.extend(
        cluster
            .nodes
            .iter()
            .filter(|n| n.port != doomed.port)
            .map(|n| n.url()),
    );
    let clock = ServerClock::calibrate(&seeds[0]).await;
    let mut checks = Checks::default();
    let client = match Client::connect_with(durable(ClientOptions::cluster(seeds))).await {
        Ok(c) => c,
        Err(e) => {
            report_no_client(fault, &mut checks, e);
            checks.finish(fault);
            return;
        }
    };
    let dq = client.delayed_queue(delayed_name).unwrap();
    let rq = client
        .reliable_queue(&reliable_name, reliable_opts(VIS, true))
        .unwrap();
    let run = Run::start(clock, dq, rq);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let killed = Instant::now();
    tokio::task::block_in_place(|| cluster.node_mut(doomed.port).kill());
    let promoted = cluster
        .promoted(survivor, slot, replica_port)
        .await
        .map(|d| killed + d);
    if promoted.is_some() {
        // The old master comes back (empty, with its nodes.conf) and rejoins as a replica,
        // never to fail over itself: an empty node must never be promoted (see the
        // Sentinel test).
        tokio::task::block_in_place(|| {
            cluster
                .node_mut(doomed.port)
                .start_again_with(&["--cluster-replica-no-failover", "yes"])
        });
    }
    run.finish(&mut checks, fault, killed, promoted).await;
    println!("note: {fault}: killed master {} (first seed), promoted replica {replica_port}, slot {slot}, reliable queue {reliable_name}", doomed.port);
    checks.finish(fault);
}

/// What the durability option costs (printed, not asserted): sequential offers and
/// receive+ack rounds on a master with one replica, without and with `WAIT 1`, on
/// loopback. docs/faults.md quotes the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault suite: run by scripts/test-faults.sh"]
async fn durability_cost_is_printed() {
    delayq_faults::init_tracing();
    let master = Redis::start(&[]);
    let replica = Redis::start_replica_of(master.port);
    tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
        {
            assert!(Instant::now() < deadline, "the replica did not sync");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let n = 300;
    let mut fields = Vec::new();
    for (label, opts) in [
        ("plain", ClientOptions::new(master.url())),
        ("wait1", durable(ClientOptions::new(master.url()))),
    ] {
        let client = Client::connect_with(opts).await.expect("connect");
        let dq = client.delayed_queue(&format!("cost-{label}")).unwrap();
        let rq = client
            .reliable_queue(&format!("cost-{label}"), reliable_opts(VIS, true))
            .unwrap();
        let mut offers = Vec::with_capacity(n);
        let mut acks = Vec::with_capacity(n);
        for i in 0..n {
            let start = Instant::now();
            dq.offer(format!("v{i}"), Duration::from_secs(3600))
                .await
                .expect("offer");
            offers.push(start.elapsed());
            rq.offer(format!("m{i}"), Duration::ZERO, None)
                .await
                .expect("offer");
            let d = rq
                .receive(Some(Duration::from_secs(5)))
                .await
                .expect("receive")
                .expect("a message");
            let start = Instant::now();
            assert!(d.ack().await.expect("ack"));
            acks.push(start.elapsed());
        }
        let pct = |v: &mut Vec<Duration>, p: usize| {
            v.sort();
            format!(
                "{:.2}",
                v[(v.len() * p / 100).min(v.len() - 1)].as_secs_f64() * 1000.0
            )
        };
        fields.push((format!("{label}_offer_p50_ms"), pct(&mut offers, 50)));
        fields.push((format!("{label}_offer_p99_ms"), pct(&mut offers, 99)));
        fields.push((format!("{label}_ack_p50_ms"), pct(&mut acks, 50)));
        fields.push((format!("{label}_ack_p99_ms"), pct(&mut acks, 99)));
        client.close();
    }
    let fields: Vec<(&str, String)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    delayq_faults::tally::report_fields("durability-cost", &fields);
}
