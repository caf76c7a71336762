//! How a streamed answer's body is cut into events: SSE `data`, or one JSON value a line.

use std::collections::VecDeque;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use crate::error::Result;
use crate::sse::SseStream;

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

    /// Cuts a body's chunks into decoder inputs; a chunk error passes through.
    pub fn events<S, B>(self, chunks: S) -> BoxStream<'static, Result<String>>
    where
        S: Stream<Item = Result<B>> + Send + 'static,
        B: AsRef<[u8]> + Send + 'static,
    {
        match self {
            Framing::Sse => SseStream::new(chunks)
                .map(|event| event.map(|e| e.data))
                .boxed(),
            Framing::Ndjson => ndjson_lines(chunks).boxed(),
        }
    }
}

fn ndjson_lines<S, B>(chunks: S) -> impl Stream<Item = Result<String>> + Send + 'static
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
    futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(line) = s.ready.pop_front() {
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
