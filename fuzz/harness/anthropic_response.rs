//! The Anthropic codec's body decoders: a Messages answer, an HTTP error body, a
//! mid-stream `error` event. Any bytes: an `Err`, never a panic.

use std::time::Duration;
use tollgate_anthropic::codec;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let _ = codec::decode_response(data);
    let status = data.first().map_or(429, |&b| 400 + u16::from(b) % 200);
    let retry = data.get(1).map(|&b| Duration::from_secs(u64::from(b)));
    let mut wire = codec::read_error(status, data);
    wire.retry_after = retry;
    let _ = wire.verdict();
    let text = String::from_utf8_lossy(data);
    let _ = codec::read_stream_error(&text).verdict();
    let _ = codec::stop_reason(&text);
}
