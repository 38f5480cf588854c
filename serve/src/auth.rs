//! The bearer token (`DELAYQ_TOKEN`) of mutating routes. Reading needs no token; without a
//! token configured the service is read-only, unless `--allow-unauthenticated`.

use axum::http::{HeaderMap, StatusCode};

use crate::error::ApiError;
use crate::state::AppState;

/// Compares without stopping at the first difference, so that timing tells nothing about
/// how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).unwrap_or(&0) ^ b.get(i).unwrap_or(&0);
    }
    diff == 0
}

/// The token of an `Authorization: Bearer <token>` value. The scheme's name is
/// case-insensitive (RFC 9110 section 11.1: `bearer`, `BEARER` too) and may be followed by
/// more than one space.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once([' ', '\t'])?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches([' ', '\t']))
}

/// Whether a browser sent this request from a page of another site: its `Origin` names
/// another host than `Host` (a page elsewhere posting a "simple" request, which needs no
/// preflight: cross-site request forgery). Clients that are not browsers send no `Origin`;
/// the dashboard's requests come from its own origin.
fn cross_site(headers: &HeaderMap) -> bool {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(origin) = header(axum::http::header::ORIGIN) else {
        return false;
    };
    let host = header(axum::http::header::HOST).unwrap_or("");
    let from = origin.split_once("://").map_or("", |(_, host)| host);
    from.is_empty() || !from.eq_ignore_ascii_case(host)
}

/// Allows a mutating request, or says why not (403 from another site's page, 401, or 403
/// when the service is read-only).
pub(crate) fn check(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if cross_site(headers) {
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "cross_site",
            message:
                "a page of another site may not change queues (its Origin is not this service's)"
                    .into(),
        });
    }
    let Some(token) = &state.config.token else {
        if state.config.allow_unauthenticated {
            return Ok(());
        }
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "read_only",
            message: "this service is read-only: start it with DELAYQ_TOKEN set (or --allow-unauthenticated) to allow changes".into(),
        });
    };
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .unwrap_or("");
    if same(given.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "unauthorized",
            message: "this route needs the bearer token (Authorization: Bearer $DELAYQ_TOKEN)"
                .into(),
        })
    }
}

#[cfg(test)]
#[test]
fn the_scheme_is_case_insensitive() {
    for v in [
        "Bearer abc",
        "bearer abc",
        "BEARER abc",
        "bEaReR  abc",
        "Bearer\tabc",
    ] {
        assert_eq!(bearer(v), Some("abc"), "{v:?}");
    }
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearerabc"), None);
    assert_eq!(bearer("abc"), None);
}

#[cfg(test)]
#[test]
fn tokens_compare_whole() {
    assert!(same(b"abc", b"abc"));
    assert!(!same(b"abc", b"abd"));
    assert!(!same(b"abc", b"abcd"));
    assert!(!same(b"", b"a"));
}

#[cfg(test)]
#[test]
fn a_page_of_another_site_is_cross_site() {
    let with = |origin: Option<&str>, host: &str| {
        let mut h = HeaderMap::new();
        h.insert(axum::http::header::HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(axum::http::header::ORIGIN, o.parse().unwrap());
        }
        cross_site(&h)
    };
    assert!(!with(None, "127.0.0.1:8080"), "curl sends no Origin");
    assert!(!with(Some("http://127.0.0.1:8080"), "127.0.0.1:8080"));
    assert!(!with(Some("https://Queue.Example"), "queue.example"));
    assert!(with(Some("http://evil.example"), "127.0.0.1:8080"));
    assert!(with(Some("http://127.0.0.1:9999"), "127.0.0.1:8080"));
    assert!(with(Some("null"), "127.0.0.1:8080"), "a sandboxed page");
}
