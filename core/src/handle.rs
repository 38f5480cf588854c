//! What every queue handle shares: its client, its closed state, its share of the
//! transfer task, and the cancel-safe way to run a blocking command.

use std::future::Future;
use std::sync::{Arc, Mutex};

use redis::aio::ConnectionLike;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::connection::Dedicated;
use crate::error::{Error, Result};
use crate::scheduler::SchedulerGuard;

pub(crate) struct Handle {
    pub(crate) client: Client,
    token: CancellationToken,
    scheduler: Mutex<Option<Arc<SchedulerGuard>>>,
}

impl Handle {
    pub(crate) fn new(client: Client, scheduler: Option<Arc<SchedulerGuard>>) -> Self {
        let token = client.inner.token.child_token();
        Handle {
            client,
            token,
            scheduler: Mutex::new(scheduler),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.token.is_cancelled() {
            self.client.check_open()?;
            return Err(Error::Closed("the queue handle is closed"));
        }
        Ok(())
    }

    /// Whether this handle (or its client) was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves when this handle (or its client) is closed.
    pub(crate) async fn closed(&self) {
        self.token.cancelled().await
    }

    /// The error of a call on this handle once it is closed.
    pub(crate) fn closed_error(&self) -> Error {
        self.check_open()
            .err()
            .unwrap_or(Error::Closed("the queue handle is closed"))
    }

    /// The runtime that the client's background tasks run on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.client.inner.runtime
    }

    pub(crate) fn commands(&self) -> impl ConnectionLike + Send + Clone + 'static {
        self.client.inner.conn.commands()
    }

    /// Stops this handle's share of the transfer task; later calls fail with `Closed`.
    pub(crate) fn close(&self) {
        self.token.cancel();
        self.scheduler.lock().expect("scheduler lock").take();
    }

    /// Runs a blocking command on a dedicated connection, in a task of its own, so that
    /// a caller who gives up (drops the future, closes the handle) cannot lose what the
    /// server hands over meanwhile: `give_back` returns it to the queue.
    pub(crate) async fn blocking<T, Op, OpFut, Back, BackFut>(
        &self,
        what: &'static str,
        op: Op,
        give_back: Back,
    ) -> Result<Option<T>>
    where
        T: Send + 'static,
        Op: FnOnce(Dedicated) -> OpFut + Send + 'static,
        OpFut: Future<Output = (Dedicated, Result<Option<T>>)> + Send + 'static,
        Back: FnOnce(T, Dedicated) -> BackFut + Send + 'static,
        BackFut: Future<Output = Dedicated> + Send + 'static,
    {
        self.check_open()?;
        let conn = self.client.inner.conn.clone();
        let dedicated = conn.dedicated().await?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.client.inner.runtime.spawn(async move {
            let (mut dedicated, reply) = op(dedicated).await;
            let healthy = reply.is_ok();
            if let Err(Ok(Some(value))) = tx.send(reply) {
                // Nobody waits any more: hand the value back.
                dedicated = give_back(value, dedicated).await;
            }
            if healthy {
                conn.release(dedicated);
            }
        });
        tokio::select! {
            reply = rx => match reply {
                Ok(reply) => reply,
                Err(_) => Err(Error::Connection(format!("the blocking {what} was interrupted"))),
            },
            _ = self.token.cancelled() => {
                self.client.check_open()?;
                Err(Error::Closed("the queue handle was closed while waiting"))
            }
        }
    }
}
