//! Webhook delivery against a local test HTTP server: a 2xx acks, failures retry with the
//! queue's back-off and end in the dead letters with the last status, the signature
//! verifies, and a hanging endpoint times out without holding up other queues.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;
use support::{config, until, Env, Logs};
use tokio::sync::mpsc;

const SECRET: &str = "whsec-test";

/// A request the test endpoint received.
#[derive(Debug)]
struct Received {
    at: Instant,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

struct Endpoint {
    url: String,
    rx: mpsc::UnboundedReceiver<Received>,
}

#[derive(Clone)]
struct Hook {
    tx: mpsc::UnboundedSender<Received>,
    flaky: Arc<AtomicU32>,
}

/// `/ok` answers 204, `/fail` 500, `/flaky` 503 twice then 200, `/slow` 200 after 1.5 s,
/// `/hang` never.
async fn endpoint() -> Endpoint {
    async fn handle(
        State(hook): State<Hook>,
        Path(path): Path<String>,
        headers: HeaderMap,
        body: Bytes,
    ) -> StatusCode {
        let _ = hook.tx.send(Received {
            at: Instant::now(),
            path: path.clone(),
            headers,
            body,
        });
        match path.as_str() {
            "ok" => StatusCode::NO_CONTENT,
            "flaky" if hook.flaky.fetch_add(1, Ordering::SeqCst) >= 2 => StatusCode::OK,
            "flaky" => StatusCode::SERVICE_UNAVAILABLE,
            "hang" => std::future::pending().await,
            "slow" => {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                StatusCode::OK
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(handle))
        .with_state(Hook {
            tx,
            flaky: Default::default(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Endpoint { url, rx }
}

fn hook_config() -> delayq_serve::Config {
    delayq_serve::Config {
        webhook_secret: Some(SECRET.into()),
        webhook_timeout: Duration::from_millis(500),
        webhook_concurrency: 2,
        ..config()
    }
}

/// A service that delivers no webhooks (the API the test calls), and a second process on
/// its Redis with `second`.
async fn api_and_second_process(second: delayq_serve::Config) -> (Env, delayq_serve::Server) {
    let api = delayq_serve::Config {
        webhooks: false,
        ..hook_config()
    };
    let env = Env::start(api).await;
    let client = delayq::Client::connect(&env.redis.url()).await.unwrap();
    let server = delayq_serve::Server::start(client, second).await.unwrap();
    (env, server)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("no webhook request within 20 s")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2xx_acks_and_the_signature_verifies() {
    let env = Env::start(hook_config()).await;
    let mut hook = endpoint().await;
    let (s, offered) = env
        .call(
            "POST",
            "/v1/queues/hooks/messages",
            Some(json!({"payload": "{\"order\":42}", "delay_ms": 200, "callback_url": format!("{}/ok", hook.url)})),
        )
        .await;
    assert_eq!(s, 201, "{offered}");
    let id = offered["id"].as_str().unwrap().to_owned();
    let got = next(&mut hook.rx).await;
    assert_eq!(got.path, "ok");
    assert_eq!(
        &got.body[..],
        b"{\"order\":42}",
        "the payload as it was offered, no envelope"
    );
    let h = |name: &str| got.headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(h("content-type"), "application/json");
    assert_eq!(h("x-delayq-id"), id);
    assert_eq!(h("x-delayq-queue"), "hooks");
    assert_eq!(h("x-delayq-attempt"), "1");
    let ts: u64 = h(delayq_serve::TIMESTAMP_HEADER).parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(ts.abs_diff(now) < 60);
    // What a receiver does: recompute the HMAC over the headers and body with the secret
    // (the documented recipes: `the_documented_recipes_verify_a_request`).
    let expected = format!(
        "v2={}",
        delayq_serve::sign(SECRET.as_bytes(), ts, &id, "hooks", 1, &got.body)
    );
    assert_eq!(h(delayq_serve::SIGNATURE_HEADER), expected);
    assert_ne!(
        delayq_serve::sign(b"another secret", ts, &id, "hooks", 1, &got.body),
        expected[3..],
        "another key gives another signature"
    );
    // Acked: nothing left in the queue, and its webhook record is gone.
    until(Duration::from_secs(10), || async {
        let (_, q) = env.call("GET", "/v1/queues/hooks", None).await;
        (q["counts"] == json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0})
            && q["totals"]["acked"] == 1)
            .then_some(())
    })
    .await;
    until(Duration::from_secs(5), || async {
        (env.redis.cli(&["HLEN", "{dq:hooks}:webhook"]) == "0").then_some(())
    })
    .await;
    assert!(hook.rx.try_recv().is_err(), "delivered once");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_with_the_back_off_then_dead_letter_with_the_last_status() {
    let env = Env::start(hook_config()).await;
    env.configure(
        "retry",
        3,
        vec![Duration::from_millis(300), Duration::from_millis(900)],
    )
    .await;
    env.configure("flaky", 5, vec![Duration::from_millis(100)])
        .await;
    let mut hook = endpoint().await;
    let (s, _) = env
        .call("POST", "/v1/queues/retry/messages", Some(json!({"payload": "p", "id": "job-1", "callback_url": format!("{}/fail", hook.url)})))
        .await;
    assert_eq!(s, 201);
    let attempts: Vec<Received> = vec![
        next(&mut hook.rx).await,
        next(&mut hook.rx).await,
        next(&mut hook.rx).await,
    ];
    for (i, r) in attempts.iter().enumerate() {
        assert_eq!(r.headers["x-delayq-attempt"], (i + 1).to_string().as_str());
    }
    let gaps = [
        attempts[1].at - attempts[0].at,
        attempts[2].at - attempts[1].at,
    ];
    assert!(
        gaps[0] >= Duration::from_millis(250),
        "first retry after the 300 ms back-off: {gaps:?}"
    );
    assert!(
        gaps[1] >= Duration::from_millis(850),
        "second after 900 ms: {gaps:?}"
    );
    let dead = until(Duration::from_secs(10), || async {
        let (_, d) = env.call("GET", "/v1/queues/retry/dead", None).await;
        (d["dead_letters"].as_array().unwrap().len() == 1).then(|| d["dead_letters"][0].clone())
    })
    .await;
    assert_eq!(dead["id"], "job-1");
    assert_eq!(dead["attempts"], 3);
    assert_eq!(dead["webhook"]["last_status"], 500);
    assert_eq!(dead["webhook"]["attempts"], 3);
    assert_eq!(
        dead["webhook"]["last_error"],
        "HTTP 500 Internal Server Error"
    );
    assert!(dead["webhook"]["url"].as_str().unwrap().ends_with("/fail"));
    let (_, q) = env.call("GET", "/v1/queues/retry", None).await;
    assert_eq!(q["totals"]["nacked"], 2);
    assert_eq!(q["totals"]["dead"], 1);

    // Requeued, it is delivered again (its record kept its URL); purged, the record goes.
    env.call("POST", "/v1/queues/retry/dead/requeue", Some(json!({})))
        .await;
    assert_eq!(next(&mut hook.rx).await.headers["x-delayq-attempt"], "1");
    until(Duration::from_secs(20), || async {
        let (_, d) = env.call("GET", "/v1/queues/retry/dead", None).await;
        (d["dead_letters"].as_array().unwrap().len() == 1).then_some(())
    })
    .await;
    env.call("DELETE", "/v1/queues/retry/dead", None).await;
    assert_eq!(env.redis.cli(&["HLEN", "{dq:retry}:webhook"]), "0");

    // An endpoint that fails twice, then answers 200: acked on the third attempt.
    env.call(
        "POST",
        "/v1/queues/flaky/messages",
        Some(json!({"payload": "f", "callback_url": format!("{}/flaky", hook.url)})),
    )
    .await;
    until(Duration::from_secs(20), || async {
        let (_, q) = env.call("GET", "/v1/queues/flaky", None).await;
        (q["totals"]["acked"] == 1).then_some(())
    })
    .await;
    let (_, q) = env.call("GET", "/v1/queues/flaky", None).await;
    assert_eq!(q["totals"]["nacked"], 2);
    assert_eq!(q["counts"]["dead"], 0);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_endpoint_times_out_and_other_queues_go_on() {
    // The slow queue gets one worker (the others two): all of it is held by the hang.
    let env = Env::start(delayq_serve::Config {
        webhook_concurrency_of: [("slow".to_owned(), 1)].into(),
        ..hook_config()
    })
    .await;
    env.configure("slow", 2, vec![Duration::from_millis(100)])
        .await;
    let mut hook = endpoint().await;
    for i in 0..3 {
        env.call(
            "POST",
            "/v1/queues/slow/messages",
            Some(json!({"payload": format!("s{i}"), "callback_url": format!("{}/hang", hook.url)})),
        )
        .await;
    }
    let first = next(&mut hook.rx).await;
    assert_eq!(first.path, "hang");
    // While the slow queue's only worker waits on the hanging endpoint, another queue's
    // message is delivered at once.
    let offered = Instant::now();
    env.call(
        "POST",
        "/v1/queues/fast/messages",
        Some(json!({"payload": "f", "callback_url": format!("{}/ok", hook.url)})),
    )
    .await;
    let fast = loop {
        let r = next(&mut hook.rx).await;
        if r.path == "ok" {
            break r;
        }
    };
    assert!(
        fast.at - offered < Duration::from_millis(2000),
        "fast queue waited {:?}",
        fast.at - offered
    );
    // The hanging attempts fail after the 500 ms timeout, recorded as such.
    let dead = until(Duration::from_secs(30), || async {
        let (_, d) = env.call("GET", "/v1/queues/slow/dead", None).await;
        (d["dead_letters"].as_array().unwrap().len() == 3).then(|| d["dead_letters"].clone())
    })
    .await;
    for d in dead.as_array().unwrap() {
        assert_eq!(d["webhook"]["last_error"], "no answer within 500 ms");
        assert!(d["webhook"]["last_status"].is_null());
        assert_eq!(d["attempts"], 2);
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_is_a_failed_attempt_and_a_message_without_a_record_dies() {
    let env = Env::start(hook_config()).await;
    env.configure("gone", 1, vec![Duration::from_millis(10)])
        .await;
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.call("POST", "/v1/queues/gone/messages", Some(json!({"payload": "x", "id": "to-nowhere", "callback_url": format!("http://127.0.0.1:{port}/x")})))
        .await;
    // A message offered to the webhook queue by a library, without a callback.
    let q = env
        .client
        .reliable_queue("gone", Default::default())
        .unwrap();
    q.offer("plain", Duration::ZERO, Some("no-record"))
        .await
        .unwrap();
    let dead = until(Duration::from_secs(20), || async {
        let (_, d) = env.call("GET", "/v1/queues/gone/dead", None).await;
        let list = d["dead_letters"].as_array().unwrap().clone();
        (list.len() == 2).then_some(list)
    })
    .await;
    let by_id = |id: &str| dead.iter().find(|d| d["id"] == id).unwrap().clone();
    let err = by_id("to-nowhere")["webhook"]["last_error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        err.contains("connect") || err.contains("Connection refused"),
        "{err}"
    );
    assert!(
        !err.contains(&port.to_string()),
        "no URL in the error: {err}"
    );
    assert_eq!(
        by_id("no-record")["webhook"]["last_error"],
        "no callback_url recorded for this message"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_urls_are_shown_without_their_credentials() {
    let env = Env::start(hook_config()).await;
    env.configure("secret-hooks", 1, vec![Duration::from_millis(10)])
        .await;
    // A port nobody listens on: the one attempt fails, and the message is a dead letter.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://user:PW-s3cret@127.0.0.1:{port}/path?api_key=KEY-s3cret&v=2");
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/secret-hooks/messages",
            Some(json!({"payload": "x", "id": "w", "callback_url": url})),
        )
        .await;
    assert_eq!(s, 201);
    let text = until(Duration::from_secs(20), || async {
        let (_, t) = env.get_text("/v1/queues/secret-hooks/dead").await;
        t.contains("\"id\":\"w\"").then_some(t)
    })
    .await;
    assert!(!text.contains("s3cret"), "{text}");
    let dead: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        dead["dead_letters"][0]["webhook"]["url"],
        format!("http://***:***@127.0.0.1:{port}/path?api_key=***&v=***")
    );
    // The record keeps the URL itself: a requeue delivers to it.
    let stored = env.redis.cli(&["HGET", "{dq:secret-hooks}:webhook", "w"]);
    assert!(
        stored.contains("PW-s3cret") && stored.contains("KEY-s3cret"),
        "{stored}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_says_whether_webhook_signatures_can_be_verified() {
    let signed = Env::start(hook_config()).await;
    let (_, info) = signed.call_as(None, "GET", "/v1/server", None).await;
    assert_eq!(info["webhook_signing"], true, "{info}");
    signed.stop().await;
    let random = Env::start(delayq_serve::Config {
        webhook_secret: None,
        ..hook_config()
    })
    .await;
    let (_, info) = random.call_as(None, "GET", "/v1/server", None).await;
    assert_eq!(info["webhook_signing"], false, "{info}");
    assert_eq!(info["webhooks"], true, "{info}");
    random.stop().await;
}

/// Without `DELAYQ_WEBHOOK_SECRET` every request is signed all the same, with a random key
/// of the process (a new one for each server), and a warning at startup says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_requests_are_signed_with_a_random_key() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    // The server starts on this thread (the test's `block_on`), so it logs here.
    let guard = tracing::subscriber::set_default(subscriber);
    let env = Env::start(delayq_serve::Config {
        webhook_secret: None,
        ..hook_config()
    })
    .await;
    drop(guard);
    let log = logs.text();
    assert!(
        log.contains("WARN")
            && log.contains("DELAYQ_WEBHOOK_SECRET is not set")
            && log.contains("random key generated for this process")
            && log.contains("set DELAYQ_WEBHOOK_SECRET for receivers to verify them"),
        "{log}"
    );
    let mut hook = endpoint().await;
    let mut signatures = Vec::new();
    for body in ["same body", "same body"] {
        // The same id both times (the first is acked before the second is offered).
        let (s, _) = env
            .call(
                "POST",
                "/v1/queues/randkey/messages",
                Some(json!({"payload": body, "id": "same", "callback_url": format!("{}/ok", hook.url)})),
            )
            .await;
        assert_eq!(s, 201);
        let got = next(&mut hook.rx).await;
        let h = |name: &str| {
            got.headers
                .get(name)
                .unwrap_or_else(|| panic!("no {name} header"))
                .to_str()
                .unwrap()
                .to_owned()
        };
        let signature = h(delayq_serve::SIGNATURE_HEADER);
        let hex = signature.strip_prefix("v2=").expect("v2=<hex>");
        assert!(
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{signature}"
        );
        let ts: u64 = h(delayq_serve::TIMESTAMP_HEADER).parse().unwrap();
        for guess in [&b""[..], SECRET.as_bytes(), &[0u8; 32][..]] {
            assert_ne!(
                delayq_serve::sign(guess, ts, "same", "randkey", 1, &got.body),
                hex
            );
        }
        signatures.push((ts, hex.to_owned()));
        // Acked (its record deleted after the ack) before the id is offered again.
        until(Duration::from_secs(10), || async {
            (env.redis.cli(&["HLEN", "{dq:randkey}:webhook"]) == "0").then_some(())
        })
        .await;
    }
    // One key for the process: the same request at the same second gets the same signature.
    if signatures[0].0 == signatures[1].0 {
        assert_eq!(signatures[0].1, signatures[1].1);
    }
    env.stop().await;
}

/// A webhook request carries the message's id and its queue's name in headers: an id or a
/// name that no header can hold as it is (a control character; a space at either end,
/// which the receiver's parser trims, so that its signature would not verify) could never
/// be delivered. Such an offer is refused with nothing stored; without `callback_url` the
/// same id is a message like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_and_names_no_header_can_hold_are_refused_for_webhooks() {
    let env = Env::start(hook_config()).await;
    let url = "http://127.0.0.1:9/";
    for (queue, id) in [
        ("hq", "nl\nid"),
        ("hq", "ctl\u{1}id"),
        ("hq", "del\u{7f}"),
        ("hq", "tab\tid"),
        ("hq", " lead"),
        ("hq", "trail "),
        ("nl%0Aq", "fine"),
        ("%20lead", "fine"),
    ] {
        let body = json!({"payload": "a", "id": id, "callback_url": url});
        let (s, e) = env
            .call("POST", &format!("/v1/queues/{queue}/messages"), Some(body))
            .await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (400, Some("invalid_argument")),
            "{queue} {id:?}: {e}"
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains("header"),
            "{e}"
        );
        assert_eq!(env.keys(), Vec::<String>::new(), "{queue} {id:?}");
    }
    let (s, o) = env
        .call(
            "POST",
            "/v1/queues/hq/messages",
            Some(json!({"payload": "a", "id": "nl\nid"})),
        )
        .await;
    assert_eq!((s, o["created"].as_bool()), (201, Some(true)), "{o}");
    env.stop().await;
}

/// A webhook queue whose number of shards changes through `PUT .../settings` keeps being
/// delivered: its workers start again with a handle on the new layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_go_on_after_the_shards_change() {
    let env = Env::start(hook_config()).await;
    let mut hook = endpoint().await;
    let offer = |id: &'static str| {
        let env = &env;
        let url = format!("{}/ok", hook.url);
        async move {
            let (s, o) = env
                .call(
                    "POST",
                    "/v1/queues/wsh/messages",
                    Some(json!({"payload": id, "id": id, "callback_url": url})),
                )
                .await;
            assert_eq!(s, 201, "{o}");
        }
    };
    offer("before").await;
    assert_eq!(&next(&mut hook.rx).await.body[..], b"before");
    until(Duration::from_secs(10), || async {
        let (_, q) = env.call("GET", "/v1/queues/wsh", None).await;
        (q["counts"]["in_flight"] == 0 && q["totals"]["acked"] == 1).then_some(())
    })
    .await;
    let (s, stored) = env
        .call("PUT", "/v1/queues/wsh/settings", Some(json!({"shards": 2})))
        .await;
    assert_eq!((s, &stored["shards"]), (200, &json!(2)), "{stored}");
    let ids = ["a1", "a2", "a3", "a4"];
    for id in ids {
        offer(id).await;
    }
    let mut got: Vec<String> = Vec::new();
    for _ in ids {
        got.push(String::from_utf8_lossy(&next(&mut hook.rx).await.body).into_owned());
    }
    got.sort();
    assert_eq!(got, ids);
    env.stop().await;
}

/// An endpoint slower than the queue's visibility timeout (1.5 s against 0.5 s): the lease
/// is kept while it answers, so the message is POSTed once, acked, and its record goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_slower_than_the_lease_gets_the_message_once() {
    let env = Env::start(delayq_serve::Config {
        webhook_timeout: Duration::from_secs(5),
        ..hook_config()
    })
    .await;
    let opts = delayq::ReliableQueueOptions {
        visibility_timeout: Some(Duration::from_millis(500)),
        max_attempts: Some(3),
        ..Default::default()
    };
    env.configure_with("slow", opts).await;
    let mut hook = endpoint().await;
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/slow/messages",
            Some(json!({"payload": "p", "callback_url": format!("{}/slow", hook.url)})),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(next(&mut hook.rx).await.path, "slow");
    until(Duration::from_secs(15), || async {
        let (_, q) = env.call("GET", "/v1/queues/slow", None).await;
        (q["totals"]["acked"] == 1).then_some(())
    })
    .await;
    let (_, info) = env.call("GET", "/v1/queues/slow", None).await;
    assert_eq!(
        info["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0}),
        "{info}"
    );
    assert!(hook.rx.try_recv().is_err(), "POSTed once");
    assert_eq!(env.redis.cli(&["HLEN", "{dq:slow}:webhook"]), "0");
    env.stop().await;
}

/// An offer with a callback URL that fails (a key of the queue holds another type) leaves
/// no record and registers no queue (whose workers would fail on that key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_offer_leaves_no_webhook_record() {
    let env = Env::start(hook_config()).await;
    env.redis.cli(&["SET", "{dq:wt}:ready", "a string"]);
    let before = env.keys();
    let hook = endpoint().await;
    for id in [json!("a"), json!(null)] {
        let (s, e) = env
            .call(
                "POST",
                "/v1/queues/wt/messages",
                Some(json!({"payload": "x", "id": id, "callback_url": format!("{}/ok", hook.url)})),
            )
            .await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (409, Some("wrong_type")),
            "{e}"
        );
        assert_eq!(env.keys(), before, "nothing written");
    }
    env.stop().await;
}

/// The code block of `docs/serve.md` that starts with ```` ```{lang} ```` in the webhooks'
/// "Verifying a request".
fn documented(lang: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/serve.md")).unwrap();
    let section = &doc[doc.find("Verifying a request").expect("the recipes")..];
    let start = section.find(&format!("```{lang}\n")).expect("the block") + lang.len() + 4;
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_owned()
}

/// A request the service sent verifies by the recipes of docs/serve.md, run as they are
/// written (Python, openssl), and fails with any signed part changed: another id (which
/// would pass a receiver's de-duplication), queue, attempt, timestamp or body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_recipes_verify_a_request_and_refuse_a_tampered_one() {
    let env = Env::start(hook_config()).await;
    let mut hook = endpoint().await;
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/signed/messages",
            Some(json!({"payload": "{\"order\":42}", "id": "order.42", "callback_url": format!("{}/ok", hook.url)})),
        )
        .await;
    assert_eq!(s, 201, "{e}");
    let got = next(&mut hook.rx).await;
    let headers: serde_json::Map<String, serde_json::Value> = got
        .headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-delayq-"))
        .map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap())))
        .collect();
    assert_eq!(headers.len(), 5, "{headers:?}");
    assert_eq!(headers["x-delayq-id"], "order.42");
    let body = String::from_utf8(got.body.to_vec()).unwrap();
    // The request as sent, then each signed part changed.
    let mut variants = vec![(json!(headers), body.clone())];
    for (name, value) in [
        ("x-delayq-id", "order.43"),
        ("x-delayq-queue", "other"),
        ("x-delayq-attempt", "2"),
    ] {
        let mut h = headers.clone();
        h.insert(name.into(), json!(value));
        variants.push((json!(h), body.clone()));
    }
    // An id and queue split at another dot.
    let mut h = headers.clone();
    h.insert("x-delayq-id".into(), json!("order"));
    h.insert("x-delayq-queue".into(), json!("42.signed"));
    variants.push((json!(h), body.clone()));
    let ts: u64 = headers["x-delayq-timestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut h = headers.clone();
    h.insert("x-delayq-timestamp".into(), json!((ts - 1).to_string()));
    variants.push((json!(h), body.clone()));
    variants.push((json!(headers), body.replace("42", "43")));

    // Python: the documented `verify`, on every variant.
    let harness = format!(
        "{}\nimport json, sys\nsecret, variants = json.load(sys.stdin)\n\
         print(json.dumps([verify(secret.encode(), h, b.encode()) for h, b in variants]))\n",
        documented("python")
    );
    let input = serde_json::to_vec(&json!([SECRET, variants])).unwrap();
    let mut python = std::process::Command::new("python3")
        .arg("-c")
        .arg(&harness)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    python.stdin.take().unwrap().write_all(&input).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(out.status.success());
    let verdicts: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap();
    let mut expected = vec![false; variants.len()];
    expected[0] = true;
    assert_eq!(verdicts, expected, "the request as sent, then tampered");

    // openssl: the documented line, with the request's values; its hex is the signature.
    let line = documented("sh")
        .lines()
        .find(|l| l.contains("openssl dgst"))
        .unwrap()
        .to_owned();
    let signature = headers["x-delayq-signature"].as_str().unwrap();
    for (i, (h, b)) in variants.iter().enumerate() {
        let value = |name: &str| h[name].as_str().unwrap().to_owned();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .env("TS", value("x-delayq-timestamp"))
            .env("ID", value("x-delayq-id"))
            .env("QUEUE", value("x-delayq-queue"))
            .env("ATTEMPT", value("x-delayq-attempt"))
            .env("BODY", b)
            .env("DELAYQ_WEBHOOK_SECRET", SECRET)
            .output()
            .expect("sh and openssl");
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let hex = text.trim().rsplit("= ").next().unwrap();
        assert_eq!(
            signature == format!("v2={hex}"),
            i == 0,
            "variant {i}: {text} against {signature}"
        );
    }
    env.stop().await;
}

/// `SISMEMBER delayq:webhook-queues NAME`.
fn is_webhook_queue(env: &Env, name: &str) -> bool {
    env.redis
        .cli(&["SISMEMBER", "delayq:webhook-queues", name])
        .trim()
        == "1"
}

/// A queue's messages all go to webhooks or all to receive: an offer that would mix them,
/// and a receive on a webhook queue, are 409 `conflict` with nothing changed; a webhook
/// queue that holds nothing becomes a plain one again at an offer without a callback, and
/// a plain one that holds nothing a webhook queue at an offer with one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_a_webhook_queue_or_a_plain_one_never_both() {
    let env = Env::start(hook_config()).await;
    let mut hook = endpoint().await;
    let callback = format!("{}/ok", hook.url);
    let conflict = |s: u16, e: &serde_json::Value, says: &str| {
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (409, Some("conflict")),
            "{e}"
        );
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    };
    // A plain queue that holds a message takes no message with a callback.
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/plain/messages",
            Some(json!({"payload": "p", "delay_ms": 60000})),
        )
        .await;
    assert_eq!(s, 201);
    let before = (
        env.keys(),
        env.redis.cli(&["HGETALL", "{dq:plain}:webhook"]),
    );
    for id in [json!("w"), json!(null)] {
        let (s, e) = env
            .call(
                "POST",
                "/v1/queues/plain/messages",
                Some(json!({"payload": "w", "id": id, "callback_url": callback})),
            )
            .await;
        conflict(s, &e, "is not a webhook queue and holds 1 message(s)");
    }
    assert_eq!(
        (
            env.keys(),
            env.redis.cli(&["HGETALL", "{dq:plain}:webhook"])
        ),
        before,
        "nothing written"
    );
    assert!(!is_webhook_queue(&env, "plain"));

    // A webhook queue that holds a message takes none without a callback, and no receive.
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/hooked/messages",
            Some(json!({"payload": "w1", "id": "w1", "delay_ms": 60000, "callback_url": callback})),
        )
        .await;
    assert_eq!(s, 201);
    assert!(is_webhook_queue(&env, "hooked"));
    let before = env.call("GET", "/v1/queues/hooked", None).await.1["counts"].clone();
    let keys = env.keys();
    for id in [json!("p1"), json!("w1"), json!(null)] {
        let (s, e) = env
            .call(
                "POST",
                "/v1/queues/hooked/messages",
                Some(json!({"payload": "p", "id": id})),
            )
            .await;
        conflict(s, &e, "is a webhook queue");
    }
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/hooked/receive",
            Some(json!({"wait_ms": 100})),
        )
        .await;
    conflict(s, &e, "not handed out by receive");
    assert_eq!(
        env.call("GET", "/v1/queues/hooked", None).await.1["counts"],
        before
    );
    assert_eq!(env.keys(), keys, "nothing written");
    assert!(is_webhook_queue(&env, "hooked"));

    // Emptied, it becomes a plain queue at the next offer without a callback: receive
    // hands that message out, and no webhook worker took it.
    let (s, _) = env
        .call("DELETE", "/v1/queues/hooked/messages/w1", None)
        .await;
    assert_eq!(s, 200);
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/hooked/messages",
            Some(json!({"payload": "plain now", "id": "p2"})),
        )
        .await;
    assert_eq!(s, 201, "{e}");
    assert!(!is_webhook_queue(&env, "hooked"));
    let d = env.receive_and("hooked", "ack").await;
    assert_eq!(
        (d["id"].as_str(), d["attempt"].as_u64()),
        (Some("p2"), Some(1))
    );
    // Empty again: an offer with a callback makes it a webhook queue, delivered at once.
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/hooked/messages",
            Some(json!({"payload": "hook again", "callback_url": callback})),
        )
        .await;
    assert_eq!(s, 201, "{e}");
    let got = next(&mut hook.rx).await;
    assert_eq!(
        &got.body[..],
        b"hook again",
        "only the webhook message was POSTed"
    );
    env.stop().await;
}

/// A webhook queue emptied and offered a message without a callback through one service
/// process stops being one for every process: the webhook workers another process still
/// runs give that message back untouched (not counted as an attempt) and stop, so a
/// receive gets it on its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_s_webhook_workers_leave_a_queue_that_is_no_webhook_queue_any_more() {
    // The API's process delivers no webhooks; a second one on the same Redis does.
    let (env, workers) = api_and_second_process(hook_config()).await;
    let mut hook = endpoint().await;
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/turned/messages",
            Some(json!({"payload": "w", "callback_url": format!("{}/ok", hook.url)})),
        )
        .await;
    assert_eq!(s, 201);
    // Delivered by the other process: its workers run for the queue.
    next(&mut hook.rx).await;
    until(Duration::from_secs(10), || async {
        let (_, q) = env.call("GET", "/v1/queues/turned", None).await;
        (q["counts"] == json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0})).then_some(())
    })
    .await;
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/turned/messages",
            Some(json!({"payload": "plain", "id": "p"})),
        )
        .await;
    assert_eq!(s, 201, "{e}");
    let d = env.receive_and("turned", "ack").await;
    assert_eq!(
        (d["id"].as_str(), d["attempt"].as_u64()),
        (Some("p"), Some(1)),
        "{d}"
    );
    assert!(hook.rx.try_recv().is_err(), "not POSTed");
    workers.stop().await.unwrap();
    env.stop().await;
}

/// A read-only service (no token) changes no queue: it delivers no webhooks, even with
/// webhooks on and a secret, while another process offers webhook messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_service_delivers_no_webhooks() {
    // The API's process delivers no webhooks; a read-only one on the same Redis would.
    let read_only = delayq_serve::Config {
        token: None,
        ..hook_config()
    };
    let (env, read_only) = api_and_second_process(read_only).await;
    let info = reqwest::get(format!("http://{}/v1/server", read_only.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        (info["read_only"].as_bool(), info["webhooks"].as_bool()),
        (Some(true), Some(false)),
        "{info}"
    );
    let mut hook = endpoint().await;
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/watched/messages",
            Some(json!({"payload": "w", "callback_url": format!("{}/ok", hook.url)})),
        )
        .await;
    assert_eq!(s, 201);
    // Nothing to await: the read-only process looks for webhook queues every 5 s, so past
    // one look it would have POSTed the message.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(hook.rx.try_recv().is_err(), "a read-only service POSTed");
    let (_, q) = env.call("GET", "/v1/queues/watched", None).await;
    assert_eq!(q["counts"]["ready"], 1, "{q}");
    read_only.stop().await.unwrap();
    env.stop().await;
}
