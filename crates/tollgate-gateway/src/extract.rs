//! Reading a request body, after the key was checked: the size cap (413 in the route's
//! dialect, before a byte is read when `Content-Length` says so), a read deadline that
//! a slow sender cannot stretch (408: [`BodyTiming`]), and JSON decoding (400 naming
//! what did not parse); a large body is decoded on the blocking pool, so a 100k-token
//! prompt does not hold a runtime worker that small streamed turns are waiting for.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use tollgate::clock;

use crate::error::GatewayError;
use crate::timing::BodyTiming;

/// Bodies larger than this are decoded off the runtime's workers.
const LARGE_BODY: usize = 64 * 1024;

/// The whole body, within `limit` bytes and `timing`.
pub(crate) async fn read_body(
    limit: usize,
    timing: BodyTiming,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, GatewayError> {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(GatewayError::BodyTooLarge(limit));
    }
    let started = clock::now();
    let mut body = body;
    let mut data = Vec::with_capacity(announced.map_or(0, |n| n as usize));
    loop {
        let deadline = started + timing.allowed(data.len());
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(GatewayError::BadBody(format!(
                    "the body could not be read: {e}"
                )));
            }
            Err(_) => {
                return Err(GatewayError::BodyTimeout {
                    received: data.len(),
                    waited: started.elapsed(),
                });
            }
        };
        if let Ok(chunk) = frame.into_data() {
            if data.len() + chunk.len() > limit {
                return Err(GatewayError::BodyTooLarge(limit));
            }
            data.extend_from_slice(&chunk);
        }
    }
    Ok(Bytes::from(data))
}

/// `bytes` decoded as a `T`, or the failure in the gateway's terms.
pub(crate) async fn decode<T: DeserializeOwned + Send + 'static>(
    bytes: Bytes,
) -> Result<T, GatewayError> {
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
