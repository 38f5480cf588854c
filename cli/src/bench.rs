//! `delayq bench`: the benchmarks of SPEC section 9. Each prints its figure beside a limit
//! measured in the same run on the same server.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use delayq::{Client, Error, Result, SchedulerOptions};

#[derive(Args)]
pub struct BenchArgs {
    /// Which benchmark to run.
    #[arg(value_enum, default_value = "all")]
    which: Which,
    /// Offers for the throughput benchmark.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    ops: u64,
    /// Offers in flight at once (and redis-benchmark's: -c 1 -P N pipelined, -c N without).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Offers per second in the lateness benchmark.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    rate: u64,
    /// Seconds of steady offering in the lateness benchmark.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Due entries in the drain benchmark.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    entries: u64,
    /// Waiting entries in the mixed-delays transfer benchmark.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    mixed_entries: u64,
    /// Waiting entries in the memory benchmark.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    memory_entries: u64,
    /// Payload size in bytes (every benchmark but the two lateness ones, whose values are
    /// their sequence numbers as text, 1 to 7 bytes).
    #[arg(long, default_value_t = 44)]
    value_size: usize,
    /// Messages in the reliable-consume throughput benchmark.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    consume_messages: u64,
    /// Offers per second in the reliable-consume lateness benchmark.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    consume_rate: u64,
    /// The `shards` benchmark: comma-separated seed URLs of a Redis Cluster, run beside the
    /// single server of `--url` (scripts/bench.sh shards starts both).
    #[arg(long)]
    cluster_seeds: Option<String>,
    /// Shards of the queue on the cluster in the `shards` benchmark.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    shards: u32,
    /// Offers through the library and through HTTP in the serve benchmark.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    serve_offers: u64,
    /// Messages delivered to a local webhook endpoint in the serve benchmark.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    webhooks: u64,
    /// The service's webhook workers per queue in the serve benchmark.
    #[arg(long, default_value_t = 8, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    webhook_concurrency: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    /// Every benchmark below but shards.
    All,
    /// Offer throughput, beside redis-benchmark running the same script with the same
    /// concurrency and pipelining (one connection, --concurrency requests in flight), and
    /// one call per request (on a plain redis:// URL without a password: redis-benchmark
    /// takes one only on its command line).
    Offer,
    /// Due time to a consumer holding the value, at a steady offer rate, beside a bare
    /// LPUSH to a blocked BLPOP.
    Lateness,
    /// A backlog of due entries moved to the destination, beside a bare zset-to-list script.
    Drain,
    /// Due entries in random places among many waiting ones.
    Mixed,
    /// Redis memory per waiting entry, beside a sorted set of ids.
    Memory,
    /// The reliable queue: memory, offer and receive+ack throughput, wake-up.
    Reliable,
    /// consume(handler, 50) throughput and lateness, beside an XREADGROUP + XACK loop.
    ReliableConsume,
    /// One node with S=1 beside a cluster with S shards (needs --cluster-seeds).
    Shards,
    /// HTTP offers through delayq serve beside the library's offers, and webhook deliveries.
    Serve,
}

pub async fn run(url: &str, args: BenchArgs) -> Result<()> {
    let client = Client::connect(url).await?;
    // The conditions every figure below shares: a debug build's are no release build's.
    let info: String = client.query(redis::cmd("INFO").arg("server")).await?;
    let version = info.lines().find_map(|l| l.strip_prefix("redis_version:"));
    println!(
        "delayq bench: {} build, Redis {}, {} cores",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        version.unwrap_or("?").trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let w = args.which;
    if w == Which::All || w == Which::Offer {
        offer(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Lateness {
        lateness(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Drain {
        drain(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Mixed {
        mixed(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Memory {
        memory(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Reliable {
        reliable(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::ReliableConsume {
        reliable_consume(&client, url, &args).await?;
    }
    if w == Which::Shards {
        shards(&client, url, &args).await?;
    }
    if w == Which::All || w == Which::Serve {
        let opts = delayq_serve::bench::BenchOptions {
            offers: args.serve_offers,
            concurrency: args.concurrency as usize,
            webhooks: args.webhooks,
            webhook_concurrency: args.webhook_concurrency,
            value_size: args.value_size,
        };
        delayq_serve::bench::run(&client, &opts).await?;
    }
    client.close();
    Ok(())
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

fn fresh_name(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("bench-{kind}-{nanos}")
}

async fn raw(url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    Ok(client.get_multiplexed_async_connection().await?)
}

async fn delete_queue(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &delayq::keys::DelayedKeys,
) -> Result<()> {
    let _: i64 = redis::cmd("DEL")
        .arg(&keys.destination)
        .arg(&keys.timeout_set)
        .arg(&keys.queue_list)
        .arg(&keys.corrupt_list)
        .query_async(conn)
        .await?;
    Ok(())
}

/// Offer throughput beside redis-benchmark running the same script with EVALSHA.
async fn offer(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    println!(
        "== offer throughput ({} offers due in 1 h, {} in flight, {}-byte values)",
        args.ops / args.concurrency * args.concurrency,
        args.concurrency,
        args.value_size
    );
    let name = fresh_name("offer");
    let queue = client.delayed_queue_with(
        &name,
        SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
    )?;
    let value = Arc::new(payload(args.value_size));
    let start = Instant::now();
    let per_task = args.ops / args.concurrency;
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (queue, value) = (queue.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_task {
                queue.offer(&*value, Duration::from_secs(3600)).await?;
            }
            Ok::<_, Error>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| Error::Server(e.to_string()))??;
    }
    let ours = (per_task * args.concurrency) as f64 / start.elapsed().as_secs_f64();
    let mut conn = raw(url).await?;
    delete_queue(&mut conn, queue.keys()).await?;

    // The same script through redis-benchmark.
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(delayq::offer_script_source())
        .query_async(&mut conn)
        .await?;
    let info = redis::Client::open(url)?.get_connection_info().clone();
    let skipped = |why: &str| {
        println!("redis-benchmark comparison skipped: {why}");
        println!("delayq offer: {ours:.0} offers/s");
    };
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
        _ => {
            skipped("it needs a plain TCP URL (redis://host:port), not TLS or a Unix socket");
            return Ok(());
        }
    };
    if info.redis_settings().password().is_some() {
        // Its only way to take one is `-a` on its command line, which any user of this
        // machine can read while it runs.
        skipped("the URL has a password, which redis-benchmark takes only on its command line (-a), where other users of this machine could read it; run both against a server without one");
        return Ok(());
    }
    let n = per_task * args.concurrency; // as many as delayq offered
    let db = info.redis_settings().db();
    let target = Benchmarked {
        host: &host,
        port,
        db,
        sha: &sha,
        n,
        value: String::from_utf8(payload(args.value_size)).unwrap(),
    };
    // SPEC 9's limit: the same concurrency and pipelining as the handle's, one connection
    // with `concurrency` requests in flight. Beside it, one script call per request on
    // `concurrency` connections.
    let c = args.concurrency.to_string();
    let pipelined = target.run(&mut conn, &["-c", "1", "-P", &c]).await?;
    let per_request = target.run(&mut conn, &["-c", &c]).await?;
    println!("delayq offer:                 {ours:>10.0} offers/s ({c} in flight on one handle: one connection)");
    match (pipelined, per_request) {
        (Ok(p), Ok(r)) => {
            println!("redis-benchmark same script:  {p:>10.0} offers/s (-c 1 -P {c}: one connection, {c} in flight)");
            println!(
                "ratio delayq / redis-benchmark: {:.2} (target >= 0.80)",
                ours / p
            );
            println!("redis-benchmark, one call per request: {r:.0} offers/s (-c {c}, no -P; ratio {:.2})", ours / r);
        }
        (Err(text), _) | (_, Err(text)) => println!("redis-benchmark gave no figure: {text}"),
    }
    Ok(())
}

/// The same offer script, for redis-benchmark to run on a queue of its own.
struct Benchmarked<'a> {
    host: &'a str,
    port: u16,
    db: i64,
    sha: &'a str,
    n: u64,
    value: String,
}

impl Benchmarked<'_> {
    /// Runs redis-benchmark with `options` (its clients and pipelining) and deletes its
    /// queue after: offers per second, or what it printed instead.
    async fn run(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
        options: &[&str],
    ) -> Result<std::result::Result<f64, String>> {
        let name = fresh_name("offer-rb");
        let keys = delayq::keys::DelayedKeys::new(&name)?;
        let out = tokio::process::Command::new("redis-benchmark")
            .args(["-h", self.host, "-p", &self.port.to_string()])
            .args(["--dbnum", &self.db.to_string()])
            .args(options)
            .args(["-n", &self.n.to_string(), "-r", "100000000", "-q"])
            .args([
                "EVALSHA",
                self.sha,
                "4",
                &keys.timeout_set,
                &keys.queue_list,
            ])
            .args([&keys.channel, &keys.destination])
            .args(["3600000", "id__rand_int__", &self.value])
            .output()
            .await
            .map_err(|e| Error::Server(format!("could not run redis-benchmark: {e}")))?;
        delete_queue(conn, &keys).await?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(parse_rps(&text).ok_or_else(|| text.trim().to_owned()))
    }
}

fn parse_rps(text: &str) -> Option<f64> {
    // "EVALSHA ...: 81234.57 requests per second, p50=..." (the last \r-separated part).
    let last = text
        .rsplit(['\r', '\n'])
        .find(|s| s.contains("requests per second"))?;
    let before = last.split("requests per second").next()?;
    before.rsplit(':').next()?.trim().parse().ok()
}

/// Milliseconds to add to the local clock to read the server's, estimated from TIME.
async fn server_offset_ms(client: &Client) -> Result<f64> {
    let mut best = (f64::MAX, 0.0);
    for _ in 0..20 {
        let before = unix_ms_f64();
        let server = client.server_time_ms().await? as f64 + 0.5;
        let after = unix_ms_f64();
        let rtt = after - before;
        if rtt < best.0 {
            best = (rtt, server - (before + after) / 2.0);
        }
    }
    Ok(best.1)
}

fn unix_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Lateness: due time to a consumer holding the value, at a steady offer rate.
async fn lateness(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    println!(
        "== lateness, delayed queue ({} offers/s for {} s, 100 ms delay, one consumer; values: sequence numbers, 1-7 bytes)",
        args.rate, args.seconds
    );
    let name = fresh_name("lateness");
    let producer = client.delayed_queue_with(&name, no_scheduler())?;
    let consumer = client.delayed_queue(&name)?;
    let late = measure_lateness(client, args, Probe::Delayed { producer, consumer }).await?;
    report_lateness(late, args, &handoff_floor(url, 200).await?)
}

/// The queue a lateness run goes through.
#[derive(Clone)]
enum Probe {
    Delayed {
        producer: delayq::DelayedQueue,
        consumer: delayq::DelayedQueue,
    },
    Reliable(delayq::ReliableQueue),
}

impl Probe {
    /// Offers sequence number `seq`; returns its due time when the offer reports it.
    async fn offer(&self, seq: u64) -> Result<Option<i64>> {
        let delay = Duration::from_millis(100);
        match self {
            Probe::Delayed { producer, .. } => {
                Ok(Some(producer.offer(seq.to_string(), delay).await?))
            }
            Probe::Reliable(q) => q.offer(seq.to_string(), delay, None).await.map(|_| None),
        }
    }

    /// Takes the next value: its sequence number, and its due time when the delivery
    /// carries it.
    async fn take(&self) -> Result<Option<(usize, Option<i64>)>> {
        let limit = Some(Duration::from_secs(5));
        let (payload, due) = match self {
            Probe::Delayed { consumer, .. } => match consumer.take(limit).await? {
                Some(v) => (v, None),
                None => return Ok(None),
            },
            Probe::Reliable(q) => match q.receive(limit).await? {
                Some(d) => {
                    // Acked in the background: lateness measures delivery, not the ack.
                    let (payload, due) = (d.payload.clone(), d.due_at);
                    tokio::spawn(async move { d.ack().await });
                    (payload, Some(due))
                }
                None => return Ok(None),
            },
        };
        let seq = String::from_utf8_lossy(&payload)
            .parse()
            .unwrap_or(usize::MAX);
        Ok(Some((seq, due)))
    }
}

/// Offers at a steady rate while one consumer takes; returns each value's lateness in ms
/// (arrival by the server clock minus due time as the server computed it).
async fn measure_lateness(client: &Client, args: &BenchArgs, probe: Probe) -> Result<Vec<f64>> {
    let total = (args.rate * args.seconds) as usize;
    let offset = server_offset_ms(client).await?;
    let consumer = probe.clone();
    let consume = tokio::spawn(async move {
        let mut arrived = vec![(f64::NAN, None); total];
        let mut got = 0;
        while got < total {
            match consumer.take().await? {
                Some((seq, due)) => {
                    let now = unix_ms_f64() + offset;
                    if let Some(slot) = arrived.get_mut(seq) {
                        *slot = (now, due);
                    }
                    got += 1;
                }
                None => break,
            }
        }
        Ok::<_, Error>(arrived)
    });
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate as f64));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut offers = tokio::task::JoinSet::new();
    let sending = Instant::now();
    for seq in 0..total as u64 {
        ticker.tick().await;
        let probe = probe.clone();
        offers.spawn(async move { Ok::<_, Error>((seq as usize, probe.offer(seq).await?)) });
    }
    let mut due = vec![None; total];
    while let Some(r) = offers.join_next().await {
        let (seq, at) = r.map_err(|e| Error::Server(e.to_string()))??;
        due[seq] = at;
    }
    let sent_in = sending.elapsed().as_secs_f64();
    let arrived = consume.await.map_err(|e| Error::Server(e.to_string()))??;
    // Whether the run held its rate: the offers sent on time, and the consumer keeping up
    // (a consumer that falls behind makes the figures a backlog's, not a hand-off's).
    let times = arrived.iter().map(|(a, _)| *a).filter(|a| !a.is_nan());
    let (first, last) = times.fold((f64::MAX, f64::MIN), |(lo, hi), a| (lo.min(a), hi.max(a)));
    let offered = total as f64 / sent_in.max(1e-9);
    let received_in = ((last - first) / 1000.0).max(0.0);
    println!(
        "offers sent at {offered:.0}/s (asked {}/s) over {sent_in:.2} s; the consumer took them over {received_in:.2} s{}",
        args.rate,
        if received_in > sent_in + 1.0 || offered < 0.95 * args.rate as f64 {
            ": the rate was not held, so the figures below are not those of a steady rate"
        } else {
            ""
        }
    );
    Ok(arrived
        .iter()
        .zip(&due)
        .filter(|((a, _), _)| !a.is_nan())
        .filter_map(|((a, from_delivery), from_offer)| {
            from_delivery.or(*from_offer).map(|d| a - d as f64)
        })
        .collect())
}

/// The floor of lateness on this server, measured: `n` bare hand-offs, each an `LPUSH` on
/// one connection to a `BLPOP` already blocked on another, from the push's send to the pop's
/// reply; sorted, in ms. A value that comes due reaches its consumer by such a hand-off at
/// best.
async fn handoff_floor(url: &str, n: usize) -> Result<Vec<f64>> {
    let key = fresh_name("handoff");
    let mut push = raw(url).await?;
    let pop = raw(url).await?;
    let blocked = |info: String| {
        let line = info.lines().find(|l| l.starts_with("blocked_clients:"));
        line.and_then(|l| l["blocked_clients:".len()..].trim().parse::<u64>().ok())
    };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let before = blocked(
            redis::cmd("INFO")
                .arg("clients")
                .query_async(&mut push)
                .await?,
        );
        let (k, mut c) = (key.clone(), pop.clone());
        let waiter = tokio::spawn(async move {
            let _: Option<(String, String)> = redis::cmd("BLPOP")
                .arg(&k)
                .arg(5)
                .query_async(&mut c)
                .await?;
            Ok::<_, Error>(Instant::now())
        });
        // The hand-off starts once the BLPOP blocks on the server.
        while blocked(
            redis::cmd("INFO")
                .arg("clients")
                .query_async(&mut push)
                .await?,
        ) <= before
        {
            tokio::task::yield_now().await;
        }
        let start = Instant::now();
        let _: i64 = redis::cmd("LPUSH")
            .arg(&key)
            .arg("x")
            .query_async(&mut push)
            .await?;
        let done = waiter.await.map_err(|e| Error::Server(e.to_string()))??;
        times.push(done.saturating_duration_since(start).as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Ok(times)
}

/// Prints the limit a lateness stands beside: the hand-off floor measured in this run.
fn print_lateness_limit(floor: &[f64]) {
    let pct = |p: f64| floor[((floor.len() as f64 * p) as usize).min(floor.len() - 1)];
    println!(
        "limit (this run): a bare LPUSH to a blocked BLPOP, {} hand-offs: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; due times add up to 1 ms (whole ms), the clock offset estimate up to 0.5 ms",
        floor.len(),
        pct(0.50),
        pct(0.99),
        floor[floor.len() - 1]
    );
}

fn report_lateness(mut late: Vec<f64>, args: &BenchArgs, floor: &[f64]) -> Result<()> {
    let total = (args.rate * args.seconds) as usize;
    if late.is_empty() {
        println!("no value arrived");
        return Ok(());
    }
    late.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| late[((late.len() as f64 * p) as usize).min(late.len() - 1)];
    // Due times are whole ms and a value is due once the server clock reaches that ms, so
    // up to 1 ms of lateness is the resolution of the due time itself.
    println!(
        "lateness p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < 5 ms); {} of {} arrived, earliest {:.2} ms",
        pct(0.50),
        pct(0.99),
        late[late.len() - 1],
        late.len(),
        total,
        late[0]
    );
    print_lateness_limit(floor);
    if late.len() < total {
        println!(
            "WARNING: {} values did not arrive within 5 s",
            total - late.len()
        );
    }
    Ok(())
}

fn no_scheduler() -> SchedulerOptions {
    SchedulerOptions {
        enabled: false,
        ..Default::default()
    }
}

/// The reliable queue beside the classic one, in the same run: offer and receive+ack
/// throughput, memory per waiting message, lateness.
async fn reliable(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    let ops = args.ops / 2;
    println!(
        "== reliable queue beside the delayed queue ({ops} messages, {} in flight, {}-byte values)",
        args.concurrency, args.value_size
    );
    let value = Arc::new(payload(args.value_size));
    let classic = client.delayed_queue_with(&fresh_name("rq-classic"), no_scheduler())?;
    let rq_opts = delayq::ReliableQueueOptions {
        scheduler: no_scheduler(),
        ..Default::default()
    };
    let reliable = client.reliable_queue(&fresh_name("rq"), rq_opts)?;
    let per_task = ops / args.concurrency;
    let n = per_task * args.concurrency;

    let rate = |start: Instant| n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    run_tasks(args.concurrency, |_| {
        let (q, v) = (classic.clone(), value.clone());
        async move {
            for _ in 0..per_task {
                q.offer(&*v, Duration::ZERO).await?;
            }
            Ok(())
        }
    })
    .await?;
    let classic_offer = rate(start);
    let start = Instant::now();
    run_tasks(args.concurrency, |_| {
        let (q, v) = (reliable.clone(), value.clone());
        async move {
            for _ in 0..per_task {
                q.offer(&*v, Duration::ZERO, None).await?;
            }
            Ok(())
        }
    })
    .await?;
    let reliable_offer = rate(start);
    println!("offer:         reliable {reliable_offer:>9.0}/s   delayed {classic_offer:>9.0}/s   ratio {:.2}", reliable_offer / classic_offer);

    classic.transfer_now().await?;
    let start = Instant::now();
    run_tasks(args.concurrency, |_| {
        let q = classic.clone();
        async move {
            for _ in 0..per_task {
                q.take(Some(Duration::from_secs(5))).await?;
            }
            Ok(())
        }
    })
    .await?;
    let classic_take = rate(start);
    let start = Instant::now();
    run_tasks(args.concurrency, |_| {
        let q = reliable.clone();
        async move {
            for _ in 0..per_task {
                if let Some(d) = q.receive(Some(Duration::from_secs(5))).await? {
                    d.ack().await?;
                }
            }
            Ok(())
        }
    })
    .await?;
    let reliable_take = rate(start);
    println!("receive+ack:   reliable {reliable_take:>9.0}/s   take    {classic_take:>9.0}/s   ratio {:.2}", reliable_take / classic_take);

    let mut conn = raw(url).await?;
    reliable_memory(client, &mut conn, args).await?;
    // Wake-up: a consumer blocked in receive, a message made ready by an offer with no
    // delay; from the offer call to the consumer holding it.
    let wq = client.reliable_queue(
        &fresh_name("rq-wake"),
        delayq::ReliableQueueOptions {
            scheduler: no_scheduler(),
            ..Default::default()
        },
    )?;
    let mut wakes = Vec::new();
    for i in 0..500u32 {
        let consumer = wq.clone();
        let waiting = tokio::spawn(async move {
            let d = consumer.receive(Some(Duration::from_secs(5))).await?;
            let at = Instant::now();
            if let Some(d) = d {
                d.ack().await?;
            }
            Ok::<_, Error>(at)
        });
        // Let the receive reach the server and block there.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let start = Instant::now();
        wq.offer(i.to_string(), Duration::ZERO, None).await?;
        let at = waiting.await.map_err(|e| Error::Server(e.to_string()))??;
        wakes.push(at.saturating_duration_since(start).as_secs_f64() * 1000.0);
    }
    wakes.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "receive wake-up (offer call to consumer holding it, 500 runs): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target < 5 ms)",
        wakes[250],
        wakes[495],
        wakes[499]
    );
    println!(
        "lateness, reliable queue ({} offers/s for {} s, 100 ms delay, one consumer, receive+ack)",
        args.rate, args.seconds
    );
    let lq = client.reliable_queue(&fresh_name("rq-lateness"), Default::default())?;
    let late = measure_lateness(client, args, Probe::Reliable(lq.clone())).await?;
    report_lateness(late, args, &handoff_floor(url, 200).await?)?;
    for q in [&reliable, &lq, &wq] {
        delete_reliable(&mut conn, q).await?;
    }
    Ok(())
}

/// Every key of reliable queue `q` (found by SCAN of its prefix).
async fn reliable_keys(
    conn: &mut redis::aio::MultiplexedConnection,
    q: &delayq::ReliableQueue,
) -> Result<Vec<String>> {
    let prefix = &q.keys().prefix;
    let pattern = format!("{}*", prefix.replace('{', "\\{").replace('}', "\\}"));
    scan_keys(conn, &pattern).await
}

async fn delete_reliable(
    conn: &mut redis::aio::MultiplexedConnection,
    q: &delayq::ReliableQueue,
) -> Result<()> {
    for chunk in reliable_keys(conn, q).await?.chunks(1000) {
        let _: i64 = redis::cmd("DEL").arg(chunk).query_async(conn).await?;
    }
    Ok(())
}

const DAY_MS: u64 = 86_400_000;

/// Memory per waiting message of the reliable queue at four spreads of due times (SPEC
/// section 3: at most 100 B whatever the spread), with the hierarchical timing wheel and,
/// beside it in the same run, with one level of 1 s buckets (the layout before the wheel
/// had levels); then what a cascade and a cancel in a big coarse bucket cost.
async fn reliable_memory(
    client: &Client,
    conn: &mut redis::aio::MultiplexedConnection,
    args: &BenchArgs,
) -> Result<()> {
    let m = args.memory_entries.max(1);
    let value = payload(args.value_size);
    let no_transfer = || delayq::ReliableQueueOptions {
        scheduler: no_scheduler(),
        ..Default::default()
    };
    let second = Duration::from_secs(1);
    println!(
        "memory per waiting message ({m} messages, {}-byte payloads, generated ids, due from 10 min ahead evenly over the spread; MEMORY USAGE of every key of the queue / INFO used_memory growth; goal <= 100 B):",
        args.value_size
    );
    for (label, spread) in [
        ("1 s", 1000),
        ("1 h", 3_600_000),
        ("1 day", DAY_MS),
        ("30 days", 30 * DAY_MS),
    ] {
        let mut row = Vec::new();
        for one_level in [false, true] {
            let name = fresh_name("rq-memory");
            if one_level {
                delayq::set_wheel_levels(&name, Some(&[(second, second)]))?;
            }
            let q = client.reliable_queue(&name, no_transfer())?;
            let before = used_memory(conn).await?;
            for from in (0..m).step_by(1000) {
                let k = (m - from).min(1000);
                q.offer_all((from..from + k).map(|i| {
                    let ms = 600_000 + i * spread / m;
                    (value.as_slice(), Duration::from_millis(ms), None)
                }))
                .await?;
            }
            let after = used_memory(conn).await?;
            let mut usage = 0u64;
            for key in reliable_keys(conn, &q).await? {
                let u: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&key)
                    .arg("SAMPLES")
                    .arg(0)
                    .query_async(conn)
                    .await?;
                usage += u.unwrap_or(0);
            }
            row.push((
                usage as f64 / m as f64,
                after.saturating_sub(before) as f64 / m as f64,
            ));
            delete_reliable(conn, &q).await?;
            q.close();
            delayq::set_wheel_levels(&name, None)?;
        }
        println!(
            "  spread {label:<8} hierarchical wheel {:>4.0} B / {:>4.0} B    one level of 1 s buckets {:>4.0} B / {:>4.0} B",
            row[0].0, row[0].1, row[1].0, row[1].1
        );
    }

    // One day bucket of m messages, three days ahead, due all over that day. Cancel the
    // message offered last (a scan of the whole list), then open the bucket by giving the
    // day level a lead of four days: the transfer cascades it into 24 hour buckets.
    let name = fresh_name("rq-cascade");
    let q = client.reliable_queue(&name, no_transfer())?;
    let now = client.server_time_ms().await? as u64;
    let day = now / DAY_MS + 3;
    let mut last = String::new();
    for from in (0..m).step_by(1000) {
        let k = (m - from).min(1000);
        let ids = q
            .offer_all((from..from + k).map(|i| {
                let due = day * DAY_MS + i * DAY_MS / m;
                (value.as_slice(), Duration::from_millis(due - now), None)
            }))
            .await?;
        last = ids.last().cloned().unwrap_or_default();
    }
    let start = Instant::now();
    let found = q.cancel(&last).await?;
    let cancel_ms = start.elapsed().as_secs_f64() * 1000.0;
    let mut levels: Vec<(Duration, Duration)> = delayq::WHEEL_LEVELS
        .iter()
        .map(|&(w, a)| (Duration::from_millis(w), Duration::from_millis(a)))
        .collect();
    levels[3].1 = Duration::from_millis(4 * DAY_MS);
    delayq::set_wheel_levels(&name, Some(&levels))?;
    let saved = script_slowlog_start(conn).await?;
    let start = Instant::now();
    let outcome = q.transfer_now().await?;
    let secs = start.elapsed().as_secs_f64();
    let calls = script_slowlog_end(conn, saved, &q.keys().wheel).await?;
    let mut sorted = calls.clone();
    sorted.sort_unstable();
    let at = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let busy = calls.iter().sum::<i64>() as f64;
    println!(
        "cascade of one day bucket of {} messages into hour buckets: {:.0} ms in {} script calls of up to {} entries; per call (SLOWLOG) median {:.1} ms, p90 {:.1} ms, longest {:.1} ms; Redis time {:.1} µs per message per level",
        outcome.moved,
        secs * 1000.0,
        calls.len(),
        no_scheduler().batch_size,
        at(0.5),
        at(0.9),
        at(1.0),
        busy / outcome.moved.max(1) as f64
    );
    println!(
        "cancel by generated id in a bucket of {m} messages, found last in the list: {cancel_ms:.1} ms ({})",
        if found { "found" } else { "NOT FOUND" }
    );
    delete_reliable(conn, &q).await?;
    q.close();
    delayq::set_wheel_levels(&name, None)?;
    Ok(())
}

/// Records every command in SLOWLOG from now on; returns the settings to restore.
async fn script_slowlog_start(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<(String, String)> {
    let mut saved = Vec::new();
    for name in ["slowlog-log-slower-than", "slowlog-max-len"] {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(conn)
            .await?;
        saved.push(pair.get(1).cloned().unwrap_or_default());
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .arg("slowlog-max-len")
        .arg(100_000)
        .query_async(conn)
        .await?;
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query_async(conn).await?;
    Ok((saved[0].clone(), saved[1].clone()))
}

/// The durations (µs) of the script calls naming `key` since script_slowlog_start, whose
/// settings it restores.
async fn script_slowlog_end(
    conn: &mut redis::aio::MultiplexedConnection,
    saved: (String, String),
    key: &str,
) -> Result<Vec<i64>> {
    use redis::Value;
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(&saved.0)
        .arg("slowlog-max-len")
        .arg(&saved.1)
        .query_async(conn)
        .await?;
    let mut out = Vec::new();
    for e in entries {
        let Value::Array(fields) = e else { continue };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let is = |v: &Value, s: &str| matches!(v, Value::BulkString(b) if b.eq_ignore_ascii_case(s.as_bytes()));
        if args.first().is_some_and(|c| is(c, "evalsha")) && args.iter().any(|a| is(a, key)) {
            out.push(*us);
        }
    }
    Ok(out)
}

/// Every key matching `pattern` (SCAN, so the server is never blocked).
async fn scan_keys(
    conn: &mut redis::aio::MultiplexedConnection,
    pattern: &str,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        out.extend(keys);
        cursor = next;
        if cursor == 0 {
            return Ok(out);
        }
    }
}

async fn run_tasks<F, Fut>(count: u64, make: F) -> Result<()>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for i in 0..count {
        set.spawn(make(i));
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| Error::Server(e.to_string()))??;
    }
    Ok(())
}

/// Drain: a backlog of due entries moved to the destination, beside a bare script that
/// moves the same number of members from a sorted set to a list (no unpacking, no
/// Redisson list bookkeeping; removed by rank, as delayq removes a backlog due in offer
/// order): the floor for this data layout.
async fn drain(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    println!(
        "== drain ({} entries all due at once, in offer order; {}-byte values)",
        args.entries, args.value_size
    );
    let name = fresh_name("drain");
    let queue = client.delayed_queue_with(
        &name,
        SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
    )?;
    let value = payload(args.value_size);
    let start = Instant::now();
    let batches = args.entries.div_ceil(1000);
    let mut fill = tokio::task::JoinSet::new();
    for b in 0..batches {
        let n = (args.entries - b * 1000).min(1000);
        let (queue, value) = (queue.clone(), value.clone());
        fill.spawn(async move {
            queue
                .offer_all((0..n).map(|_| (value.as_slice(), Duration::ZERO)))
                .await
        });
        if fill.len() >= 8 {
            fill.join_next()
                .await
                .unwrap()
                .map_err(|e| Error::Server(e.to_string()))??;
        }
    }
    while let Some(r) = fill.join_next().await {
        r.map_err(|e| Error::Server(e.to_string()))??;
    }
    say!("filled in {:.1} s; draining", start.elapsed().as_secs_f64());
    let start = Instant::now();
    let outcome = queue.transfer_now().await?;
    let ours = outcome.moved as f64 / start.elapsed().as_secs_f64();

    let mut conn = raw(url).await?;
    let floor_key = format!("{name}-floor");
    // Filled in slices: one long script would block the server (and time out).
    let filler = redis::Script::new(
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]), 1000 do local t = {} for j = i, math.min(i + 999, tonumber(ARGV[2])) do t[#t+1] = 0 t[#t+1] = string.format('%08d', j) .. ARGV[3] end redis.call('ZADD', KEYS[1], unpack(t)) end",
    );
    for from in (1..=args.entries).step_by(10_000) {
        let _: () = filler
            .key(&floor_key)
            .arg(from)
            .arg((from + 9_999).min(args.entries))
            .arg(&value)
            .invoke_async(&mut conn)
            .await?;
    }
    let floor = redis::Script::new(
        "local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'LIMIT', 0, 1000) if #due > 0 then redis.call('RPUSH', KEYS[2], unpack(due)) redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #due - 1) end return #due",
    );
    let start = Instant::now();
    let mut moved = 0u64;
    loop {
        let n: u64 = floor
            .key(&floor_key)
            .key(format!("{floor_key}-dest"))
            .invoke_async(&mut conn)
            .await?;
        moved += n;
        if n == 0 {
            break;
        }
    }
    let theirs = moved as f64 / start.elapsed().as_secs_f64();
    let _: i64 = redis::cmd("DEL")
        .arg(&name)
        .arg(&floor_key)
        .arg(format!("{floor_key}-dest"))
        .query_async(&mut conn)
        .await?;
    println!(
        "delayq drain:          {ours:>10.0} entries/s ({} moved; target >= 200000)",
        outcome.moved
    );
    println!("bare zset->list floor: {theirs:>10.0} entries/s");
    println!("ratio delayq / floor: {:.2}", ours / theirs);
    Ok(())
}

/// A small deterministic generator (splitmix64) for the benchmarks' random choices.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The transfer at a million waiting entries of mixed delays: half of them due within a
/// second, half in an hour, in random order, so that the due entries lie all over the
/// queue list instead of at its head. Prints the longest transfer script call that SLOWLOG
/// recorded beside the 50 ms limit (SPEC section 9), and the drain rate.
async fn mixed(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    let n = args.mixed_entries;
    println!(
        "== transfer, mixed delays ({n} waiting entries, half due within 1 s, half in an hour, in random order; {}-byte values)",
        args.value_size
    );
    let name = fresh_name("mixed");
    let queue = client.delayed_queue_with(&name, no_scheduler())?;
    let value = Arc::new(payload(args.value_size));
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let start = Instant::now();
    let mut fill = tokio::task::JoinSet::new();
    for b in 0..n.div_ceil(1000) {
        let delays: Vec<Duration> = (0..(n - b * 1000).min(1000))
            .map(|_| match splitmix(&mut seed) {
                r if r & 1 == 0 => Duration::from_secs(3600),
                r => Duration::from_millis((r >> 1) % 1000),
            })
            .collect();
        let (queue, value) = (queue.clone(), value.clone());
        fill.spawn(async move {
            queue
                .offer_all(delays.iter().map(|d| (value.as_slice(), *d)))
                .await
        });
        if fill.len() >= 8 {
            fill.join_next()
                .await
                .unwrap()
                .map_err(|e| Error::Server(e.to_string()))??;
        }
    }
    while let Some(r) = fill.join_next().await {
        r.map_err(|e| Error::Server(e.to_string()))??;
    }
    say!("filled in {:.1} s; draining", start.elapsed().as_secs_f64());
    // Let every short delay pass, then record each command of 1 ms or more.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut conn = raw(url).await?;
    let keys = queue.keys();
    let now = client.server_time_ms().await?;
    let due: u64 = redis::cmd("ZCOUNT")
        .arg(&keys.timeout_set)
        .arg("-inf")
        .arg(now)
        .query_async(&mut conn)
        .await?;
    let saved = slowlog_config(&mut conn).await?;
    set_slowlog(&mut conn, "1000", "1000000").await?;
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut conn)
        .await?;
    let calls_before = script_calls(&mut conn).await?;
    let cpu_before = main_thread_cpu(&mut conn).await?;
    let start = Instant::now();
    let outcome = queue.transfer_now().await?;
    let secs = start.elapsed().as_secs_f64();
    let cpu = main_thread_cpu(&mut conn).await? - cpu_before;
    let calls = script_calls(&mut conn).await? - calls_before;
    let slow = slow_script_calls(&mut conn, &keys.queue_list).await?;
    set_slowlog(&mut conn, &saved.0, &saved.1).await?;
    let _: i64 = redis::cmd("UNLINK")
        .arg(&keys.destination)
        .arg(&keys.timeout_set)
        .arg(&keys.queue_list)
        .arg(&keys.corrupt_list)
        .query_async(&mut conn)
        .await?;
    let longest = slow.iter().copied().max().unwrap_or(0) as f64 / 1000.0;
    println!(
        "drain of {} due entries among {n} waiting: {:>8.0} entries/s ({} moved in {secs:.1} s, {calls} script calls)",
        due,
        outcome.moved as f64 / secs,
        outcome.moved
    );
    println!(
        "longest transfer call (SLOWLOG): {longest:.1} ms (limit 50 ms); {} calls of 10 ms or more, {} of 50 ms or more",
        slow.iter().filter(|&&us| us >= 10_000).count(),
        slow.iter().filter(|&&us| us >= 50_000).count()
    );
    // SLOWLOG times a call by the wall clock: on a machine short of CPU, the time Redis
    // waited for one counts too. Its main thread's CPU time tells how much that was.
    println!(
        "Redis main thread busy {cpu:.1} s of the {secs:.1} s drain ({:.0}%), {:.1} ms of CPU per call on average",
        100.0 * cpu / secs,
        1000.0 * cpu / calls.max(1) as f64
    );
    Ok(())
}

/// CPU time (user and system) of Redis's main thread so far, in seconds.
async fn main_thread_cpu(conn: &mut redis::aio::MultiplexedConnection) -> Result<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    Ok(info
        .lines()
        .filter(|l| {
            l.starts_with("used_cpu_sys_main_thread:")
                || l.starts_with("used_cpu_user_main_thread:")
        })
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum())
}

async fn slowlog_config(conn: &mut redis::aio::MultiplexedConnection) -> Result<(String, String)> {
    let mut out = Vec::new();
    for name in ["slowlog-log-slower-than", "slowlog-max-len"] {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(conn)
            .await?;
        out.push(pair.get(1).cloned().unwrap_or_default());
    }
    Ok((out[0].clone(), out[1].clone()))
}

async fn set_slowlog(
    conn: &mut redis::aio::MultiplexedConnection,
    slower_than: &str,
    max_len: &str,
) -> Result<()> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(slower_than)
        .arg("slowlog-max-len")
        .arg(max_len)
        .query_async(conn)
        .await?;
    Ok(())
}

/// EVALSHA and EVAL calls the server has run so far.
async fn script_calls(conn: &mut redis::aio::MultiplexedConnection) -> Result<u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// Durations (µs) of the script calls naming `key` that SLOWLOG holds.
async fn slow_script_calls(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> Result<Vec<i64>> {
    use redis::Value;
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for e in entries {
        let Value::Array(fields) = e else { continue };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let args: Vec<String> = args.iter().map(text).collect();
        let script = args
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case("evalsha") || c.eq_ignore_ascii_case("eval"));
        if script && args.iter().any(|a| a == key) {
            out.push(*us);
        }
    }
    Ok(out)
}

/// Memory in Redis per waiting entry, beside one sorted set holding only 16-byte ids.
async fn memory(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    let n = args.memory_entries;
    println!(
        "== memory ({n} waiting entries, all due in 1 h; {}-byte values)",
        args.value_size
    );
    let mut conn = raw(url).await?;
    let name = fresh_name("memory");
    let queue = client.delayed_queue_with(
        &name,
        SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
    )?;
    let value = payload(args.value_size);
    let before = used_memory(&mut conn).await?;
    for chunk_start in (0..n).step_by(1000) {
        let m = (n - chunk_start).min(1000);
        queue
            .offer_all((0..m).map(|_| (value.as_slice(), Duration::from_secs(3600))))
            .await?;
    }
    let after = used_memory(&mut conn).await?;
    let mut usage = 0u64;
    for key in [&queue.keys().timeout_set, &queue.keys().queue_list] {
        let u: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut conn)
            .await?;
        usage += u.unwrap_or(0);
    }
    let floor_key = format!("{name}-ids");
    let filler = redis::Script::new(
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]), 1000 do local t = {} for j = i, math.min(i + 999, tonumber(ARGV[2])) do t[#t+1] = j t[#t+1] = string.format('%016d', j) end redis.call('ZADD', KEYS[1], unpack(t)) end",
    );
    for from in (1..=n).step_by(10_000) {
        let _: () = filler
            .key(&floor_key)
            .arg(from)
            .arg((from + 9_999).min(n))
            .invoke_async(&mut conn)
            .await?;
    }
    let ids: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&floor_key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(&mut conn)
        .await?;
    let _: i64 = redis::cmd("DEL")
        .arg(&queue.keys().timeout_set)
        .arg(&queue.keys().queue_list)
        .arg(&floor_key)
        .query_async(&mut conn)
        .await?;
    println!("delayed queue (Redisson layout): {:>6.0} B/entry by MEMORY USAGE, {:>6.0} B/entry by INFO used_memory",
        usage as f64 / n as f64, after.saturating_sub(before) as f64 / n as f64);
    println!("one sorted set of 16-byte ids:   {:>6.0} B/entry by MEMORY USAGE (the floor of any one-member-per-message zset layout)",
        ids.unwrap_or(0) as f64 / n as f64);
    Ok(())
}

/// `INFO memory`'s `used_memory`, once no freeing is pending: a key that an earlier
/// benchmark unlinked is freed in the background, and its memory going away during a
/// measurement made the growth come out as 0.
async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> Result<u64> {
    let field = |info: &str, name: &str| -> u64 {
        let prefix = format!("{name}:");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
        if field(&info, "lazyfree_pending_objects") == 0 || Instant::now() > deadline {
            return Ok(field(&info, "used_memory"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `consume` throughput (one consume call, `concurrency` handlers, an empty handler) beside
/// the bare limit in the same run: XREADGROUP COUNT `concurrency` on a plain stream, the
/// XACK of each batch pipelined with the next read (one round trip per batch); then the
/// lateness of consume at a steady offer rate.
async fn reliable_consume(client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let n = args.consume_messages;
    let conc = args.concurrency as usize;
    println!(
        "== reliable queue consume ({n} messages due now, consume(empty handler, {conc}), {}-byte values)",
        args.value_size
    );
    let value = payload(args.value_size);
    let q = client.reliable_queue(&fresh_name("rq-consume"), Default::default())?;
    let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    for chunk in ids.chunks(1000) {
        q.offer_all(
            chunk
                .iter()
                .map(|id| (&value, Duration::ZERO, Some(id.as_str()))),
        )
        .await?;
    }
    // Wait until every message is ready (the offers are due now).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = q.stats().await?;
        if st.ready >= n || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = Arc::new(AtomicU64::new(0));
    let first = Arc::new(std::sync::OnceLock::<Instant>::new());
    let start = Instant::now();
    let consumer = {
        let (q, done, first) = (q.clone(), done.clone(), first.clone());
        tokio::spawn(async move {
            q.consume(
                move |_d| {
                    first.get_or_init(Instant::now);
                    let done = done.clone();
                    async move {
                        done.fetch_add(1, Ordering::Relaxed);
                        Ok::<(), String>(())
                    }
                },
                conc,
            )
            .await
        })
    };
    // Every handler finished, then every ack landed (stats: nothing ready or in flight).
    let limit = Instant::now() + Duration::from_secs(300);
    while done.load(Ordering::Relaxed) < n && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let handled_at = Instant::now();
    loop {
        let st = q.stats().await?;
        if (st.ready == 0 && st.in_flight == 0) || Instant::now() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let acked_at = Instant::now();
    let from = *first.get().unwrap_or(&start);
    let ours = n as f64 / acked_at.duration_since(from).as_secs_f64();
    let handled = n as f64 / handled_at.duration_since(from).as_secs_f64();
    q.close_gracefully(Duration::from_secs(5)).await?;
    consumer.await.map_err(|e| Error::Server(e.to_string()))??;

    // The bare limit: a plain stream of the same entries.
    let mut conn = raw(url).await?;
    let key = fresh_name("bare-stream");
    for start in (0..n).step_by(1000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 1000).min(n) {
            pipe.cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg("id")
                .arg(format!("m{i}"))
                .arg("p")
                .arg(&value)
                .ignore();
        }
        let () = pipe.query_async(&mut conn).await?;
    }
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&key)
        .arg("g")
        .arg("0")
        .query_async(&mut conn)
        .await?;
    type Read = Option<Vec<(String, Vec<(String, Vec<Vec<u8>>)>)>>;
    let start = Instant::now();
    let mut pending: Vec<String> = Vec::new();
    let mut got = 0u64;
    loop {
        let mut pipe = redis::pipe();
        if !pending.is_empty() {
            pipe.cmd("XACK").arg(&key).arg("g").arg(&pending).ignore();
        }
        pipe.cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("COUNT")
            .arg(conc)
            .arg("STREAMS")
            .arg(&key)
            .arg(">");
        let (read,): (Read,) = pipe.query_async(&mut conn).await?;
        pending = read
            .into_iter()
            .flatten()
            .flat_map(|(_, entries)| entries.into_iter().map(|(id, _)| id))
            .collect();
        if pending.is_empty() {
            break;
        }
        got += pending.len() as u64;
    }
    let bare = got as f64 / start.elapsed().as_secs_f64();
    let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
    println!(
        "consume:  delayq {ours:>8.0} jobs/s (first handler start to last ack; handlers alone {handled:.0}/s)   bare XREADGROUP COUNT {conc} + XACK pipelined {bare:>8.0}/s ({got} entries)   ratio {:.2}",
        ours / bare
    );

    // Lateness: server time at handler start minus the message's due time.
    let total = (args.consume_rate * args.seconds) as usize;
    println!(
        "== reliable queue consume lateness ({} offers/s for {} s, due now+100 ms, one consume(…, {conc}); values: sequence numbers, 1-7 bytes)",
        args.consume_rate, args.seconds
    );
    let lq = client.reliable_queue(&fresh_name("rq-consume-late"), Default::default())?;
    let offset = server_offset_ms(client).await?;
    let late = Arc::new(std::sync::Mutex::new(Vec::with_capacity(total)));
    let consumer = {
        let (lq, late) = (lq.clone(), late.clone());
        tokio::spawn(async move {
            lq.consume(
                move |d| {
                    let now = unix_ms_f64() + offset;
                    late.lock().unwrap().push(now - d.due_at as f64);
                    async move { Ok::<(), String>(()) }
                },
                conc,
            )
            .await
        })
    };
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.consume_rate as f64));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut offers = tokio::task::JoinSet::new();
    for seq in 0..total as u64 {
        ticker.tick().await;
        let lq = lq.clone();
        offers.spawn(async move {
            lq.offer(seq.to_string(), Duration::from_millis(100), None)
                .await
        });
    }
    while let Some(r) = offers.join_next().await {
        r.map_err(|e| Error::Server(e.to_string()))??;
    }
    let limit = Instant::now() + Duration::from_secs(5);
    while late.lock().unwrap().len() < total && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    lq.close_gracefully(Duration::from_secs(5)).await?;
    consumer.await.map_err(|e| Error::Server(e.to_string()))??;
    let mut late = std::mem::take(&mut *late.lock().unwrap());
    if late.is_empty() {
        println!("no message arrived");
    } else {
        late.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let pct = |p: f64| late[((late.len() as f64 * p) as usize).min(late.len() - 1)];
        println!(
            "lateness p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 <= 10 ms); {} of {total} handled, earliest {:.2} ms",
            pct(0.50),
            pct(0.99),
            late[late.len() - 1],
            late.len(),
            late[0]
        );
        print_lateness_limit(&handoff_floor(url, 200).await?);
    }
    for rq in [&q, &lq] {
        delete_reliable(&mut conn, rq).await?;
    }
    Ok(())
}

/// What one run of the `shards` benchmark measured on one deployment.
struct ShardRun {
    offer_rate: f64,
    consume_rate: f64,
    /// Per master: (address, shards it serves, commands, µs of command time, CPU s).
    masters: Vec<(String, usize, u64, u64, f64)>,
}

/// The masters of a cluster (from `CLUSTER NODES` on a seed), or the one server.
async fn masters_of(url: &str, cluster: bool) -> Result<Vec<(String, Vec<(u16, u16)>)>> {
    if !cluster {
        return Ok(vec![(url.to_owned(), vec![(0, 16383)])]);
    }
    let mut conn = raw(url).await?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await?;
    let mut out = Vec::new();
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || !f[2].contains("master") || f[2].contains("fail") {
            continue;
        }
        let addr = f[1].split('@').next().unwrap_or(f[1]);
        let slots = f[8..]
            .iter()
            .filter(|r| !r.starts_with('['))
            .filter_map(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        out.push((format!("redis://{addr}"), slots));
    }
    out.sort();
    Ok(out)
}

/// Commands and µs of command time (INFO commandstats) and CPU seconds (INFO cpu) of a
/// server so far.
async fn command_totals(conn: &mut redis::aio::MultiplexedConnection) -> Result<(u64, u64, f64)> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let (mut calls, mut usec) = (0, 0);
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        for field in line.split(':').nth(1).unwrap_or("").split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => calls += v.parse::<u64>().unwrap_or(0),
                Some(("usec", v)) => usec += v.parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
    }
    Ok((calls, usec, main_thread_cpu(conn).await?))
}

/// offer_all (due now) + consume(empty handler, concurrency) until every ack landed, on a
/// queue of `shards` shards; each master's share of commands, command time and CPU.
async fn shard_run(url: &str, cluster: bool, shards: u32, args: &BenchArgs) -> Result<ShardRun> {
    let n = args.consume_messages;
    let opts = if cluster {
        delayq::ClientOptions::cluster(url.split(','))
    } else {
        delayq::ClientOptions::new(url)
    };
    let seed = url.split(',').next().unwrap_or(url);
    let masters = masters_of(seed, cluster).await?;
    let mut conns = Vec::new();
    for (addr, _) in &masters {
        let mut c = raw(addr).await?;
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut c)
            .await?;
        conns.push(c);
    }
    let mut before = Vec::new();
    for c in &mut conns {
        before.push(command_totals(c).await?);
    }
    let client = Client::connect_with(opts).await?;
    let name = fresh_name("shards");
    let q = client.reliable_queue(
        &name,
        delayq::ReliableQueueOptions {
            shards: Some(shards),
            ..Default::default()
        },
    )?;
    let value = payload(args.value_size);
    let start = Instant::now();
    let batch: Vec<_> = (0..n).map(|_| (&value, Duration::ZERO, None)).collect();
    for chunk in batch.chunks(5000) {
        q.offer_all(chunk.iter().cloned()).await?;
    }
    let offer_rate = n as f64 / start.elapsed().as_secs_f64();
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let first = Arc::new(std::sync::OnceLock::<Instant>::new());
    let consumer = {
        let (q, done, first) = (q.clone(), done.clone(), first.clone());
        let conc = args.concurrency as usize;
        tokio::spawn(async move {
            q.consume(
                move |_d| {
                    first.get_or_init(Instant::now);
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async { Ok::<(), String>(()) }
                },
                conc,
            )
            .await
        })
    };
    let limit = Instant::now() + Duration::from_secs(300);
    loop {
        let st = q.stats().await?;
        let handled = done.load(std::sync::atomic::Ordering::Relaxed);
        if (handled >= n && st.ready == 0 && st.in_flight == 0) || Instant::now() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let from = *first.get().unwrap_or(&start);
    let consume_rate = n as f64 / from.elapsed().as_secs_f64();
    q.close_gracefully(Duration::from_secs(5)).await?;
    consumer.await.map_err(|e| Error::Server(e.to_string()))??;
    client.close();
    let mut out = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        let (calls, usec, cpu) = command_totals(c).await?;
        let served = (0..shards)
            .filter(|&s| {
                let keys = delayq::keys::ReliableKeys::shard(&name, s, shards).expect("keys");
                let slot = delayq::keys::cluster_slot(&keys.ready);
                masters[i].1.iter().any(|&(a, b)| a <= slot && slot <= b)
            })
            .count();
        out.push((
            masters[i].0.clone(),
            served,
            calls - before[i].0,
            usec - before[i].1,
            cpu - before[i].2,
        ));
    }
    // Leave the servers as they were (the name is unique to this run).
    for c in conns.iter_mut() {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{name}*"))
            .query_async(c)
            .await
            .unwrap_or_default();
        for k in found {
            let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(&k).query_async(c).await;
        }
    }
    Ok(ShardRun {
        offer_rate,
        consume_rate,
        masters: out,
    })
}

/// One queue on one node with one shard beside the same run on a cluster with `--shards`
/// shards: rates, and each master's share of commands, command time and CPU; what three
/// machines would give is estimated from the busiest master's command time per message.
async fn shards(_client: &Client, url: &str, args: &BenchArgs) -> Result<()> {
    let Some(seeds) = args.cluster_seeds.as_deref() else {
        return Err(Error::InvalidArgument(
            "the shards benchmark needs --cluster-seeds (scripts/bench.sh shards starts a cluster)"
                .into(),
        ));
    };
    let n = args.consume_messages;
    println!(
        "== one reliable queue: one node with 1 shard beside a cluster with {} shards ({n} messages: offer_all due now, consume(empty handler, {}), acks; {}-byte values)",
        args.shards, args.concurrency, args.value_size
    );
    let single = shard_run(url, false, 1, args).await?;
    let sharded = shard_run(seeds, true, args.shards, args).await?;
    let mut busiest_single = 0.0;
    let mut busiest_cluster = 0.0;
    for (label, run, busiest) in [
        ("one node, 1 shard", &single, &mut busiest_single),
        ("cluster, sharded", &sharded, &mut busiest_cluster),
    ] {
        let calls: u64 = run.masters.iter().map(|m| m.2).sum();
        let usec: u64 = run.masters.iter().map(|m| m.3).sum();
        let cpu: f64 = run.masters.iter().map(|m| m.4).sum();
        println!(
            "{label}: offer_all {:.0} msg/s, consume {:.0} msg/s; Redis: {:.1} commands, {:.1} µs of command time, {:.1} µs of CPU per message (all masters)",
            run.offer_rate,
            run.consume_rate,
            calls as f64 / n as f64,
            usec as f64 / n as f64,
            cpu * 1e6 / n as f64
        );
        for (addr, served, c, u, cpu_m) in &run.masters {
            println!(
                "  master {addr}: {served} shard(s), {:.1} % of commands, {:.1} % of command time, {:.1} % of CPU; {:.1} µs of CPU per message",
                100.0 * *c as f64 / calls.max(1) as f64,
                100.0 * *u as f64 / usec.max(1) as f64,
                100.0 * cpu_m / cpu.max(1e-9),
                cpu_m * 1e6 / n as f64
            );
            let per_msg = cpu_m * 1e6 / n as f64;
            if per_msg > *busiest {
                *busiest = per_msg;
            }
        }
    }
    println!(
        "estimate with each master on a machine of its own (a Redis main thread bounded by one core): ceiling {:.0} msg/s for one node ({busiest_single:.1} µs of CPU per message), {:.0} msg/s for the cluster (its busiest master: {busiest_cluster:.1} µs per message), {:.2}x",
        1e6 / busiest_single.max(1e-9),
        1e6 / busiest_cluster.max(1e-9),
        busiest_single / busiest_cluster.max(1e-9)
    );
    println!("limit: on one machine every master shares its cores, so the cluster's absolute rates here are no faster than one node's; command time (commandstats usec) is wall time inside commands and grows when servers wait for a core, CPU (INFO cpu, main thread) does not");
    Ok(())
}
