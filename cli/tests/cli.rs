//! The `delayq` command line as a user runs it: separate processes, a real server.

#[path = "../../core/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::RedisServer;

fn delayq(server: &RedisServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url()])
        .args(args)
        .env_remove("REDIS_URL")
        .output()
        .expect("run delayq")
}

/// `delayq` with `input` on its stdin.
fn delayq_fed(server: &RedisServer, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url()])
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run delayq");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().expect("run delayq")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn offer_then_take_prints_the_value_when_due() {
    let server = RedisServer::start();
    let offered = delayq(&server, &["offer", "orders", "700", "hello"]);
    assert!(offered.status.success());
    let due: i64 = stdout(&offered).trim().parse().expect("due time in ms");
    let start = Instant::now();
    let took = delayq(&server, &["take", "orders", "--timeout-ms", "5000"]);
    assert!(took.status.success());
    assert_eq!(stdout(&took), "hello\n");
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "not before its time"
    );
    let now: i64 = server
        .cli(&["TIME"])
        .lines()
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap()
        * 1000;
    assert!(now + 1000 >= due);
}

#[test]
fn a_consumer_only_process_delivers_after_the_producer_exited() {
    let server = RedisServer::start();
    // Each offer is its own process that exits at once and runs no transfer task.
    for v in ["one", "two", "three"] {
        assert!(delayq(&server, &["offer", "lonely", "300", v])
            .status
            .success());
    }
    let took = delayq(
        &server,
        &["take", "lonely", "--count", "3", "--timeout-ms", "5000"],
    );
    let mut lines: Vec<String> = stdout(&took).lines().map(str::to_owned).collect();
    lines.sort();
    assert_eq!(lines, ["one", "three", "two"]);
}

#[test]
fn base64_carries_binary_values_and_stdin_is_read() {
    let server = RedisServer::start();
    // \x00\xff\xfe binary, as base64.
    assert!(delayq(&server, &["--base64", "offer", "bin", "0", "AP/+"])
        .status
        .success());
    let out = delayq_fed(&server, &["offer", "bin", "0"], b"from stdin\n");
    assert!(out.status.success());
    // Wrapped lines, as `base64 FILE` writes them, are one value.
    let wrapped =
        "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\nQUFBQQ==\n";
    let out = delayq_fed(
        &server,
        &["--base64", "offer", "wrapped", "0"],
        wrapped.as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    let took = delayq(&server, &["take", "wrapped", "--timeout-ms", "5000"]);
    assert_eq!(stdout(&took).trim_end(), "A".repeat(61));
    let took = delayq(
        &server,
        &[
            "take",
            "bin",
            "--count",
            "2",
            "--timeout-ms",
            "5000",
            "--base64",
        ],
    );
    let mut lines: Vec<String> = stdout(&took).lines().map(str::to_owned).collect();
    lines.sort();
    assert_eq!(lines, ["AP/+", "ZnJvbSBzdGRpbg=="]);
}

#[test]
fn take_exits_when_the_timeout_passes() {
    let server = RedisServer::start();
    let start = Instant::now();
    let took = delayq(
        &server,
        &["take", "empty", "--timeout-ms", "300", "--count", "5"],
    );
    assert!(took.status.success());
    assert_eq!(stdout(&took), "");
    assert!(start.elapsed() >= Duration::from_millis(300));
}

/// `--timeout-ms` counts the connect too: against a server that accepts connections and
/// never answers, `take` and `reliable receive` give up within the timeout plus the margin
/// of a blocking call (1.5 s), not after the 5 s connect timeout.
#[test]
fn timeout_ms_bounds_the_connect_too() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}", silent.local_addr().unwrap().port());
    for args in [
        &["take", "s", "--timeout-ms", "500"][..],
        &["reliable", "receive", "r", "--timeout-ms", "500"][..],
    ] {
        let start = Instant::now();
        let mut all = vec!["--url", &url];
        all.extend_from_slice(args);
        let out = delayq_env(&all, &[]);
        let took = start.elapsed();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("no connection to Redis within the timeout (plus 2s)"),
            "{args:?}: {out:?}"
        );
        assert!(took < Duration::from_millis(3500), "{args:?} took {took:?}");
    }
    drop(silent);
}

#[test]
fn stats_prints_the_counts() {
    let server = RedisServer::start();
    delayq(&server, &["offer", "counted", "60000", "a"]);
    delayq(&server, &["offer", "counted", "60000", "b"]);
    let out = stdout(&delayq(&server, &["stats", "counted"]));
    assert_eq!(out, "delayed 2\nready 0\ncorrupt 0\n");
}

/// `stats` runs one transfer pass first: an entry already due is ready, though no process
/// runs a transfer task (the offer exited at once, and ran none).
#[test]
fn stats_counts_a_due_entry_as_ready() {
    let server = RedisServer::start();
    delayq(&server, &["offer", "due", "0", "now"]);
    delayq(&server, &["offer", "due", "60000", "later"]);
    assert_eq!(server.cli(&["LLEN", "due"]), "0", "nothing moved it yet");
    let out = stdout(&delayq(&server, &["stats", "due"]));
    assert_eq!(out, "delayed 1\nready 1\ncorrupt 0\n");
}

/// An environment variable of an option set but empty counts as unset: `REDIS_URL=` does
/// not make an empty URL, `DELAYQ_WAIT_TIMEOUT_MS=` no unparsable number.
#[test]
fn empty_environment_variables_count_as_unset() {
    let server = RedisServer::start();
    let empty = [
        ("REDIS_URL", ""),
        ("DELAYQ_TLS_CA_FILE", ""),
        ("DELAYQ_TLS_CERT_FILE", ""),
        ("DELAYQ_TLS_KEY_FILE", ""),
        ("DELAYQ_WAIT_REPLICAS", ""),
        ("DELAYQ_WAIT_AOF", ""),
        ("DELAYQ_WAIT_TIMEOUT_MS", ""),
    ];
    let out = delayq_env(&["--url", &server.url(), "stats", "q"], &empty);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout(&out), "delayed 0\nready 0\ncorrupt 0\n");
}

#[test]
fn transfer_moves_due_entries_until_interrupted() {
    let server = RedisServer::start();
    let mut transfer = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--url",
            &server.url(),
            "transfer",
            "moved",
            "other",
            "--reconcile-ms",
            "200",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    delayq(&server, &["offer", "moved", "100", "x"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.cli(&["LLEN", "moved"]) != "1" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.cli(&["LRANGE", "moved", "0", "-1"]), "x");
    Command::new("kill")
        .args(["-INT", &transfer.id().to_string()])
        .status()
        .unwrap();
    assert!(transfer.wait().unwrap().success());
}

#[test]
fn transfer_without_reliable_moves_a_reliable_queue_found_in_redis() {
    let server = RedisServer::start();
    // A reliable queue with a message due soon, and no process moving it.
    let offer = ["reliable", "offer", "rq", "300", "due-soon"];
    assert!(delayq(&server, &offer).status.success());
    assert_eq!(server.cli(&["XLEN", "{dq:rq}:ready"]), "0");
    let transfer = spawn_transfer(&server, "rq");
    let said = stopped_once_ready(&server, transfer, "{dq:rq}:ready");
    assert!(said.contains("rq is also a reliable queue"), "{said}");
}

/// `delayq transfer QUEUE --reconcile-ms 200`, its standard error piped.
fn spawn_transfer(server: &RedisServer, queue: &str) -> std::process::Child {
    let url = server.url();
    let args = ["--url", &url, "transfer", queue, "--reconcile-ms", "200"];
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits up to 10 s for the stream `ready` to hold one message, interrupts `transfer`,
/// asserts both, and returns what it said on standard error.
fn stopped_once_ready(server: &RedisServer, transfer: std::process::Child, ready: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.cli(&["XLEN", ready]) != "1" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let count = server.cli(&["XLEN", ready]);
    // Stopped before any assertion: a failed test leaves no process behind.
    Command::new("kill")
        .args(["-INT", &transfer.id().to_string()])
        .status()
        .unwrap();
    let out = transfer.wait_with_output().unwrap();
    assert_eq!(count, "1", "made ready");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `transfer` started before Redis is reachable says so and waits for it, then moves the
/// queue's due entries (a daemon started while the host boots).
#[test]
fn transfer_started_before_redis_waits_for_it() {
    let mut server = RedisServer::start();
    server.stop();
    let mut transfer = spawn_transfer(&server, "early");
    let mut said = std::io::BufReader::new(transfer.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert!(line.contains("cannot reach Redis yet"), "{line}");
    server.restart();
    assert!(delayq(&server, &["offer", "early", "100", "v"])
        .status
        .success());
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.cli(&["LLEN", "early"]) != "1" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let moved = server.cli(&["LLEN", "early"]);
    Command::new("kill")
        .args(["-INT", &transfer.id().to_string()])
        .status()
        .unwrap();
    assert!(transfer.wait().unwrap().success());
    assert_eq!(moved, "1", "moved once Redis was up");
}

/// A refused password is no server still starting: `transfer` exits 1 and says why.
#[test]
fn transfer_ends_on_a_refused_password() {
    let server = RedisServer::start();
    assert_eq!(server.cli(&["CONFIG", "SET", "requirepass", "right"]), "OK");
    let url = format!("redis://:wrong@127.0.0.1:{}", server.port);
    let transfer = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &url, "transfer", "pw"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ended, out) = within_10s(transfer);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ended.and_then(|s| s.code()), Some(1), "{said}");
    assert!(!said.contains("cannot reach Redis yet"), "{said}");
    assert!(!said.contains("wrong"), "{said}");
}

/// A reliable queue created after `transfer` started (named without `--reliable`) is
/// found and moved too.
#[test]
fn transfer_without_reliable_moves_a_reliable_queue_created_later() {
    let server = RedisServer::start();
    let transfer = spawn_transfer(&server, "late");
    // Running: subscribed to the delayed queue's channel.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server
        .cli(&["PUBSUB", "NUMSUB", "redisson_delay_queue_channel:{late}"])
        .lines()
        .nth(1)
        != Some("1")
    {
        assert!(Instant::now() < deadline, "transfer never subscribed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let offer = ["reliable", "offer", "late", "300", "due-soon"];
    assert!(delayq(&server, &offer).status.success());
    let said = stopped_once_ready(&server, transfer, "{dq:late}:ready");
    assert!(said.contains("late is now also a reliable queue"), "{said}");
}

#[test]
fn transfer_of_a_reliable_queue_checks_the_settings_it_names() {
    let server = RedisServer::start();
    let configure = ["reliable", "configure", "rq", "--visibility-ms", "1000"];
    assert!(delayq(&server, &configure).status.success());
    // A different visibility timeout is refused, as by any other handle, and stores nothing.
    let differ = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "transfer", "--reliable", "rq"])
        .args(["--visibility-ms", "5000"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Without the check it would run until interrupted: killed after 10 s, not hung.
    let (_, out) = within_10s(differ);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("differ"),
        "{out:?}"
    );
    let stats = stdout(&delayq(&server, &["reliable", "stats", "rq"]));
    assert!(stats.contains("visibility_ms 1000"), "{stats}");
    // On a queue with no settings yet, the ones named are stored.
    let mut transfer = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "transfer", "--reliable", "fresh"])
        .args(["--visibility-ms", "1500", "--max-attempts", "3"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let stored = || stdout(&delayq(&server, &["reliable", "stats", "fresh"]));
    while !stored().contains("visibility_ms 1500") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = stored();
    assert!(stats.contains("visibility_ms 1500"), "{stats}");
    assert!(stats.contains("max_attempts 3"), "{stats}");
    let pid = transfer.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(transfer.wait().unwrap().success());
}

#[test]
fn exit_codes_say_usage_or_error() {
    let server = RedisServer::start();
    assert_eq!(delayq(&server, &["bogus"]).status.code(), Some(2));
    assert_eq!(delayq(&server, &["offer", "q"]).status.code(), Some(2));
    assert_eq!(
        delayq(&server, &["offer", "", "5", "x"]).status.code(),
        Some(2)
    );
    // Both outputs a closed pipe (`delayq ... 2>&1 | true`): the error cannot be shown,
    // and the exit code still says error (it was a panic's 101).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", "redis://127.0.0.1:1", "stats", "q"])
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    // A count of 0 would wait for nothing.
    for zero in [
        &["take", "q", "--count", "0"][..],
        &["reliable", "receive", "q", "--count", "0"][..],
    ] {
        assert_eq!(delayq(&server, zero).status.code(), Some(2), "{zero:?}");
    }
    // Options bench would not honour are refused, not ignored.
    for refused in [
        &["--wait-replicas", "1", "bench", "offer"][..],
        &["--cluster", "bench", "offer"][..],
        &["--tls-ca-file", "/nonexistent", "bench", "offer"][..],
    ] {
        let out = delayq(&server, refused);
        assert_eq!(out.status.code(), Some(2), "{refused:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("bench measures the one server"), "{err}");
    }
    // A webhook timeout of 0 would fail every attempt at once.
    let serve = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--webhook-timeout-ms",
        "0",
    ];
    assert_eq!(delayq(&server, &serve).status.code(), Some(2));
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--url",
            &format!("redis://:hunter2@127.0.0.1:{free}"),
            "stats",
            "q",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
    server.cli(&["SET", "str", "x"]);
    let out = delayq(&server, &["offer", "str", "0", "v"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong type"));
    // A take with no timeout on a queue no transfer can move (its timeout set is a hash)
    // ends with 1, not waiting forever.
    server.cli(&["HSET", "redisson_delay_queue_timeout:{hz}", "a", "b"]);
    let take = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "take", "hz"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ended, out) = within_10s(take);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ended.and_then(|s| s.code()), Some(1), "{said}");
    assert!(said.contains("holds a hash, not a zset"), "{said}");
}

/// `take --count 5 | head -1`: once `head` has its line and exits, take stops waiting for
/// the next value (which it could not print) instead of waiting for it forever, and exits
/// 1 saying why.
#[test]
fn a_take_whose_reader_went_away_stops_waiting() {
    let server = RedisServer::start();
    server.cli(&["RPUSH", "gone", "first"]);
    let mut take = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "take", "gone", "--count", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(take.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "first");
    drop(lines);
    let (ended, out) = within_10s(take);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ended.and_then(|s| s.code()), Some(1), "{said}");
    assert!(
        said.contains("standard output was closed by its reader"),
        "{said}"
    );
    server.cli(&["RPUSH", "gone", "second"]);
    assert_eq!(server.cli(&["LRANGE", "gone", "0", "-1"]), "second");
}

/// `take Q | head -1`: the reader going away after the one value it asked for is no error.
#[test]
fn a_take_that_printed_all_it_was_asked_for_exits_0_after_its_reader_left() {
    let server = RedisServer::start();
    for _ in 0..20 {
        server.cli(&["RPUSH", "head", "x"]);
        let mut take = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url(), "take", "head"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(take.stdout.take().unwrap()));
        assert_eq!(lines.next().unwrap().unwrap(), "x");
        drop(lines);
        let (ended, out) = within_10s(take);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(ended.and_then(|s| s.code()), Some(0), "{said}");
    }
}

/// `child`'s exit status if it ended within 10 s (it is killed then), and its output.
fn within_10s(mut child: std::process::Child) -> (Option<std::process::ExitStatus>, Output) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = child.try_wait().unwrap();
    let _ = child.kill();
    (ended, child.wait_with_output().unwrap())
}

#[test]
fn global_options_may_follow_the_command() {
    let server = RedisServer::start();
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "offer",
            "late-opts",
            "0",
            "aGk=",
            "--base64",
            "--url",
            &server.url(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let took = delayq(&server, &["take", "late-opts", "--timeout-ms", "3000"]);
    assert_eq!(stdout(&took), "hi\n");
}

#[test]
fn take_with_a_zero_timeout_prints_what_is_due_and_stays_quiet() {
    let server = RedisServer::start();
    for v in ["a", "b"] {
        assert!(delayq(&server, &["offer", "now", "0", v]).status.success());
    }
    assert!(delayq(&server, &["offer", "now", "3600000", "later"])
        .status
        .success());
    // Nobody has moved the due entries yet: the zero-timeout take must do it itself.
    let took = delayq(
        &server,
        &["take", "now", "--count", "5", "--timeout-ms", "0"],
    );
    assert!(took.status.success());
    assert_eq!(stdout(&took), "a\nb\n");
    let empty = delayq(&server, &["take", "now", "--timeout-ms", "0"]);
    assert!(empty.status.success());
    assert_eq!(stdout(&empty), "");
    for o in [&took, &empty] {
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "nothing on stderr");
    }
}

#[test]
fn cluster_seeds_reach_every_node() {
    let cluster = common::Cluster::start();
    let seeds = cluster.seeds().join(",");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--cluster", "--url", &seeds])
            .args(args)
            .env_remove("REDIS_URL")
            .output()
            .expect("run delayq")
    };
    // Names whose keys live on different nodes.
    for name in ["orders", "invoices", "emails"] {
        let offered = run(&["offer", name, "0", name]);
        assert!(offered.status.success(), "{offered:?}");
        let took = run(&["take", name, "--timeout-ms", "5000"]);
        assert_eq!(stdout(&took), format!("{name}\n"), "{took:?}");
        let job = run(&["reliable", "offer", name, "0", "job"]);
        assert!(job.status.success(), "{job:?}");
    }
}

/// `delayq` with `args` and `env`, and no connection settings from the environment.
fn delayq_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(args);
    for var in [
        "REDIS_URL",
        "DELAYQ_TLS_CA_FILE",
        "DELAYQ_TLS_CERT_FILE",
        "DELAYQ_TLS_KEY_FILE",
        "DELAYQ_WAIT_REPLICAS",
        "DELAYQ_WAIT_AOF",
        "DELAYQ_WAIT_TIMEOUT_MS",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).output().expect("run delayq")
}

#[test]
fn mutual_tls_from_options_or_environment() {
    let server = common::TlsRedisServer::start(true);
    let c = &server.certs;
    let (ca, cert, key) = (c.file("ca.crt"), c.file("client.crt"), c.file("client.key"));
    let url = server.url();
    let out = delayq_env(
        &[
            "--url",
            &url,
            "--tls-ca-file",
            &ca,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "offer",
            "tls",
            "0",
            "hello",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same from the environment.
    let env = [
        ("REDIS_URL", url.as_str()),
        ("DELAYQ_TLS_CA_FILE", ca.as_str()),
        ("DELAYQ_TLS_CERT_FILE", cert.as_str()),
        ("DELAYQ_TLS_KEY_FILE", key.as_str()),
    ];
    let took = delayq_env(&["take", "tls", "--timeout-ms", "5000"], &env);
    assert!(
        took.status.success(),
        "{}",
        String::from_utf8_lossy(&took.stderr)
    );
    assert_eq!(stdout(&took), "hello\n");
    // No client certificate: the server refuses, exit code 1, and the error says why.
    let out = delayq_env(&["--tls-ca-file", &ca, "stats", "tls"], &env[..2]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("connection error") && err.contains("CertificateRequired"),
        "{err}"
    );
    // A CA that did not sign the server's certificate.
    let other = c.file("other-ca.crt");
    let out = delayq_env(&["--tls-ca-file", &other, "stats", "tls"], &env);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("UnknownIssuer"), "{err}");
    // A certificate without its key is a usage error.
    let out = delayq_env(&["stats", "tls"], &env[..3]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn durability_options_reach_core() {
    let server = RedisServer::start();
    let url = server.url();
    // No replica: the offer is applied, but not confirmed in time, and the CLI says so.
    let out = delayq_env(
        &[
            "--url",
            &url,
            "--wait-replicas",
            "1",
            "--wait-timeout-ms",
            "200",
            "offer",
            "durable",
            "60000",
            "v",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timed out") && err.contains("replica"),
        "{err}"
    );
    let out = delayq_env(
        &["offer", "durable", "60000", "v"],
        &[("REDIS_URL", &url), ("DELAYQ_WAIT_REPLICAS", "0")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = delayq_env(&["--url", &url, "--wait-replicas", "-1", "stats", "q"], &[]);
    assert_eq!(out.status.code(), Some(2));
}

/// Credentials in a URL never reach stdout or stderr: not in errors, not in the transfer
/// banner, not in `--help` (which shows the environment's defaults), not in trace logs.
#[test]
fn credentials_are_never_printed() {
    const SECRET: &str = "s3cret";
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let check = |what: &str, out: &Output| {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains(SECRET), "{what} printed the secret: {all}");
    };
    let trace = [("RUST_LOG", "trace")];
    for url in [
        format!("redis+unix:///nonexistent.sock?pass={SECRET}"),
        format!("redis+unix:///nonexistent.sock?db=1&user=u&password={SECRET}"),
        format!("redis://user:{SECRET}@127.0.0.1:1"),
        format!("redis://user:{SECRET}@127.0.0.1:{free}/0"),
        format!("rediss://:{SECRET}@127.0.0.1:{free}"),
        format!("redis+sentinel://u:{SECRET}@127.0.0.1:{free},127.0.0.1:1/mymaster/2"),
        format!("redis://user:{SECRET}@[::1"),
        format!("bogus://user:{SECRET}@host"),
    ] {
        let out = delayq_env(&["--url", &url, "stats", "q"], &trace);
        assert!(!out.status.success(), "{url} failed");
        check(&url, &out);
        let out = delayq_env(&["--cluster", "--url", &url, "stats", "q"], &trace);
        check(&url, &out);
        let out = delayq_env(&["--help"], &[("REDIS_URL", &url)]);
        check("--help", &out);
    }
    // A real server with an ACL user: a wrong password, then the transfer banner.
    let server = RedisServer::start();
    let pass = format!(">{SECRET}");
    server.cli(&["ACL", "SETUSER", "app", "on", &pass, "~*", "&*", "+@all"]);
    let url = format!("redis://app:wrong{SECRET}@127.0.0.1:{}", server.port);
    let out = delayq_env(&["--url", &url, "stats", "q"], &trace);
    assert_eq!(out.status.code(), Some(1));
    check("a wrong password", &out);
    let url = format!("redis://app:{SECRET}@127.0.0.1:{}", server.port);
    let out = delayq_env(&["--url", &url, "stats", "q"], &trace);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check("stats", &out);
    let mut transfer = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &url, "transfer", "q"])
        .env_remove("REDIS_URL")
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner comes after the connection; read stderr up to it.
    let mut stderr = std::io::BufReader::new(transfer.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    use std::io::BufRead;
    while !seen.contains("moving due entries") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no banner: {seen}"
        );
        seen.push_str(&line);
    }
    Command::new("kill")
        .args(["-INT", &transfer.id().to_string()])
        .status()
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    seen.push_str(&rest);
    let out = transfer.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(seen.contains("redis://***:***@127.0.0.1"), "{seen}");
    assert!(!seen.contains(SECRET), "{seen}");
    assert!(seen.contains(" DEBUG "), "logs written: {seen}");
    assert!(
        !seen.contains('\x1b'),
        "no colour codes when stderr is no terminal: {seen:?}"
    );
    check("transfer", &out);
}

/// One HTTP/1.1 request on a fresh connection; returns the status line and the body.
fn http(port: u16, method: &str, path: &str, token: Option<&str>, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[test]
fn serve_answers_http_with_the_token_from_the_environment_and_stops_on_ctrl_c() {
    let server = RedisServer::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // --port alone: on 127.0.0.1.
    let listen = format!("127.0.0.1:{port}");
    let serve = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "serve", "--port", &port.to_string()])
        .env("DELAYQ_TOKEN", "cli-token")
        .env_remove("DELAYQ_WEBHOOK_SECRET")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "delayq serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let offer = r#"{"payload":"from curl","id":"c-1"}"#;
    let (status, _) = http(port, "POST", "/v1/queues/web/messages", None, offer);
    assert!(status.contains(" 401 "), "{status}");
    let (status, body) = http(
        port,
        "POST",
        "/v1/queues/web/messages",
        Some("cli-token"),
        offer,
    );
    assert!(status.contains(" 201 "), "{status} {body}");
    let (status, body) = http(port, "GET", "/v1/queues", None, "");
    assert!(
        status.contains(" 200 ") && body.contains(r#""name":"web""#),
        "{body}"
    );
    let (status, body) = http(port, "GET", "/metrics", None, "");
    assert!(status.contains(" 200 "), "{status}");
    assert!(
        body.contains(r#"delayq_offered_total{queue="web",kind="reliable"} 1"#)
            && body.contains(r#"delayq_queue_up{queue="web",kind="reliable"} 1"#),
        "{body}"
    );
    let (status, body) = http(port, "GET", "/", None, "");
    assert!(
        status.contains(" 200 ") && body.contains("delayq"),
        "{status}"
    );
    Command::new("kill")
        .args(["-INT", &serve.id().to_string()])
        .status()
        .unwrap();
    let out = serve.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(&format!("serving on http://{listen}")),
        "{log}"
    );
    assert!(!log.contains("cli-token"), "the token is never printed");
}

#[test]
fn serve_warns_of_unverifiable_webhook_signatures_and_ctrl_c_ends_a_long_poll_at_once() {
    let server = RedisServer::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let serve = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "serve", "--listen", &listen])
        .env("DELAYQ_TOKEN", "cli-token")
        .env_remove("DELAYQ_WEBHOOK_SECRET")
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "delayq serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = http(port, "GET", "/v1/server", None, "");
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains(r#""webhook_signing":false"#), "{body}");
    let poll = std::thread::spawn(move || {
        let got = http(
            port,
            "POST",
            "/v1/queues/lp/receive",
            Some("cli-token"),
            r#"{"wait_ms":20000}"#,
        );
        (got, Instant::now())
    });
    // The long poll is under way once Redis holds its blocking read.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = server.cli(&["INFO", "clients"]);
        if info
            .lines()
            .any(|l| l.starts_with("blocked_clients:") && l.trim() != "blocked_clients:0")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no long poll under way: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let interrupted = Instant::now();
    Command::new("kill")
        .args(["-INT", &serve.id().to_string()])
        .status()
        .unwrap();
    let out = serve.wait_with_output().unwrap();
    let exited = interrupted.elapsed();
    assert!(out.status.success());
    assert!(exited < Duration::from_secs(5), "exit took {exited:?}");
    let ((status, body), answered) = poll.join().unwrap();
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains(r#""deliveries":[]"#), "{body}");
    assert!(answered - interrupted < Duration::from_secs(5));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("WARN") && log.contains("DELAYQ_WEBHOOK_SECRET is not set"),
        "{log}"
    );
    assert!(!log.contains('\x1b'), "no colour codes in a pipe: {log:?}");
}

/// `serve` tells a bad setting (exit 2, usage) from an address it cannot listen on (exit
/// 1), and neither is called a connection error: Redis was reached.
#[test]
fn serve_start_up_failures_are_named_for_what_they_are() {
    let server = RedisServer::start();
    let serve = |listen: &str, hosts: &str| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url(), "serve", "--listen", listen])
            .env_remove("REDIS_URL")
            .env_remove("DELAYQ_TOKEN")
            .env("DELAYQ_ALLOWED_HOSTS", hosts)
            .output()
            .expect("run delayq serve")
    };

    let bad = serve("127.0.0.1:0", "a b/c");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("DELAYQ_ALLOWED_HOSTS") && err.contains("b/c"),
        "{err}"
    );
    assert!(!err.contains("connection"), "{err}");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let busy = serve(&addr, "");
    let err = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(busy.status.code(), Some(1), "{err}");
    assert!(
        err.contains("could not serve") && !err.contains("connection"),
        "{err}"
    );
}

/// Ctrl-C or SIGTERM just as a value is handed over never loses it: the value is printed,
/// or it is still at the head of the queue. 40 interrupts, 0 to 3 ms after the value was
/// pushed to a blocked `take`, which then exits 0.
#[test]
fn an_interrupted_take_loses_no_value() {
    let server = RedisServer::start();
    let mut lost = Vec::new();
    for i in 0..40u64 {
        let take = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url(), "take", "sig", "--count", "1"])
            .env_remove("REDIS_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let blocked = Instant::now() + Duration::from_secs(10);
        while !server
            .cli(&["INFO", "clients"])
            .contains("blocked_clients:1")
        {
            assert!(Instant::now() < blocked, "take never blocked");
            std::thread::sleep(Duration::from_millis(2));
        }
        let value = format!("v{i}");
        server.cli(&["RPUSH", "sig", &value]);
        std::thread::sleep(Duration::from_millis(i % 4)); // the injection's timing
        let signal = if i % 2 == 0 { "-INT" } else { "-TERM" };
        let pid = take.id().to_string();
        Command::new("kill").args([signal, &pid]).status().unwrap();
        let out = take.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{signal}: {err}");
        let printed = stdout(&out) == format!("{value}\n");
        let kept = server.cli(&["LPOP", "sig"]) == value;
        assert!(!(printed && kept), "{value} printed and still queued");
        if !printed && !kept {
            lost.push(value);
        }
    }
    assert!(lost.is_empty(), "lost: {lost:?}");
}

/// Bench sizes of zero are usage errors (exit 2), not a panic or NaN figures.
#[test]
fn bench_sizes_of_zero_are_usage_errors() {
    let server = RedisServer::start();
    for args in [
        ["lateness", "--rate", "0"],
        ["lateness", "--seconds", "0"],
        ["offer", "--concurrency", "0"],
        ["offer", "--ops", "0"],
        ["drain", "--entries", "0"],
        ["memory", "--memory-entries", "0"],
    ] {
        let out = delayq(&server, &[&["bench"][..], &args[..]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(args[1]), "{args:?}: {err}");
    }
}

/// `bench offer` on a URL with a password measures delayq and says why redis-benchmark is
/// left out (it would need the password on its command line); without one, redis-benchmark
/// runs on the URL's database.
#[test]
fn bench_offer_skips_redis_benchmark_for_a_password_and_names_why() {
    let server = RedisServer::start();
    let url = format!("redis://:hunter2@127.0.0.1:{}/3", server.port);
    server.cli(&["CONFIG", "SET", "requirepass", "hunter2"]);
    let args = ["--url", &url, "bench", "offer", "--ops", "200"];
    let out = delayq_env(&args, &[]);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("skipped: the URL has a password"), "{text}");
    assert!(text.contains("delayq offer:"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let ask = ["-a", "hunter2", "--no-auth-warning", "CONFIG", "SET"];
    server.cli(&[&ask[..], &["requirepass", ""]].concat());

    let url = format!("redis://127.0.0.1:{}/3", server.port);
    let out = delayq_env(&["--url", &url, "bench", "offer", "--ops", "200"], &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("redis-benchmark same script:"), "{text}");
    // redis-benchmark's keys went to database 3, where the bench deletes them after: none
    // were left in database 0.
    let stats = server.cli(&["INFO", "keyspace"]);
    assert!(!stats.contains("db0:"), "{stats}");
}

/// `take` and `reliable receive` with no timeout are long-running consumers: a Redis
/// restart (down for a second, connections refused) does not end them; each prints the
/// value offered after the restart and exits 0.
#[test]
fn consumers_without_a_timeout_outlive_a_redis_restart() {
    let mut server = RedisServer::start();
    let spawn = |server: &RedisServer, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url()])
            .args(args)
            .env_remove("REDIS_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let take = spawn(&server, &["take", "restart-d", "--count", "1"]);
    let receive = spawn(
        &server,
        &["reliable", "receive", "restart-r", "--count", "1"],
    );
    let blocked = Instant::now() + Duration::from_secs(10);
    while !server
        .cli(&["INFO", "clients"])
        .contains("blocked_clients:2")
    {
        assert!(Instant::now() < blocked, "the consumers never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.restart_after(Duration::from_millis(1500));
    let offered = delayq(&server, &["offer", "restart-d", "0", "after"]);
    assert!(offered.status.success(), "{}", stderr(&offered));
    let offered = delayq(&server, &["reliable", "offer", "restart-r", "0", "after"]);
    assert!(offered.status.success(), "{}", stderr(&offered));
    for (what, child) in [("take", take), ("receive", receive)] {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        assert_eq!(stdout(&out), "after\n", "{what}");
    }
}

#[test]
fn bad_input_is_refused_before_anything_connects() {
    // A port that accepts connections and never answers: a command that connected first
    // would hang there, and the accept below would find its connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!(
        "redis://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let cases: &[(&[&str], &str)] = &[
        (&["offer", "", "5", "x"], "queue name must not be empty"),
        (
            &["take", "", "--timeout-ms", "100"],
            "queue name must not be empty",
        ),
        (&["stats", ""], "queue name must not be empty"),
        (
            &["transfer", "q", "--reconcile-ms", "0"],
            "reconcile interval",
        ),
        (
            &["transfer", "q", "--reliable", "--visibility-ms", "0"],
            "visibility timeout",
        ),
        (&["--cluster", "offer", "a}{b", "5", "x"], "cluster slots"),
        (&["reliable", "receive", ""], "queue name must not be empty"),
        (
            &["reliable", "offer", "q", "5", "x", "--id", ""],
            "message id",
        ),
        (
            &["reliable", "offer", "q", "5", "x", "--shard-key", ""],
            "shard key",
        ),
        (&["reliable", "cancel", "q", ""], "message id"),
        (&["reliable", "reschedule", "q", "", "5"], "message id"),
        (&["reliable", "requeue-dead", "q", "a", ""], "message id"),
        (
            &["reliable", "configure", "q", "--shards", "3"],
            "power of two",
        ),
        (
            &[
                "reliable",
                "configure",
                "q",
                "--backoff",
                "exponential:10:5",
            ],
            "back-off",
        ),
        (
            &["serve", "--listen", "127.0.0.1:0", "--queue", ""],
            "queue name must not be empty",
        ),
    ];
    for (args, says) in cases {
        let out = delayq_env(&[&["--url", &url][..], args].concat(), &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("invalid argument") && err.contains(says),
            "{args:?}: {err}"
        );
        let connected = listener.accept();
        assert!(
            connected.is_err(),
            "{args:?} connected before refusing its input"
        );
    }
}
