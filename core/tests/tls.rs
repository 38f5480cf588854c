//! `rediss://` against a redis-server with TLS on, using a certificate made for the test.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn rediss_urls_connect_over_tls() {
    let dir = std::env::temp_dir().join(format!("delayq-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-keyout", dir.join("key.pem").to_str().unwrap()])
        .args(["-out", dir.join("cert.pem").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(made, Ok(s) if s.success()) {
        eprintln!("openssl is not available; skipping the TLS test");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--tls-cert-file", dir.join("cert.pem").to_str().unwrap()])
        .args(["--tls-key-file", dir.join("key.pem").to_str().unwrap()])
        .args(["--tls-auth-clients", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    // The test's certificate is self-signed: `#insecure` skips verification (redis-rs).
    let url = format!("rediss://127.0.0.1:{port}/#insecure");
    let mut client = None;
    for _ in 0..50 {
        match delayq::Client::connect(&url).await {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let client = client.expect("TLS connection");
    let q = client.delayed_queue("tls").unwrap();
    q.offer("secure", Duration::ZERO).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"secure"[..]));
    client.close();
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
