//! The HTTP API against a real redis-server: every route, the documented status of bad
//! input (with nothing written to Redis), the token, and the error kinds.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{config, until, Env, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reliable_route_does_what_core_does() {
    let env = Env::start(config()).await;

    // Offer: text, base64, with an id; the same id again is de-duplicated (200).
    let (s, a) = env
        .call(
            "POST",
            "/v1/queues/jobs/messages",
            Some(json!({"payload": "hello", "delay_ms": 60000, "id": "a"})),
        )
        .await;
    assert_eq!(
        (s, a["id"].as_str(), a["created"].as_bool()),
        (201, Some("a"), Some(true))
    );
    let now = env.client.server_time_ms().await.unwrap();
    let due = a["due_at"].as_i64().unwrap();
    // Computed by the server before `now` was read: at most `now` + the delay.
    assert!(
        due <= now + 60000 && due > now + 59000,
        "due_at {due} vs server {now}"
    );
    let (s, again) = env
        .call(
            "POST",
            "/v1/queues/jobs/messages",
            Some(json!({"payload": "other", "id": "a"})),
        )
        .await;
    assert_eq!((s, again["created"].as_bool()), (200, Some(false)));
    assert_eq!(
        again["due_at"],
        Value::Null,
        "a de-duplicated offer has no due time"
    );
    let (s, b) = env
        .call(
            "POST",
            "/v1/queues/jobs/messages",
            Some(json!({"payload_base64": "AP8=", "delay_ms": 0})),
        )
        .await;
    assert_eq!(s, 201);
    let b_id = b["id"].as_str().unwrap().to_owned();

    // Settings and counts.
    let (s, q) = env.call("GET", "/v1/queues/jobs", None).await;
    assert_eq!(s, 200);
    assert_eq!(q["settings"]["max_attempts"], 5);
    assert_eq!(q["settings"]["visibility_timeout_ms"], 30000);
    assert_eq!(q["totals"]["offered"], 2);
    assert_eq!(
        q["counts"]["delayed"].as_u64().unwrap() + q["counts"]["ready"].as_u64().unwrap(),
        2
    );

    // Reschedule and cancel a waiting message; unknown ids are 404.
    let (s, r) = env
        .call(
            "POST",
            "/v1/queues/jobs/messages/a/reschedule",
            Some(json!({"delay_ms": 120000})),
        )
        .await;
    assert_eq!((s, r["rescheduled"].as_bool()), (200, Some(true)));
    let (s, c) = env.call("DELETE", "/v1/queues/jobs/messages/a", None).await;
    assert_eq!((s, c["cancelled"].as_bool()), (200, Some(true)));
    let (s, e) = env.call("DELETE", "/v1/queues/jobs/messages/a", None).await;
    assert_eq!((s, e["error"]["kind"].as_str()), (404, Some("not_found")));
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/jobs/messages/nope/reschedule",
            Some(json!({"delay_ms": 1})),
        )
        .await;
    assert_eq!(s, 404);

    // Receive (the base64 message), extend, nack: it comes back as attempt 2; ack it.
    let (s, got) = env
        .call(
            "POST",
            "/v1/queues/jobs/receive",
            Some(json!({"max": 10, "wait_ms": 5000})),
        )
        .await;
    assert_eq!(s, 200);
    let d = &got["deliveries"][0];
    assert_eq!(d["id"].as_str(), Some(b_id.as_str()));
    assert_eq!(d["payload_base64"], "AP8=");
    assert_eq!(d["payload"], Value::Null, "not UTF-8: no text form");
    assert_eq!(d["attempt"], 1);
    let delivery = d["delivery_id"].as_str().unwrap().to_owned();
    let deadline = d["deadline"].as_i64().unwrap();
    let (s, x) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/extend"),
            Some(json!({"duration_ms": 90000})),
        )
        .await;
    assert_eq!((s, x["extended"].as_bool()), (200, Some(true)));
    assert!(x["deadline"].as_i64().unwrap() > deadline + 50_000);
    let (s, n) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/nack"),
            Some(json!({"delay_ms": 0})),
        )
        .await;
    assert_eq!((s, n["nacked"].as_bool()), (200, Some(true)));
    let (s, _) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/ack"),
            None,
        )
        .await;
    assert_eq!(s, 404, "a settled delivery is forgotten");
    let (_, got) = env
        .call(
            "POST",
            "/v1/queues/jobs/receive",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    let d = &got["deliveries"][0];
    assert_eq!(d["attempt"], 2);
    let delivery = d["delivery_id"].as_str().unwrap().to_owned();
    let (s, _) = env
        .call(
            "POST",
            &format!("/v1/queues/other/deliveries/{delivery}/ack"),
            None,
        )
        .await;
    assert_eq!(s, 404, "a delivery is acked through its own queue");
    let (s, k) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/ack"),
            None,
        )
        .await;
    assert_eq!((s, k["acked"].as_bool()), (200, Some(true)));
    let (_, none) = env
        .call(
            "POST",
            "/v1/queues/jobs/receive",
            Some(json!({"wait_ms": 100})),
        )
        .await;
    assert_eq!(none["deliveries"], json!([]));

    // Dead letters: one attempt allowed, a nack buries it; list, requeue, purge.
    env.configure("dl", 1, vec![Duration::from_millis(10)])
        .await;
    for p in ["{\"x\":1}", "second"] {
        env.call(
            "POST",
            "/v1/queues/dl/messages",
            Some(json!({"payload": p})),
        )
        .await;
    }
    for _ in 0..2 {
        env.receive_and("dl", "nack").await;
    }
    let (s, dead) = env.call("GET", "/v1/queues/dl/dead?limit=10", None).await;
    assert_eq!(s, 200);
    let list = dead["dead_letters"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list
        .iter()
        .all(|d| d["attempts"] == 1 && d["webhook"].is_null()));
    let first = list[0]["id"].as_str().unwrap().to_owned();
    let (s, r) = env
        .call(
            "POST",
            "/v1/queues/dl/dead/requeue",
            Some(json!({"ids": [first]})),
        )
        .await;
    assert_eq!((s, r["requeued"].as_u64()), (200, Some(1)));
    let (s, p) = env.call("DELETE", "/v1/queues/dl/dead", None).await;
    assert_eq!((s, p["purged"].as_u64()), (200, Some(1)));
    let (_, q) = env.call("GET", "/v1/queues/dl", None).await;
    assert_eq!(q["counts"]["dead"], 0);
    assert_eq!(q["counts"]["ready"], 1);
    assert_eq!(q["totals"]["dead"], 2);

    // The listing has both queues.
    let (s, all) = env.call("GET", "/v1/queues", None).await;
    assert_eq!(s, 200);
    let names: Vec<&str> = all["reliable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"jobs") && names.contains(&"dl"),
        "{names:?}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_queue_routes_offer_take_and_count() {
    let env = Env::start(config()).await;
    let (s, o) = env
        .call(
            "POST",
            "/v1/delayed/orders/messages",
            Some(json!({"payload": "late", "delay_ms": 300})),
        )
        .await;
    assert_eq!(s, 201);
    let due = o["due_at"].as_i64().unwrap();
    let (s, poll) = env.call("POST", "/v1/delayed/orders/take", None).await;
    assert_eq!((s, &poll["value"]), (200, &Value::Null), "not due yet");
    let (s, info) = env.call("GET", "/v1/delayed/orders", None).await;
    assert_eq!((s, info["counts"]["delayed"].as_u64()), (200, Some(1)));
    let (s, took) = env
        .call(
            "POST",
            "/v1/delayed/orders/take",
            Some(json!({"wait_ms": 10000})),
        )
        .await;
    assert_eq!((s, took["value"]["payload"].as_str()), (200, Some("late")));
    assert!(env.client.server_time_ms().await.unwrap() >= due);
    let (_, info) = env.call("GET", "/v1/delayed/orders", None).await;
    assert_eq!(
        info["counts"],
        json!({"delayed": 0, "ready": 0, "corrupt": 0})
    );
    assert_eq!(info["totals"]["offered"], 1);
    // Redisson's reader sees the same queue: the value went through Redisson's keys.
    let (_, all) = env.call("GET", "/v1/queues", None).await;
    assert_eq!(all["delayed"][0]["name"], "orders");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_status_and_writes_nothing() {
    let env = Env::start(config()).await;
    let long_id = "x".repeat(257);
    let with_long_id = format!(r#"{{"payload":"a","id":"{long_id}"}}"#);
    let cases: Vec<(&str, String, Option<&str>, u16)> = vec![
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some("{not json"),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","delay":5}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"delay_ms":5}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","payload_base64":"YQ=="}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload_base64":"***"}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","delay_ms":-1}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","delay_ms":1e30}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","delay_ms":18446744073709551615}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","id":""}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(&with_long_id),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","callback_url":"ftp://x/y"}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":"a","callback_url":"not a url"}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages/a/reschedule".into(),
            Some(r#"{}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/messages/a/reschedule".into(),
            Some(r#"{"delay_ms":1125899906842625}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/receive".into(),
            Some(r#"{"max":0}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/receive".into(),
            Some(r#"{"max":101}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/receive".into(),
            Some(r#"{"wait_ms":30001}"#),
            400,
        ),
        ("POST", "/v1/queues/q/deliveries/zzz/ack".into(), None, 404),
        (
            "POST",
            "/v1/queues/q/deliveries/zzz/nack".into(),
            Some(r#"{"delay_ms":"soon"}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/deliveries/zzz/extend".into(),
            Some(r#"{}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/deliveries/zzz/extend".into(),
            Some(r#"{"duration_ms":1000}"#),
            404,
        ),
        ("GET", "/v1/queues/q/dead?limit=0".into(), None, 400),
        ("GET", "/v1/queues/q/dead?limit=abc".into(), None, 400),
        ("GET", "/v1/queues/q/dead?color=red".into(), None, 400),
        (
            "POST",
            "/v1/queues/q/dead/requeue".into(),
            Some(r#"{"ids":[""]}"#),
            400,
        ),
        (
            "POST",
            "/v1/queues/q/dead/requeue".into(),
            Some(r#"{"ids":"a"}"#),
            400,
        ),
        (
            "POST",
            "/v1/delayed/d/messages".into(),
            Some(r#"{"delay_ms":1}"#),
            400,
        ),
        (
            "POST",
            "/v1/delayed/d/take".into(),
            Some(r#"{"wait_ms":99999}"#),
            400,
        ),
        ("DELETE", "/v1/queues/q/messages/".into(), None, 404),
        ("GET", "/v1/nothing".into(), None, 404),
    ];
    for (method, path, body, want) in &cases {
        let (status, json) = match body {
            Some(b) => env.call_raw(method, path, b).await,
            None => env.call(method, path, None).await,
        };
        assert_eq!(status, *want, "{method} {path} {body:?}: {json}");
        if status == 400 {
            assert_eq!(
                json["error"]["kind"], "invalid_argument",
                "{method} {path}: {json}"
            );
            assert!(json["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
        }
        assert_eq!(
            env.keys(),
            Vec::<String>::new(),
            "{method} {path} wrote to Redis"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_type_is_409_and_lost_redis_is_503() {
    let mut env = Env::start(delayq_serve::Config {
        queues: vec!["clash".into()],
        ..config()
    })
    .await;
    env.redis.cli(&["SET", "{dq:clash}:ready", "a string"]);
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/clash/messages",
            Some(json!({"payload": "x"})),
        )
        .await;
    assert_eq!(
        (s, e["error"]["kind"].as_str()),
        (409, Some("wrong_type")),
        "{e}"
    );
    env.redis.cli(&["SET", "clashing", "a string"]);
    let (s, _) = env.call("POST", "/v1/delayed/clashing/take", None).await;
    assert_eq!(s, 409);

    env.redis.stop();
    let started = std::time::Instant::now();
    let (s, e) = env.call("GET", "/v1/queues/jobs", None).await;
    assert_eq!(s, 503, "{e}");
    assert!(
        matches!(e["error"]["kind"].as_str(), Some("connection" | "timeout")),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // /metrics still answers, saying the queue could not be read.
    let (s, text) = env.get_text("/metrics").await;
    assert_eq!(s, 200);
    assert!(
        text.contains("delayq_queue_up{queue=\"clash\",kind=\"reliable\"} 0"),
        "{text}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_service_is_read_only() {
    let env = Env::start(delayq_serve::Config {
        token: None,
        ..config()
    })
    .await;
    let (s, e) = env
        .call_as(
            None,
            "POST",
            "/v1/queues/q/messages",
            Some(json!({"payload": "x"})),
        )
        .await;
    assert_eq!((s, e["error"]["kind"].as_str()), (403, Some("read_only")));
    for (method, path) in [
        ("DELETE", "/v1/queues/q/messages/a"),
        ("POST", "/v1/queues/q/receive"),
        ("POST", "/v1/queues/q/dead/requeue"),
        ("DELETE", "/v1/queues/q/dead"),
        ("POST", "/v1/delayed/d/take"),
    ] {
        assert_eq!(
            env.call_as(None, method, path, None).await.0,
            403,
            "{method} {path}"
        );
    }
    let (s, info) = env.call_as(None, "GET", "/v1/server", None).await;
    assert_eq!((s, info["read_only"].as_bool()), (200, Some(true)));
    assert_eq!(env.call_as(None, "GET", "/v1/queues/q", None).await.0, 200);
    assert_eq!(env.keys(), Vec::<String>::new());
    env.stop().await;

    let open = Env::start(delayq_serve::Config {
        token: None,
        allow_unauthenticated: true,
        ..config()
    })
    .await;
    let (s, _) = open
        .call_as(
            None,
            "POST",
            "/v1/queues/q/messages",
            Some(json!({"payload": "x"})),
        )
        .await;
    assert_eq!(s, 201);
    open.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_routes_need_the_token() {
    let env = Env::start(config()).await;
    for token in [
        None,
        Some("wrong"),
        Some("test-token-12"),
        Some("test-token-1234"),
    ] {
        let (s, e) = env
            .call_as(
                token,
                "POST",
                "/v1/queues/q/messages",
                Some(json!({"payload": "x"})),
            )
            .await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (401, Some("unauthorized")),
            "{token:?}"
        );
    }
    // The token is checked before the body: a bad body without it is still 401.
    let (s, _) = env
        .call_as(
            None,
            "POST",
            "/v1/queues/q/receive",
            Some(json!({"max": 0})),
        )
        .await;
    assert_eq!(s, 401);
    assert_eq!(env.keys(), Vec::<String>::new());
    let (s, _) = env
        .call_as(
            Some(TOKEN),
            "POST",
            "/v1/queues/q/messages",
            Some(json!({"payload": "x"})),
        )
        .await;
    assert_eq!(s, 201);
    // Reading needs none.
    assert_eq!(env.call_as(None, "GET", "/v1/queues/q", None).await.0, 200);
    assert_eq!(
        env.call_as(None, "GET", "/v1/queues/q/dead", None).await.0,
        200
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_openapi_and_dashboard_are_served() {
    let env = Env::start(config()).await;
    env.call(
        "POST",
        "/v1/queues/m/messages",
        Some(json!({"payload": "x"})),
    )
    .await;
    env.receive_and("m", "ack").await;
    env.call(
        "POST",
        "/v1/delayed/dm/messages",
        Some(json!({"payload": "x", "delay_ms": 60000})),
    )
    .await;
    // The transfer task has run at least one pass by the time the message was received.
    let text = until(Duration::from_secs(10), || async {
        let (_, t) = env.get_text("/metrics").await;
        t.contains("delayq_transfer_pass_duration_seconds_count{queue=\"m\"")
            .then_some(t)
    })
    .await;
    for line in [
        "delayq_queue_messages{queue=\"m\",kind=\"reliable\",state=\"ready\"} 0",
        "delayq_queue_messages{queue=\"dm\",kind=\"delayed\",state=\"delayed\"} 1",
        "delayq_offered_total{queue=\"m\",kind=\"reliable\"} 1",
        "delayq_delivered_total{queue=\"m\",kind=\"reliable\"} 1",
        "delayq_acked_total{queue=\"m\",kind=\"reliable\"} 1",
        "delayq_nacked_total{queue=\"m\",kind=\"reliable\"} 0",
        "delayq_dead_total{queue=\"m\",kind=\"reliable\"} 0",
        "delayq_lateness_seconds_count{queue=\"m\"} 1",
        "delayq_connection_errors_total ",
        "# EOF",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }

    let (s, doc) = env.call("GET", "/openapi.json", None).await;
    assert_eq!(s, 200);
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/v1/queues",
        "/v1/queues/{name}",
        "/v1/queues/{name}/messages",
        "/v1/queues/{name}/messages/{id}",
        "/v1/queues/{name}/messages/{id}/reschedule",
        "/v1/queues/{name}/receive",
        "/v1/queues/{name}/deliveries/{delivery_id}/ack",
        "/v1/queues/{name}/deliveries/{delivery_id}/nack",
        "/v1/queues/{name}/deliveries/{delivery_id}/extend",
        "/v1/queues/{name}/dead",
        "/v1/queues/{name}/dead/requeue",
        "/v1/delayed/{name}",
        "/v1/delayed/{name}/messages",
        "/v1/delayed/{name}/take",
        "/metrics",
    ] {
        assert!(paths.contains_key(p), "{p} not in the OpenAPI document");
    }
    assert!(doc["components"]["schemas"]["OfferRequest"]["properties"]["callback_url"].is_object());

    let (s, html) = env.get_text("/").await;
    assert_eq!(s, 200);
    assert!(html.contains("/assets/app.js"));
    assert_eq!(env.get_text("/assets/app.js").await.0, 200);
    assert_eq!(env.get_text("/assets/app.css").await.0, 200);
    assert_eq!(env.get_text("/assets/other.js").await.0, 404);
    env.stop().await;
}
