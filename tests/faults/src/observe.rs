//! The test's own view of the servers: a direct connection (never through a proxy) for
//! the server clock, `CLIENT LIST` and `INFO`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue};

fn local_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

/// The Redis server's clock (`TIME`), read without a round trip per reading: the offset
/// of the local clock to the server's is measured once (best of several `TIME` calls, at
/// the middle of the fastest round trip), so an instant is stamped in server time at the
/// moment it happens, even when the server cannot be reached at that moment.
#[derive(Debug, Clone, Copy)]
pub struct ServerClock {
    offset_us: i64,
    /// Half of the fastest round trip: the error bound of the offset.
    pub error_us: i64,
}

impl ServerClock {
    /// Measures the offset against the server at `url` (a direct URL).
    pub async fn calibrate(url: &str) -> ServerClock {
        let conn = Observer::connect(url).await;
        let mut best: Option<(i64, i64)> = None;
        for _ in 0..9 {
            let before = local_us();
            let (secs, micros): (i64, i64) = conn.query(redis::cmd("TIME")).await.expect("TIME");
            let after = local_us();
            let rtt = after - before;
            let offset = secs * 1_000_000 + micros - (before + rtt / 2);
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, offset));
            }
        }
        let (rtt, offset_us) = best.expect("samples");
        ServerClock {
            offset_us,
            error_us: rtt / 2 + 1,
        }
    }

    /// Now, in the server's Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        (local_us() + self.offset_us).div_euclid(1000)
    }
}

/// One client of `CLIENT LIST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client id.
    pub id: u64,
    /// The server address it connected to.
    pub laddr: String,
    /// Its flags (`P` pub/sub, `b` blocked, `N` none, ...).
    pub flags: String,
    /// Its last command.
    pub cmd: String,
    /// Seconds since it connected.
    pub age: u64,
}

impl ClientInfo {
    /// Whether the connection came through a proxy (which connects to 127.0.0.2).
    pub fn proxied(&self) -> bool {
        self.laddr.starts_with("127.0.0.2:")
    }

    /// What the connection is for, as far as the server can tell.
    pub fn role(&self) -> &'static str {
        if self.flags.contains('P') {
            "pubsub"
        } else if self.flags.contains('b') {
            "blocked"
        } else {
            "commands"
        }
    }

    /// `id/role/cmd`, for messages.
    pub fn describe(&self) -> String {
        format!("{}/{}/{}", self.id, self.role(), self.cmd)
    }
}

/// A direct connection for observing one server. Cheap to clone.
#[derive(Clone)]
pub struct Observer {
    conn: MultiplexedConnection,
}

impl Observer {
    /// Connects to `url` directly (fails the test if it cannot).
    pub async fn connect(url: &str) -> Observer {
        let client = redis::Client::open(url).expect("observer URL");
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|e| panic!("observer cannot connect to {url}: {e}"));
        Observer { conn }
    }

    /// Runs one command.
    pub async fn query<T: FromRedisValue>(&self, cmd: redis::Cmd) -> redis::RedisResult<T> {
        cmd.query_async(&mut self.conn.clone()).await
    }

    /// `CLIENT LIST`, parsed.
    pub async fn clients(&self) -> Vec<ClientInfo> {
        let text: String = self
            .query(redis::cmd("CLIENT").arg("LIST").to_owned())
            .await
            .expect("CLIENT LIST");
        text.lines()
            .filter_map(|line| {
                let field = |name: &str| {
                    line.split(' ')
                        .find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
                        .unwrap_or("")
                        .to_owned()
                };
                Some(ClientInfo {
                    id: field("id").parse().ok()?,
                    laddr: field("laddr"),
                    flags: field("flags"),
                    cmd: field("cmd"),
                    age: field("age").parse().unwrap_or(0),
                })
            })
            .collect()
    }

    /// The clients connected through a proxy.
    pub async fn proxied_clients(&self) -> Vec<ClientInfo> {
        self.clients()
            .await
            .into_iter()
            .filter(ClientInfo::proxied)
            .collect()
    }

    /// One field of `INFO section` (for example `master_repl_offset` of `replication`).
    pub async fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let text: String = self
            .query(redis::cmd("INFO").arg(section).to_owned())
            .await
            .ok()?;
        text.lines().find_map(|l| {
            l.trim()
                .strip_prefix(field)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::to_owned)
        })
    }

    /// How many times `needle` occurs in the value of each key matching `pattern` (lists,
    /// sorted sets, sets, hashes, streams and strings are read whole). A message stored
    /// twice shows as 2 in the key that holds messages, whatever the layout.
    pub async fn occurrences(&self, pattern: &str, needle: &[u8]) -> Vec<(String, usize)> {
        let keys: Vec<String> = self
            .query(redis::cmd("KEYS").arg(pattern).to_owned())
            .await
            .unwrap_or_default();
        let mut out = Vec::new();
        for key in keys {
            let kind: String = self
                .query(redis::cmd("TYPE").arg(&key).to_owned())
                .await
                .unwrap_or_default();
            let read = match kind.as_str() {
                "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).to_owned(),
                "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).to_owned(),
                "set" => redis::cmd("SMEMBERS").arg(&key).to_owned(),
                "hash" => redis::cmd("HGETALL").arg(&key).to_owned(),
                "string" => redis::cmd("GET").arg(&key).to_owned(),
                "stream" => redis::cmd("XRANGE").arg(&key).arg("-").arg("+").to_owned(),
                _ => continue,
            };
            let value: redis::Value = self.query(read).await.unwrap_or(redis::Value::Nil);
            let n = count_in_value(&value, needle);
            out.push((key, n));
        }
        out
    }
}

fn count_in_value(value: &redis::Value, needle: &[u8]) -> usize {
    use redis::Value;
    match value {
        Value::BulkString(b) => b.windows(needle.len()).filter(|w| *w == needle).count(),
        Value::SimpleString(s) => s
            .as_bytes()
            .windows(needle.len())
            .filter(|w| *w == needle)
            .count(),
        Value::Array(items) | Value::Set(items) => {
            items.iter().map(|v| count_in_value(v, needle)).sum()
        }
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| count_in_value(k, needle) + count_in_value(v, needle))
            .sum(),
        _ => 0,
    }
}
