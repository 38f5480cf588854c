//! What the server holds: the client, queue handles, deliveries received over HTTP, the
//! offset of the Redis server's clock, and the queues it knows.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{Client, DelayedQueue, Delivery, ReliableQueue, ReliableQueueOptions};
use tokio_util::sync::CancellationToken;

use crate::logs::Esc;
use crate::webhook::Webhooks;
use crate::Config;

/// How long past its lease a delivery received over HTTP is still remembered, so that a
/// late ack says "lease lost" (`acked: false`) instead of "unknown delivery" (404).
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(300);

/// A delivery received over HTTP, waiting for its ack, nack or extend (its payload, already
/// in the answer, dropped).
pub(crate) struct Held {
    pub(crate) queue: String,
    pub(crate) delivery: Delivery,
    /// Receipt order (from `AppState::held_seq`): the latest delivery of a message is the
    /// one its id names in `/deliveries/{id}/...`.
    pub(crate) seq: u64,
    /// How the first ack or nack settled it, and when: a retry (its first answer lost), or
    /// one sent while the first was running, gets the same answer for [`SETTLED_KEPT`].
    pub(crate) settled: Arc<tokio::sync::OnceCell<(Settled, std::time::Instant)>>,
}

/// How long a delivery acked or nacked over HTTP is remembered, so that a retried ack or
/// nack gets the first one's answer.
pub(crate) const SETTLED_KEPT: Duration = Duration::from_secs(60);

/// The outcome of a delivery's ack or nack over HTTP.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Settled {
    /// Acked: whether it found the lease held.
    Acked(bool),
    /// Nacked: whether it found the lease held.
    Nacked(bool),
}

/// The deliveries held here, by `delivery_id` and by (queue, message id), so that a call
/// naming a message id looks at that message's deliveries only.
#[derive(Default)]
pub(crate) struct HeldDeliveries {
    by_id: HashMap<String, Held>,
    by_message: HashMap<(String, String), Vec<String>>,
}

impl HeldDeliveries {
    pub(crate) fn insert(&mut self, delivery_id: String, held: Held) {
        let message = (held.queue.clone(), held.delivery.id.clone());
        self.by_message
            .entry(message)
            .or_default()
            .push(delivery_id.clone());
        self.by_id.insert(delivery_id, held);
    }

    pub(crate) fn remove(&mut self, delivery_id: &str) -> Option<Held> {
        let held = self.by_id.remove(delivery_id)?;
        let message = (held.queue.clone(), held.delivery.id.clone());
        if let Some(ids) = self.by_message.get_mut(&message) {
            ids.retain(|d| d != delivery_id);
            if ids.is_empty() {
                self.by_message.remove(&message);
            }
        }
        Some(held)
    }

    pub(crate) fn get(&self, delivery_id: &str) -> Option<&Held> {
        self.by_id.get(delivery_id)
    }

    /// The latest delivery of message `id` of `queue` held here.
    pub(crate) fn latest(&self, queue: &str, id: &str) -> Option<&Held> {
        let ids = self.by_message.get(&(queue.to_owned(), id.to_owned()))?;
        ids.iter()
            .filter_map(|d| self.by_id.get(d))
            .max_by_key(|h| h.seq)
    }

    /// Forgets every delivery for which `keep` is false.
    pub(crate) fn retain(&mut self, keep: impl Fn(&Held) -> bool) {
        let forgotten: Vec<String> = (self.by_id.iter())
            .filter(|(_, h)| !keep(h))
            .map(|(d, _)| d.clone())
            .collect();
        for d in forgotten {
            self.remove(&d);
        }
    }
}

/// A queue handle that can be closed (which stops its transfer task).
pub(crate) trait Close: Clone {
    fn close(&self);
    fn name(&self) -> &str;
}

impl Close for ReliableQueue {
    fn close(&self) {
        ReliableQueue::close(self)
    }
    fn name(&self) -> &str {
        ReliableQueue::name(self)
    }
}

impl Close for DelayedQueue {
    fn close(&self) {
        DelayedQueue::close(self)
    }
    fn name(&self) -> &str {
        DelayedQueue::name(self)
    }
}

/// This process's handles on one kind of queue, with the requests using each.
pub(crate) struct Handles<Q> {
    map: Mutex<HashMap<String, Entry<Q>>>,
    /// Names each handle made, so that a request ending finds its own.
    made: AtomicU64,
}

struct Entry<Q> {
    q: Q,
    serial: u64,
    /// Requests using it now.
    users: usize,
    /// Kept for good: a request on it succeeded, or the queue is known.
    kept: bool,
}

impl<Q: Close> Handles<Q> {
    fn new() -> Self {
        Handles {
            map: Default::default(),
            made: AtomicU64::new(0),
        }
    }

    fn kept(&self, name: &str) -> Option<Q> {
        let map = self.map.lock().unwrap();
        map.get(name).filter(|e| e.kept).map(|e| e.q.clone())
    }

    fn using(
        self: &Arc<Self>,
        name: &str,
        make: impl FnOnce() -> delayq::Result<Q>,
    ) -> delayq::Result<InUse<Q>> {
        let mut map = self.map.lock().unwrap();
        let entry = match map.get_mut(name) {
            Some(e) => e,
            None => {
                let q = make()?;
                let serial = self.made.fetch_add(1, Ordering::Relaxed);
                map.entry(name.to_owned()).or_insert(Entry {
                    q,
                    serial,
                    users: 0,
                    kept: false,
                })
            }
        };
        entry.users += 1;
        Ok(InUse {
            q: entry.q.clone(),
            serial: entry.serial,
            handles: self.clone(),
            succeeded: false,
        })
    }

    fn hold(&self, name: &str, make: impl FnOnce() -> delayq::Result<Q>) -> delayq::Result<Q> {
        let mut map = self.map.lock().unwrap();
        if let Some(e) = map.get_mut(name) {
            e.kept = true;
            return Ok(e.q.clone());
        }
        let q = make()?;
        let serial = self.made.fetch_add(1, Ordering::Relaxed);
        map.insert(
            name.to_owned(),
            Entry {
                q: q.clone(),
                serial,
                users: 0,
                kept: true,
            },
        );
        Ok(q)
    }

    /// Forgets the handle on `name` (requests using it finish with it). Whether there was one.
    fn forget(&self, name: &str) -> bool {
        self.map.lock().unwrap().remove(name).is_some()
    }

    /// A request using the handle `serial` on `name` ended: the handle is closed and
    /// forgotten when no request uses it any more and none succeeded.
    fn end(&self, name: &str, serial: u64, succeeded: bool) {
        let mut map = self.map.lock().unwrap();
        let Some(e) = map.get_mut(name).filter(|e| e.serial == serial) else {
            return;
        };
        e.users -= 1;
        e.kept |= succeeded;
        if e.users == 0 && !e.kept {
            let e = map.remove(name).expect("looked up above");
            drop(map);
            e.q.close();
        }
    }
}

/// A handle on a queue used by a request (see [`AppState::reliable`]).
pub(crate) struct InUse<Q: Close> {
    q: Q,
    serial: u64,
    handles: Arc<Handles<Q>>,
    succeeded: bool,
}

impl<Q: Close> InUse<Q> {
    /// The request succeeded: this process keeps the handle (and lists the queue).
    pub(crate) fn succeeded(&mut self) {
        self.succeeded = true;
    }

    /// The handle itself, to outlive the request (a give-back after the answer).
    pub(crate) fn handle(&self) -> Q {
        self.q.clone()
    }
}

impl<Q: Close> std::ops::Deref for InUse<Q> {
    type Target = Q;
    fn deref(&self) -> &Q {
        &self.q
    }
}

impl<Q: Close> Drop for InUse<Q> {
    fn drop(&mut self) {
        self.handles.end(self.q.name(), self.serial, self.succeeded);
    }
}

pub(crate) struct AppState {
    pub(crate) client: Client,
    pub(crate) config: Config,
    /// The `Host` headers it answers (DNS rebinding).
    pub(crate) hosts: crate::host::Hosts,
    pub(crate) stop: CancellationToken,
    reliable: Arc<Handles<ReliableQueue>>,
    delayed: Arc<Handles<DelayedQueue>>,
    pub(crate) held: Mutex<HeldDeliveries>,
    pub(crate) held_seq: AtomicU64,
    /// Redis server clock minus this machine's, in ms.
    clock_offset: AtomicI64,
    /// Queues found by SCAN, named in the config, or used through this server.
    known: Mutex<Known>,
    pub(crate) webhooks: Webhooks,
}

#[derive(Default)]
pub(crate) struct Known {
    pub(crate) reliable: BTreeSet<String>,
    pub(crate) delayed: BTreeSet<String>,
}

pub(crate) fn no_scheduler() -> delayq::SchedulerOptions {
    delayq::SchedulerOptions {
        enabled: false,
        ..Default::default()
    }
}

pub(crate) fn local_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

impl AppState {
    pub(crate) fn new(
        client: Client,
        config: Config,
        hosts: crate::host::Hosts,
        stop: CancellationToken,
    ) -> Self {
        let known = Known {
            reliable: config.queues.iter().cloned().collect(),
            delayed: config.delayed_queues.iter().cloned().collect(),
        };
        AppState {
            webhooks: Webhooks::new(&config),
            client,
            config,
            hosts,
            stop,
            reliable: Arc::new(Handles::new()),
            delayed: Arc::new(Handles::new()),
            held: Default::default(),
            held_seq: AtomicU64::new(0),
            clock_offset: AtomicI64::new(0),
            known: Mutex::new(known),
        }
    }

    /// A handle on the reliable queue `name` (validated by core; nothing is sent to Redis)
    /// for a mutating request: this process's handle, made now when there is none. A new
    /// one runs the queue's transfer task while requests use it, and this process keeps it
    /// once one of them succeeded ([`InUse::succeeded`]); when the last request using it
    /// ends without success (a 409, a 404, a 503), it is closed and forgotten: a refused
    /// request leaves no handle, transfer task, subscription or metric series behind. The
    /// server's handles name no settings: they use the stored ones.
    pub(crate) fn reliable(&self, name: &str) -> delayq::Result<InUse<ReliableQueue>> {
        self.reliable.using(name, || {
            self.client
                .reliable_queue(name, ReliableQueueOptions::default())
        })
    }

    /// This process's handle on the reliable queue `name`, made and kept now when there is
    /// none: for a queue it knows (named, found, a webhook queue).
    pub(crate) fn held_reliable(&self, name: &str) -> delayq::Result<ReliableQueue> {
        self.reliable.hold(name, || {
            self.client
                .reliable_queue(name, ReliableQueueOptions::default())
        })
    }

    /// Drops this process's handle on the reliable queue `name`, after its number of shards
    /// changed (a handle keeps the layout it first read): the next call makes a new one,
    /// and the queue's webhook workers start again with it. Calls under way finish with
    /// the old handle, which goes with them.
    pub(crate) fn renew_reliable(self: &Arc<Self>, name: &str) {
        if self.reliable.forget(name) {
            self.webhooks.restart(self, name);
        }
    }

    /// A handle on the delayed queue `name` for a mutating request, as
    /// [`AppState::reliable`].
    pub(crate) fn delayed(&self, name: &str) -> delayq::Result<InUse<DelayedQueue>> {
        self.delayed.using(name, || self.client.delayed_queue(name))
    }

    /// This process's handle on the delayed queue `name`, made and kept now when there is
    /// none: for a queue it knows.
    fn held_delayed(&self, name: &str) -> delayq::Result<DelayedQueue> {
        self.delayed.hold(name, || self.client.delayed_queue(name))
    }

    /// A handle for a read-only call (`GET`, `/metrics`, the dashboard). A queue this
    /// service holds, or knows (named on the command line, found by `SCAN`, used through
    /// it), gets the service's own handle, as a mutating call would. Any other name gets a
    /// transient handle without a transfer task, dropped after the call: an
    /// unauthenticated `GET` of made-up names must not make the service hold a handle, a
    /// transfer task, a subscription and metric series for each of them for good.
    pub(crate) fn reliable_read(&self, name: &str) -> delayq::Result<ReliableQueue> {
        if let Some(q) = self.reliable.kept(name) {
            return Ok(q);
        }
        if self.is_known(true, name) {
            return self.held_reliable(name);
        }
        self.client.reliable_queue(
            name,
            ReliableQueueOptions {
                scheduler: no_scheduler(),
                ..Default::default()
            },
        )
    }

    /// [`AppState::reliable_read`] for a delayed queue.
    pub(crate) fn delayed_read(&self, name: &str) -> delayq::Result<DelayedQueue> {
        if let Some(q) = self.delayed.kept(name) {
            return Ok(q);
        }
        if self.is_known(false, name) {
            return self.held_delayed(name);
        }
        self.client.delayed_queue_with(name, no_scheduler())
    }

    fn is_known(&self, reliable: bool, name: &str) -> bool {
        let known = self.known.lock().unwrap();
        if reliable {
            known.reliable.contains(name)
        } else {
            known.delayed.contains(name)
        }
    }

    /// Remembers a queue used through the server, for the dashboard and `/metrics`.
    pub(crate) fn saw(&self, reliable: bool, name: &str) {
        let mut known = self.known.lock().unwrap();
        let set = if reliable {
            &mut known.reliable
        } else {
            &mut known.delayed
        };
        if !set.contains(name) {
            set.insert(name.to_owned());
        }
    }

    pub(crate) fn known(&self) -> (Vec<String>, Vec<String>) {
        let known = self.known.lock().unwrap();
        (
            known.reliable.iter().cloned().collect(),
            known.delayed.iter().cloned().collect(),
        )
    }

    /// The Redis server's clock now, estimated from this machine's and the offset measured
    /// with `TIME` (within half a round trip of the measurement).
    pub(crate) fn server_now_ms(&self) -> i64 {
        local_ms() + self.clock_offset.load(Ordering::Relaxed)
    }

    async fn measure_clock(&self) {
        let before = local_ms();
        if let Ok(server) = self.client.server_time_ms().await {
            let after = local_ms();
            self.clock_offset
                .store(server - (before + after) / 2, Ordering::Relaxed);
        }
    }

    /// Finds queues in Redis (core's `scan_queues`: a `SCAN` of the server, or of every
    /// master of a cluster).
    async fn discover(&self) -> delayq::Result<()> {
        let found = self.client.scan_queues().await?;
        let mut known = self.known.lock().unwrap();
        known.reliable.extend(found.reliable);
        known.delayed.extend(found.delayed);
        Ok(())
    }

    /// The clock, discovery, the forgetting of old deliveries and the webhook workers.
    pub(crate) fn start_background(self: &Arc<Self>) {
        let state = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            let mut round = 0u64;
            loop {
                tokio::select! {
                    _ = state.stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                state.measure_clock().await;
                round += 1;
                // Every 30 s: a SCAN walks the whole keyspace.
                if round % 6 == 1 && !state.client.is_closed() {
                    if let Err(e) = state.discover().await {
                        tracing::debug!(error = %Esc(&e), "queue discovery failed");
                    }
                }
                let cutoff = state.server_now_ms() - FORGET_AFTER.as_millis() as i64;
                state
                    .held
                    .lock()
                    .unwrap()
                    .retain(|h| match h.settled.get() {
                        Some((_, at)) => at.elapsed() < SETTLED_KEPT,
                        None => h.delivery.deadline() > cutoff,
                    });
                if state.config.webhooks {
                    state.webhooks.refresh(&state).await;
                }
            }
        });
    }
}
