//! The nodes through which a cluster client opens its new connections (dedicated ones
//! for blocking waits, pub/sub): the seeds it was given, then every node the cluster has
//! named since.
//!
//! redis-rs builds a cluster connection from the initial nodes it is given, and from
//! those only (redis-rs#1005). From the seeds alone, a client whose seeds had all died
//! could open no connection again though the rest of the cluster lived on: after its only
//! seed, a master, failed over, offers went on (the command connection keeps the nodes it
//! knows) but every `take` and `receive` failed for good with "Failed to create initial
//! connections". So the client asks the cluster for its nodes (`CLUSTER SLOTS`) once
//! connected, and again, at most once a second, after a new connection failed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ConnectionAddr, ConnectionInfo, TlsCertificates, Value};

use super::cluster::ClusterCommands;
use crate::error::{Error, Result};

/// How often a failed connection may ask the cluster for its nodes.
const ASK_EVERY: Duration = Duration::from_secs(1);

/// Makes the client of dedicated connections from a list of initial nodes.
pub(crate) type MakeClient =
    Box<dyn Fn(Vec<ConnectionInfo>) -> Result<ClusterClient> + Send + Sync>;

/// See the module docs.
pub(crate) struct ClusterNodes {
    /// Where `CLUSTER SLOTS` is asked.
    commands: ClusterCommands,
    /// The seeds, first always; a learned node takes the first seed's settings (user,
    /// password, TLS) with its own address.
    seeds: Vec<ConnectionInfo>,
    certs: Option<TlsCertificates>,
    make: MakeClient,
    /// How long `CLUSTER SLOTS` may take.
    limit: Duration,
    known: Mutex<Known>,
    /// Whether a failure to ask was said at warning level already.
    warned: AtomicBool,
    /// `host::forks()` when made: a forked child does not ask over its parent's connection.
    forks: u64,
}

struct Known {
    /// The client of dedicated connections.
    dedicated: ClusterClient,
    /// A client per node, for pub/sub; `next` is the one to use, moved on after a failure.
    pubsub: Vec<redis::Client>,
    next: usize,
    /// When the last asking ended, and whether one is under way.
    asked: Option<Instant>,
    asking: bool,
}

impl ClusterNodes {
    /// The nodes of `seeds`, not yet asked for the others.
    pub(crate) fn new(
        commands: ClusterCommands,
        seeds: Vec<ConnectionInfo>,
        certs: Option<TlsCertificates>,
        make: MakeClient,
        limit: Duration,
    ) -> Result<Self> {
        let known = Known {
            dedicated: make(seeds.clone())?,
            pubsub: clients(&seeds, certs.as_ref())?,
            next: 0,
            asked: None,
            asking: false,
        };
        Ok(ClusterNodes {
            commands,
            seeds,
            certs,
            make,
            limit,
            known: Mutex::new(known),
            warned: AtomicBool::new(false),
            forks: crate::host::forks(),
        })
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().expect("cluster nodes lock")
    }

    /// The client of new dedicated connections.
    pub(crate) fn dedicated(&self) -> ClusterClient {
        self.known().dedicated.clone()
    }

    /// The client of the next pub/sub connection.
    pub(crate) fn pubsub(&self) -> redis::Client {
        let known = self.known();
        known.pubsub[known.next % known.pubsub.len()].clone()
    }

    /// After a failed pub/sub connection: the next node next time.
    pub(crate) fn rotate(&self) {
        self.known().next += 1;
    }

    /// After a new connection failed: asks the cluster for its nodes in a task of its own
    /// (the failed call does not wait for it), one asking at a time, and none within a
    /// second of the last.
    pub(crate) fn learn_soon(self: &Arc<Self>) {
        if self.forks != crate::host::forks() {
            return;
        }
        {
            let mut known = self.known();
            if known.asking || known.asked.is_some_and(|t| t.elapsed() < ASK_EVERY) {
                return;
            }
            known.asking = true;
        }
        let nodes = self.clone();
        tokio::spawn(async move {
            nodes.learn().await;
            let mut known = nodes.known();
            (known.asking, known.asked) = (false, Some(Instant::now()));
        });
    }

    /// Asks the cluster for its nodes and connects through them from now on. A failure to
    /// ask changes nothing (and is said once, at warning level).
    pub(crate) async fn learn(&self) {
        let slots = match self.slots().await {
            Ok(slots) => slots,
            Err(e) => {
                let warned = self.warned.swap(true, Ordering::Relaxed);
                match warned {
                    false => {
                        tracing::warn!(error = %e, "could not ask the cluster for its nodes; new connections go through the seeds only for now")
                    }
                    true => tracing::debug!(error = %e, "could not ask the cluster for its nodes"),
                }
                return;
            }
        };
        let mut nodes = self.seeds.clone();
        for (host, port) in addresses(&slots, false) {
            let Some(node) = at(&self.seeds[0], host, port) else {
                continue;
            };
            if !nodes.iter().any(|n| n.addr() == node.addr()) {
                nodes.push(node);
            }
        }
        let made = (self.make)(nodes.clone()).and_then(|dedicated| {
            let pubsub = clients(&nodes, self.certs.as_ref())?;
            Ok((dedicated, pubsub))
        });
        match made {
            Ok((dedicated, pubsub)) => {
                let mut known = self.known();
                known.dedicated = dedicated;
                known.pubsub = pubsub;
            }
            Err(e) => tracing::warn!(error = %e, "could not use the nodes the cluster named"),
        }
    }
}

impl ClusterNodes {
    /// The cluster's `CLUSTER SLOTS` reply, from a master (a replica that went silent
    /// would hold the call for the whole limit).
    async fn slots(&self) -> Result<Value> {
        let mut ask = redis::cmd("CLUSTER");
        ask.arg("SLOTS");
        let mut conn = self.commands.conn.clone();
        let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
        let asked = conn.route_command(ask, to);
        super::with_timeout(self.limit, "to ask for the cluster's nodes", asked).await
    }

    /// The `(host, port)` of each master that serves slots now.
    pub(crate) async fn masters(&self) -> Result<Vec<(String, u16)>> {
        let slots = self.slots().await?;
        let mut masters: Vec<(String, u16)> = Vec::new();
        for (host, port) in addresses(&slots, true) {
            if !masters.iter().any(|(h, p)| h == host && *p == port) {
                masters.push((host.to_owned(), port));
            }
        }
        Ok(masters)
    }
}

/// A client of each node, for pub/sub.
fn clients(
    nodes: &[ConnectionInfo],
    certs: Option<&TlsCertificates>,
) -> Result<Vec<redis::Client>> {
    let client = |info: &ConnectionInfo| {
        let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        match certs {
            Some(certs) if tls => redis::Client::build_with_tls(info.clone(), certs.clone()),
            _ => redis::Client::open(info.clone()),
        }
        .map_err(|e| Error::invalid(format!("bad cluster node address: {e}")))
    };
    nodes.iter().map(client).collect()
}

/// `seed`'s settings at `host:port` (None for a unix socket seed, which no cluster has).
fn at(seed: &ConnectionInfo, host: &str, port: u16) -> Option<ConnectionInfo> {
    let addr = match seed.addr().clone() {
        ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host.to_owned(), port),
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure,
            tls_params,
        },
        _ => return None,
    };
    Some(seed.clone().set_addr(addr))
}

/// The `(host, port)` of every master and replica a `CLUSTER SLOTS` reply names (of the
/// masters only with `masters`). A node named by no host (the answering one, which is not
/// known here) or as `?` is left out.
fn addresses(reply: &Value, masters: bool) -> Vec<(&str, u16)> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    fn node(v: &Value) -> Option<(&str, u16)> {
        let Value::Array(fields) = v else { return None };
        let host = match fields.first()? {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?,
            Value::SimpleString(s) => s.as_str(),
            _ => return None,
        };
        let port = match fields.get(1)? {
            Value::Int(p) => u16::try_from(*p).ok()?,
            _ => return None,
        };
        (!host.is_empty() && host != "?").then_some((host, port))
    }
    let mut found = Vec::new();
    for range in ranges {
        // Each range: start, end, its master, then its replicas.
        let Value::Array(items) = range else { continue };
        let end = if masters { 3 } else { items.len() };
        let nodes = items.get(2..end.min(items.len())).unwrap_or_default();
        found.extend(nodes.iter().filter_map(node));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn every_node_a_slots_reply_names_but_unknown_ones() {
        let node = |h: &str, p| Value::Array(vec![bulk(h), Value::Int(p), bulk("id")]);
        let range = |a, b, nodes: Vec<Value>| {
            let mut items = vec![Value::Int(a), Value::Int(b)];
            items.extend(nodes);
            Value::Array(items)
        };
        let reply = Value::Array(vec![
            range(
                0,
                5460,
                vec![node("10.0.0.1", 7000), node("10.0.0.4", 7003)],
            ),
            range(5461, 10922, vec![node("", 7001), node("?", 7004)]),
            range(10923, 16383, vec![node("10.0.0.3", 7002)]),
        ]);
        assert_eq!(
            addresses(&reply, false),
            [("10.0.0.1", 7000), ("10.0.0.4", 7003), ("10.0.0.3", 7002)]
        );
        assert_eq!(
            addresses(&reply, true),
            [("10.0.0.1", 7000), ("10.0.0.3", 7002)]
        );
        assert!(addresses(&Value::Nil, false).is_empty());
    }

    #[test]
    fn a_learned_node_has_the_seeds_settings_at_its_own_address() {
        let seed = "redis://user:secret@127.0.0.1:7000/0"
            .into_connection_info()
            .unwrap();
        let node = at(&seed, "10.0.0.2", 7001).unwrap();
        assert_eq!(*node.addr(), ConnectionAddr::Tcp("10.0.0.2".into(), 7001));
        let settings = node.redis_settings();
        assert_eq!(settings.username(), Some("user"));
        assert_eq!(settings.password(), Some("secret"));
        // A TLS seed's nodes are reached over TLS, with its hostname check.
        let seed = "rediss://u:pw@127.0.0.1:7000"
            .into_connection_info()
            .unwrap();
        let node = at(&seed, "10.0.0.3", 7002).unwrap();
        let ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } = node.addr()
        else {
            panic!("{:?}", node.addr())
        };
        assert_eq!((host.as_str(), *port, *insecure), ("10.0.0.3", 7002, false));
        assert_eq!(node.redis_settings().password(), Some("pw"));
    }

    use redis::IntoConnectionInfo;
}
