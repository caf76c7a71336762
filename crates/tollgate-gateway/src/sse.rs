//! Server-sent events out: a dialect's encoder turns tollgate's [`StreamEvent`]s into
//! frames, and [`sse_response`] sends them as they come. Dropping the body (the client
//! went away) drops the [`ResponseStream`], which cancels the upstream call.

use std::convert::Infallible;
use std::time::UNIX_EPOCH;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tollgate::clock::wall_now;
use tollgate::{ResponseStream, StreamEvent};

use crate::error::GatewayError;

/// Encodes one answer's events in a dialect's streaming format.
pub(crate) trait Encoder: Send + 'static {
    /// The frames for one event (none for an event the dialect has no place for).
    fn event(&mut self, event: StreamEvent) -> Vec<Bytes>;
    /// The frames that report a failure after the answer started.
    fn error(&mut self, error: GatewayError) -> Vec<Bytes>;
}

/// One SSE frame: an optional `event:` line and one `data:` line.
pub(crate) fn frame(event: Option<&str>, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(name) = event {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
    Bytes::from(out)
}

/// A `200 text/event-stream` answer of `stream`'s events in `encoder`'s format; the
/// body ends after the encoder's last frame or its error frames.
pub(crate) fn sse_response(stream: ResponseStream, encoder: impl Encoder) -> Response {
    let frames = futures::stream::unfold(
        (stream, encoder, false),
        |(mut stream, mut encoder, done)| async move {
            if done {
                return None;
            }
            let (frames, done) = match stream.next().await {
                Some(Ok(event)) => {
                    let last = matches!(event, StreamEvent::Completed(_));
                    (encoder.event(event), last)
                }
                Some(Err(e)) => (encoder.error(GatewayError::from(e)), true),
                None => return None,
            };
            let chunk = frames.into_iter().fold(Vec::new(), |mut all, f| {
                all.extend_from_slice(&f);
                all
            });
            Some((
                Ok::<_, Infallible>(Bytes::from(chunk)),
                (stream, encoder, done),
            ))
        },
    )
    .filter(|chunk| std::future::ready(chunk.as_ref().map_or(true, |c| !c.is_empty())));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}

/// Seconds since the Unix epoch, for `created` fields.
pub(crate) fn unix_now() -> u64 {
    wall_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
