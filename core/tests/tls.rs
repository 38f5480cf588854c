//! `rediss://` against a redis-server that speaks only TLS, with a CA, a server certificate
//! and a client certificate the test makes itself with `openssl` (see `common::TestCerts`).
//! Mutual TLS as production runs it: the client trusts only the private CA and shows its
//! own certificate; the server (`--tls-auth-clients yes`) requires one.

mod common;

use std::time::Duration;

use common::TlsRedisServer;
use delayq::{Client, ClientOptions, ErrorKind, TlsOptions};

fn mutual_tls(server: &TlsRedisServer) -> ClientOptions {
    let mut opts = ClientOptions::new(server.url());
    opts.tls = TlsOptions {
        ca_file: Some(server.certs.path("ca.crt")),
        client_cert_file: Some(server.certs.path("client.crt")),
        client_key_file: Some(server.certs.path("client.key")),
    };
    opts
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_with_a_private_ca_carries_a_delayed_queue() {
    let server = TlsRedisServer::start(true);
    let client = Client::connect_with(mutual_tls(&server)).await.unwrap();
    let q = client.delayed_queue("tls").unwrap();
    q.offer("secure", Duration::from_millis(200)).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"secure"[..]));
    // The blocking wait and the subscriber use TLS connections of their own too.
    q.offer("again", Duration::ZERO).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"again"[..]));
    assert_eq!(server.cli(&["LLEN", "tls"]), "0");
    client.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_carries_a_reliable_queue() {
    let server = TlsRedisServer::start(true);
    let client = Client::connect_with(mutual_tls(&server)).await.unwrap();
    let q = client
        .reliable_queue("tls-reliable", Default::default())
        .unwrap();
    let id = q.offer("job", Duration::ZERO, None).await.unwrap();
    let d = q
        .receive(Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("a delivery");
    assert_eq!(d.id, id);
    assert!(d.ack().await.unwrap());
    client.close();
}

/// A server certificate from a CA the client does not trust: refused at the handshake,
/// at once (not after the connect timeout), as a `connection` error that says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_certificate_from_another_ca_is_refused() {
    let server = TlsRedisServer::start(true);
    let mut opts = mutual_tls(&server);
    opts.tls.ca_file = Some(server.certs.path("other-ca.crt"));
    let started = std::time::Instant::now();
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("certificate") && msg.contains("UnknownIssuer"),
        "the error says the server's certificate is not trusted: {msg}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused at once"
    );
    // Without a CA file the system's roots are used: they do not trust the test CA either.
    let mut opts = mutual_tls(&server);
    opts.tls.ca_file = None;
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
}

/// `--tls-auth-clients yes` and no client certificate: the server ends the handshake; the
/// connect fails with a `connection` error.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_a_certificate_is_refused_when_the_server_requires_one() {
    let server = TlsRedisServer::start(true);
    let mut opts = mutual_tls(&server);
    opts.tls.client_cert_file = None;
    opts.tls.client_key_file = None;
    let started = std::time::Instant::now();
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    // TLS 1.3 (OpenSSL 3): "received fatal alert: CertificateRequired".
    let msg = err.to_string();
    assert!(
        msg.contains("CertificateRequired") || msg.contains("HandshakeFailure"),
        "the error says the server wants a client certificate: {msg}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused at once"
    );
    // The same server takes the client with its certificate.
    let client = Client::connect_with(mutual_tls(&server)).await.unwrap();
    client.server_time_ms().await.unwrap();
    client.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_or_incomplete_certificate_options_are_invalid_arguments() {
    let server = TlsRedisServer::start(false);
    let mut opts = mutual_tls(&server);
    opts.tls.ca_file = Some(server.certs.path("no-such-ca.crt"));
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("no-such-ca.crt"), "{err}");
    let mut opts = mutual_tls(&server);
    opts.tls.client_key_file = None;
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // The private key never shows up in an error, even when it is the wrong file.
    let mut opts = mutual_tls(&server);
    opts.tls.client_key_file = Some(server.certs.path("client.crt"));
    if let Err(err) = Client::connect_with(opts).await {
        let key = std::fs::read_to_string(server.certs.path("client.key")).unwrap();
        let body = key.lines().nth(1).unwrap();
        assert!(!err.to_string().contains(body), "{err}");
    }
}

/// Without `--tls-auth-clients`, a CA file alone is enough (one-way TLS); `#insecure`
/// (redis-rs) skips verification altogether, for tests only.
#[tokio::test(flavor = "multi_thread")]
async fn one_way_tls_with_a_ca_file_and_insecure_urls() {
    let server = TlsRedisServer::start(false);
    let mut opts = ClientOptions::new(server.url());
    opts.tls.ca_file = Some(server.certs.path("ca.crt"));
    let client = Client::connect_with(opts).await.unwrap();
    let q = client.delayed_queue("one-way").unwrap();
    q.offer("x", Duration::ZERO).await.unwrap();
    let got = q.take(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"x"[..]));
    client.close();

    let client = Client::connect(&format!("{}/#insecure", server.url()))
        .await
        .unwrap();
    client.server_time_ms().await.unwrap();
    client.close();
}

/// Certificate options with a plain `redis://` URL are refused before connecting: read and
/// dropped, they would leave in plain text a connection its caller believes encrypted.
#[tokio::test(flavor = "multi_thread")]
async fn certificate_options_with_a_plain_text_url_are_refused() {
    let plain = common::RedisServer::start();
    let tls = TlsRedisServer::start(false);
    let connections = || {
        let stats = plain.cli(&["INFO", "stats"]);
        let line = stats
            .lines()
            .find(|l| l.starts_with("total_connections_received:"))
            .unwrap()
            .to_owned();
        line
    };
    let before = connections();
    let mut opts = ClientOptions::new(plain.url());
    opts.tls.ca_file = Some(tls.certs.path("ca.crt"));
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("rediss://"), "{err}");
    // Cluster seeds: every one must be rediss://.
    let mut opts = ClientOptions::cluster(vec![tls.url(), plain.url()]);
    opts.tls.ca_file = Some(tls.certs.path("ca.crt"));
    let err = Client::connect_with(opts).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // One more connection: the INFO of `connections` itself.
    let after = connections();
    let count = |l: &str| l.rsplit(':').next().unwrap().trim().parse::<u64>().unwrap();
    assert_eq!(
        count(&after),
        count(&before) + 1,
        "no connection from the client"
    );
}
