//! Webhook delivery (seed 003's job `url`): a message offered over HTTP with a
//! `callback_url` is POSTed there when due.
//!
//! Where the URL lives: not in the payload (an envelope would change what every other
//! consumer of the queue, in any language, reads, and what the dashboard shows), but in a
//! hash beside the queue, `{dq:N}:webhook` (same hash tag, so the same cluster slot):
//! message id -> JSON `{"url", "attempts", "last_status", "last_error"}`. The queue is
//! registered in the set `delayq:webhook-queues`, and every `delayq serve` process with
//! webhooks on runs workers for each registered queue: they are that queue's consumers.
//! A queue is consumed either by webhooks or by receive, never both: the service refuses
//! (409 `conflict`) an offer with a callback to a queue that holds other messages, one
//! without a callback to a webhook queue that holds messages, and a receive on a webhook
//! queue; an offer without a callback that finds a webhook queue empty makes it a plain
//! queue again (`api::offer`). A message received by the webhook workers without a record
//! (offered by a library) fails, and ends in the dead letters with that error recorded.
//!
//! One attempt: `POST url` with the payload as body; a 2xx acks the message (and deletes
//! its record); any other status, an error or no answer within the timeout records the
//! status and error and nacks it with the queue's back-off; after the queue's max attempts
//! the nack buries it in the dead letters, where the record tells the last status and error.
//! Each queue has its own workers (`--webhook-concurrency` of them, or the number given to
//! that queue with `--webhook-concurrency-of NAME=N`), so a slow endpoint holds only its
//! own queue's workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Delivery, ReliableQueue};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::logs::Esc;
use crate::state::AppState;
use crate::Config;

/// The set of queues whose messages are delivered to webhooks.
pub(crate) const REGISTRY_KEY: &str = "delayq:webhook-queues";

/// Header with the signature: `v2=` and the hex HMAC-SHA256 of the request's timestamp, id,
/// queue and attempt headers and its body ([`sign`]), keyed with `DELAYQ_WEBHOOK_SECRET`
/// (or, without it, with a random key of the process).
pub const SIGNATURE_HEADER: &str = "x-delayq-signature";
/// The version of the signature scheme, before `=` in [`SIGNATURE_HEADER`]. (`v1` signed
/// the timestamp and the body only.)
pub const SIGNATURE_VERSION: &str = "v2";
/// Header with the message id.
pub const ID_HEADER: &str = "x-delayq-id";
/// Header with the queue's name.
pub const QUEUE_HEADER: &str = "x-delayq-queue";
/// Header with the attempt (1 for the first).
pub const ATTEMPT_HEADER: &str = "x-delayq-attempt";
/// Header with the Unix time (seconds) the request was signed at.
pub const TIMESTAMP_HEADER: &str = "x-delayq-timestamp";

/// Refuses a queue name or message id that a webhook request could not carry as it is in
/// its header (`header`): a line feed or DEL is no header value (a tab may be one, but is
/// refused with them), and a space at either end is trimmed by the receiver's parser, so the
/// signature it checks would not be the one sent. Checked when the message is offered,
/// before anything reaches Redis: such a message could never be delivered.
pub(crate) fn check_header_value(what: &str, header: &str, value: &str) -> Result<(), String> {
    let control = value.chars().any(|c| c.is_ascii_control());
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    if control || padded {
        return Err(format!(
            "with callback_url, {what} goes in the request's {header} header, which cannot hold \
             a control character (a line feed, DEL; a tab is refused too) nor keep a space at \
             its start or end: \
             {value:?}; offer it without those, or without callback_url"
        ));
    }
    Ok(())
}

/// The hash of webhook records of queue `name`.
pub(crate) fn record_key(name: &str) -> String {
    format!("{{dq:{name}}}:webhook")
}

/// What the server keeps about a message to be delivered to a webhook.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct WebhookRecord {
    /// Where the message is POSTed.
    pub(crate) url: String,
    /// Attempts made so far.
    #[serde(default)]
    pub(crate) attempts: u32,
    /// The HTTP status of the last failed attempt (none: no answer).
    #[serde(default)]
    pub(crate) last_status: Option<u16>,
    /// Why the last attempt failed.
    #[serde(default)]
    pub(crate) last_error: Option<String>,
}

impl WebhookRecord {
    /// The record as read-only views show it: the URL [`redact_url`]ed.
    pub(crate) fn redacted(mut self) -> Self {
        self.url = redact_url(&self.url);
        self
    }
}

/// A callback URL safe to show: its user name, password, the value of every query
/// parameter and its fragment replaced by `***` (a callback URL often carries a token:
/// `https://user:PW@host/hook?api_key=KEY` shows as
/// `https://***:***@host/hook?api_key=***`). The scheme, host, port and path stay.
pub(crate) fn redact_url(url: &str) -> String {
    match url {
        "" => String::new(),
        url => delayq::redact_url_keeping(url, &[]),
    }
}

/// The signature of a webhook request: the hex HMAC-SHA256 of its timestamp, message id,
/// queue name and attempt (the values of its `x-delayq-*` headers) and its body, each
/// followed by a line feed but the body: `"{timestamp}\n{id}\n{queue}\n{attempt}\n{body}"`.
/// A header value cannot hold a line feed, so no two requests sign the same text (a `.`
/// could be in an id or a queue's name). A request replayed with another id, for another
/// queue or as another attempt does not verify.
pub fn sign(
    secret: &[u8],
    timestamp: u64,
    id: &str,
    queue: &str,
    attempt: u32,
    body: &[u8],
) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    for field in [
        timestamp.to_string().as_bytes(),
        id.as_bytes(),
        queue.as_bytes(),
        attempt.to_string().as_bytes(),
    ] {
        mac.update(field);
        mac.update(b"\n");
    }
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

pub(crate) struct Webhooks {
    http: reqwest::Client,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Per queue: offers hold it shared, a change of the queue's kind (webhook or not)
    /// exclusively, so that this process's offers cannot mix the two kinds.
    kinds: Mutex<HashMap<String, std::sync::Weak<tokio::sync::RwLock<()>>>>,
    /// The key of the signatures: `DELAYQ_WEBHOOK_SECRET`, or 32 random bytes drawn when
    /// the service starts: every request is signed.
    key: Vec<u8>,
}

impl Webhooks {
    pub(crate) fn new(config: &Config) -> Self {
        let http = reqwest::Client::builder()
            .timeout(config.webhook_timeout)
            .connect_timeout(config.webhook_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("delayq-serve/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("HTTP client");
        let key = match &config.webhook_secret {
            Some(secret) => secret.as_bytes().to_vec(),
            None => delayq::random::random::<[u8; 32]>().to_vec(),
        };
        Webhooks {
            http,
            running: Default::default(),
            kinds: Default::default(),
            key,
        }
    }

    /// Stops the workers of queue `name`, if any run here, and starts new ones with this
    /// process's current handle on it (see `AppState::renew_reliable`). A worker that is
    /// delivering finishes that attempt first.
    pub(crate) fn restart(&self, state: &Arc<AppState>, name: &str) {
        let Some(stop) = self.running.lock().unwrap().remove(name) else {
            return;
        };
        stop.cancel();
        self.ensure_running(state, name);
    }

    /// Writes the record of message `id` of queue `name` (to be POSTed to `url`): over
    /// one already there only when `overwrite`. Returns whether it wrote.
    pub(crate) async fn record(
        &self,
        state: &AppState,
        name: &str,
        id: &str,
        url: &str,
        overwrite: bool,
    ) -> delayq::Result<bool> {
        let record = WebhookRecord {
            url: url.to_owned(),
            attempts: 0,
            last_status: None,
            last_error: None,
        };
        let json = serde_json::to_string(&record).expect("record to JSON");
        let set = if overwrite { "HSET" } else { "HSETNX" };
        let cmd = redis::cmd(set)
            .arg(record_key(name))
            .arg(id)
            .arg(json)
            .clone();
        Ok(state.client.query::<i64>(&cmd).await? == 1 || overwrite)
    }

    /// Deletes the record of message `id` (best effort: a record left behind is only
    /// shown, never POSTed, unless a message with that id is offered).
    pub(crate) async fn forget(&self, state: &AppState, name: &str, id: &str) {
        let cmd = redis::cmd("HDEL").arg(record_key(name)).arg(id).clone();
        if let Err(e) = state.client.query::<i64>(&cmd).await {
            tracing::warn!(queue = ?name, error = %Esc(&e), "could not delete a webhook record");
        }
    }

    /// Registers `name` as a webhook queue (again, in case Redis lost the registry) and
    /// starts its workers here.
    pub(crate) async fn register(&self, state: &Arc<AppState>, name: &str) -> delayq::Result<()> {
        state
            .client
            .query::<i64>(redis::cmd("SADD").arg(REGISTRY_KEY).arg(name))
            .await?;
        if state.config.webhooks {
            self.ensure_running(state, name);
        }
        Ok(())
    }

    /// Whether `name` is a webhook queue (in the set [`REGISTRY_KEY`]).
    pub(crate) async fn is_registered(&self, state: &AppState, name: &str) -> delayq::Result<bool> {
        state
            .client
            .query::<bool>(redis::cmd("SISMEMBER").arg(REGISTRY_KEY).arg(name))
            .await
    }

    /// Adds `name` to the webhook queues; whether it was not one.
    pub(crate) async fn add(&self, state: &AppState, name: &str) -> delayq::Result<bool> {
        let cmd = redis::cmd("SADD").arg(REGISTRY_KEY).arg(name).clone();
        Ok(state.client.query::<i64>(&cmd).await? == 1)
    }

    /// `name` is no webhook queue any more (it holds nothing): out of the set, and its
    /// workers here stop (other processes' stop at their next refresh, or when one of
    /// them receives a message without a record there). Whether it was one.
    pub(crate) async fn remove(&self, state: &AppState, name: &str) -> delayq::Result<bool> {
        let cmd = redis::cmd("SREM").arg(REGISTRY_KEY).arg(name).clone();
        let was = state.client.query::<i64>(&cmd).await? == 1;
        self.stop_workers(name);
        Ok(was)
    }

    fn stop_workers(&self, name: &str) {
        if let Some(stop) = self.running.lock().unwrap().remove(name) {
            stop.cancel();
            tracing::info!(queue = ?name, "no longer a webhook queue; its workers stop");
        }
    }

    /// The lock of queue `name`'s kind (see `Webhooks::kinds`).
    pub(crate) fn kind_lock(&self, name: &str) -> Arc<tokio::sync::RwLock<()>> {
        let mut kinds = self.kinds.lock().unwrap();
        if let Some(lock) = kinds.get(name).and_then(std::sync::Weak::upgrade) {
            return lock;
        }
        kinds.retain(|_, w| w.strong_count() > 0);
        let lock = Arc::new(tokio::sync::RwLock::new(()));
        kinds.insert(name.to_owned(), Arc::downgrade(&lock));
        lock
    }

    /// Starts workers for every registered queue (some other process may have added one),
    /// and stops those of queues no longer registered (emptied, then offered a message
    /// without a callback through some process).
    pub(crate) async fn refresh(&self, state: &Arc<AppState>) {
        match state
            .client
            .query::<Vec<String>>(redis::cmd("SMEMBERS").arg(REGISTRY_KEY))
            .await
        {
            Ok(names) => {
                for name in &names {
                    self.ensure_running(state, name);
                }
                let gone: Vec<String> = self
                    .running
                    .lock()
                    .unwrap()
                    .keys()
                    .filter(|n| !names.contains(n))
                    .cloned()
                    .collect();
                for name in gone {
                    // Asked again: it may have been registered since the list was read.
                    if let Ok(false) = self.is_registered(state, &name).await {
                        self.stop_workers(&name);
                    }
                }
            }
            Err(e) => tracing::debug!(error = %Esc(&e), "could not read the webhook queues"),
        }
    }

    fn ensure_running(&self, state: &Arc<AppState>, name: &str) {
        let mut running = self.running.lock().unwrap();
        if running.contains_key(name) {
            return;
        }
        let queue = match state.held_reliable(name) {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(queue = ?name, error = %Esc(&e), "not a queue name; no webhook workers");
                return;
            }
        };
        state.saw(true, name);
        let stop = state.stop.child_token();
        running.insert(name.to_owned(), stop.clone());
        let workers = state
            .config
            .webhook_concurrency_of
            .get(name)
            .copied()
            .unwrap_or(state.config.webhook_concurrency)
            .max(1);
        for _ in 0..workers {
            tokio::spawn(worker(
                state.clone(),
                self.http.clone(),
                queue.clone(),
                stop.clone(),
            ));
        }
        tracing::info!(queue = ?name, workers, "delivering to webhooks");
    }
}

async fn worker(
    state: Arc<AppState>,
    http: reqwest::Client,
    queue: ReliableQueue,
    stop: CancellationToken,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        let got = tokio::select! {
            _ = stop.cancelled() => break,
            got = queue.receive(Some(Duration::from_secs(2))) => got,
        };
        match got {
            Ok(Some(delivery)) => {
                pause = Duration::from_millis(100);
                deliver(&state, &http, &queue, delivery).await;
            }
            Ok(None) => {}
            Err(e) => {
                if matches!(e.kind(), delayq::ErrorKind::Closed) {
                    break;
                }
                tracing::warn!(queue = ?queue.name(), error = %Esc(&e), retry_in = ?pause, "webhook worker could not receive");
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

fn content_type(payload: &[u8]) -> &'static str {
    if serde_json::from_slice::<serde::de::IgnoredAny>(payload).is_ok() {
        "application/json"
    } else if std::str::from_utf8(payload).is_ok() {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

/// One attempt at delivering `d` to its webhook.
async fn deliver(
    state: &Arc<AppState>,
    http: &reqwest::Client,
    queue: &ReliableQueue,
    d: Delivery,
) {
    let key = record_key(queue.name());
    let record: Option<String> = match state
        .client
        .query(redis::cmd("HGET").arg(&key).arg(&d.id))
        .await
    {
        Ok(r) => r,
        Err(e) => {
            // Redis is unreachable: the lease ends and the message comes back.
            tracing::warn!(queue = ?queue.name(), error = %Esc(&e), "could not read a webhook record");
            return;
        }
    };
    // (A record without a URL only tells why an earlier attempt failed.)
    let record = record.and_then(|r| serde_json::from_str::<WebhookRecord>(&r).ok());
    let Some(mut record) = record.filter(|r| !r.url.is_empty()) else {
        // A queue that stopped being a webhook queue (emptied, then offered a message
        // without a callback through another process): the message is not for webhooks;
        // given back untouched, and this process's workers stop.
        match state.webhooks.is_registered(state, queue.name()).await {
            Ok(true) => {}
            Ok(false) => {
                if let Err(e) = d.release().await {
                    tracing::warn!(queue = ?queue.name(), error = %Esc(&e), "could not give back a message of a queue that is no webhook queue any more; it returns after its lease");
                }
                state.webhooks.stop_workers(queue.name());
                return;
            }
            Err(e) => {
                tracing::warn!(queue = ?queue.name(), error = %Esc(&e), "could not read the webhook queues");
                return;
            }
        }
        let record = WebhookRecord {
            url: String::new(),
            attempts: d.attempt,
            last_status: None,
            last_error: Some("no callback_url recorded for this message".into()),
        };
        fail(state, queue, &key, d, record).await;
        return;
    };
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let signature = sign(
        &state.webhooks.key,
        timestamp,
        &d.id,
        queue.name(),
        d.attempt,
        &d.payload,
    );
    let request = http
        .post(&record.url)
        .header("content-type", content_type(&d.payload))
        .header(ID_HEADER, &d.id)
        .header(QUEUE_HEADER, queue.name())
        .header(ATTEMPT_HEADER, d.attempt.to_string())
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(SIGNATURE_HEADER, format!("{SIGNATURE_VERSION}={signature}"));
    record.attempts = d.attempt;
    // The lease is kept while the endpoint takes its time (up to the webhook timeout).
    let sent = d.while_leased(request.body(d.payload.clone()).send()).await;
    match sent {
        Ok(response) if response.status().is_success() => match d.ack().await {
            Ok(true) => state.webhooks.forget(state, queue.name(), &d.id).await,
            Ok(false) => {
                // Its record stays for the delivery that now holds the message.
                tracing::warn!(queue = ?queue.name(), id = ?d.id, "webhook answered after the lease was lost; the message is delivered again");
            }
            Err(e) => {
                tracing::warn!(queue = ?queue.name(), id = ?d.id, error = %Esc(&e), "webhook answered but the ack failed; it may be delivered again")
            }
        },
        Ok(response) => {
            let status = response.status();
            record.last_status = Some(status.as_u16());
            record.last_error = Some(format!("HTTP {status}"));
            fail(state, queue, &key, d, record).await;
        }
        Err(e) => {
            record.last_status = None;
            record.last_error = Some(if e.is_timeout() {
                format!(
                    "no answer within {} ms",
                    state.config.webhook_timeout.as_millis()
                )
            } else {
                // Without the URL: it may carry a token in its query.
                let e = e.without_url();
                let mut msg = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    msg.push_str(": ");
                    msg.push_str(&s.to_string());
                    source = s.source();
                }
                msg
            });
            fail(state, queue, &key, d, record).await;
        }
    }
}

/// Records why an attempt failed, then nacks with the queue's back-off (or buries).
async fn fail(
    state: &Arc<AppState>,
    queue: &ReliableQueue,
    key: &str,
    d: Delivery,
    record: WebhookRecord,
) {
    tracing::debug!(queue = ?queue.name(), id = ?d.id, attempt = d.attempt, error = ?record.last_error, "webhook attempt failed");
    let json = serde_json::to_string(&record).expect("record to JSON");
    if let Err(e) = state
        .client
        .query::<i64>(redis::cmd("HSET").arg(key).arg(&d.id).arg(json))
        .await
    {
        tracing::warn!(queue = ?queue.name(), error = %Esc(&e), "could not record a webhook failure");
    }
    if let Err(e) = d.nack(None).await {
        tracing::warn!(queue = ?queue.name(), id = ?d.id, error = %Esc(&e), "could not nack a failed webhook; it returns after its lease");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_urls_are_shown_without_credentials() {
        for (url, shown) in [
            (
                "http://user:PW@host.example/path?api_key=KEY",
                "http://***:***@host.example/path?api_key=***",
            ),
            (
                "https://host.example:8443/a/b?token=t&x=1&flag#frag",
                "https://host.example:8443/a/b?token=***&x=***&***#***",
            ),
            ("https://tok@host.example/", "https://***@host.example/"),
            ("https://host.example/hook", "https://host.example/hook"),
            ("", ""),
            ("not a url", "<unparsable url>"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn signature_is_hmac_sha256_of_the_headers_and_body_on_lines() {
        // printf '1700000000\nord-1\nhooks\n1\nhello' | openssl dgst -sha256 -hmac secret
        assert_eq!(
            sign(b"secret", 1_700_000_000, "ord-1", "hooks", 1, b"hello"),
            "1c62bb1e8239ba01e4fbb15bf9eac4282e9571f867830b1279b697123370f1fe"
        );
        // An id and a queue name split elsewhere are another text.
        assert_ne!(
            sign(b"secret", 1, "a.b", "c", 1, b""),
            sign(b"secret", 1, "a", "b.c", 1, b"")
        );
    }
}
