//! `delayq`: the command line over the delayq core. Thin: argument parsing, I/O and
//! exit codes here; everything about queues lives in the `delayq` crate.

/// `eprintln!` that ignores a closed standard error: with both outputs a closed pipe
/// (`delayq ... 2>&1 | true`), a message must not turn the exit code into a panic's 101.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod bench;
mod reliable;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "delayq",
    version,
    about = "A delayed queue on Redis, compatible with Redisson's RDelayedQueue",
    after_help = "Exit codes: 0 done (also a take whose time ran out with fewer values than --count), \
1 error, 2 usage or invalid argument.\nLogs go to stderr: warnings by default (transfer: debug, \
serve: info); RUST_LOG sets the level (RUST_LOG=delayq=debug, RUST_LOG=off)."
)]
struct Cli {
    /// Redis URL (redis://[user:pass@]host:port/db, rediss://, redis+unix:///path,
    /// redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]); with --cluster,
    /// the comma-separated URLs of one or more nodes of a Redis Cluster. Prefer REDIS_URL
    /// for a URL with a password (a command line is visible to other users).
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    url: String,
    /// Treat --url as seed URLs of a Redis Cluster.
    #[arg(long, global = true)]
    cluster: bool,
    /// For rediss:// URLs: a CA certificate (PEM) to trust instead of the system's roots.
    #[arg(
        long,
        global = true,
        env = "DELAYQ_TLS_CA_FILE",
        hide_env_values = true,
        value_name = "PEM"
    )]
    tls_ca_file: Option<PathBuf>,
    /// For rediss:// URLs: a client certificate (PEM), for servers that require one.
    #[arg(
        long,
        global = true,
        env = "DELAYQ_TLS_CERT_FILE",
        hide_env_values = true,
        value_name = "PEM"
    )]
    tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert-file.
    #[arg(
        long,
        global = true,
        env = "DELAYQ_TLS_KEY_FILE",
        hide_env_values = true,
        value_name = "PEM"
    )]
    tls_key_file: Option<PathBuf>,
    /// Durability: offers and acks wait until N replicas have them (WAIT).
    #[arg(
        long,
        global = true,
        env = "DELAYQ_WAIT_REPLICAS",
        hide_env_values = true,
        value_name = "N"
    )]
    wait_replicas: Option<u32>,
    /// Durability: also wait for the append-only file of the master and the replicas
    /// (WAITAOF, Redis 7.2+).
    #[arg(long, global = true, env = "DELAYQ_WAIT_AOF", hide_env_values = true)]
    wait_aof: bool,
    /// Durability: how long offers and acks wait for --wait-replicas/--wait-aof; a write
    /// not confirmed in time fails (it was applied on the master, but may not survive a
    /// failover).
    #[arg(
        long,
        global = true,
        env = "DELAYQ_WAIT_TIMEOUT_MS",
        hide_env_values = true,
        value_name = "MS",
        default_value_t = 1000
    )]
    wait_timeout_ms: u64,
    /// For offer and take: values as base64 instead of raw UTF-8 (offer reads it,
    /// take prints it).
    #[arg(long, global = true)]
    base64: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Offer a value; prints its due time in Unix ms as the server computed it.
    Offer {
        /// The queue's name (the key of the list that takers read).
        queue: String,
        /// Delay in milliseconds.
        delay_ms: u64,
        /// The value; read from stdin when absent, all of it (one trailing newline, `\n` or
        /// `\r\n`, is dropped; an empty stdin, as `</dev/null`, offers an empty value).
        value: Option<String>,
    },
    /// Take values as they come due, one per line; runs the transfer task meanwhile. A
    /// value that cannot be printed (standard output closed or full) goes back to the queue;
    /// once the reader of standard output goes away while values are still owed
    /// (`--count 5 | head -1`), it stops waiting (exit 1).
    /// Ctrl-C or SIGTERM ends it (exit 0) within about 0.2 s; a value handed over meanwhile
    /// is printed first, never lost.
    Take {
        /// The queue's name.
        queue: String,
        /// Give up after this many milliseconds in all (default: wait forever); exits 0
        /// with the values taken so far, none included (count the lines printed).
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// Exit after this many values (at least 1).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
    },
    /// Print the counts of a queue, after one transfer pass (entries already due count as
    /// ready even when no process runs the transfer task).
    Stats {
        /// The queue's name.
        queue: String,
    },
    /// Run the transfer task for these queues in the foreground until interrupted. Started
    /// before Redis is reachable, it says so and keeps trying (0.5 s apart at first,
    /// doubling to 10 s).
    Transfer {
        /// The queues' names.
        #[arg(required = true)]
        queues: Vec<String>,
        /// Longest pause between two transfer passes, in ms.
        #[arg(long, default_value_t = 1000)]
        reconcile_ms: u64,
        /// The queues are reliable queues (`delayq reliable`), not Redisson delayed queues.
        /// Without it, each name is a delayed queue, and also a reliable queue once Redis
        /// holds one of that name (when the command starts, or later: looked for at every
        /// reconcile interval, at least every 5 s).
        #[arg(long)]
        reliable: bool,
        /// For reliable queues: the visibility timeout in ms (default: the queue's stored
        /// setting; naming a different one is an error, see `delayq reliable configure`).
        #[arg(long)]
        visibility_ms: Option<u64>,
        /// For reliable queues: deliveries before a message goes to the dead letters
        /// (default: the queue's stored setting).
        #[arg(long)]
        max_attempts: Option<u32>,
    },
    /// Benchmarks (SPEC section 9); see `delayq bench --help`.
    Bench(bench::BenchArgs),
    /// The reliable queue (ack, retries, dead letters); see `delayq reliable --help`.
    Reliable(reliable::ReliableArgs),
    /// Serve the queues on HTTP (REST API, webhooks, /metrics, dashboard); docs/serve.md.
    /// Mutating routes need the bearer token in DELAYQ_TOKEN (without it: read-only);
    /// webhooks are signed with DELAYQ_WEBHOOK_SECRET (without it, with a random key that no
    /// receiver can check). Both are read from the environment only, never from the
    /// command line. On a loopback address only requests for a loopback host name are
    /// answered (DNS rebinding); DELAYQ_ALLOWED_HOSTS names others (a reverse proxy's).
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on, IP:PORT [default: 127.0.0.1:7878]; or give --host and --port.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["host", "port"])]
    listen: Option<std::net::SocketAddr>,
    /// Host to listen on (an IP address or a name), with --port [default: 127.0.0.1].
    #[arg(long, value_name = "ADDR")]
    host: Option<String>,
    /// Port to listen on, on --host [default: 7878].
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// Without DELAYQ_TOKEN, allow mutating routes to anyone who can connect (otherwise
    /// the service is read-only).
    #[arg(long)]
    allow_unauthenticated: bool,
    /// How long a webhook endpoint may take to answer, in ms (at least 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    webhook_timeout_ms: u64,
    /// Webhook requests in flight per queue.
    #[arg(long, default_value_t = 8)]
    webhook_concurrency: usize,
    /// Webhook requests in flight for one queue, as NAME=N (repeatable); others get
    /// --webhook-concurrency.
    #[arg(long = "webhook-concurrency-of", value_name = "NAME=N")]
    webhook_concurrency_of: Vec<String>,
    /// Do not deliver webhooks from this process (a read-only one, without DELAYQ_TOKEN or
    /// --allow-unauthenticated, delivers none anyway).
    #[arg(long)]
    no_webhooks: bool,
    /// A reliable queue to show (besides those found by SCAN); repeatable.
    #[arg(long = "queue", value_name = "NAME")]
    queues: Vec<String>,
    /// A Redisson-compatible delayed queue to show; repeatable.
    #[arg(long = "delayed-queue", value_name = "NAME")]
    delayed_queues: Vec<String>,
}

/// The environment variables the options read; one set but empty counts as unset
/// (`REDIS_URL=` falls back to the default URL, as in most tools), not as an empty value.
const OPTION_VARS: [&str; 7] = [
    "REDIS_URL",
    "DELAYQ_TLS_CA_FILE",
    "DELAYQ_TLS_CERT_FILE",
    "DELAYQ_TLS_KEY_FILE",
    "DELAYQ_WAIT_REPLICAS",
    "DELAYQ_WAIT_AOF",
    "DELAYQ_WAIT_TIMEOUT_MS",
];

/// Removes the [`OPTION_VARS`] that are set but empty. Called first thing in `main`, before
/// any other thread exists.
fn unset_empty_option_vars() {
    for var in OPTION_VARS {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(var);
        }
    }
}

fn main() -> ExitCode {
    unset_empty_option_vars();
    let cli = Cli::parse();
    let default_filter = match cli.command {
        Command::Transfer { .. } => "delayq=debug",
        Command::Serve(_) => "delayq=info,delayq_serve=info",
        _ => "delayq=warn",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only for a terminal: no escape codes in a log file or a journal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .init();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Io(why)) => {
            say!("delayq: {why}");
            ExitCode::from(1)
        }
        Err(Failure::Core(e)) => {
            say!("delayq: {e}");
            match e.kind() {
                delayq::ErrorKind::InvalidArgument => ExitCode::from(2),
                _ => ExitCode::from(1),
            }
        }
    }
}

/// What ends a command with an error: core's, or standard input or output that cannot be
/// read or written (a reader gone: `| head -1`; a full disk), which is no Redis error.
pub(crate) enum Failure {
    Core(delayq::Error),
    Io(String),
}

impl From<delayq::Error> for Failure {
    fn from(e: delayq::Error) -> Self {
        Failure::Core(e)
    }
}

pub(crate) type CliResult<T> = std::result::Result<T, Failure>;

/// Writes `line` and a newline to standard output, flushed: a value is out only once this
/// returned Ok.
pub(crate) fn write_line(line: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(line)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// The failure of a write to standard output; `after` says what became of what was being
/// printed.
pub(crate) fn output_failed(e: std::io::Error, after: &str) -> Failure {
    Failure::Io(format!("cannot write to standard output ({e}); {after}"))
}

async fn run(cli: Cli) -> CliResult<()> {
    let opts = client_options(&cli);
    let connect = || delayq::Client::connect_with(opts.clone());
    match cli.command {
        Command::Offer {
            queue,
            delay_ms,
            value,
        } => {
            let value = match value {
                Some(v) => v.into_bytes(),
                None => read_stdin()?,
            };
            let value = decode_input(value, cli.base64)?;
            let delay = delayq::delay::delay_from_millis(
                i64::try_from(delay_ms)
                    .map_err(|_| delayq::Error::InvalidArgument("delay overflows".into()))?,
            )?;
            delayq::check_delayed_queue(&queue, &no_scheduler(), cli.cluster)?;
            delayq::delay::check_value(&value)?;
            let client = connect().await?;
            let queue = client.delayed_queue_with(&queue, no_scheduler())?;
            let due = queue.offer(value, delay).await?;
            client.close();
            write_line(due.to_string().as_bytes())
                .map_err(|e| output_failed(e, &format!("the value was offered, due at {due}")))
        }
        Command::Take {
            queue,
            timeout_ms,
            count,
        } => {
            let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
            delayq::check_delayed_queue(&queue, &Default::default(), cli.cluster)?;
            let (stop, gone) = (stop_flag(), output_watch());
            let client = delayq::Client::connect_by(opts.clone(), deadline).await?;
            let queue = client.delayed_queue(&queue)?;
            let mut reconnects = Reconnects::new();
            for _ in 0..count {
                // Waits of at most STOP_CHECK, never cut short: a Ctrl-C or SIGTERM ends
                // the command between two, and a value taken meanwhile is printed.
                let next = loop {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if *stop.borrow() {
                        break None;
                    }
                    if gone.load(Ordering::SeqCst) {
                        // Still owing values that could not be printed: nothing more is taken.
                        client.close();
                        let after =
                            "stopped waiting, with nothing taken since the last value printed";
                        return Err(output_gone(after));
                    }
                    if left == Some(Duration::ZERO) {
                        // Out of time (or --timeout-ms 0): what is due now, without waiting.
                        queue.transfer_now().await?;
                        break queue.poll().await?;
                    }
                    let wait = left.map_or(STOP_CHECK, |l| l.min(STOP_CHECK));
                    let taken = queue.take(Some(wait)).await;
                    if let Some(value) = reconnects.after(taken, deadline).await? {
                        break Some(value);
                    }
                };
                match next {
                    Some(value) => {
                        if let Err(e) = write_line(&encode_output(&value, cli.base64)) {
                            // Taken out of Redis and not written: back to the head of the
                            // destination, where the next take finds it first.
                            let after = match queue.give_back(&value).await {
                                Ok(()) => "the value was given back to the queue".to_owned(),
                                Err(back) => format!("the value could not be given back ({back})"),
                            };
                            client.close();
                            return Err(output_failed(e, &after));
                        }
                    }
                    None => break,
                }
            }
            client.close();
            Ok(())
        }
        Command::Stats { queue } => {
            delayq::check_delayed_queue(&queue, &no_scheduler(), cli.cluster)?;
            let client = connect().await?;
            let queue = client.delayed_queue_with(&queue, no_scheduler())?;
            // One transfer pass first, as any handle's transfer task would run: an entry
            // already due counts as ready even when no other process moves entries.
            queue.transfer_now().await?;
            let stats = queue.stats().await?;
            let counts = format!(
                "delayed {}\nready {}\ncorrupt {}",
                stats.delayed, stats.ready, stats.corrupt
            );
            write_line(counts.as_bytes()).map_err(|e| output_failed(e, "nothing was changed"))?;
            client.close();
            Ok(())
        }
        Command::Transfer {
            queues,
            reconcile_ms,
            reliable,
            visibility_ms,
            max_attempts,
        } => {
            let opts = delayq::SchedulerOptions {
                reconcile_interval: Duration::from_millis(reconcile_ms),
                ..Default::default()
            };
            let ropts = |named: bool| delayq::ReliableQueueOptions {
                visibility_timeout: visibility_ms.filter(|_| named).map(Duration::from_millis),
                max_attempts: max_attempts.filter(|_| named),
                scheduler: opts.clone(),
                ..Default::default()
            };
            for q in &queues {
                // Either kind of queue may turn up under the name.
                delayq::check_delayed_queue(q, &opts, cli.cluster)?;
                delayq::check_reliable_queue(q, &ropts(reliable))?;
            }
            // Listening from here on: a Ctrl-C while connecting, or right after the banner,
            // must stop cleanly.
            let stop = interrupted();
            tokio::pin!(stop);
            // A daemon may start before Redis does (a host booting): it waits for it, and
            // says so, instead of exiting. Other errors (a bad URL, a refused password) end it.
            let client = {
                let mut pause = Duration::from_millis(500);
                loop {
                    let connected = tokio::select! {
                        () = &mut stop => return Ok(()),
                        connected = connect() => connected,
                    };
                    match connected {
                        Ok(client) => break client,
                        Err(e)
                            if matches!(
                                e.kind(),
                                delayq::ErrorKind::Connection | delayq::ErrorKind::Timeout
                            ) && !e.is_auth_failure() =>
                        {
                            say!(
                                "delayq: cannot reach Redis yet ({e}); trying again in {:.1} s (Ctrl-C to stop)",
                                pause.as_secs_f64()
                            );
                            tokio::select! {
                                () = &mut stop => return Ok(()),
                                () = tokio::time::sleep(pause) => {}
                            }
                            pause = (pause * 2).min(Duration::from_secs(10));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            // A name's reliable queue, moved too when it is named without --reliable.
            let also_reliable =
                |q: &str| client.reliable_queue(q, ropts(false)).map(Handle::Reliable);
            let mut handles = Vec::new();
            // Queues named without --reliable whose reliable queue does not exist yet.
            let mut unseen = Vec::new();
            for q in &queues {
                let exists = !reliable && client.reliable_queue_exists(q).await?;
                if !reliable && !exists {
                    unseen.push(q.clone());
                }
                if exists {
                    handles.push(also_reliable(q)?);
                    say!("delayq: {q} is also a reliable queue: moving its due messages too");
                }
                if reliable {
                    let handle = client.reliable_queue(q, ropts(true))?;
                    if visibility_ms.is_some() || max_attempts.is_some() {
                        // Stores the settings named, or refuses ones that differ from the
                        // stored (the transfer task alone would never check them).
                        handle.settings().await?;
                    }
                    handles.push(Handle::Reliable(handle));
                } else {
                    handles.push(Handle::Delayed(client.delayed_queue_with(q, opts.clone())?));
                }
            }
            say!(
                "delayq: moving due entries of {} on {} (Ctrl-C to stop)",
                queues.join(", "),
                cli.url
                    .split(',')
                    .map(delayq::redact_url)
                    .collect::<Vec<_>>()
                    .join(",")
            );
            // A reliable queue of one of these names created later moves too: looked for
            // at every reconcile interval (at least every 5 s), until it shows up.
            let look = Duration::from_millis(reconcile_ms)
                .clamp(Duration::from_millis(100), Duration::from_secs(5));
            let watch = async {
                while !unseen.is_empty() {
                    tokio::time::sleep(look).await;
                    let mut still = Vec::new();
                    for q in unseen.drain(..) {
                        match client.reliable_queue_exists(&q).await {
                            Ok(true) => match also_reliable(&q) {
                                Ok(h) => {
                                    handles.push(h);
                                    say!("delayq: {q} is now also a reliable queue: moving its due messages too");
                                }
                                Err(e) => {
                                    tracing::warn!(queue = ?q, error = %delayq::logs::Escaped(&e), "cannot move the reliable queue")
                                }
                            },
                            Ok(false) => still.push(q),
                            Err(e) => {
                                tracing::debug!(error = %delayq::logs::Escaped(&e), "cannot look for a reliable queue; trying again");
                                still.push(q);
                            }
                        }
                    }
                    unseen = still;
                }
                std::future::pending::<()>().await
            };
            tokio::select! {
                () = &mut stop => {}
                _ = watch => {}
            }
            drop(handles);
            client.close();
            Ok(())
        }
        Command::Bench(args) => {
            let tls = cli.tls_ca_file.is_some()
                || cli.tls_cert_file.is_some()
                || cli.tls_key_file.is_some();
            if cli.cluster || tls || cli.wait_replicas.is_some() || cli.wait_aof {
                // Its baselines (redis-benchmark, bare commands) reach one plain server.
                return Err(delayq::Error::InvalidArgument(
                    "bench measures the one server of --url: --cluster, --tls-* and --wait-* do not apply (bench shards takes --cluster-seeds)".into(),
                ).into());
            }
            Ok(bench::run(&cli.url, args).await?)
        }
        Command::Reliable(args) => {
            let deadline = args.timeout().map(|t| Instant::now() + t);
            reliable::run(
                delayq::Client::connect_by(opts.clone(), deadline),
                cli.base64,
                args,
                deadline,
            )
            .await
        }
        Command::Serve(args) => {
            if args.webhook_concurrency == 0 || args.webhook_concurrency > 1000 {
                return Err(delayq::Error::InvalidArgument(
                    "--webhook-concurrency is 1 to 1000".into(),
                )
                .into());
            }
            let mut concurrency_of = std::collections::HashMap::new();
            for spec in &args.webhook_concurrency_of {
                let parsed = spec
                    .rsplit_once('=')
                    .and_then(|(name, n)| Some((name, n.parse::<usize>().ok()?)))
                    .filter(|(name, n)| !name.is_empty() && (1..=1000).contains(n));
                let Some((name, n)) = parsed else {
                    return Err(delayq::Error::InvalidArgument(format!(
                        "--webhook-concurrency-of takes NAME=N with N from 1 to 1000, got {spec:?}"
                    ))
                    .into());
                };
                concurrency_of.insert(name.to_owned(), n);
            }
            let listen = match args.listen {
                Some(addr) => addr,
                None => delayq_serve::listen_address(args.host.as_deref(), args.port)
                    .map_err(|e| Failure::Core(delayq::Error::InvalidArgument(e)))?,
            };
            // The queues named to show, refused before anything connects when no queue
            // could have the name.
            for q in &args.queues {
                delayq::check_reliable_queue(q, &Default::default())?;
            }
            for q in &args.delayed_queues {
                delayq::check_delayed_queue(q, &Default::default(), cli.cluster)?;
            }
            let config = delayq_serve::Config {
                webhook_concurrency_of: concurrency_of,
                listen,
                token: secret_from_env("DELAYQ_TOKEN"),
                allow_unauthenticated: args.allow_unauthenticated,
                webhook_secret: secret_from_env("DELAYQ_WEBHOOK_SECRET"),
                webhook_timeout: Duration::from_millis(args.webhook_timeout_ms),
                webhook_concurrency: args.webhook_concurrency,
                webhooks: !args.no_webhooks,
                queues: args.queues,
                delayed_queues: args.delayed_queues,
            };
            let client = connect().await?;
            let stop = interrupted();
            let served = delayq_serve::run(client.clone(), config, stop).await;
            client.close();
            served.map_err(|e| match e.kind() {
                // A bad setting (DELAYQ_ALLOWED_HOSTS) is a usage error, exit 2.
                std::io::ErrorKind::InvalidInput => {
                    delayq::Error::InvalidArgument(e.to_string()).into()
                }
                _ => Failure::Io(format!("could not serve: {e}")),
            })
        }
    }
}

/// Core's options from the global options (`--url`, `--cluster`, `--tls-*`, `--wait-*`).
fn client_options(cli: &Cli) -> delayq::ClientOptions {
    let url = &cli.url;
    let mut opts = if cli.cluster {
        delayq::ClientOptions::cluster(url.split(',').map(str::trim).filter(|u| !u.is_empty()))
    } else {
        delayq::ClientOptions::new(url)
    };
    opts.tls = delayq::TlsOptions {
        ca_file: cli.tls_ca_file.clone(),
        client_cert_file: cli.tls_cert_file.clone(),
        client_key_file: cli.tls_key_file.clone(),
    };
    if cli.wait_replicas.is_some() || cli.wait_aof {
        opts.durability = Some(delayq::Durability {
            replicas: cli.wait_replicas.unwrap_or(0),
            aof: cli.wait_aof,
            timeout: Duration::from_millis(cli.wait_timeout_ms),
        });
    }
    opts
}

/// A secret from the environment (never from the command line, which `ps` shows); unset
/// or empty: none.
fn secret_from_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

/// Keeps queue handles (and so their transfer tasks) alive.
#[allow(dead_code)]
enum Handle {
    Delayed(delayq::DelayedQueue),
    Reliable(delayq::ReliableQueue),
}

fn no_scheduler() -> delayq::SchedulerOptions {
    delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    }
}

pub(crate) fn read_stdin() -> CliResult<Vec<u8>> {
    let mut buf = Vec::new();
    let unread = |e| {
        Failure::Io(format!(
            "cannot read standard input ({e}); nothing was offered"
        ))
    };
    std::io::stdin().read_to_end(&mut buf).map_err(unread)?;
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(buf)
}

pub(crate) fn decode_input(value: Vec<u8>, base64: bool) -> delayq::Result<Vec<u8>> {
    if !base64 {
        return Ok(value);
    }
    // `base64 FILE` wraps its lines at 76 columns: whitespace is not part of the value.
    let text: Vec<u8> = value
        .into_iter()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(&text)
        .map_err(|e| {
            delayq::Error::InvalidArgument(format!(
                "value is not base64: {}",
                base64_error(&text, e)
            ))
        })
}

/// What is wrong with base64 `text`, the offending character shown as itself (the base64
/// crate gives its byte value: "Invalid symbol 33, offset 0").
fn base64_error(text: &[u8], e: base64::DecodeError) -> String {
    match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            let c = String::from_utf8_lossy(&text[at..])
                .chars()
                .next()
                .unwrap_or('?');
            format!("{c:?} at character {at} (of the value without its whitespace)")
        }
        other => other.to_string(),
    }
}

pub(crate) fn encode_output(value: &[u8], base64: bool) -> Vec<u8> {
    if base64 {
        base64::engine::general_purpose::STANDARD
            .encode(value)
            .into_bytes()
    } else {
        value.to_vec()
    }
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM: the signals that ask a command to stop cleanly.
/// The handlers are installed when this is called (not when first polled), so a signal that
/// arrives right after, before the caller awaits, is not lost.
/// The longest one wait of `take` and `reliable receive` lasts, so that a Ctrl-C or
/// SIGTERM ends the command within about this long. A wait is never cut short by one: what
/// the server hands over then would have to be given back by a task that the exit would
/// cut short in turn (values were lost so, a few in a hundred interrupts).
pub(crate) const STOP_CHECK: Duration = Duration::from_millis(200);

/// The waits of a consuming command (`take`, `reliable receive`) through connection
/// errors: each wait is a call of its own (of at most [`STOP_CHECK`]), so a Redis restart
/// or failover between two fails the next one at its first connection. With time left,
/// such an error is told once and the command waits for Redis again (as core's blocking
/// waits do within one call), rather than ending a long-running consumer.
pub(crate) struct Reconnects {
    pause: Duration,
    told: bool,
}

impl Reconnects {
    pub(crate) fn new() -> Self {
        Reconnects {
            pause: Duration::from_millis(50),
            told: false,
        }
    }

    /// Ok(None) after a wait that returned nothing; after a connection error, Ok(None)
    /// once it paused (up to the deadline), or the error when no time is left.
    pub(crate) async fn after<T>(
        &mut self,
        waited: delayq::Result<Option<T>>,
        deadline: Option<Instant>,
    ) -> delayq::Result<Option<T>> {
        let e = match waited {
            Err(e) if e.kind() == delayq::ErrorKind::Connection => e,
            Ok(got) => {
                if std::mem::take(&mut self.told) {
                    tracing::warn!("Redis answers again; waiting");
                }
                self.pause = Duration::from_millis(50);
                return Ok(got);
            }
            Err(e) => return Err(e),
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(e);
        }
        if !std::mem::replace(&mut self.told, true) {
            tracing::warn!(error = %delayq::logs::Escaped(&e), "lost Redis while waiting; waiting for it again");
        }
        tokio::time::sleep(left.map_or(self.pause, |l| l.min(self.pause))).await;
        self.pause = (self.pause * 2).min(STOP_CHECK);
        Ok(None)
    }
}

/// Turns true once Ctrl-C or SIGTERM came; the handlers are installed at once, so that
/// from now on neither kills the process.
pub(crate) fn stop_flag() -> tokio::sync::watch::Receiver<bool> {
    let (set, flag) = tokio::sync::watch::channel(false);
    let stopped = interrupted();
    tokio::spawn(async move {
        stopped.await;
        let _ = set.send(true);
    });
    flag
}

/// Turns true once the reader of standard output goes away (the `head -1` of `delayq take
/// Q --count 5 | head -1`), so that a command waiting for values stops then, rather than
/// noticing only when it writes the next one, which may never come.
pub(crate) fn output_watch() -> Arc<AtomicBool> {
    let gone = Arc::new(AtomicBool::new(false));
    let seen = gone.clone();
    // A thread of its own (not the runtime's blocking pool, whose shutdown would wait for
    // it): poll() with no events asked reports only an error or hang-up, which a pipe's
    // write end gets once its reader closed; a file or a terminal never wakes it.
    let watch = move || loop {
        let mut fd = libc::pollfd {
            fd: 1,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, -1) };
        if n > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            seen.store(true, Ordering::SeqCst);
            return;
        }
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
        if n > 0 && fd.revents & libc::POLLNVAL != 0 {
            return; // not open: nothing to watch
        }
    };
    let _ = std::thread::Builder::new()
        .name("stdout-watch".into())
        .spawn(watch);
    gone
}

/// The error of a command that stopped because standard output's reader went away.
pub(crate) fn output_gone(after: &str) -> Failure {
    Failure::Io(format!("standard output was closed by its reader; {after}"))
}

pub(crate) fn interrupted() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let int = signal(SignalKind::interrupt());
    let term = signal(SignalKind::terminate());
    async move {
        let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(int) => {}
            _ = wait(term) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test here that touches the environment.
    #[test]
    fn an_empty_redis_url_is_the_default_url() {
        let saved: Vec<_> = OPTION_VARS
            .iter()
            .map(|v| (v, std::env::var_os(v)))
            .collect();
        for var in OPTION_VARS {
            std::env::set_var(var, "");
        }
        unset_empty_option_vars();
        let cli = Cli::try_parse_from(["delayq", "stats", "q"]).expect("parses");
        assert_eq!(cli.url, "redis://127.0.0.1:6379");
        assert_eq!(cli.wait_timeout_ms, 1000);
        assert!(cli.tls_ca_file.is_none() && cli.wait_replicas.is_none() && !cli.wait_aof);
        std::env::set_var("REDIS_URL", "redis://elsewhere:1");
        unset_empty_option_vars();
        let cli = Cli::try_parse_from(["delayq", "stats", "q"]).expect("parses");
        assert_eq!(cli.url, "redis://elsewhere:1", "a value is kept");
        for (var, value) in saved {
            match value {
                Some(v) => std::env::set_var(var, v),
                None => std::env::remove_var(var),
            }
        }
    }
}
