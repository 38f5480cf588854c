//! Consumers and producers that record into a [`Tally`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq::{DelayedQueue, ReliableQueue};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::tally::Tally;

/// No consumer loop runs longer than this, whatever its test does.
const HARD_LIMIT: Duration = Duration::from_secs(240);

/// Pause after a failed call, so that a consumer facing a dead server does not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(100);

async fn pause(stop: &CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(ERROR_PAUSE) => {}
    }
}

/// A consumer of a delayed queue: `take(wait)` in a loop until `stop`.
pub fn spawn_taker(
    q: DelayedQueue,
    tally: Arc<Tally>,
    wait: Option<Duration>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        while !stop.is_cancelled() && start.elapsed() < HARD_LIMIT {
            let taken = tokio::select! {
                _ = stop.cancelled() => break,
                r = q.take(wait) => r,
            };
            match taken {
                Ok(Some(value)) => {
                    tracing::debug!(queue = q.name(), value = %String::from_utf8_lossy(&value[..value.len().min(24)]), "taken");
                    tally.received(&value, None)
                }
                Ok(None) => {
                    tracing::debug!(queue = q.name(), "take: none");
                    tally.empty()
                }
                Err(e) => {
                    tracing::debug!(queue = q.name(), error = %e, "take failed");
                    tally.error("take", &e);
                    pause(&stop).await;
                }
            }
        }
    })
}

/// A consumer of a reliable queue: `receive(wait)` and `ack` in a loop until `stop`.
pub fn spawn_receiver(
    q: ReliableQueue,
    tally: Arc<Tally>,
    wait: Option<Duration>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        while !stop.is_cancelled() && start.elapsed() < HARD_LIMIT {
            let received = tokio::select! {
                _ = stop.cancelled() => break,
                r = q.receive(wait) => r,
            };
            match received {
                Ok(Some(d)) => {
                    tracing::debug!(queue = q.name(), id = %d.id, attempt = d.attempt, "received");
                    tally.received(&d.payload, Some(d.due_at));
                    match d.ack().await {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::debug!(queue = q.name(), id = %d.id, "ack: delivery already over");
                            tally.ack_failed()
                        }
                        Err(e) => {
                            tracing::debug!(queue = q.name(), id = %d.id, error = %e, "ack failed");
                            tally.error("ack", &e);
                            tally.ack_failed();
                        }
                    }
                }
                Ok(None) => {
                    tracing::debug!(queue = q.name(), "receive: none");
                    tally.empty()
                }
                Err(e) => {
                    tracing::debug!(queue = q.name(), error = %e, "receive failed");
                    tally.error("receive", &e);
                    pause(&stop).await;
                }
            }
        }
    })
}

/// Offers `value` to a delayed queue and records the outcome: the due time the server
/// computed when acknowledged, unknown on an error. Returns whether it was acknowledged.
pub async fn offer_delayed(q: &DelayedQueue, tally: &Tally, value: &[u8], delay: Duration) -> bool {
    tally.offering(value);
    let start = Instant::now();
    let r = q.offer(value, delay).await;
    tally.offer_took(start.elapsed());
    tracing::debug!(queue = q.name(), took = ?start.elapsed(), ok = r.is_ok(), "offer");
    match r {
        Ok(due) => {
            tally.offered(value, due, due);
            true
        }
        Err(e) => {
            tally.error("offer", &e);
            false
        }
    }
}

/// Offers `value` to a reliable queue and records the outcome: acknowledged with the due
/// time bracketed by the server clock before and after the call, unknown on an error.
pub async fn offer_reliable(
    q: &ReliableQueue,
    tally: &Tally,
    value: &[u8],
    delay: Duration,
) -> bool {
    let clock = tally.clock();
    let delay_ms = delay.as_millis() as i64;
    tally.offering(value);
    let before = clock.now_ms();
    let start = Instant::now();
    let r = q.offer(value, delay, None).await;
    tally.offer_took(start.elapsed());
    tracing::debug!(queue = q.name(), took = ?start.elapsed(), ok = r.is_ok(), "offer");
    match r {
        Ok(_) => {
            tally.offered(value, before + delay_ms, clock.now_ms() + delay_ms);
            true
        }
        Err(e) => {
            tally.error("offer", &e);
            false
        }
    }
}

/// A value unique in its scenario: `tag-i`, padded with `-` to `len` bytes if longer.
pub fn value(tag: &str, i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{tag}-{i}").into_bytes();
    if v.len() < len {
        v.resize(len, b'-');
    }
    v
}
