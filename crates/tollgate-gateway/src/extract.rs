//! Reading a request body: the size cap (413 in the route's dialect, not axum's plain
//! text) and JSON decoding (400 naming what did not parse).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::GatewayError;
use crate::state::Gateway;

/// The body as a `T`, or the failure in the gateway's terms.
pub(crate) fn json_body<T: DeserializeOwned>(
    state: &Gateway,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, GatewayError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            GatewayError::BodyTooLarge(state.body_limit)
        } else {
            GatewayError::BadBody(rejection.body_text())
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| GatewayError::BadBody(e.to_string()))
}
