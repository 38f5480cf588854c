//! What every queue handle shares: its client, its closed state, its share of the
//! transfer task, and the cancel-safe way to run a blocking command.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::ConnectionLike;
use tokio::sync::oneshot;
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
    /// server hands over meanwhile: `give_back` returns it to the queue. That holds at any
    /// instant: while the command runs (the task finds nobody to send the value to), and
    /// after it sent the value but before the caller's future was polled again (the
    /// receiving end, dropped, finds the value in the channel).
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
        Back: FnOnce(T) -> BackFut + Send + 'static,
        BackFut: Future<Output = ()> + Send + 'static,
    {
        self.check_open()?;
        let conn = self.client.inner.conn.clone();
        let dedicated = conn.dedicated().await?;
        let (tx, rx) = oneshot::channel();
        let give_back = Arc::new(Mutex::new(Some(give_back)));
        let task_give_back = give_back.clone();
        self.client.inner.runtime.spawn(async move {
            let (dedicated, reply) = op(dedicated).await;
            if reply.is_ok() {
                conn.release(dedicated);
            }
            if let Err(Ok(Some(value))) = tx.send(reply) {
                // Nobody waits any more: hand the value back.
                if let Some(back) = take_once(&task_give_back) {
                    back(value).await;
                }
            }
        });
        let mut receiving = Receiving {
            rx,
            give_back,
            runtime: self.client.inner.runtime.clone(),
        };
        tokio::select! {
            reply = &mut receiving.rx => match reply {
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

fn take_once<B>(slot: &Mutex<Option<B>>) -> Option<B> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// The caller's end of a blocking call. Dropped with a value in it (sent after the
/// caller's last poll), it hands the value back.
struct Receiving<T, Back, BackFut>
where
    T: Send + 'static,
    Back: FnOnce(T) -> BackFut + Send + 'static,
    BackFut: Future<Output = ()> + Send + 'static,
{
    rx: oneshot::Receiver<Result<Option<T>>>,
    give_back: Arc<Mutex<Option<Back>>>,
    runtime: tokio::runtime::Handle,
}

impl<T, Back, BackFut> Drop for Receiving<T, Back, BackFut>
where
    T: Send + 'static,
    Back: FnOnce(T) -> BackFut + Send + 'static,
    BackFut: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        // No send succeeds after this: the task then gives the value back itself.
        self.rx.close();
        if let Ok(Ok(Some(value))) = self.rx.try_recv() {
            if let Some(back) = take_once(&self.give_back) {
                self.runtime.spawn(back(value));
            }
        }
    }
}
