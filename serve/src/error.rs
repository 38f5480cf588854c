//! Errors as JSON: `{"error": {"kind": "...", "message": "..."}}`, with core's error kind
//! and the HTTP status that says the same (docs/serve.md has the table).

use axum::http::StatusCode;
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
    /// `invalid_argument` (400), `unauthorized` (401), `read_only` (403), `not_found`
    /// (404), `wrong_type` (409), `connection`, `timeout`, `closed` (503), `server` (500).
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
        let body = ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;
