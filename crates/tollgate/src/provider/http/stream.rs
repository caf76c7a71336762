//! How a streamed answer's body is cut into events: SSE `data`, or one JSON value a line.

use std::collections::VecDeque;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use crate::error::{Error, Result};
use crate::sse::SseParser;

/// How a streamed answer's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Framing {
    /// Server-sent events; each event's `data` is one decoder input.
    Sse,
    /// Newline-delimited JSON (Ollama's native API); each non-empty line is one input.
    Ndjson,
}

impl Framing {
    /// The `accept` header asking for this framing.
    pub fn accept(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
        }
    }

    /// Cuts a body's chunks into decoder inputs; a chunk error passes through. Events
    /// are capped at [`crate::provider::http::MAX_BODY_BYTES`] ([`Framing::events_limited`]).
    pub fn events<S, B>(self, chunks: S) -> BoxStream<'static, Result<String>>
    where
        S: Stream<Item = Result<B>> + Send + 'static,
        B: AsRef<[u8]> + Send + 'static,
    {
        self.events_limited(chunks, super::MAX_BODY_BYTES)
    }

    /// [`Framing::events`], with no event (an SSE event's `data`, its unfinished line,
    /// an NDJSON line) allowed past `limit` bytes: the stream then ends with
    /// [`Error::ResponseTooLarge`] (its `model_id` empty: the endpoint fills it in), so
    /// what is held stays under `limit` plus one chunk.
    pub fn events_limited<S, B>(self, chunks: S, limit: usize) -> BoxStream<'static, Result<String>>
    where
        S: Stream<Item = Result<B>> + Send + 'static,
        B: AsRef<[u8]> + Send + 'static,
    {
        match self {
            Framing::Sse => sse_data(chunks, limit).boxed(),
            Framing::Ndjson => ndjson_lines(chunks, limit).boxed(),
        }
    }
}

fn too_large(limit: usize) -> Error {
    Error::ResponseTooLarge {
        model_id: String::new(),
        limit_bytes: u64::try_from(limit).unwrap_or(u64::MAX),
    }
}

fn sse_data<S, B>(chunks: S, limit: usize) -> impl Stream<Item = Result<String>> + Send + 'static
where
    S: Stream<Item = Result<B>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    struct Events<S> {
        chunks: std::pin::Pin<Box<S>>,
        parser: SseParser,
        ended: bool,
    }
    let state = Events {
        chunks: Box::pin(chunks),
        parser: SseParser::new(),
        ended: false,
    };
    futures::stream::unfold(state, move |mut s| async move {
        loop {
            if let Some(event) = s.parser.next_event() {
                if event.data.len() > limit {
                    s.ended = true;
                    s.parser = SseParser::new();
                    return Some((Err(too_large(limit)), s));
                }
                return Some((Ok(event.data), s));
            }
            if s.ended {
                return None;
            }
            match s.chunks.next().await {
                Some(Ok(chunk)) => {
                    s.parser.feed(chunk.as_ref());
                    if s.parser.pending_bytes() > limit {
                        s.ended = true;
                        s.parser = SseParser::new();
                        return Some((Err(too_large(limit)), s));
                    }
                }
                Some(Err(e)) => return Some((Err(e), s)),
                None => s.ended = true,
            }
        }
    })
}

fn ndjson_lines<S, B>(
    chunks: S,
    limit: usize,
) -> impl Stream<Item = Result<String>> + Send + 'static
where
    S: Stream<Item = Result<B>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    struct Lines<S> {
        chunks: std::pin::Pin<Box<S>>,
        partial: Vec<u8>,
        ready: VecDeque<String>,
        ended: bool,
    }
    let state = Lines {
        chunks: Box::pin(chunks),
        partial: Vec::new(),
        ready: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(state, move |mut s| async move {
        loop {
            if let Some(line) = s.ready.pop_front() {
                if line.len() > limit {
                    s.ended = true;
                    s.ready.clear();
                    return Some((Err(too_large(limit)), s));
                }
                return Some((Ok(line), s));
            }
            if s.ended {
                return None;
            }
            let mut push = |line: &[u8]| {
                let line = String::from_utf8_lossy(line);
                if !line.trim().is_empty() {
                    s.ready.push_back(line.trim().to_owned());
                }
            };
            match s.chunks.next().await {
                Some(Ok(chunk)) => {
                    s.partial.extend_from_slice(chunk.as_ref());
                    let mut rest = std::mem::take(&mut s.partial);
                    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
                        push(&rest[..end]);
                        rest.drain(..=end);
                    }
                    s.partial = rest;
                    if s.partial.len() > limit {
                        s.ended = true;
                        s.partial = Vec::new();
                        s.ready.clear();
                        return Some((Err(too_large(limit)), s));
                    }
                }
                Some(Err(e)) => return Some((Err(e), s)),
                None => {
                    let rest = std::mem::take(&mut s.partial);
                    push(&rest);
                    s.ended = true;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn cut(framing: Framing, chunks: &[&str]) -> Vec<String> {
        let chunks: Vec<Result<Vec<u8>>> =
            chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        framing
            .events(futures::stream::iter(chunks))
            .map(|e| e.unwrap())
            .collect()
            .await
    }

    #[tokio::test]
    async fn ndjson_lines_are_cut_across_chunks() {
        let lines = cut(Framing::Ndjson, &["{\"a\":1}\n{\"b\"", ":2}\n\n{\"c\":3}"]).await;
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    async fn cut_limited(framing: Framing, chunks: &[&str], limit: usize) -> Vec<Result<String>> {
        let chunks: Vec<Result<Vec<u8>>> =
            chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        framing
            .events_limited(futures::stream::iter(chunks), limit)
            .collect()
            .await
    }

    #[tokio::test]
    async fn an_sse_event_over_the_limit_fails_typed_and_ends_the_stream() {
        // Split over chunks (the unfinished line is held) and whole in one chunk.
        let long = format!("data: {}", "x".repeat(50));
        for chunks in [
            vec!["data: a\n\n", long.as_str(), "\n\ndata: b\n\n"],
            vec!["data: a\n\n", &format!("{long}\n\ndata: b\n\n")],
        ] {
            let out = cut_limited(Framing::Sse, &chunks, 20).await;
            assert_eq!(out.len(), 2, "{out:?}");
            assert_eq!(out[0].as_ref().unwrap(), "a");
            assert!(
                matches!(
                    out[1],
                    Err(Error::ResponseTooLarge {
                        limit_bytes: 20,
                        ..
                    })
                ),
                "{out:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_endless_sse_line_is_not_buffered_past_the_limit() {
        let chunks = vec!["data: ", "yyyyyyyyyy", "yyyyyyyyyy", "yyyyyyyyyy", "never"];
        let out = cut_limited(Framing::Sse, &chunks, 20).await;
        assert!(
            matches!(out[..], [Err(Error::ResponseTooLarge { .. })]),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn an_ndjson_line_over_the_limit_fails_typed() {
        let out = cut_limited(Framing::Ndjson, &["{\"a\":1}\n", &"z".repeat(30)], 20).await;
        assert_eq!(out[0].as_ref().unwrap(), "{\"a\":1}");
        assert!(
            matches!(out[1], Err(Error::ResponseTooLarge { .. })),
            "{out:?}"
        );
        assert_eq!(out.len(), 2);
    }

    #[tokio::test]
    async fn sse_events_yield_their_data() {
        let data = cut(
            Framing::Sse,
            &["event: x\ndata: {\"a\"", ":1}\n\ndata: [DONE]\n\n"],
        )
        .await;
        assert_eq!(data, ["{\"a\":1}", "[DONE]"]);
    }
}
