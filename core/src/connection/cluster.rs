//! Requests to a Redis Cluster, each run at most once (SPEC section 10).
//!
//! redis-rs's cluster connection resends a request by itself: after a redirect (`MOVED`,
//! `ASK`), a refusal (`TRYAGAIN`, `CLUSTERDOWN`, a node it has no connection to), but also
//! after its connection dropped or its reply was late, when the request may have run: a
//! script run twice offered a second message, or answered an ack or a cancel false. So
//! [`ClusterCommands`] builds it without retries and resends here only what a node
//! answered without running: to the node a `MOVED` names, else after a pause, until the
//! response timeout has passed since the first send. A request that may have run fails
//! with a `connection` error whose outcome is unknown, as on one server; one that no node
//! took in time fails with a `connection` error that says it did not run.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RetryMethod, Value};
use tokio::time::Instant;

/// The command connection of a cluster client (built with `retries(0)`).
#[derive(Clone)]
pub(crate) struct ClusterCommands {
    pub(crate) conn: ClusterConnection,
    /// How long a request may go on being resent (the client's response timeout).
    pub(crate) budget: Duration,
    /// The node the last request of this handle ran on when a `MOVED` sent it there (None:
    /// the node its slot maps to), so that a `WAIT` after a write asks the node that
    /// applied it, not one the slot map still names (a failed master back as a replica).
    pub(crate) ran_on: Option<SingleNodeRoutingInfo>,
}

/// Where the next send of a request goes.
enum Next {
    /// Send it again, routed by its keys' slot.
    BySlot,
    /// Send it again to the node a `MOVED` named.
    To(SingleNodeRoutingInfo),
}

/// Resends of one request.
struct Resends {
    until: Instant,
    pause: Duration,
    /// The last send was redirected: a second redirect in a row waits first.
    moved: bool,
}

impl Resends {
    fn new(budget: Duration) -> Self {
        let until = Instant::now() + budget;
        let pause = Duration::from_millis(25);
        Resends {
            until,
            pause,
            moved: false,
        }
    }

    /// After a failed send: where to send it again, or the error to fail with.
    async fn after(&mut self, e: RedisError) -> redis::RedisResult<Next> {
        if e.is_timeout() {
            return Err(lost());
        }
        if !not_run(&e) {
            return Err(e);
        }
        if Instant::now() >= self.until {
            return Err(untaken(&e));
        }
        let node = moved_to(&e);
        let moved_again = std::mem::replace(&mut self.moved, node.is_some());
        if let (Some(node), false) = (&node, moved_again) {
            return Ok(Next::To(node.clone()));
        }
        let pause = self
            .pause
            .min(self.until.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        Ok(node.map_or(Next::BySlot, Next::To))
    }
}

/// Whether the node answered `e` without running the request, or it reached no node.
fn not_run(e: &RedisError) -> bool {
    if e.is_connection_refusal() || e.kind() == ErrorKind::ClusterConnectionNotFound {
        return true;
    }
    !e.is_io_error()
        && matches!(
            e.retry_method(),
            RetryMethod::AskRedirect
                | RetryMethod::MovedRedirect
                | RetryMethod::WaitAndRetry
                | RetryMethod::RefreshSlotsAndRetry
        )
}

/// The node a `MOVED` names.
fn moved_to(e: &RedisError) -> Option<SingleNodeRoutingInfo> {
    if !matches!(e.retry_method(), RetryMethod::MovedRedirect) {
        return None;
    }
    let (host, port) = e.redirect_node()?.0.rsplit_once(':')?;
    let host = host.trim_matches(['[', ']']).to_owned();
    Some(SingleNodeRoutingInfo::ByAddress {
        host,
        port: port.parse().ok()?,
    })
}

/// A request whose reply did not come in time: it may have run.
fn lost() -> RedisError {
    io_error(
        std::io::ErrorKind::ConnectionAborted,
        "no reply from Redis in time; whether the command ran is unknown".to_owned(),
    )
}

/// A request that no node took before the response timeout (a master failing over).
fn untaken(e: &RedisError) -> RedisError {
    io_error(
        std::io::ErrorKind::NotConnected,
        format!("no node of the cluster took the request in time ({e}); it did not run"),
    )
}

fn io_error(kind: std::io::ErrorKind, msg: String) -> RedisError {
    RedisError::from(std::io::Error::new(kind, msg))
}

impl ConnectionLike for ClusterCommands {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut resends = Resends::new(self.budget);
            let mut next = Next::BySlot;
            loop {
                let sent = match &next {
                    Next::BySlot => self.conn.req_packed_command(cmd).await,
                    Next::To(node) => {
                        let to = RoutingInfo::SingleNode(node.clone());
                        self.conn.route_command(cmd.clone(), to).await
                    }
                };
                next = match sent {
                    Ok(v) => {
                        self.ran_on = match next {
                            Next::To(node) => Some(node),
                            Next::BySlot => None,
                        };
                        return Ok(v);
                    }
                    Err(e) => resends.after(e).await?,
                };
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut resends = Resends::new(self.budget);
            let mut next = Next::BySlot;
            loop {
                let sent = match next {
                    Next::BySlot => self.conn.req_packed_commands(pipeline, offset, count).await,
                    Next::To(node) => {
                        let p = pipeline.clone();
                        self.conn.route_pipeline(p, offset, count, node).await
                    }
                };
                next = match sent {
                    Ok(v) => return Ok(v),
                    Err(e) => resends.after(e).await?,
                };
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}
