//! [`Waits`]: handovers known by an id, for a host that cannot hold a Rust value across
//! its calls.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::handover::{Claim, Handover, Taken};
use crate::Result;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a host that exits gives [`Waits::give_back_all`]: the exit waits that long at
/// the most.
pub const EXIT_LIMIT: Duration = Duration::from_secs(2);

/// The [`Handover`]s of one host thread waiting for their callers, each under an id the
/// host chose (e.g. the id of a promise). The host ends each one once: "claimed" (the call
/// returned and the caller takes the outcome) or "gone" (the caller gave up); when the host
/// exits, [`give_back_all`](Waits::give_back_all) gives back what every one took.
///
/// `H` is what the host needs to hand an outcome over (e.g. its environment), passed when
/// a wait ends.
pub struct Waits<H> {
    waiting: HashMap<u64, Wait<H>>,
}

/// A handover taken out of [`Waits`], to end outside any borrow of the registry (ending it
/// may call back into the host, which may register or end waits).
pub struct Wait<H>(Box<dyn Waiting<H>>);

trait Waiting<H> {
    fn end(self: Box<Self>, host: H, claimed: bool);
    fn give_back(self: Box<Self>) -> BoxFuture;
}

/// A handover and what hands its outcome to the caller.
struct Entry<T: Taken, F>(Handover<T>, F);

impl<H, T: Taken, F: FnOnce(H, Option<Result<T>>)> Waiting<H> for Entry<T, F> {
    fn end(self: Box<Self>, host: H, claimed: bool) {
        let Entry(handover, finish) = *self;
        match claimed.then(|| handover.claim()) {
            Some(Claim::Ready(outcome)) => finish(host, Some(outcome)),
            _ => finish(host, None), // dropping the handover gives up
        }
    }

    fn give_back(self: Box<Self>) -> BoxFuture {
        let handover = self.0;
        Box::pin(async move { handover.give_back().await })
    }
}

impl<H> Default for Waits<H> {
    fn default() -> Self {
        Waits {
            waiting: HashMap::new(),
        }
    }
}

impl<H> Waits<H> {
    /// Registers `handover` under `id`. Once ended, `finish` gets the outcome (`None` when
    /// the caller was gone, or a claim found nothing: what was taken goes back). An
    /// earlier wait under the same id is given up.
    pub fn insert<T, F>(&mut self, id: u64, handover: Handover<T>, finish: F)
    where
        T: Taken,
        F: FnOnce(H, Option<Result<T>>) + 'static,
    {
        self.waiting
            .insert(id, Wait(Box::new(Entry(handover, finish))));
    }

    /// Takes the wait `id` out, to [`end`](Wait::end) it; none if it ended already.
    pub fn remove(&mut self, id: u64) -> Option<Wait<H>> {
        self.waiting.remove(&id)
    }

    /// How many waits are registered.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether none is registered.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The host exits: takes every wait out (their `finish` is never called) and returns
    /// what gives back what they took, one after the other, for at most `limit` (run it
    /// on the client's runtime; what is not back by then stays where core's calls leave
    /// it: a delivery comes back when its lease ends).
    pub fn give_back_all(&mut self, limit: Duration) -> impl Future<Output = ()> + Send {
        let all: Vec<_> = self.waiting.drain().map(|(_, w)| w.0.give_back()).collect();
        async move {
            let one_by_one = async {
                for give_back in all {
                    give_back.await;
                }
            };
            let _ = tokio::time::timeout(limit, one_by_one).await;
        }
    }
}

impl<H> Wait<H> {
    /// Ends the wait: `claimed`, the caller takes the outcome (the call returned); not
    /// claimed, the caller is gone and what the call took goes back.
    pub fn end(self, host: H, claimed: bool) {
        self.0.end(host, claimed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handover::tests::Counted;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// What the `finish` of each wait saw: the host, and whether it got an outcome.
    type Finished = Rc<RefCell<Vec<(&'static str, bool)>>>;

    /// A handover whose call returned at once.
    async fn ready(given_back: &Arc<AtomicUsize>) -> Handover<Counted> {
        let counter = given_back.clone();
        let handover = Handover::start(tokio::runtime::Handle::current(), async move {
            Ok(Counted(counter))
        });
        handover.ready().await;
        handover
    }

    fn finish(seen: &Finished) -> impl FnOnce(&'static str, Option<Result<Counted>>) {
        let seen = seen.clone();
        move |host, outcome| seen.borrow_mut().push((host, outcome.is_some()))
    }

    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    /// Registers one wait and ends it: what its `finish` saw, and how many were given back.
    async fn end_one(claimed: bool) -> (Vec<(&'static str, bool)>, usize) {
        let (given_back, seen) = (Arc::new(AtomicUsize::new(0)), Finished::default());
        let mut waits = Waits::default();
        waits.insert(7, ready(&given_back).await, finish(&seen));
        assert_eq!(waits.len(), 1);
        waits.remove(7).unwrap().end("host", claimed);
        assert!(waits.remove(7).is_none() && waits.is_empty(), "ended once");
        settle().await;
        let seen = seen.borrow().clone();
        (seen, given_back.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_claimed_wait_hands_its_outcome_over() {
        assert_eq!(end_one(true).await, (vec![("host", true)], 0));
    }

    #[tokio::test]
    async fn a_wait_whose_caller_is_gone_gives_back_what_it_took() {
        assert_eq!(end_one(false).await, (vec![("host", false)], 1));
    }

    #[tokio::test]
    async fn at_exit_every_wait_gives_back_without_finishing() {
        let (given_back, seen) = (Arc::new(AtomicUsize::new(0)), Finished::default());
        let mut waits = Waits::default();
        for id in 0..3 {
            waits.insert(id, ready(&given_back).await, finish(&seen));
        }
        let (mut tx, rx) = tokio::sync::oneshot::channel::<()>();
        let running = Handover::start(tokio::runtime::Handle::current(), async move {
            let _ = rx.await;
            Ok(Counted(Arc::new(AtomicUsize::new(0))))
        });
        waits.insert(3, running, finish(&seen));
        waits.give_back_all(Duration::from_secs(2)).await;
        assert!(waits.is_empty());
        assert_eq!(given_back.load(Ordering::SeqCst), 3);
        assert!(seen.borrow().is_empty());
        let stopped = tokio::time::timeout(Duration::from_secs(5), tx.closed()).await;
        assert!(stopped.is_ok(), "the running call was not stopped");
    }

    #[tokio::test]
    async fn giving_back_at_exit_stops_at_the_limit() {
        struct Stuck;
        impl Taken for Stuck {
            fn give_back(self) -> BoxFuture {
                Box::pin(std::future::pending())
            }
        }
        let mut waits = Waits::<()>::default();
        let stuck = Handover::start(tokio::runtime::Handle::current(), async { Ok(Stuck) });
        stuck.ready().await;
        waits.insert(1, stuck, |(), _| {});
        let limit = Duration::from_millis(50);
        let started = std::time::Instant::now();
        waits.give_back_all(limit).await;
        assert!(started.elapsed() >= limit && started.elapsed() < Duration::from_secs(2));
    }
}
