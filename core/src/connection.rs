//! The one place that talks to redis-rs about connections. Queue code sees a
//! [`Connection`] and does not care whether it is one server, a Sentinel-managed master
//! or a cluster.
//!
//! What production networks do to connections decides the shape of this module (SPEC
//! section 10): a peer can go silent with the TCP connection still open (no FIN, no RST).
//! So no connection is trusted to fail by itself:
//! - Commands and scripts go over one multiplexed connection ([`Reconnecting`]). A reply
//!   that does not come within the response timeout marks the connection dead, fails the
//!   requests sent over it after that one (they wait behind it) and so closes it; the next
//!   request opens a fresh one. A request is never sent twice by this layer: its outcome
//!   is unknown, and the caller gets a `connection` error that says so. A host's blocking
//!   call sends its requests over its thread's own connection instead, under the same
//!   rules, when nothing else of the client is in flight (`direct`).
//! - Blocking commands (`BLPOP`, `XREADGROUP BLOCK`) get dedicated connections; the queue
//!   code splits long waits into server-side waits of a few seconds, each with a client-side
//!   deadline (see `handle.rs`).
//! - Pub/sub has one connection per client, health-checked by PING (`pubsub.rs`).
//! - Every TCP socket has keepalive probes on, so a peer that vanished is noticed even by
//!   a connection nobody uses.
//!
//! A cluster goes through redis-rs's `cluster_async`, with the same response timeout; its
//! requests are resent only when they did not run (`cluster.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::io::tcp::{socket2, TcpSettings};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, FromRedisValue, IntoConnectionInfo, Pipeline,
    RedisError, RedisFuture, ScriptInvocation, Value,
};

use crate::error::{Error, Result};
use crate::logs::Escaped;
use cluster::ClusterCommands;

mod cluster;
mod direct;
mod topology;
pub(crate) use direct::{holding_signals, on_this_thread, Bounded, Indirect};

/// Certificates for `rediss://` connections. Files are PEM.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A CA certificate to trust instead of the system's roots (a private CA).
    pub ca_file: Option<PathBuf>,
    /// A client certificate, for servers that require one (mutual TLS, `tls-auth-clients`).
    pub client_cert_file: Option<PathBuf>,
    /// The client certificate's private key. Required with `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
}

impl Durability {
    /// The wait a binding uses when its caller names none.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

    /// Waits for `replicas` replicas, up to [`Durability::DEFAULT_TIMEOUT`], no AOF.
    pub fn replicas(replicas: u32) -> Self {
        Durability {
            replicas,
            aof: false,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

impl TlsOptions {
    fn is_empty(&self) -> bool {
        self == &TlsOptions::default()
    }

    /// Reads the files. Errors name the file, never its contents.
    fn load(&self) -> Result<Option<redis::TlsCertificates>> {
        if self.is_empty() {
            return Ok(None);
        }
        let read = |p: &PathBuf, what: &str| {
            std::fs::read(p).map_err(|e| {
                Error::invalid(format!("cannot read the TLS {what} {}: {e}", p.display()))
            })
        };
        let root_cert = self
            .ca_file
            .as_ref()
            .map(|p| read(p, "CA file"))
            .transpose()?;
        let client_tls = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert, "client certificate")?,
                client_key: read(key, "client key")?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::invalid(
                    "a TLS client certificate needs its key, and a key its certificate",
                ))
            }
        };
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// Waits for replicas (and, with `aof`, for the append-only file) after writes that a
/// caller is told succeeded: offers and acks. See `docs/faults.md` for what it costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must have the write before the call returns (`WAIT n`).
    pub replicas: u32,
    /// Also wait until the write is in the append-only file of the master and of
    /// `replicas` replicas (`WAITAOF`, Redis 7.2+).
    pub aof: bool,
    /// How long to wait. A write that is not confirmed in time fails with a `timeout`
    /// error: it was applied on the master, but may not survive a failover.
    pub timeout: Duration,
}

/// How to reach Redis.
#[derive(Clone)]
pub struct ClientOptions {
    /// One URL (`redis://[user:pass@]host:port/db`, `rediss://...`, `redis+unix:///path`,
    /// `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER_NAME[/db]`), or
    /// several seed URLs of a Redis Cluster. Every URL form also takes `?db=`,
    /// `?username=` (`user`) and `?password=` (`pass`), as redis-py does; an unknown
    /// query parameter is refused.
    pub urls: Vec<String>,
    /// Treat `urls` as seeds of a Redis Cluster (implied when there is more than one URL).
    pub cluster: bool,
    /// Time limit for establishing a connection (default 5 s).
    pub connect_timeout: Duration,
    /// Time limit for the reply to a non-blocking command or script (default 5 s). A
    /// connection whose reply is late is replaced; the call fails with a `connection`
    /// error, since whether the command ran is unknown (in a Redis Cluster too).
    pub response_timeout: Duration,
    /// Certificates for `rediss://` (a private CA, a client certificate).
    pub tls: TlsOptions,
    /// Wait for replicas (or the AOF) after offers and acks; off by default.
    pub durability: Option<Durability>,
}

impl ClientOptions {
    /// Options for one URL, with default time limits (5 s to connect, 5 s per reply).
    pub fn new(url: impl Into<String>) -> Self {
        ClientOptions {
            urls: vec![url.into()],
            cluster: false,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(5),
            tls: TlsOptions::default(),
            durability: None,
        }
    }

    /// Options for a Redis Cluster reached through the given seed URLs.
    pub fn cluster<I, S>(seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientOptions {
            urls: seeds.into_iter().map(Into::into).collect(),
            cluster: true,
            ..ClientOptions::new("")
        }
    }

    /// Whether these options name a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.cluster || self.urls.len() > 1
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("ClientOptions")
            .field("urls", &urls)
            .field("cluster", &self.cluster)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("tls", &self.tls)
            .field("durability", &self.durability)
            .finish()
    }
}

/// Query parameters whose values are safe to print; every other value is redacted
/// (`pass`, `password`, `user`, tokens, and whatever a later redis-rs accepts).
const HARMLESS_PARAMS: [&str; 3] = ["db", "protocol", "insecure"];

/// A URL with its user name, password and the values of its query parameters (but `db`
/// and `protocol`) replaced by `***`, safe to print.
pub fn redact_url(url: &str) -> String {
    redact_url_keeping(url, &HARMLESS_PARAMS)
}

/// [`redact_url`] letting the values of only the query parameters in `keep` through (none,
/// for a URL of another kind: a webhook's callback URL often carries a token there).
pub fn redact_url_keeping(url: &str, keep: &[&str]) -> String {
    // `redis:user:pass@host` (no `//`) parses as a scheme and a path: no user-info to find,
    // so nothing after the scheme is shown.
    if let Some(scheme) = scheme_without_authority(url) {
        return format!("{scheme}:***");
    }
    let masked = mask_user_info(url);
    let url = masked.as_str();
    // A Sentinel URL may list several hosts, which `url` cannot parse as one authority:
    // redact the user-info by hand and let the rest through the same rules.
    if let Some(rest) = url.strip_prefix("redis+sentinel://") {
        let (authority, tail) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let hosts = match authority.rfind('@') {
            Some(i) => format!("***@{}", &authority[i + 1..]),
            None => authority.to_owned(),
        };
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (tail, None),
        };
        let mut out = format!("redis+sentinel://{hosts}{path}");
        if let Some(q) = query {
            out.push('?');
            out.push_str(&redact_query(q, keep));
        }
        return out;
    }
    match url::Url::parse(url) {
        Ok(mut u) => {
            if !u.username().is_empty() {
                let _ = u.set_username("***");
            }
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            if let Some(q) = u.query().map(|q| redact_query(q, keep)) {
                u.set_query(Some(&q));
            }
            if u.fragment().is_some() {
                u.set_fragment(Some("***"));
            }
            u.to_string()
        }
        Err(_) => "<unparsable url>".to_owned(),
    }
}

/// `url` with everything before the last `@` ahead of its query or fragment masked: a
/// password with an unencoded `/` (`redis://u:Sec/ret@h/0`, common in generated base64
/// passwords) ends the authority where a parser looks for it, and its remainder would be
/// shown as a path.
fn mask_user_info(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let end = url[start..]
        .find(['?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => {
            let mask = match url[start..start + at].contains(':') {
                true => "***:***@",
                false => "***@",
            };
            format!("{}{mask}{}", &url[..start], &url[start + at + 1..])
        }
        None => url.to_owned(),
    }
}

/// A redis-rs error about a URL, without its detail: redis-rs quotes there a value it
/// could not read (`Invalid protocol version - InvalidClientConfig: <the value>`), which
/// may be a secret put in the wrong place. (Replacing the URL's secret values wherever they
/// appear in the text would show them by where `***` lands: a password `password` turns
/// a word of the message into `***`.)
fn without_detail(e: &redis::RedisError) -> String {
    let text = e.to_string();
    match e.detail() {
        Some(detail) => match text.strip_suffix(detail).and_then(|t| t.strip_suffix(": ")) {
            Some(head) => format!("{head} (the value is not shown)"),
            None => "redis-rs could not read it (its message, which quotes a value, is not shown)"
                .to_owned(),
        },
        None => text,
    }
}

/// Whether `value` is one that the harmless parameter `key` takes: any other value may be
/// a secret put there by mistake (`?protocol=<password>`).
fn harmless_value(key: &str, value: &str) -> bool {
    match key {
        "db" => value.bytes().all(|b| b.is_ascii_digit()),
        "protocol" => ["2", "3", "resp2", "resp3"].contains(&value.to_ascii_lowercase().as_str()),
        "insecure" => ["", "true", "false", "0", "1"].contains(&value),
        _ => true,
    }
}

fn redact_query(query: &str, keep: &[&str]) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !keep.contains(&k) || !harmless_value(k, v) => format!("{k}=***"),
            Some(_) => pair.to_owned(),
            None if pair.is_empty() => String::new(),
            None => "***".to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The scheme of a URL whose scheme is not followed by `//` (`redis:u:p@h`, `redis:/h`):
/// None for every other text, a URL with an authority or none at all.
fn scheme_without_authority(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once(':')?;
    let is_scheme = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    (is_scheme && !rest.starts_with("//")).then_some(scheme)
}

fn check_url(url: &str) -> Result<()> {
    const SCHEMES: [&str; 5] = ["redis", "rediss", "redis+unix", "unix", "redis+sentinel"];
    if let Some(scheme) = scheme_without_authority(url).filter(|s| SCHEMES.contains(s)) {
        return Err(Error::invalid(format!(
            "bad Redis URL {scheme}:***: the scheme must be followed by // (redis://host:port, rediss://, redis+unix:///path, redis+sentinel://host:port/MASTER)"
        )));
    }
    if url.starts_with("redis+sentinel://") {
        return Ok(()); // parsed by `parse_sentinel_url`
    }
    // The CLI's form of several seeds is one URL to a client: say where the seeds go.
    let joined = |u: &str| {
        SCHEMES
            .iter()
            .any(|s| u.trim_start().starts_with(&format!("{s}://")))
    };
    if url.split(',').skip(1).any(joined) {
        return Err(Error::invalid(format!(
            "bad Redis URL {}: several seed URLs of a cluster go in a list, one URL per item (the delayq command takes them comma-separated with --cluster)",
            redact_url(url)
        )));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| Error::invalid(format!("bad Redis URL {}: {e}", redact_url(url))))?;
    match parsed.scheme() {
        "redis" | "rediss" | "redis+unix" | "unix" => Ok(()),
        s => Err(Error::invalid(format!(
            "bad Redis URL scheme {s:?}: use redis://, rediss://, redis+unix:// or redis+sentinel://"
        ))),
    }
}

/// Keepalive probes after 3 s of silence, every 2 s, 3 of them: a vanished peer is
/// noticed by the kernel within about 9 s even on an idle connection (SPEC 10: 10 s).
fn tcp_settings() -> TcpSettings {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(3))
        .with_interval(Duration::from_secs(2))
        .with_retries(3);
    TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
}

fn install_tls_provider() {
    // rustls needs one process-wide crypto provider; ring builds without cmake.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A node client for `url`, with keepalive and the TLS options.
/// What redis-rs makes of `url`, with the query parameters a redis-py user passes (`db`,
/// `username`/`user`, `password`/`pass`) in every URL form: redis-rs reads them only from
/// `redis+unix://` ones, and there only as `user` and `pass`. An unknown parameter is
/// refused rather than ignored (a misspelt `?db=` would write to database 0).
fn connection_info(url: &str) -> Result<redis::ConnectionInfo> {
    const UNKNOWN_PARAM: &str =
        "unknown query parameter (known: db, username or user, password or pass, protocol, insecure)";
    // (`why` is delayq's own text or redis-rs's without its detail: no value of the URL.)
    let bad = |why: &str| Error::invalid(format!("bad Redis URL {}: {why}", redact_url(url)));
    let info = url
        .into_connection_info()
        .map_err(|e| bad(&without_detail(&e)))?;
    let parsed = match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "redis" | "rediss" | "redis+unix" | "unix") => u,
        _ => return Ok(info.set_tcp_settings(tcp_settings())),
    };
    // A socket's path is no database number; redis-rs read `db`, `user`, `pass` there.
    let unix = parsed.scheme().ends_with("unix");
    let in_path = !unix && !parsed.path().trim_matches('/').is_empty();
    let mut redis = info.redis_settings().clone();
    for (key, value) in parsed.query_pairs() {
        redis = match key.as_ref() {
            "db" => match value.parse::<i64>() {
                Ok(db) if in_path && db != redis.db() => {
                    return Err(bad("two database numbers, in the path and in ?db="))
                }
                Ok(db) => redis.set_db(db),
                Err(_) => return Err(bad("db must be a database number")),
            },
            "username" | "user" => redis.set_username(value),
            "password" | "pass" => redis.set_password(value),
            "protocol" | "insecure" => redis,
            _ => return Err(bad(UNKNOWN_PARAM)),
        };
    }
    Ok(info
        .set_redis_settings(redis)
        .set_tcp_settings(tcp_settings()))
}

fn node_client(url: &str, certs: Option<&redis::TlsCertificates>) -> Result<redis::Client> {
    let bad = |e: RedisError| Error::invalid(format!("bad Redis URL {}: {e}", redact_url(url)));
    let info = connection_info(url)?;
    match certs {
        Some(certs) if url.starts_with("rediss:") => {
            redis::Client::build_with_tls(info, certs.clone()).map_err(bad)
        }
        _ => redis::Client::open(info).map_err(bad),
    }
}

/// `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER_NAME[/db]`.
struct SentinelUrl {
    sentinels: Vec<(String, u16)>,
    master: String,
    db: i64,
    username: Option<String>,
    password: Option<String>,
}

fn parse_sentinel_url(url: &str) -> Result<SentinelUrl> {
    let bad = |why: &str| {
        Error::invalid(format!(
            "bad Sentinel URL {}: {why} (expected redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER_NAME[/db])",
            redact_url(url)
        ))
    };
    let rest = url
        .strip_prefix("redis+sentinel://")
        .ok_or_else(|| bad("scheme"))?;
    let (rest, query) = match rest.split('#').next().unwrap_or_default().split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest.split('#').next().unwrap_or_default(), None),
    };
    let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no master name"))?;
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let decode = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let (username, password) = match userinfo {
        Some(ui) => match ui.split_once(':') {
            Some((u, p)) => ((!u.is_empty()).then(|| decode(u)), Some(decode(p))),
            None => ((!ui.is_empty()).then(|| decode(ui)), None),
        },
        None => (None, None),
    };
    let mut sentinels = Vec::new();
    for host in hosts.split(',').filter(|h| !h.is_empty()) {
        let (h, p) = match host.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad("bad port"))?),
            None => (host, 26379),
        };
        sentinels.push((h.trim_matches(['[', ']']).to_owned(), p));
    }
    if sentinels.is_empty() {
        return Err(bad("no Sentinel host"));
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let master = parts
        .next()
        .ok_or_else(|| bad("no master name"))?
        .to_owned();
    let in_path = parts.next();
    let mut db = match in_path {
        Some(d) => d.parse::<i64>().map_err(|_| bad("bad db number"))?,
        None => 0,
    };
    let (mut username, mut password) = (username, password);
    // The query parameters of the other URL forms, with the same rules: an unknown one is
    // refused rather than ignored (a misspelt `?db=` would write to database 0).
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "db" => match value.parse::<i64>() {
                Ok(n) if in_path.is_some() && n != db => {
                    return Err(bad("two database numbers, in the path and in ?db="))
                }
                Ok(n) => db = n,
                Err(_) => return Err(bad("db must be a database number")),
            },
            "username" | "user" => username = Some(value.into_owned()),
            "password" | "pass" => password = Some(value.into_owned()),
            _ => {
                return Err(bad(
                    "unknown query parameter (known: db, username or user, password or pass)",
                ))
            }
        }
    }
    Ok(SentinelUrl {
        sentinels,
        master,
        db,
        username,
        password,
    })
}

fn sentinel_client(
    url: &str,
    certs: Option<&redis::TlsCertificates>,
) -> Result<tokio::sync::Mutex<SentinelClient>> {
    let s = parse_sentinel_url(url)?;
    let bad = |e: RedisError| Error::invalid(format!("bad Sentinel URL {}: {e}", redact_url(url)));
    let addrs = s
        .sentinels
        .iter()
        .map(|(h, p)| ConnectionAddr::Tcp(h.clone(), *p));
    let mut b = SentinelClientBuilder::new(addrs, &s.master, SentinelServerType::Master)
        .map_err(bad)?
        .set_client_to_redis_db(s.db)
        .set_client_to_redis_tcp_settings(tcp_settings())
        .set_client_to_sentinel_tcp_settings(tcp_settings());
    // The same credentials serve the sentinels and the master, as most deployments
    // set them (Redis ACLs with `sentinel auth-user`/`requirepass` on both).
    if let Some(u) = &s.username {
        b = b
            .set_client_to_redis_username(u)
            .set_client_to_sentinel_username(u);
    }
    if let Some(p) = &s.password {
        b = b
            .set_client_to_redis_password(p)
            .set_client_to_sentinel_password(p);
    }
    if let Some(certs) = certs {
        b = b.set_client_to_redis_certificates(certs.clone());
    }
    Ok(tokio::sync::Mutex::new(b.build().map_err(bad)?))
}

/// Where new connections go: one server, the current master of a Sentinel group, or the
/// nodes of a cluster (for pub/sub, each in turn).
enum Nodes {
    Single(redis::Client),
    Sentinel(tokio::sync::Mutex<SentinelClient>),
    Cluster(Arc<topology::ClusterNodes>),
}

impl Nodes {
    /// A client for the node to connect to now. For Sentinel, asks the sentinels which
    /// node is the master (so a failover is followed at the next connection).
    async fn client(&self, limit: Duration) -> Result<redis::Client> {
        match self {
            Nodes::Single(c) => Ok(c.clone()),
            Nodes::Sentinel(s) => {
                let ask = async { s.lock().await.async_get_client().await };
                // No master to name (mid-failover) is no server error of the caller's: it
                // is a connection that cannot be made yet.
                with_timeout(limit, "to ask the sentinels for the master", ask)
                    .await
                    .map_err(|e| match e {
                        Error::Server(m) => {
                            Error::Connection(format!("no master from the sentinels: {m}"))
                        }
                        e => e,
                    })
            }
            Nodes::Cluster(nodes) => Ok(nodes.pubsub()),
        }
    }

    /// After a failed connection: use the next node of a cluster next time, and ask the
    /// cluster for its nodes (those it had may all be gone).
    fn rotate(&self) {
        if let Nodes::Cluster(nodes) = self {
            nodes.rotate();
            nodes.learn_soon();
        }
    }

    async fn multiplexed(
        &self,
        limit: Duration,
        response_timeout: Option<Duration>,
    ) -> Result<MultiplexedConnection> {
        let started = tokio::time::Instant::now();
        let client = self.client(limit).await?;
        let left = limit.saturating_sub(started.elapsed());
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(left))
            .set_response_timeout(response_timeout);
        let r = with_timeout(
            left,
            "to connect",
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await;
        if r.is_err() {
            self.rotate();
        }
        r
    }

    async fn pubsub(&self, limit: Duration) -> Result<redis::aio::PubSub> {
        let started = tokio::time::Instant::now();
        let client = self.client(limit).await?;
        let left = limit.saturating_sub(started.elapsed());
        let r = with_timeout(left, "to connect", client.get_async_pubsub()).await;
        if r.is_err() {
            self.rotate();
        }
        r
    }
}

/// A multiplexed connection that is replaced when it fails or a reply is late. One
/// request is never sent twice: a request on a connection that failed fails too.
struct Reconnecting {
    nodes: Arc<Nodes>,
    connect_timeout: Duration,
    response_timeout: Duration,
    state: Mutex<ReconnectState>,
    /// Held while connecting, so that many callers make one connection.
    connecting: crate::process::OneAtATime,
    /// The connections of threads that make their requests themselves (`direct`).
    own: direct::Owner,
    /// One of those was dropped for a reply that did not come: the next one opened says so.
    own_lost: std::sync::atomic::AtomicBool,
    /// When the shared connection last answered, in ms since `born` (see [`CHECK_IDLE`]).
    answered_ms: AtomicU64,
    born: std::time::Instant,
}

/// A connection that has not answered for this long is asked a `PING` before a request
/// goes over it. A server closes connections while they are idle (a restart, its `timeout`
/// setting, a proxy, `CLIENT KILL`): the next request over one failed as a connection
/// error whose outcome the caller could not know, though it was never sent. Closed, the
/// connection is replaced first; silent, the request fails without being sent.
const CHECK_IDLE: Duration = Duration::from_secs(1);

/// What a `PING` found of an idle connection.
enum Checked {
    Answered,
    /// Closed by the server (or it leads to no master now): open another.
    Spent(RedisError),
    /// No answer in time, or another failure: the request fails with it, unsent.
    Failed(RedisError),
}

impl Checked {
    fn of(pinged: redis::RedisResult<()>) -> Checked {
        match pinged {
            Ok(()) => Checked::Answered,
            Err(e) if e.is_timeout() => Checked::Failed(to_redis_error(Error::Timeout(
                "no answer from Redis to a PING of an idle connection; the request was not sent"
                    .into(),
            ))),
            Err(e) if connection_is_spent(&e) => Checked::Spent(e),
            Err(e) => Checked::Failed(e),
        }
    }
}

/// The shared connection of one generation, as a request gets it.
#[derive(Clone)]
struct Shared {
    generation: u64,
    /// `host::forks()` when it was opened: in a process forked since, its task and socket
    /// are the parent's (no thread of the child runs the task), so it is not used there.
    forks: u64,
    conn: MultiplexedConnection,
    /// Set once, by [`Reconnecting::discard`], to when the request that got no reply was sent.
    silent_since: tokio::sync::watch::Receiver<Option<Instant>>,
}

impl Shared {
    /// Ends once a request sent over this connection before `sent` got no reply in time.
    /// Redis answers a connection's requests in order, so one sent after it waits behind a
    /// reply that may never come: it fails then, and lets the connection close, rather than
    /// hold it open until its own time runs out (up to 5 s more, past SPEC 10's 10 s).
    async fn stuck(&self, sent: Instant) {
        let mut silent_since = self.silent_since.clone();
        let gone = (silent_since.wait_for(|t| t.is_some_and(|t| t < sent)).await).is_err();
        if gone {
            std::future::pending::<()>().await; // replaced for another reason: no news
        }
    }
}

/// The error of a request that waited behind one whose reply did not come.
fn stuck_behind() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "no reply from Redis: a request sent before this one over the same connection got none in time, so the connection was replaced and whether this command ran is unknown",
    ))
}

#[derive(Default)]
struct ReconnectState {
    /// Bumped by every connection attempt.
    generation: u64,
    conn: Option<Shared>,
    /// Tells the requests of `conn` that it was replaced after a request got no reply.
    silent: Option<tokio::sync::watch::Sender<Option<Instant>>>,
    /// The error of the last attempt, if it failed: callers that waited for that attempt
    /// get it instead of trying again at once.
    failed: Option<Error>,
    /// A connection was dropped (or an attempt failed) since the last one opened: the next
    /// that opens is logged, so that a log that said Redis was lost also says it is back.
    lost: bool,
    /// One has opened: until then a failed attempt is the caller's error alone (a process
    /// started before Redis says so in its own words), with nothing lost to log.
    was_open: bool,
}

impl ReconnectState {
    /// The shared connection, unless there is none or it is one of the process this one
    /// was forked from: that one is forgotten (not dropped: nothing of the parent's is
    /// touched here) and the caller opens another.
    fn live(&mut self) -> Option<Shared> {
        if self.conn.as_ref()?.forks != crate::host::forks() {
            std::mem::forget(self.conn.take());
            std::mem::forget(self.silent.take());
            return None;
        }
        self.conn.clone()
    }
}

impl Reconnecting {
    async fn get(&self) -> Result<Shared> {
        let seen = {
            let mut s = self.state.lock().expect("connection state");
            if let Some(c) = s.live() {
                return Ok(c);
            }
            s.generation
        };
        let _one = self.connecting.lock().await;
        {
            let mut s = self.state.lock().expect("connection state");
            if let Some(c) = s.live() {
                return Ok(c);
            }
            if s.generation != seen {
                if let Some(e) = &s.failed {
                    return Err(e.joined());
                }
            }
        }
        // No response timeout of redis-rs's own: ours (below) also replaces the connection.
        let attempt = self.nodes.multiplexed(self.connect_timeout, None).await;
        let mut s = self.state.lock().expect("connection state");
        s.generation += 1;
        match attempt {
            Ok(conn) => {
                let (silent, silent_since) = tokio::sync::watch::channel(None);
                let generation = s.generation;
                let shared = Shared {
                    generation,
                    forks: crate::host::forks(),
                    conn,
                    silent_since,
                };
                (s.conn, s.silent) = (Some(shared.clone()), Some(silent));
                s.failed = None;
                s.was_open = true;
                if std::mem::take(&mut s.lost) {
                    tracing::info!("Redis connection open again");
                }
                self.answered(); // just opened
                Ok(shared)
            }
            Err(e) => {
                s.failed = Some(e.clone());
                if s.was_open && !std::mem::replace(&mut s.lost, true) {
                    // The first failure since a connection was open: logged once, as a
                    // dropped connection is, so that "open again" follows a line saying why.
                    tracing::info!(error = %Escaped(&e), "cannot open a Redis connection; the next request tries again");
                }
                Err(e)
            }
        }
    }

    /// Forgets the connection of `generation` (if it is still the current one); `silent`
    /// when a request sent then got no reply, which fails every request sent after it
    /// ([`Shared::stuck`]). `lost` when a request failed with it (logged, and so is the
    /// next connection that opens), not when the server closed it while idle (a `timeout`
    /// of its own), which is routine.
    fn discard(&self, generation: u64, silent: Option<Instant>, lost: bool) {
        let mut s = self.state.lock().expect("connection state");
        if s.generation == generation && s.conn.is_some() {
            s.conn = None;
            if lost {
                s.lost = true;
                tracing::info!("Redis connection dropped; the next request opens another");
            }
            if let (Some(sent), Some(tell)) = (silent, &s.silent) {
                tell.send_replace(Some(sent));
            }
        }
    }

    /// How long the reply to a request that sends `bytes` may take: the response timeout,
    /// plus 1 s for every [`BYTES_PER_SECOND`] past the first of them. A value of hundreds
    /// of MiB takes Redis seconds to read and to copy through a script (an offer of 512 MiB
    /// ran 23 s inside Redis on the 2-core test machine); without this, offers above about
    /// 100 MiB failed as replies lost, though they were stored.
    fn limit_for(&self, bytes: usize) -> Duration {
        let extra = bytes.saturating_sub(BYTES_PER_SECOND) as f64 / BYTES_PER_SECOND as f64;
        self.response_timeout + Duration::from_secs_f64(extra)
    }

    /// A request whose reply may take up to `limit` (a `WAIT` after a write).
    async fn request_within<T>(
        &self,
        limit: Duration,
        send: impl AsyncFnOnce(&mut Conn) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let (direct, _in_flight) = self.own.start();
        if direct {
            return self.request_directly(limit, send).await;
        }
        let shared = self.get().await.map_err(to_redis_error)?;
        let shared = match self.idle() >= CHECK_IDLE {
            true => self.checked(shared).await?,
            false => shared,
        };
        let (generation, sent) = (shared.generation, Instant::now());
        let mut conn = Conn::Shared(shared.conn.clone());
        let replied = tokio::select! {
            replied = tokio::time::timeout(limit, send(&mut conn)) => replied,
            () = shared.stuck(sent) => return Err(stuck_behind()),
        };
        match replied {
            Ok(Ok(v)) => {
                self.answered();
                Ok(v)
            }
            Ok(Err(e)) => {
                if connection_is_spent(&e) {
                    self.discard(generation, None, true);
                }
                Err(e)
            }
            Err(_) => {
                self.discard(generation, Some(sent), true);
                tracing::warn!(?limit, "no reply from Redis in time; connection dropped");
                Err(reply_lost(limit))
            }
        }
    }

    /// How long the shared connection has not answered.
    fn idle(&self) -> Duration {
        let answered = Duration::from_millis(self.answered_ms.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(answered)
    }

    fn answered(&self) {
        let now = self.born.elapsed().as_millis() as u64;
        self.answered_ms.store(now, Ordering::Relaxed);
    }

    /// Asks the idle shared connection of `generation` a `PING` (see [`CHECK_IDLE`]): the
    /// connection to send a request over, a new one if the server had closed it.
    async fn checked(&self, shared: Shared) -> redis::RedisResult<Shared> {
        let (ping, mut conn, sent) = (redis::cmd("PING"), shared.conn.clone(), Instant::now());
        let pinged = tokio::select! {
            pinged = tokio::time::timeout(self.response_timeout, ping.query_async(&mut conn)) => pinged,
            () = shared.stuck(sent) => return Err(stuck_behind()),
        };
        match Checked::of(pinged.unwrap_or_else(|_| Err(timed_out()))) {
            Checked::Answered => {
                self.answered();
                Ok(shared)
            }
            Checked::Spent(e) => {
                self.discard(shared.generation, None, false);
                tracing::debug!(error = %Escaped(&e), "an idle connection was closed by the server; replaced before the request");
                self.get().await.map_err(to_redis_error)
            }
            Checked::Failed(e) => {
                let silent = e.is_timeout().then_some(sent);
                self.discard(shared.generation, silent, true);
                Err(e)
            }
        }
    }

    /// [`Reconnecting::request_within`] over this thread's own connection (see `direct`),
    /// with `limit` as its read and write timeouts.
    async fn request_directly<T>(
        &self,
        limit: Duration,
        send: impl AsyncFnOnce(&mut Conn) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        // Inside a call with a time of its own, no step may outlast it.
        let limit = direct::within_bound(limit)?;
        let kept = match self.own.take() {
            Some((conn, _, used)) if used.elapsed() >= CHECK_IDLE => {
                let ping_limit = direct::within_bound(self.response_timeout)?;
                let mut conn = with_timeouts(conn, ping_limit)?;
                match Checked::of(direct::ping(&mut conn)) {
                    // The timeout it has now, so that the request below sets its own.
                    Checked::Answered => Some((conn, ping_limit)),
                    Checked::Spent(e) => {
                        tracing::debug!(error = %Escaped(&e), "an idle connection was closed by the server; replaced before the request");
                        None
                    }
                    Checked::Failed(e) => {
                        self.own_lost.store(true, Ordering::Relaxed);
                        tracing::info!("Redis connection dropped; the next request opens another");
                        return Err(e);
                    }
                }
            }
            kept => kept.map(|(conn, timeout, _)| (conn, timeout)),
        };
        let conn = match kept {
            Some((conn, timeout)) if timeout == limit => conn,
            Some((conn, _)) => with_timeouts(conn, limit)?,
            None => {
                let client = self.nodes.client(self.connect_timeout).await;
                let client = client.map_err(to_redis_error)?;
                let connect_limit = direct::within_bound(self.connect_timeout)?;
                let conn = open_within(client, connect_limit).map_err(|e| {
                    match e.is_timeout() {
                        // As the multiplexed connection says it (not "os error 11").
                        true => to_redis_error(Error::Timeout(format!(
                            "no answer from Redis within {connect_limit:?} to connect"
                        ))),
                        false => e,
                    }
                })?;
                if self.own_lost.swap(false, Ordering::Relaxed) {
                    tracing::info!("Redis connection open again");
                }
                with_timeouts(conn, limit)?
            }
        };
        let mut conn = Conn::Direct(direct::Blocking(conn));
        let outcome = send(&mut conn).await;
        let Conn::Direct(direct::Blocking(conn)) = conn else {
            unreachable!("a direct request keeps its connection")
        };
        match outcome {
            Err(e) if e.is_timeout() => {
                self.own_lost.store(true, Ordering::Relaxed);
                tracing::warn!(?limit, "no reply from Redis in time; connection dropped");
                Err(reply_lost(limit))
            }
            Err(e) if connection_is_spent(&e) => {
                self.own_lost.store(true, Ordering::Relaxed);
                tracing::info!("Redis connection dropped; the next request opens another");
                Err(e)
            }
            outcome => {
                self.own.put(conn, limit);
                outcome
            }
        }
    }

    fn close(&self) {
        self.state.lock().expect("connection state").conn = None;
        self.own.close();
    }
}

/// A blocking connection of `client`, opened within `limit` in all. redis-rs bounds the
/// connect and each read of the setup commands (`CLIENT SETINFO`, `AUTH`, `SELECT`) by
/// `limit` one by one, so a silent link held the caller for a multiple of it. The opening
/// runs on a thread of its own, left to end by itself when the limit passes; the caller
/// waits without the runtime (a process forked from one with a runtime has no runtime
/// threads: no timer would fire and no blocking task would run).
fn open_within(client: redis::Client, limit: Duration) -> redis::RedisResult<redis::Connection> {
    use std::io::{Error as IoError, ErrorKind as IoKind};
    let (opened, opening) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("delayq-connect".into())
        .spawn(move || {
            // A thread of ours: signals are for the host's threads (an interrupted read
            // would fail the opening).
            let _held = direct::SignalsHeld::now();
            opened.send(client.get_connection_with_timeout(limit))
        });
    spawned.map_err(IoError::other)?;
    match opening.recv_timeout(limit) {
        Ok(opened) => opened,
        Err(_) => Err(IoError::from(IoKind::TimedOut).into()),
    }
}

/// Whether an error means the connection cannot be used again: it broke, or it now
/// leads to a node that is no master (after a failover).
pub(crate) fn connection_is_spent(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

/// A request's own time limit passed (as an I/O timeout: `is_timeout`).
fn timed_out() -> RedisError {
    std::io::Error::from(std::io::ErrorKind::TimedOut).into()
}

/// The error of a request whose reply did not come: the request may have run.
pub(crate) fn reply_lost(limit: Duration) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!(
            "no reply from Redis within {limit:?}; the connection was replaced and whether the command ran is unknown"
        ),
    ))
}

fn to_redis_error(e: Error) -> RedisError {
    let kind = match e.kind() {
        crate::ErrorKind::Timeout => std::io::ErrorKind::TimedOut,
        _ => std::io::ErrorKind::NotConnected,
    };
    // Its kind comes back from the io kind; the message without the prefix, not twice.
    RedisError::from(std::io::Error::new(kind, e.detail().to_owned()))
}

/// A synchronous connection with `limit` as its read and write timeouts.
fn with_timeouts(
    conn: redis::Connection,
    limit: Duration,
) -> redis::RedisResult<redis::Connection> {
    conn.set_read_timeout(Some(limit))?;
    conn.set_write_timeout(Some(limit))?;
    Ok(conn)
}

/// The connection of one request to a single server: the shared multiplexed one, or the
/// calling thread's own (`direct`).
enum Conn {
    Shared(MultiplexedConnection),
    Direct(direct::Blocking),
}

/// `impl ConnectionLike` for an enum of connections: each request goes to the one its
/// variant holds.
macro_rules! one_of {
    ($ty:ident { $($variant:ident),* }) => {
        impl ConnectionLike for $ty {
            fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
                match self { $($ty::$variant(c) => c.req_packed_command(cmd),)* }
            }

            fn req_packed_commands<'a>(
                &'a mut self,
                pipeline: &'a Pipeline,
                offset: usize,
                count: usize,
            ) -> RedisFuture<'a, Vec<Value>> {
                match self { $($ty::$variant(c) => c.req_packed_commands(pipeline, offset, count),)* }
            }

            fn get_db(&self) -> i64 {
                match self { $($ty::$variant(c) => c.get_db(),)* }
            }
        }
    };
}

one_of!(Conn { Shared, Direct });

/// The multiplexed command connection.
#[derive(Clone)]
enum Commands {
    Single(Arc<Reconnecting>),
    Cluster(ClusterCommands),
}

impl ConnectionLike for Commands {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Commands::Single(r) => Box::pin(async move {
                let limit = r.limit_for(sent_bytes([cmd]));
                r.request_within(limit, async |c| c.req_packed_command(cmd).await)
                    .await
            }),
            Commands::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Commands::Single(r) => Box::pin(async move {
                let limit = r.limit_for(sent_bytes(pipeline.cmd_iter()));
                r.request_within(limit, async |c| {
                    c.req_packed_commands(pipeline, offset, count).await
                })
                .await
            }),
            Commands::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Commands::Single(_) => 0,
            Commands::Cluster(c) => c.get_db(),
        }
    }
}

/// A connection used for one blocking command at a time. (Clones share it: a sharded
/// receive's non-blocking reads of several shards go over it at once.)
#[derive(Clone)]
pub(crate) enum Dedicated {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

one_of!(Dedicated { Single, Cluster });

/// The connections of one client. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Connection {
    commands: Commands,
    /// Where dedicated and pub/sub connections go.
    nodes: Arc<Nodes>,
    /// Idle dedicated connections, and `host::forks()` when they were opened (those of a
    /// parent process are forgotten in a forked child, as the shared one is).
    pool: Arc<Mutex<(u64, Vec<Dedicated>)>>,
    opts: Arc<ClientOptions>,
}

const POOL_MAX_IDLE: usize = 16;

impl Connection {
    pub(crate) async fn open(opts: ClientOptions) -> Result<Self> {
        if opts.urls.is_empty() || opts.urls.iter().any(|u| u.is_empty()) {
            return Err(Error::invalid("no Redis URL given"));
        }
        if opts.connect_timeout.is_zero() || opts.response_timeout.is_zero() {
            return Err(Error::invalid(
                "connect and response timeouts must be positive",
            ));
        }
        if let Some(d) = &opts.durability {
            // WAIT 0 waits forever in Redis; below 1 ms nothing could ever be confirmed.
            if d.timeout < Duration::from_millis(1) {
                return Err(Error::invalid(format!(
                    "durability timeout must be at least 1 ms, got {} ms",
                    d.timeout.as_secs_f64() * 1000.0
                )));
            }
            // WAIT takes whole milliseconds; a longer wait than any delay is a mistake.
            crate::delay::delay_to_millis(d.timeout).map_err(|_| {
                Error::invalid(format!(
                    "durability timeout of {:?} is too long: at most {} ms",
                    d.timeout,
                    crate::delay::MAX_DELAY_MS
                ))
            })?;
        }
        for url in &opts.urls {
            check_url(url)?;
            if url.starts_with("rediss:") {
                install_tls_provider();
            }
        }
        let cluster_mode = opts.is_cluster();
        let sentinel = opts.urls[0].starts_with("redis+sentinel://");
        if sentinel && !opts.tls.is_empty() {
            // redis-rs's Sentinel client would take the certificates but connect in plain
            // text: refuse rather than ignore them.
            return Err(Error::invalid(
                "TLS options are not supported with a Sentinel URL yet; use rediss:// to the master, or no TLS options",
            ));
        }
        if !opts.tls.is_empty() && opts.urls.iter().any(|u| !u.starts_with("rediss://")) {
            // Read and then dropped, they would leave a connection the caller believes
            // encrypted in plain text.
            return Err(Error::invalid(
                "TLS options (CA file, client certificate) are for rediss:// URLs; this URL is plain text: use rediss:// to connect with TLS",
            ));
        }
        let certs = opts.tls.load()?;
        if sentinel && (cluster_mode || opts.urls.len() > 1) {
            return Err(Error::invalid(
                "a Sentinel URL names one master group; it cannot be a cluster seed",
            ));
        }
        let started = tokio::time::Instant::now();
        let (commands, nodes) = if cluster_mode {
            let seeds: Vec<_> = opts
                .urls
                .iter()
                .map(|u| connection_info(u))
                .collect::<Result<_>>()?;
            // A cluster's nodes name each other by host and port: no socket path.
            let unix = |u: &&String| u.starts_with("redis+unix:") || u.starts_with("unix:");
            if let Some(url) = opts.urls.iter().find(unix) {
                return Err(Error::invalid(format!(
                    "{} is a Unix socket: a Redis Cluster is reached over TCP, from redis:// or rediss:// seed URLs",
                    redact_url(url),
                )));
            }
            // (SELECT is refused on a cluster: every connection would fail.)
            let with_db = opts.urls.iter().zip(&seeds).find_map(|(url, seed)| {
                let db = seed.redis_settings().db();
                (db != 0).then_some((url, db))
            });
            if let Some((url, db)) = with_db {
                return Err(Error::invalid(format!(
                    "a Redis Cluster has database 0 only, and {} names database {db}: leave the database number out of cluster URLs",
                    redact_url(url),
                )));
            }
            // redis-rs opens (and checks with a PING) a connection to every node of the
            // topology, replicas too, when it connects and at every refresh of the slots,
            // holding every request meanwhile: a node that accepts connections but never
            // answers (a paused VM, an address the client cannot reach) held a connect past
            // its time and stalled every shard. Each node gets a share of the connect time,
            // and the blocking connections (below) a response limit.
            let node_connect = (opts.connect_timeout * 2 / 5).max(Duration::from_millis(500));
            let node_certs = certs.clone();
            let builder = move |nodes: Vec<redis::ConnectionInfo>| {
                let b = ClusterClient::builder(nodes)
                    .connection_timeout(node_connect)
                    .tcp_settings(tcp_settings());
                match &node_certs {
                    Some(certs) => b.certs(certs.clone()),
                    None => b,
                }
            };
            let bad = |e: RedisError| Error::invalid(format!("bad cluster options: {e}"));
            // No resends of redis-rs's own: `ClusterCommands` resends what did not run.
            let cluster = builder(seeds.clone())
                .response_timeout(opts.response_timeout)
                .retries(0)
                .build()
                .map_err(bad)?;
            let conn = with_timeout(
                opts.connect_timeout,
                "to connect to the cluster",
                cluster.get_async_connection(),
            )
            .await
            .map_err(|e| match e.to_string().contains("cluster support disabled") {
                // A server that answers but is no cluster node: the option is the mistake.
                true => Error::invalid(format!(
                    "the server is not in cluster mode ({e}): connect without the cluster option, or to a node of a cluster"
                )),
                false => e,
            })?;
            let commands = ClusterCommands {
                conn,
                budget: opts.response_timeout,
                ran_on: None,
            };
            // Past any blocking wait's reply (`handle::LATE_REPLY_BUDGET`): redis-rs's own
            // limit only ends a PING of a silent node.
            let dedicated: topology::MakeClient = Box::new(move |nodes| {
                let b = builder(nodes).response_timeout(crate::handle::BLOCKING_RESPONSE_LIMIT);
                b.build().map_err(bad)
            });
            let limit = opts.response_timeout;
            let nodes = topology::ClusterNodes::new(
                commands.clone(),
                seeds,
                certs.clone(),
                dedicated,
                limit,
            )?;
            // Within the connect time left (a node that answers slowly delays no connect).
            let left = opts.connect_timeout.saturating_sub(started.elapsed());
            let _ = tokio::time::timeout(left, nodes.learn()).await;
            (
                Commands::Cluster(commands),
                Arc::new(Nodes::Cluster(Arc::new(nodes))),
            )
        } else {
            let nodes = Arc::new(if sentinel {
                Nodes::Sentinel(sentinel_client(&opts.urls[0], certs.as_ref())?)
            } else {
                Nodes::Single(node_client(&opts.urls[0], certs.as_ref())?)
            });
            let commands = Arc::new(Reconnecting {
                nodes: nodes.clone(),
                connect_timeout: opts.connect_timeout,
                response_timeout: opts.response_timeout,
                state: Mutex::new(ReconnectState::default()),
                connecting: Default::default(),
                own: direct::Owner::new(),
                own_lost: Default::default(),
                answered_ms: AtomicU64::new(0),
                born: std::time::Instant::now(),
            });
            // Connect now, so that a wrong URL or password fails `connect`. A server that
            // wants a password the URL lacks accepts the connection: ask it something.
            let mut conn = commands.get().await?.conn;
            let ping = redis::cmd("PING");
            let pong = ping.query_async::<Value>(&mut conn);
            with_timeout(opts.response_timeout, "to PING", pong).await?;
            (Commands::Single(commands), nodes)
        };
        let conn = Connection {
            commands,
            nodes,
            pool: Arc::new(Mutex::new((crate::host::forks(), Vec::new()))),
            opts: Arc::new(opts),
        };
        if conn.opts.durability.as_ref().is_some_and(|d| d.aof) {
            conn.check_waitaof().await?;
        }
        Ok(conn)
    }

    /// Refuses the durability option `aof` on a server without `WAITAOF` (before 7.2) at
    /// connect: else every offer would be applied and then fail on an unknown command.
    async fn check_waitaof(&self) -> Result<()> {
        let mut info = redis::cmd("COMMAND");
        info.arg("INFO").arg("WAITAOF");
        let limit = self.opts.response_timeout;
        let asked = with_timeout(limit, "to ask for WAITAOF", async {
            info.query_async::<Vec<Value>>(&mut self.commands()).await
        })
        .await;
        let info = match asked {
            Ok(info) => info,
            // An ACL user without `+command|info` cannot ask: the first write will tell.
            Err(e) if e.kind() == crate::ErrorKind::Server => return Ok(()),
            Err(e) => return Err(e),
        };
        match info.first() {
            Some(Value::Nil) | None => Err(Error::invalid(
                "the durability option aof waits with WAITAOF, which this Redis server lacks (Redis 7.2+ has it); leave aof off, or wait for replicas only",
            )),
            Some(_) => Ok(()),
        }
    }

    /// The options this connection was opened with.
    pub(crate) fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// A handle on the multiplexed connection, for commands and scripts.
    pub(crate) fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.commands.clone()
    }

    /// Runs a script that writes what a caller will be told is stored (an offer, an ack)
    /// and, with the durability option, waits on the same connection for replicas (`WAIT`)
    /// or the append-only file (`WAITAOF`). `key` is one of the script's keys (it routes
    /// the wait to the right master in a cluster).
    pub(crate) async fn write<T: FromRedisValue + Send>(
        &self,
        call: &ScriptInvocation<'_>,
        key: &str,
    ) -> Result<T> {
        let Some(d) = self.opts.durability.clone() else {
            return Ok(call.invoke_async(&mut self.commands()).await?);
        };
        let wait = durability_command(&d);
        let limit = self.opts.response_timeout.saturating_add(d.timeout);
        let (value, confirmed) = match &self.commands {
            Commands::Single(r) => {
                r.request_within(limit, async |c| {
                    let value: T = call.invoke_async(c).await?;
                    let confirmed: Value = wait.query_async(c).await?;
                    Ok((value, confirmed))
                })
                .await?
            }
            Commands::Cluster(c) => {
                let mut c = c.clone();
                let value: T = call.invoke_async(&mut c).await?;
                // The node that ran the script: where a `MOVED` sent it, else its slot's master.
                let node = c.ran_on.take().unwrap_or_else(|| {
                    let slot = crate::keys::cluster_slot(key);
                    SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master))
                });
                let confirmed = tokio::time::timeout(
                    limit,
                    c.conn.route_command(wait, RoutingInfo::SingleNode(node)),
                )
                .await
                .map_err(|_| reply_lost(limit))??;
                (value, confirmed)
            }
        };
        check_confirmed(&d, confirmed)?;
        Ok(value)
    }

    /// The keys that match `pattern`, by `SCAN` on the server or on each master of a
    /// cluster (`SCAN` covers the node it runs on only), page by page into `each`; at most
    /// `max_pages` pages of 1,000 keys per node.
    pub(crate) async fn scan(
        &self,
        pattern: &str,
        max_pages: usize,
        mut each: impl FnMut(Vec<String>),
    ) -> Result<()> {
        let masters = match (&*self.nodes, &self.commands) {
            (Nodes::Cluster(nodes), Commands::Cluster(c)) => Some((nodes.masters().await?, c)),
            _ => None,
        };
        let nodes = masters.as_ref().map_or(1, |(m, _)| m.len());
        for n in 0..nodes {
            let mut cursor = 0u64;
            for _ in 0..max_pages {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let page = match &masters {
                    Some((masters, commands)) => {
                        let (host, port) = masters[n].clone();
                        let to = SingleNodeRoutingInfo::ByAddress { host, port };
                        let mut conn = commands.conn.clone();
                        conn.route_command(scan, RoutingInfo::SingleNode(to))
                            .await?
                    }
                    None => scan.query_async(&mut self.commands()).await?,
                };
                let (next, keys): (u64, Vec<Vec<u8>>) =
                    redis::from_redis_value(page).map_err(RedisError::from)?;
                // (A key that is not UTF-8 names no queue of delayq's.)
                each(
                    keys.into_iter()
                        .filter_map(|k| String::from_utf8(k).ok())
                        .collect(),
                );
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// A new pub/sub connection.
    pub(crate) async fn pubsub(&self) -> Result<redis::aio::PubSub> {
        self.nodes.pubsub(self.opts.connect_timeout).await
    }

    /// A connection for one blocking command: from the pool, or new (connecting within
    /// `limit` at most).
    pub(crate) async fn dedicated(&self, limit: Duration) -> Result<Dedicated> {
        if let Some(c) = self.pooled() {
            return Ok(c);
        }
        let limit = limit.min(self.opts.connect_timeout);
        match &*self.nodes {
            Nodes::Cluster(nodes) => {
                let client = nodes.dedicated();
                let connecting = client.get_async_connection();
                match with_timeout(limit, "to connect", connecting).await {
                    Ok(conn) => Ok(Dedicated::Cluster(conn)),
                    Err(e) => {
                        nodes.learn_soon(); // (for the next attempt)
                        Err(e)
                    }
                }
            }
            _ => Ok(Dedicated::Single(
                self.nodes.multiplexed(limit, None).await?,
            )),
        }
    }

    /// An idle dedicated connection of this process, if any.
    fn pooled(&self) -> Option<Dedicated> {
        let mut pool = self.pool.lock().expect("pool lock");
        let forks = crate::host::forks();
        if pool.0 != forks {
            std::mem::forget(std::mem::take(&mut pool.1));
            pool.0 = forks;
        }
        pool.1.pop()
    }

    /// Gives a healthy dedicated connection back to the pool.
    pub(crate) fn release(&self, conn: Dedicated) {
        let mut pool = self.pool.lock().expect("pool lock");
        let forks = crate::host::forks();
        if pool.0 != forks {
            std::mem::forget(std::mem::take(&mut pool.1));
            pool.0 = forks;
        }
        if pool.1.len() < POOL_MAX_IDLE {
            pool.1.push(conn);
        }
    }

    /// Drops every connection this handle holds (on close).
    pub(crate) fn close(&self) {
        self.pool.lock().expect("pool lock").1.clear();
        if let Commands::Single(r) = &self.commands {
            r.close();
        }
    }
}

/// `WAIT replicas timeout`, or `WAITAOF 1 replicas timeout` with `aof`.
fn durability_command(d: &Durability) -> Cmd {
    let ms = d.timeout.as_millis().max(1) as u64;
    if d.aof {
        let mut c = redis::cmd("WAITAOF");
        c.arg(1).arg(d.replicas).arg(ms);
        c
    } else {
        let mut c = redis::cmd("WAIT");
        c.arg(d.replicas).arg(ms);
        c
    }
}

/// Fails a write that fewer replicas (or no fsync) confirmed than asked.
fn check_confirmed(d: &Durability, reply: Value) -> Result<()> {
    let (local, replicas) = match reply {
        Value::Int(n) => (1, n),
        Value::Array(v) if v.len() == 2 => match (&v[0], &v[1]) {
            (Value::Int(l), Value::Int(r)) => (*l, *r),
            _ => (0, 0),
        },
        // Refused (the slot's node became a replica during a failover: "WAIT cannot be
        // used with replica instances"): the write ran, its replication is unknown.
        other => {
            return Err(Error::Timeout(format!(
                "the write was applied on the master, but its replication could not be confirmed (the reply to WAIT: {other:?}); it may not survive a failover"
            )))
        }
    };
    if local < 1 || replicas < i64::from(d.replicas) {
        return Err(Error::Timeout(format!(
            "the write was applied on the master, but {} within {:?} (asked: {} replica(s){}); it may not survive a failover",
            if local < 1 { "the append-only file was not synced".to_owned() } else { format!("only {replicas} replica(s) confirmed it") },
            d.timeout,
            d.replicas,
            if d.aof { " and the AOF" } else { "" },
        )));
    }
    Ok(())
}

/// The pace at which a request's reply limit grows with what it sends (see
/// `Reconnecting::limit_for`): 8 MiB a second, a third of what the 512 MiB offer measured.
const BYTES_PER_SECOND: usize = 8 << 20;

/// The bytes of the arguments of `cmds` (what a request sends, near enough).
fn sent_bytes<'a>(cmds: impl IntoIterator<Item = &'a redis::Cmd>) -> usize {
    let arg = |a: redis::Arg<&[u8]>| match a {
        redis::Arg::Simple(b) => b.len(),
        _ => 0, // a cursor
    };
    cmds.into_iter()
        .map(|c| c.args_iter().map(arg).sum::<usize>())
        .sum()
}

async fn with_timeout<T, E: Into<Error>>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    // Whole milliseconds: a limit is often what was left of another (299.96ms).
    let late = || {
        let ms = u64::try_from(limit.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
        let limit = Duration::from_millis(ms);
        Error::Timeout(format!("no answer from Redis within {limit:?} {what}"))
    };
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(limit, fut).await {
        // redis-rs's own timeout of the same length says only "timed out"; a shorter one of
        // its own (a Sentinel's, 1 s) must not be called ours.
        Ok(Err(e)) => match e.into() {
            Error::Timeout(_) if started.elapsed() + Duration::from_millis(50) >= limit => {
                Err(late())
            }
            Error::Timeout(m) => {
                let after = Duration::from_millis(started.elapsed().as_millis() as u64);
                Err(Error::Timeout(format!(
                    "no answer from Redis {what}: {m} after {after:?}"
                )))
            }
            e => Err(e),
        },
        Ok(Ok(v)) => Ok(v),
        Err(_) => Err(late()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `WAIT` that answers anything but counts (refused by a node that became a replica
    /// in a failover) leaves the write applied and its replication unknown: a `timeout`, as
    /// when too few replicas confirm, never a `server` error that would say it did not run.
    #[test]
    fn a_wait_refused_after_the_write_is_a_timeout_saying_the_write_was_applied() {
        let d = Durability {
            replicas: 1,
            aof: false,
            timeout: Duration::from_millis(100),
        };
        for reply in [Value::Nil, Value::SimpleString("ERR".into())] {
            let e = check_confirmed(&d, reply).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Timeout, "{e}");
            assert!(e.to_string().contains("applied on the master"), "{e}");
        }
        assert!(check_confirmed(&d, Value::Int(1)).is_ok());
        let few = check_confirmed(&d, Value::Int(0)).unwrap_err();
        assert_eq!(few.kind(), crate::ErrorKind::Timeout, "{few}");
    }

    /// A timeout of redis-rs's own that ends sooner than ours is not reported as ours.
    #[tokio::test]
    async fn an_inner_timeout_names_its_own_time_not_the_limit() {
        let inner = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Err::<(), _>(timed_out())
        };
        let e = with_timeout(Duration::from_secs(5), "to ask", inner).await;
        let text = e.unwrap_err().to_string();
        assert!(!text.contains("5s"), "{text}");
        assert!(
            text.contains("to ask") && text.contains("after 1"),
            "{text}"
        );
        let ours = with_timeout(
            Duration::from_millis(50),
            "to ask",
            std::future::pending::<Result<()>>(),
        );
        let text = ours.await.unwrap_err().to_string();
        assert!(text.contains("within 50ms to ask"), "{text}");
    }

    #[test]
    fn redaction_hides_credentials() {
        let r = redact_url("redis://alice:s3cret@host:6380/2");
        assert!(!r.contains("s3cret") && !r.contains("alice"), "{r}");
        let opts = ClientOptions::new("redis://:pw123@h:1");
        assert!(!format!("{opts:?}").contains("pw123"));
    }

    #[test]
    fn redaction_covers_every_credential_form() {
        for (url, secret) in [
            ("redis://:pw1@h:1/0", "pw1"),
            ("redis://user2:pw2@h:1", "pw2"),
            ("redis://user3@h:1", "user3"),
            ("rediss://u:pw4@h:1/0?protocol=resp3", "pw4"),
            ("redis+unix:///tmp/r.sock?pass=pw5", "pw5"),
            ("redis+unix:///tmp/r.sock?db=1&pass=pw6&user=user6", "pw6"),
            ("redis+unix:///tmp/r.sock?db=1&pass=pw6&user=user6", "user6"),
            ("unix:///tmp/r.sock?password=pw7", "pw7"),
            ("redis://h:1/?password=pw8", "pw8"),
            (
                "redis+sentinel://u9:pw9@h1:26379,h2:26380/mymaster/2",
                "pw9",
            ),
            ("redis+sentinel://u9:pw9@h1:26379,h2:26380/mymaster/2", "u9"),
            ("redis+sentinel://:pw10@h1:1/m?token=t10", "t10"),
            ("redis://h:1/#frag11", "frag11"),
            // A '/' in the password, not percent-encoded: the URL's authority ends there.
            ("redis://user:9999/Secret8@h:1/0", "Secret8"),
            ("redis://user:Sec/ret12@h:1/0", "ret12"),
            ("redis://user:Sec/ret12@h:1/0", "Sec"),
            ("redis+sentinel://user:Sec/ret7@h:1/master", "ret7"),
            ("redis+sentinel://user:Sec/ret7@h:1/master", "Sec"),
            ("rediss://:a/b/c13@h:1", "c13"),
            // No `//`: a parser sees a scheme and a path, with no user-info in it.
            ("redis:alice:topsecret@127.0.0.1:1", "topsecret"),
            ("redis:/u:pw14@h:1", "pw14"),
            ("rediss:u:pw15@h:1/0", "pw15"),
            ("redis+unix:u:pw16@/tmp/x.sock", "pw16"),
            ("redis+sentinel:u:pw17@h:26379/m", "pw17"),
        ] {
            let r = redact_url(url);
            assert!(!r.contains(secret), "{url} -> {r}");
            if let Err(e) = check_url(url) {
                let e = e.to_string();
                assert!(!e.contains(secret), "{url} -> {e}");
            }
        }
        // A value redis-rs quotes in its own error.
        let e = connection_info("redis://h:1/?protocol=S3CRETPW")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("S3CRETPW"), "{e}");
        assert!(e.contains("Invalid protocol version"), "{e}");
        // A secret that is also a word of the message changes nothing in it: where `***`
        // landed would show the secret.
        let known = "(known: db, username or user, password or pass, protocol, insecure)";
        for url in [
            "redis://x:password@h:1/0?token=1",
            "redis://user:db@h:1/0?token=1",
            "rediss://known:insecure@h:1/0?token=protocol",
        ] {
            let e = connection_info(url).unwrap_err().to_string();
            assert!(
                e.ends_with(&format!("unknown query parameter {known}")),
                "{url} -> {e}"
            );
        }
        for url in ["redis:u:pw@h:1", "redis:/h:1", "redis+sentinel:h:1/m"] {
            let e = check_url(url).unwrap_err().to_string();
            assert!(e.contains("must be followed by //"), "{url} -> {e}");
        }
        assert!(check_url("redis+unix:///tmp/r.sock").is_ok());
        let e = check_url("redis://u:pw18@h:1, redis://h:2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("go in a list") && !e.contains("pw18"), "{e}");
        assert_eq!(
            redact_url("redis+unix:///tmp/r.sock?db=1&pass=x"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(
            redact_url("redis+sentinel://u:p@h1:1,h2:2/m/3"),
            "redis+sentinel://***@h1:1,h2:2/m/3"
        );
    }

    #[tokio::test]
    async fn tls_options_with_a_sentinel_url_are_refused() {
        let mut opts = ClientOptions::new("redis+sentinel://127.0.0.1:1/m");
        opts.tls.ca_file = Some("/nonexistent/ca.pem".into());
        let Err(err) = Connection::open(opts).await else {
            panic!("refused")
        };
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("Sentinel"), "{err}");
    }

    /// Refused before any connection (port 1 has no server): SELECT fails on a cluster.
    #[tokio::test]
    async fn a_database_number_in_a_cluster_url_is_refused() {
        for db in ["redis://u:secret@127.0.0.1:1/3", "redis://127.0.0.1:1?db=2"] {
            let urls = vec!["redis://127.0.0.1:2".to_owned(), db.to_owned()];
            let Err(err) = Connection::open(ClientOptions::cluster(urls)).await else {
                panic!("refused")
            };
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{err}");
            assert!(err.to_string().contains("database 0 only"), "{err}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_unix_socket_is_no_cluster_seed() {
        let urls = vec!["redis+unix:///tmp/none.sock?password=secret".to_owned()];
        let Err(err) = Connection::open(ClientOptions::cluster(urls)).await else {
            panic!("refused")
        };
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("is a Unix socket"), "{err}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn sentinel_urls_parse() {
        let s = parse_sentinel_url("redis+sentinel://u:p%40ss@h1:1,h2:2/mymaster/3").unwrap();
        assert_eq!(s.sentinels, vec![("h1".into(), 1), ("h2".into(), 2)]);
        assert_eq!(s.master, "mymaster");
        assert_eq!(s.db, 3);
        assert_eq!(s.username.as_deref(), Some("u"));
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        let s = parse_sentinel_url("redis+sentinel://h1/m").unwrap();
        assert_eq!(s.sentinels, vec![("h1".into(), 26379)]);
        assert!(parse_sentinel_url("redis+sentinel://h1:1").is_err());
        assert!(parse_sentinel_url("redis+sentinel:///m").is_err());
        let Err(err) = parse_sentinel_url("redis+sentinel://u:secret@h1:x/m") else {
            panic!("a bad port is refused")
        };
        assert!(!err.to_string().contains("secret"), "{err}");
        // The query parameters of the other URL forms, with the same rules.
        let s = parse_sentinel_url("redis+sentinel://h1:1/m?db=3&user=u&password=p%26w").unwrap();
        assert_eq!((s.db, s.username.as_deref()), (3, Some("u")));
        assert_eq!(s.password.as_deref(), Some("p&w"));
        let s = parse_sentinel_url("redis+sentinel://h1:1/m/2?db=2&pass=pw").unwrap();
        assert_eq!((s.db, s.password.as_deref()), (2, Some("pw")));
        for bad in [
            "redis+sentinel://h1:1/m?foo=bar",
            "redis+sentinel://h1:1/m/2?db=3",
            "redis+sentinel://h1:1/m?db=x",
        ] {
            let Err(err) = parse_sentinel_url(bad) else {
                panic!("{bad} is refused")
            };
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{err}");
        }
    }
}
