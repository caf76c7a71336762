//! Shared by the fuzz harnesses, which name it `crate::common`: the crate that includes a
//! harness declares it (`#[path = "…/harness/common.rs"] mod common;`), once.
#![allow(dead_code)]

use tollgate::sse::{SseEvent, SseParser};

/// Splits `data` into chunks whose sizes cycle through `sizes` (each at least 1), the way
/// a network hands a body over in arbitrary segments.
pub(crate) fn chunks<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .map_or(rest.len(), |&s| usize::from(s).max(1));
        let (head, tail) = rest.split_at(size.min(rest.len()));
        out.push(head);
        rest = tail;
        i += 1;
    }
    out
}

/// The first `n` bytes of `data` as chunk sizes, the rest as the body.
pub(crate) fn split_sizes(data: &[u8], n: usize) -> (&[u8], &[u8]) {
    data.split_at(n.min(data.len()))
}

/// Parses `body`, fed in the given chunks, into its SSE events.
pub(crate) fn sse_events(body: &[u8], sizes: &[u8]) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for chunk in chunks(body, sizes) {
        parser.feed(chunk);
        while let Some(event) = parser.next_event() {
            events.push(event);
        }
    }
    events
}
