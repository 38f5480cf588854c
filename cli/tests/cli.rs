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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url(), "offer", "bin", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin\n")
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
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

#[test]
fn stats_prints_the_counts() {
    let server = RedisServer::start();
    delayq(&server, &["offer", "counted", "60000", "a"]);
    delayq(&server, &["offer", "counted", "60000", "b"]);
    let out = stdout(&delayq(&server, &["stats", "counted"]));
    assert_eq!(out, "delayed 2\nready 0\ncorrupt 0\n");
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
fn exit_codes_say_usage_or_error() {
    let server = RedisServer::start();
    assert_eq!(delayq(&server, &["bogus"]).status.code(), Some(2));
    assert_eq!(delayq(&server, &["offer", "q"]).status.code(), Some(2));
    assert_eq!(
        delayq(&server, &["offer", "", "5", "x"]).status.code(),
        Some(2)
    );
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
