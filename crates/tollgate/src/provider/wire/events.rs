//! The stream pump: whatever carries a provider's stream events (SSE `data`, NDJSON
//! lines, an SDK's event stream), one loop turns them into [`StreamEvent`]s with the
//! codec's [`EventDecoder`].

use std::collections::VecDeque;

use futures::{Stream, StreamExt};

use crate::error::{ProviderError, Result};
use crate::stream::{ResponseStream, StreamEvent};

/// A codec's stream decoder: one wire event in, the [`StreamEvent`]s it completes out.
///
/// `In` is what one wire event is: a `String` for SSE `data` or an NDJSON line, an
/// SDK's event type otherwise.
pub trait EventDecoder<In = String>: Send + 'static {
    /// Decodes one event. An error (the provider's error event, a malformed event)
    /// ends the stream with that error.
    fn event(&mut self, event: In) -> Result<Vec<StreamEvent>>;

    /// Whether the answer is complete (its last event, [`StreamEvent::Completed`], has
    /// been returned); nothing more is read.
    fn is_finished(&self) -> bool;

    /// The events ran out before [`is_finished`](Self::is_finished). By default the
    /// answer was cut: [`ProviderError::Connection`] closed early, retried when nothing
    /// reached the reader yet.
    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        Err(ProviderError::closed_early("the stream ended before its last event").into())
    }
}

/// Pumps `events` through `decoder` until it is finished, an error, or the events run
/// out ([`EventDecoder::ended`]). An `Err` from `events` (the connection failed) ends
/// the stream with that error.
pub fn decode_events<In, S, D>(events: S, decoder: D) -> ResponseStream
where
    In: Send + 'static,
    S: Stream<Item = Result<In>> + Send + 'static,
    D: EventDecoder<In>,
{
    let state = Pump {
        events: Box::pin(events),
        decoder,
        ready: VecDeque::new(),
        done: false,
    };
    ResponseStream::new(futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.ready.pop_front() {
                return Some((Ok(event), s));
            }
            if s.done {
                return None;
            }
            let decoded = match s.events.next().await {
                Some(Ok(event)) => s.decoder.event(event),
                Some(Err(e)) => Err(e),
                None => s.decoder.ended(),
            };
            match decoded {
                Ok(events) => {
                    s.ready.extend(events);
                    s.done = s.decoder.is_finished();
                }
                Err(failure) => {
                    s.done = true;
                    return Some((Err(failure), s));
                }
            }
        }
    }))
}

struct Pump<S, D> {
    events: std::pin::Pin<Box<S>>,
    decoder: D,
    ready: VecDeque<StreamEvent>,
    done: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::response::StopReason;

    /// Emits a stop for `"stop"`, fails on `"fail"`, finishes on `"end"`.
    struct Toy {
        finished: bool,
    }

    impl EventDecoder for Toy {
        fn event(&mut self, event: String) -> Result<Vec<StreamEvent>> {
            match event.as_str() {
                "fail" => Err(ProviderError::server(500).into()),
                "end" => {
                    self.finished = true;
                    Ok(vec![StreamEvent::Stop(StopReason::EndTurn)])
                }
                _ => Ok(vec![StreamEvent::Stop(StopReason::MaxTokens)]),
            }
        }
        fn is_finished(&self) -> bool {
            self.finished
        }
    }

    async fn run(events: &[&str]) -> Vec<Result<StreamEvent>> {
        let events: Vec<Result<String>> = events.iter().map(|e| Ok(e.to_string())).collect();
        decode_events(futures::stream::iter(events), Toy { finished: false })
            .collect()
            .await
    }

    #[tokio::test]
    async fn nothing_is_read_after_the_decoder_finishes() {
        let out = run(&["a", "end", "fail"]).await;
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn a_decoder_error_ends_the_stream() {
        let out = run(&["a", "fail", "b"]).await;
        assert_eq!(out.len(), 2);
        assert!(matches!(
            out[1],
            Err(Error::Provider(ProviderError::Server { status: 500, .. }))
        ));
    }

    #[tokio::test]
    async fn a_cut_stream_is_a_connection_closed_early() {
        let out = run(&["a"]).await;
        assert!(matches!(
            out[1],
            Err(Error::Provider(ProviderError::Connection {
                cause: crate::ConnectionCause::ClosedEarly,
                ..
            }))
        ));
    }
}
