//! `delayq serve`: the queues on HTTP for languages without a binding, webhook delivery,
//! Prometheus metrics and a dashboard (SPEC section 13; `docs/serve.md`).
//!
//! A library crate rather than a module of the CLI: the CLI's `serve` command only parses
//! its options and calls [`run`], while the tests start the same server in their own
//! process ([`Server::start`]) on a free port, and the CLI keeps its short build when
//! nothing here changes. Everything about queues is core's; this crate converts HTTP to
//! core calls and back.

mod api;
mod auth;
pub mod bench;
mod dashboard;
mod error;
mod handover;
mod host;
mod logs;
mod metrics;
mod state;
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use api::ApiDoc;
pub use host::{parse_allowed_hosts, ALLOWED_HOSTS_VAR};
pub use webhook::{
    sign, ATTEMPT_HEADER, ID_HEADER, QUEUE_HEADER, SIGNATURE_HEADER, SIGNATURE_VERSION,
    TIMESTAMP_HEADER,
};

/// What `delayq serve` is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (default 127.0.0.1:7878).
    pub listen: SocketAddr,
    /// The bearer token every mutating route requires (`DELAYQ_TOKEN`).
    pub token: Option<String>,
    /// Without a token, allow mutating routes anyway (otherwise the service is read-only).
    pub allow_unauthenticated: bool,
    /// The key of the webhooks' HMAC-SHA256 signatures (`DELAYQ_WEBHOOK_SECRET`); without
    /// one, requests are signed with a random key drawn when the server starts, which no
    /// endpoint knows (a warning says so).
    pub webhook_secret: Option<String>,
    /// How long a webhook endpoint may take to answer before the attempt fails.
    pub webhook_timeout: Duration,
    /// Webhook requests in flight per queue.
    pub webhook_concurrency: usize,
    /// Webhook requests in flight for the queues named here, instead of
    /// `webhook_concurrency`.
    pub webhook_concurrency_of: std::collections::HashMap<String, usize>,
    /// Deliver webhooks at all (a second `serve` process may leave it to the first). A
    /// read-only service ([`Config::is_read_only`]) delivers none.
    pub webhooks: bool,
    /// Reliable queues to show on the dashboard and in `/metrics` besides those found.
    pub queues: Vec<String>,
    /// Redisson-compatible delayed queues to show.
    pub delayed_queues: Vec<String>,
}

/// The host `delayq serve` listens on unless told otherwise.
pub const DEFAULT_HOST: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
/// The port `delayq serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7878;

/// The address of `delayq serve --host HOST --port PORT`: [`DEFAULT_HOST`] and
/// [`DEFAULT_PORT`] for the part not given. The host is an IP address (an IPv6 one with or
/// without brackets) or a name, resolved here (its first address).
pub fn listen_address(host: Option<&str>, port: Option<u16>) -> Result<SocketAddr, String> {
    let port = port.unwrap_or(DEFAULT_PORT);
    let Some(host) = host else {
        return Ok(SocketAddr::new(DEFAULT_HOST, port));
    };
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.is_empty() {
        return Err("--host is empty".into());
    }
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    use std::net::ToSocketAddrs;
    (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("--host {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("--host {host:?} has no address"))
}

impl Config {
    /// No token and no `allow_unauthenticated`: mutating routes answer 403, and the
    /// process delivers no webhooks (whatever `webhooks` says).
    pub fn is_read_only(&self) -> bool {
        self.token.is_none() && !self.allow_unauthenticated
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::new(DEFAULT_HOST, DEFAULT_PORT),
            token: None,
            allow_unauthenticated: false,
            webhook_secret: None,
            webhook_timeout: Duration::from_secs(10),
            webhook_concurrency: 8,
            webhook_concurrency_of: Default::default(),
            webhooks: true,
            queues: Vec::new(),
            delayed_queues: Vec::new(),
        }
    }
}

/// A running server.
pub struct Server {
    /// The address it listens on (the real port when the configured one was 0).
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Binds `config.listen` and serves on the current tokio runtime with `client`. On a
    /// loopback address only requests whose `Host` names a loopback host are answered
    /// (see [`Server::start_with_allowed_hosts`]).
    pub async fn start(client: delayq::Client, config: Config) -> std::io::Result<Server> {
        Self::start_with_allowed_hosts(client, config, &[]).await
    }

    /// [`Server::start`], answering also requests whose `Host` is one of `allowed_hosts`
    /// (as [`parse_allowed_hosts`] reads them: names a reverse proxy passes on,
    /// `.example.com` for a domain, IP addresses, `*` for any). On a loopback address the
    /// service otherwise answers only `localhost`, `127.x.x.x` and `[::1]` (DNS rebinding,
    /// docs/serve.md); on another address it answers every `Host` when `allowed_hosts` is
    /// empty, else these, the loopback names and IP addresses.
    pub async fn start_with_allowed_hosts(
        client: delayq::Client,
        config: Config,
        allowed_hosts: &[String],
    ) -> std::io::Result<Server> {
        let hosts = host::Hosts::new(config.listen, allowed_hosts)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let listener = TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let mut config = config;
        if config.webhooks && config.is_read_only() {
            // Delivering acks, nacks and buries messages: a read-only service (a dashboard
            // for operators) changes no queue.
            tracing::info!("read-only: this process delivers no webhooks");
            config.webhooks = false;
        }
        if config.webhooks && config.webhook_secret.is_none() {
            tracing::warn!(
                "DELAYQ_WEBHOOK_SECRET is not set: webhook requests are signed \
                 (x-delayq-signature) with a random key generated for this process, which \
                 no receiver knows and which changes at every start, so receivers cannot \
                 verify them; set DELAYQ_WEBHOOK_SECRET for receivers to verify them \
                 (docs/serve.md, Webhooks)"
            );
        }
        let stop = CancellationToken::new();
        let state = Arc::new(state::AppState::new(client, config, hosts, stop.clone()));
        state.start_background();
        let app = api::router(state.clone());
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await
        });
        Ok(Server { addr, stop, task })
    }

    /// Stops accepting requests and the webhook workers; waits for the server task.
    pub async fn stop(self) -> std::io::Result<()> {
        self.stop.cancel();
        self.task.await.unwrap_or(Ok(()))
    }
}

/// Serves until `until` resolves (the CLI passes Ctrl-C). The allowed hosts are read from
/// `DELAYQ_ALLOWED_HOSTS` ([`ALLOWED_HOSTS_VAR`]).
pub async fn run(
    client: delayq::Client,
    config: Config,
    until: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let mode = match (&config.token, config.allow_unauthenticated) {
        (Some(_), _) => "mutating routes need the bearer token",
        (None, true) => "no token: anyone who can connect may change the queues",
        (None, false) => {
            "read-only, delivering no webhooks: set DELAYQ_TOKEN (or pass --allow-unauthenticated) to allow changes"
        }
    };
    let allowed_hosts = match std::env::var(ALLOWED_HOSTS_VAR) {
        Ok(value) => parse_allowed_hosts(&value).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{ALLOWED_HOSTS_VAR}: {e}"),
            )
        })?,
        Err(_) => Vec::new(),
    };
    if !allowed_hosts.is_empty() {
        tracing::info!(hosts = ?allowed_hosts, "answering requests for these hosts besides localhost");
    }
    let server = Server::start_with_allowed_hosts(client, config, &allowed_hosts).await?;
    // Not eprintln!: a closed standard error is no reason to stop serving.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "delayq: serving on http://{} ({mode}; Ctrl-C to stop)",
        server.addr
    );
    until.await;
    server.stop().await
}
