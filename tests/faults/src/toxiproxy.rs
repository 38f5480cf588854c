//! Toxiproxy: a server process of its own per test, and its HTTP API (create a proxy, add
//! and remove toxics), spoken as HTTP/1.0 over a std `TcpStream` (one request per
//! connection, the answer ends when the server closes).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::procs::{free_port, temp_dir};
use crate::tools;

/// One request to the API on `127.0.0.1:port`; returns the status code and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> String {
    let (status, reply) = http(port, method, path, body)
        .unwrap_or_else(|e| panic!("Toxiproxy API {method} {path}: {e}"));
    assert!(
        (200..300).contains(&status),
        "Toxiproxy API {method} {path} answered {status}: {reply}"
    );
    reply
}

/// A Toxiproxy server.
pub struct Toxiproxy {
    /// The port of its HTTP API on 127.0.0.1.
    pub api_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Toxiproxy {
    /// Starts a server (its API on a free port) and waits until the API answers.
    pub fn start() -> Toxiproxy {
        let bin = tools::ensure();
        for _ in 0..5 {
            if let Some(server) = Self::try_start(bin, free_port()) {
                return server;
            }
        }
        panic!("Toxiproxy could not bind a free API port in 5 tries");
    }

    /// A server with its API on `api_port`, or None when it could not listen there: the
    /// port was taken between choosing it and binding it.
    fn try_start(bin: &std::path::Path, api_port: u16) -> Option<Toxiproxy> {
        let dir = temp_dir(&format!("toxiproxy-{api_port}"));
        let log = std::fs::File::create(dir.join("toxiproxy.log")).expect("toxiproxy log");
        let child = Command::new(bin)
            .args(["-host", "127.0.0.1", "-port", &api_port.to_string()])
            .env("LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the Toxiproxy server");
        let server = Toxiproxy {
            api_port,
            dir,
            child: Some(child),
        };
        // Toxiproxy does not exit when its API port is taken: it logs the error and waits.
        let log = server.dir.join("toxiproxy.log");
        let failed = || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let failed = text.contains("Server finished with error");
            if failed {
                eprintln!(
                    "Toxiproxy could not listen on API port {api_port}; trying another:\n{text}"
                );
            }
            failed
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !matches!(http(api_port, "GET", "/version", None), Ok((200, _))) {
            if failed() {
                return None;
            }
            assert!(
                Instant::now() < deadline,
                "the Toxiproxy API on port {api_port} did not answer within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The API that answered is this server's, not another test's on a reused port: a
        // server whose port was taken logs so at once.
        std::thread::sleep(Duration::from_millis(50));
        if failed() {
            return None;
        }
        Some(server)
    }

    /// A proxy named `name` listening on a free loopback port (chosen by Toxiproxy) and
    /// forwarding to `upstream` (`host:port`).
    pub fn proxy(&self, name: &str, upstream: &str) -> Proxy {
        let reply = call(
            self.api_port,
            "POST",
            "/proxies",
            Some(&json!({
                "name": name,
                "listen": "127.0.0.1:0",
                "upstream": upstream,
                "enabled": true,
            })),
        );
        let v: Value = serde_json::from_str(&reply).expect("proxy JSON");
        let listen = v["listen"].as_str().expect("listen address");
        let port = listen
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("listen port");
        Proxy {
            api_port: self.api_port,
            name: name.to_owned(),
            port,
        }
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::env::var_os("DELAYQ_FAULTS_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Which way a toxic acts.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// Client to server (requests).
    Upstream,
    /// Server to client (replies).
    Downstream,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// One proxy of a [`Toxiproxy`] server.
pub struct Proxy {
    api_port: u16,
    /// Its name.
    pub name: String,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl Proxy {
    /// `redis://127.0.0.1:PORT` through this proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Adds a toxic (`latency`, `bandwidth`, `timeout`, `limit_data`, `reset_peer`, ...)
    /// with its attributes, to every connection through the proxy, existing or new.
    pub fn add_toxic(&self, name: &str, kind: &str, stream: Stream, attributes: Value) {
        call(
            self.api_port,
            "POST",
            &format!("/proxies/{}/toxics", self.name),
            Some(&json!({
                "name": name,
                "type": kind,
                "stream": stream.as_str(),
                "toxicity": 1.0,
                "attributes": attributes,
            })),
        );
    }

    /// Removes the toxic `name`.
    pub fn remove_toxic(&self, name: &str) {
        call(
            self.api_port,
            "DELETE",
            &format!("/proxies/{}/toxics/{name}", self.name),
            None,
        );
    }

    /// A silent partition: the `timeout` toxic with timeout 0 both ways. Connections stay
    /// open, nothing passes, no FIN and no RST; new connections are accepted and then
    /// hear nothing either.
    pub fn partition(&self) {
        let attrs = json!({ "timeout": 0 });
        self.add_toxic("silent-up", "timeout", Stream::Upstream, attrs.clone());
        self.add_toxic("silent-down", "timeout", Stream::Downstream, attrs);
    }

    /// Ends a [`Proxy::partition`]. Connections kept through it pass data again, but what
    /// was sent during it is gone: a request/reply connection kept through it is out of
    /// step with the server.
    pub fn heal(&self) {
        self.remove_toxic("silent-up");
        self.remove_toxic("silent-down");
    }
}
