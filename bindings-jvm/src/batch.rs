//! Coalesces concurrent `offer` calls on one queue handle into `offer_all` script calls.
//!
//! A JVM service offers from many threads at once, one value per call. Sent one by one,
//! each offer costs a script call and a round trip; here, while one `offer_all` is in
//! flight, the offers that arrive meanwhile wait and go together in the next one (at most
//! 1000, core's chunk). Nothing waits for a batch to fill: a lone offer goes at once. One
//! batch is in flight per handle, so offers keep their order. Each entry is checked by core
//! before it joins a batch, so a bad argument fails only its own call; a Redis error fails
//! every call of the batch it was in (all of them are about the same keys).
//!
//! Not JVM-specific: this belongs in core (see the binding's report); it lives here until
//! core offers it.

use std::time::Duration;

use delayq::delay::{check_value, delay_to_millis};
use tokio::sync::{mpsc, oneshot};

const MAX_BATCH: usize = 1000;

struct Request {
    value: Vec<u8>,
    delay: Duration,
    reply: oneshot::Sender<delayq::Result<i64>>,
}

/// The sending side; the batching task ends when it is dropped.
pub(crate) struct OfferBatcher {
    tx: mpsc::UnboundedSender<Request>,
}

impl OfferBatcher {
    /// Starts the batching task for `queue` on `runtime`.
    pub(crate) fn new(queue: delayq::DelayedQueue, runtime: &tokio::runtime::Runtime) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(run(queue, rx));
        OfferBatcher { tx }
    }

    /// Offers one value; resolves to its due time when its batch is done.
    pub(crate) fn offer(
        &self,
        value: Vec<u8>,
        delay: Duration,
    ) -> impl std::future::Future<Output = delayq::Result<i64>> + Send + 'static {
        let checked = check_value(&value).and_then(|()| delay_to_millis(delay));
        let (reply, rx) = oneshot::channel();
        let sent = checked.and_then(|_| {
            self.tx
                .send(Request {
                    value,
                    delay,
                    reply,
                })
                .map_err(|_| delayq::Error::Closed("the queue handle is closed"))
        });
        async move {
            sent?;
            rx.await
                .map_err(|_| delayq::Error::Closed("the queue handle is closed"))?
        }
    }
}

async fn run(queue: delayq::DelayedQueue, mut rx: mpsc::UnboundedReceiver<Request>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let result = queue
            .offer_all(batch.iter().map(|r| (&r.value, r.delay)))
            .await;
        match result {
            Ok(dues) => {
                for (r, due) in batch.drain(..).zip(dues) {
                    let _ = r.reply.send(Ok(due));
                }
            }
            Err(e) => {
                for r in batch.drain(..) {
                    let _ = r.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
