//! Helpers of the serve tests: a real redis-server (core's test helper), the service on a
//! free port in this process, and a JSON client.
#![allow(dead_code)]

#[path = "../../../core/tests/common/mod.rs"]
pub mod common;

use std::time::Duration;

pub use common::RedisServer;
use serde_json::Value;

pub const TOKEN: &str = "test-token-123";

pub struct Env {
    pub redis: RedisServer,
    pub client: delayq::Client,
    pub server: Option<delayq_serve::Server>,
    pub base: String,
    pub http: reqwest::Client,
}

/// A config with a token, on a free port.
pub fn config() -> delayq_serve::Config {
    delayq_serve::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: Some(TOKEN.into()),
        ..Default::default()
    }
}

impl Env {
    pub async fn start(config: delayq_serve::Config) -> Env {
        let redis = RedisServer::start();
        Self::start_on(redis, config).await
    }

    pub async fn start_on(redis: RedisServer, config: delayq_serve::Config) -> Env {
        Self::start_allowing(redis, config, &[]).await
    }

    /// Starts the service answering also the `Host` names `allowed_hosts`.
    pub async fn start_allowing(
        redis: RedisServer,
        config: delayq_serve::Config,
        allowed_hosts: &[&str],
    ) -> Env {
        let client = delayq::Client::connect(&redis.url()).await.unwrap();
        let allowed_hosts: Vec<String> = allowed_hosts.iter().map(|h| h.to_string()).collect();
        let server =
            delayq_serve::Server::start_with_allowed_hosts(client.clone(), config, &allowed_hosts)
                .await
                .unwrap();
        Env {
            base: format!("http://{}", server.addr),
            server: Some(server),
            redis,
            client,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        }
    }

    /// Sends a request with the test token; returns the status and the JSON body (Null
    /// when not JSON).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(Some(TOKEN), method, path, body).await
    }

    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{}", self.base, path),
        );
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&b).unwrap());
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Receives one delivery of `queue` (waiting up to 5 s), then acks or nacks it
    /// (`action`: "ack" or "nack"); returns the delivery.
    pub async fn receive_and(&self, queue: &str, action: &str) -> Value {
        let (_, got) = self
            .call(
                "POST",
                &format!("/v1/queues/{queue}/receive"),
                Some(serde_json::json!({"wait_ms": 5000})),
            )
            .await;
        let d = got["deliveries"][0].clone();
        let id = d["delivery_id"].as_str().expect("a delivery");
        let path = format!("/v1/queues/{queue}/deliveries/{id}/{action}");
        let (status, _) = self.call("POST", &path, None).await;
        assert_eq!(status, 200, "{action} {path}");
        d
    }

    /// Sends a raw body.
    pub async fn call_raw(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let resp = self
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{}", self.base, path),
            )
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Sends `head` (a request line and headers, without the final blank line) and
    /// `body` as they are, on a connection of its own, `Connection: close`; returns the
    /// status and the JSON body (Null when not JSON). For headers an HTTP client sets
    /// itself, such as `Host`.
    pub async fn raw(&self, head: &str, body: &str) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::net::TcpStream::connect(self.base.trim_start_matches("http://"))
            .await
            .unwrap();
        let request = format!(
            "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), conn.read_to_end(&mut answer))
            .await
            .expect("an answer within 30 s")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
        let (headers, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        // A chunked body (axum's JSON has a length; anything else is only checked as text).
        let chunked = headers
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let json = if chunked {
            Value::Null
        } else {
            serde_json::from_str(body).unwrap_or(Value::Null)
        };
        (status, json)
    }

    /// The port the service listens on.
    pub fn port(&self) -> u16 {
        self.server.as_ref().unwrap().addr.port()
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let resp = self
            .http
            .get(format!("{}{}", self.base, path))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    /// Every key in Redis.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .redis
            .cli(&["--raw", "KEYS", "*"])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        keys.sort();
        keys
    }

    /// Stores settings for queue `name` with a core handle (as an operator would with
    /// `delayq reliable configure`).
    pub async fn configure(&self, name: &str, max_attempts: u32, backoff: Vec<Duration>) {
        let opts = delayq::ReliableQueueOptions {
            max_attempts: Some(max_attempts),
            backoff: Some(delayq::Backoff::Schedule(backoff)),
            ..Default::default()
        };
        self.configure_with(name, opts).await;
    }

    /// Stores the settings `opts` names for queue `name`.
    pub async fn configure_with(&self, name: &str, opts: delayq::ReliableQueueOptions) {
        let opts = delayq::ReliableQueueOptions {
            update_settings: true,
            scheduler: delayq::SchedulerOptions {
                enabled: false,
                ..Default::default()
            },
            ..opts
        };
        let q = self.client.reliable_queue(name, opts).unwrap();
        q.settings().await.unwrap();
        q.close();
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await.unwrap();
        }
        self.client.close();
    }
}

/// Waits until `f` returns Some, checking every 20 ms, up to `limit`.
pub async fn until<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Log output captured as text (a `tracing_subscriber::fmt` writer).
#[derive(Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
