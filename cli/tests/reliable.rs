//! `delayq reliable` as separate processes: a consumer killed with SIGKILL loses nothing.

#[path = "../../core/tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};

use common::RedisServer;

fn delayq(server: &RedisServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url()])
        .args(args)
        .output()
        .expect("run delayq")
}

/// The four count lines of `reliable stats` (the settings follow them).
fn counts(stats: &str) -> String {
    stats.lines().take(4).collect::<Vec<_>>().join("\n")
}

/// A child process killed when the test ends, passed or not.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn text(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_consumer_killed_while_holding_messages_loses_none() {
    let server = RedisServer::start();
    // The queue's settings are stored with it; every later command uses them.
    let settings = text(&delayq(
        &server,
        &["reliable", "configure", "jobs", "--visibility-ms", "1000"],
    ));
    assert!(
        settings.contains("visibility_ms 1000\nmax_attempts 5\n"),
        "{settings}"
    );
    for i in 0..20 {
        text(&delayq(
            &server,
            &[
                "reliable",
                "offer",
                "jobs",
                "0",
                &format!("job-{i}"),
                "--id",
                &format!("j{i}"),
            ],
        ));
    }
    let mut holder = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--url",
            &server.url(),
            "reliable",
            "receive",
            "jobs",
            "--count",
            "5",
        ])
        .args(["--no-ack", "--hold", "--show-id"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let held: Vec<String> = (0..5).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(
        counts(&text(&delayq(&server, &["reliable", "stats", "jobs"]))),
        "delayed 0\nready 15\nin_flight 5\ndead 0"
    );
    holder.kill().unwrap(); // SIGKILL
    holder.wait().unwrap();
    let out = text(&delayq(
        &server,
        &[
            "reliable",
            "receive",
            "jobs",
            "--count",
            "20",
            "--timeout-ms",
            "15000",
            "--show-id",
            // Naming the stored setting is fine.
            "--visibility-ms",
            "1000",
        ],
    ));
    let mut attempts: HashMap<String, u32> = HashMap::new();
    for line in out.lines() {
        let mut parts = line.split('\t');
        let (id, attempt) = (parts.next().unwrap(), parts.next().unwrap());
        attempts.insert(id.to_owned(), attempt.parse().unwrap());
    }
    assert_eq!(attempts.len(), 20, "every message delivered: {out}");
    for line in held {
        let id = line.split('\t').next().unwrap();
        assert_eq!(
            attempts[id], 2,
            "{id} came back after the visibility timeout"
        );
    }
    assert_eq!(
        counts(&text(&delayq(&server, &["reliable", "stats", "jobs"]))),
        "delayed 0\nready 0\nin_flight 0\ndead 0"
    );
}

#[test]
fn cancel_reschedule_and_dead_letters_from_the_command_line() {
    let server = RedisServer::start();
    text(&delayq(
        &server,
        &[
            "reliable",
            "configure",
            "cmd",
            "--visibility-ms",
            "200",
            "--max-attempts",
            "1",
        ],
    ));
    // A command naming other settings than the stored ones is refused, and says why.
    let refused = delayq(
        &server,
        &["reliable", "stats", "cmd", "--visibility-ms", "999"],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("visibility timeout is 200 ms"));
    let id = text(&delayq(
        &server,
        &["reliable", "offer", "cmd", "600000", "later"],
    ));
    let id = id.trim();
    assert_eq!(
        text(&delayq(
            &server,
            &["reliable", "reschedule", "cmd", id, "0"]
        )),
        "true\n"
    );
    assert_eq!(
        text(&delayq(&server, &["reliable", "cancel", "cmd", "nope"])),
        "false\n"
    );
    let got = text(&delayq(
        &server,
        &[
            "reliable",
            "receive",
            "cmd",
            "--timeout-ms",
            "5000",
            "--no-ack",
        ],
    ));
    assert_eq!(got, "later\n");
    // With one attempt allowed, the expired delivery goes to the dead letters.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut dead = String::new();
    while std::time::Instant::now() < deadline {
        // A transfer pass (run by this short-lived consumer) buries the expired delivery.
        delayq(
            &server,
            &["reliable", "receive", "cmd", "--timeout-ms", "300"],
        );
        dead = text(&delayq(&server, &["reliable", "dead", "cmd"]));
        if !dead.is_empty() {
            break;
        }
    }
    assert_eq!(dead, format!("{id}\t1\tlater\n"));
    assert_eq!(
        text(&delayq(&server, &["reliable", "requeue-dead", "cmd"])),
        "1\n"
    );
    assert_eq!(
        text(&delayq(
            &server,
            &["reliable", "receive", "cmd", "--timeout-ms", "5000"]
        )),
        "later\n"
    );
    assert_eq!(
        text(&delayq(&server, &["reliable", "purge-dead", "cmd"])),
        "0\n"
    );
}

#[test]
fn shards_are_configured_and_messages_offered_by_shard_key() {
    let server = RedisServer::start();
    let settings = text(&delayq(
        &server,
        &["reliable", "configure", "sharded", "--shards", "4"],
    ));
    assert!(settings.contains("shards 4"), "{settings}");
    for i in 0..8 {
        let id = format!("k{i}");
        let key = format!("tenant-{}", i % 2);
        let args = ["reliable", "offer", "sharded", "0", "v", "--id", &id];
        text(&delayq(
            &server,
            &[&args[..], &["--shard-key", &key]].concat(),
        ));
    }
    let stats = text(&delayq(&server, &["reliable", "stats", "sharded"]));
    assert_eq!(counts(&stats), "delayed 0\nready 8\nin_flight 0\ndead 0");
    // Two shard keys: the messages sit in at most two shards' streams.
    let keys = server.cli(&["KEYS", "{dq:sharded:*}:ready"]);
    assert!((1..=2).contains(&keys.lines().count()), "{keys}");
    // The shards of a queue that holds messages cannot change.
    let refused = delayq(
        &server,
        &["reliable", "configure", "sharded", "--shards", "8"],
    );
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("cannot change to 8"), "{err}");
    let received = text(&delayq(
        &server,
        &[
            "reliable",
            "receive",
            "sharded",
            "--count",
            "8",
            "--timeout-ms",
            "5000",
        ],
    ));
    assert_eq!(received.lines().count(), 8);
}

/// Waits (polling Redis, not running any transfer) until the delivery of `queue` has been
/// idle past the visibility timeout `ms`: its lease has ended, and only a transfer pass
/// can take it back.
fn until_the_lease_ended(server: &RedisServer, queue: &str, ms: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stream = format!("{{dq:{queue}}}:ready");
    let ms = ms.to_string();
    loop {
        let pending = server.cli(&["XPENDING", &stream, "delayq", "IDLE", &ms, "-", "+", "10"]);
        if !pending.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease of {queue} did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `stats`, `dead`, `requeue-dead` and `purge-dead` run one transfer pass first: a lease
/// that ended on the last attempt is a dead letter to them at once, though no process
/// runs a transfer task (the consumer exited).
#[test]
fn short_commands_see_ended_leases_without_a_long_running_process() {
    let server = RedisServer::start();
    for queue in ["st", "dl", "rq", "pg"] {
        text(&delayq(
            &server,
            &[
                "reliable",
                "configure",
                queue,
                "--visibility-ms",
                "200",
                "--max-attempts",
                "1",
            ],
        ));
        text(&delayq(
            &server,
            &["reliable", "offer", queue, "0", "v", "--id", "m"],
        ));
        let got = text(&delayq(
            &server,
            &[
                "reliable",
                "receive",
                queue,
                "--timeout-ms",
                "5000",
                "--no-ack",
            ],
        ));
        assert_eq!(got, "v\n");
        until_the_lease_ended(&server, queue, 200);
    }
    assert_eq!(
        counts(&text(&delayq(&server, &["reliable", "stats", "st"]))),
        "delayed 0\nready 0\nin_flight 0\ndead 1"
    );
    assert_eq!(
        text(&delayq(&server, &["reliable", "dead", "dl"])),
        "m\t1\tv\n"
    );
    assert_eq!(
        text(&delayq(&server, &["reliable", "requeue-dead", "rq"])),
        "1\n"
    );
    assert_eq!(
        text(&delayq(&server, &["reliable", "purge-dead", "pg"])),
        "1\n"
    );
}

/// `delayq` with its standard output on `/dev/full`: every write fails (ENOSPC), as when
/// the disk is full or the reader of a pipe is gone.
fn delayq_to_full(server: &RedisServer, args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--url", &server.url()])
        .args(args)
        .stdout(Stdio::from(full))
        .output()
        .expect("run delayq")
}

/// A value or a message that could not be printed is not lost: `take` gives the value back
/// to the head of the destination, `reliable receive` gives the message back (not acked,
/// not counted as an attempt); the error names standard output, not Redis.
#[test]
fn what_could_not_be_printed_goes_back_to_the_queue() {
    let server = RedisServer::start();
    assert!(delayq(&server, &["offer", "pq", "0", "v1"])
        .status
        .success());
    let took = delayq_to_full(&server, &["take", "pq", "--timeout-ms", "5000"]);
    let err = String::from_utf8_lossy(&took.stderr);
    assert_eq!(took.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write to standard output") && err.contains("given back"),
        "{err}"
    );
    assert!(!err.contains("connection"), "{err}");
    assert_eq!(
        text(&delayq(&server, &["take", "pq", "--timeout-ms", "5000"])),
        "v1\n"
    );

    text(&delayq(
        &server,
        &["reliable", "offer", "rq", "0", "full", "--id", "f1"],
    ));
    let got = delayq_to_full(
        &server,
        &["reliable", "receive", "rq", "--timeout-ms", "5000"],
    );
    let err = String::from_utf8_lossy(&got.stderr);
    assert_eq!(got.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write to standard output") && err.contains("given back"),
        "{err}"
    );
    assert_eq!(
        counts(&text(&delayq(&server, &["reliable", "stats", "rq"]))),
        "delayed 0\nready 1\nin_flight 0\ndead 0"
    );
    let again = [
        "reliable",
        "receive",
        "rq",
        "--timeout-ms",
        "5000",
        "--show-id",
    ];
    assert_eq!(
        text(&delayq(&server, &again)),
        "f1\t1\tfull\n",
        "attempt 1 again"
    );
    // The short commands: done, and said so.
    let offered = delayq_to_full(&server, &["offer", "pq", "60000", "later"]);
    let err = String::from_utf8_lossy(&offered.stderr);
    assert_eq!(offered.status.code(), Some(1), "{err}");
    assert!(err.contains("the value was offered"), "{err}");
    assert_eq!(
        server.cli(&["ZCARD", "redisson_delay_queue_timeout:{pq}"]),
        "1"
    );
}

/// `--timeout-ms 0` takes what is ready now, up to the count, without waiting.
#[test]
fn receive_with_a_zero_timeout_takes_what_is_ready() {
    let server = RedisServer::start();
    for i in 1..=3 {
        text(&delayq(
            &server,
            &["reliable", "offer", "z", "0", &format!("z{i}")],
        ));
    }
    let out = text(&delayq(
        &server,
        &[
            "reliable",
            "receive",
            "z",
            "--timeout-ms",
            "0",
            "--count",
            "5",
        ],
    ));
    assert_eq!(out, "z1\nz2\nz3\n");
    assert_eq!(
        text(&delayq(
            &server,
            &["reliable", "receive", "z", "--timeout-ms", "0"]
        )),
        ""
    );
}

/// `receive --hold` ends on Ctrl-C (and SIGTERM), giving the messages it held back at once,
/// not counted as an attempt, instead of leaving them to their visibility timeout.
#[test]
fn a_held_receive_ends_on_ctrl_c_and_gives_its_messages_back() {
    let server = RedisServer::start();
    text(&delayq(
        &server,
        &["reliable", "configure", "h", "--visibility-ms", "60000"],
    ));
    for signal in ["-INT", "-TERM"] {
        text(&delayq(
            &server,
            &["reliable", "offer", "h", "0", "held", "--id", "h1"],
        ));
        let mut holder = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args([
                "--url",
                &server.url(),
                "reliable",
                "receive",
                "h",
                "--count",
                "1",
            ])
            // `--hold` holds unacked with or without `--no-ack`.
            .args(if signal == "-INT" {
                &["--no-ack", "--hold", "--show-id"][..]
            } else {
                &["--hold", "--show-id"][..]
            })
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "h1\t1\theld");
        Command::new("kill")
            .args([signal, &holder.id().to_string()])
            .status()
            .unwrap();
        assert!(holder.wait().unwrap().success(), "{signal}");
        assert_eq!(
            counts(&text(&delayq(&server, &["reliable", "stats", "h"]))),
            "delayed 0\nready 1\nin_flight 0\ndead 0",
            "{signal}"
        );
        let again = [
            "reliable",
            "receive",
            "h",
            "--timeout-ms",
            "5000",
            "--show-id",
        ];
        assert_eq!(text(&delayq(&server, &again)), "h1\t1\theld\n", "{signal}");
    }
}

/// `receive --hold` keeps the leases of what it holds: with a visibility timeout of 1 s,
/// nobody else gets the message while it runs, however long.
#[test]
fn a_held_receive_keeps_the_leases_of_its_messages() {
    let server = RedisServer::start();
    text(&delayq(
        &server,
        &["reliable", "configure", "kept", "--visibility-ms", "1000"],
    ));
    text(&delayq(
        &server,
        &["reliable", "offer", "kept", "0", "held", "--id", "k1"],
    ));
    let mut holder = Reaped(
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url(), "reliable", "receive", "kept"])
            .args(["--hold", "--show-id"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(holder.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "k1\t1\theld");
    // Three visibility timeouts (the scenario, not a synchronisation), then another
    // consumer looks for it for 1 s more.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let other = ["reliable", "receive", "kept", "--timeout-ms", "1000"];
    assert_eq!(
        text(&delayq(&server, &other)),
        "",
        "the held lease was kept"
    );
    Command::new("kill")
        .args(["-TERM", &holder.0.id().to_string()])
        .status()
        .unwrap();
    assert!(holder.0.wait().unwrap().success());
    // Given back, its attempt not counted: no delivery was lost on the way.
    let again = [
        "reliable",
        "receive",
        "kept",
        "--timeout-ms",
        "5000",
        "--show-id",
    ];
    assert_eq!(text(&delayq(&server, &again)), "k1\t1\theld\n");
}

/// A receive waiting for more (`--count 5 | head -1`) stops once the reader of its output
/// goes away, without waiting for a message it could not print: it exits 1 saying so, and
/// gives back what it held.
#[test]
fn a_receive_whose_reader_went_away_stops_waiting() {
    let server = RedisServer::start();
    text(&delayq(
        &server,
        &["reliable", "offer", "gone", "0", "first", "--id", "g1"],
    ));
    let mut receiver = Reaped(
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--url", &server.url(), "reliable", "receive", "gone"])
            .args(["--count", "5", "--hold", "--show-id"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(receiver.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "g1\t1\tfirst");
    drop(lines); // as `head -1` exits
    let status = ended_within_10s(&mut receiver.0);
    let mut said = String::new();
    receiver
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(
        said.contains("standard output was closed by its reader"),
        "{said}"
    );
    // The held message was given back, its attempt not counted.
    let again = [
        "reliable",
        "receive",
        "gone",
        "--timeout-ms",
        "5000",
        "--show-id",
    ];
    assert_eq!(text(&delayq(&server, &again)), "g1\t1\tfirst\n");
}

/// `child`'s exit status, once it ended; fails the test when that takes over 10 s.
fn ended_within_10s(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running 10 s after its reader went away"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `reliable receive Q --count 3 --hold | head -1` with a second message coming right after
/// the first: whether the reader's leaving is seen first or the second message's line
/// fails to print, every message goes back (none left in flight to its lease).
#[test]
fn a_held_receive_whose_reader_left_gives_everything_back() {
    let server = RedisServer::start();
    for round in 0..5 {
        let q = format!("both{round}");
        text(&delayq(&server, &["reliable", "offer", &q, "0", "first"]));
        let mut receiver = Reaped(
            Command::new(env!("CARGO_BIN_EXE_delayq"))
                .args(["--url", &server.url(), "reliable", "receive", &q])
                .args(["--count", "3", "--hold"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(receiver.0.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "first");
        drop(lines); // `head -1` exits, and the second message comes at once
        text(&delayq(&server, &["reliable", "offer", &q, "0", "second"]));
        let status = ended_within_10s(&mut receiver.0);
        let mut said = String::new();
        receiver
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert_eq!(status.code(), Some(1), "{said}");
        let stats = text(&delayq(&server, &["reliable", "stats", &q]));
        assert!(stats.contains("in_flight 0\n"), "{round}: {said}\n{stats}");
    }
}

/// `reliable receive Q | head -1`: the reader going away after the one message it asked
/// for is no error (exit 0), and the message is acked.
#[test]
fn a_receive_that_printed_all_it_was_asked_for_exits_0_after_its_reader_left() {
    let server = RedisServer::start();
    for i in 0..5 {
        let id = format!("h{i}");
        text(&delayq(
            &server,
            &["reliable", "offer", "head", "0", "x", "--id", &id],
        ));
        let mut receiver = Reaped(
            Command::new(env!("CARGO_BIN_EXE_delayq"))
                .args(["--url", &server.url(), "reliable", "receive", "head"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(receiver.0.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "x");
        drop(lines); // as `head -1` exits, while the ack is on its way
        let status = ended_within_10s(&mut receiver.0);
        let mut said = String::new();
        receiver
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert_eq!(status.code(), Some(0), "{said}");
    }
    let stats = text(&delayq(&server, &["reliable", "stats", "head"]));
    assert!(
        stats.starts_with("delayed 0\nready 0\nin_flight 0\n"),
        "{stats}"
    );
}

/// `reliable configure Q` with no option stores the defaults for a new queue (pins them):
/// a later handle naming other settings is refused.
#[test]
fn configure_without_options_stores_the_defaults_and_offers_tell_what_they_created() {
    let server = RedisServer::start();
    let settings = text(&delayq(&server, &["reliable", "configure", "pinned"]));
    assert!(settings.contains("visibility_ms 30000\n"), "{settings}");
    assert_eq!(server.cli(&["EXISTS", "{dq:pinned}:settings"]), "1");
    let other = delayq(
        &server,
        &[
            "reliable",
            "offer",
            "pinned",
            "0",
            "x",
            "--visibility-ms",
            "9000",
        ],
    );
    assert_eq!(other.status.code(), Some(2));
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("visibility timeout is 30000 ms in Redis"),
        "{err}"
    );

    // An offer that created nothing says so on standard error (its id on standard output).
    for (i, created) in [(0, true), (1, false)] {
        let offered = delayq(
            &server,
            &["reliable", "offer", "pinned", "0", "v", "--id", "a"],
        );
        assert_eq!(text(&offered), "a\n", "offer {i}");
        let err = String::from_utf8_lossy(&offered.stderr);
        assert_eq!(
            !err.contains("already there; nothing was created"),
            created,
            "{err}"
        );
    }
}
