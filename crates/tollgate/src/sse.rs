//! Server-sent events (the WHATWG `text/event-stream` format), parsed in time linear in
//! the input however the bytes are chunked.
//!
//! Providers that stream over HTTP (Anthropic, OpenAI, OpenAI-compatible servers) send
//! their events in this format; this one parser serves them all. [`SseParser`] is the
//! sans-I/O core (feed it bytes, take events out); [`SseStream`] wraps a stream of byte
//! chunks, such as `reqwest::Response::bytes_stream()`.
//!
//! Why a parser of our own: a parser that re-reads the partial line from its start on
//! every chunk is quadratic on long lines (a 1 MiB `data:` line in 1,460-byte TCP
//! segments is read ~700 times). This one remembers how far it has scanned, copies each
//! byte into its buffer once and out of it once, and so stays linear whatever the
//! chunking (`docs/benchmarks.md`, "SSE parsing", measures it against the
//! `eventsource-stream` crate).
//!
//! It follows the specification's parsing rules
//! (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>):
//!
//! - lines end with CRLF, LF or a lone CR, also when the CR and LF arrive in different
//!   chunks;
//! - one leading byte-order mark is dropped, even when split across chunks;
//! - a line starting with `:` is a comment; a line without a colon is a field with an
//!   empty value; one space after the colon is dropped;
//! - `data` lines are joined with LF; an event is dispatched at a blank line, and only
//!   when it has data (a lone `data:` gives an event with empty data);
//! - `event` names the event (`message` when not set); `id` (without NUL) sets the last
//!   event id, which later events keep; `retry` with only ASCII digits sets the
//!   reconnection time, which is carried by the next dispatched event;
//! - an event not closed by a blank line when the input ends is discarded.
//!
//! Where this parser differs from `eventsource-stream`: bytes that are not UTF-8 are
//! replaced with U+FFFD (the specification's decoding) instead of failing the stream,
//! and `retry` accepts only ASCII digits (that crate also takes a leading `+`).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;

/// The UTF-8 byte-order mark, dropped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The event name (`event:`), `message` when the stream gave none.
    pub event: String,
    /// The `data:` lines, joined with LF.
    pub data: String,
    /// The last event id seen (`id:`), empty when none was sent.
    pub id: String,
    /// The reconnection time (`retry:`) sent since the previous event, if any.
    pub retry: Option<Duration>,
}

/// An incremental SSE parser: [`SseParser::feed`] bytes in any chunking, take events out
/// with [`SseParser::next_event`].
///
/// Each byte is scanned once: a partial line waits in the buffer and only the newly
/// arrived bytes are searched for its end.
#[derive(Default)]
pub struct SseParser {
    /// Bytes of the line not yet complete (and, during [`SseParser::feed`], the chunk).
    buffer: Vec<u8>,
    /// How far `buffer` has been searched for a line end.
    scanned: usize,
    /// Whether the leading byte-order mark has been dealt with.
    bom_checked: bool,
    /// The previous chunk ended with a CR: an LF opening the next one belongs to it.
    skip_lf: bool,
    state: EventState,
    ready: VecDeque<SseEvent>,
}

/// The event being built from field lines.
#[derive(Default)]
struct EventState {
    event: String,
    data: String,
    last_id: String,
    retry: Option<Duration>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the next chunk of the stream; complete events become available from
    /// [`SseParser::next_event`].
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if self.bom_checked && self.buffer.is_empty() {
            // No partial line waiting: read the lines straight from the chunk and keep
            // only its unfinished tail.
            let line_start = self.lines(chunk, 0);
            self.buffer.extend_from_slice(&chunk[line_start..]);
            self.scanned = self.buffer.len();
            return;
        }
        self.buffer.extend_from_slice(chunk);
        if !self.bom_checked {
            if self.buffer.len() < BOM.len() && BOM.starts_with(&self.buffer) {
                return; // maybe a BOM split across chunks: wait for more
            }
            self.bom_checked = true;
            if self.buffer.starts_with(BOM) {
                self.buffer.drain(..BOM.len());
            }
            self.scanned = 0;
        }
        let buffer = std::mem::take(&mut self.buffer);
        let line_start = self.lines(&buffer, self.scanned);
        self.buffer = buffer;
        // Only the unfinished line is kept; it began in this chunk whenever a line ended
        // here, so the copy is at most the chunk's size.
        self.buffer.drain(..line_start);
        self.scanned = self.buffer.len();
    }

    /// Interprets every complete line of `bytes`, whose first `scanned` bytes hold no
    /// line end; returns where the unfinished last line starts.
    fn lines(&mut self, bytes: &[u8], scanned: usize) -> usize {
        let mut line_start = 0;
        let mut i = scanned;
        if self.skip_lf {
            self.skip_lf = false;
            if bytes.first() == Some(&b'\n') {
                line_start = 1;
                i = i.max(1);
            }
        }
        while let Some(offset) = bytes[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = i + offset;
            self.state.line(&bytes[line_start..end], &mut self.ready);
            i = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(i) {
                    Some(b'\n') => i += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            line_start = i;
        }
        line_start
    }

    /// The next complete event, if one is ready.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    /// Whether bytes of an unfinished line are waiting for their line end.
    pub fn has_partial_line(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// How many bytes of the event being built are held: its unfinished line and the
    /// `data` collected so far. A reader that caps event size checks this after each
    /// [`SseParser::feed`], so that one endless event cannot fill memory.
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len() + self.state.data.len()
    }
}

impl fmt::Debug for SseParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseParser")
            .field("buffered_bytes", &self.buffer.len())
            .field("ready_events", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl EventState {
    /// Interprets one line (without its line end).
    fn line(&mut self, line: &[u8], ready: &mut VecDeque<SseEvent>) {
        if line.is_empty() {
            self.dispatch(ready);
            return;
        }
        if line[0] == b':' {
            return; // a comment
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            b"data" => {
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
            }
            b"id" if !value.contains(&0) => {
                self.last_id = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(ms) = std::str::from_utf8(value).unwrap_or("").parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {} // unknown fields are ignored
        }
    }

    fn dispatch(&mut self, ready: &mut VecDeque<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        let retry = self.retry.take();
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the LF after the last data line
        ready.push_back(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id: self.last_id.clone(),
            retry,
        });
    }
}

/// A stream of [`SseEvent`]s parsed from a stream of byte chunks; an error of the byte
/// stream is passed through (and does not end the stream by itself).
pub struct SseStream<S> {
    inner: Pin<Box<S>>,
    parser: SseParser,
    ended: bool,
}

impl<S> SseStream<S> {
    /// Parses the chunks of `inner`.
    pub fn new(inner: S) -> Self {
        SseStream {
            inner: Box::pin(inner),
            parser: SseParser::new(),
            ended: false,
        }
    }
}

impl<S, B, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    type Item = Result<SseEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.parser.next_event() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => this.parser.feed(chunk.as_ref()),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S> fmt::Debug for SseStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseStream")
            .field("parser", &self.parser)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn parse_in(input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            parser.feed(piece);
            events.extend(std::iter::from_fn(|| parser.next_event()));
        }
        events
    }

    /// Parses `input` whole, in 1-byte, 2-byte, 3-byte and 7-byte chunks, checks that
    /// every chunking gives the same events, and returns them.
    fn parse(input: &[u8]) -> Vec<SseEvent> {
        let whole = parse_in(input, input.len());
        for chunk in [1, 2, 3, 7] {
            assert_eq!(parse_in(input, chunk), whole, "chunks of {chunk} bytes");
        }
        whole
    }

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.into(),
            data: data.into(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn named_events_are_dispatched_at_blank_lines() {
        let events = parse(b"event: ping\ndata: {}\n\nevent: message_stop\ndata: {\"a\":1}\n\n");
        assert_eq!(
            events,
            vec![event("ping", "{}"), event("message_stop", "{\"a\":1}")]
        );
    }

    #[test]
    fn crlf_lf_and_lone_cr_all_end_lines() {
        let crlf = parse(b"event: a\r\ndata: 1\r\n\r\n");
        let lone_cr = parse(b"event: a\rdata: 1\r\r");
        let mixed = parse(b"event: a\r\ndata: 1\n\r");
        assert_eq!(crlf, vec![event("a", "1")]);
        assert_eq!(lone_cr, crlf);
        assert_eq!(mixed, vec![event("a", "1")]);
    }

    #[test]
    fn a_cr_at_a_chunk_end_and_its_lf_in_the_next_chunk_are_one_line_end() {
        let mut parser = SseParser::new();
        parser.feed(b"data: x\r");
        parser.feed(b"\n\r");
        parser.feed(b"\ndata: y\n\n");
        let events: Vec<_> = std::iter::from_fn(|| parser.next_event()).collect();
        assert_eq!(events, vec![event("message", "x"), event("message", "y")]);
    }

    #[test]
    fn a_leading_bom_is_dropped_once_even_when_split() {
        let input = b"\xEF\xBB\xBFdata: a\n\n";
        assert_eq!(parse(input), vec![event("message", "a")]);
        // A second BOM is not at the start of the stream: it is part of the field name.
        let twice = b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n";
        assert_eq!(parse(twice), vec![event("message", "b")]);
    }

    #[test]
    fn a_partial_bom_prefix_that_is_not_a_bom_is_kept() {
        let mut parser = SseParser::new();
        parser.feed(b"\xEF");
        parser.feed(b"data: a\n\n");
        // `\xEF` + `data` is an unknown field name: nothing is dispatched...
        assert_eq!(parser.next_event(), None);
        parser.feed(b"data: b\n\n");
        assert_eq!(parser.next_event(), Some(event("message", "b")));
    }

    #[test]
    fn a_field_without_colon_has_an_empty_value() {
        assert_eq!(parse(b"data\n\n"), vec![event("message", "")]);
        assert_eq!(parse(b"data\ndata\n\n"), vec![event("message", "\n")]);
        // `event` without a value leaves the default name.
        assert_eq!(parse(b"event\ndata: x\n\n"), vec![event("message", "x")]);
    }

    #[test]
    fn an_empty_data_field_dispatches_an_event_with_empty_data() {
        assert_eq!(parse(b"data:\n\n"), vec![event("message", "")]);
        assert_eq!(parse(b"data: \n\n"), vec![event("message", "")]);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_its_name_is_reset() {
        assert_eq!(
            parse(b"event: lost\n\ndata: x\n\n"),
            vec![event("message", "x")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_lf_and_only_one_space_is_stripped() {
        assert_eq!(
            parse(b"data: one\ndata:two\ndata:  three\n\n"),
            vec![event("message", "one\ntwo\n three")]
        );
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        assert_eq!(
            parse(b": keep-alive\nfoo: bar\ndata: x\n:another\n\n"),
            vec![event("message", "x")]
        );
    }

    #[test]
    fn retry_with_digits_sets_the_reconnection_time_on_the_next_event() {
        let events = parse(b"retry: 2500\ndata: a\n\nretry: 1x\ndata: b\n\nretry: +5\ndata: c\n\n");
        assert_eq!(events[0].retry, Some(Duration::from_millis(2500)));
        assert_eq!(events[1].retry, None);
        assert_eq!(events[2].retry, None);
    }

    #[test]
    fn the_last_event_id_is_kept_by_later_events_and_nul_ids_are_ignored() {
        let events = parse(b"id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\n");
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, vec!["7", "7", "7"]);
    }

    #[test]
    fn an_event_not_closed_by_a_blank_line_is_discarded() {
        let mut parser = SseParser::new();
        parser.feed(b"data: a\n\ndata: unfinished\n");
        assert_eq!(parser.next_event(), Some(event("message", "a")));
        assert_eq!(parser.next_event(), None);
        parser.feed(b"data: partial");
        assert!(parser.has_partial_line());
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            parse(b"data: a\xFFb\n\n"),
            vec![event("message", "a\u{FFFD}b")]
        );
    }

    #[test]
    fn multibyte_characters_split_across_chunks_survive() {
        let text = "data: héllo wörld ✓ 🦀\n\n";
        assert_eq!(
            parse(text.as_bytes()),
            vec![event("message", "héllo wörld ✓ 🦀")]
        );
    }

    #[test]
    fn one_byte_chunks_of_a_long_line_keep_the_buffer_to_the_partial_line() {
        let mut parser = SseParser::new();
        let mut input = b"data: ".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend_from_slice(b"\n\n");
        for b in &input {
            parser.feed(std::slice::from_ref(b));
        }
        let event = parser.next_event().unwrap();
        assert_eq!(event.data.len(), 100_000);
        assert!(!parser.has_partial_line());
    }

    #[tokio::test]
    async fn the_stream_adapter_yields_events_and_passes_errors_through() {
        let chunks: Vec<Result<&[u8], &str>> = vec![
            Ok(b"data: a\n"),
            Ok(b"\nda"),
            Err("reset"),
            Ok(b"ta: b\n\n"),
        ];
        let items: Vec<_> = SseStream::new(futures::stream::iter(chunks))
            .collect()
            .await;
        assert_eq!(
            items,
            vec![
                Ok(event("message", "a")),
                Err("reset"),
                Ok(event("message", "b"))
            ]
        );
    }
}
