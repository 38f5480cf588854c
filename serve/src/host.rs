//! The `Host` check against DNS rebinding (docs/serve.md, Auth).
//!
//! A service on 127.0.0.1 is not out of a browser's reach: a hostile page at
//! `http://evil.example:7878/` whose name the attacker then re-points to 127.0.0.1 (DNS
//! rebinding) talks to the service as its own origin, with `Origin` and `Host` both
//! `evil.example:7878`, so the cross-site check passes, and the page reads every `GET` route
//! (dead letters' payloads) and, with `--allow-unauthenticated`, changes queues. What gives
//! it away is the `Host` header, which names the attacker's host. So, as development servers
//! do (Vite, webpack-dev-server, Jupyter), a service listening on a loopback address answers
//! only requests whose `Host` names a loopback host (`localhost`, `127.x.x.x`, `[::1]`, any
//! port) or one of the allowed hosts (`DELAYQ_ALLOWED_HOSTS`, for names a reverse proxy
//! passes on); any other is refused, 403 `host_not_allowed`, before any handler runs.
//!
//! A service listening on another address (`0.0.0.0`, a LAN address) is reached by names
//! this process cannot know: it accepts every `Host`, as before, unless allowed hosts are
//! given; then it accepts the loopback names, the allowed ones, and any IP address (a page
//! can only be rebound through a name).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// The environment variable that names the allowed hosts (comma- or space-separated).
pub const ALLOWED_HOSTS_VAR: &str = "DELAYQ_ALLOWED_HOSTS";

/// One allowed host.
#[derive(Debug, Clone, PartialEq)]
enum Allowed {
    /// `*`: every `Host` (the check is off).
    Any,
    /// A name, compared without case (and without a final dot).
    Name(String),
    /// `.example.com`: that name and every name under it.
    Suffix(String),
    /// An IP address.
    Ip(IpAddr),
}

/// The host part of a `Host` header (or of a request target's authority).
#[derive(Debug, PartialEq)]
enum HostName {
    Ip(IpAddr),
    /// Lower case, without a final dot.
    Name(String),
}

/// Which `Host` headers the service answers.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// False: every one (a non-loopback address and no allowed hosts).
    check: bool,
    /// Any IP address (a non-loopback address with allowed hosts).
    any_ip: bool,
    allowed: Vec<Allowed>,
    /// For the error message.
    loopback: bool,
}

/// The names of `DELAYQ_ALLOWED_HOSTS` (or of an option): comma- or space-separated host
/// names without scheme or port (`queue.example.com`), `.example.com` for a domain and the
/// names under it, IP addresses, or `*` for any host.
pub fn parse_allowed_hosts(value: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    for n in &names {
        allowed(n)?;
    }
    Ok(names)
}

fn allowed(entry: &str) -> Result<Allowed, String> {
    let bad = |why: &str| {
        Err(format!(
            "allowed host {entry:?}: {why} (give a host name such as queue.example.com, \
             .example.com for a domain, an IP address, or *)"
        ))
    };
    let e = entry.trim().to_ascii_lowercase();
    if e == "*" {
        return Ok(Allowed::Any);
    }
    let bare = e
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or(&e);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Allowed::Ip(ip));
    }
    if e.contains("://") {
        return bad("a host, not a URL");
    }
    if e.contains(':') {
        return bad("without a port");
    }
    let (suffix, name) = match e.strip_prefix('.') {
        Some(rest) => (true, rest),
        None => (false, e.as_str()),
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    let valid = !name.is_empty()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return bad("not a host name");
    }
    Ok(if suffix {
        Allowed::Suffix(name.to_owned())
    } else {
        Allowed::Name(name.to_owned())
    })
}

/// The host of a `Host` value: `name`, `name:port`, `1.2.3.4[:port]`, `[v6][:port]`. None
/// when it is none of these.
fn host_of(value: &str) -> Option<HostName> {
    let port_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let host = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(port_ok)) {
            return None;
        }
        return inside.parse().ok().map(|ip| HostName::Ip(IpAddr::V6(ip)));
    } else {
        match value.split_once(':') {
            Some((host, port)) if port_ok(port) => host,
            Some(_) => return None,
            None => value,
        }
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(HostName::Ip(ip));
    }
    let name = host.to_ascii_lowercase();
    let name = name.strip_suffix('.').unwrap_or(&name);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    valid.then(|| HostName::Name(name.to_owned()))
}

impl Hosts {
    /// The check of a service listening on `listen`, with these allowed hosts (as
    /// [`parse_allowed_hosts`] takes them).
    pub(crate) fn new(listen: SocketAddr, allowed_hosts: &[String]) -> Result<Hosts, String> {
        let allowed = allowed_hosts
            .iter()
            .map(|h| allowed(h))
            .collect::<Result<Vec<_>, _>>()?;
        let loopback = listen.ip().to_canonical().is_loopback();
        Ok(Hosts {
            check: (loopback || !allowed.is_empty()) && !allowed.contains(&Allowed::Any),
            any_ip: !loopback,
            allowed,
            loopback,
        })
    }

    /// Whether a request with this `Host` value is answered.
    fn allows(&self, value: Option<&str>) -> bool {
        if !self.check {
            return true;
        }
        let Some(host) = value.and_then(host_of) else {
            return false;
        };
        match host {
            HostName::Ip(ip) => {
                ip.to_canonical().is_loopback()
                    || self.any_ip
                    || self.allowed.contains(&Allowed::Ip(ip))
            }
            HostName::Name(name) => {
                name == "localhost"
                    || self.allowed.iter().any(|a| match a {
                        Allowed::Name(n) => *n == name,
                        Allowed::Suffix(s) => {
                            name == *s
                                || name
                                    .strip_suffix(s.as_str())
                                    .is_some_and(|head| head.ends_with('.'))
                        }
                        _ => false,
                    })
            }
        }
    }

    fn refusal(&self, value: Option<&str>) -> ApiError {
        let what = match value {
            Some(v) => format!("Host {v:?} is not allowed"),
            None => "a request without a Host header is not allowed".to_owned(),
        };
        let why = if self.loopback {
            "this service listens on a loopback address and answers only requests for \
             localhost, 127.x.x.x or [::1]"
        } else {
            "this service answers only the hosts it was given, localhost and IP addresses"
        };
        ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "host_not_allowed",
            message: format!(
                "{what}: {why} (a page of another site can reach it under its own name \
                 through DNS rebinding); behind a reverse proxy, name the hosts it is reached \
                 by in {ALLOWED_HOSTS_VAR}"
            ),
        }
    }
}

/// Middleware, before every route (the API, `/metrics`, the dashboard, unknown routes):
/// refuses a request whose `Host` (or whose request target's authority, in the absolute
/// form) the service does not answer.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let hosts = &state.hosts;
    let header = request
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    // `GET http://name/path HTTP/1.1`: the target's authority is the host (RFC 9112
    // section 3.2.2); both must pass.
    let authority = request.uri().authority().map(|a| a.as_str());
    if let Some(a) = authority.filter(|a| !hosts.allows(Some(a))) {
        return hosts.refusal(Some(a)).into_response();
    }
    if (header.is_some() || authority.is_none()) && !hosts.allows(header) {
        return hosts.refusal(header).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(listen: &str, allowed: &[&str]) -> Hosts {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Hosts::new(listen.parse().unwrap(), &allowed).unwrap()
    }

    #[test]
    fn on_loopback_only_loopback_names_are_answered() {
        let h = hosts("127.0.0.1:7878", &[]);
        for ok in [
            "localhost",
            "localhost:7878",
            "LocalHost:1",
            "localhost.",
            "127.0.0.1",
            "127.0.0.1:7878",
            "127.9.8.7:80",
            "[::1]",
            "[::1]:7878",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(h.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:24876",
            "localhost.evil.example",
            "evil-localhost",
            "127.0.0.1.evil.example",
            "10.0.0.1",
            "0.0.0.0:7878",
            "[::2]",
            "localhost:x",
            "localhost:1:2",
            "user@localhost",
            "",
            "\u{fffd}",
        ] {
            assert!(!h.allows(Some(refused)), "{refused}");
        }
        assert!(!h.allows(None), "no Host at all");
        let v6 = hosts("[::1]:7878", &[]);
        assert!(v6.allows(Some("[::1]:7878")) && !v6.allows(Some("evil.example")));
    }

    #[test]
    fn allowed_hosts_are_answered_too() {
        let h = hosts(
            "127.0.0.1:7878",
            &[
                "queue.example.com",
                ".corp.example",
                "10.1.2.3",
                "[fd00::1]",
            ],
        );
        for ok in [
            "queue.example.com",
            "Queue.Example.Com:443",
            "corp.example",
            "a.b.corp.example:8080",
            "10.1.2.3:7878",
            "[fd00::1]",
            "localhost",
        ] {
            assert!(h.allows(Some(ok)), "{ok}");
        }
        for refused in ["example.com", "xcorp.example", "10.1.2.4", "evil.example"] {
            assert!(!h.allows(Some(refused)), "{refused}");
        }
        assert!(hosts("127.0.0.1:7878", &["*"]).allows(Some("evil.example")));
    }

    #[test]
    fn elsewhere_every_host_is_answered_unless_hosts_are_given() {
        assert!(hosts("0.0.0.0:7878", &[]).allows(Some("evil.example")));
        assert!(hosts("192.168.1.5:7878", &[]).allows(None));
        let h = hosts("0.0.0.0:7878", &["queue.example.com"]);
        assert!(h.allows(Some("queue.example.com")));
        assert!(
            h.allows(Some("192.168.1.5:7878")),
            "an IP address cannot be rebound"
        );
        assert!(h.allows(Some("localhost:7878")));
        assert!(!h.allows(Some("evil.example")));
    }

    #[test]
    fn allowed_hosts_are_names() {
        assert_eq!(
            parse_allowed_hosts(" a.example, .b.example  c ").unwrap(),
            ["a.example", ".b.example", "c"]
        );
        assert_eq!(parse_allowed_hosts("").unwrap(), Vec::<String>::new());
        for bad in ["http://a.example", "a.example:443", "a/b", "a..b", "."] {
            assert!(parse_allowed_hosts(bad).is_err(), "{bad}");
        }
    }
}
