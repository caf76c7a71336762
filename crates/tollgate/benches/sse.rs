//! SSE parsing throughput: `tollgate::sse` against the `eventsource-stream` crate
//! (BENCHMARKS.md §4), on corpora made here, in four chunkings.
//!
//! Run: `cargo bench -p tollgate --bench sse` (add `-- --quick` for fewer
//! repetitions). Prints one markdown table: MB/s and events/s for each parser, the
//! ours/baseline speed ratio, whether the events were identical, and the linearity of
//! each parser (time for the 8 MiB line over time for the 1 MiB line, at 1,460-byte
//! chunks; 8 is linear).
//!
//! The baseline re-reads a partial line from its start on every chunk, so it is
//! quadratic on long lines: runs it could not finish in reasonable time (estimated from
//! the bytes it would re-read) are marked "not run" instead of stalling the benchmark.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::Stream;
use tollgate::sse::{SseEvent, SseStream};

/// Bytes the baseline may be expected to re-read in one run before it is skipped.
const BASELINE_REREAD_BUDGET: f64 = 4e10;

/// Each measurement repeats until this much time has passed (at least once).
const MIN_MEASURE: Duration = Duration::from_millis(300);

const CHUNKINGS: &[(&str, usize)] = &[
    ("whole", usize::MAX),
    ("1,460 B", 1460),
    ("64 B", 64),
    ("1 B", 1),
];

struct Corpus {
    name: &'static str,
    bytes: Vec<u8>,
    /// The longest line, for estimating the baseline's re-reading.
    longest_line: usize,
}

fn openai_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..10_000 {
        out.extend_from_slice(
            format!(
                "data: {{\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764000000,\
                 \"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{i} \"}},\
                 \"finish_reason\":null}}]}}\n\n"
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

fn anthropic_stream() -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |event: &str, data: &str| {
        out.extend_from_slice(format!("event: {event}\ndata: {data}\n\n").as_bytes());
    };
    push(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    );
    push(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    );
    for i in 0..10_000 {
        if i % 50 == 0 {
            push("ping", r#"{"type": "ping"}"#);
        }
        push(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"word{i} "}}}}"#
            ),
        );
    }
    push(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    );
    push(
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10000}}"#,
    );
    push("message_stop", r#"{"type":"message_stop"}"#);
    out
}

fn long_line(size: usize) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend((0..size).map(|i| b'a' + (i % 26) as u8));
    out.extend_from_slice(b"\n\n");
    out
}

/// The edge cases without a byte-order mark: `eventsource-stream` 0.2.3 panics on a
/// leading BOM (it slices `&string[1..]`, inside the 3-byte character), so the BOM is
/// covered by `tollgate::sse`'s unit tests only.
fn edge_cases() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..2_000 {
        out.extend_from_slice(
            format!(
                "event: crlf\r\ndata: {i}\r\n\r\nevent: cr\rdata: {i}\r\rdata\n\nretry: 3000\ndata:\n\n\
                 : comment\nid: {i}\ndata: a\ndata: b\n\n"
            )
            .as_bytes(),
        );
    }
    out
}

fn corpus(name: &'static str, bytes: Vec<u8>) -> Corpus {
    let longest_line = bytes
        .split(|&b| b == b'\n' || b == b'\r')
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    Corpus {
        name,
        bytes,
        longest_line,
    }
}

/// Drains a stream whose items are always ready (an iterator of chunks).
fn drain<S: Stream>(stream: S) -> Vec<S::Item> {
    let mut stream = std::pin::pin!(stream);
    let mut cx = Context::from_waker(Waker::noop());
    let mut items = Vec::new();
    loop {
        match Pin::as_mut(&mut stream).poll_next(&mut cx) {
            Poll::Ready(Some(item)) => items.push(item),
            Poll::Ready(None) => return items,
            Poll::Pending => unreachable!("an iterator of chunks is always ready"),
        }
    }
}

fn chunks(bytes: &[u8], size: usize) -> Vec<Result<&[u8], std::convert::Infallible>> {
    bytes.chunks(size.min(bytes.len()).max(1)).map(Ok).collect()
}

fn ours(bytes: &[u8], size: usize) -> Vec<SseEvent> {
    drain(SseStream::new(futures::stream::iter(chunks(bytes, size))))
        .into_iter()
        .map(|e| e.unwrap_or_else(|never| match never {}))
        .collect()
}

fn baseline(bytes: &[u8], size: usize) -> Vec<SseEvent> {
    drain(futures::stream::iter(chunks(bytes, size)).eventsource())
        .into_iter()
        .map(|e| {
            let e = e.expect("the corpora are valid UTF-8 SSE");
            SseEvent {
                event: e.event,
                data: e.data,
                id: e.id,
                retry: e.retry,
            }
        })
        .collect()
}

/// Best time of repeated runs of `f`, and its output.
// Benchmarks measure wall time by definition; tokio's pausable clock would be wrong here.
#[allow(clippy::disallowed_methods)]
fn measure(quick: bool, f: impl Fn() -> Vec<SseEvent>) -> (Duration, Vec<SseEvent>) {
    let budget = if quick { MIN_MEASURE / 5 } else { MIN_MEASURE };
    let started = std::time::Instant::now();
    let mut best = Duration::MAX;
    let mut out;
    loop {
        let t = std::time::Instant::now();
        out = f();
        best = best.min(t.elapsed());
        if started.elapsed() >= budget {
            return (best, out);
        }
    }
}

fn mb_per_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

/// Prints a line of the report and keeps it for the markdown section.
macro_rules! emit {
    ($out:ident, $($arg:tt)*) => {{
        let line = format!($($arg)*);
        println!("{line}");
        $out.push_str(&line);
        $out.push('\n');
    }};
}

/// The section `cargo xtask bench` puts in `docs/benchmarks.md`, written to the file
/// named by `TOLLGATE_BENCH_OUT` when it is set.
fn write_section(tables: &str) {
    let Ok(path) = std::env::var("TOLLGATE_BENCH_OUT") else {
        return;
    };
    let section = format!(
        "## SSE parsing\n\n\
         `tollgate::sse` (the core crate's server-sent-events parser, used by the provider crates) \
         against the `eventsource-stream` crate 0.2.3 (BENCHMARKS.md §4), measured in the same run by \
         `cargo bench -p tollgate --bench sse`. Corpora are made by the benchmark; each cell is \
         the best of repeated runs within 0.3 s. Ratio is the baseline's time over ours (above 1: ours is \
         faster). \"same events\" compares every event (name, data, id, retry) of the two parsers. Baseline \
         cells marked \"not run\" would re-read the partial line on every chunk for ~10^11 bytes or more: \
         that quadratic cost is what this parser avoids.\n\n{tables}\n\
         Divergences from the baseline (not in the corpora above): `eventsource-stream` panics on a leading \
         byte-order mark, so the BOM case is covered by `tollgate::sse`'s unit tests only; bytes that are not \
         UTF-8 are replaced with U+FFFD here and fail that crate's stream; `retry:` takes only ASCII digits \
         here (that crate also takes a leading `+`). Linearity: 8 means linear; the baseline is quadratic on \
         long lines.\n"
    );
    if let Err(e) = std::fs::write(&path, section) {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
}

fn main() {
    let mut out = String::new();
    let quick = std::env::args().any(|a| a == "--quick");
    let corpora = [
        corpus("OpenAI chunks (10k events, [DONE])", openai_stream()),
        corpus("Anthropic stream with pings", anthropic_stream()),
        corpus("one 1 MiB data line", long_line(1 << 20)),
        corpus("one 8 MiB data line", long_line(8 << 20)),
        corpus(
            "edge cases (CRLF, CR, no colon, retry, empty data, id)",
            edge_cases(),
        ),
    ];
    emit!(
        out,
        "| corpus | chunking | ours MB/s | ours events/s | eventsource-stream MB/s | eventsource-stream events/s | ours / baseline | same events |"
    );
    emit!(out, "|---|---|---:|---:|---:|---:|---:|---|");
    let mut linearity: [(Option<Duration>, Option<Duration>); 2] = [(None, None); 2];
    for c in &corpora {
        for &(label, size) in CHUNKINGS {
            let (t_ours, ev_ours) = measure(quick, || ours(&c.bytes, size));
            let chunk = size.min(c.bytes.len());
            // The baseline re-reads the partial line on every chunk of a long line.
            let rereads =
                (c.bytes.len() / chunk) as f64 * (c.longest_line.min(c.bytes.len()) as f64 / 2.0);
            let base = (rereads <= BASELINE_REREAD_BUDGET)
                .then(|| measure(quick, || baseline(&c.bytes, size)));
            if size == 1460 {
                let slot = match c.name {
                    "one 1 MiB data line" => Some(0),
                    "one 8 MiB data line" => Some(1),
                    _ => None,
                };
                if let Some(i) = slot {
                    let pick = |t: Duration| Some(t);
                    if i == 0 {
                        linearity[0].0 = pick(t_ours);
                        linearity[1].0 = base.as_ref().map(|b| b.0);
                    } else {
                        linearity[0].1 = pick(t_ours);
                        linearity[1].1 = base.as_ref().map(|b| b.0);
                    }
                }
            }
            let events_per_s = |n: usize, t: Duration| n as f64 / t.as_secs_f64();
            match base {
                Some((t_base, ev_base)) => emit!(
                    out,
                    "| {} | {label} | {:.1} | {:.0} | {:.1} | {:.0} | {:.2}× | {} |",
                    c.name,
                    mb_per_s(c.bytes.len(), t_ours),
                    events_per_s(ev_ours.len(), t_ours),
                    mb_per_s(c.bytes.len(), t_base),
                    events_per_s(ev_base.len(), t_base),
                    t_base.as_secs_f64() / t_ours.as_secs_f64(),
                    if ev_ours == ev_base { "yes" } else { "NO" },
                ),
                None => emit!(
                    out,
                    "| {} | {label} | {:.1} | {:.0} | not run (quadratic: ~{:.0e} bytes re-read) | | | |",
                    c.name,
                    mb_per_s(c.bytes.len(), t_ours),
                    events_per_s(ev_ours.len(), t_ours),
                    rereads,
                ),
            }
        }
    }
    emit!(out, "");
    emit!(
        out,
        "| parser | time(8 MiB line) / time(1 MiB line), 1,460 B chunks (8 = linear) |"
    );
    emit!(out, "|---|---:|");
    for (name, (one, eight)) in ["tollgate::sse", "eventsource-stream"]
        .iter()
        .zip(linearity)
    {
        match (one, eight) {
            (Some(one), Some(eight)) => emit!(
                out,
                "| {name} | {:.1} |",
                eight.as_secs_f64() / one.as_secs_f64()
            ),
            _ => emit!(out, "| {name} | not run |"),
        }
    }
    write_section(&out);
}
