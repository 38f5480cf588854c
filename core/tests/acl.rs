//! A Redis ACL user with only the commands, keys and channels delayq needs: the rule in
//! docs/security.md, applied with `ACL SETUSER` on a test server. Every queue operation
//! runs through that user (scripts, blocking waits, the subscriber, the transfer task); a
//! user without the rule gets a `server` error that says NOPERM.

mod common;

use std::time::Duration;

use common::RedisServer;
use delayq::{Backoff, Client, ErrorKind, ReliableQueueOptions};

const PASSWORD: &str = "acl-test-pw";
const WAIT: Option<Duration> = Some(Duration::from_secs(5));

/// The commands of docs/security.md: what delayq sends itself, and what its Lua scripts
/// call (Redis checks those against the caller's ACL too).
const COMMANDS: &[&str] = &[
    // Connections: health checks and the server clock.
    "+ping",
    "+time",
    // Scripts: EVALSHA, and SCRIPT LOAD after NOSCRIPT (a restart, SCRIPT FLUSH).
    "+evalsha",
    "+script|load",
    // The classic queue outside scripts: take, poll, size, stats, read_all, give_back.
    "+blpop",
    "+lpop",
    "+lpush",
    "+llen",
    "+lrange",
    // The reliable queue outside scripts: its consumer group and deliveries.
    "+xgroup|create",
    "+xreadgroup",
    // The subscriber of the transfer tasks.
    "+subscribe",
    "+unsubscribe",
    // Called by the scripts.
    "+get",
    "+set",
    "+del",
    "+exists",
    "+type",
    "+publish",
    "+rpush",
    "+lrem",
    "+lset",
    "+ltrim",
    "+lpos",
    "+lindex",
    "+rename",
    "+zadd",
    "+zrem",
    "+zremrangebyrank",
    "+zrange",
    "+zrangebyscore",
    "+zscore",
    "+zmscore",
    "+zcount",
    "+hget",
    "+hset",
    "+hdel",
    "+hexists",
    "+hincrby",
    "+hlen",
    "+hscan",
    "+xadd",
    "+xack",
    "+xdel",
    "+xlen",
    "+xrange",
    "+xpending",
    "+xclaim",
    "+hgetall",
    "+hsetnx",
    "+xinfo|groups",
    "+xinfo|consumers",
    "+xgroup|delconsumer",
];

/// Keys and channels of every queue of both kinds, whatever its name; the destination
/// lists of classic queues (their bare names) are added per queue.
/// Only with the durability option (`Durability`): `WAIT`, or `WAITAOF` with `aof`.
const DURABILITY_COMMANDS: &[&str] = &["+wait", "+waitaof", "+command|info"];

/// Through a Sentinel URL, on the master: redis-rs asks each new connection's node its role.
const SENTINEL_MASTER_COMMANDS: &[&str] = &["+role"];

/// On the sentinels, for the same user: finding the master (`SENTINEL MASTERS`), and the
/// role check redis-rs makes on every node it connects to.
const SENTINEL_COMMANDS: &[&str] = &["+role", "+sentinel|masters"];

/// In a Redis Cluster: the slot map (which also names the nodes new connections go to).
const CLUSTER_COMMANDS: &[&str] = &["+cluster|slots"];

/// Only for `Client::scan_queues` (tools that list queues: `delayq serve`).
const TOOL_COMMANDS: &[&str] = &["+scan"];

const KEYS_AND_CHANNELS: &[&str] = &[
    "~redisson_delay_queue*",
    "~delayq_*",
    "~{dq:*",
    "&redisson_delay_queue_channel:*",
    "&{dq:*",
];

/// Creates the user `name` with `rules` (after `reset`: no commands, keys or channels).
fn set_user(server: &RedisServer, name: &str, rules: &[&str]) {
    let pass = format!(">{PASSWORD}");
    let mut args = vec!["ACL", "SETUSER", name, "reset", "on", pass.as_str()];
    args.extend_from_slice(rules);
    assert_eq!(server.cli(&args), "OK", "ACL SETUSER {rules:?}");
}

/// The rule of docs/security.md for the classic queues `queues` (and every reliable queue).
fn app_rule(queues: &[&str]) -> Vec<String> {
    let drop = std::env::var("ACL_DROP").unwrap_or_default();
    let mut rule: Vec<String> = COMMANDS
        .iter()
        .filter(|c| **c != drop)
        .map(|s| s.to_string())
        .collect();
    rule.extend(KEYS_AND_CHANNELS.iter().map(|s| s.to_string()));
    rule.extend(queues.iter().map(|q| format!("~{q}")));
    rule
}

fn url_of(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:{PASSWORD}@127.0.0.1:{}", server.port)
}

/// What the server refused, for a failing assertion's message.
fn acl_log(server: &RedisServer) -> String {
    server.cli(&["ACL", "LOG"])
}

async fn connect_as(server: &RedisServer, user: &str) -> Client {
    Client::connect(&url_of(server, user)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_documented_rule_runs_every_delayed_queue_operation() {
    let server = RedisServer::start();
    let rule = app_rule(&["orders"]);
    set_user(
        &server,
        "app",
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let client = connect_as(&server, "app").await;
    let q = client.delayed_queue("orders").unwrap();
    let run = async {
        let due = q.offer("a", Duration::from_millis(300)).await?;
        assert!(due > 0);
        q.offer_all([("b", Duration::from_secs(3600)), ("c", Duration::ZERO)])
            .await?;
        assert!(q.contains("b").await?);
        assert_eq!(q.size().await?, 2);
        assert_eq!(q.read_all().await?.len(), 2);
        assert!(q.remove("b").await?);
        q.transfer_now().await?;
        // "c" is due now; "a" comes due while take waits (moved by the transfer task,
        // woken through the channel).
        let mut got = vec![q.take(WAIT).await?, q.take(WAIT).await?];
        got.sort();
        assert_eq!(got, [Some(b"a".to_vec()), Some(b"c".to_vec())]);
        assert_eq!(q.poll().await?, None);
        q.give_back("back").await?;
        assert_eq!(q.poll().await?, Some(b"back".to_vec()));
        q.offer("d", Duration::from_secs(3600)).await?;
        let stats = q.stats().await?;
        assert_eq!((stats.delayed, stats.ready), (1, 0));
        q.clear().await?;
        assert_eq!(q.size().await?, 0);
        client.server_time_ms().await?;
        // Scripts are loaded again after a SCRIPT FLUSH (as after a restart).
        server.cli(&["SCRIPT", "FLUSH"]);
        q.offer("e", Duration::ZERO).await?;
        assert_eq!(q.take(WAIT).await?, Some(b"e".to_vec()));
        Ok::<(), delayq::Error>(())
    };
    if let Err(e) = run.await {
        panic!("{e}\nACL LOG: {}", acl_log(&server));
    }
    client.close();
    assert_eq!(server.cli(&["ACL", "LOG"]), "", "nothing was refused");
}

/// A user set up by the rule of an earlier release, without `+zremrangebyrank`, still
/// moves a backlog due in offer order: those entries leave the sorted set by ZREM instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_rule_without_zremrangebyrank_still_moves_a_backlog() {
    let server = RedisServer::start();
    let rule: Vec<String> = app_rule(&["orders"])
        .into_iter()
        .filter(|r| r != "+zremrangebyrank")
        .collect();
    set_user(
        &server,
        "app",
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let client = connect_as(&server, "app").await;
    let q = client.delayed_queue_with("orders", no_scheduler()).unwrap();
    let values: Vec<String> = (0..2_000).map(|i| format!("v{i}")).collect();
    q.offer_all(values.iter().map(|v| (v.as_str(), Duration::ZERO)))
        .await
        .unwrap();
    let mut moved = 0;
    loop {
        match q.transfer_now().await {
            Ok(o) if o.moved == 0 => break,
            Ok(o) => moved += o.moved,
            Err(e) => panic!("{e}\nACL LOG: {}", acl_log(&server)),
        }
    }
    assert_eq!(moved, 2_000);
    assert_eq!(q.size().await.unwrap(), 0, "the sorted set is empty");
    let mut got = std::collections::HashSet::new();
    while let Some(v) = q.poll().await.unwrap() {
        assert!(got.insert(v), "a value arrived twice");
    }
    assert_eq!(got.len(), 2_000);
    assert!(
        acl_log(&server).contains("zremrangebyrank"),
        "the path under test was not taken"
    );
    client.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_documented_rule_runs_every_reliable_queue_operation() {
    let server = RedisServer::start();
    let rule = app_rule(&[]);
    set_user(
        &server,
        "app",
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let client = connect_as(&server, "app").await;
    let opts = ReliableQueueOptions {
        visibility_timeout: Some(Duration::from_millis(300)),
        max_attempts: Some(2),
        backoff: Some(Backoff::Schedule(vec![Duration::from_millis(50)])),
        ..Default::default()
    };
    let q = client.reliable_queue("jobs", opts).unwrap();
    let run = async {
        let id = q.offer("one", Duration::from_millis(200), None).await?;
        let d = q.receive(WAIT).await?.expect("delivered");
        assert_eq!(d.id, id);
        assert!(d.ack().await?);
        // Cancel and reschedule.
        let later = q
            .offer("later", Duration::from_secs(3600), Some("later"))
            .await?;
        assert!(q.reschedule(&later, Duration::from_secs(7200)).await?);
        assert!(q.cancel(&later).await?);
        // Nack, a visibility timeout, then the dead letters.
        let id = q.offer("fails", Duration::ZERO, None).await?;
        let d = q.receive(WAIT).await?.expect("delivered");
        assert!(d.nack(None).await?);
        let d = q.receive(WAIT).await?.expect("delivered again");
        assert_eq!(d.attempt, 2);
        drop(d); // not settled: it times out and, on its last attempt, dies.
        let died = common::eventually(Duration::from_secs(10), || async {
            let _ = q.transfer_now().await;
            matches!(q.stats().await, Ok(s) if s.dead == 1)
        })
        .await;
        assert!(died, "the message died; ACL LOG: {}", acl_log(&server));
        let dead = q.dead_letters(10).await?;
        assert_eq!(dead.len(), 1, "the message died");
        assert_eq!(dead[0].id, id);
        let stats = q.stats().await?;
        assert_eq!((stats.dead, stats.in_flight), (1, 0));
        assert_eq!(q.requeue_dead(None).await?, 1);
        let d = q.receive(WAIT).await?.expect("requeued");
        assert!(d.ack().await?);
        q.offer("dies", Duration::ZERO, None).await?;
        for _ in 0..2 {
            let d = q.receive(WAIT).await?.expect("delivered");
            d.nack(Some(Duration::ZERO)).await?;
        }
        assert_eq!(q.purge_dead().await?, 1);
        assert_eq!(q.stats().await?, Default::default());
        Ok::<(), delayq::Error>(())
    };
    if let Err(e) = run.await {
        panic!("{e}\nACL LOG: {}", acl_log(&server));
    }
    client.close();
    assert_eq!(server.cli(&["ACL", "LOG"]), "", "nothing was refused");
}

/// A user without the rule: connecting works (AUTH needs no permission), every queue call
/// fails with a `server` error saying NOPERM, and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_without_the_rule_gets_noperm_server_errors() {
    let server = RedisServer::start();
    // Commands but no keys.
    let commands: Vec<&str> = COMMANDS.iter().copied().chain(["&*"]).collect();
    set_user(&server, "nokeys", &commands);
    // Keys but no commands (a read-only monitoring user, say).
    set_user(&server, "readonly", &["~*", "&*", "+@read", "+ping"]);
    for user in ["nokeys", "readonly"] {
        let client = connect_as(&server, user).await;
        let q = client.delayed_queue_with("orders", no_scheduler()).unwrap();
        let err = q.offer("v", Duration::ZERO).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Server, "{user}: {err}");
        assert!(
            err.to_string().to_lowercase().contains("noperm"),
            "{user}: {err}"
        );
        let r = client
            .reliable_queue(
                "jobs",
                ReliableQueueOptions {
                    scheduler: no_scheduler(),
                    ..Default::default()
                },
            )
            .unwrap();
        let err = r.offer("v", Duration::ZERO, None).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Server, "{user}: {err}");
        assert!(
            err.to_string().to_lowercase().contains("noperm"),
            "{user}: {err}"
        );
        client.close();
    }
    // The rule for one queue does not reach another one's destination list.
    let rule = app_rule(&["orders"]);
    set_user(
        &server,
        "orders-only",
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let client = connect_as(&server, "orders-only").await;
    let q = client
        .delayed_queue_with("payments", no_scheduler())
        .unwrap();
    let err = q.offer("v", Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Server, "{err}");
    assert!(err.to_string().to_lowercase().contains("noperm"), "{err}");
    client.close();
    assert_eq!(server.cli(&["DBSIZE"]), "0", "nothing was written");
    // The password never shows up in an error.
    let err = Client::connect(&format!(
        "redis://app:wrong-{PASSWORD}@127.0.0.1:{}",
        server.port
    ))
    .await
    .expect_err("wrong password refused");
    assert!(!err.to_string().contains(PASSWORD), "{err}");
    // A wrong password is a `connection` error naming the server, over RESP2 (redis-rs's
    // AUTH) as over RESP3 (HELLO ... AUTH, whose WRONGPASS is a plain server reply).
    for protocol in ["resp2", "resp3"] {
        let url = format!(
            "redis://app:wrong-{PASSWORD}@127.0.0.1:{}/?protocol={protocol}",
            server.port
        );
        let err = Client::connect(&url)
            .await
            .expect_err("wrong password refused");
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::Connection, "{protocol}: {text}");
        assert!(text.contains("connecting to"), "{protocol}: {text}");
        assert!(!text.contains(PASSWORD), "{protocol}: {text}");
    }
}

fn no_scheduler() -> delayq::SchedulerOptions {
    delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    }
}

/// The commands core sends (`cmd("...")` in its Rust source, `redis.call('...')` in its
/// scripts) are all in the rule, so a command added to core without the rule (and the
/// docs) fails here, even on a path the tests above do not take.
#[test]
fn every_command_core_sends_is_in_the_rule() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sent = std::collections::BTreeSet::new();
    let mut dirs = vec![src];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let markers: &[&str] = match path.extension().and_then(|e| e.to_str()) {
                Some("rs") => &["cmd(\""],
                Some("lua") => &["call('", "call_chunked('"],
                _ => &[],
            };
            for marker in markers {
                for (i, _) in text.match_indices(marker) {
                    let name: String = text[i + marker.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase())
                        .collect();
                    if !name.is_empty() {
                        sent.insert(name.to_lowercase());
                    }
                }
            }
        }
    }
    assert!(sent.contains("zadd") && sent.contains("blpop"), "{sent:?}");
    let allowed: Vec<&str> = COMMANDS
        .iter()
        .chain(DURABILITY_COMMANDS)
        .chain(CLUSTER_COMMANDS)
        .chain(TOOL_COMMANDS)
        .copied()
        .collect();
    for name in &sent {
        let plus = format!("+{name}");
        let sub = format!("+{name}|");
        assert!(
            allowed.iter().any(|a| *a == plus || a.starts_with(&sub)),
            "core sends {name}, which the ACL rule (here and in docs/security.md) lacks"
        );
    }
}

/// docs/security.md gives the same rule as this test.
#[test]
fn the_rule_in_the_docs_is_the_tested_one() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .expect("docs/security.md");
    let words: std::collections::HashSet<&str> = doc
        .split(|c: char| c.is_whitespace() || matches!(c, '`' | '\'' | '\\' | ','))
        .collect();
    for item in COMMANDS
        .iter()
        .chain(DURABILITY_COMMANDS)
        .chain(KEYS_AND_CHANNELS)
        .chain(SENTINEL_MASTER_COMMANDS)
        .chain(SENTINEL_COMMANDS)
        .chain(CLUSTER_COMMANDS)
    {
        assert!(words.contains(item), "docs/security.md lacks {item}");
    }
}

/// Through a Sentinel URL, the master's user needs the rule plus `+role` (redis-rs asks
/// each node it connects to for its role); the sentinels, which take the same credentials,
/// need `+role` and `+sentinel|masters` for that user.
#[tokio::test(flavor = "multi_thread")]
async fn a_sentinel_url_works_with_the_rule_and_role() {
    let master = RedisServer::start();
    let mut rule = app_rule(&["orders"]);
    rule.extend(SENTINEL_MASTER_COMMANDS.iter().map(|s| s.to_string()));
    set_user(
        &master,
        "app",
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let sentinel = common::Sentinel::start(&master, "mymaster");
    let pass = format!(">{PASSWORD}");
    let mut on_sentinel = vec!["ACL", "SETUSER", "app", "reset", "on", pass.as_str()];
    on_sentinel.extend_from_slice(SENTINEL_COMMANDS);
    assert_eq!(sentinel.cli(&on_sentinel), "OK");
    let url = format!(
        "redis+sentinel://app:{PASSWORD}@127.0.0.1:{}/mymaster",
        sentinel.port
    );
    let client = match Client::connect(&url).await {
        Ok(c) => c,
        Err(e) => panic!(
            "{e}\nmaster ACL LOG: {}\nsentinel ACL LOG: {}",
            acl_log(&master),
            sentinel.cli(&["ACL", "LOG"])
        ),
    };
    let q = client.delayed_queue("orders").unwrap();
    let run = async {
        q.offer("via-sentinel", Duration::from_millis(100)).await?;
        assert_eq!(q.take(WAIT).await?, Some(b"via-sentinel".to_vec()));
        Ok::<(), delayq::Error>(())
    };
    if let Err(e) = run.await {
        panic!("{e}\nACL LOG: {}", acl_log(&master));
    }
    client.close();
    assert_eq!(acl_log(&master), "", "nothing was refused on the master");
    assert_eq!(
        sentinel.cli(&["ACL", "LOG"]),
        "",
        "nothing was refused on the sentinel"
    );
}

/// In a Redis Cluster (the user set on every node), the client also reads the slot map.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_works_with_the_rule_and_the_slot_map() {
    let cluster = common::Cluster::start();
    let mut rule = app_rule(&["orders"]);
    rule.extend(CLUSTER_COMMANDS.iter().map(|s| s.to_string()));
    let rule: Vec<&str> = rule.iter().map(String::as_str).collect();
    for node in &cluster.nodes {
        set_user(node, "app", &rule);
    }
    let seeds = cluster.nodes.iter().map(|n| url_of(n, "app"));
    let client = match Client::connect_with(delayq::ClientOptions::cluster(seeds)).await {
        Ok(c) => c,
        Err(e) => panic!("{e}\nACL LOG: {}", acl_log(&cluster.nodes[0])),
    };
    let q = client.delayed_queue("orders").unwrap();
    let r = client.reliable_queue("jobs", Default::default()).unwrap();
    let run = async {
        q.offer("in-cluster", Duration::from_millis(100)).await?;
        assert_eq!(q.take(WAIT).await?, Some(b"in-cluster".to_vec()));
        r.offer("job", Duration::ZERO, None).await?;
        let d = r.receive(WAIT).await?.expect("delivered");
        assert!(d.ack().await?);
        Ok::<(), delayq::Error>(())
    };
    let result = run.await;
    let logs: Vec<String> = cluster.nodes.iter().map(acl_log).collect();
    if let Err(e) = result {
        panic!("{e}\nACL LOGs: {logs:?}");
    }
    client.close();
    assert!(logs.iter().all(String::is_empty), "refused: {logs:?}");
}
