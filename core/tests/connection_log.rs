//! A log that says the connection to Redis was lost also says when it is back: an operator
//! reading it after a restart of Redis sees both.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, RedisServer};
use delayq::Client;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// The messages of every event logged, in order.
struct Messages(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Messages {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0.lock().unwrap().push(m.0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_lost_and_opened_again_is_logged_both_ways() {
    let messages = Arc::new(Mutex::new(Vec::new()));
    let layer = Messages(messages.clone());
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    let mut server = RedisServer::start();
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.delayed_queue("logged").unwrap();
    q.size().await.unwrap();
    let seen = |what: &str| messages.lock().unwrap().iter().any(|m| m.contains(what));
    assert!(!seen("open again"), "{:?}", messages.lock().unwrap());

    server.stop();
    assert!(q.size().await.is_err(), "a call while Redis is down fails");
    // Dropped when the call met the closed connection; or, had it been idle for a second
    // (then replaced without a word, as after a server's idle timeout), none could open.
    let lost = seen("Redis connection dropped") || seen("cannot open a Redis connection");
    assert!(lost, "{:?}", messages.lock().unwrap());
    server.restart();
    let back = eventually(Duration::from_secs(10), || async { q.size().await.is_ok() }).await;
    assert!(back, "Redis answers again");
    // The newest of the two records, once every connection that was lost has been used
    // again (the transfer task's within its 1 s reconcile), says the connection is back.
    let last_is_open = || {
        let m = messages.lock().unwrap();
        let last = m.iter().rev().find(|m| m.contains("Redis connection"));
        // ("cannot open a Redis connection" is a loss too: it has the words)
        last.is_some_and(|m| m.contains("open again"))
    };
    let settled = eventually(Duration::from_secs(10), || async { last_is_open() }).await;
    assert!(settled, "{:?}", messages.lock().unwrap());
    c.close();
}
