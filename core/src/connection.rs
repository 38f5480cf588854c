//! The one place that talks to redis-rs about connections. Queue code sees a
//! [`Connection`] and does not care whether it is one server or a cluster.
//!
//! - Commands and scripts go over one multiplexed connection that reconnects by itself
//!   (`ConnectionManager` for one server, `cluster_async::ClusterConnection` for a cluster).
//! - Blocking commands (`BLPOP`) would stall everything queued behind them on a multiplexed
//!   connection, so they get dedicated connections from a small pool.
//! - Pub/sub gets its own connection per subscriber; in a cluster, classic `PUBLISH` reaches
//!   every node, so any seed node will do.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};

use crate::error::{Error, Result};

/// How to reach Redis.
#[derive(Clone)]
pub struct ClientOptions {
    /// One URL (`redis://[user:pass@]host:port/db`, `rediss://...`, `redis+unix:///path`),
    /// or several seed URLs of a Redis Cluster.
    pub urls: Vec<String>,
    /// Treat `urls` as seeds of a Redis Cluster (implied when there is more than one URL).
    pub cluster: bool,
    /// Time limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Time limit for the reply to a non-blocking command or script.
    pub response_timeout: Duration,
}

impl ClientOptions {
    /// Options for one URL, with default time limits (5 s to connect, 10 s per reply).
    pub fn new(url: impl Into<String>) -> Self {
        ClientOptions {
            urls: vec![url.into()],
            cluster: false,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
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
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("ClientOptions")
            .field("urls", &urls)
            .field("cluster", &self.cluster)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

/// A URL with its user name and password replaced by `***`, safe to print.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if !u.username().is_empty() {
                let _ = u.set_username("***");
            }
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        Err(_) => "<unparsable url>".to_owned(),
    }
}

fn check_url(url: &str) -> Result<()> {
    let parsed = url::Url::parse(url)
        .map_err(|e| Error::invalid(format!("bad Redis URL {}: {e}", redact_url(url))))?;
    match parsed.scheme() {
        "redis" | "rediss" | "redis+unix" | "unix" => Ok(()),
        s => Err(Error::invalid(format!(
            "bad Redis URL scheme {s:?}: use redis://, rediss:// or redis+unix://"
        ))),
    }
}

fn install_tls_provider() {
    // rustls needs one process-wide crypto provider; ring builds without cmake.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The multiplexed command connection.
#[derive(Clone)]
enum Commands {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Commands {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Commands::Single(c) => c.req_packed_command(cmd),
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
            Commands::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Commands::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Commands::Single(c) => c.get_db(),
            Commands::Cluster(c) => c.get_db(),
        }
    }
}

/// A connection used for one blocking command at a time.
pub(crate) enum Dedicated {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Dedicated {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Dedicated::Single(c) => c.req_packed_command(cmd),
            Dedicated::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Dedicated::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Dedicated::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Dedicated::Single(c) => c.get_db(),
            Dedicated::Cluster(c) => c.get_db(),
        }
    }
}

/// The connections of one client. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Connection {
    commands: Commands,
    /// Used for pub/sub (any node of a cluster) and for dedicated single-server connections.
    node: redis::Client,
    /// For dedicated cluster connections: no response time limit, per attempt or overall
    /// (a blocking command's reply comes when a value does).
    cluster: Option<ClusterClient>,
    pool: Arc<Mutex<Vec<Dedicated>>>,
    opts: Arc<ClientOptions>,
}

const POOL_MAX_IDLE: usize = 16;

impl Connection {
    pub(crate) async fn open(opts: ClientOptions) -> Result<Self> {
        if opts.urls.is_empty() || opts.urls.iter().any(|u| u.is_empty()) {
            return Err(Error::invalid("no Redis URL given"));
        }
        for url in &opts.urls {
            check_url(url)?;
            if url.starts_with("rediss:") {
                install_tls_provider();
            }
        }
        let node = redis::Client::open(opts.urls[0].as_str()).map_err(|e| {
            Error::invalid(format!("bad Redis URL {}: {e}", redact_url(&opts.urls[0])))
        })?;
        let cluster_mode = opts.cluster || opts.urls.len() > 1;
        let (commands, cluster) = if cluster_mode {
            let builder = || {
                ClusterClient::builder(opts.urls.iter().map(String::as_str))
                    .connection_timeout(opts.connect_timeout)
            };
            let bad = |e: redis::RedisError| Error::invalid(format!("bad cluster options: {e}"));
            let cluster = builder()
                .response_timeout(opts.response_timeout)
                .build()
                .map_err(bad)?;
            let blocking = builder()
                .overall_response_timeout(None)
                .build()
                .map_err(bad)?;
            let conn = with_timeout(opts.connect_timeout, cluster.get_async_connection()).await?;
            (Commands::Cluster(conn), Some(blocking))
        } else {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(opts.connect_timeout))
                .set_response_timeout(Some(opts.response_timeout))
                .set_number_of_retries(3)
                .set_max_delay(Duration::from_secs(1));
            let conn = with_timeout(
                opts.connect_timeout,
                ConnectionManager::new_with_config(node.clone(), config),
            )
            .await?;
            (Commands::Single(conn), None)
        };
        Ok(Connection {
            commands,
            node,
            cluster,
            pool: Arc::new(Mutex::new(Vec::new())),
            opts: Arc::new(opts),
        })
    }

    /// A handle on the multiplexed connection, for commands and scripts.
    pub(crate) fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.commands.clone()
    }

    /// A pub/sub connection (a new one each call).
    pub(crate) async fn pubsub(&self) -> Result<redis::aio::PubSub> {
        with_timeout(self.opts.connect_timeout, self.node.get_async_pubsub()).await
    }

    /// A connection for one blocking command: from the pool, or new.
    pub(crate) async fn dedicated(&self) -> Result<Dedicated> {
        if let Some(c) = self.pool.lock().expect("pool lock").pop() {
            return Ok(c);
        }
        match &self.cluster {
            Some(cluster) => {
                let conn =
                    with_timeout(self.opts.connect_timeout, cluster.get_async_connection()).await?;
                Ok(Dedicated::Cluster(conn))
            }
            None => {
                // No response timeout: the reply to BLPOP comes when a value does.
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.opts.connect_timeout))
                    .set_response_timeout(None);
                let conn = self
                    .node
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Ok(Dedicated::Single(conn))
            }
        }
    }

    /// Gives a healthy dedicated connection back to the pool.
    pub(crate) fn release(&self, conn: Dedicated) {
        let mut pool = self.pool.lock().expect("pool lock");
        if pool.len() < POOL_MAX_IDLE {
            pool.push(conn);
        }
    }

    /// Drops every pooled connection (on close).
    pub(crate) fn clear_pool(&self) {
        self.pool.lock().expect("pool lock").clear();
    }
}

async fn with_timeout<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::Timeout(format!(
            "no connection to Redis within {limit:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_credentials() {
        let r = redact_url("redis://alice:s3cret@host:6380/2");
        assert!(!r.contains("s3cret") && !r.contains("alice"), "{r}");
        let opts = ClientOptions::new("redis://:pw123@h:1");
        assert!(!format!("{opts:?}").contains("pw123"));
    }
}
