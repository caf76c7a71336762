//! The OpenAI codec's body decoders: chat answer, embeddings, decision (logprobs), HTTP
//! error body, mid-stream error, and the Go durations of its rate-limit headers.

use std::time::Duration;
use tollgate_openai::codec;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let _ = codec::decode_response(data);
    let expected = data.first().map_or(1, |&b| usize::from(b % 8));
    let _ = codec::decode_embeddings(data, expected);
    let labels = ["yes".to_owned(), "no".to_owned(), "Maybe".to_owned()];
    let _ = codec::decode_decision(data, &labels[..1 + expected % 3]);
    let status = data.first().map_or(429, |&b| 400 + u16::from(b) % 200);
    let retry = data
        .get(1)
        .map(|&b| Duration::from_millis(u64::from(b) * 10));
    let mut wire = codec::read_error(status, data);
    wire.retry_after = retry;
    let _ = wire.verdict();
    let text = String::from_utf8_lossy(data);
    let _ = codec::read_stream_error(&text).verdict();
    let _ = codec::parse_go_duration(&text);
    let _ = codec::stop_reason(&text);
}
