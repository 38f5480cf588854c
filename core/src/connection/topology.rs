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

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
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
}

struct Known {
    /// The client of dedicated connections.
    dedicated: ClusterClient,
    /// A client per node, for pub/sub; `next` is the one to use, moved on after a failure.
    pubsub: Vec<redis::Client>,
    next: usize,
    asked: Option<Instant>,
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
        };
        Ok(ClusterNodes {
            commands,
            seeds,
            certs,
            make,
            limit,
            known: Mutex::new(known),
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

    /// Asks the cluster for its nodes, unless it was asked less than a second ago, and
    /// connects through them from now on. A failure to ask changes nothing.
    pub(crate) async fn learn(&self) {
        {
            let mut known = self.known();
            if known.asked.is_some_and(|t| t.elapsed() < ASK_EVERY) {
                return;
            }
            known.asked = Some(Instant::now());
        }
        let slots = match self.slots().await {
            Ok(slots) => slots,
            Err(e) => return tracing::debug!(error = %e, "could not ask for the cluster's nodes"),
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
            Err(e) => tracing::debug!(error = %e, "could not use the cluster's nodes"),
        }
    }
}

impl ClusterNodes {
    /// The cluster's `CLUSTER SLOTS` reply.
    async fn slots(&self) -> Result<Value> {
        let mut ask = redis::cmd("CLUSTER");
        ask.arg("SLOTS");
        let mut commands = self.commands.clone();
        super::with_timeout(self.limit, "to ask for the cluster's nodes", async {
            ask.query_async::<Value>(&mut commands).await
        })
        .await
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
    }

    use redis::IntoConnectionInfo;
}
