//! Test helpers: real `redis-server` processes on free loopback ports, stopped on drop.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` started by the test, on a free loopback port.
pub struct RedisServer {
    pub port: u16,
    pub dir: PathBuf,
    aof: bool,
    extra: Vec<String>,
    /// Environment of the server process (the clock shim's).
    env: Vec<(String, String)>,
    child: Option<Child>,
}

fn ensure_installed() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ensure-redis.sh");
            let ok = Command::new("bash")
                .arg(script)
                .status()
                .expect("run ensure-redis.sh");
            assert!(ok.success(), "could not install redis-server");
        }
    });
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits up to 10 s for `answers` to hold while `child` runs: false when it exited first.
fn wait_ready(child: &mut Child, answers: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if answers() {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server did not answer within 10 s");
}

/// The last lines of the server log in `dir`, for a failure message.
fn log_tail(dir: &std::path::Path) -> String {
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

impl RedisServer {
    /// A server without persistence.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A server that also listens on a unix socket at `dir/redis.sock`.
    pub fn start_with_unix_socket() -> Self {
        ensure_installed();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("delayq-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("redis.sock").to_str().unwrap().to_owned();
        let mut server = RedisServer {
            port,
            dir,
            aof: false,
            extra: vec!["--unixsocket".into(), sock],
            env: Vec::new(),
            child: None,
        };
        server.spawn();
        server
    }

    /// A node for a Redis Cluster (cluster mode on, not yet joined).
    pub fn start_cluster_node() -> Self {
        ensure_installed();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("delayq-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ];
        let mut server = RedisServer {
            port,
            dir,
            aof: false,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            child: None,
        };
        server.spawn();
        server
    }

    /// A server with the append-only file on (fsync always), for restart tests.
    pub fn start_with(aof: bool) -> Self {
        ensure_installed();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("delayq-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = RedisServer {
            port,
            dir,
            aof,
            extra: Vec::new(),
            env: Vec::new(),
            child: None,
        };
        server.spawn();
        server
    }

    /// A server whose realtime clock (`TIME` in scripts included) runs the milliseconds
    /// that [`RedisServer::shift_clock`] sets off the machine's: `clock_shift.c`, compiled
    /// with the system's C compiler and preloaded, reads them from a file every 50 ms.
    #[allow(dead_code, reason = "not every test binary steps clocks")]
    pub fn start_with_clock_shift() -> Self {
        ensure_installed();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("delayq-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (source, shim) = (dir.join("clock_shift.c"), dir.join("clock_shift.so"));
        std::fs::write(&source, include_str!("clock_shift.c")).unwrap();
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .args([&shim, &source])
            .status()
            .expect("the clock shim needs a C compiler (cc)");
        assert!(built.success(), "cc failed on clock_shift.c");
        let file = dir.join("clock_offset_ms");
        std::fs::write(&file, "0").unwrap();
        let env = vec![
            ("LD_PRELOAD".into(), shim.to_str().unwrap().to_owned()),
            (
                "DELAYQ_CLOCK_FILE".into(),
                file.to_str().unwrap().to_owned(),
            ),
        ];
        let mut server = RedisServer {
            port,
            dir,
            aof: false,
            extra: Vec::new(),
            env,
            child: None,
        };
        server.spawn();
        server
    }

    /// Steps the clock of a [`RedisServer::start_with_clock_shift`] server to `ms` off the
    /// machine's, and returns once its `TIME` shows it.
    #[allow(dead_code, reason = "not every test binary steps clocks")]
    pub fn shift_clock(&self, ms: i64) {
        std::fs::write(self.dir.join("clock_offset_ms"), ms.to_string()).unwrap();
        let machine = || {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            d.unwrap().as_millis() as i64
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let time = self.cli(&["TIME"]);
            let mut parts = time.lines().map(|l| l.trim().parse::<i64>().unwrap());
            let server = parts.next().unwrap() * 1000 + parts.next().unwrap() / 1000;
            if (server - machine() - ms).abs() < 500 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server's clock did not step to {ms} ms"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server on its port, or, the first time only, on another free port when
    /// the chosen one was taken meanwhile (an outgoing connection of another test may
    /// draw the same ephemeral port between `free_port` and the server's bind).
    fn spawn(&mut self) {
        let first = self.child.is_none() && !self.dir.join("redis.log").exists();
        for _ in 0..5 {
            if self.spawn_once() {
                return;
            }
            if first {
                self.port = free_port();
            }
        }
        panic!(
            "redis-server on port {} did not start: {}",
            self.port,
            log_tail(&self.dir)
        );
    }

    /// Starts the server; false when it exited before answering (its log says why).
    fn spawn_once(&mut self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--dir", self.dir.to_str().unwrap()])
        .args(["--appendonly", if self.aof { "yes" } else { "no" }])
        .args(["--appendfsync", "always"])
        .args(&self.extra)
        .envs(self.env.iter().map(|(k, v)| (k, v)))
        .args(["--logfile", self.dir.join("redis.log").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("start redis-server");
        let port = self.port;
        let ready = wait_ready(&mut child, || {
            let out = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "ping"])
                .output();
            out.is_ok_and(|out| out.stdout.starts_with(b"PONG"))
        });
        self.child = Some(child);
        if !ready {
            self.stop();
        }
        ready
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server process (SIGSTOP) until the guard is dropped (SIGCONT): the kernel
    /// still accepts connections, but nothing answers on them.
    #[allow(dead_code, reason = "not every test binary freezes its server")]
    pub fn freeze(&self) -> impl Drop {
        struct Thaw(u32);
        impl Drop for Thaw {
            fn drop(&mut self) {
                let _ = Command::new("kill")
                    .args(["-CONT", &self.0.to_string()])
                    .status();
            }
        }
        let pid = self.child.as_ref().expect("running").id();
        let stopped = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status();
        assert!(stopped.expect("kill").success());
        Thaw(pid)
    }

    /// Runs redis-cli against this server and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Kills the server (SIGKILL after an AOF fsync of every write) and starts it again on
    /// the same port and directory.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// [`RedisServer::restart`], down for `down` in between (connections refused).
    #[allow(dead_code, reason = "not every test binary restarts servers")]
    pub fn restart_after(&mut self, down: Duration) {
        self.stop();
        std::thread::sleep(down);
        self.spawn();
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits for `cond` to hold, checking every 10 ms, up to `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A three-node Redis Cluster of [`RedisServer`]s, formed with `redis-cli --cluster create`.
pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    pub fn start() -> Self {
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

    /// Adds a replica of the first node and waits until the cluster lists it in its slots
    /// (so that a client's topology names it).
    #[allow(dead_code, reason = "not every test binary needs replicas")]
    pub fn add_replica(&self) -> RedisServer {
        let replica = RedisServer::start_cluster_node();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("add-node")
            .arg(format!("127.0.0.1:{}", replica.port))
            .arg(format!("127.0.0.1:{}", self.nodes[0].port))
            .arg("--cluster-slave")
            .output()
            .expect("redis-cli --cluster add-node");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let port = replica.port.to_string();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !self.nodes.iter().all(|n| {
            n.cli(&["CLUSTER", "SLOTS"])
                .lines()
                .any(|l| l.trim() == port)
        }) || !replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
        {
            assert!(std::time::Instant::now() < deadline, "replica did not join");
            std::thread::sleep(Duration::from_millis(50));
        }
        replica
    }

    /// The URL of every node.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }
}

/// Certificates made with the `openssl` command for one test, in a directory of their own
/// (removed on drop): a CA (`ca.crt`), a server certificate for 127.0.0.1 signed by it
/// (`server.crt`/`server.key`), a client certificate signed by it (`client.crt`/`client.key`),
/// and a second CA that signed neither (`other-ca.crt`, the wrong CA).
pub struct TestCerts {
    pub dir: PathBuf,
}

impl TestCerts {
    pub fn make() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("delayq-certs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let certs = TestCerts { dir };
        certs.make_ca("ca");
        certs.make_ca("other-ca");
        certs.make_leaf(
            "server",
            "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        );
        certs.make_leaf(
            "client",
            "delayq-test-client",
            "extendedKeyUsage=clientAuth\n",
        );
        certs
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .current_dir(&self.dir)
            .args(args)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A self-signed CA: `NAME.crt`, `NAME.key`.
    fn make_ca(&self, name: &str) {
        let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
        let subj = format!("/CN=delayq test {name}");
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &subj,
            "-keyout",
            &key,
            "-out",
            &crt,
        ]);
    }

    /// A certificate signed by `ca`: `NAME.crt`, `NAME.key`, with the extensions `ext`.
    fn make_leaf(&self, name: &str, cn: &str, ext: &str) {
        let (crt, key, csr, extfile) = (
            format!("{name}.crt"),
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.ext"),
        );
        std::fs::write(
            self.dir.join(&extfile),
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{ext}"),
        )
        .unwrap();
        let subj = format!("/CN={cn}");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &subj,
            "-keyout",
            &key,
            "-out",
            &csr,
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &extfile,
            "-out",
            &crt,
        ]);
    }

    /// The path of one of the files (`ca.crt`, `client.key`, ...).
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The path of one of the files, as a `&str`-friendly `String`.
    pub fn file(&self, file: &str) -> String {
        self.path(file).to_str().unwrap().to_owned()
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` that speaks only TLS (`--port 0 --tls-port P`), with a certificate of
/// its own [`TestCerts`]; with `auth_clients`, it requires a client certificate signed by
/// the test CA (`--tls-auth-clients yes`).
pub struct TlsRedisServer {
    pub port: u16,
    pub certs: TestCerts,
    child: Option<Child>,
}

impl TlsRedisServer {
    pub fn start(auth_clients: bool) -> Self {
        ensure_installed();
        let certs = TestCerts::make();
        for _ in 0..5 {
            let port = free_port();
            if let Some(child) = Self::start_on(port, &certs, auth_clients) {
                let child = Some(child);
                return TlsRedisServer { port, certs, child };
            }
        }
        panic!(
            "redis-server with TLS did not start: {}",
            log_tail(&certs.dir)
        );
    }

    /// The server on `port`, or None when it exited before answering (the port was taken;
    /// its log says why).
    fn start_on(port: u16, certs: &TestCerts, auth_clients: bool) -> Option<Child> {
        let mut child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &certs.file("")])
            .args(["--logfile", &certs.file("redis.log")])
            .args(["--tls-cert-file", &certs.file("server.crt")])
            .args(["--tls-key-file", &certs.file("server.key")])
            .args(["--tls-ca-cert-file", &certs.file("ca.crt")])
            .args([
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let ready = wait_ready(&mut child, || tls_cli(port, certs, &["PING"]) == "PONG");
        if ready {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// `rediss://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }

    /// Runs redis-cli over TLS (with the client certificate) and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        tls_cli(self.port, &self.certs, args)
    }
}

/// redis-cli over TLS to `port`, with the client certificate of `c`: its stdout.
fn tls_cli(port: u16, c: &TestCerts, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls"])
        .args(["--cacert", &c.file("ca.crt")])
        .args(["--cert", &c.file("client.crt")])
        .args(["--key", &c.file("client.key")])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Drop for TlsRedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `redis-sentinel` on a free loopback port watching one master (quorum 1).
pub struct Sentinel {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Sentinel {
    /// Watches `master` under the name `name`; returns once the sentinel knows the master.
    pub fn start(master: &RedisServer, name: &str) -> Self {
        ensure_installed();
        for _ in 0..5 {
            if let Some(sentinel) = Self::try_start(free_port(), master, name) {
                return sentinel;
            }
        }
        panic!("redis-sentinel could not bind a free port in 5 tries");
    }

    /// A sentinel on `port`, or None when it exited: the port was taken between choosing it
    /// and binding it.
    fn try_start(port: u16, master: &RedisServer, name: &str) -> Option<Self> {
        let dir =
            std::env::temp_dir().join(format!("delayq-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {name} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {name} 1000\n",
                dir.display(),
                master.port
            ),
        )
        .unwrap();
        let child = Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-sentinel");
        let mut sentinel = Sentinel {
            port,
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let want = master.port.to_string();
        while !sentinel
            .cli(&["SENTINEL", "get-master-addr-by-name", name])
            .contains(&want)
        {
            let child = sentinel.child.as_mut().expect("a child");
            if matches!(child.try_wait(), Ok(Some(_))) {
                eprintln!("redis-sentinel on port {port} exited; trying another port");
                return None;
            }
            assert!(Instant::now() < deadline, "redis-sentinel did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(sentinel)
    }

    /// Runs redis-cli against the sentinel and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
