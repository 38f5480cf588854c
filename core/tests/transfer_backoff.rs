//! A transfer task that keeps failing retries with its back-off (50 ms, doubling): no retry
//! comes sooner, whatever wakes the task meanwhile (SPEC section 5). The failures are timed
//! where they are logged, in the task itself, so that a loaded machine can only make the
//! gaps longer.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::RedisServer;
use delayq::Client;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// The instants of the "transfer failed" records of queue `queue`.
struct Failures {
    queue: String,
    at: Arc<Mutex<Vec<Instant>>>,
}

impl<S: tracing::Subscriber> Layer<S> for Failures {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Fields(String);
        impl Visit for Fields {
            fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={v:?}", f.name()));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let queue = format!("queue={:?}", self.queue);
        if fields.0.contains("transfer failed") && fields.0.contains(&queue) {
            self.at.lock().unwrap().push(Instant::now());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_transfer_task_retries_no_sooner_than_its_back_off() {
    let at = Arc::new(Mutex::new(Vec::new()));
    let layer = Failures {
        queue: "failing".into(),
        at: at.clone(),
    };
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    let server = RedisServer::start();
    server.cli(&["SET", "redisson_delay_queue_timeout:{failing}", "a string"]);
    let c = Client::connect(&server.url()).await.unwrap();
    let q = c.delayed_queue("failing").unwrap();
    // Offers to another key of the queue's channel would wake the task: they must not
    // cut its back-off short either.
    let deadline = Instant::now() + Duration::from_secs(20);
    while at.lock().unwrap().len() < 5 {
        assert!(Instant::now() < deadline, "no five failures in 20 s");
        server.cli(&["PUBLISH", "redisson_delay_queue_channel:{failing}", "1"]);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at = at.lock().unwrap().clone();
    for (i, pair) in at.windows(2).take(4).enumerate() {
        let gap = pair[1] - pair[0];
        let least = Duration::from_millis(50 << i);
        assert!(
            gap >= least,
            "retry {} after {gap:?}, before its back-off {least:?}: {at:?}",
            i + 1
        );
    }
    drop(q);
    c.close();
}
