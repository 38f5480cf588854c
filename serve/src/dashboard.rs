//! The dashboard at `/`: one page, its script and its style, embedded in the binary
//! (`include_str!`), so it works in networks without internet. It reads `/v1/queues` every
//! second and calls the same API as everyone else (with the token typed into the page).

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// The dashboard page; its script and style are under `/assets/`.
#[utoipa::path(get, path = "/", tag = "service",
    responses((status = 200, description = "The dashboard page", content_type = "text/html")))]
pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
