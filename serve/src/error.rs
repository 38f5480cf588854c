//! Errors as JSON: `{"error": {"kind": "...", "message": "..."}}`, with core's error kind
//! and the HTTP status that says the same (docs/serve.md has the table). Answers that axum
//! makes itself (an unknown route, a method the route does not take, a body over the
//! limit, a path that does not decode) are turned into the same JSON by [`json_errors`].

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) kind: &'static str,
    pub(crate) message: String,
}

/// The body of an error answer.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// `invalid_argument` (400, 413), `unauthorized` (401), `read_only`, `cross_site`,
    /// `host_not_allowed` (403), `not_found` (404), `method_not_allowed` (405), `wrong_type`,
    /// `conflict` (409), `connection`, `timeout`, `closed` (503), `server` (500).
    kind: String,
    message: String,
}

impl ApiError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_argument",
            message: message.into(),
        }
    }

    /// 409 `conflict`: the request does not fit the queue's kind (webhook queue or not).
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            kind: "conflict",
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            kind: "not_found",
            message: message.into(),
        }
    }
}

impl From<delayq::Error> for ApiError {
    fn from(e: delayq::Error) -> Self {
        use delayq::ErrorKind::*;
        let status = match e.kind() {
            InvalidArgument => StatusCode::BAD_REQUEST,
            WrongType => StatusCode::CONFLICT,
            Connection | Timeout | Closed => StatusCode::SERVICE_UNAVAILABLE,
            Server => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            status,
            kind: e.kind().as_str(),
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let unauthorized = self.status == StatusCode::UNAUTHORIZED;
        let body = ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if unauthorized {
            // RFC 9110 section 11.6.1: a 401 names the scheme it wants.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"delayq\""),
            );
        }
        response
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The route fallback: 404 `not_found` naming what was asked for.
pub(crate) async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route {method} {} (see /openapi.json)",
        uri.path()
    ))
}

/// A route asked with a method it does not take: 405 `method_not_allowed` (axum adds the
/// `Allow` header).
pub(crate) async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        kind: "method_not_allowed",
        message: format!("{} does not take {method} (see /openapi.json)", uri.path()),
    }
}

/// The kind of an error answer that axum made itself, by its status.
fn kind_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::UNAUTHORIZED => "unauthorized",
        s if s.is_server_error() => "server",
        _ => "invalid_argument",
    }
}

/// Middleware: an error answer that is not JSON (one axum made: a rejected extractor, such
/// as a body over the limit, 413, or a path that is not UTF-8, 400) becomes the JSON of
/// every other error, with its status and headers kept.
pub(crate) async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!(
            "the request body is over the limit of {} bytes",
            crate::api::MAX_BODY
        )
    } else {
        // axum's rejections are short texts; anything longer is cut.
        let text = axum::body::to_bytes(body, 16 * 1024)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&text).trim().to_owned();
        if text.is_empty() {
            status.canonical_reason().unwrap_or("error").to_owned()
        } else {
            text
        }
    };
    let mut out = ApiError {
        status,
        kind: kind_of(status),
        message,
    }
    .into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}
