//! One pub/sub connection per client, shared by the transfer tasks of all its queues.
//!
//! A transfer task [`Subscriber::subscribe`]s to its queue's channel and gets a
//! [`Subscription`] whose `Notify` fires on every message (and after every resubscribe,
//! since messages may have been missed meanwhile). One task keeps the connection:
//! - it (re)subscribes every channel some transfer task wants, and unsubscribes the rest;
//! - it PINGs the server after [`HEALTH_INTERVAL`] without traffic, and takes a PING with
//!   no answer within [`HEALTH_TIMEOUT`] for a dead connection (a silent partition leaves
//!   the TCP connection open): a dead peer is noticed within their sum;
//! - on any loss it connects again with back-off, logging once per loss.
//!
//! Pub/sub only wakes transfer tasks early: each also runs on a timer and a periodic
//! reconcile, so a lost message costs at most the reconcile interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::logs::Escaped;

/// Quiet time on the pub/sub connection before a PING.
pub(crate) const HEALTH_INTERVAL: Duration = Duration::from_secs(3);
/// How long a PING may go unanswered before the connection is taken for dead.
pub(crate) const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// The channels wanted, each with the `Notify` of its subscribers and how many they are.
type Wanted = HashMap<String, (Arc<Notify>, usize)>;

/// A client's shared subscriber. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Subscriber {
    inner: Arc<Shared>,
}

struct Shared {
    wanted: Mutex<Wanted>,
    /// Wakes the connection task when `wanted` changed.
    changed: Notify,
}

/// A transfer task's interest in one channel; unsubscribes when dropped.
pub(crate) struct Subscription {
    channel: String,
    notify: Arc<Notify>,
    shared: Arc<Shared>,
}

impl Subscription {
    /// Fires on each message on the channel and after each (re)subscribe.
    pub(crate) fn notify(&self) -> &Arc<Notify> {
        &self.notify
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut wanted = self.shared.wanted.lock().expect("subscriber lock");
        if let Some((_, n)) = wanted.get_mut(&self.channel) {
            *n -= 1;
            if *n == 0 {
                wanted.remove(&self.channel);
            }
        }
        drop(wanted);
        self.shared.changed.notify_one();
    }
}

impl Subscriber {
    /// Starts the connection task on `runtime`; it ends when `token` is cancelled.
    pub(crate) fn spawn(
        runtime: &tokio::runtime::Handle,
        conn: Connection,
        token: CancellationToken,
    ) -> Self {
        let inner = Arc::new(Shared {
            wanted: Mutex::new(HashMap::new()),
            changed: Notify::new(),
        });
        runtime.spawn(keep_connected(conn, inner.clone(), token));
        Subscriber { inner }
    }

    /// Subscribes to `channel` (one server-side subscription however many ask).
    pub(crate) fn subscribe(&self, channel: &str) -> Subscription {
        let notify = {
            let mut wanted = self.inner.wanted.lock().expect("subscriber lock");
            let entry = wanted
                .entry(channel.to_owned())
                .or_insert_with(|| (Arc::new(Notify::new()), 0));
            entry.1 += 1;
            entry.0.clone()
        };
        self.inner.changed.notify_one();
        Subscription {
            channel: channel.to_owned(),
            notify,
            shared: self.inner.clone(),
        }
    }
}

/// Exponential back-off between 50 ms and 2 s.
struct Backoff(Duration);

impl Backoff {
    fn next(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(2));
        d
    }
}

/// How long a subscription the server refused (an ACL rule without the channel) waits
/// before it is asked again: the reconcile interval moves due entries meanwhile.
const REFUSED_RETRY: Duration = Duration::from_secs(30);

async fn keep_connected(conn: Connection, shared: Arc<Shared>, token: CancellationToken) {
    let mut backoff = Backoff(Duration::from_millis(50));
    // Channels the server refused (an ACL rule without them), and when: said once, not
    // taken for a lost connection, and asked for again every REFUSED_RETRY.
    let mut refused: HashMap<String, Instant> = HashMap::new();
    loop {
        // Connect only while some channel is wanted.
        while shared.wanted.lock().expect("subscriber lock").is_empty() {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = shared.changed.notified() => {}
            }
        }
        let outcome = tokio::select! {
            _ = token.cancelled() => return,
            r = serve(&conn, &shared, &mut refused) => r,
        };
        if token.is_cancelled() {
            return;
        }
        match outcome {
            Ok(()) => backoff = Backoff(Duration::from_millis(50)),
            Err(e) => tracing::warn!(error = %Escaped(&e), "pub/sub connection lost; reconnecting"),
        }
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tokio::time::sleep(backoff.next()) => {}
        }
    }
}

/// Serves one pub/sub connection until it fails (an error) or nothing is wanted (`Ok`).
async fn serve(
    conn: &Connection,
    shared: &Shared,
    refused: &mut HashMap<String, Instant>,
) -> crate::Result<()> {
    let (mut sink, mut stream) = conn.pubsub().await?.split();
    let mut subscribed: HashMap<String, Arc<Notify>> = HashMap::new();
    loop {
        // Bring the subscriptions in line with what is wanted.
        let wanted: Vec<(String, Arc<Notify>)> = shared
            .wanted
            .lock()
            .expect("subscriber lock")
            .iter()
            .map(|(c, (n, _))| (c.clone(), n.clone()))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let gone: Vec<String> = subscribed
            .keys()
            .filter(|c| !wanted.iter().any(|(w, _)| w == *c))
            .cloned()
            .collect();
        for channel in gone {
            within(HEALTH_TIMEOUT, sink.unsubscribe(&channel)).await?;
            subscribed.remove(&channel);
        }
        for (channel, notify) in wanted {
            let recently = refused
                .get(&channel)
                .is_some_and(|t| t.elapsed() < REFUSED_RETRY);
            if subscribed.contains_key(&channel) || recently {
                continue;
            }
            match tokio::time::timeout(HEALTH_TIMEOUT, sink.subscribe(&channel)).await {
                Ok(Err(e)) if e.code() == Some("NOPERM") => {
                    if refused.insert(channel.clone(), Instant::now()).is_none() {
                        let e = crate::Error::from(e);
                        tracing::warn!(channel = ?channel, error = %Escaped(&e), "the server refused the subscription (an ACL rule without this channel?); its queue's due entries move at every reconcile interval instead; asking again every 30 s");
                    }
                    continue;
                }
                subscribed_or_not => within_outcome(HEALTH_TIMEOUT, subscribed_or_not)?,
            }
            refused.remove(&channel);
            // Messages may have been missed while not subscribed.
            notify.notify_one();
            subscribed.insert(channel, notify);
        }
        // A refused channel is asked for again once its pause is over.
        let retry = refused.values().map(|t| *t + REFUSED_RETRY).min();
        // Deliver messages until the wanted set changes or the connection fails.
        loop {
            tokio::select! {
                _ = shared.changed.notified() => break,
                msg = stream.next() => match msg {
                    Some(msg) => {
                        if let Some(n) = subscribed.get(msg.get_channel_name()) {
                            n.notify_one();
                        }
                    }
                    None => return Err(crate::Error::Connection("the pub/sub connection closed".into())),
                },
                _ = tokio::time::sleep(HEALTH_INTERVAL) => {
                    within(HEALTH_TIMEOUT, sink.ping::<redis::Value>()).await?;
                }
                _ = tokio::time::sleep_until(retry.unwrap_or_else(far_future)), if retry.is_some() => break,
            }
        }
    }
}

async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> crate::Result<T> {
    within_outcome(limit, tokio::time::timeout(limit, fut).await)
}

/// The outcome of a request given `limit` on the pub/sub connection.
fn within_outcome<T>(
    limit: Duration,
    outcome: std::result::Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
) -> crate::Result<T> {
    match outcome {
        Ok(r) => Ok(r?),
        Err(_) => Err(crate::Error::Connection(format!(
            "no answer on the pub/sub connection within {limit:?}"
        ))),
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}
