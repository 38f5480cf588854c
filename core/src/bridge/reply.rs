//! [`Reply`]: a consume handler run by the host, whose outcome the host reports later.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::sync::oneshot;

/// What a consume handler reports: `Err(failure)` nacks the delivery.
pub type HandlerOutcome = std::result::Result<(), String>;

/// Where the host reports the outcome of one handler call, from whatever call of its own
/// learns it (e.g. when the promise a JavaScript handler returned settles). The first
/// report counts; a reply dropped unsent reports a failure. The default one reports to
/// nobody (a delivery that no consume handler got).
#[derive(Default)]
pub struct Reply(Mutex<Option<oneshot::Sender<HandlerOutcome>>>);

impl Reply {
    /// Reports `outcome`; false if it was reported before, or nobody waits for it.
    pub fn send(&self, outcome: HandlerOutcome) -> bool {
        let tx = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        tx.is_some_and(|tx| tx.send(outcome).is_ok())
    }
}

/// A handler for [`ReliableQueue::consume`](crate::ReliableQueue::consume) that runs in
/// the host: each call gives `hand` the delivery (or whatever `T` is) and a [`Reply`]
/// (`hand` passes them to the host's thread and must not block), then awaits the reply.
pub fn replying<T, F>(hand: F) -> impl Fn(T) -> Replied + Send + Sync + 'static
where
    F: Fn(T, Reply) + Send + Sync + 'static,
{
    move |item| {
        let (tx, rx) = oneshot::channel();
        hand(item, Reply(Mutex::new(Some(tx))));
        Replied(rx)
    }
}

/// The outcome a [`Reply`] reports.
pub struct Replied(oneshot::Receiver<HandlerOutcome>);

impl Future for Replied {
    type Output = HandlerOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HandlerOutcome> {
        let never = |_| Err("the handler never finished".to_owned());
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or_else(never))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_report_counts() {
        let (tx, rx) = std::sync::mpsc::channel();
        let handler = replying(move |n: u32, reply| tx.send((n, reply)).unwrap());
        let replied = handler(1);
        let (n, reply) = rx.recv().unwrap();
        assert_eq!(n, 1);
        assert!(reply.send(Err("boom".into())));
        assert!(!reply.send(Ok(())));
        assert_eq!(replied.await, Err("boom".into()));
    }

    #[tokio::test]
    async fn a_reply_never_sent_is_a_failure() {
        let handler = replying(|_: (), reply| drop(reply));
        assert_eq!(handler(()).await, Err("the handler never finished".into()));
        assert!(!Reply::default().send(Ok(())), "nobody waits");
    }
}
