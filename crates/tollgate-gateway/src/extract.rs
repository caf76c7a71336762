//! Reading a request body: the size cap (413 in the route's dialect, not axum's plain
//! text) and JSON decoding (400 naming what did not parse); a large body is decoded on
//! the blocking pool, so a 100k-token prompt does not hold a runtime worker that small
//! streamed turns are waiting for.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::GatewayError;
use crate::state::Gateway;

/// Bodies larger than this are decoded off the runtime's workers.
const LARGE_BODY: usize = 64 * 1024;

/// The body as a `T`, or the failure in the gateway's terms.
pub(crate) async fn json_body<T: DeserializeOwned + Send + 'static>(
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
    let large = bytes.len() > LARGE_BODY;
    let decode =
        move || serde_json::from_slice(&bytes).map_err(|e| GatewayError::BadBody(e.to_string()));
    if !large {
        return decode();
    }
    match tokio::task::spawn_blocking(decode).await {
        Ok(decoded) => decoded,
        // The pool is shutting down (or the decoder panicked): say so, not what parsed.
        Err(e) => Err(GatewayError::BadBody(format!(
            "the body could not be decoded: {e}"
        ))),
    }
}
