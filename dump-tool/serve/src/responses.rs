//! The plain responses: a compiled-in asset, a refusal with its reason.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `body` with its content type.
pub fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// `status` with `why` as plain text.
pub fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}
