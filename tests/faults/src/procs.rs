//! Server processes started by the tests: Redis (single, AOF, replica, cluster node),
//! Sentinel, and a six-node cluster. Each listens on a free loopback port, keeps its files
//! under its own directory in the temp dir, and is killed (SIGKILL) on drop.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::tools;

/// A free TCP port on 127.0.0.1 (free when asked; the kernel hands out ports in a way
/// that makes a collision between parallel tests unlikely).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .unwrap()
        .port()
}

/// A free port whose cluster bus port (port + 10000) is free too.
pub fn free_cluster_port() -> u16 {
    for _ in 0..200 {
        let port = free_port();
        if port > 55000 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair for a cluster node");
}

/// A fresh directory under the temp dir (absolute).
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "delayq-faults-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir.canonicalize().expect("absolute temp dir")
}

fn keep_files() -> bool {
    std::env::var_os("DELAYQ_FAULTS_KEEP").is_some()
}

/// Runs `redis-cli -p PORT ARGS...` and returns its stdout, trimmed.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Waits until the server on `port` answering is the process `child` (its `INFO`
/// names its pid: a port another test took meanwhile is not mistaken for ours) and has
/// loaded its data. Returns false when the process exited (the port was taken).
fn wait_ready(port: u16, child: &mut Child, what: &str) -> bool {
    let pid = format!("process_id:{}", child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let info = redis_cli(port, &["INFO", "server", "persistence"]);
        if info.contains(&pid) && !info.contains("loading:1") {
            return true;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} on port {port} did not answer within 20 s");
}

/// A `redis-server` process.
pub struct Redis {
    /// Its port on 127.0.0.1 (and on 127.0.0.2, where the proxies connect).
    pub port: u16,
    /// Its working directory (AOF, cluster config, log).
    pub dir: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Redis {
    /// A server without persistence, plus `extra` arguments (`--appendonly yes`, ...).
    pub fn start(extra: &[&str]) -> Redis {
        Self::start_on(free_port(), "redis", extra)
    }

    /// A server with the append-only file on, fsynced on every write.
    pub fn start_aof() -> Redis {
        Self::start(&["--appendonly", "yes", "--appendfsync", "always"])
    }

    /// A replica of the server on `master_port`.
    pub fn start_replica_of(master_port: u16) -> Redis {
        let port = master_port.to_string();
        Self::start(&["--replicaof", "127.0.0.1", &port])
    }

    /// A cluster node (not yet joined) with the given node timeout.
    pub fn start_cluster_node(node_timeout_ms: u64) -> Redis {
        let timeout = node_timeout_ms.to_string();
        Self::start_on(
            free_cluster_port(),
            "cluster",
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                &timeout,
                "--cluster-replica-validity-factor",
                "0",
            ],
        )
    }

    fn start_on(port: u16, tag: &str, extra: &[&str]) -> Redis {
        tools::ensure();
        let mut port = port;
        for _ in 0..5 {
            let mut redis = Redis {
                port,
                dir: temp_dir(&format!("{tag}-{port}")),
                extra: extra.iter().map(|s| s.to_string()).collect(),
                child: None,
            };
            if redis.try_spawn() {
                return redis;
            }
            // The port was taken between choosing it and binding it: another one.
            port = if tag == "cluster" {
                free_cluster_port()
            } else {
                free_port()
            };
        }
        panic!("redis-server could not bind a free port in 5 tries");
    }

    fn spawn(&mut self) {
        assert!(
            self.try_spawn(),
            "redis-server could not start again on port {}",
            self.port
        );
    }

    fn try_spawn(&mut self) -> bool {
        let log = self.dir.join("redis.log");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "127.0.0.2"])
            .args(["--save", ""])
            .args(["--dir", self.dir.to_str().unwrap()])
            .args(["--logfile", log.to_str().unwrap()])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let ready = wait_ready(self.port, self.child.as_mut().unwrap(), "redis-server");
        if !ready {
            self.child = None;
        }
        ready
    }

    /// `redis://127.0.0.1:PORT`: a direct connection.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The address a proxy connects to (`127.0.0.2:PORT`), so that the server can tell
    /// proxied connections from direct ones.
    pub fn proxy_upstream(&self) -> String {
        format!("127.0.0.2:{}", self.port)
    }

    /// `redis-cli` against this server.
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args)
    }

    /// Kills the server with SIGKILL (no shutdown, no save) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (after [`Redis::kill`]),
    /// and waits until it answers (after loading its AOF).
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        self.spawn();
    }

    /// Starts the server again (after [`Redis::kill`]) as a replica of the server on
    /// `master_port`, as an orchestrator brings a failed master back after a failover,
    /// with `extra` arguments added.
    pub fn start_again_as_replica_of(&mut self, master_port: u16, extra: &[&str]) {
        let port = master_port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", &port];
        args.extend_from_slice(extra);
        self.start_again_with(&args);
    }

    /// Starts the server again (after [`Redis::kill`]) with `extra` arguments added to
    /// those it had.
    pub fn start_again_with(&mut self, extra: &[&str]) {
        self.extra.extend(extra.iter().map(|s| s.to_string()));
        self.start_again();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        if !keep_files() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A `redis-sentinel` process monitoring one master.
pub struct Sentinel {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Sentinel {
    /// A sentinel that monitors `master` at 127.0.0.1:`master_port` with the given quorum
    /// and timings.
    pub fn start(
        master: &str,
        master_port: u16,
        quorum: u32,
        down_after_ms: u64,
        failover_timeout_ms: u64,
    ) -> Sentinel {
        tools::ensure();
        for _ in 0..5 {
            let port = free_port();
            let dir = temp_dir(&format!("sentinel-{port}"));
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\n\
                     bind 127.0.0.1\n\
                     daemonize no\n\
                     dir {dir}\n\
                     logfile {dir}/sentinel.log\n\
                     sentinel monitor {master} 127.0.0.1 {master_port} {quorum}\n\
                     sentinel down-after-milliseconds {master} {down_after_ms}\n\
                     sentinel failover-timeout {master} {failover_timeout_ms}\n\
                     sentinel parallel-syncs {master} 1\n",
                    dir = dir.display()
                ),
            )
            .expect("write sentinel.conf");
            let mut child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-sentinel");
            if wait_ready(port, &mut child, "redis-sentinel") {
                return Sentinel {
                    port,
                    dir,
                    child: Some(child),
                };
            }
            // The port was taken between choosing it and binding it (the log says so):
            // another one.
            let log = std::fs::read_to_string(dir.join("sentinel.log")).unwrap_or_default();
            eprintln!("redis-sentinel on port {port} exited; trying another port:\n{log}");
            if !keep_files() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        panic!("redis-sentinel could not bind a free port in 5 tries");
    }

    /// `redis-cli` against this sentinel.
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args)
    }

    /// The fields of `SENTINEL MASTER name`.
    pub fn master_info(&self, master: &str) -> Vec<(String, String)> {
        let out = self.cli(&["SENTINEL", "MASTER", master]);
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        lines
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].to_owned(), c[1].to_owned()))
            .collect()
    }

    /// The port this sentinel says the master is on.
    pub fn master_port(&self, master: &str) -> Option<u16> {
        let out = self.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", master]);
        out.lines().nth(1).and_then(|p| p.trim().parse().ok())
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !keep_files() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One node of a cluster as `CLUSTER NODES` describes it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node id.
    pub id: String,
    /// Its port.
    pub port: u16,
    /// Master (true) or replica.
    pub master: bool,
    /// Whether its flags say `fail` or `fail?`.
    pub failing: bool,
    /// For a replica: its master's id.
    pub master_id: Option<String>,
    /// Slot ranges it serves (masters).
    pub slots: Vec<(u16, u16)>,
}

/// Parses `CLUSTER NODES`.
pub fn parse_cluster_nodes(text: &str) -> Vec<NodeInfo> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let flags = f[2];
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|a| (a, a)),
                })
                .collect();
            Some(NodeInfo {
                id: f[0].to_owned(),
                port,
                master: flags.contains("master"),
                failing: flags.contains("fail"),
                master_id: (f[3] != "-").then(|| f[3].to_owned()),
                slots,
            })
        })
        .collect()
}

/// A Redis Cluster of three masters and three replicas, formed with
/// `redis-cli --cluster create ... --cluster-replicas 1`.
pub struct Cluster {
    /// Every node, in the order given to `--cluster create`.
    pub nodes: Vec<Redis>,
}

impl Cluster {
    /// Starts six nodes, forms the cluster and waits until every node says
    /// `cluster_state:ok` and every replica's link to its master is up.
    pub fn start(node_timeout_ms: u64) -> Cluster {
        let nodes: Vec<Redis> = (0..6)
            .map(|_| Redis::start_cluster_node(node_timeout_ms))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = cluster
                .nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            let topo = cluster.topology(cluster.nodes[0].port);
            let replicas_up = topo.iter().filter(|n| !n.master).count() == 3
                && topo.iter().filter(|n| !n.master).all(|n| {
                    redis_cli(n.port, &["INFO", "replication"]).contains("master_link_status:up")
                });
            if ok && replicas_up {
                return cluster;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not form within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `CLUSTER NODES` as seen by the node on `port`.
    pub fn topology(&self, port: u16) -> Vec<NodeInfo> {
        parse_cluster_nodes(&redis_cli(port, &["CLUSTER", "NODES"]))
    }

    /// The node serving `slot`, as seen by the node on `port`.
    pub fn master_of_slot(&self, port: u16, slot: u16) -> Option<NodeInfo> {
        self.topology(port).into_iter().find(|n| {
            n.master && !n.failing && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
        })
    }

    /// For a failover of the master `master_id`: the port of its replica, and of a node
    /// that is neither (from which to watch the promotion), as the node on `any` sees them.
    pub fn replica_and_survivor(&self, any: u16, master_id: &str) -> (u16, u16) {
        let topology = self.topology(any);
        let master = topology
            .iter()
            .find(|n| n.id == master_id)
            .expect("the master")
            .port;
        let replica = topology
            .iter()
            .find(|n| n.master_id.as_deref() == Some(master_id))
            .expect("the master's replica")
            .port;
        let survivor = self
            .nodes
            .iter()
            .map(|n| n.port)
            .find(|&p| p != master && p != replica)
            .expect("a surviving node");
        (replica, survivor)
    }

    /// Waits up to 30 s until, as the node on `survivor` sees it, `slot` is served by
    /// the (promoted) node on `replica_port` and the cluster is `ok`. Returns how long it
    /// took, or `None`.
    pub async fn promoted(&self, survivor: u16, slot: u16, replica_port: u16) -> Option<Duration> {
        crate::wait_for(
            Duration::from_secs(30),
            Duration::from_millis(50),
            || async move {
                tokio::task::block_in_place(|| {
                    self.master_of_slot(survivor, slot)
                        .is_some_and(|m| m.port == replica_port)
                        && redis_cli(survivor, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                })
            },
        )
        .await
    }

    /// The node process on `port`.
    pub fn node_mut(&mut self, port: u16) -> &mut Redis {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster")
    }
}
