//! `delayq bench serve`: HTTP offers per second through the service beside the library's
//! offers per second in the same run, and webhook deliveries per second to a local
//! endpoint. Everything runs in one process (the service, the HTTP client, the webhook
//! endpoint) against the Redis server of `client`, so the figures include the cost of
//! sharing the machine; `docs/serve.md` has figures and conditions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;

use crate::{Config, Server};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Offers in each of the library and HTTP runs.
    pub offers: u64,
    /// Requests (and library offers) in flight at once.
    pub concurrency: usize,
    /// Messages delivered to the webhook endpoint.
    pub webhooks: u64,
    /// The service's webhook workers per queue.
    pub webhook_concurrency: usize,
    /// Payload size in bytes.
    pub value_size: usize,
}

fn fresh(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("bench-serve-{kind}-{nanos}")
}

fn err(e: impl std::fmt::Display) -> delayq::Error {
    delayq::Error::Connection(format!("bench: {e}"))
}

/// Runs the benchmarks and prints their figures.
pub async fn run(client: &delayq::Client, opts: &BenchOptions) -> delayq::Result<()> {
    let payload: String = (0..opts.value_size)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    println!(
        "serve: {} offers of {} B, {} in flight; {} webhooks, {} workers",
        opts.offers, opts.value_size, opts.concurrency, opts.webhooks, opts.webhook_concurrency
    );

    // The library: ReliableQueue::offer with `concurrency` calls in flight.
    let queue = client.reliable_queue(&fresh("lib"), Default::default())?;
    queue
        .offer("warm-up", Duration::from_secs(3600), None)
        .await?;
    let started = Instant::now();
    let results: Vec<delayq::Result<String>> = futures_util::stream::iter(0..opts.offers)
        .map(|_| queue.offer(payload.as_bytes(), Duration::from_secs(3600), None))
        .buffer_unordered(opts.concurrency)
        .collect()
        .await;
    let lib_secs = started.elapsed().as_secs_f64();
    results.into_iter().collect::<delayq::Result<Vec<_>>>()?;
    let lib_rate = opts.offers as f64 / lib_secs;
    queue.close();

    // HTTP: the same offers as POST /v1/queues/{name}/messages on kept-alive connections.
    let server = Server::start(
        client.clone(),
        Config {
            listen: "127.0.0.1:0".parse().expect("address"),
            allow_unauthenticated: true,
            webhook_concurrency: opts.webhook_concurrency,
            ..Config::default()
        },
    )
    .await
    .map_err(err)?;
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency)
        .build()
        .map_err(err)?;
    let name = fresh("http");
    let url = format!("{base}/v1/queues/{name}/messages");
    let body = serde_json::json!({"payload": payload, "delay_ms": 3_600_000}).to_string();
    let post = |body: String| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(err)?;
            if r.status() != reqwest::StatusCode::CREATED {
                return Err(err(format!("offer answered {}", r.status())));
            }
            r.bytes().await.map_err(err)?;
            Ok::<_, delayq::Error>(())
        }
    };
    post(body.clone()).await?;
    let started = Instant::now();
    let results: Vec<delayq::Result<()>> = futures_util::stream::iter(0..opts.offers)
        .map(|_| post(body.clone()))
        .buffer_unordered(opts.concurrency)
        .collect()
        .await;
    let http_secs = started.elapsed().as_secs_f64();
    results.into_iter().collect::<delayq::Result<Vec<_>>>()?;
    let http_rate = opts.offers as f64 / http_secs;
    println!(
        "  library offers:  {lib_rate:>9.0}/s  (ReliableQueue::offer, {} in flight)",
        opts.concurrency
    );
    println!(
        "  HTTP offers:     {http_rate:>9.0}/s  (POST /v1/queues/{{name}}/messages, {} kept-alive requests in flight; {:.2} of the library)",
        opts.concurrency,
        http_rate / lib_rate
    );

    // Webhooks: messages all due at once, POSTed to a local endpoint that answers 204.
    let received = Arc::new(AtomicU64::new(0));
    let last = Arc::new(std::sync::Mutex::new(Instant::now()));
    let app = {
        let (received, last) = (received.clone(), last.clone());
        axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let (received, last) = (received.clone(), last.clone());
                async move {
                    received.fetch_add(1, Ordering::Relaxed);
                    *last.lock().unwrap() = Instant::now();
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(err)?;
    let hook = format!("http://{}/hook", listener.local_addr().map_err(err)?);
    let endpoint = tokio::spawn(async move { axum::serve(listener, app).await });
    let name = fresh("hook");
    let url = format!("{base}/v1/queues/{name}/messages");
    let lead = Duration::from_secs(3);
    let due = Instant::now() + lead;
    let body = serde_json::json!({"payload": payload, "delay_ms": lead.as_millis() as u64, "callback_url": hook})
        .to_string();
    let offered: Vec<delayq::Result<()>> = futures_util::stream::iter(0..opts.webhooks)
        .map(|_| {
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            async move {
                let r = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .map_err(err)?;
                if r.status() != reqwest::StatusCode::CREATED {
                    return Err(err(format!("offer answered {}", r.status())));
                }
                Ok(())
            }
        })
        .buffer_unordered(opts.concurrency)
        .collect()
        .await;
    offered.into_iter().collect::<delayq::Result<Vec<_>>>()?;
    if Instant::now() > due {
        println!("  (the webhook offers took longer than the {lead:?} lead: lower --webhooks)");
    }
    let limit = due + Duration::from_secs(120);
    while received.load(Ordering::Relaxed) < opts.webhooks && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = received.load(Ordering::Relaxed);
    let took = last
        .lock()
        .unwrap()
        .saturating_duration_since(due)
        .as_secs_f64();
    println!(
        "  webhooks:        {:>9.0}/s  ({got} of {} due at once, delivered in {took:.2} s by {} workers to a local endpoint answering 204)",
        got as f64 / took.max(1e-9),
        opts.webhooks,
        opts.webhook_concurrency
    );
    endpoint.abort();
    server.stop().await.map_err(err)?;
    Ok(())
}
