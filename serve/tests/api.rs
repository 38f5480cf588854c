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
    // A retried nack (its answer lost) gets the first one's answer; an ack after it finds
    // no lease.
    let (s, n) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/nack"),
            Some(json!({"delay_ms": 0})),
        )
        .await;
    assert_eq!((s, n["nacked"].as_bool()), (200, Some(true)));
    let (s, k) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/ack"),
            None,
        )
        .await;
    assert_eq!((s, k["acked"].as_bool()), (200, Some(false)));
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
    // A retried ack (its answer lost) is answered as the first was, by delivery_id or by
    // message id, and touches nothing; an acked delivery has no lease to extend.
    for key in [delivery.as_str(), b_id.as_str()] {
        let (s, k) = env
            .call(
                "POST",
                &format!("/v1/queues/jobs/deliveries/{key}/ack"),
                None,
            )
            .await;
        assert_eq!((s, k["acked"].as_bool()), (200, Some(true)), "{key}");
    }
    let (s, x) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/extend"),
            Some(json!({"duration_ms": 90000})),
        )
        .await;
    assert_eq!((s, x["extended"].as_bool()), (200, Some(false)));
    let (s, n) = env
        .call(
            "POST",
            &format!("/v1/queues/jobs/deliveries/{delivery}/nack"),
            None,
        )
        .await;
    assert_eq!((s, n["nacked"].as_bool()), (200, Some(false)));
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
async fn a_json_value_as_payload_is_stored_as_its_json_text() {
    let env = Env::start(config()).await;
    // As written, less the whitespace between tokens: key order, repeated keys and the
    // digits of numbers are kept (a receiver may hash or sign the bytes).
    let sent = [
        (
            r#"{"zeta": 1, "alpha": {"y": 2, "x": 3}, "items": ["a"]}"#,
            r#"{"zeta":1,"alpha":{"y":2,"x":3},"items":["a"]}"#,
        ),
        (
            "[1.10, 1e2, -0.0,\n 18446744073709551617123]",
            "[1.10,1e2,-0.0,18446744073709551617123]",
        ),
        (r#"{"a": 1, "a": 2}"#, r#"{"a":1,"a":2}"#),
        (
            r#"{"s": "two  spaces, \" and\ttab\\", "t" : true}"#,
            r#"{"s":"two  spaces, \" and\ttab\\","t":true}"#,
        ),
        ("7.5", "7.5"),
        ("false", "false"),
        (r#""text \u00e9""#, "text \u{e9}"),
    ];
    for (i, (payload, _)) in sent.iter().enumerate() {
        let body = format!(r#"{{"payload": {payload}, "id": "m{i}"}}"#);
        let (s, e) = env
            .call_raw("POST", "/v1/queues/docs/messages", &body)
            .await;
        assert_eq!(s, 201, "{payload}: {e}");
        let body = format!(r#"{{"payload": {payload}}}"#);
        let (s, e) = env
            .call_raw("POST", "/v1/delayed/docs/messages", &body)
            .await;
        assert_eq!(s, 201, "{payload}: {e}");
    }
    let q = env
        .client
        .reliable_queue("docs", Default::default())
        .unwrap();
    let d = env.client.delayed_queue("docs").unwrap();
    // Due in the same ms: in any order.
    let (mut received, mut taken) = (Vec::new(), Vec::new());
    for _ in &sent {
        let got = q
            .receive(Some(Duration::from_secs(5)))
            .await
            .unwrap()
            .unwrap();
        received.push((got.id.clone(), got.payload.clone()));
        taken.push(d.take(Some(Duration::from_secs(5))).await.unwrap().unwrap());
    }
    received.sort();
    taken.sort();
    let mut texts: Vec<Vec<u8>> = sent.iter().map(|(_, t)| t.as_bytes().to_vec()).collect();
    let by_id: Vec<(String, Vec<u8>)> = (0..sent.len())
        .map(|i| (format!("m{i}"), texts[i].clone()))
        .collect();
    texts.sort();
    assert_eq!(received, by_id);
    assert_eq!(taken, texts);
    // null is no payload.
    let (s, e) = env
        .call(
            "POST",
            "/v1/queues/docs/messages",
            Some(json!({"payload": null})),
        )
        .await;
    assert_eq!(
        (s, e["error"]["kind"].as_str()),
        (400, Some("invalid_argument"))
    );
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
        // A lone surrogate escape, within a JSON payload or as its string.
        (
            "POST",
            "/v1/queues/q/messages".into(),
            Some(r#"{"payload":{"a":"\ud800"}}"#),
            400,
        ),
        (
            "POST",
            "/v1/delayed/q/messages".into(),
            Some(r#"{"payload":"\ud800"}"#),
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

/// A request refused on a queue the service does not hold (a 409: a key of the queue holds
/// another type; a 404: nothing to cancel) keeps no handle on it: no transfer task left
/// failing its passes (its subscription ends), no metric series, not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_leaves_no_handle_or_transfer_task() {
    let env = Env::start(config()).await;
    // The delayed queue's list and the reliable queue's stream hold strings.
    env.redis.cli(&["SET", "dwt", "a string"]);
    env.redis.cli(&["SET", "{dq:rwt}:ready", "a string"]);
    let payload = Some(json!({"payload": "x"}));
    for (path, body, status) in [
        ("/v1/delayed/dwt/messages", payload.clone(), 409),
        ("/v1/delayed/dwt/take", None, 409),
        ("/v1/queues/rwt/messages", payload.clone(), 409),
        ("/v1/queues/rwt/receive", None, 409),
        (
            "/v1/queues/nowt/messages/m/reschedule",
            Some(json!({"delay_ms": 5})),
            404,
        ),
    ] {
        let (s, e) = env.call("POST", path, body).await;
        assert_eq!(s, status, "{path}: {e}");
    }
    let (s, e) = env.call("DELETE", "/v1/queues/nowt/messages/m", None).await;
    assert_eq!(s, 404, "{e}");
    // A queue used with success is held, with its transfer task subscribed.
    let (s, _) = env.call("POST", "/v1/queues/okq/messages", payload).await;
    assert_eq!(s, 201);
    until(Duration::from_secs(10), || async {
        (channels(&env, "okq").len() == 1 && channels(&env, "wt").is_empty()).then_some(())
    })
    .await;
    let (_, text) = env.get_text("/metrics").await;
    assert!(text.contains("queue=\"okq\""), "{text}");
    assert!(
        !text.contains("wt\""),
        "no series of a refused queue: {text}"
    );
    let (_, all) = env.call("GET", "/v1/queues", None).await;
    assert_eq!(
        all["reliable"],
        json!([all["reliable"][0].clone()]),
        "{all}"
    );
    assert_eq!(all["reliable"][0]["name"], "okq", "{all}");
    assert_eq!(all["delayed"], json!([]), "{all}");
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
        "# TYPE delayq_offered_total counter",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    parse_prometheus_text(&text);

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
        "/v1/queues/{name}/settings",
        "/v1/queues/{name}/deliveries/{id}/ack",
        "/v1/queues/{name}/deliveries/{id}/nack",
        "/v1/queues/{name}/deliveries/{id}/extend",
        "/v1/queues/{name}/dead-letters",
        "/v1/queues/{name}/dead-letters/requeue",
        "/v1/queues/{name}/dead-letters/purge",
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
    // The limits the server enforces are in the document; optional bodies are optional.
    let schemas = &doc["components"]["schemas"];
    let receive = &schemas["ReceiveRequest"]["properties"];
    assert_eq!(
        (&receive["max"]["minimum"], &receive["max"]["maximum"]),
        (&json!(1), &json!(100))
    );
    assert_eq!(receive["wait_ms"]["maximum"], json!(30000));
    assert_eq!(
        schemas["OfferRequest"]["properties"]["delay_ms"]["maximum"],
        json!(1u64 << 50)
    );
    let receive_body = &paths["/v1/queues/{name}/receive"]["post"]["requestBody"];
    assert_ne!(receive_body["required"], json!(true), "{receive_body}");
    let dead = &paths["/v1/queues/{name}/dead"]["get"]["parameters"][1]["schema"];
    assert_eq!(
        (&dead["minimum"], &dead["maximum"]),
        (&json!(1), &json!(1000)),
        "{dead}"
    );

    let (s, html) = env.get_text("/").await;
    assert_eq!(s, 200);
    assert!(html.contains("/assets/app.js"));
    assert_eq!(env.get_text("/assets/app.js").await.0, 200);
    assert_eq!(env.get_text("/assets/app.css").await.0, 200);
    assert_eq!(env.get_text("/assets/other.js").await.0, 404);
    env.stop().await;
}

/// The OpenAPI document and the server agree, so that they cannot drift apart: every
/// operation it lists is routed and every other method of its paths is a 405; each request
/// schema lists exactly the field names the server takes (its second names as deprecated
/// properties); the routes that take no body refuse one; every mutating operation declares
/// 413 and every one that reaches Redis 500; the limits the server enforces are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_matches_the_routes_and_fields() {
    let env = Env::start(config()).await;
    let (_, doc) = env.call("GET", "/openapi.json", None).await;
    let schemas = &doc["components"]["schemas"];
    let mut bodies = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let url = path.replace("{name}", "oa").replace("{id}", "x");
        for method in ["get", "put", "post", "delete"] {
            let op = &item[method];
            let m = method.to_uppercase();
            let (s, e) = env.call(&m, &url, None).await;
            if op.is_null() {
                assert_eq!(s, 405, "{m} {path} is not in the document: {e}");
                continue;
            }
            assert!(
                s != 405
                    && !(s == 404
                        && e["error"]["message"]
                            .as_str()
                            .unwrap()
                            .starts_with("no route")),
                "{m} {path} is in the document but not routed: {s} {e}"
            );
            let responses = op["responses"].as_object().unwrap();
            let mutating = op["security"].is_array();
            if mutating {
                assert!(responses.contains_key("413"), "{m} {path}: no 413");
            }
            if responses.contains_key("503") {
                assert!(responses.contains_key("500"), "{m} {path}: no 500");
            }
            for (status, r) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{m} {path} {status}"
                    );
                }
            }
            if !mutating {
                continue;
            }
            // The names the server takes: a made-up field's 400 lists them (serde's message).
            let (s, e) = env.call(&m, &url, Some(json!({"zz_made_up": 1}))).await;
            assert_eq!(s, 400, "{m} {path}: {e}");
            let message = e["error"]["message"].as_str().unwrap();
            let schema = op["requestBody"]["content"]["application/json"]["schema"].clone();
            if schema.is_null() {
                assert!(message.contains("takes no body"), "{m} {path}: {message}");
                continue;
            }
            bodies += 1;
            let reference = schema["$ref"]
                .as_str()
                .or_else(|| {
                    schema["oneOf"]
                        .as_array()?
                        .iter()
                        .find_map(|s| s["$ref"].as_str())
                })
                .unwrap_or_else(|| panic!("{m} {path}: {schema}"));
            let name = reference.rsplit('/').next().unwrap();
            let object = &schemas[name];
            assert_eq!(object["additionalProperties"], json!(false), "{name}");
            let properties = object["properties"].as_object().unwrap();
            let mut documented: Vec<&str> = properties.keys().map(String::as_str).collect();
            let expected = message
                .split_once("expected")
                .unwrap_or_else(|| panic!("{m} {path}: {message}"))
                .1;
            let mut taken: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            documented.sort();
            taken.sort();
            assert_eq!(documented, taken, "{name} ({m} {path}): {message}");
            for (field, p) in properties {
                if p["deprecated"] == json!(true) {
                    let d = p["description"].as_str().unwrap();
                    let other = d.split('`').nth(1).unwrap();
                    assert!(
                        d.starts_with("Another name for") && properties.contains_key(other),
                        "{name}.{field}: {d}"
                    );
                    // A body naming the field by its other name only is valid.
                    assert!(
                        !object["required"]
                            .as_array()
                            .is_some_and(|r| r.contains(&json!(other))),
                        "{name}.{other} required, but {field} may stand for it"
                    );
                }
            }
        }
    }
    assert!(bodies >= 10, "{bodies} request schemas checked");
    let p = |schema: &str, field: &str| schemas[schema]["properties"][field].clone();
    assert_eq!(p("NackRequest", "delay_ms")["maximum"], json!(1u64 << 50));
    for (schema, alias, field) in [
        ("ReceiveRequest", "max_messages", "max"),
        ("ExtendRequest", "visibility_timeout_ms", "duration_ms"),
    ] {
        assert_eq!(p(schema, alias)["deprecated"], json!(true));
        assert_eq!(p(schema, alias)["maximum"], p(schema, field)["maximum"]);
    }
    env.stop().await;
}

/// One sample of the text format: metric name, labels (unescaped), value.
type Sample = (String, Vec<(String, String)>, String);

/// Parses the Prometheus text format 0.0.4 line by line, and checks it as a scraper
/// would: `# HELP`/`# TYPE` only, each sample after the `# TYPE` of its family (a counter's
/// family named with `_total`, a histogram's samples `_bucket`, `_sum`, `_count`), label
/// values with only the `\\`, `\"` and `\n` escapes, and a number for a value.
fn parse_prometheus_text(text: &str) -> Vec<Sample> {
    let mut family: Option<(String, String)> = None;
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.trim_start().splitn(3, ' ').collect();
            match words[..] {
                ["HELP", _, ..] => {}
                ["TYPE", name, kind] => {
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                        "{line}"
                    );
                    if kind == "counter" {
                        assert!(name.ends_with("_total"), "counter family {name}: {line}");
                    }
                    family = Some((name.to_owned(), kind.to_owned()));
                }
                _ => panic!("not a line of the Prometheus text format: {line:?}"),
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).expect("a value");
        let name = &line[..end];
        let mut rest = &line[end..];
        let mut labels = Vec::new();
        if let Some(inner) = rest.strip_prefix('{') {
            let mut chars = inner.char_indices().peekable();
            loop {
                let (i, c) = chars.next().expect("labels end");
                if c == '}' {
                    rest = &inner[i + 1..];
                    break;
                }
                if c == ',' {
                    continue;
                }
                let mut key = String::from(c);
                for (_, c) in chars.by_ref() {
                    if c == '=' {
                        break;
                    }
                    key.push(c);
                }
                assert_eq!(chars.next().map(|p| p.1), Some('"'), "{line}");
                let mut value = String::new();
                loop {
                    match chars.next().expect("a closed label value").1 {
                        '"' => break,
                        '\\' => match chars.next().expect("an escape").1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            other => panic!("bad escape \\{other} in {line:?}"),
                        },
                        c => value.push(c),
                    }
                }
                labels.push((key, value));
            }
        }
        let value = rest.trim();
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "value {value:?} in {line:?}"
        );
        let (fam, kind) = family
            .as_ref()
            .unwrap_or_else(|| panic!("no TYPE line before {line:?}"));
        let belongs = match kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{fam}{s}")),
            _ => name == fam,
        };
        assert!(belongs, "sample {name} after the TYPE of {fam} ({kind})");
        samples.push((name.to_owned(), labels, value.to_owned()));
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_escape_label_values_and_speak_prometheus_text_unless_openmetrics_is_asked() {
    let env = Env::start(config()).await;
    let weird = "we\"ird\\q\nname";
    let path = "/v1/queues/we%22ird%5Cq%0Aname/messages";
    let (s, _) = env.call("POST", path, Some(json!({"payload": "x"}))).await;
    assert_eq!(s, 201);
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/plain/messages",
            Some(json!({"payload": "x"})),
        )
        .await;
    assert_eq!(s, 201);
    env.receive_and("plain", "ack").await;
    let get = |accept: Option<&'static str>| {
        let mut req = env.http.get(format!("{}/metrics", env.base));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            let kind = resp.headers()["content-type"].to_str().unwrap().to_owned();
            (kind, resp.text().await.unwrap())
        }
    };

    for accept in [None, Some("text/plain"), Some("*/*")] {
        let (kind, text) = get(accept).await;
        assert_eq!(
            kind, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(!text.contains("_created"), "{text}");
        let samples = parse_prometheus_text(&text);
        let find = |name: &str, queue: &str| {
            samples
                .iter()
                .find(|(n, l, _)| n == name && l.iter().any(|(k, v)| k == "queue" && v == queue))
                .map(|s| s.2.clone())
        };
        assert_eq!(find("delayq_offered_total", weird).as_deref(), Some("1"));
        assert_eq!(
            find("delayq_queue_up", weird).as_deref(),
            Some("1"),
            "the weird queue's counts read"
        );
        assert_eq!(find("delayq_acked_total", "plain").as_deref(), Some("1"));
        assert_eq!(
            find("delayq_lateness_seconds_count", "plain").as_deref(),
            Some("1")
        );
        assert!(
            text.contains("# TYPE delayq_offered_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# HELP delayq_offered_total "), "{text}");
        assert!(text.contains("# TYPE delayq_connection_errors_total counter\n"));
        assert!(
            text.contains(r#"delayq_offered_total{queue="we\"ird\\q\nname",kind="reliable"} 1"#),
            "{text}"
        );
    }

    // Prometheus's own Accept header: OpenMetrics, as prometheus-client writes it.
    let (kind, text) = get(Some(
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    ))
    .await;
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE delayq_offered counter\n"), "{text}");
    assert!(
        text.contains(r#"delayq_offered_total{queue="we\"ird\\q\nname",kind="reliable"} 1"#),
        "{text}"
    );
    env.stop().await;
}

/// The Pub/Sub channels of Redis whose name contains `part`.
fn channels(env: &Env, part: &str) -> Vec<String> {
    env.redis
        .cli(&["PUBSUB", "CHANNELS", &format!("*{part}*")])
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_queue_the_service_does_not_know_holds_nothing() {
    let env = Env::start(delayq_serve::Config {
        queues: vec!["named".into()],
        ..config()
    })
    .await;
    for i in 0..30 {
        for path in [
            format!("/v1/queues/ghost-{i}"),
            format!("/v1/queues/ghost-{i}/dead"),
            format!("/v1/delayed/ghost-d-{i}"),
        ] {
            let (s, body) = env.call_as(None, "GET", &path, None).await;
            assert_eq!(s, 200, "{path}: {body}");
        }
    }
    let (_, info) = env.call_as(None, "GET", "/v1/queues/ghost-0", None).await;
    assert_eq!(info["counts"]["ready"], 0);
    // A queue named on the command line, read, and one offered to: held, with their
    // transfer tasks (subscribed to their channel, one pass counted).
    assert_eq!(
        env.call_as(None, "GET", "/v1/queues/named", None).await.0,
        200
    );
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/probe/messages",
            Some(json!({"payload": "x", "delay_ms": 60000})),
        )
        .await;
    assert_eq!(s, 201);
    until(Duration::from_secs(10), || async {
        let passes = |name: &str| {
            delayq::metrics::queue(delayq::metrics::QueueKind::Reliable, name)
                .transfer_duration
                .count
        };
        (channels(&env, "probe").len() == 1
            && channels(&env, "named").len() == 1
            && passes("probe") > 0
            && passes("named") > 0)
            .then_some(())
    })
    .await;
    // By then the made-up names would have theirs too, had they got handles.
    assert_eq!(channels(&env, "ghost"), Vec::<String>::new());
    let snapshot = delayq::metrics::snapshot();
    assert!(
        !snapshot.queues.iter().any(|q| q.name.contains("ghost")),
        "no metric series for a read"
    );
    let (_, text) = env.get_text("/metrics").await;
    assert!(!text.contains("ghost"), "{text}");
    let (_, all) = env.call_as(None, "GET", "/v1/queues", None).await;
    let names: Vec<&str> = all["reliable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"named") && names.contains(&"probe"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("ghost")), "{names:?}");
    assert!(all["delayed"].as_array().unwrap().is_empty(), "{all}");
    env.stop().await;
}

/// The `blocked_clients` of Redis's INFO.
fn blocked_clients(env: &Env) -> u32 {
    env.redis
        .cli(&["INFO", "clients"])
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_service_ends_long_polls_at_once() {
    let mut env = Env::start(config()).await;
    let long = |path: &'static str| {
        let req = env
            .http
            .post(format!("{}{path}", env.base))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(r#"{"wait_ms": 20000}"#);
        tokio::spawn(async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            (status, body, std::time::Instant::now())
        })
    };
    let receive = long("/v1/queues/lp/receive");
    let take = long("/v1/delayed/lpd/take");
    until(Duration::from_secs(10), || async {
        (blocked_clients(&env) >= 2).then_some(())
    })
    .await;
    let stopping = std::time::Instant::now();
    env.server.take().unwrap().stop().await.unwrap();
    let stopped = stopping.elapsed();
    let (s, got, at) = receive.await.unwrap();
    assert_eq!((s, &got["deliveries"]), (200, &json!([])), "{got}");
    assert!(
        at - stopping < Duration::from_secs(3),
        "{:?}",
        at - stopping
    );
    let (s, took, at) = take.await.unwrap();
    assert_eq!((s, &took["value"]), (200, &Value::Null), "{took}");
    assert!(
        at - stopping < Duration::from_secs(3),
        "{:?}",
        at - stopping
    );
    assert!(stopped < Duration::from_secs(3), "stop took {stopped:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_poll_leaves_nothing_in_flight() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = Env::start(config()).await;
    let body = r#"{"wait_ms": 20000}"#;
    let mut conn = tokio::net::TcpStream::connect(env.base.trim_start_matches("http://"))
        .await
        .unwrap();
    conn.write_all(
        format!(
            "POST /v1/queues/gone/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    until(Duration::from_secs(10), || async {
        (blocked_clients(&env) >= 1).then_some(())
    })
    .await;
    // The client goes away; the service closing its side too shows it noticed (and
    // dropped the poll) before the message below exists.
    conn.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(0))),
        "{read:?}: {}",
        String::from_utf8_lossy(&rest)
    );
    drop(conn);
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/gone/messages",
            Some(json!({"payload": "for whoever asks", "id": "m"})),
        )
        .await;
    assert_eq!(s, 201);
    // The abandoned poll gave back whatever it was handed: the message is received at
    // once, as a first attempt, not after its 30 s lease.
    let started = std::time::Instant::now();
    let (_, got) = env
        .call(
            "POST",
            "/v1/queues/gone/receive",
            Some(json!({"wait_ms": 10000})),
        )
        .await;
    assert_eq!(got["deliveries"][0]["id"], "m", "{got}");
    assert_eq!(got["deliveries"][0]["attempt"], 1, "{got}");
    assert!(started.elapsed() < Duration::from_secs(10));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_even_those_axum_makes() {
    let env = Env::start(config()).await;
    for (method, path, status, kind) in [
        ("GET", "/v1/nothing", 404, "not_found"),
        ("GET", "/nothing/at/all", 404, "not_found"),
        ("POST", "/metrics", 405, "method_not_allowed"),
        ("PUT", "/v1/queues/q", 405, "method_not_allowed"),
        ("GET", "/v1/queues/q/messages", 405, "method_not_allowed"),
        ("GET", "/v1/queues/%FF%FE", 400, "invalid_argument"),
        ("GET", "/assets/other.js", 404, "not_found"),
    ] {
        let resp = env
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{path}", env.base),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), status, "{method} {path}");
        assert_eq!(
            resp.headers()["content-type"],
            "application/json",
            "{method} {path}"
        );
        if status == 405 {
            assert!(resp.headers().contains_key("allow"), "{method} {path}");
        }
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(body["error"]["kind"], kind, "{method} {path}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }

    // A body over the 16 MiB limit.
    let big = format!(r#"{{"payload":"{}"}}"#, "x".repeat(17 * 1024 * 1024));
    let (s, e) = env.call_raw("POST", "/v1/queues/q/messages", &big).await;
    assert_eq!(
        (s, e["error"]["kind"].as_str()),
        (413, Some("invalid_argument")),
        "{e}"
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("limit"),
        "{e}"
    );
    assert_eq!(env.keys(), Vec::<String>::new());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive_and_a_401_names_it() {
    let env = Env::start(config()).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let resp = env
            .http
            .post(format!("{}/v1/queues/q/messages", env.base))
            .header("authorization", format!("{scheme} {TOKEN}"))
            .header("content-type", "application/json")
            .body(r#"{"payload":"x"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{scheme}");
    }
    for auth in [
        None,
        Some("bearer wrong".to_owned()),
        Some(format!("Basic {TOKEN}")),
    ] {
        let mut req = env
            .http
            .post(format!("{}/v1/queues/q/messages", env.base))
            .body(r#"{"payload":"x"}"#);
        if let Some(a) = &auth {
            req = req.header("authorization", a.as_str());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
    }
    env.stop().await;
}

/// A sharded queue found by the service's key scan is one queue, listed by its name with
/// the shards added up; its shards are not taken for queues of their own (whose handles
/// would write settings of "sub-shards" into Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_found_in_redis_is_one_queue() {
    let redis = support::RedisServer::start();
    let producer = delayq::Client::connect(&redis.url()).await.unwrap();
    let opts = delayq::ReliableQueueOptions {
        shards: Some(4),
        scheduler: delayq::SchedulerOptions {
            enabled: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let q = producer.reliable_queue("sh", opts).unwrap();
    for i in 0..8 {
        q.offer(format!("m{i}"), Duration::from_secs(600), None)
            .await
            .unwrap();
    }
    producer.close();
    let env = Env::start_on(redis, config()).await;
    let listed = until(Duration::from_secs(20), || async {
        let (_, all) = env.call("GET", "/v1/queues", None).await;
        let list = all["reliable"].as_array().cloned().unwrap_or_default();
        (!list.is_empty()).then_some(list)
    })
    .await;
    let names: Vec<&str> = listed.iter().filter_map(|q| q["name"].as_str()).collect();
    assert_eq!(names, ["sh"], "{listed:?}");
    assert_eq!(listed[0]["counts"]["delayed"], 8, "{listed:?}");
    // Every key is the queue's own or one of its 4 shards'.
    let tags: Vec<String> = (0..4)
        .map(|s| delayq::keys::shard_tag("sh", s, 4))
        .chain(["dq:sh".to_owned()])
        .collect();
    for key in env.keys() {
        let tag = delayq::keys::hash_tag(&key);
        assert!(tags.iter().any(|t| t == tag), "stray key {key}");
    }
    env.stop().await;
}

/// A browser page of another site cannot change queues (cross-site request forgery), even
/// when the service takes changes without a token: a mutating request whose `Origin` is
/// not the service's is refused and writes nothing; the service's own pages and clients
/// that send no `Origin` are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_cannot_change_queues() {
    let env = Env::start(delayq_serve::Config {
        token: None,
        allow_unauthenticated: true,
        ..config()
    })
    .await;
    let url = format!("{}/v1/queues/csrf/messages", env.base);
    let post = |origin: Option<String>| {
        let mut r = env
            .http
            .post(&url)
            .header("content-type", "text/plain")
            .body(r#"{"payload":"x","delay_ms":60000}"#);
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    let refused = post(Some("http://evil.example".into())).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["kind"], "cross_site", "{body}");
    assert!(env.keys().is_empty(), "nothing written: {:?}", env.keys());
    assert_eq!(post(Some(env.base.clone())).await.unwrap().status(), 201);
    assert_eq!(post(None).await.unwrap().status(), 201);
    env.stop().await;
}

/// DNS rebinding: a page of `evil.example` whose name now points to 127.0.0.1 sends
/// `Host: evil.example:PORT` (and the same `Origin`, so the cross-site check passes). On a
/// loopback address the service answers only loopback names: every route, `/metrics` and
/// the dashboard included, is refused with 403 `host_not_allowed` before it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_another_host_is_refused_on_a_loopback_address() {
    let env = Env::start(delayq_serve::Config {
        token: None,
        allow_unauthenticated: true,
        ..config()
    })
    .await;
    let port = env.port();
    env.configure("hooks", 1, vec![Duration::from_millis(10)])
        .await;
    let (s, _) = env
        .call(
            "POST",
            "/v1/queues/hooks/messages",
            Some(json!({"payload": "secret", "id": "d1"})),
        )
        .await;
    assert_eq!(s, 201);
    env.receive_and("hooks", "nack").await;

    let evil = format!("evil.example:{port}");
    let offer = r#"{"payload":"x"}"#;
    for (method, path, body) in [
        ("GET", "/v1/queues/hooks/dead-letters", ""),
        ("GET", "/v1/queues/hooks/dead", ""),
        ("GET", "/v1/queues/hooks", ""),
        ("GET", "/v1/queues", ""),
        ("GET", "/v1/server", ""),
        ("GET", "/metrics", ""),
        ("GET", "/", ""),
        ("GET", "/assets/app.js", ""),
        ("GET", "/openapi.json", ""),
        ("GET", "/no/such/route", ""),
        ("POST", "/v1/queues/hooks/dead-letters/purge", ""),
        ("DELETE", "/v1/queues/hooks/dead-letters", ""),
        ("POST", "/v1/queues/hooks/dead-letters/requeue", ""),
        ("POST", "/v1/queues/hooks/messages", offer),
    ] {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {evil}\r\nOrigin: http://{evil}\r\nContent-Type: application/json"
        );
        let (s, answer) = env.raw(&head, body).await;
        assert_eq!(
            (s, answer["error"]["kind"].as_str()),
            (403, Some("host_not_allowed")),
            "{method} {path}: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{evil:?}")) && message.contains("DELAYQ_ALLOWED_HOSTS"),
            "{message}"
        );
    }
    // Other names, a request without Host, and a target in the absolute form naming
    // another host: refused too.
    for head in [
        "GET /v1/server HTTP/1.1\r\nHost: evil.example".to_owned(),
        format!("GET /v1/server HTTP/1.1\r\nHost: localhost.evil.example:{port}"),
        format!("GET /v1/server HTTP/1.1\r\nHost: 127.0.0.1.nip.io:{port}"),
        format!("GET /v1/server HTTP/1.1\r\nHost: 10.0.0.1:{port}"),
        "GET /v1/server HTTP/1.0".to_owned(),
        format!("GET http://{evil}/v1/server HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
    ] {
        let (s, answer) = env.raw(&head, "").await;
        assert_eq!(
            (s, answer["error"]["kind"].as_str()),
            (403, Some("host_not_allowed")),
            "{head:?}: {answer}"
        );
    }
    // Nothing was changed or read: the dead letter is still there, no offer was made.
    let (_, info) = env.call("GET", "/v1/queues/hooks", None).await;
    assert_eq!(
        info["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 1}),
        "{info}"
    );
    // The OpenAPI document says so for every route.
    let (_, doc) = env.call("GET", "/openapi.json", None).await;
    for (path, method) in [
        ("/v1/queues", "get"),
        ("/v1/queues/{name}/dead-letters", "get"),
        ("/v1/queues/{name}/dead-letters/purge", "post"),
        ("/metrics", "get"),
    ] {
        let forbidden = &doc["paths"][path][method]["responses"]["403"];
        assert!(
            forbidden["description"]
                .as_str()
                .is_some_and(|d| d.contains("host_not_allowed")),
            "{path} {method}: {forbidden}"
        );
    }
    // Loopback names, with or without a port, in any case, are answered.
    for host in [
        format!("localhost:{port}"),
        "localhost".to_owned(),
        "LocalHost".to_owned(),
        format!("127.0.0.1:{port}"),
        "127.8.9.10".to_owned(),
        format!("[::1]:{port}"),
        "[::1]".to_owned(),
    ] {
        let head = format!(
            "GET /v1/queues/hooks/dead-letters HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}"
        );
        let (s, answer) = env.raw(&head, "").await;
        assert_eq!(s, 200, "{host}: {answer}");
        assert_eq!(answer["dead_letters"][0]["payload"], "secret", "{host}");
    }
    let (s, _) = env
        .raw(
            &format!("POST /v1/queues/hooks/dead-letters/requeue HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://localhost:{port}"),
            "",
        )
        .await;
    assert_eq!(s, 200);
    env.stop().await;
}

/// Allowed hosts (`DELAYQ_ALLOWED_HOSTS`, for the names a reverse proxy passes on) are
/// answered besides the loopback names; a service on another address answers every host,
/// as before, unless allowed hosts are given (then these, loopback names and IP addresses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_are_answered_and_other_addresses_answer_any_host_unless_told() {
    async fn status(env: &Env, host: &str) -> u16 {
        let head = format!("GET /v1/server HTTP/1.1\r\nHost: {host}");
        env.raw(&head, "").await.0
    }
    let env = Env::start_allowing(
        support::RedisServer::start(),
        config(),
        &["queue.example.com", ".corp.example"],
    )
    .await;
    for (host, expected) in [
        ("queue.example.com", 200),
        ("Queue.Example.com:443", 200),
        ("corp.example", 200),
        ("a.b.corp.example:8080", 200),
        ("localhost", 200),
        ("127.0.0.1", 200),
        ("example.com", 403),
        ("xcorp.example", 403),
        ("evil.example", 403),
        ("192.0.2.1", 403),
    ] {
        assert_eq!(status(&env, host).await, expected, "{host}");
    }
    // A bad name is refused at start.
    let refused = delayq_serve::Server::start_with_allowed_hosts(
        env.client.clone(),
        config(),
        &["http://queue.example.com".to_owned()],
    )
    .await;
    assert_eq!(
        refused.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::InvalidInput)
    );
    assert_eq!(
        delayq_serve::parse_allowed_hosts("a.example, .b.example c").unwrap(),
        ["a.example", ".b.example", "c"]
    );
    env.stop().await;

    let anywhere = || delayq_serve::Config {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..config()
    };
    let env = Env::start(anywhere()).await;
    for host in ["evil.example", "localhost", "192.0.2.1"] {
        assert_eq!(status(&env, host).await, 200, "{host}");
    }
    env.stop().await;

    let env = Env::start_allowing(
        support::RedisServer::start(),
        anywhere(),
        &["queue.example.com"],
    )
    .await;
    for (host, expected) in [
        ("queue.example.com", 200),
        ("localhost:1", 200),
        ("192.0.2.1:7878", 200),
        ("[2001:db8::1]", 200),
        ("evil.example", 403),
    ] {
        assert_eq!(status(&env, host).await, expected, "{host}");
    }
    env.stop().await;
}

/// Routes that take no body (ack, cancel, the purges) refuse one that is not empty, `{}`
/// or `null`, and do nothing; a body is a JSON object, never an array (which serde's
/// derived structs would read as their fields in order) nor another value; `null` is no
/// body, as the OpenAPI document's nullable bodies say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_objects_and_routes_without_one_refuse_one() {
    let env = Env::start(config()).await;
    let kind = |v: &Value| v["error"]["kind"].as_str().map(str::to_owned);
    // A dead letter, a waiting message and a delivery held, in queue nb.
    env.configure("nb", 1, vec![Duration::from_millis(10)])
        .await;
    let offer = |payload: &'static str, id: &'static str, delay_ms: u64| {
        let env = &env;
        async move {
            let (s, _) = env
                .call(
                    "POST",
                    "/v1/queues/nb/messages",
                    Some(json!({"payload": payload, "id": id, "delay_ms": delay_ms})),
                )
                .await;
            assert_eq!(s, 201);
        }
    };
    offer("dead", "d1", 0).await;
    env.receive_and("nb", "nack").await;
    offer("held", "h1", 0).await;
    let (_, got) = env
        .call(
            "POST",
            "/v1/queues/nb/receive",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    let delivery = got["deliveries"][0]["delivery_id"]
        .as_str()
        .unwrap()
        .to_owned();
    offer("waiting", "w1", 600_000).await;
    async fn counts(env: &Env) -> Value {
        env.call("GET", "/v1/queues/nb", None).await.1["counts"].clone()
    }
    let before = counts(&env).await;
    assert_eq!(
        before,
        json!({"delayed": 1, "ready": 0, "in_flight": 1, "dead": 1})
    );

    let ack = format!("/v1/queues/nb/deliveries/{delivery}/ack");
    let no_body_routes = [
        ("POST", "/v1/queues/nb/dead-letters/purge"),
        ("DELETE", "/v1/queues/nb/dead-letters"),
        ("POST", "/v1/queues/nb/dead/purge"),
        ("DELETE", "/v1/queues/nb/dead"),
        ("DELETE", "/v1/queues/nb/messages/w1"),
        ("POST", ack.as_str()),
    ];
    for (method, path) in no_body_routes {
        for body in [
            r#"{"foo":1}"#,
            r#"{"ids":["d1"]}"#,
            "[]",
            r#""x""#,
            "1",
            "true",
        ] {
            let (s, answer) = env.call_raw(method, path, body).await;
            assert_eq!(
                (s, kind(&answer).as_deref()),
                (400, Some("invalid_argument")),
                "{method} {path} {body}: {answer}"
            );
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("takes no body"),
                "{answer}"
            );
        }
    }
    assert_eq!(counts(&env).await, before, "nothing was done");

    // Empty, {} and null are no body.
    let (s, a) = env.call_raw("POST", &ack, "null").await;
    assert_eq!((s, a["acked"].as_bool()), (200, Some(true)), "{a}");
    let (s, c) = env
        .call_raw("DELETE", "/v1/queues/nb/messages/w1", " { } ")
        .await;
    assert_eq!((s, c["cancelled"].as_bool()), (200, Some(true)), "{c}");
    let (s, p) = env
        .call_raw("POST", "/v1/queues/nb/dead-letters/purge", "")
        .await;
    assert_eq!((s, p["purged"].as_u64()), (200, Some(1)), "{p}");
    let (s, p) = env
        .call_raw("DELETE", "/v1/queues/nb/dead-letters", "null")
        .await;
    assert_eq!((s, p["purged"].as_u64()), (200, Some(0)), "{p}");

    // A body is an object: arrays (positional fields) and other values are refused.
    for (method, path, body) in [
        (
            "POST",
            "/v1/queues/arr/messages",
            r#"["x",null,10,"myid",null]"#,
        ),
        ("POST", "/v1/queues/arr/messages", r#""x""#),
        ("POST", "/v1/queues/arr/messages", "42"),
        ("POST", "/v1/queues/arr/messages/myid/reschedule", "[1000]"),
        ("POST", "/v1/queues/arr/receive", "[1,0]"),
        ("PUT", "/v1/queues/arr/settings", "[1000]"),
        ("POST", "/v1/queues/arr/dead-letters/requeue", r#"[["a"]]"#),
        ("POST", "/v1/queues/arr/deliveries/x/nack", "[0]"),
        ("POST", "/v1/queues/arr/deliveries/x/extend", "[1000]"),
        ("POST", "/v1/delayed/arr/messages", r#"["x",null,0]"#),
        ("POST", "/v1/delayed/arr/take", "[0]"),
        ("POST", "/v1/delayed/arr/take", "[]"),
    ] {
        let (s, answer) = env.call_raw(method, path, body).await;
        assert_eq!(
            (s, kind(&answer).as_deref()),
            (400, Some("invalid_argument")),
            "{method} {path} {body}: {answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("JSON object"),
            "{answer}"
        );
    }
    let keys = env.keys();
    assert!(
        !keys.iter().any(|k| k.contains("arr")),
        "nothing written: {keys:?}"
    );

    // null where the document says a body may be null: the defaults.
    let (s, r) = env.call_raw("POST", "/v1/queues/arr/receive", "null").await;
    assert_eq!((s, &r["deliveries"]), (200, &json!([])), "{r}");
    let (s, t) = env.call_raw("POST", "/v1/delayed/arr/take", "null").await;
    assert_eq!((s, &t["value"]), (200, &Value::Null), "{t}");
    let (s, q) = env
        .call_raw("POST", "/v1/queues/arr/dead-letters/requeue", "null")
        .await;
    assert_eq!((s, q["requeued"].as_u64()), (200, Some(0)), "{q}");
    // A body that is required is still required.
    let (s, _) = env
        .call_raw("POST", "/v1/queues/arr/messages", "null")
        .await;
    assert_eq!(s, 400);

    // The document: no request body on the routes that take none, nullable optional ones.
    let (_, doc) = env.call("GET", "/openapi.json", None).await;
    let paths = &doc["paths"];
    for (path, method) in [
        ("/v1/queues/{name}/deliveries/{id}/ack", "post"),
        ("/v1/queues/{name}/messages/{id}", "delete"),
        ("/v1/queues/{name}/dead-letters/purge", "post"),
        ("/v1/queues/{name}/dead-letters", "delete"),
    ] {
        let op = &paths[path][method];
        assert!(op.is_object(), "{path} {method}");
        assert!(op["requestBody"].is_null(), "{path} {method}: {op}");
        assert!(op["responses"]["400"].is_object(), "{path} {method}: {op}");
    }
    let receive = &paths["/v1/queues/{name}/receive"]["post"]["requestBody"];
    assert_eq!(
        receive["content"]["application/json"]["schema"]["oneOf"][0]["type"], "null",
        "{receive}"
    );
    env.stop().await;
}

/// `/deliveries/{id}/...` takes the receive answer's `delivery_id` or the message `id`;
/// a message id names the latest delivery of that message held by the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_named_by_delivery_id_or_by_message_id() {
    let env = Env::start(config()).await;
    for id in ["m1", "m2", "m3"] {
        let (s, _) = env
            .call(
                "POST",
                "/v1/queues/byid/messages",
                Some(json!({"payload": id, "id": id})),
            )
            .await;
        assert_eq!(s, 201);
    }
    let (_, got) = env
        .call(
            "POST",
            "/v1/queues/byid/receive",
            Some(json!({"max": 3, "wait_ms": 5000})),
        )
        .await;
    let mut ids: Vec<&str> = got["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["m1", "m2", "m3"], "{got}");
    let (s, x) = env
        .call(
            "POST",
            "/v1/queues/byid/deliveries/m1/extend",
            Some(json!({"duration_ms": 60000})),
        )
        .await;
    assert_eq!((s, x["extended"].as_bool()), (200, Some(true)), "{x}");
    let (s, k) = env
        .call("POST", "/v1/queues/byid/deliveries/m1/ack", None)
        .await;
    assert_eq!((s, k["acked"].as_bool()), (200, Some(true)), "{k}");
    let (s, k) = env
        .call("POST", "/v1/queues/byid/deliveries/m1/ack", None)
        .await;
    assert_eq!(
        (s, k["acked"].as_bool()),
        (200, Some(true)),
        "a retried ack answers as the first: {k}"
    );
    let (s, e) = env
        .call("POST", "/v1/queues/byid/deliveries/m9/ack", None)
        .await;
    assert_eq!((s, e["error"]["kind"].as_str()), (404, Some("not_found")));
    let (s, _) = env
        .call("POST", "/v1/queues/other/deliveries/m2/ack", None)
        .await;
    assert_eq!(
        s, 404,
        "a message id names a delivery of its own queue only"
    );
    let (s, n) = env
        .call(
            "POST",
            "/v1/queues/byid/deliveries/m2/nack",
            Some(json!({"delay_ms": 60000})),
        )
        .await;
    assert_eq!((s, n["nacked"].as_bool()), (200, Some(true)), "{n}");
    // The delivery id keeps working beside it.
    let m3 = got["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "m3")
        .unwrap()["delivery_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, k) = env
        .call(
            "POST",
            &format!("/v1/queues/byid/deliveries/{m3}/ack"),
            None,
        )
        .await;
    assert_eq!((s, k["acked"].as_bool()), (200, Some(true)), "{k}");

    // A lease that ended: the message comes again, and its id names the new delivery.
    env.configure_with(
        "lease",
        delayq::ReliableQueueOptions {
            visibility_timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        },
    )
    .await;
    env.call(
        "POST",
        "/v1/queues/lease/messages",
        Some(json!({"payload": "x", "id": "again"})),
    )
    .await;
    let (_, first) = env
        .call(
            "POST",
            "/v1/queues/lease/receive",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    let first = first["deliveries"][0]["delivery_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, second) = env
        .call(
            "POST",
            "/v1/queues/lease/receive",
            Some(json!({"wait_ms": 10000})),
        )
        .await;
    assert_eq!(second["deliveries"][0]["attempt"], 2, "{second}");
    let (s, k) = env
        .call("POST", "/v1/queues/lease/deliveries/again/ack", None)
        .await;
    assert_eq!(
        (s, k["acked"].as_bool()),
        (200, Some(true)),
        "the latest delivery is acked: {k}"
    );
    let (s, k) = env
        .call(
            "POST",
            &format!("/v1/queues/lease/deliveries/{first}/ack"),
            None,
        )
        .await;
    assert_eq!(
        (s, k["acked"].as_bool()),
        (200, Some(false)),
        "the first lease had ended: {k}"
    );
    let (_, q) = env.call("GET", "/v1/queues/lease", None).await;
    assert_eq!(
        q["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0})
    );
    env.stop().await;
}

/// Acks and nacks of one delivery sent at once (a client retrying before its first answer
/// came) all get the first one's answer, and a later retry too: one settles, the others
/// wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_sent_at_once_get_the_first_ones_answer() {
    let env = Env::start(config()).await;
    for round in 0..20 {
        let id = format!("m{round}");
        env.call(
            "POST",
            "/v1/queues/once/messages",
            Some(json!({"payload": "x", "id": id})),
        )
        .await;
        let (_, got) = env
            .call(
                "POST",
                "/v1/queues/once/receive",
                Some(json!({"wait_ms": 5000})),
            )
            .await;
        let delivery = got["deliveries"][0]["delivery_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let ack = format!("/v1/queues/once/deliveries/{delivery}/ack");
        let nack = format!("/v1/queues/once/deliveries/{delivery}/nack");
        let (a, b, n) = tokio::join!(
            env.call("POST", &ack, None),
            env.call("POST", &ack, None),
            env.call("POST", &nack, None),
        );
        let again = env.call("POST", &ack, None).await;
        let acked = [&a, &b, &again].map(|(s, k)| (*s, k["acked"].as_bool()));
        let first = acked[0];
        assert!(first.0 == 200 && first.1.is_some(), "{a:?}");
        assert!(acked.iter().all(|x| *x == first), "{round}: {acked:?}");
        // The nack got the same first outcome: true only when it settled the delivery.
        let nacked = n.1["nacked"].as_bool();
        assert_eq!(n.0, 200, "{n:?}");
        assert!(
            nacked == Some(true) || first.1 == Some(true),
            "{round}: {n:?} {acked:?}"
        );
        assert!(
            nacked == Some(false) || first.1 == Some(false),
            "{round}: {n:?} {acked:?}"
        );
        // Whichever settled it, nothing is left in flight or counted twice.
        let (_, q) = env.call("GET", "/v1/queues/once", None).await;
        assert_eq!(q["counts"]["in_flight"], 0, "{q}");
        if nacked == Some(true) {
            // The nack settled it: the message comes back after the back-off; done with it.
            let (_, again) = env
                .call(
                    "POST",
                    "/v1/queues/once/receive",
                    Some(json!({"wait_ms": 5000})),
                )
                .await;
            let d = again["deliveries"][0]["delivery_id"]
                .as_str()
                .unwrap()
                .to_owned();
            env.call("POST", &format!("/v1/queues/once/deliveries/{d}/ack"), None)
                .await;
        }
    }
    let (_, q) = env.call("GET", "/v1/queues/once", None).await;
    assert_eq!(
        q["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0}),
        "{q}"
    );
    env.stop().await;
}

/// An ack whose client gave up before the answer came (Redis busy) still settles the
/// delivery, since Redis runs the ack anyway: the retry is answered `acked: true`, not
/// `false` (as a second ack would be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_whose_client_gave_up_is_settled_for_its_retry() {
    let env = Env::start(config()).await;
    env.call(
        "POST",
        "/v1/queues/gaveup/messages",
        Some(json!({"payload": "x"})),
    )
    .await;
    let (_, got) = env
        .call(
            "POST",
            "/v1/queues/gaveup/receive",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    let delivery = got["deliveries"][0]["delivery_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ack = format!("{}/v1/queues/gaveup/deliveries/{delivery}/ack", env.base);
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // Redis busy for 1.5 s (a script that spins): the ack reaches it, but is run only then.
    let port = env.redis.port;
    let spin = "local t = redis.call('TIME') local s = t[1] * 1000 + t[2] / 1000 \
        repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 - s > 1500";
    let busy = std::thread::spawn(move || {
        let args = ["-p", &port.to_string(), "EVAL", spin, "0"].map(String::from);
        std::process::Command::new("redis-cli").args(args).output()
    });
    let answers_within_100ms = || {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        c.write_all(b"PING\r\n").unwrap();
        c.read(&mut [0u8; 16]).is_ok()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while answers_within_100ms() {
        assert!(
            std::time::Instant::now() < deadline,
            "the spinning script never began"
        );
    }
    let gave_up = impatient.post(&ack).bearer_auth(TOKEN).send().await;
    assert!(
        gave_up.is_err(),
        "answered while Redis was busy: {gave_up:?}"
    );
    busy.join().unwrap().unwrap();
    let (s, k) = env
        .call(
            "POST",
            &format!("/v1/queues/gaveup/deliveries/{delivery}/ack"),
            None,
        )
        .await;
    assert_eq!((s, k["acked"].as_bool()), (200, Some(true)), "{k}");
    let (_, q) = env.call("GET", "/v1/queues/gaveup", None).await;
    assert_eq!(q["counts"]["in_flight"], 0, "{q}");
    env.stop().await;
}

/// Receive takes `n`, `count`, `limit` and `max_messages` for `max`, and `timeout_ms` for
/// `wait_ms` (take too); extend takes `ms` and `visibility_timeout_ms` for `duration_ms`.
/// Other names are still refused, with the known ones in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_take_and_extend_take_the_other_usual_names() {
    let env = Env::start(config()).await;
    for i in 0..8 {
        env.call(
            "POST",
            "/v1/queues/al/messages",
            Some(json!({"payload": format!("p{i}")})),
        )
        .await;
    }
    let mut deliveries = Vec::new();
    for (field, n) in [("n", 2), ("count", 2), ("limit", 1), ("max_messages", 2)] {
        let (s, got) = env
            .call(
                "POST",
                "/v1/queues/al/receive",
                Some(json!({field: n, "timeout_ms": 5000})),
            )
            .await;
        assert_eq!(s, 200, "{field}: {got}");
        let list = got["deliveries"].as_array().unwrap();
        assert_eq!(list.len(), n, "{field}: {got}");
        deliveries.extend(list.iter().map(|d| d["delivery_id"].clone()));
    }
    for (i, field) in ["ms", "visibility_timeout_ms", "duration_ms"]
        .iter()
        .enumerate()
    {
        let d = deliveries[i].as_str().unwrap();
        let (s, x) = env
            .call(
                "POST",
                &format!("/v1/queues/al/deliveries/{d}/extend"),
                Some(json!({*field: 60000})),
            )
            .await;
        assert_eq!((s, x["extended"].as_bool()), (200, Some(true)), "{field}");
    }
    let d = deliveries[0].as_str().unwrap();
    for bad in [
        json!({"timeout_ms": 1000}),
        json!({"duration_ms": 1000, "ms": 1000}),
    ] {
        let (s, e) = env
            .call(
                "POST",
                &format!("/v1/queues/al/deliveries/{d}/extend"),
                Some(bad.clone()),
            )
            .await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (400, Some("invalid_argument")),
            "{bad}: {e}"
        );
    }
    for bad in [
        json!({"batch": 2}),
        json!({"max": 1, "count": 2}),
        json!({"n": 0}),
        json!({"timeout_ms": 30001}),
    ] {
        let (s, e) = env
            .call("POST", "/v1/queues/al/receive", Some(bad.clone()))
            .await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (400, Some("invalid_argument")),
            "{bad}: {e}"
        );
    }
    let (_, e) = env
        .call("POST", "/v1/queues/al/receive", Some(json!({"batch": 2})))
        .await;
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("batch") && message.contains("`max`") && message.contains("`wait_ms`"),
        "{message}"
    );

    env.call(
        "POST",
        "/v1/delayed/alt/messages",
        Some(json!({"payload": "v", "delay_ms": 200})),
    )
    .await;
    let (s, took) = env
        .call(
            "POST",
            "/v1/delayed/alt/take",
            Some(json!({"timeout_ms": 10000})),
        )
        .await;
    assert_eq!(
        (s, took["value"]["payload"].as_str()),
        (200, Some("v")),
        "{took}"
    );
    let (s, e) = env
        .call("POST", "/v1/delayed/alt/take", Some(json!({"timeout": 1})))
        .await;
    assert_eq!(
        (s, e["error"]["kind"].as_str()),
        (400, Some("invalid_argument"))
    );
    env.stop().await;
}

/// Dead letters under `/dead-letters` (the OpenAPI document's spelling) and `/dead` (the
/// first one): listed, requeued, purged by `DELETE` or by `POST .../purge`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_answer_under_both_spellings() {
    let env = Env::start(config()).await;
    env.configure("dd", 1, vec![Duration::from_millis(10)])
        .await;
    // Buries `id`: its one attempt is nacked (the queue must hold no other ready message).
    let bury = |id: String| {
        let env = &env;
        async move {
            env.call(
                "POST",
                "/v1/queues/dd/messages",
                Some(json!({"payload": id, "id": id})),
            )
            .await;
            let d = env.receive_and("dd", "nack").await;
            assert_eq!(d["id"].as_str(), Some(id.as_str()));
        }
    };
    for id in ["a", "b", "c"] {
        bury(id.into()).await;
    }
    let (s, long) = env.call("GET", "/v1/queues/dd/dead-letters", None).await;
    assert_eq!(s, 200);
    assert_eq!(long["dead_letters"].as_array().unwrap().len(), 3, "{long}");
    let (_, short) = env.call("GET", "/v1/queues/dd/dead?limit=5", None).await;
    assert_eq!(
        short["dead_letters"].as_array().unwrap().len(),
        3,
        "{short}"
    );
    let (s, _) = env
        .call("GET", "/v1/queues/dd/dead-letters?limit=0", None)
        .await;
    assert_eq!(s, 400);
    let (s, r) = env
        .call(
            "POST",
            "/v1/queues/dd/dead-letters/requeue",
            Some(json!({"ids": ["a"]})),
        )
        .await;
    assert_eq!((s, r["requeued"].as_u64()), (200, Some(1)), "{r}");
    let (s, r) = env
        .call(
            "POST",
            "/v1/queues/dd/dead/requeue",
            Some(json!({"ids": ["b"]})),
        )
        .await;
    assert_eq!((s, r["requeued"].as_u64()), (200, Some(1)), "{r}");
    for _ in 0..2 {
        let d = env.receive_and("dd", "ack").await;
        assert!(d["id"] == "a" || d["id"] == "b", "{d}");
    }
    // Each purge spelling, each time with one dead letter to purge.
    for (i, (method, path)) in [
        ("POST", "/v1/queues/dd/dead-letters/purge"),
        ("DELETE", "/v1/queues/dd/dead-letters"),
        ("POST", "/v1/queues/dd/dead/purge"),
        ("DELETE", "/v1/queues/dd/dead"),
    ]
    .into_iter()
    .enumerate()
    {
        let (s, e) = env.call_as(None, method, path, None).await;
        assert_eq!(s, 401, "{method} {path} needs the token: {e}");
        if i > 0 {
            bury(format!("d{i}")).await;
        }
        let (s, p) = env.call(method, path, None).await;
        assert_eq!(
            (s, p["purged"].as_u64()),
            (200, Some(1)),
            "{method} {path}: {p}"
        );
    }
    let (_, q) = env.call("GET", "/v1/queues/dd", None).await;
    assert_eq!(
        q["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0}),
        "{q}"
    );

    let (_, doc) = env.call("GET", "/openapi.json", None).await;
    let paths = &doc["paths"];
    for (path, method) in [
        ("/v1/queues/{name}/dead-letters", "get"),
        ("/v1/queues/{name}/dead-letters", "delete"),
        ("/v1/queues/{name}/dead-letters/requeue", "post"),
        ("/v1/queues/{name}/dead-letters/purge", "post"),
    ] {
        let op = &paths[path][method];
        assert!(op.is_object(), "{method} {path} not documented");
        assert_ne!(op["deprecated"], true, "{method} {path}");
    }
    for (path, method) in [
        ("/v1/queues/{name}/dead", "get"),
        ("/v1/queues/{name}/dead", "delete"),
        ("/v1/queues/{name}/dead/requeue", "post"),
        ("/v1/queues/{name}/dead/purge", "post"),
    ] {
        assert_eq!(
            paths[path][method]["deprecated"], true,
            "{method} {path}: the other spelling"
        );
    }
    env.stop().await;
}

/// `--host`/`--port` of `delayq serve`: the address they name.
#[test]
fn the_listen_address_of_host_and_port() {
    use delayq_serve::listen_address;
    let addr = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
    assert_eq!(listen_address(None, None), Ok(addr("127.0.0.1:7878")));
    assert_eq!(listen_address(None, Some(9000)), Ok(addr("127.0.0.1:9000")));
    assert_eq!(
        listen_address(Some("0.0.0.0"), Some(80)),
        Ok(addr("0.0.0.0:80"))
    );
    assert_eq!(listen_address(Some("::1"), None), Ok(addr("[::1]:7878")));
    assert_eq!(listen_address(Some("[::1]"), Some(1)), Ok(addr("[::1]:1")));
    assert!(listen_address(Some("localhost"), Some(5))
        .unwrap()
        .ip()
        .is_loopback());
    assert!(listen_address(Some(""), Some(5)).is_err());
    assert_eq!(
        delayq_serve::Config::default().listen,
        addr("127.0.0.1:7878")
    );
}

/// A server listening where `--port` says, on 127.0.0.1 by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_listens_on_the_port_it_is_given() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::start(delayq_serve::Config {
        listen: delayq_serve::listen_address(None, Some(port)).unwrap(),
        ..config()
    })
    .await;
    assert_eq!(env.base, format!("http://127.0.0.1:{port}"));
    let (s, _) = env.call("GET", "/v1/server", None).await;
    assert_eq!(s, 200);
    env.stop().await;
}

/// `PUT /v1/queues/{name}/settings` stores settings through core: the answer is what
/// `GET /v1/queues/{name}` shows, a setting left out keeps its value, the service's own
/// handle uses the new ones at once, and a bad value is a 400 that stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_stored_by_put() {
    let env = Env::start(config()).await;
    let path = "/v1/queues/st/settings";
    // Bad values first, on an empty Redis: each one stores nothing at all.
    for bad in [
        json!({}),
        json!({"visibility_timeout_ms": 0}),
        json!({"visibility_timeout_ms": 1125899906842625u64}),
        json!({"visibility_timeout_ms": -5}),
        json!({"max_attempts": 0}),
        json!({"max_attempts": 256}),
        json!({"max_attempts": 3, "shards": 3}),
        json!({"shards": 0}),
        json!({"backoff_ms": []}),
        json!({"backoff_ms": [10], "backoff_base_ms": 5}),
        json!({"backoff_base_ms": 1000, "backoff_max_ms": 10}),
        json!({"backoff": "linear 5"}),
        json!({"backoff": "schedule 5", "backoff_ms": [5]}),
        json!({"dead_letter_retention_ms": 1125899906842625u64}),
        json!({"visibility": 1000}),
    ] {
        let (s, e) = env.call("PUT", path, Some(bad.clone())).await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (400, Some("invalid_argument")),
            "{bad}: {e}"
        );
        assert_eq!(env.keys(), Vec::<String>::new(), "{bad} wrote to Redis");
    }
    let (s, e) = env
        .call_as(None, "PUT", path, Some(json!({"max_attempts": 2})))
        .await;
    assert_eq!(s, 401, "{e}");

    // The service holds a handle on the queue before its settings change.
    env.call(
        "POST",
        "/v1/queues/st/messages",
        Some(json!({"payload": "x", "id": "x"})),
    )
    .await;
    let (s, stored) = env
        .call(
            "PUT",
            path,
            Some(json!({
                "visibility_timeout_ms": 1500,
                "max_attempts": 1,
                "backoff_ms": [100, 200],
                "dead_letter_retention_ms": 60000,
                "idempotency_retention_ms": 5000,
            })),
        )
        .await;
    assert_eq!(s, 200, "{stored}");
    assert_eq!(
        stored,
        json!({
            "visibility_timeout_ms": 1500,
            "max_attempts": 1,
            "backoff": "schedule 100 200",
            "shards": 1,
            "dead_letter_retention_ms": 60000,
            "idempotency_retention_ms": 5000,
        })
    );
    let (_, q) = env.call("GET", "/v1/queues/st", None).await;
    assert_eq!(q["settings"], stored);
    let (s, got) = env.call("GET", path, None).await;
    assert_eq!((s, &got), (200, &stored));
    // The service's handle uses them: a lease of 1.5 s, and one attempt.
    let (_, r) = env
        .call(
            "POST",
            "/v1/queues/st/receive",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    let d = &r["deliveries"][0];
    let lease = d["deadline"].as_i64().unwrap() - env.client.server_time_ms().await.unwrap();
    assert!(lease <= 1500, "lease {lease} ms (the default is 30 s): {r}");
    let (s, _) = env
        .call("POST", "/v1/queues/st/deliveries/x/nack", None)
        .await;
    assert_eq!(s, 200);
    let (_, q) = env.call("GET", "/v1/queues/st", None).await;
    assert_eq!(q["counts"]["dead"], 1, "the one attempt was the last: {q}");

    // A part left out keeps its value; null turns a retention off; GET's answer goes back.
    let (s, now) = env
        .call(
            "PUT",
            path,
            Some(json!({"backoff_base_ms": 50, "backoff_max_ms": 500, "dead_letter_retention_ms": null})),
        )
        .await;
    assert_eq!(s, 200, "{now}");
    assert_eq!(now["backoff"], "exponential 50 500");
    assert_eq!(now["dead_letter_retention_ms"], Value::Null);
    assert_eq!(now["visibility_timeout_ms"], 1500);
    assert_eq!(now["idempotency_retention_ms"], 5000);
    let (s, again) = env.call("PUT", path, Some(now.clone())).await;
    assert_eq!((s, &again), (200, &now));
    let (_, back) = env
        .call(
            "PUT",
            path,
            Some(json!({"backoff": "schedule:10,20", "visibility_ms": 2000, "idempotency_retention_ms": 0})),
        )
        .await;
    assert_eq!(
        (
            &back["backoff"],
            &back["visibility_timeout_ms"],
            &back["idempotency_retention_ms"]
        ),
        (&json!("schedule 10 20"), &json!(2000), &Value::Null),
        "{back}"
    );

    // A bad value leaves the stored settings as they were, the good ones beside it too.
    let before = env.redis.cli(&["HGETALL", "{dq:st}:settings"]);
    for bad in [
        json!({"max_attempts": 3, "visibility_timeout_ms": 0}),
        json!({"max_attempts": 3, "shards": 2}),
    ] {
        let (s, e) = env.call("PUT", path, Some(bad.clone())).await;
        assert_eq!(
            (s, e["error"]["kind"].as_str()),
            (400, Some("invalid_argument")),
            "{bad}: {e}"
        );
        assert_eq!(
            env.redis.cli(&["HGETALL", "{dq:st}:settings"]),
            before,
            "{bad}"
        );
    }
    let (s, e) = env.call("PUT", "/v1/queues/st/settings", None).await;
    assert_eq!(s, 400, "a PUT that names nothing: {e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("visibility_timeout_ms"),
        "{e}"
    );
    env.stop().await;
}

/// A change of the number of shards through `PUT .../settings` reaches the service's own
/// handle, which had read the old layout: offers and receives go on, in the new shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_shards_by_put_is_used_by_the_service() {
    let env = Env::start(config()).await;
    env.call(
        "POST",
        "/v1/queues/rs/messages",
        Some(json!({"payload": "one"})),
    )
    .await;
    env.receive_and("rs", "ack").await;
    let (s, stored) = env
        .call("PUT", "/v1/queues/rs/settings", Some(json!({"shards": 4})))
        .await;
    assert_eq!((s, &stored["shards"]), (200, &json!(4)), "{stored}");
    for i in 0..8 {
        let (s, o) = env
            .call(
                "POST",
                "/v1/queues/rs/messages",
                Some(json!({"payload": format!("m{i}"), "id": format!("m{i}")})),
            )
            .await;
        assert_eq!(s, 201, "{o}");
    }
    let shards = env
        .keys()
        .iter()
        .filter(|k| k.ends_with(":ready") && k.contains("dq:rs:"))
        .count();
    assert!(
        shards > 1,
        "the messages are in the shards: {:?}",
        env.keys()
    );
    let mut got = 0;
    while got < 8 {
        let (_, r) = env
            .call(
                "POST",
                "/v1/queues/rs/receive",
                Some(json!({"max": 8, "wait_ms": 5000})),
            )
            .await;
        let list = r["deliveries"].as_array().unwrap();
        assert!(!list.is_empty(), "{r}");
        for d in list {
            let id = d["id"].as_str().unwrap();
            let (s, _) = env
                .call("POST", &format!("/v1/queues/rs/deliveries/{id}/ack"), None)
                .await;
            assert_eq!(s, 200);
        }
        got += list.len();
    }
    let (_, q) = env.call("GET", "/v1/queues/rs", None).await;
    assert_eq!(
        q["counts"],
        json!({"delayed": 0, "ready": 0, "in_flight": 0, "dead": 0}),
        "{q}"
    );
    assert_eq!(q["settings"]["shards"], 4);
    env.stop().await;
}
