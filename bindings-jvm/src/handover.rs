//! Core's [`Handover`] for Kotlin: `take`, `receive` and `receive_many` start one; Kotlin
//! waits for its ready signal (a token through [`crate::callbacks`]), then claims the
//! outcome, or gives up when its coroutine or future was cancelled. Giving back what nobody
//! claimed, and logging it, are core's.

use std::sync::Arc;

use delayq::handover::{Claim, Handover, TakenValue};

use crate::callbacks::complete;
use crate::error::FfiError;
use crate::reliable_queue::Delivery;

macro_rules! handover {
    ($(#[doc = $doc:literal])* $name:ident, $taken:ty => $out:ty, $convert:expr) => {
        $(#[doc = $doc])*
        #[derive(uniffi::Object)]
        pub struct $name(pub(crate) Handover<$taken>);

        #[uniffi::export]
        impl $name {
            /// Signals `token` through the completions once the outcome is ready.
            pub fn on_ready(&self, token: i64) {
                self.0.on_ready(move || complete(token, Ok(0)));
            }

            /// Takes the outcome; `closed` if it was given up.
            pub fn claim(&self) -> Result<$out, FfiError> {
                match self.0.claim() {
                    Claim::Ready(outcome) => Ok(($convert)(outcome?)),
                    Claim::Pending | Claim::Ended => {
                        Err(FfiError::Closed("the call was given up".into()))
                    }
                }
            }

            /// The caller is gone: stops the call, or gives back what it took.
            pub fn give_up(&self) {
                self.0.give_up();
            }
        }
    };
}

handover!(
    /// A `take` for Kotlin.
    TakeHandover, Option<TakenValue> => Option<Vec<u8>>, |t: Option<TakenValue>| t.map(|t| t.value)
);
handover!(
    /// A `receive` for Kotlin.
    ReceiveHandover, Option<delayq::Delivery> => Option<Arc<Delivery>>,
    |d: Option<delayq::Delivery>| d.map(Delivery::new)
);
handover!(
    /// A `receive_many` for Kotlin.
    ReceiveManyHandover, Vec<delayq::Delivery> => Vec<Arc<Delivery>>,
    |ds: Vec<delayq::Delivery>| ds.into_iter().map(Delivery::new).collect()
);
