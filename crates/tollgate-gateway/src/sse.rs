//! Server-sent events out: a dialect's encoder turns tollgate's [`StreamEvent`]s into
//! frames, and [`sse_response`] sends them as they come. Dropping the body (the client
//! went away) drops the [`ResponseStream`], which cancels the upstream call.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tollgate::clock::wall_now;
use tollgate::{ResponseStream, StreamEvent};

use crate::access::Within;
use crate::answering::Tags;
use crate::error::{Dialect, GatewayError};
use crate::state::Gateway;

/// Encodes one answer's events in a dialect's streaming format.
pub(crate) trait Encoder: Send + 'static {
    /// The dialect, whose error body a failure is reported in.
    const DIALECT: Dialect;
    /// The frames for one event (none for an event the dialect has no place for).
    fn event(&mut self, event: StreamEvent) -> Vec<Bytes>;
    /// The frames that report a failure after the answer started, whose error body (in
    /// [`Encoder::DIALECT`]) is `body`.
    fn error(&mut self, body: serde_json::Value) -> Vec<Bytes>;
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
/// body ends after the encoder's last frame or its error frames. A failure reads as
/// [`Tags::fail`] answers it (an upstream one masked, naming the request id, its detail
/// logged); the end of the shutdown grace ends the stream with an error event too. The
/// stream is read within the request's access-log entry, which it holds (through the
/// [`Tags`]) until it ends, so the request's access line is written then.
pub(crate) fn sse_response<E: Encoder>(
    stream: ResponseStream,
    encoder: E,
    tags: &Arc<Tags>,
    state: &Gateway,
) -> Response {
    let grace_over: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(state.grace_over());
    let tags = tags.clone();
    let stream = Within::new(stream, tags.access());
    let frames = futures::stream::unfold(
        (stream, encoder, grace_over, false),
        move |(mut stream, mut encoder, mut grace_over, done)| {
            let tags = tags.clone();
            async move {
                if done {
                    return None;
                }
                let next = tokio::select! {
                    biased;
                    next = stream.next() => next.map(|r| r.map_err(GatewayError::from)),
                    () = &mut grace_over => Some(Err(GatewayError::ShuttingDown)),
                };
                let (frames, done) = match next {
                    Some(Ok(event)) => {
                        let last = matches!(event, StreamEvent::Completed(_));
                        (encoder.event(event), last)
                    }
                    Some(Err(e)) => (encoder.error(tags.stream_failed(&e, E::DIALECT)), true),
                    None => return None,
                };
                let chunk = frames.into_iter().fold(Vec::new(), |mut all, f| {
                    all.extend_from_slice(&f);
                    all
                });
                Some((
                    Ok::<_, Infallible>(Bytes::from(chunk)),
                    (stream, encoder, grace_over, done),
                ))
            }
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
