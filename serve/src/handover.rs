//! Answers that carry what a request was handed (deliveries with a lease, a value taken
//! from a delayed queue): when the answer is never written, because the client went away
//! or the service stopped first, what it carried is given back at once instead of waiting
//! for its lease to end (or, for a taken value, being lost).
//!
//! The body is a one-chunk stream; hyper takes the chunk when it writes the answer. If the
//! body is dropped before that, `give_back` runs. Once the chunk is taken, the bytes are
//! the kernel's: a connection that breaks after that is covered by the lease (a taken
//! value of a delayed queue is then gone, as with any at-most-once `take`).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

type GiveBack = Box<dyn FnOnce() + Send>;

/// The body of an answer that gives back what it carried unless it was written.
pub(crate) struct HandOver {
    chunk: Option<Bytes>,
    give_back: Option<GiveBack>,
}

impl HandOver {
    /// A 200 JSON answer of `value`; `give_back` runs if it is never written.
    pub(crate) fn json(
        value: &impl Serialize,
        give_back: impl FnOnce() + Send + 'static,
    ) -> Response {
        let bytes = Bytes::from(serde_json::to_vec(value).expect("answer to JSON"));
        let len = bytes.len();
        let body = HandOver {
            chunk: Some(bytes),
            give_back: Some(Box::new(give_back)),
        };
        let mut response = (StatusCode::OK, Body::from_stream(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // A stream has no length of its own; hyper takes it from the header.
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        response
    }

    #[cfg(test)]
    fn new(chunk: &'static str, give_back: impl FnOnce() + Send + 'static) -> Self {
        HandOver {
            chunk: Some(Bytes::from_static(chunk.as_bytes())),
            give_back: Some(Box::new(give_back)),
        }
    }
}

impl futures_util::Stream for HandOver {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let chunk = self.chunk.take();
        if chunk.is_some() {
            // Handed to hyper, which writes it: nothing to give back any more.
            self.give_back = None;
        }
        Poll::Ready(chunk.map(Ok))
    }
}

impl Drop for HandOver {
    fn drop(&mut self) {
        if let Some(give_back) = self.give_back.take() {
            give_back();
        }
    }
}

/// Runs `f` on the current tokio runtime, if there is one (a body is dropped on hyper's
/// connection task, inside it).
pub(crate) fn spawn(f: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn gives_back_only_what_was_not_written() {
        let given = Arc::new(AtomicUsize::new(0));
        let g = given.clone();
        drop(HandOver::new("x", move || {
            g.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(given.load(Ordering::SeqCst), 1, "dropped unwritten");

        let g = given.clone();
        let mut body = HandOver::new("x", move || {
            g.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(body.next().await.unwrap().unwrap(), "x");
        assert!(body.next().await.is_none());
        drop(body);
        assert_eq!(given.load(Ordering::SeqCst), 1, "written: kept");
    }
}
