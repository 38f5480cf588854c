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

/// Allows a mutating request, or says why not (401, or 403 when the service is read-only).
pub(crate) fn check(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
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
