//! The service's log: names and ids written quoted and escaped, one record per line.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{config, until, Env, Logs};

/// Queue names and message ids come from URLs, request bodies and Redis. Written into the
/// log as they are, a line feed in one forges a record (`ev\n<timestamp> ERROR forged:
/// line`); serve and core write them quoted and escaped, so each record is one line.
// The only test of this binary, with the process's global subscriber: a subscriber set
// for one thread missed events whose callsites other tests' threads had registered first
// (tracing caches each callsite's interest), and this test failed 2 CI runs in 5.
#[tokio::test]
async fn names_and_ids_are_escaped_in_the_log() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_env_filter("delayq_serve=debug,delayq=debug")
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let env = Env::start(delayq_serve::Config {
        webhook_secret: Some("whsec-test".into()),
        webhook_timeout: Duration::from_millis(500),
        webhook_concurrency: 2,
        ..config()
    })
    .await;
    const FORGED: &str = "2026-11-27T00:00:00.000000Z ERROR forged: line";
    // Webhook workers: a name and an id with a quote and a space (a line feed cannot be
    // in either: see `ids_and_names_no_header_can_hold_are_refused_for_webhooks`).
    // An endpoint that refuses connections: the first attempt fails at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (s, offered) = env
        .call(
            "POST",
            "/v1/queues/wq%22%C3%A9/messages",
            Some(json!({
                "payload": "x",
                "id": "id \"q\" é",
                "callback_url": format!("http://{closed}/"),
            })),
        )
        .await;
    assert_eq!(s, 201, "{offered}");
    until(Duration::from_secs(20), || async {
        logs.text().contains("webhook attempt failed").then_some(())
    })
    .await;
    env.stop().await;
    let log = logs.text();
    let line = |what: &str| {
        let found = log.lines().find(|l| l.contains(what));
        found.unwrap_or_else(|| panic!("no {what:?} line in\n{log}"))
    };
    let (hook_queue, hook_id) = (r#"queue="wq\"é""#, r#"id="id \"q\" é""#);
    assert!(line("delivering to webhooks").contains(hook_queue), "{log}");
    let failed = line("webhook attempt failed");
    assert!(
        failed.contains(hook_queue) && failed.contains(hook_id),
        "{failed}"
    );
    for line in log.lines() {
        assert!(
            !line.starts_with(FORGED) && !line.contains('\r'),
            "a forged line in the log:\n{log}"
        );
    }
}
